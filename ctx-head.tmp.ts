import { readdirSync, readFileSync } from "node:fs";
import { extractFile } from "./src/extract/index.js";
const dir = "/work/shared/data/ir/financebench_dev/";
const ev = new Map<string, Set<number>>();
for (const l of readFileSync(dir + "qrels/test.tsv", "utf8").split("\n").slice(1)) {
  const m = /\t(.+)#page=(\d+)/.exec(l); if (!m) continue;
  (ev.get(m[1]!) ?? ev.set(m[1]!, new Set()).get(m[1]!))!.add(Number(m[2]));
}
const numeric = (l: string) => (l.match(/(?:^|\s)\(?[$€£]?\s?-?[\d][\d,.]*%?\)?(?=\s|$)|(?:^|\s)[—–-](?=\s|$)/g) ?? []).length;
function headingBlock(lines: string[], skip: Set<string>): string[] {
  const out: string[] = [];
  let i = 0;
  while (i < lines.length && (skip.has(norm(lines[i]!)) || !/\p{L}/u.test(lines[i]!))) i++;
  for (; i < lines.length && out.length < 4; i++) {
    const l = lines[i]!;
    if (l.length > 90 || !/^[\p{Lu}\d(]/u.test(l) || /[.;,]$/.test(l) && !/\b(inc|co|corp|ltd)\.$/i.test(l) || numeric(l) >= 2) break;
    out.push(l);
  }
  return out;
}
const norm = (l: string) => l.toLowerCase().replace(/\d+/g, "#");
for (const f of readdirSync(dir + "pdfs")) {
  if (process.argv[2] && !f.includes(process.argv[2])) continue;
  const [d] = await extractFile(dir + "pdfs/" + f);
  const pages = d.segments!.map((s) => d.text.slice(s.start, s.end).split("\n").map((l) => l.trim()).filter(Boolean));
  const count = new Map<string, number>();
  for (const lines of pages) for (const c of new Set([...lines.slice(0, 3), ...lines.slice(-3)].map(norm))) count.set(c, (count.get(c) ?? 0) + 1);
  const skip = new Set([...count].filter(([, n]) => n >= Math.max(3, 0.2 * pages.length)).map(([k]) => k));
  const want = ev.get(f) ?? new Set();
  pages.forEach((lines, i) => {
    const p = d.segments![i]!.metadata.page as number;
    if (!want.has(p) && !process.argv[3]) return;
    console.log(f, p, want.has(p) ? "*" : " ", JSON.stringify(headingBlock(lines, skip)));
  });
}
