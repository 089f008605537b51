/**
 * Chunking-quality evaluation after Chroma's "Evaluating Chunking Strategies
 * for Retrieval" (Smith & Troynikov, 2024; data and reference code MIT, see
 * `../shared/data/chunking/chroma`). Our own implementation of their metric.
 *
 * A corpus is chunked, chunks and questions are embedded with the same model,
 * the top-k chunks are retrieved per question by cosine similarity, and the
 * retrieved chunk spans are compared with the question's reference spans
 * (excerpts of the corpus that answer it). Chroma calls these scores
 * "token-level" but computes them over character offsets; so do we.
 *
 * Definitions, per question, with R the retrieved chunk ranges (top k, best
 * first) and H the reference ranges (disjoint in the published data):
 *
 * - `I = ⋃ { r ∩ h : r ∈ R from the question's corpus, h ∈ H }`, a union, so a
 *   reference character covered by two overlapping retrieved chunks counts once;
 * - recall    = |I| / Σ_{h∈H} |h|;
 * - precision = |I| / Σ_{r∈R} |r|, a plain sum over the retrieved chunks: with
 *   overlapping chunks a shared character counts once per chunk that holds it,
 *   and chunks of other corpora (only possible with scope `all`) count too;
 * - IoU       = |I| / (Σ_{r∈R} |r| + |H \ I|): the precision denominator plus
 *   the reference characters no retrieved chunk covers. For disjoint retrieved
 *   chunks this is |R ∪ H| exactly; overlapping chunks inflate it the same way
 *   they inflate the precision denominator.
 *
 * Each score is 0 when its denominator is 0 (e.g. no reference or nothing
 * retrieved). Means and standard deviations are over questions, the standard
 * deviation being the population one (NumPy's `np.std`), as Chroma reports.
 * These follow `_scores_from_dataset_and_retrievals` in Chroma's
 * `chunking_evaluation` (base_evaluation.py) with `retrieve = k`.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Embedder } from "../embed/contract.js";
import { KnowledgeLayerError } from "../errors.js";

/** A half-open character range `[start, end)` (UTF-16 offsets). */
export interface CharRange {
  start: number;
  end: number;
}

/** A retrieved chunk's range; `foreign` marks a chunk of another corpus than the question's. */
export interface RetrievedRange extends CharRange {
  foreign?: boolean;
}

/** Recall, precision and IoU of one question (each in [0, 1]). */
export interface SpanScores {
  recall: number;
  precision: number;
  iou: number;
}

/** Mean and population standard deviation of a list of values. */
export interface MeanStd {
  mean: number;
  std: number;
}

/**
 * Total length of `ranges`, each counted in full (overlaps are not merged):
 * Chroma's `sum_of_ranges`.
 */
export function sumOfRanges(ranges: readonly CharRange[]): number {
  let total = 0;
  for (const r of ranges) total += r.end - r.start;
  return total;
}

/**
 * Merges overlapping or touching ranges (`next.start <= last.end`) into a
 * sorted list of disjoint ranges: Chroma's `union_ranges`. The input is not modified.
 */
export function unionRanges(ranges: readonly CharRange[]): CharRange[] {
  const sorted = [...ranges].sort((a, b) => a.start - b.start || a.end - b.end);
  const out: CharRange[] = [];
  for (const r of sorted) {
    const last = out[out.length - 1];
    if (last && r.start <= last.end) last.end = Math.max(last.end, r.end);
    else out.push({ start: r.start, end: r.end });
  }
  return out;
}

/**
 * Intersection of two ranges, or `null` when they are apart. Ranges that only
 * touch (`a.end === b.start`) give an empty range, as Chroma's
 * `intersect_two_ranges` does; it adds nothing to any score.
 */
export function intersectRanges(a: CharRange, b: CharRange): CharRange | null {
  const start = Math.max(a.start, b.start);
  const end = Math.min(a.end, b.end);
  return start <= end ? { start, end } : null;
}

