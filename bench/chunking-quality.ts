/**
 * Part 1 of `npm run bench:chunking`: chunking quality on Chroma's chunking
 * benchmark (`../shared/data/chunking/chroma`), our strategies against
 * LangChain.js' RecursiveCharacterTextSplitter, scored with Chroma's
 * recall / precision / IoU (see src/eval/chunking.ts for the definitions).
 *
 * Every configuration chunks each corpus; chunk texts and questions are
 * embedded with the bundled USE-lite model through the persistent embedding
 * cache; each question retrieves its top-k chunks by cosine similarity.
 */
import { RecursiveCharacterTextSplitter } from "@langchain/textsplitters";
import { type ConcreteStrategy, createChunker } from "../src/chunk/index.js";
import { createMeasure, type SizeMeasure } from "../src/chunk/measure.js";
import { type ChunkingConfig, defaultKbConfig } from "../src/config.js";
import type { Embedder } from "../src/embed/contract.js";
import {
  type ChunkingDataset,
  type EmbeddedChunk,
  embedAll,
  locateChunks,
  type RetrievalScope,
  type RetrievalScores,
  scoreRetrieval,
} from "../src/eval/chunking.js";
import type { ExtractedDocument } from "../src/types.js";

/** A chunk of one corpus: body span and the text that is embedded (body, or context prefix + body). */
interface SpanChunk {
  start: number;
  end: number;
  text: string;
}

/** Output of one splitter on one corpus. */
interface SplitResult {
  chunks: SpanChunk[];
  /** LangChain chunks not found in the corpus (dropped). */
  notFound: number;
  /** LangChain chunks found only before the moving cursor. */
  outOfOrder: number;
  /** EMBEDDING_SEMANTIC chunks made by its FIXED fallback (the embedder failed). */
  fallback: number;
}

/** One benchmarked configuration. */
export interface QualityConfig {
  label: string;
  /** `ours` or `langchain`. */
  family: "ours" | "langchain";
  /** Strategy name for ours (`default` for the default KB configuration), `recursive` for LangChain. */
  strategy: string;
  /** Chunk size and overlap in cl100k_base tokens (absent for the default char-sized configuration). */
  size?: number;
  overlap?: number;
  split: (text: string, corpusId: string) => Promise<SplitResult>;
}

/** Options of {@link runQuality}. */
export interface QualityOptions {
  dataset: ChunkingDataset;
  embedder: Embedder;
  /** One size and no overlap, fewer rows. */
  quick: boolean;
  ks: number[];
  scope: RetrievalScope;
  log: (line: string) => void;
}

/** Statistics and scores of one configuration. */
export interface QualityRow {
  config: QualityConfig;
  chunks: number;
  meanTokens: number;
  maxTokens: number;
  meanChars: number;
  /** Mean overlap of consecutive chunks, in tokens of the shared text. */
  meanOverlapTokens: number;
  /** Chunks over the configured token limit (token-sized configurations). */
  overLimit: number;
  notFound: number;
  outOfOrder: number;
  fallback: number;
  chunkMs: number;
  scores: RetrievalScores[];
}

/** The outcome of {@link runQuality}: rows plus configurations that could not run. */
export interface QualityReport {
  rows: QualityRow[];
  skipped: { label: string; reason: string }[];
  questions: number;
  corpora: string[];
  embedMs: number;
  embedded: { texts: number; unique: number };
}

const TOKENIZER = "cl100k_base";

/** Document shape of a Chroma corpus for our chunkers (the corpora are `.md` files, so `auto` picks DOCUMENT). */
function corpusDocument(text: string, corpusId: string): ExtractedDocument {
  return {
    uri: `chroma:${corpusId}`,
    text,
    metadata: { path: `${corpusId}.md`, type: "markdown", title: corpusId },
  };
}

/**
 * A splitter from one of our chunkers (spans are the chunk bodies, the embedded text is `chunk.text`).
 * `embedder` is passed as `deps.embedder`, which EMBEDDING_SEMANTIC needs.
 * @throws ConfigError from {@link createChunker} (e.g. a strategy that is not available).
 */
function ours(
  config: ChunkingConfig,
  strategy?: ConcreteStrategy,
  embedder?: Embedder,
): QualityConfig["split"] {
  const chunker = createChunker(config, strategy, embedder ? { embedder } : undefined);
  return async (text, corpusId) => {
    const chunks = await chunker.chunk(corpusDocument(text, corpusId));
    return {
      chunks: chunks.map((c) => ({ start: c.start, end: c.end, text: c.text })),
      notFound: 0,
      outOfOrder: 0,
      fallback: chunks.filter((c) => c.metadata.chunker === "fixed_fallback").length,
    };
  };
}

