import { readFileSync, readdirSync } from "node:fs";
import { getDocumentProxy } from "unpdf";
const dir = "/work/shared/data/ir/financebench_dev/pdfs/";
for (const f of readdirSync(dir)) {
  const pdf = await getDocumentProxy(new Uint8Array(readFileSync(dir + f)));
  const outline = await pdf.getOutline();
  const count = (items: any[] | null | undefined): number => (items ?? []).reduce((n, i) => n + 1 + count(i.items), 0);
  console.log(f, count(outline), JSON.stringify((outline ?? []).slice(0, 6).map((o: any) => o.title)));
}
