/**
 * EMBEDDING_SEMANTIC strategy: cut a document where the meaning of consecutive
 * sentences changes, judged by the cosine similarity of their embeddings.
 *
 * This is the "semantic chunking" of Greg Kamradt's "5 Levels of Text
 * Splitting" (level 4), as implemented by LangChain's `SemanticChunker`
 * (`langchain_experimental.text_splitter`): embed every sentence, compare each
 * sentence with the next, and cut where they are far apart, either below a fixed
 * cosine threshold or, with percentile breakpoints, where the distance
 * `1 − cosine` is above the N-th percentile of all neighbour distances in the
 * document. Unlike `SemanticChunker` we embed each sentence alone (no buffer of
 * neighbouring sentences), and we add the size rules below so chunks fit
 * retrieval budgets.
 *
 * Units: offsets are UTF-16 code units of the document text; sizes are in the
 * configured measure (`limits.measure`: characters or tokens).
 */
import type { ChunkingConfig, EmbeddingSemanticOptions } from "../config.js";
import type { Embedder } from "../embed/contract.js";
import { ConfigError } from "../errors.js";
import type { Chunk, ExtractedDocument } from "../types.js";
import type { Chunker } from "./contract.js";
import { sentenceSpans } from "./sentences.js";
import {
  annotatePages,
  type ChunkLimits,
  finalizeChunks,
  makeChunk,
  type Span,
  sizeOf,
  validateChunkingConfig,
} from "./spans.js";
import { splitRange } from "./split.js";

/** What the EMBEDDING_SEMANTIC chunker needs besides the document. */
export interface EmbeddingSemanticDeps {
  /** Embeds the sentences (the knowledge base's embedder, so sentence vectors are cached and reusable). */
  embedder: Embedder;
  /** Sentences per `embedder.embedTexts` call, an integer ≥ 1. Default 32 (the KB's `embedding.batchSize`). */
  batchSize?: number;
}

/** Sentences per embedding call when {@link EmbeddingSemanticDeps.batchSize} is not given. */
export const DEFAULT_SENTENCE_BATCH = 32;

/** Value of `metadata.chunker` on chunks made by the strategy. */
export const EMBEDDING_SEMANTIC_CHUNKER = "embedding_semantic";

/** Value of `metadata.chunker` on the FIXED windows made when the embedder failed. */
export const FIXED_FALLBACK_CHUNKER = "fixed_fallback";

/** Raised inside the strategy when the embedder's answer cannot be used; triggers the FIXED fallback. */
class EmbedderFailure extends Error {}

/**
 * Cosine similarity of two vectors of equal length, in [-1, 1]; 0 when either
 * is the zero vector.
 */
export function cosine(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i] as number;
    const y = b[i] as number;
    dot += x * y;
    na += x * x;
    nb += y * y;
  }
  if (na === 0 || nb === 0) return 0;
  return Math.max(-1, Math.min(1, dot / Math.sqrt(na * nb)));
}

/**
 * The `p`-th percentile (0–100) of `values` with linear interpolation between
 * closest ranks (NumPy's default `np.percentile`, which LangChain's
 * `SemanticChunker` uses). `NaN` for an empty list.
 */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = (Math.min(100, Math.max(0, p)) / 100) * (sorted.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  const a = sorted[lo] as number;
  const b = sorted[hi] as number;
  return a + (b - a) * (rank - lo);
}

/**
 * Where the meaning changes, given the cosine similarity of each sentence with
 * the next (`similarities[i]` compares sentence `i` and `i + 1`): `true` at `i`
 * means "cut after sentence `i`".
 * - `threshold`: cut where the similarity is below `options.threshold`;
 * - `percentile`: cut where the distance `1 − similarity` is above the
 *   `options.percentile`-th percentile of all distances (strictly above, so a
 *   document whose neighbours are all equally close is not cut).
 */
export function semanticBreakpoints(
  similarities: readonly number[],
  options: Pick<EmbeddingSemanticOptions, "breakpoint" | "threshold" | "percentile">,
): boolean[] {
  if (options.breakpoint === "threshold") return similarities.map((s) => s < options.threshold);
  const distances = similarities.map((s) => 1 - s);
  const limit = percentile(distances, options.percentile);
  return distances.map((d) => d > limit);
}

