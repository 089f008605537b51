import { readFileSync } from "node:fs";
import { getDocumentProxy } from "unpdf";
const f = process.argv[2]!;
const pdf = await getDocumentProxy(new Uint8Array(readFileSync("/work/shared/data/ir/financebench_dev/pdfs/" + f)));
const outline = await pdf.getOutline();
async function walk(items: any[], depth: number) {
  for (const it of items) {
    let dest = it.dest;
    if (typeof dest === "string") dest = await pdf.getDestination(dest);
    let page = -1;
    if (Array.isArray(dest) && dest[0] != null) page = typeof dest[0] === "number" ? dest[0] + 1 : (await pdf.getPageIndex(dest[0])) + 1;
    console.log("  ".repeat(depth) + JSON.stringify(it.title), page, JSON.stringify(dest?.slice?.(1)));
    if (it.items?.length) await walk(it.items, depth + 1);
  }
}
await walk(outline ?? [], 0);
