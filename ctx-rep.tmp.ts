import { readdirSync } from "node:fs";
import { extractFile } from "./src/extract/index.js";
const dir = "/work/shared/data/ir/financebench_dev/pdfs/";
for (const f of readdirSync(dir)) {
  const [d] = await extractFile(dir + f);
  const pages = d.segments!.map((s) => d.text.slice(s.start, s.end).split("\n").map((l) => l.trim()).filter(Boolean));
  const count = new Map<string, number>();
  for (const lines of pages) {
    const cand = new Set([...lines.slice(0, 3), ...lines.slice(-3)].map((l) => l.toLowerCase().replace(/\d+/g, "#")));
    for (const c of cand) count.set(c, (count.get(c) ?? 0) + 1);
  }
  const rep = [...count].filter(([, n]) => n >= Math.max(3, 0.2 * pages.length)).sort((a, b) => b[1] - a[1]);
  console.log(f, pages.length, JSON.stringify(rep.slice(0, 8)));
}
