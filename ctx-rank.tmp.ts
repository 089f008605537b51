import { KnowledgeLayer } from "./src/knowledge-layer.js";
const [kb, qid, mode = "keyword"] = process.argv.slice(2);
import { readFileSync } from "node:fs";
const dir = "/work/shared/data/ir/financebench_dev/";
const q = readFileSync(dir + "queries.jsonl", "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l)).find((o) => o._id.endsWith(qid!));
const ev = readFileSync(dir + "qrels/test.tsv", "utf8").split("\n").filter((l) => l.startsWith(q._id)).map((l) => l.split("\t")[1]!);
const kl = KnowledgeLayer.open({ dataDir: "/tmp/ctx-dev", cache: { type: "none" } });
const r = await kl.search(q.text, { kbs: [kb!], mode: mode as any, topK: 300, keywordTopK: 300, vectorTopK: 300, explain: true });
console.log(q.text, ev);
for (const x of r.results) {
  const f = String(x.source.path).split("/").pop();
  const hit = ev.some((e) => { const [file, p] = e.split("#page="); return file === f && Number(p) >= (x.source.page ?? 0) && Number(p) <= (x.source.pageEnd ?? x.source.page ?? 0); });
  if (x.rank <= 3 || hit) console.log(x.rank, hit ? "HIT" : "", f, x.source.page, x.score.toFixed(2), JSON.stringify(x.text.slice(0, 300)));
}
await kl.close();
