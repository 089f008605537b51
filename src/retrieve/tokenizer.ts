import { stemmer } from "stemmer";

/**
 * English stop words removed before BM25 scoring: Lucene's default English stop
 * set (`EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`), the one behind the published
 * BEIR BM25 baselines.
 */
export const ENGLISH_STOP_WORDS: ReadonlySet<string> = new Set(
  (
    "a an and are as at be but by for if in into is it no not of on or such that the their then there " +
    "these they this to was will with"
  ).split(" "),
);

/**
 * Named analyzers for BM25:
 * - `english` (default): stop words removed, Porter stemming — best on SciFact (nDCG@10 0.683);
 * - `standard`: no stemming, no stop words, like Elasticsearch's `standard` analyzer behind the
 *   published BEIR BM25 figures (SciFact 0.665; this implementation 0.667).
 *
 * Both segment Chinese, Japanese and Korean text with {@link DEFAULT_CJK_SEGMENTATION}.
 */
export type Analyzer = "english" | "standard";

/** Every {@link Analyzer} name, for validation and CLI choices. */
export const ANALYZERS: readonly Analyzer[] = ["english", "standard"];

/** Tokenizer options of a named analyzer. */
export function analyzerOptions(analyzer: Analyzer): TokenizeOptions {
  return analyzer === "standard" ? { stem: false, stopWords: false } : { stem: true, stopWords: true };
}

/**
 * How runs of Han, Hiragana, Katakana and Hangul characters become terms:
 * - `bigram`: overlapping character bigrams (`机器学习` → `机器 器学 学习`); a run of one
 *   character is kept as a unigram. This is Lucene's `CJKBigramFilter`, the analyzer behind the
 *   usual BM25 baselines for Chinese, Japanese and Korean.
 * - `word`: dictionary word segmentation by `Intl.Segmenter` (ICU, word granularity), keeping the
 *   word-like segments.
 * - `unigram+bigram`: every character and every bigram (Lucene's `CJKBigramFilter` with
 *   `outputUnigrams`).
 */
export type CjkSegmentation = "bigram" | "word" | "unigram+bigram";

/** Every {@link CjkSegmentation}. */
export const CJK_SEGMENTATIONS: readonly CjkSegmentation[] = ["bigram", "word", "unigram+bigram"];

/**
 * CJK segmentation used unless {@link TokenizeOptions.cjk} says otherwise: `word`.
 * Measured with `bench/bm25-cjk.ts` (BM25 k1 1.2, b 0.75, nDCG@10):
 * CMRC 2018 dev (3,219 queries) word 0.9874, unigram+bigram 0.9850, bigram 0.9835
 * (word vs bigram: paired t = 2.7); XQuAD-zh (1,190 queries) unigram+bigram 0.9664,
 * bigram 0.9637, word 0.9607 (differences not significant, t < 2). `word` also gives a
 * 4–5× smaller vocabulary. Caveat: its segments come from the ICU dictionary bundled
 * with Node, so a Node upgrade with a new ICU may segment a few queries differently
 * from text indexed before it; bigrams do not depend on ICU.
 */
export const DEFAULT_CJK_SEGMENTATION: CjkSegmentation = "word";

/** Options for {@link tokenize}. */
export interface TokenizeOptions {
  /** Apply the Porter stemmer to purely alphabetic Latin words of 3+ letters. Default true. */
  stem?: boolean;
  /** Drop {@link ENGLISH_STOP_WORDS}. Default true. */
  stopWords?: boolean;
  /** Segmentation of CJK runs. Default {@link DEFAULT_CJK_SEGMENTATION}. */
  cjk?: CjkSegmentation;
}