/** LangChain.js RecursiveCharacterTextSplitter with a cl100k_base length function; chunks located by moving cursor. */
function recursive(size: number, overlap: number, measure: SizeMeasure): QualityConfig["split"] {
  const splitter = new RecursiveCharacterTextSplitter({
    chunkSize: size,
    chunkOverlap: overlap,
    lengthFunction: (t: string) => measure.count(t),
  });
  return async (text) => {
    const pieces = await splitter.splitText(text);
    const located = locateChunks(text, pieces);
    const chunks: SpanChunk[] = [];
    located.spans.forEach((span, i) => {
      if (span) chunks.push({ ...span, text: pieces[i] as string });
    });
    return { chunks, notFound: located.notFound, outOfOrder: located.outOfOrder, fallback: 0 };
  };
}

/** Our token-sized configuration: `minChunkSize` keeps the default ratio (500 / 1,500 = 1/3 of the size). */
function tokenConfig(strategy: ChunkingConfig["strategy"], size: number, overlap: number): ChunkingConfig {
  return {
    strategy,
    chunkSize: size,
    chunkOverlap: overlap,
    minChunkSize: Math.round(size / 3),
    unit: "tokens",
    tokenizer: TOKENIZER,
  };
}

/** The configurations compared: ours at 200/400 tokens × overlap 0/50 %, LangChain at the same, and our default. */
export function qualityConfigs(
  quick: boolean,
  embedder: Embedder,
): { configs: QualityConfig[]; skipped: QualityReport["skipped"] } {
  const measure = createMeasure("tokens", TOKENIZER);
  const sizes = quick ? [400] : [200, 400];
  const configs: QualityConfig[] = [];
  const skipped: QualityReport["skipped"] = [];
  for (const size of sizes) {
    for (const overlap of quick ? [0] : [0, size / 2]) {
      const tag = `${size}/${overlap} tok`;
      for (const strategy of ["fixed", "semantic", "document"] as const) {
        configs.push({
          label: `ours ${strategy} ${tag}`,
          family: "ours",
          strategy,
          size,
          overlap,
          split: ours(tokenConfig(strategy, size, overlap), strategy),
        });
      }
      configs.push({
        label: `langchain recursive ${tag}`,
        family: "langchain",
        strategy: "recursive",
        size,
        overlap,
        split: recursive(size, overlap, measure),
      });
    }
    // EMBEDDING_SEMANTIC cuts where neighbouring sentences differ; it has no overlap. Its default
    // breakpoint (cosine threshold 0.75) and, outside --quick, LangChain SemanticChunker's
    // default (95th percentile of neighbour distances), with maxSize = the chunk size.
    for (const breakpoint of quick ? (["threshold"] as const) : (["threshold", "percentile"] as const)) {
      const label = `ours embedding_semantic${breakpoint === "percentile" ? " p95" : ""} ${size}/0 tok`;
      try {
        const config = {
          ...tokenConfig("embedding_semantic", size, 0),
          embeddingSemantic: { maxSize: size, breakpoint },
        };
        configs.push({
          label,
          family: "ours",
          strategy: "embedding_semantic",
          size,
          overlap: 0,
          split: ours(config, "embedding_semantic", embedder),
        });
      } catch (error) {
        skipped.push({ label, reason: (error as Error).message });
      }
    }
  }
  configs.push({
    label: "ours default (auto→document, 1500/150 chars)",
    family: "ours",
    strategy: "default",
    split: ours(defaultKbConfig().chunking),
  });
  return { configs, skipped };
}

const percent = (x: number, digits = 1): string => (100 * x).toFixed(digits);

/**
 * Chunks every corpus with every configuration, embeds all chunk texts and
 * questions once (cached), and scores retrieval at each k.
 */
