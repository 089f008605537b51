import { existsSync, readFileSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import type { RetrievalMode } from "../config.js";
import { KnowledgeLayerError } from "../errors.js";
import type { IngestProgress, IngestSummary } from "../ingest/pipeline.js";
import type { KnowledgeLayer } from "../knowledge-layer.js";
import type { Analyzer } from "../retrieve/tokenizer.js";
import type { ExtractedDocument } from "../types.js";
import { mrrAtK, ndcgAtK, type Qrels, recallAtK } from "./metrics.js";

/** A BEIR-layout data set loaded in memory. */
export interface BeirDataset {
  name: string;
  corpus: { id: string; title: string; text: string }[];
  queries: Map<string, string>;
  /** query id → (doc id → relevance), for the chosen split. */
  qrels: Map<string, Map<string, number>>;
}

/** Scores of one retrieval mode, averaged over the judged queries. */
export interface BeirModeResult {
  mode: RetrievalMode;
  queries: number;
  ndcg10: number;
  recall100: number;
  mrr10: number;
  /** Mean search latency per query (ms), including query embedding. */
  msPerQuery: number;
  /**
   * Search latency percentiles (ms): `p50`/`p95` of each query's first search (no
   * cached result), `warmP50`/`warmP95` of the same query searched again at once
   * (served from the result cache).
   */
  latency: { p50: number; p95: number; warmP50: number; warmP95: number };
}

/** The q-quantile (0–1) of `values` by the nearest-rank method; 0 for an empty list. */
export function percentile(values: readonly number[], q: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil(q * sorted.length)));
  return sorted[rank - 1] as number;
}

/** Full evaluation report. */
export interface BeirReport {
  dataset: string;
  kb: string;
  documents: number;
  ingest: IngestSummary[];
  results: BeirModeResult[];
}

/**
 * Loads `corpus.jsonl`, `queries.jsonl` and `qrels/<split>.tsv` from a BEIR
 * folder. @throws KnowledgeLayerError naming a missing file or bad line.
 */
export function loadBeir(dir: string, split = "test"): BeirDataset {
  const root = resolve(dir);
  const need = (file: string): string => {
    const p = join(root, file);
    if (!existsSync(p))
      throw new KnowledgeLayerError(
        `${p}: not found (expected BEIR layout: corpus.jsonl, queries.jsonl, qrels/${split}.tsv)`,
      );
    return p;
  };
  const jsonl = (file: string): Record<string, unknown>[] =>
    readFileSync(need(file), "utf8")
      .split("\n")
      .filter((l) => l.trim())
      .map((l, i) => {
        try {
          return JSON.parse(l) as Record<string, unknown>;
        } catch {
          throw new KnowledgeLayerError(`${join(root, file)}:${i + 1}: invalid JSON`);
        }
      });
  const corpus = jsonl("corpus.jsonl").map((o) => ({
    id: String(o._id),
    title: typeof o.title === "string" ? o.title : "",
    text: typeof o.text === "string" ? o.text : "",
  }));
  const queries = new Map(jsonl("queries.jsonl").map((o) => [String(o._id), String(o.text ?? "")]));
  const qrels = new Map<string, Map<string, number>>();
  const lines = readFileSync(need(`qrels/${split}.tsv`), "utf8").split("\n");
  for (const line of lines.slice(1)) {
    const [q, d, s] = line.trim().split("\t");
    if (!q || !d || s === undefined) continue;
    const m = qrels.get(q) ?? new Map<string, number>();
    m.set(d, Number(s));
    qrels.set(q, m);
  }
  return { name: basename(root), corpus, queries, qrels };
}

/** URI under which a BEIR document is stored. */
export function beirUri(dataset: string, docId: string): string {
  return `beir:${dataset}/${docId}`;
}

/** `test` when `dir/qrels/test.tsv` exists, else `dev`, else `test` (the error then names it). */
export function defaultSplit(dir: string): string {
  if (existsSync(join(dir, "qrels", "test.tsv"))) return "test";
  if (existsSync(join(dir, "qrels", "dev.tsv"))) return "dev";
  return "test";
}