/**
 * Cuts `[start, end)` into spans of at most `size` units of `limits.measure`
 * with {@link splitRange} (best boundary first: paragraph, sentence, line,
 * whitespace, grapheme), overlapping by about `overlap` units. A span that still
 * measures over `size` in tokens is cut again at smaller character widths.
 */
function cutToSize(
  text: string,
  start: number,
  end: number,
  size: number,
  overlap: number,
  limits: ChunkLimits,
): Span[] {
  // A variable (not a literal) so the measure-aware option is passed where split.ts knows it.
  const opts = { size, overlap, measure: limits.measure };
  const spans = splitRange(text, start, end, opts);
  if (limits.measure.unit === "chars") return spans;
  const out: Span[] = [];
  for (const span of spans) {
    if (sizeOf(limits, text, span.start, span.end) <= size) {
      out.push(span);
      continue;
    }
    let width = span.end - span.start;
    for (;;) {
      width = Math.max(1, Math.floor(width / 2));
      const pieces = splitRange(text, span.start, span.end, { size: width });
      if (width === 1 || pieces.every((p) => sizeOf(limits, text, p.start, p.end) <= size)) {
        out.push(...pieces);
        break;
      }
    }
  }
  return out;
}

/** Effective sizes: the strategy options clamped to the chunk size limit. */
function sizes(limits: ChunkLimits): { max: number; min: number; fallback: number; fallbackOverlap: number } {
  const es = limits.embeddingSemantic;
  const max = Math.max(1, Math.min(es.maxSize, limits.size));
  const fallback = Math.max(1, Math.min(es.fallbackSize, limits.size));
  return {
    max,
    min: Math.min(es.minSize, max),
    fallback,
    fallbackOverlap: Math.max(0, Math.min(es.fallbackOverlap, fallback - 1)),
  };
}

/**
 * Sentence units of `text`: sentences (a blank line also ends one; see
 * `sentenceSpans`), each longer than `max` cut into pieces of at most `max`.
 */
function sentenceUnits(text: string, limits: ChunkLimits, max: number): Span[] {
  const units: Span[] = [];
  for (const s of sentenceSpans(text, 0, text.length, { lineBreaks: "paragraph" })) {
    if (sizeOf(limits, text, s.start, s.end) <= max) units.push(s);
    else units.push(...cutToSize(text, s.start, s.end, max, 0, limits));
  }
  return units;
}

/**
 * Embeds `texts` in calls of at most `batchSize` texts and checks the answer:
 * one vector per text, all of one length (the embedder's `dimension` when it
 * states one), finite and non-zero. Returns unit-length copies.
 * @throws EmbedderFailure when the embedder throws or its answer is unusable.
 */
async function embedSentences(
  embedder: Embedder,
  texts: string[],
  batchSize: number,
): Promise<Float32Array[]> {
  const out: Float32Array[] = [];
  for (let i = 0; i < texts.length; i += batchSize) {
    const batch = texts.slice(i, i + batchSize);
    let vectors: Float32Array[];
    try {
      vectors = await embedder.embedTexts(batch);
    } catch (error) {
      throw new EmbedderFailure(`embedder failed: ${error instanceof Error ? error.message : String(error)}`);
    }
    if (!Array.isArray(vectors) || vectors.length !== batch.length) {
      throw new EmbedderFailure(
        `embedder returned ${Array.isArray(vectors) ? vectors.length : "no"} vectors for ${batch.length} texts`,
      );
    }
    const dimension = embedder.dimension > 0 ? embedder.dimension : (out[0] ?? vectors[0])?.length;
    for (const v of vectors) {
      if (!v || v.length === 0 || v.length !== dimension) {
        throw new EmbedderFailure(
          `embedder returned a vector of length ${v?.length ?? 0}, expected ${dimension}`,
        );
      }
      let norm = 0;
      for (let d = 0; d < v.length; d++) norm += (v[d] as number) * (v[d] as number);
      if (!Number.isFinite(norm))
        throw new EmbedderFailure("embedder returned a vector with NaN or infinite values");
      if (norm === 0) throw new EmbedderFailure("embedder returned a zero vector");
      const unit = new Float32Array(v.length);
      const scale = 1 / Math.sqrt(norm);
      for (let d = 0; d < v.length; d++) unit[d] = (v[d] as number) * scale;
      out.push(unit);
    }
  }
  return out;
}

