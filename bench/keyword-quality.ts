/**
 * Keyword-only quality and latency on BEIR sets (default SciFact and Cranfield): ingests
 * each corpus without embeddings (keyword search needs none) into a fresh temporary data
 * directory and prints nDCG@10, Recall@100, MRR@10 and search p50/p95, result cache off.
 * The fastest check of the keyword path against its reference figures (SciFact 0.699,
 * Cranfield 0.378 nDCG@10); about a minute for both sets on 2 cores.
 *
 * Usage: node --import tsx bench/keyword-quality.ts [scifact,cranfield]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { evaluateBeir } from "../src/eval/beir.js";
import { KnowledgeLayer } from "../src/knowledge-layer.js";

const IR = resolve(import.meta.dirname, "..", "..", "shared", "data", "ir");
console.log("| set | nDCG@10 | Recall@100 | MRR@10 | p50 ms | p95 ms | ingest + queries s |");
console.log("|---|---|---|---|---|---|---|");
for (const set of (process.argv[2] ?? "scifact,cranfield").split(",")) {
  const dir = mkdtempSync(join(tmpdir(), "kl-keyword-quality-"));
  const kl = KnowledgeLayer.open({ dataDir: dir, cache: { type: "none" } });
  const started = Date.now();
  try {
    const report = await evaluateBeir(kl, join(IR, set), { modes: ["keyword"] });
    for (const r of report.results) {
      console.log(
        `| ${set} | ${r.ndcg10.toFixed(4)} | ${r.recall100.toFixed(4)} | ${r.mrr10.toFixed(4)} | ` +
          `${r.latency.p50.toFixed(1)} | ${r.latency.p95.toFixed(1)} | ${((Date.now() - started) / 1000).toFixed(0)} |`,
      );
    }
  } finally {
    kl.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
