import { readFileSync } from "node:fs";
import { getDocumentProxy } from "unpdf";
const [file, ...pages] = process.argv.slice(2);
const pdf = await getDocumentProxy(new Uint8Array(readFileSync("/work/shared/data/ir/financebench_dev/pdfs/" + file)));
const outline = await pdf.getOutline();
console.log("outline:", outline ? outline.length : null, JSON.stringify(outline?.slice(0, 5).map((o) => [o.title, o.dest, o.items?.length])));
for (const p of pages) {
  const page = await pdf.getPage(Number(p));
  const tc = await page.getTextContent();
  console.log("=== page", p, JSON.stringify(tc.styles).slice(0, 300));
  let n = 0;
  for (const it of tc.items as any[]) {
    if (!it.str?.trim()) continue;
    if (n++ > 25) break;
    console.log(it.fontName, Math.hypot(it.transform[2], it.transform[3]).toFixed(1), Math.round(it.transform[4]), Math.round(it.transform[5]), JSON.stringify(it.str.slice(0, 60)));
  }
}
