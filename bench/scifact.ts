/**
 * SciFact benchmark (BEIR layout, ../shared/data/ir/scifact): prints nDCG@10,
 * Recall@100 and MRR@10 for keyword, vector and hybrid retrieval, the keyword
 * score with the `standard` analyzer (the published BEIR BM25 setting), and the
 * ingest time of the corpus with a cold and a warm embedding cache.
 *
 * Usage: npm run bench:scifact [-- --data-dir DIR] [--limit N] [--chunk-size CHARS]
 * The data directory defaults to a fresh temporary folder (cold cache); pass
 * --data-dir to reuse a cache between runs.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { evaluateBeir } from "../src/eval/beir.js";
import { KnowledgeLayer } from "../src/knowledge-layer.js";

const { values } = parseArgs({
  options: {
    "data-dir": { type: "string" },
    dataset: { type: "string", default: resolve(import.meta.dirname, "../../shared/data/ir/scifact") },
    limit: { type: "string" },
    "chunk-size": { type: "string" },
  },
});
const temporary = values["data-dir"] === undefined;
const dataDir = values["data-dir"] ?? mkdtempSync(join(tmpdir(), "kl-bench-"));
const limit = values.limit ? Number(values.limit) : undefined;
const chunkSize = values["chunk-size"] ? Number(values["chunk-size"]) : undefined;
const kl = KnowledgeLayer.open({ dataDir });
const kb = "bench-scifact";
const line = (s: string): void => {
  process.stdout.write(`${s}\n`);
};

try {
  if (kl.catalog.getKb(kb)) await kl.deleteKb(kb);
  const cold = await evaluateBeir(kl, values.dataset as string, {
    modes: ["keyword", "vector_only", "hybrid"],
    kb,
    chunkSize,
    limit,
  });
  const coldIngest = cold.ingest[0];
  // Warm: the KB is dropped, the embedding cache is kept, and the corpus is ingested again.
  await kl.deleteKb(kb);
  const warm = await evaluateBeir(kl, values.dataset as string, {
    modes: ["vector_only"],
    kb,
    chunkSize,
    limit,
  });
  const warmIngest = warm.ingest[0];
  const standard = await evaluateBeir(kl, values.dataset as string, {
    modes: ["keyword"],
    kb: `${kb}-standard`,
    analyzer: "standard",
    chunkSize,
    limit,
  });
  await kl.deleteKb(`${kb}-standard`);

  line(`dataset ${cold.dataset}: ${cold.documents} documents, ${cold.results[0]?.queries} queries`);
  line(
    `ingest, cold embedding cache: ${((coldIngest?.durationMs ?? 0) / 1000).toFixed(1)} s ` +
      `(${coldIngest?.chunks} chunks, ${coldIngest?.embedded.computed} embedded, ${coldIngest?.embedded.cached} cached)`,
  );
  line(
    `ingest, warm embedding cache: ${((warmIngest?.durationMs ?? 0) / 1000).toFixed(1)} s ` +
      `(${warmIngest?.chunks} chunks, ${warmIngest?.embedded.computed} embedded, ${warmIngest?.embedded.cached} cached)`,
  );
  line("mode                queries  nDCG@10  Recall@100  MRR@10  ms/query");
  const rows = [
    ...cold.results.map((r) => ({ ...r, label: r.mode === "keyword" ? "keyword (english)" : r.mode })),
    ...standard.results.map((r) => ({ ...r, label: "keyword (standard)" })),
  ];
  for (const r of rows) {
    line(
      `${r.label.padEnd(19)} ${String(r.queries).padStart(7)}  ${r.ndcg10.toFixed(4)}  ${r.recall100.toFixed(4).padStart(10)}  ${r.mrr10.toFixed(4)}  ${r.msPerQuery.toFixed(1).padStart(8)}`,
    );
  }
  line(
    "published SciFact nDCG@10: BM25 0.665 (BEIR), all-MiniLM-L6-v2 ~0.645, BM25 + MiniLM cross-encoder 0.688",
  );
} finally {
  kl.close();
  if (temporary) rmSync(dataDir, { recursive: true, force: true });
}
