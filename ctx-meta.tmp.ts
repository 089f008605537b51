import { readdirSync } from "node:fs";
import { extractFile } from "./src/extract/index.js";
const dir = "/work/shared/data/ir/financebench_dev/pdfs/";
for (const f of readdirSync(dir)) {
  if (process.argv[2] && !f.includes(process.argv[2])) continue;
  const [d] = await extractFile(dir + f);
  const m = d.metadata;
  console.log(f, "|", m.organization, "|", m.documentKind, "|", m.period, "|", m.title);
  if (process.argv[3]) for (const s of d.segments!) console.log("  p", s.metadata.page, s.metadata.heading, JSON.stringify(s.metadata.sections));
}
