/**
 * Plumbing shared by the rerankers: option checks, duplicate folding, ordering
 * and the error/abort policy of the contract (see contract.ts).
 */
import { RerankError, type RerankOptions, type RerankScore } from "./contract.js";

/**
 * Checks `topN` (`undefined`/`null` → all; otherwise a non-negative integer).
 * @throws RerankError naming `topN` when it is negative, fractional or not a number.
 */
export function checkTopN(reranker: string, topN: number | null | undefined): void {
  if (topN === undefined || topN === null) return;
  if (typeof topN !== "number" || !Number.isInteger(topN) || topN < 0) {
    throw new RerankError(reranker, `topN must be a non-negative integer, got ${String(topN)}`);
  }
}

/** Distinct texts of `docs` in first-seen order, and for each doc the position of its text in `texts`. */
export function foldDuplicates(docs: readonly string[]): { texts: string[]; slot: number[] } {
  const seen = new Map<string, number>();
  const texts: string[] = [];
  const slot = docs.map((d) => {
    let k = seen.get(d);
    if (k === undefined) {
      k = texts.length;
      seen.set(d, k);
      texts.push(d);
    }
    return k;
  });
  return { texts, slot };
}

/**
 * Orders per-document scores: score descending, ties by index ascending,
 * cut to `topN` (undefined → all).
 */
export function orderScores(scores: readonly number[], topN?: number | null): RerankScore[] {
  const out = scores.map((score, index) => ({ index, score }));
  out.sort((a, b) => b.score - a.score || a.index - b.index);
  return topN === undefined || topN === null ? out : out.slice(0, topN);
}

/** Rejects with the abort reason when `signal` is aborted. */
export function throwIfAborted(signal: AbortSignal | undefined): void {
  signal?.throwIfAborted();
}

/** True when `error` is the abort reason of `signal` (the call was cancelled by the caller). */
export function isAbortOf(signal: AbortSignal | undefined, error: unknown): boolean {
  return signal?.aborted === true && error === signal.reason;
}

export { sleep } from "../http.js";

/** Short description of an unknown thrown value, for error messages. */
export function describeError(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Runs the contract around a scoring function that sees each distinct text once:
 * validates `topN`, honours the signal, returns `[]` for no documents or
 * `topN: 0` without scoring, checks that every score is a finite number in
 * [0, 1], gives duplicates the score of their text, orders and cuts.
 * Errors other than the caller's abort are wrapped in a {@link RerankError}
 * (a RerankError passes through unchanged).
 */
export async function rerankDistinct(
  reranker: string,
  docs: readonly string[],
  options: RerankOptions | undefined,
  score: (texts: string[]) => Promise<number[]>,
): Promise<RerankScore[]> {
  const topN = options?.topN;
  const signal = options?.signal;
  checkTopN(reranker, topN);
  throwIfAborted(signal);
  if (docs.length === 0 || topN === 0) return [];
  const { texts, slot } = foldDuplicates(docs);
  let distinct: number[];
  try {
    distinct = await score(texts);
  } catch (error) {
    if (isAbortOf(signal, error) || error instanceof RerankError) throw error;
    throw new RerankError(reranker, describeError(error), { cause: error });
  }
  throwIfAborted(signal);
  if (distinct.length !== texts.length) {
    throw new RerankError(reranker, `expected ${texts.length} scores, got ${distinct.length}`);
  }
  for (const s of distinct) {
    if (typeof s !== "number" || !Number.isFinite(s) || s < 0 || s > 1) {
      throw new RerankError(reranker, `score ${String(s)} is not a finite number in [0, 1]`);
    }
  }
  return orderScores(
    slot.map((k) => distinct[k] as number),
    topN,
  );
}

/** Logistic sigmoid 1 / (1 + e^−x), computed without overflow for large |x|. */
export function sigmoid(x: number): number {
  if (x >= 0) return 1 / (1 + Math.exp(-x));
  const e = Math.exp(x);
  return e / (1 + e);
}
