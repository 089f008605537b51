import { tokenize } from "./tokenizer.js";

/** Normalised token set of a text for near-duplicate detection (no stemming, stop words kept; CJK words count). */
export function tokenSet(text: string): Set<string> {
  return new Set(tokenize(text, { stem: false, stopWords: false }));
}

/**
 * Jaccard similarity |A ∩ B| / |A ∪ B| of two token sets, in [0, 1].
 * Two empty sets have similarity 0: empty texts are not duplicates of each other.
 */
export function jaccard(a: ReadonlySet<string>, b: ReadonlySet<string>): number {
  if (a.size === 0 || b.size === 0) return 0;
  const [small, large] = a.size <= b.size ? [a, b] : [b, a];
  let inter = 0;
  for (const t of small) if (large.has(t)) inter++;
  return inter / (a.size + b.size - inter);
}

/**
 * Removes near-duplicates from a ranked list, keeping the first (best-ranked)
 * of each group: an item is dropped when its token-set Jaccard similarity with
 * an already kept item is ≥ `threshold` (default 0.9). Order is preserved.
 */
export function removeNearDuplicates<T>(
  items: readonly T[],
  textOf: (item: T) => string,
  threshold = 0.9,
): T[] {
  const kept: { item: T; tokens: Set<string> }[] = [];
  for (const item of items) {
    const tokens = tokenSet(textOf(item));
    if (kept.some((k) => jaccard(k.tokens, tokens) >= threshold)) continue;
    kept.push({ item, tokens });
  }
  return kept.map((k) => k.item);
}