/** `ranges` with the characters of `cut` removed (a range may split in two; empty pieces are dropped). */
export function subtractRange(ranges: readonly CharRange[], cut: CharRange): CharRange[] {
  const out: CharRange[] = [];
  for (const r of ranges) {
    if (r.end <= cut.start || r.start >= cut.end || cut.end <= cut.start) {
      out.push({ start: r.start, end: r.end });
      continue;
    }
    if (r.start < cut.start) out.push({ start: r.start, end: cut.start });
    if (r.end > cut.end) out.push({ start: cut.end, end: r.end });
  }
  return out;
}

/**
 * Recall, precision and IoU of the retrieved chunk ranges against the
 * reference ranges of one question, as defined in this module's header
 * (Chroma's definitions: the intersection is a union of per-pair
 * intersections; the precision and IoU denominators sum retrieved chunk
 * lengths without merging overlaps and include `foreign` chunks).
 */
export function spanScores(
  retrieved: readonly RetrievedRange[],
  references: readonly CharRange[],
): SpanScores {
  const pieces: CharRange[] = [];
  let uncovered: CharRange[] = references.map((h) => ({ start: h.start, end: h.end }));
  for (const r of retrieved) {
    if (r.foreign) continue;
    for (const h of references) {
      const i = intersectRanges(r, h);
      if (!i) continue;
      pieces.push(i);
      uncovered = subtractRange(uncovered, i);
    }
  }
  const hit = sumOfRanges(unionRanges(pieces));
  const referenceChars = sumOfRanges(references);
  const retrievedChars = sumOfRanges(retrieved);
  const iouDenominator = retrievedChars + sumOfRanges(uncovered);
  return {
    recall: referenceChars > 0 ? hit / referenceChars : 0,
    precision: retrievedChars > 0 ? hit / retrievedChars : 0,
    iou: iouDenominator > 0 ? hit / iouDenominator : 0,
  };
}

/** Mean and population standard deviation (`np.std`, ddof 0); `{0, 0}` for no values. */
export function meanStd(values: readonly number[]): MeanStd {
  if (values.length === 0) return { mean: 0, std: 0 };
  let sum = 0;
  for (const v of values) sum += v;
  const mean = sum / values.length;
  let sq = 0;
  for (const v of values) sq += (v - mean) * (v - mean);
  return { mean, std: Math.sqrt(sq / values.length) };
}

/** One question of the benchmark. */
export interface ChunkingQuestion {
  question: string;
  /** Corpus the references point into (file name without `.md`). */
  corpusId: string;
  /** Reference spans (the excerpts that answer the question), by offset into the corpus text. */
  references: CharRange[];
}

/** Chroma's chunking benchmark loaded in memory. */
export interface ChunkingDataset {
  /** corpus id → full text. */
  corpora: Map<string, string>;
  /** Questions in file order (only those of loaded corpora). */
  questions: ChunkingQuestion[];
}

/**
 * Parses RFC 4180 CSV: comma-separated fields, fields optionally in double
 * quotes (which may hold commas, line breaks and `""` for a quote), rows ended
 * by LF or CRLF. A trailing empty line is ignored.
 */
export function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = "";
  let quoted = false;
  let i = 0;
  while (i < text.length) {
    const c = text[i] as string;
    if (quoted) {
      if (c === '"') {
        if (text[i + 1] === '"') {
          field += '"';
          i += 2;
          continue;
        }
        quoted = false;
      } else {
        field += c;
      }
      i++;
      continue;
    }
    if (c === '"' && field === "") quoted = true;
    else if (c === ",") {
      row.push(field);
      field = "";
    } else if (c === "\n" || c === "\r") {
      if (c === "\r" && text[i + 1] === "\n") i++;
      row.push(field);
      rows.push(row);
      row = [];
      field = "";
    } else field += c;
    i++;
  }
  if (field !== "" || row.length > 0) {
    row.push(field);
    rows.push(row);
  }
  return rows;
}

/**
 * Loads Chroma's benchmark from `dir` (`corpora/<id>.md` and
 * `questions_df.csv` with columns `question`, `references` — a JSON list of
 * `{content, start_index, end_index}` — and `corpus_id`). With `corpora`, only
 * those corpora and their questions are loaded. Every reference is checked:
 * `corpus.slice(start_index, end_index)` must equal its `content`.
 * @throws KnowledgeLayerError for a missing file, unknown corpus, bad row or a reference that does not match.
 */
