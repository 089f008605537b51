/**
 * Retrieval benchmark: every strategy on SciFact and Cranfield (nDCG@10,
 * Recall@100, MRR@10) and keyword/hybrid on CMRC 2018 (Chinese), through the real
 * ingest and search path, with p50/p95 search latency on the first pass and when
 * the same queries are served from the result cache. One table from one run.
 *
 * Usage: npm run bench:retrieval [-- --data-dir DIR] [--limit N] [--sets scifact,cranfield,cmrc2018_zh]
 *
 * The data directory (default `$TMPDIR/kl-bench-retrieval`) keeps the embedding
 * cache between runs: the first run embeds every corpus (SciFact alone takes
 * about 8 minutes on 2 cores), later runs take a few minutes.
 */
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import type { RetrievalMode } from "../src/config.js";
import { evaluateBeir } from "../src/eval/beir.js";
import { KnowledgeLayer } from "../src/knowledge-layer.js";

const { values } = parseArgs({
  options: {
    "data-dir": { type: "string", default: join(tmpdir(), "kl-bench-retrieval") },
    limit: { type: "string" },
    sets: { type: "string", default: "scifact,cranfield,cmrc2018_zh" },
  },
});
const ALL: RetrievalMode[] = ["keyword", "vector_only", "hybrid", "hybrid_rerank", "advanced"];
const MODES: Record<string, RetrievalMode[]> = {
  scifact: ALL,
  cranfield: ALL,
  cmrc2018_zh: ["keyword", "hybrid"],
};
const IR = resolve(import.meta.dirname, "..", "..", "shared", "data", "ir");
const kl = KnowledgeLayer.open({ dataDir: values["data-dir"] as string });
const rows: string[] = [];
try {
  for (const set of String(values.sets).split(",")) {
    const modes = MODES[set] ?? ALL;
    process.stderr.write(`${set}: ${modes.join(", ")}…\n`);
    const report = await evaluateBeir(kl, join(IR, set), {
      modes,
      limit: values.limit ? Number(values.limit) : undefined,
    });
    for (const r of report.results) {
      rows.push(
        `| ${set} | ${r.mode} | ${r.ndcg10.toFixed(4)} | ${r.recall100.toFixed(4)} | ${r.mrr10.toFixed(4)} | ` +
          `${r.latency.p50.toFixed(1)} | ${r.latency.p95.toFixed(1)} | ${r.latency.warmP50.toFixed(2)} | ${r.latency.warmP95.toFixed(2)} |`,
      );
    }
  }
} finally {
  kl.close();
}
console.log(
  "| set | strategy | nDCG@10 | Recall@100 | MRR@10 | p50 ms | p95 ms | cached p50 ms | cached p95 ms |",
);
console.log("|---|---|---|---|---|---|---|---|---|");
for (const row of rows) console.log(row);
