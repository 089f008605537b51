/**
 * `advanced` against `hybrid`, in one run: nDCG@10 of both (and keyword) on SciFact,
 * Cranfield and Chroma's chunking corpora, through the real ingest and search path
 * with default KB settings and the bundled model. The goal (issue 17): `advanced`
 * never below `hybrid` by more than 0.5 nDCG@10 points on any of them.
 *
 * Chroma: the 5 corpora are ingested as Markdown documents (default chunking); each
 * question is searched within its corpus (a `uri` filter); a chunk is relevant when
 * its span overlaps one of the question's reference spans, and the ideal ranking
 * puts every such chunk of the corpus first.
 *
 * Usage: node --import tsx bench/advanced.ts [--sets scifact,cranfield,chroma]
 *          [--data-dir DIR] [--no-vectors] [--limit N]
 *
 * The data directory (default `$TMPDIR/kl-bench-advanced`) keeps the embedding cache.
 * `--no-vectors` ingests without embeddings (every mode then ranks by BM25 alone): a
 * quick check of query expansion.
 */
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import type { RetrievalMode } from "../src/config.js";
import { evaluateBeir } from "../src/eval/beir.js";
import { type CharRange, loadChromaChunkingDataset } from "../src/eval/chunking.js";
import { ndcgAtK } from "../src/eval/metrics.js";
import { KnowledgeLayer } from "../src/knowledge-layer.js";

const { values } = parseArgs({
  options: {
    sets: { type: "string", default: "scifact,cranfield,chroma" },
    "data-dir": { type: "string", default: join(tmpdir(), "kl-bench-advanced") },
    "no-vectors": { type: "boolean", default: false },
    limit: { type: "string" },
  },
});
const SHARED = resolve(import.meta.dirname, "..", "..", "shared", "data");
const modes: RetrievalMode[] = ["keyword", "hybrid", "advanced"];
const embed = !values["no-vectors"];
const limit = values.limit ? Number(values.limit) : undefined;
const kl = KnowledgeLayer.open({ dataDir: values["data-dir"], cache: { type: "none" } });
const rows: { set: string; scores: Record<string, number> }[] = [];

/** nDCG@10 per mode on Chroma's corpora (see the module comment). */
async function chroma(): Promise<Record<string, number>> {
  const data = loadChromaChunkingDataset(join(SHARED, "chunking", "chroma"));
  const kb = embed ? "chroma" : "chroma-keyword";
  if (!(await kl.findKb(kb))) await kl.createKb(kb);
  await kl.ingestDocuments(
    [...data.corpora].map(([id, text]) => ({
      uri: `chroma:${id}`,
      text,
      metadata: { path: `${id}.md`, type: "markdown" as const, title: id },
    })),
    { kb, embed },
  );
  // Every chunk's span, per corpus.
  const spans = new Map<string, { id: number; start: number; end: number }[]>();
  for (const id of data.corpora.keys()) {
    const doc = kl.catalog.documentsByPath(kb, `chroma:${id}`)[0];
    if (!doc) throw new Error(`chroma:${id} was not ingested`);
    const chunks = kl.catalog.loadChunks(kl.catalog.chunkIds(doc.id));
    spans.set(
      id,
      [...chunks.values()].map((c) => ({ id: c.id, start: c.start, end: c.end })),
    );
  }
  const overlaps = (c: CharRange, refs: readonly CharRange[]): boolean =>
    refs.some((r) => c.start < r.end && r.start < c.end);
  const questions = limit ? data.questions.slice(0, limit) : data.questions;
  const out: Record<string, number> = {};
  for (const mode of modes) {
    let sum = 0;
    for (const q of questions) {
      const qrels = new Map<string, number>();
      for (const c of spans.get(q.corpusId) ?? []) if (overlaps(c, q.references)) qrels.set(String(c.id), 1);
      const response = await kl.search(q.question, {
        kbs: [kb],
        mode,
        topK: 10,
        keepDuplicates: true,
        filter: { uri: `chroma:${q.corpusId}` },
      });
      sum += ndcgAtK(
        response.results.map((r) => String(r.chunkId)),
        qrels,
        10,
      );
    }
    out[mode] = sum / (questions.length || 1);
    process.stderr.write(`chroma ${mode}: ${out[mode]?.toFixed(4)}\n`);
  }
  return out;
}

try {
  for (const set of values.sets.split(",")) {
    if (set === "chroma") {
      rows.push({ set, scores: await chroma() });
      continue;
    }
    const report = await evaluateBeir(kl, join(SHARED, "ir", set), {
      modes,
      kb: embed ? undefined : `beir-${set}-keyword`,
      limit,
      embed,
    });
    rows.push({ set, scores: Object.fromEntries(report.results.map((r) => [r.mode, r.ndcg10])) });
    process.stderr.write(`${set}: ${JSON.stringify(rows[rows.length - 1]?.scores)}\n`);
  }
} finally {
  await kl.close();
}
console.log(`nDCG@10${embed ? "" : " (no vectors: BM25 only)"}`);
console.log("| set | keyword | hybrid | advanced | advanced − hybrid (points) |");
console.log("|---|---|---|---|---|");
for (const { set, scores } of rows) {
  const d = ((scores.advanced ?? 0) - (scores.hybrid ?? 0)) * 100;
  console.log(
    `| ${set} | ${(scores.keyword ?? 0).toFixed(4)} | ${(scores.hybrid ?? 0).toFixed(4)} | ${(scores.advanced ?? 0).toFixed(4)} | ${d >= 0 ? "+" : ""}${d.toFixed(2)} |`,
  );
}