export async function runQuality(options: QualityOptions): Promise<QualityReport> {
  const { dataset, embedder, log } = options;
  const measure = createMeasure("tokens", TOKENIZER);
  const { configs, skipped } = qualityConfigs(options.quick, embedder);
  const corpora = [...dataset.corpora.keys()];
  interface Chunked {
    config: QualityConfig;
    chunks: (SpanChunk & { corpusId: string })[];
    notFound: number;
    outOfOrder: number;
    fallback: number;
    chunkMs: number;
    overlaps: number[];
  }
  const chunked: Chunked[] = [];
  for (const config of configs) {
    const started = performance.now();
    const result: Chunked = {
      config,
      chunks: [],
      notFound: 0,
      outOfOrder: 0,
      fallback: 0,
      chunkMs: 0,
      overlaps: [],
    };
    try {
      for (const corpusId of corpora) {
        const text = dataset.corpora.get(corpusId) as string;
        const out = await config.split(text, corpusId);
        result.notFound += out.notFound;
        result.outOfOrder += out.outOfOrder;
        result.fallback += out.fallback;
        const sorted = [...out.chunks].sort((a, b) => a.start - b.start || a.end - b.end);
        for (let i = 1; i < sorted.length; i++) {
          const prev = sorted[i - 1] as SpanChunk;
          const cur = sorted[i] as SpanChunk;
          result.overlaps.push(prev.end > cur.start ? measure.count(text.slice(cur.start, prev.end)) : 0);
        }
        for (const c of out.chunks) result.chunks.push({ ...c, corpusId });
      }
    } catch (error) {
      skipped.push({ label: config.label, reason: (error as Error).message });
      log(`[quality] skipped ${config.label}: ${(error as Error).message}`);
      continue;
    }
    result.chunkMs = performance.now() - started;
    chunked.push(result);
    log(
      `[quality] chunked ${config.label}: ${result.chunks.length} chunks in ${(result.chunkMs / 1000).toFixed(1)} s`,
    );
  }

  const texts = [
    ...dataset.questions.map((q) => q.question),
    ...chunked.flatMap((c) => c.chunks.map((x) => x.text)),
  ];
  const unique = new Set(texts).size;
  log(`[quality] embedding ${texts.length} texts (${unique} distinct; cached ones are free)`);
  const embedStarted = performance.now();
  let lastLog = 0;
  const vectors = await embedAll(embedder, texts, (done, total) => {
    const now = performance.now();
    if (done === total || now - lastLog > 15_000) {
      lastLog = now;
      log(`[quality] embedded ${done}/${total} (${((now - embedStarted) / 1000).toFixed(0)} s)`);
    }
  });
  const embedMs = performance.now() - embedStarted;
  const questionVectors = vectors.slice(0, dataset.questions.length);
  let offset = dataset.questions.length;

  const rows: QualityRow[] = chunked.map((c) => {
    const embeddedChunks: EmbeddedChunk[] = c.chunks.map((x, i) => ({
      start: x.start,
      end: x.end,
      corpusId: x.corpusId,
      vector: vectors[offset + i] as Float32Array,
    }));
    offset += c.chunks.length;
    const tokens = c.chunks.map((x) => measure.count(x.text));
    const n = c.chunks.length || 1;
    return {
      config: c.config,
      chunks: c.chunks.length,
      meanTokens: tokens.reduce((a, b) => a + b, 0) / n,
      maxTokens: Math.max(0, ...tokens),
      meanChars: c.chunks.reduce((a, x) => a + x.end - x.start, 0) / n,
      meanOverlapTokens: c.overlaps.reduce((a, b) => a + b, 0) / (c.overlaps.length || 1),
      overLimit: c.config.size === undefined ? 0 : tokens.filter((t) => t > (c.config.size as number)).length,
      notFound: c.notFound,
      outOfOrder: c.outOfOrder,
      fallback: c.fallback,
      chunkMs: c.chunkMs,
      scores: scoreRetrieval(dataset.questions, questionVectors, embeddedChunks, options.ks, options.scope),
    };
  });
  return {
    rows,
    skipped,
    questions: dataset.questions.length,
    corpora,
    embedMs,
    embedded: { texts: texts.length, unique },
  };
}

/** Pads cells into aligned columns (first column left-aligned, the rest right-aligned). */
export function formatTable(header: string[], rows: string[][]): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]): string =>
    cells
      .map((c, i) => (i === 0 ? c.padEnd(widths[i] as number) : c.padStart(widths[i] as number)))
      .join("  ")
      .trimEnd();
  return [line(header), line(widths.map((w) => "-".repeat(w))), ...rows.map(line)];
}