/** The L2-normalised mean of `vectors[from..to)` (all unit length). */
function meanVector(vectors: readonly Float32Array[], from: number, to: number): Float32Array {
  const first = vectors[from] as Float32Array;
  const sum = new Float64Array(first.length);
  for (let i = from; i < to; i++) {
    const v = vectors[i] as Float32Array;
    for (let d = 0; d < v.length; d++) sum[d] = (sum[d] as number) + (v[d] as number);
  }
  let norm = 0;
  for (const x of sum) norm += x * x;
  const out = new Float32Array(sum.length);
  if (norm === 0) return out;
  const scale = 1 / Math.sqrt(norm);
  for (let d = 0; d < sum.length; d++) out[d] = (sum[d] as number) * scale;
  return out;
}

/** A group of consecutive sentence units `[from, to)` and why it ended. */
interface SentenceGroup {
  from: number;
  to: number;
  endedBy: "similarity" | "size" | "end";
}

/**
 * Groups sentence units into chunks: a chunk ends before unit `i + 1` when
 * adding it would exceed `max`, or when `breaks[i]` says the meaning changes
 * and the chunk has reached `min`. A last chunk smaller than `min` joins the
 * previous one when the result fits `max`.
 */
function groupUnits(
  text: string,
  units: readonly Span[],
  breaks: readonly boolean[],
  limits: ChunkLimits,
  max: number,
  min: number,
): SentenceGroup[] {
  const groups: SentenceGroup[] = [];
  const size = (from: number, to: number): number =>
    sizeOf(limits, text, (units[from] as Span).start, (units[to - 1] as Span).end);
  let from = 0;
  for (let i = 0; i + 1 < units.length; i++) {
    if (size(from, i + 2) > max) {
      groups.push({ from, to: i + 1, endedBy: "size" });
      from = i + 1;
    } else if (breaks[i] && size(from, i + 1) >= min) {
      groups.push({ from, to: i + 1, endedBy: "similarity" });
      from = i + 1;
    }
  }
  groups.push({ from, to: units.length, endedBy: "end" });
  const last = groups[groups.length - 1] as SentenceGroup;
  const prev = groups[groups.length - 2];
  if (prev && size(last.from, last.to) < min && size(prev.from, last.to) <= max) {
    groups.splice(groups.length - 2, 2, { from: prev.from, to: last.to, endedBy: "end" });
  }
  return groups;
}

/**
 * FIXED windows used when the embedder fails: `fallbackSize` units with
 * `fallbackOverlap` overlap (clamped to the chunk size), chunkType `text`,
 * metadata `{ chunker: "fixed_fallback", fallbackReason }`.
 */
function fallbackChunks(text: string, limits: ChunkLimits, reason: string): Chunk[] {
  const { fallback, fallbackOverlap } = sizes(limits);
  return cutToSize(text, 0, text.length, fallback, fallbackOverlap, limits).map((span) =>
    makeChunk(text, span, "text", { metadata: { chunker: FIXED_FALLBACK_CHUNKER, fallbackReason: reason } }),
  );
}

/**
 * Splits `doc.text` into EMBEDDING_SEMANTIC chunks (chunkType `semantic`), in
 * order, with exact spans and no overlap. Options come from
 * `limits.embeddingSemantic` (sizes in `limits.measure` units; `maxSize` and
 * `fallbackSize` are also capped by the chunk size `limits.size`):
 *
 * 1. The text is cut into sentences (`sentenceSpans`; a blank line also ends
 *    one); a sentence longer than `maxSize` is cut into pieces with `splitRange`.
 * 2. Sentences are embedded with `deps.embedder`, `deps.batchSize` per call.
 * 3. A chunk ends between two sentences when adding the next would exceed
 *    `maxSize`, or when the chunk has reached `minSize` and the pair is a
 *    breakpoint (see {@link semanticBreakpoints}: cosine below `threshold`, or
 *    distance above the `percentile`-th percentile).
 * 4. A last chunk smaller than `minSize` joins the previous one if that fits.
 *
 * Blank text gives `[]` and a text of one sentence one chunk, both without any
 * embedding call. Metadata: `{ chunker: "embedding_semantic", sentences,
 * endedBy: "similarity" | "size" | "end" }`. With `reuseSentenceEmbeddings`
 * (default), each chunk carries `embedding`: the normalised mean of its
 * sentence vectors (unweighted; sound for the bundled USE-lite model, which
 * itself embeds long text as a mean of window vectors).
 *
 * When the embedder throws or returns unusable vectors (wrong count or length,
 * NaN, zero), the document is cut into FIXED windows instead (`fallbackSize`,
 * `fallbackOverlap`; chunkType `text`, metadata `{ chunker: "fixed_fallback",
 * fallbackReason }`); the ingest pipeline reports it as a warning. Never throws
 * for embedder failures.
 */