export function loadChromaChunkingDataset(
  dir: string,
  options: { corpora?: string[] } = {},
): ChunkingDataset {
  const read = (path: string): string => {
    try {
      return readFileSync(path, "utf8");
    } catch (error) {
      throw new KnowledgeLayerError(`${path}: cannot read (${(error as Error).message})`);
    }
  };
  const csvPath = join(dir, "questions_df.csv");
  const [header, ...rows] = parseCsv(read(csvPath));
  const col = (name: string): number => {
    const i = header?.indexOf(name) ?? -1;
    if (i < 0) throw new KnowledgeLayerError(`${csvPath}: no "${name}" column`);
    return i;
  };
  const [qCol, refCol, corpusCol] = [col("question"), col("references"), col("corpus_id")];
  const wanted = options.corpora ? new Set(options.corpora) : undefined;
  const corpora = new Map<string, string>();
  const questions: ChunkingQuestion[] = [];
  rows.forEach((row, r) => {
    const corpusId = row[corpusCol];
    const question = row[qCol];
    const refs = row[refCol];
    if (corpusId === undefined || question === undefined || refs === undefined) {
      throw new KnowledgeLayerError(`${csvPath}: row ${r + 2} has too few fields`);
    }
    if (wanted && !wanted.has(corpusId)) return;
    let corpus = corpora.get(corpusId);
    if (corpus === undefined) {
      corpus = read(join(dir, "corpora", `${corpusId}.md`));
      corpora.set(corpusId, corpus);
    }
    const parsed = JSON.parse(refs) as { content: string; start_index: number; end_index: number }[];
    const references = parsed.map((ref) => {
      if (corpus.slice(ref.start_index, ref.end_index) !== ref.content) {
        throw new KnowledgeLayerError(
          `${csvPath}: row ${r + 2}: reference [${ref.start_index}, ${ref.end_index}) does not match corpus ${corpusId}`,
        );
      }
      return { start: ref.start_index, end: ref.end_index };
    });
    questions.push({ question, corpusId, references });
  });
  if (wanted) {
    for (const id of wanted) {
      if (!corpora.has(id)) throw new KnowledgeLayerError(`${dir}: no questions for corpus "${id}"`);
    }
  }
  return { corpora, questions };
}

/** Offsets of chunk strings found in their source text by {@link locateChunks}. */
export interface LocatedChunks {
  /** One range per chunk, in input order; `null` for a chunk not found in the text. */
  spans: (CharRange | null)[];
  /** Chunks not found at all. */
  notFound: number;
  /** Chunks found only before the cursor (searching again from offset 0). */
  outOfOrder: number;
}

/**
 * Finds chunk strings that carry no offsets (e.g. LangChain splitter output)
 * in `text`: each chunk is searched with `indexOf` from a moving cursor, one
 * past the previous chunk's start (so overlapping chunks and repeated passages
 * map to successive occurrences); a chunk missing after the cursor is searched
 * again from 0 and counted in `outOfOrder`, one missing everywhere in
 * `notFound`. (Chroma's own `rigorous_document_search` takes the first
 * occurrence in the whole text, drops a trailing `.` from the chunk and falls
 * back to whitespace-insensitive and fuzzy matching; exact substrings — all that
 * LangChain's splitters produce — locate the same either way except for repeats.)
 */
export function locateChunks(text: string, chunks: readonly string[]): LocatedChunks {
  const spans: (CharRange | null)[] = [];
  let cursor = 0;
  let notFound = 0;
  let outOfOrder = 0;
  for (const chunk of chunks) {
    let at = text.indexOf(chunk, cursor);
    if (at < 0) {
      at = text.indexOf(chunk);
      if (at >= 0) outOfOrder++;
    }
    if (at < 0) {
      notFound++;
      spans.push(null);
      continue;
    }
    spans.push({ start: at, end: at + chunk.length });
    cursor = at + 1;
  }
  return { spans, notFound, outOfOrder };
}

/** A retrievable chunk: its span in a corpus and its embedding (unit norm). */
export interface EmbeddedChunk extends CharRange {
  corpusId: string;
  vector: Float32Array;
}

/**
 * Indices of the `k` items of `vectors` (restricted to `candidates` when given)
 * with the highest dot product with `query`, best first; ties keep the lower
 * index first. For unit vectors the dot product is the cosine similarity.
 */