/** The quality table (one row per configuration and k) followed by notes and the goal check. */
export function formatQuality(report: QualityReport): string[] {
  const header = [
    "config",
    "chunks",
    "mean tok",
    "max tok",
    "mean chars",
    "ovl tok",
    "chunk s",
    "k",
    "recall %",
    "precision %",
    "IoU %",
  ];
  const rows: string[][] = [];
  for (const row of report.rows) {
    for (const s of row.scores) {
      rows.push([
        row.config.label,
        String(row.chunks),
        row.meanTokens.toFixed(0),
        String(row.maxTokens),
        row.meanChars.toFixed(0),
        row.meanOverlapTokens.toFixed(0),
        (row.chunkMs / 1000).toFixed(1),
        String(s.k),
        `${percent(s.recall.mean)} ± ${percent(s.recall.std)}`,
        `${percent(s.precision.mean, 2)} ± ${percent(s.precision.std, 2)}`,
        `${percent(s.iou.mean, 2)} ± ${percent(s.iou.std, 2)}`,
      ]);
    }
  }
  const out = formatTable(header, rows);
  out.push(
    "",
    "mean tok / max tok: cl100k_base tokens of the embedded chunk text (context prefix included); mean chars: " +
      "chunk span length; ovl tok: mean tokens shared by consecutive chunks; " +
      "chunk s: time to chunk all corpora; scores: mean ± population std over questions.",
  );
  for (const row of report.rows) {
    const notes: string[] = [];
    if (row.notFound > 0) notes.push(`${row.notFound} chunks not found in the corpus (dropped)`);
    if (row.outOfOrder > 0) notes.push(`${row.outOfOrder} chunks found only before the cursor`);
    if (row.overLimit > 0) notes.push(`${row.overLimit} chunks over ${row.config.size} tokens`);
    if (row.fallback > 0) notes.push(`${row.fallback} chunks from the FIXED fallback (embedder failed)`);
    if (row.config.family === "langchain" && row.notFound === 0 && row.outOfOrder === 0) {
      notes.push("all chunks located in order");
    }
    if (notes.length > 0) out.push(`note: ${row.config.label}: ${notes.join("; ")}`);
  }
  for (const s of report.skipped) out.push(`skipped: ${s.label}: ${s.reason}`);
  out.push("", ...goalCheck(report));
  return out;
}

/**
 * Mean and standard error of the per-question differences `mine - theirs`
 * (paired over the same questions; sample standard deviation / √n).
 */
export function pairedDifference(
  mine: readonly number[],
  theirs: readonly number[],
): { diff: number; se: number } {
  const n = Math.min(mine.length, theirs.length);
  if (n === 0) return { diff: 0, se: 0 };
  const d = Array.from({ length: n }, (_, i) => (mine[i] as number) - (theirs[i] as number));
  const mean = d.reduce((a, b) => a + b, 0) / n;
  const variance = n > 1 ? d.reduce((a, b) => a + (b - mean) * (b - mean), 0) / (n - 1) : 0;
  return { diff: mean, se: Math.sqrt(variance / n) };
}

/**
 * Which of our configurations beat LangChain's recursive splitter on both
 * recall and IoU at the same k: against the recursive splitter of the same
 * size and overlap, and (for the default configuration, which has no token
 * twin) against every recursive configuration. Differences are paired over
 * questions and shown with their standard error; a win is "clear" when both
 * differences exceed two standard errors.
 */
export function goalCheck(report: QualityReport): string[] {
  const out = [
    "goal check: ours vs LangChain recursive at the same k; differences in points, paired over questions (± standard error)",
  ];
  const recursiveRows = report.rows.filter((r) => r.config.family === "langchain");
  const scoreAt = (row: QualityRow, k: number): RetrievalScores | undefined =>
    row.scores.find((s) => s.k === k);
  const signed = (x: number, digits: number): string => `${x >= 0 ? "+" : ""}${(100 * x).toFixed(digits)}`;
  const winners: string[] = [];
  for (const row of report.rows.filter((r) => r.config.family === "ours")) {
    const rivals =
      row.config.size === undefined
        ? recursiveRows
        : recursiveRows.filter(
            (r) => r.config.size === row.config.size && r.config.overlap === row.config.overlap,
          );
    for (const rival of rivals) {
      for (const mine of row.scores) {
        const theirs = scoreAt(rival, mine.k);
        if (!theirs) continue;
        const r = pairedDifference(
          mine.perQuestion.map((q) => q.recall),
          theirs.perQuestion.map((q) => q.recall),
        );
        const i = pairedDifference(
          mine.perQuestion.map((q) => q.iou),
          theirs.perQuestion.map((q) => q.iou),
        );
        const beats = r.diff > 0 && i.diff > 0;
        const clear = beats && r.diff > 2 * r.se && i.diff > 2 * i.se;
        const verdict = clear ? "BEATS (clear)" : beats ? "beats (< 2 SE)" : "no";
        if (beats)
          winners.push(`${row.config.label} vs ${rival.config.label} @k=${mine.k}${clear ? " (clear)" : ""}`);
        out.push(
          `  ${verdict.padEnd(14)} ${row.config.label} vs ${rival.config.label} @k=${mine.k}: ` +
            `recall ${signed(r.diff, 1)} ± ${(100 * r.se).toFixed(1)}, IoU ${signed(i.diff, 2)} ± ${(100 * i.se).toFixed(2)}`,
        );
      }
    }
  }
  out.push(winners.length > 0 ? `both higher: ${winners.join("; ")}` : "goal not met by any configuration");
  return out;
}
