/**
 * SentencePiece (unigram) tokenizer for Universal Sentence Encoder lite.
 *
 * A fast, token-for-token re-implementation of the tokenizer that ships with
 * `@tensorflow-models/universal-sentence-encoder` and `@energetic-ai/embeddings`
 * (both Apache-2.0, Google LLC / Jonathan Wilde). Those versions copy the
 * remaining input at every position (quadratic in the text length), which
 * costs ~9 ms per 1,500-character document; this one walks a trie of at most
 * 16 symbols per position and stops reading once the model's 128-token window
 * is full. Their quirks are kept on purpose so the ids, and hence the vectors,
 * are identical: scores of `null` count as 0, a running best score of exactly
 * 0 counts as "unset", ties go to the shorter last piece, consecutive unknown
 * symbols merge into one id 0.
 */

/** Word-boundary marker SentencePiece puts in place of every space (U+2581). */
const SEPARATOR = 0x2581;
/** The space (U+0020), the only character upstream replaces by {@link SEPARATOR}. */
const SPACE = 0x20;
/** Whether `text` is ASCII only, which NFKC leaves unchanged. */
function isAscii(text: string): boolean {
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) > 0x7f) return false;
  return true;
}
/** Ids 0-5 are `<unk>`-like control symbols and never match text. */
const RESERVED_SYMBOLS_COUNT = 6;
/** Id emitted for a symbol no vocabulary piece starts with. */
const UNKNOWN_ID = 0;

/**
 * Tokens the USE-lite graph reads per text: its `ClipToMaxLength` step drops
 * every token at position >= 128, so text past that window does not change
 * the vector.
 */
export const USE_MAX_TOKENS = 128;

/**
 * The vocabulary as shipped in `vocab.json`: one `[piece, log-probability]`
 * pair per id (8,000 for USE lite). A few scores are `null` and count as 0.
 */
export type UseVocabulary = ReadonlyArray<readonly [string, number | null]>;

interface TrieNode {
  /** Children by the code point of the next symbol. */
  readonly children: Map<number, TrieNode>;
  /** Vocabulary id of the piece ending here, or -1. */
  id: number;
  score: number;
}

function newNode(): TrieNode {
  return { children: new Map(), id: -1, score: 0 };
}

/**
 * Encodes text into USE-lite token ids.
 *
 * Input is NFKC-normalised, a `▁` is prepended and every space (U+0020 only,
 * as upstream) becomes `▁`; the best-scoring segmentation into vocabulary
 * pieces is found by Viterbi search.
 */
export class UseTokenizer {
  private readonly root: TrieNode = newNode();
  /** Length in UTF-16 units of each piece, used to walk the best path back. */
  private readonly pieceLengths: number[];

  /**
   * @param vocabulary the `vocab.json` array of `[piece, score]`.
   * @throws Error if the vocabulary is empty.
   */
  constructor(vocabulary: UseVocabulary) {
    if (vocabulary.length <= RESERVED_SYMBOLS_COUNT) {
      throw new Error(`USE vocabulary has ${vocabulary.length} entries; expected several thousand`);
    }
    this.pieceLengths = vocabulary.map(([piece]) => piece.length);
    for (let id = RESERVED_SYMBOLS_COUNT; id < vocabulary.length; id++) {
      const entry = vocabulary[id];
      if (entry === undefined) continue;
      let node = this.root;
      for (const symbol of entry[0]) {
        const code = symbol.codePointAt(0) as number;
        let child = node.children.get(code);
        if (child === undefined) {
          child = newNode();
          node.children.set(code, child);
        }
        node = child;
      }
      // A later duplicate piece overwrites an earlier one, as upstream.
      node.id = id;
      node.score = entry[1] ?? 0;
    }
  }

  /**
   * Token ids of `text`, in order.
   *
   * @param text any string; `""` gives `[]`.
   * @param maxTokens return at most this many ids (the first ones). Text past
   *   the word where the limit is reached is not read. The result equals the
   *   first `maxTokens` ids of the unlimited encoding, because no piece spans
   *   a `▁` word boundary.
   * @returns vocabulary ids in `[0, vocabulary.length)`.
   */
  encode(text: string, maxTokens: number = Number.POSITIVE_INFINITY): number[] {
    const normalized = isAscii(text) ? text : text.normalize("NFKC");
    if (normalized.length === 0 || maxTokens <= 0) return [];

    // Code points of "▁" + text with every space as "▁", stopping at the
    // (maxTokens + 1)-th word start: each word yields at least one id, so that
    // prefix holds enough ids, and its segmentation is the same as within the full text.
    const symbols = new Int32Array(normalized.length + 1);
    let n = 0;
    let words = 1;
    symbols[n++] = SEPARATOR;
    for (let i = 0; i < normalized.length; i++) {
      let code = normalized.charCodeAt(i);
      if (code >= 0xd800 && code <= 0xdbff && i + 1 < normalized.length) {
        const low = normalized.charCodeAt(i + 1);
        if (low >= 0xdc00 && low <= 0xdfff) {
          code = ((code - 0xd800) << 10) + (low - 0xdc00) + 0x10000;
          i++;
        }
      }
      if (code === SPACE) code = SEPARATOR;
      if (code === SEPARATOR && ++words > maxTokens) break;
      symbols[n++] = code;
    }

    const best = new Float64Array(n + 1);
    const bestId = new Int32Array(n + 1);
    // Forward relaxation in increasing start position reproduces upstream's
    // order: for each end position it considers candidate pieces by
    // increasing start, replacing the best on `>=` or when the best is 0.
    for (let start = 0; start < n; start++) {
      const base = best[start] ?? 0;
      let node = this.root.children.get(symbols[start] as number);
      let matched = false;
      for (let end = start + 1; node !== undefined; end++) {
        if (node.id >= 0) {
          matched = true;
          const score = node.score + base;
          const current = best[end] ?? 0;
          if (current === 0 || score >= current) {
            best[end] = score;
            bestId[end] = node.id;
          }
        }
        if (end >= n) break;
        node = node.children.get(symbols[end] as number);
      }
      if (!matched) {
        const end = start + 1;
        const current = best[end] ?? 0;
        if (current === 0 || base >= current) {
          best[end] = base;
          bestId[end] = UNKNOWN_ID;
        }
      }
    }

    const reversed: number[] = [];
    for (let pos = n; pos > 0; ) {
      const id = bestId[pos] ?? UNKNOWN_ID;
      reversed.push(id);
      pos -= this.pieceLengths[id] ?? 1;
    }
    // Upstream merges runs of unknown ids while walking the reversed list.
    const merged: number[] = [];
    let previousUnknown = false;
    for (const id of reversed) {
      if (!(previousUnknown && id === UNKNOWN_ID)) merged.push(id);
      previousUnknown = id === UNKNOWN_ID;
    }
    merged.reverse();
    return merged.length > maxTokens ? merged.slice(0, maxTokens) : merged;
  }
}
