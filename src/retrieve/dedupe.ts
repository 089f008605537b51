/**
 * Near-duplicate removal for ranked results: token-set Jaccard similarity
 * (Broder 1997, "On the resemblance and containment of documents", with whole
 * tokens instead of shingles), first occurrence wins.
 */

// Unicode word runs: letters, digits and marks; everything else (punctuation, symbols, space) separates.
const WORD_RUN = /[\p{L}\p{N}\p{M}]+/gu;
// Chinese, Japanese and Korean characters: each one is a token.
const CJK_CHAR = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}]/u;
const CJK_SPLIT = /([\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}])/u;

/** The default Jaccard threshold of {@link removeNearDuplicates}: 0.9. */
export const DEFAULT_DEDUP_THRESHOLD = 0.9;

/**
 * Normalised token set of a text for near-duplicate detection: NFKC, lower case,
 * Unicode word runs (letters, digits, marks) with all punctuation stripped; every
 * Chinese, Japanese or Korean character is a token of its own. No stemming, stop
 * words kept. Punctuation-only or empty text gives the empty set.
 */
export function tokenSet(text: string): Set<string> {
  const known = tokenSets.get(text);
  if (known) return known;
  const out = computeTokenSet(text);
  if (tokenSets.size >= TOKEN_SET_CACHE) tokenSets.clear();
  tokenSets.set(text, out);
  return out;
}

/** Token sets kept by {@link tokenSet} (search dedupes the same popular chunks query after query). */
const TOKEN_SET_CACHE = 4096;
const tokenSets = new Map<string, Set<string>>();

function computeTokenSet(text: string): Set<string> {
  const out = new Set<string>();
  for (const [run] of text.normalize("NFKC").toLowerCase().matchAll(WORD_RUN)) {
    if (!CJK_CHAR.test(run)) {
      out.add(run);
      continue;
    }
    // Split keeps the captured CJK characters; the pieces between them are non-CJK words.
    for (const piece of run.split(CJK_SPLIT)) if (piece.length > 0) out.add(piece);
  }
  return out;
}

/**
 * Jaccard similarity |A ∩ B| / |A ∪ B| of two token sets, in [0, 1].
 * When either set is empty the similarity is 0: empty token sets are not similar to
 * anything, not even to each other. Never NaN.
 */
export function jaccard(a: ReadonlySet<string>, b: ReadonlySet<string>): number {
  if (a.size === 0 || b.size === 0) return 0;
  const [small, large] = a.size <= b.size ? [a, b] : [b, a];
  let inter = 0;
  for (const t of small) if (large.has(t)) inter++;
  return inter / (a.size + b.size - inter);
}

/**
 * Removes near-duplicates from a ranked list, keeping the first (best-ranked) item of
 * each group; order is preserved. An item is dropped when:
 * - its text is empty or whitespace only (no content to show);
 * - its trimmed text equals that of a kept item (exact duplicate, whatever its tokens); or
 * - both token sets ({@link tokenSet}) are non-empty and their {@link jaccard} similarity
 *   with a kept item is ≥ `threshold`.
 * So texts without word tokens (`---`, `***`) are duplicates only when identical.
 * Quadratic in the number of kept items; meant for result lists (tens to hundreds).
 *
 * @param textOf the text of an item.
 * @param threshold Jaccard threshold in (0, 1], default 0.9.
 * @throws RangeError when the threshold is not in (0, 1].
 */
export function removeNearDuplicates<T>(
  items: readonly T[],
  textOf: (item: T) => string,
  threshold = DEFAULT_DEDUP_THRESHOLD,
): T[] {
  if (!(threshold > 0 && threshold <= 1)) {
    throw new RangeError(`dedup threshold must be in (0, 1] (got ${threshold})`);
  }
  const kept: { item: T; tokens: Set<string> }[] = [];
  const keptTexts = new Set<string>();
  for (const item of items) {
    const trimmed = textOf(item).trim();
    if (trimmed.length === 0 || keptTexts.has(trimmed)) continue;
    const tokens = tokenSet(trimmed);
    if (tokens.size > 0 && kept.some((k) => jaccard(k.tokens, tokens) >= threshold)) continue;
    kept.push({ item, tokens });
    keptTexts.add(trimmed);
  }
  return kept.map((k) => k.item);
}