export function topKByCosine(
  query: Float32Array,
  vectors: readonly Float32Array[],
  k: number,
  candidates?: readonly number[],
): number[] {
  if (k <= 0) return [];
  const ids = candidates ?? vectors.map((_, i) => i);
  const best: { i: number; s: number }[] = [];
  for (const i of ids) {
    const v = vectors[i] as Float32Array;
    let s = 0;
    for (let d = 0; d < query.length; d++) s += (query[d] as number) * (v[d] as number);
    if (best.length === k && s <= (best[k - 1] as { s: number }).s) continue;
    let p = best.length;
    while (p > 0 && (best[p - 1] as { s: number }).s < s) p--;
    best.splice(p, 0, { i, s });
    if (best.length > k) best.pop();
  }
  return best.map((b) => b.i);
}

/** Where retrieval looks: only the question's corpus (`corpus`) or all loaded corpora (`all`, as in Chroma's code). */
export type RetrievalScope = "corpus" | "all";

/** Scores of one configuration at one k, over all questions. */
export interface RetrievalScores {
  k: number;
  questions: number;
  recall: MeanStd;
  precision: MeanStd;
  iou: MeanStd;
  /** The per-question scores, in question order. */
  perQuestion: SpanScores[];
}

/**
 * Retrieves the top k chunks for every question (for each k in `ks`) by cosine
 * similarity and scores them with {@link spanScores}. `questionVectors[i]` is
 * the embedding of `questions[i]`. With scope `corpus` (default) only chunks of
 * the question's corpus are candidates; with `all` every chunk is, and chunks of
 * other corpora count as retrieved characters that cover nothing (Chroma's
 * published runs use one collection for all corpora).
 */
export function scoreRetrieval(
  questions: readonly ChunkingQuestion[],
  questionVectors: readonly Float32Array[],
  chunks: readonly EmbeddedChunk[],
  ks: readonly number[],
  scope: RetrievalScope = "corpus",
): RetrievalScores[] {
  const vectors = chunks.map((c) => c.vector);
  const byCorpus = new Map<string, number[]>();
  chunks.forEach((c, i) => {
    const list = byCorpus.get(c.corpusId) ?? [];
    list.push(i);
    byCorpus.set(c.corpusId, list);
  });
  const maxK = Math.max(0, ...ks);
  const perK = ks.map(() => [] as SpanScores[]);
  questions.forEach((q, qi) => {
    const query = questionVectors[qi];
    if (!query) throw new KnowledgeLayerError(`no embedding for question ${qi}`);
    const candidates = scope === "corpus" ? (byCorpus.get(q.corpusId) ?? []) : undefined;
    const ranked = topKByCosine(query, vectors, maxK, candidates);
    ks.forEach((k, ki) => {
      const retrieved = ranked.slice(0, k).map((i) => {
        const c = chunks[i] as EmbeddedChunk;
        return { start: c.start, end: c.end, foreign: c.corpusId !== q.corpusId };
      });
      perK[ki]?.push(spanScores(retrieved, q.references));
    });
  });
  return ks.map((k, ki) => {
    const scores = perK[ki] ?? [];
    return {
      k,
      questions: scores.length,
      recall: meanStd(scores.map((s) => s.recall)),
      precision: meanStd(scores.map((s) => s.precision)),
      iou: meanStd(scores.map((s) => s.iou)),
      perQuestion: scores,
    };
  });
}

/**
 * Embeds `texts` with `embedder` (duplicates once) and returns the vectors in
 * input order. Passes `onProgress` through when the embedder reports progress
 * (as `CachedEmbedder` does).
 */
export async function embedAll(
  embedder: Embedder,
  texts: readonly string[],
  onProgress?: (done: number, total: number) => void,
): Promise<Float32Array[]> {
  const unique = [...new Set(texts)];
  const embed = embedder.embedTexts.bind(embedder) as (
    texts: string[],
    onProgress?: (done: number, total: number) => void,
  ) => Promise<Float32Array[]>;
  const vectors = await embed(unique, onProgress);
  const byText = new Map(unique.map((t, i) => [t, vectors[i] as Float32Array]));
  return texts.map((t) => byText.get(t) as Float32Array);
}
