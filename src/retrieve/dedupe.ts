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
 *
 * Only kept items that can reach the threshold are compared (the decisions are those of
 * comparing with every kept item): with the tokens of every set in one global order (rarest
 * in the list first), two sets of Jaccard similarity ≥ t share a token among the first
 * |A| − ⌈t·|A|⌉ + 1 of each (prefix filtering, Chaudhuri, Ganti & Kaushik 2006; Bayardo, Ma &
 * Srikant 2007, "Scaling up all pairs similarity search"), and their sizes are within a
 * factor t (size filtering). Kept items are indexed by their prefix tokens, so a list of
 * thousands of results costs about what a short one costs per item, not a scan of every
 * kept item per item.
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
  const texts = items.map((item) => textOf(item).trim());
  const sets = texts.map((text) => (text.length === 0 ? EMPTY_SET : tokenSet(text)));
  // The global token order: rarest in this list first, then by code units (deterministic).
  const frequency = new Map<string, number>();
  for (const set of sets) for (const token of set) frequency.set(token, (frequency.get(token) ?? 0) + 1);
  const byRarity = (x: string, y: string) =>
    (frequency.get(x) as number) - (frequency.get(y) as number) || (x < y ? -1 : x > y ? 1 : 0);
  const kept: T[] = [];
  const keptTexts = new Set<string>();
  /** Kept items' token sets by the tokens of their prefixes. */
  const byPrefixToken = new Map<string, Set<string>[]>();
  for (let i = 0; i < items.length; i++) {
    const trimmed = texts[i] as string;
    if (trimmed.length === 0 || keptTexts.has(trimmed)) continue;
    const tokens = sets[i] as Set<string>;
    let prefix: string[] = [];
    if (tokens.size > 0) {
      // ⌈t·|A|⌉, rounded down a hair so float error can only lengthen the prefix (still exact).
      const prefixLength = tokens.size - Math.ceil(threshold * tokens.size - 1e-9) + 1;
      prefix = [...tokens].sort(byRarity).slice(0, prefixLength);
      if (isNearDuplicate(tokens, prefix, byPrefixToken, threshold)) continue;
    }
    kept.push(items[i] as T);
    keptTexts.add(trimmed);
    for (const token of prefix) {
      const list = byPrefixToken.get(token);
      if (list) list.push(tokens);
      else byPrefixToken.set(token, [tokens]);
    }
  }
  return kept;
}

const EMPTY_SET: ReadonlySet<string> = new Set<string>();

/** Does a kept set sharing a prefix token with `tokens` reach the threshold? */
function isNearDuplicate(
  tokens: ReadonlySet<string>,
  prefix: readonly string[],
  byPrefixToken: ReadonlyMap<string, Set<string>[]>,
  threshold: number,
): boolean {
  const seen = new Set<Set<string>>();
  const smallest = threshold * tokens.size - 1e-9;
  const largest = tokens.size / threshold + 1e-9;
  for (const token of prefix) {
    for (const other of byPrefixToken.get(token) ?? []) {
      if (seen.has(other)) continue;
      seen.add(other);
      if (other.size < smallest || other.size > largest) continue;
      if (jaccard(other, tokens) >= threshold) return true;
    }
  }
  return false;
}