// A word: letters/digits/marks, optionally joined by _ - . ' / : (identifiers, ids, versions).
// Trailing punctuation is never part of a word: a joiner must be followed by a letter or digit.
const WORD = /[\p{L}\p{N}\p{M}]+(?:[_\-.'’/:][\p{L}\p{N}\p{M}]+)*/gu;
/** {@link WORD} restricted to lower-case ASCII text, where it matches exactly the same words. */
const ASCII_WORD = /[a-z0-9]+(?:[_\-.'/:][a-z0-9]+)*/g;
const NON_ASCII = /[\u0080-\uffff]/;
const CJK = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}]/u;
const CJK_RUN = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}]+/gu;
const LATIN_ALPHA = /^[a-z]+$/;
const JOINER = /[_\-.'’/:]/;
const JOINERS = /[_\-.'’/:]+/;
const EDGE_JOINERS = /^[_\-.'’/:]+|[_\-.'’/:]+$/g;
const segmenter = new Intl.Segmenter("zh", { granularity: "word" });

/**
 * Splits text into index terms for BM25.
 *
 * - NFKC normalisation, then lower case (`Überläufe` → `überläufe`; non-ASCII letters are kept).
 * - Words are runs of Unicode letters, digits and marks; punctuation around them is dropped
 *   (`outage.` → `outage`), and a trailing possessive `'s` is removed.
 * - Identifiers joined by `_ - . ' / :` (`user_id`, `RFC-9110`, `v1.2.3`) are emitted whole *and*
 *   as their parts, so both the whole id and a part match. Runs of letters and digits such as
 *   hex ids (`a6339a53`) stay one term.
 * - Chinese, Japanese and Korean runs are segmented as `options.cjk` says (default
 *   {@link DEFAULT_CJK_SEGMENTATION}); Latin letters or digits inside them are separate terms.
 * - Unless disabled, {@link ENGLISH_STOP_WORDS} are dropped and purely alphabetic Latin words of
 *   3+ letters are Porter-stemmed (Porter 1980, via the `stemmer` package). The whole form of a
 *   joined identifier is neither stemmed nor stop-filtered.
 *
 * Never returns empty strings; returns `[]` for text without letters or digits.
 */
export function tokenize(text: string, options: TokenizeOptions = {}): string[] {
  const stem = options.stem ?? true;
  const dropStop = options.stopWords ?? true;
  const cjk = options.cjk ?? DEFAULT_CJK_SEGMENTATION;
  const out: string[] = [];
  const words = wordCache(stem, dropStop, cjk);
  let terms: string[] = [];
  const push = (raw: string): void => {
    if (raw.length === 0) return;
    if (dropStop && ENGLISH_STOP_WORDS.has(raw)) return;
    terms.push(stem && LATIN_ALPHA.test(raw) && raw.length > 2 ? stemmer(raw) : raw);
  };
  const pushWord = (word: string): void => {
    const w = word.replace(EDGE_JOINERS, "");
    if (!JOINER.test(w)) {
      push(w);
      return;
    }
    terms.push(w);
    for (const part of w.split(JOINERS)) push(part);
  };
  // ASCII text (most chunks of English prose and code) is its own NFKC form and its words are
  // exactly ASCII_WORD's matches, so it skips NFKC and the Unicode-property scan (tokenize
  // ~20% faster on real chunks with a warm word cache; the same terms, tested).
  const ascii = !NON_ASCII.test(text);
  const matches = ascii
    ? text.toLowerCase().match(ASCII_WORD)
    : text.normalize("NFKC").toLowerCase().match(WORD);
  if (matches === null) return out;
  for (const matched of matches) {
    const known = words.get(matched);
    if (known !== undefined) {
      for (const term of known) out.push(term);
      continue;
    }
    terms = [];
    let word = matched;
    if (word.endsWith("'s") || word.endsWith("’s")) word = word.slice(0, -2);
    if (ascii || !CJK.test(word)) pushWord(word);
    else {
      let last = 0;
      for (const run of word.matchAll(CJK_RUN)) {
        const index = run.index ?? 0;
        if (index > last) pushWord(word.slice(last, index));
        pushCjk(run[0], cjk, push);
        last = index + run[0].length;
      }
      if (last < word.length) pushWord(word.slice(last));
    }
    if (words.size >= WORD_CACHE_SIZE) words.clear();
    words.set(matched, terms);
    for (const term of terms) out.push(term);
  }
  return out;
}

/** Words whose terms a {@link wordCache} keeps before starting over. */
const WORD_CACHE_SIZE = 200_000;
const wordCaches = new Map<string, Map<string, string[]>>();

/**
 * The word → terms memo for one combination of options (a word's terms depend only on the
 * word and the options): a corpus repeats its vocabulary, so each distinct word is split,
 * stop-filtered and Porter-stemmed once. Stemming dominated indexing time before.
 */
function wordCache(stem: boolean, dropStop: boolean, cjk: CjkSegmentation): Map<string, string[]> {
  const key = `${stem ? 1 : 0}${dropStop ? 1 : 0}${cjk}`;
  let cache = wordCaches.get(key);
  if (!cache) {
    cache = new Map();
    wordCaches.set(key, cache);
  }
  return cache;
}

/** Emits the terms of one run of CJK characters. */
function pushCjk(run: string, mode: CjkSegmentation, push: (t: string) => void): void {
  if (mode === "word") {
    for (const seg of segmenter.segment(run)) if (seg.isWordLike) push(seg.segment);
    return;
  }
  const chars = Array.from(run); // code points: Han extension B and later are astral
  if (chars.length === 1) {
    push(chars[0] as string);
    return;
  }
  for (let i = 0; i < chars.length; i++) {
    if (mode === "unigram+bigram") push(chars[i] as string);
    if (i + 1 < chars.length) push((chars[i] as string) + (chars[i + 1] as string));
  }
}

/** Counts term occurrences: term → term frequency. */
export function termFrequencies(tokens: readonly string[]): Map<string, number> {
  const tf = new Map<string, number>();
  for (const t of tokens) tf.set(t, (tf.get(t) ?? 0) + 1);
  return tf;
}
