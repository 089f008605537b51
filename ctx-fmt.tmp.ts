import { readFileSync } from "node:fs";
import { formatPageReport } from "./src/eval/pages.js";
const r = JSON.parse(readFileSync(process.argv[2]!, "utf8"));
const i = r.ingest; console.log(`ingest ${i.chunks} chunks, embedded ${i.embedded.computed}, cached ${i.embedded.cached}, ${(i.durationMs/1000).toFixed(0)} s`);
console.log(formatPageReport(r));