export async function chunkEmbeddingSemantic(
  doc: ExtractedDocument,
  limits: ChunkLimits,
  deps: EmbeddingSemanticDeps,
): Promise<Chunk[]> {
  const text = doc.text;
  const es = limits.embeddingSemantic;
  const { max, min } = sizes(limits);
  const units = sentenceUnits(text, limits, max);
  if (units.length === 0) return [];
  const meta = (sentences: number, endedBy: SentenceGroup["endedBy"]): Record<string, unknown> => ({
    chunker: EMBEDDING_SEMANTIC_CHUNKER,
    sentences,
    endedBy,
  });
  if (units.length === 1) {
    const only = units[0] as Span;
    return [makeChunk(text, only, "semantic", { metadata: meta(1, "end") })];
  }
  let vectors: Float32Array[];
  try {
    vectors = await embedSentences(
      deps.embedder,
      units.map((u) => text.slice(u.start, u.end)),
      deps.batchSize ?? DEFAULT_SENTENCE_BATCH,
    );
  } catch (error) {
    if (error instanceof EmbedderFailure) return fallbackChunks(text, limits, error.message);
    throw error;
  }
  const similarities: number[] = [];
  for (let i = 0; i + 1 < vectors.length; i++) {
    similarities.push(cosine(vectors[i] as Float32Array, vectors[i + 1] as Float32Array));
  }
  const breaks = semanticBreakpoints(similarities, es);
  return groupUnits(text, units, breaks, limits, max, min).map((g) => {
    const span = { start: (units[g.from] as Span).start, end: (units[g.to - 1] as Span).end };
    const chunk = makeChunk(text, span, "semantic", { metadata: meta(g.to - g.from, g.endedBy) });
    if (es.reuseSentenceEmbeddings && chunk.contextPrefix === undefined) {
      chunk.embedding = {
        vector: meanVector(vectors, g.from, g.to),
        provider: deps.embedder.provider,
        modelId: deps.embedder.modelId,
        text: chunk.text,
      };
    }
    return chunk;
  });
}

/**
 * Creates the EMBEDDING_SEMANTIC chunker (see {@link chunkEmbeddingSemantic});
 * its `chunk` is asynchronous. Chunks are ordered, indexed and annotated with
 * pages like every strategy's, but not merged by the shared tiny-chunk rule
 * (the strategy applies its own `minSize`).
 * @throws ConfigError for invalid chunking parameters, a missing embedder, a
 *   batch size that is not an integer ≥ 1 or a non-boolean `reuseSentenceEmbeddings`.
 */
export function createEmbeddingSemanticChunker(
  config: Pick<ChunkingConfig, "chunkSize" | "chunkOverlap"> & Partial<Omit<ChunkingConfig, "strategy">>,
  deps: EmbeddingSemanticDeps | undefined,
): Chunker {
  const limits = validateChunkingConfig(config);
  if (!deps?.embedder) {
    throw new ConfigError(
      "embedding_semantic chunking needs an embedder (createChunker(config, strategy, { embedder }); " +
        "ingest passes the knowledge base's embedder)",
    );
  }
  const batchSize = deps.batchSize ?? DEFAULT_SENTENCE_BATCH;
  if (!Number.isInteger(batchSize) || batchSize < 1) {
    throw new ConfigError(`embedding_semantic batch size must be an integer >= 1 (got ${batchSize})`);
  }
  if (typeof limits.embeddingSemantic.reuseSentenceEmbeddings !== "boolean") {
    throw new ConfigError(
      `embeddingSemantic.reuseSentenceEmbeddings must be true or false (got ${String(limits.embeddingSemantic.reuseSentenceEmbeddings)})`,
    );
  }
  const resolved: EmbeddingSemanticDeps = { embedder: deps.embedder, batchSize };
  return {
    name: "embedding_semantic",
    limits,
    async chunk(doc: ExtractedDocument): Promise<Chunk[]> {
      return finalizeChunks(annotatePages(doc, await chunkEmbeddingSemantic(doc, limits, resolved)));
    },
  };
}
