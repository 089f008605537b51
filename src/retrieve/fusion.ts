/**
 * Rank and score fusion of several ranked lists (e.g. vector and BM25 candidates):
 * reciprocal rank fusion ({@link reciprocalRankFusion}) and weighted fusion of
 * normalised scores ({@link weightedScoreFusion}, {@link normalizeScores}).
 *
 * Common rules:
 * - a weight must be finite and ≥ 0; a weight of 0 means the list contributes 0
 *   (its ids still appear in the output, with no score from it);
 * - an id that repeats within one list counts once, at its first (best) position;
 * - the output is sorted by fused score descending, ties broken by the best 1-based
 *   rank the id has in any list, then by first appearance (list order, then position),
 *   so equal inputs always give the same order.
 */

/** A ranked list of ids, best first, as input to {@link reciprocalRankFusion}. */
export interface RankedList {
  ids: readonly string[];
  /** Weight of this list in the fused score (≥ 0). Default 1; 0 means the list contributes nothing. */
  weight?: number;
}

/** A fused result: id, fused score, and its 1-based rank in each input list (`undefined` if absent). */
export interface FusedItem {
  id: string;
  /** Fused score; larger is better. */
  score: number;
  /** 1-based rank in each input list, in input order; `undefined` where the id is absent. */
  ranks: (number | undefined)[];
}

/** Options of {@link reciprocalRankFusion}. */
export interface RrfOptions {
  /** Smoothing constant k (≥ 0). Default 60, as in Cormack et al. 2009. */
  k?: number;
  /**
   * One weight per list (≥ 0), overriding each list's own `weight`. Must have one
   * entry per list. Default: each list's `weight`, else 1.
   */
  weights?: readonly number[];
}

/** The default RRF constant k = 60 (Cormack, Clarke & Büttcher 2009). */
export const DEFAULT_RRF_K = 60;

/**
 * Reciprocal rank fusion (Cormack, Clarke & Büttcher, "Reciprocal Rank Fusion
 * outperforms Condorcet and individual Rank Learning Methods", SIGIR 2009):
 * `score(d) = Σ_lists weight_i / (k + rank_i(d))`, with 1-based ranks, summed over
 * the lists that contain `d`. Only ranks matter; the lists' own scores are ignored.
 *
 * Ties are broken by the best rank in any list, then by first appearance (list
 * order, then position), so the output is deterministic.
 *
 * @param lists ranked lists, best first: `RankedList` objects or plain id arrays (weight 1).
 * @param options `{ k, weights }`, or just `k` as a number (default 60).
 * @returns every id of every list, best first.
 * @throws RangeError when k is negative or not a number, when a weight is negative or not
 *   finite, or when `weights` does not have one entry per list.
 */
export function reciprocalRankFusion(
  lists: readonly (RankedList | readonly string[])[],
  options: number | RrfOptions = {},
): FusedItem[] {
  const k = typeof options === "number" ? options : (options.k ?? DEFAULT_RRF_K);
  if (!(k >= 0) || k === Number.POSITIVE_INFINITY) throw new RangeError(`RRF k must be >= 0 (got ${k})`);
  const normalized = lists.map((l) => (isIdArray(l) ? { ids: l } : l));
  const weights = resolveWeights(
    normalized.map((l) => l.weight),
    typeof options === "number" ? undefined : options.weights,
  );
  const items = new Map<string, Accumulator>();
  let order = 0;
  normalized.forEach((list, li) => {
    const weight = weights[li] as number;
    list.ids.forEach((id, position) => {
      const rank = position + 1;
      let item = items.get(id);
      if (!item) {
        item = { id, score: 0, ranks: normalized.map(() => undefined), first: order++, best: rank };
        items.set(id, item);
      }
      if (item.ranks[li] !== undefined) return; // an id counts once per list, at its best rank
      item.ranks[li] = rank;
      item.best = Math.min(item.best, rank);
      item.score += weight / (k + rank);
    });
  });
  return sortFused([...items.values()]).map(({ id, score, ranks }) => ({ id, score, ranks }));
}

/** A scored hit, as input to {@link normalizeScores} and {@link weightedScoreFusion}. */
export interface ScoredItem {
  id: string;
  /** Raw score in the list's own units (cosine similarity, BM25, ...); must be finite. */
  score: number;
}

/**
 * Score normalisation:
 * - `minmax`: `(s − min) / (max − min)`, in [0, 1]; when every score is equal (including a
 *   single hit) every score becomes 1, since each is the best of its list;
 * - `zscore`: `(s − mean) / σ` with the population standard deviation σ; when σ = 0
 *   (a single hit, all tied) every score becomes 0;
 * - `none`: scores unchanged.
 */
export type ScoreNormalization = "minmax" | "zscore" | "none";

/**
 * Normalises the scores of one list so lists in different units (cosine, BM25) can be
 * mixed; see {@link ScoreNormalization} for the formulas. Returns a new list in the
 * same order with the same ids. Equal raw scores always map to equal normalised
 * scores, and the result never contains NaN or ±Infinity. An empty list gives [].
 * @throws RangeError when a score is NaN or ±Infinity.
 */