/** Options for {@link evaluateBeir}. */
export interface BeirOptions {
  modes: RetrievalMode[];
  /** Knowledge base to ingest into; created when missing. Default `beir-<name>`. */
  kb?: string;
  /** Chunk size (characters) of a created KB. Default 10,000 (SciFact abstracts stay whole). */
  chunkSize?: number;
  /** BM25 analyzer of a created KB (default `english`). */
  analyzer?: Analyzer;
  /** Evaluate only the first n judged queries. */
  limit?: number;
  /**
   * Ingest with vectors. Default: when a mode needs them. False ingests keyword-only
   * (vector and hybrid modes then rank by BM25 alone: a quick check of the keyword side).
   */
  embed?: boolean;
  /** Qrels split: `qrels/<split>.tsv`. Default `test`, else the only split present (e.g. `dev`). */
  split?: string;
  onProgress?: (
    event: IngestProgress | { phase: "query"; mode: RetrievalMode; done: number; total: number },
  ) => void;
}

/**
 * Runs a BEIR benchmark through the real ingest and search path: the corpus is
 * ingested as documents (title + blank line + text) into a knowledge base
 * (vectors only when a mode needs them; the embedding cache makes reruns
 * cheap), every judged query is searched with each mode (100 candidates per
 * list, no near-duplicate removal), chunk hits are mapped to their documents
 * (first occurrence), and nDCG@10, Recall@100 and MRR@10 are averaged.
 */
export async function evaluateBeir(
  kl: KnowledgeLayer,
  dir: string,
  options: BeirOptions,
): Promise<BeirReport> {
  const data = loadBeir(dir, options.split ?? defaultSplit(dir));
  const analyzer = options.analyzer ?? "english";
  const suffix = analyzer === "english" ? "" : `-${analyzer}`;
  const kbName = options.kb ?? `beir-${data.name}${suffix}`.replace(/[^A-Za-z0-9_.-]/g, "-");
  const existing = await kl.findKb(kbName);
  if (!existing) {
    await kl.createKb(kbName, {
      chunking: { strategy: "semantic", chunkSize: options.chunkSize ?? 10_000 },
      retrieval: { analyzer },
    });
  } else if (options.analyzer && existing.config.retrieval.analyzer !== options.analyzer) {
    throw new KnowledgeLayerError(
      `knowledge base "${kbName}" uses analyzer ${existing.config.retrieval.analyzer}, not ${options.analyzer}`,
    );
  }
  const needVectors = options.embed ?? options.modes.some((m) => m !== "keyword");
  const docs: ExtractedDocument[] = data.corpus.map((d) => ({
    uri: beirUri(data.name, d.id),
    text: d.title ? `${d.title}\n\n${d.text}` : d.text,
    metadata: { path: beirUri(data.name, d.id), type: "text", title: d.title || d.id, beirId: d.id },
  }));
  const ingest = [
    await kl.ingestDocuments(docs, { kb: kbName, embed: needVectors, onProgress: options.onProgress }),
  ];

  const judged = [...data.qrels.keys()].filter((q) => data.queries.has(q));
  const queryIds = options.limit ? judged.slice(0, options.limit) : judged;
  const results: BeirModeResult[] = [];
  for (const mode of options.modes) {
    let ndcg = 0;
    let recall = 0;
    let mrr = 0;
    const searchOptions = {
      kbs: [kbName],
      mode,
      topK: 100,
      vectorTopK: 100,
      keywordTopK: 100,
      keepDuplicates: true,
    };
    const cold: number[] = [];
    const warm: number[] = [];
    let coldTotal = 0;
    for (const [i, qid] of queryIds.entries()) {
      const text = data.queries.get(qid) as string;
      const t0 = performance.now();
      const response = await kl.search(text, searchOptions);
      const t1 = performance.now();
      // The same query again at once: a result-cache hit (not counted in msPerQuery).
      await kl.search(text, searchOptions);
      warm.push(performance.now() - t1);
      cold.push(t1 - t0);
      coldTotal += t1 - t0;
      const ranked = response.results.map((r) => String(r.source.uri).slice(`beir:${data.name}/`.length));
      const qrels = data.qrels.get(qid) as Qrels;
      ndcg += ndcgAtK(ranked, qrels, 10);
      recall += recallAtK(ranked, qrels, 100);
      mrr += mrrAtK(ranked, qrels, 10);
      options.onProgress?.({ phase: "query", mode, done: i + 1, total: queryIds.length });
    }
    const n = queryIds.length || 1;
    results.push({
      mode,
      queries: queryIds.length,
      ndcg10: ndcg / n,
      recall100: recall / n,
      mrr10: mrr / n,
      msPerQuery: coldTotal / n,
      latency: {
        p50: percentile(cold, 0.5),
        p95: percentile(cold, 0.95),
        warmP50: percentile(warm, 0.5),
        warmP95: percentile(warm, 0.95),
      },
    });
  }
  return { dataset: data.name, kb: kbName, documents: data.corpus.length, ingest, results };
}
