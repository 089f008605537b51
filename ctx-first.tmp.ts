import { readdirSync } from "node:fs";
import { extractFile } from "./src/extract/index.js";
const dir = "/work/shared/data/ir/financebench_dev/pdfs/";
for (const f of readdirSync(dir)) {
  if (process.argv[2] && !f.includes(process.argv[2])) continue;
  const [d] = await extractFile(dir + f);
  const s = d.segments![0]!;
  console.log(`===== ${f}`);
  console.log(d.text.slice(s.start, s.end).split("\n").slice(0, Number(process.argv[3] ?? 22)).map((l) => l.slice(0, 120)).join("\n"));
}