export function normalizeScores(
  list: readonly ScoredItem[],
  method: ScoreNormalization = "minmax",
): ScoredItem[] {
  for (const item of list) {
    if (!Number.isFinite(item.score)) {
      throw new RangeError(`score of "${item.id}" must be a finite number (got ${item.score})`);
    }
  }
  if (list.length === 0 || method === "none") return list.map(({ id, score }) => ({ id, score }));
  if (method === "minmax") {
    let min = Number.POSITIVE_INFINITY;
    let max = Number.NEGATIVE_INFINITY;
    for (const { score } of list) {
      min = Math.min(min, score);
      max = Math.max(max, score);
    }
    if (max === min) return list.map(({ id }) => ({ id, score: 1 }));
    // Halving keeps max − min finite even for scores near ±Number.MAX_VALUE.
    const range = max - min;
    const scale = Number.isFinite(range) ? 1 : 0.5;
    const span = max * scale - min * scale;
    return list.map(({ id, score }) => ({ id, score: clamp01((score * scale - min * scale) / span) }));
  }
  if (method === "zscore") {
    const n = list.length;
    const mean = list.reduce((s, x) => s + x.score, 0) / n;
    const variance = list.reduce((s, x) => s + (x.score - mean) ** 2, 0) / n;
    const sd = Math.sqrt(variance);
    if (!(sd > 0) || !Number.isFinite(sd)) return list.map(({ id }) => ({ id, score: 0 }));
    return list.map(({ id, score }) => ({ id, score: (score - mean) / sd }));
  }
  throw new RangeError(`unknown score normalisation "${String(method)}"; use minmax, zscore or none`);
}

/** A scored list with an optional weight, as input to {@link weightedScoreFusion}. */
export interface ScoredList {
  items: readonly ScoredItem[];
  /** Weight of this list (≥ 0). Default 1; 0 means the list contributes nothing. */
  weight?: number;
}

/** Options of {@link weightedScoreFusion}. */
export interface ScoreFusionOptions {
  /** One weight per list (≥ 0), overriding each list's own `weight`. Default: the list's, else 1. */
  weights?: readonly number[];
  /** Normalisation applied to each list before mixing. Default `minmax`. */
  normalization?: ScoreNormalization;
}

/** A result of {@link weightedScoreFusion}: a {@link FusedItem} plus its normalised score per list. */
export interface ScoreFusedItem extends FusedItem {
  /** Normalised score in each input list, in input order; `undefined` where the id is absent. */
  normalized: (number | undefined)[];
}

/**
 * Weighted score fusion ("convex combination", Bruch, Gai & Ingber, "An Analysis of
 * Fusion Functions for Hybrid Retrieval", ACM TOIS 2023): each list is normalised
 * ({@link normalizeScores}, default min-max) and
 * `score(d) = Σ_lists weight_i · normalised_i(d)`, where a list that does not
 * contain `d` contributes 0. Weights are used as given (not rescaled to sum to 1);
 * pass weights summing to 1 for a convex combination in [0, 1] (with min-max).
 * With z-scores, note that a missing document's 0 equals the list's mean.
 *
 * Ranks in the output are positions in the input lists as given (1-based). Ties are
 * broken by best rank in any list, then first appearance. Never NaN.
 *
 * @param lists scored lists (`ScoredList` objects or plain `ScoredItem` arrays, weight 1).
 * @param options `{ weights, normalization }`, or just the weights array.
 * @returns every id of every list, best first.
 * @throws RangeError for a non-finite score, a negative or non-finite weight, or a
 *   `weights` array without one entry per list.
 */
export function weightedScoreFusion(
  lists: readonly (ScoredList | readonly ScoredItem[])[],
  options: readonly number[] | ScoreFusionOptions = {},
): ScoreFusedItem[] {
  const opts: ScoreFusionOptions = isNumberArray(options) ? { weights: options } : options;
  const normalized = lists.map((l) => (isScoredArray(l) ? { items: l } : l));
  const weights = resolveWeights(
    normalized.map((l) => l.weight),
    opts.weights,
  );
  const items = new Map<string, Accumulator & { normalized: (number | undefined)[] }>();
  let order = 0;
  normalized.forEach((list, li) => {
    const weight = weights[li] as number;
    normalizeScores(list.items, opts.normalization ?? "minmax").forEach(({ id, score }, position) => {
      const rank = position + 1;
      let item = items.get(id);
      if (!item) {
        const empty = (): undefined[] => normalized.map(() => undefined);
        item = { id, score: 0, ranks: empty(), normalized: empty(), first: order++, best: rank };
        items.set(id, item);
      }
      if (item.ranks[li] !== undefined) return; // first entry of an id in a list wins
      item.ranks[li] = rank;
      item.normalized[li] = score;
      item.best = Math.min(item.best, rank);
      if (weight !== 0) item.score += weight * score;
    });
  });
  return sortFused([...items.values()]).map(({ id, score, ranks, normalized: n }) => ({
    id,
    score,
    ranks,
    normalized: n,
  }));
}

interface Accumulator extends FusedItem {
  /** Order of first appearance over all lists. */
  first: number;
  /** Best 1-based rank in any list. */
  best: number;
}

function sortFused<T extends Accumulator>(items: T[]): T[] {
  return items.sort((a, b) => b.score - a.score || a.best - b.best || a.first - b.first);
}

function resolveWeights(
  own: readonly (number | undefined)[],
  override: readonly number[] | undefined,
): number[] {
  if (override !== undefined && override.length !== own.length) {
    throw new RangeError(`expected ${own.length} weights, one per list (got ${override.length})`);
  }
  return own.map((w, i) => {
    const weight = override?.[i] ?? w ?? 1;
    if (!(weight >= 0) || !Number.isFinite(weight)) {
      throw new RangeError(`weight of list ${i} must be a finite number >= 0 (got ${weight})`);
    }
    return weight;
  });
}

function clamp01(x: number): number {
  return Math.max(0, Math.min(1, x));
}

function isIdArray(l: RankedList | readonly string[]): l is readonly string[] {
  return Array.isArray(l);
}

function isScoredArray(l: ScoredList | readonly ScoredItem[]): l is readonly ScoredItem[] {
  return Array.isArray(l);
}

function isNumberArray(o: readonly number[] | ScoreFusionOptions): o is readonly number[] {
  return Array.isArray(o);
}
