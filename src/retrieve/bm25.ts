import type { Db } from "../store/database.js";
import {
  type Analyzer,
  analyzerOptions,
  type TokenizeOptions,
  termFrequencies,
  tokenize,
} from "./tokenizer.js";

/** BM25 parameters. */
export interface Bm25Params {
  /** Term-frequency saturation (≥ 0). Default 1.2. */
  k1: number;
  /** Length normalisation in [0, 1]. Default 0.75. */
  b: number;
  /** Analyzer used at index time; queries must use the same one. Default `english`. */
  analyzer?: Analyzer;
  /**
   * Weight of the title field (the document's title, indexed as a separate BM25
   * field for each of its chunks) added to the body score:
   * `score = BM25(body) + titleWeight × BM25(title)`, each field with its own length
   * normalisation and document frequencies, as in BM25F-style multi-field ranking
   * (Robertson, Zaragoza & Taylor 2004, "Simple BM25 extension to multiple weighted
   * fields"). 0 turns the title field off. Default 0.3.
   */
  titleWeight?: number;
}

/** The default BM25 parameters: k1 = 1.2, b = 0.75 (Lucene's and Elasticsearch's defaults). */
export const DEFAULT_BM25_PARAMS: Readonly<Required<Bm25Params>> = Object.freeze({
  k1: 1.2,
  b: 0.75,
  analyzer: "english",
  titleWeight: 0.3,
});

/**
 * Prefix of title-field terms in the postings table. The tokenizer never emits
 * control characters, so a title term can never collide with a body term.
 */
export const TITLE_FIELD_PREFIX = "\u001ft:";

/** Token counts of a chunk's two BM25 fields. */
export interface FieldLengths {
  /** Body length in tokens (`chunks.token_count`). */
  body: number;
  /** Title length in tokens (`chunks.title_token_count`); 0 without a title. */
  title: number;
}

/** A keyword hit: chunk row id and its BM25 score (unbounded, ≥ 0). */
export interface Bm25Hit {
  chunkId: number;
  score: number;
}

/**
 * BM25 inverse document frequency, Lucene's variant
 * `ln(1 + (N − n + 0.5) / (n + 0.5))`, which is never negative (unlike the classic
 * Robertson–Spärck Jones `ln((N − n + 0.5) / (n + 0.5))`, negative for terms in more
 * than half the documents). See Robertson & Zaragoza 2009, "The Probabilistic Relevance
 * Framework: BM25 and Beyond"; Lucene `BM25Similarity.idf`.
 * @param N documents (chunks) in the corpus, ≥ 0.
 * @param n documents containing the term, 0 ≤ n ≤ N.
 * @returns a natural-log weight > 0 (for n ≤ N).
 */
export function bm25Idf(N: number, n: number): number {
  return Math.log(1 + (N - n + 0.5) / (n + 0.5));
}

/**
 * BM25 weight of one term in one document (Robertson & Zaragoza 2009, eq. 3.15, with
 * Lucene's IDF): `idf · tf · (k1 + 1) / (tf + k1 · (1 − b + b · dl / avgdl))`.
 * Lucene 8+ drops the constant `(k1 + 1)` factor; it is kept here, so scores match
 * the textbook and Elasticsearch < 7 / Pyserini-style figures (ranking is unchanged).
 * @param tf occurrences of the term in the document (a term absent from it scores 0).
 * @param docLength document length in tokens.
 * @param avgDocLength mean document length in tokens over the corpus; a value ≤ 0
 *   (every document empty) is treated as 1 so the result is never NaN.
 * @param idf from {@link bm25Idf}.
 */
export function bm25TermScore(
  tf: number,
  docLength: number,
  avgDocLength: number,
  idf: number,
  params: Pick<Bm25Params, "k1" | "b"> = DEFAULT_BM25_PARAMS,
): number {
  if (!(tf > 0)) return 0;
  const { k1, b } = params;
  const avgdl = avgDocLength > 0 ? avgDocLength : 1;
  return (idf * (tf * (k1 + 1))) / (tf + k1 * (1 - b + (b * docLength) / avgdl));
}

/** One posting list a query reads: a (term, field) pair with its weight and statistics. */
interface QueryList {
  term: string;
  /** Query-term frequency × field weight. */
  weight: number;
  /** Mean field length over the KB's chunks. */
  avg: number;
  idf: number;
  /** Documents in the list. */
  df: number;
  /** Upper bound of the list's contribution to any chunk's score. */
  bound: number;
}

/**
 * Corpus-level BM25 over the chunks of one knowledge base, with postings
 * persisted in SQLite (`postings(kb, term, chunk_id, tf, len)`, `len` being the
 * posting's field length in tokens; chunk lengths also in `chunks.token_count` and
 * `chunks.title_token_count`). Two fields: the chunk's text and its document's title
 * (terms prefixed with {@link TITLE_FIELD_PREFIX}). N and the field-length sums come
 * from `kb_stats`, kept by triggers in the transaction that writes the chunks, and
 * document frequencies from the posting lists, so they always reflect the whole corpus.
 * Scoring is {@link bm25TermScore} with {@link bm25Idf}, summed over query terms, plus
 * the title field's score times {@link Bm25Params.titleWeight}.
 *
 * Top-k is exact but does not read every posting (MaxScore, Turtle & Flood 1995):
 * lists are read from the rarest (highest score bound) down; once the bounds of the
 * lists left cannot lift an unseen chunk to the current k-th score, the remaining
 * lists are only probed for the chunks still able to reach the top k.
 */
export class Bm25Index {
  private readonly insert;
  private readonly removeForDoc;
  private readonly statsOf;
  private readonly dfOf;
  /**
   * Document frequencies per KB, valid for one state of its statistics (`kb_stats` row:
   * the data version and the counts, which every write of the KB changes), so a term
   * common to many queries is counted once per state of the index.
   */
  private readonly dfCache = new Map<string, { state: string; df: Map<string, number> }>();
  private readonly listOf;
  private readonly probe;

  constructor(db: Db) {
    this.insert = db.prepare("INSERT INTO postings (kb, term, chunk_id, tf, len) VALUES (?, ?, ?, ?, ?)");
    this.removeForDoc = db.prepare(
      "DELETE FROM postings WHERE chunk_id IN (SELECT id FROM chunks WHERE document_id = ?)",
    );
    this.statsOf = db.prepare("SELECT chunks, body_tokens, title_tokens, version FROM kb_stats WHERE kb = ?");
    this.dfOf = db.prepare("SELECT count(*) FROM postings WHERE kb = ? AND term = ?").pluck();
    this.listOf = db.prepare("SELECT chunk_id, tf, len FROM postings WHERE kb = ? AND term = ?").raw();
    this.probe = db
      .prepare(
        `SELECT chunk_id, tf, len FROM postings
         WHERE kb = ? AND term = ? AND chunk_id IN (SELECT value FROM json_each(?))`,
      )
      .raw();
  }

  /**
   * Tokenises `text` (and the document's `title`, as the title field) and writes
   * their postings. Call inside the transaction that inserts the chunk row.
   * Returns both field lengths in tokens (store them in `chunks.token_count` and
   * `chunks.title_token_count`); an empty field has length 0 and no postings.
   */
  indexChunk(
    kb: string,
    chunkId: number,
    text: string,
    analyzer: Analyzer = "english",
    title = "",
  ): FieldLengths {
    const options = analyzerOptions(analyzer);
    const tokens = tokenize(text, options);
    for (const [term, tf] of termFrequencies(tokens)) this.insert.run(kb, term, chunkId, tf, tokens.length);
    const titleTokens = title ? tokenize(title, options) : [];
    for (const [term, tf] of termFrequencies(titleTokens)) {
      this.insert.run(kb, TITLE_FIELD_PREFIX + term, chunkId, tf, titleTokens.length);
    }
    return { body: tokens.length, title: titleTokens.length };
  }

  /** Removes the postings of every chunk of a document (before its chunks are deleted). */
  removeDocument(documentId: number): void {
    this.removeForDoc.run(documentId);
  }

  /**
   * Scores the chunks of `kb` against `query` and returns the best `topK`, by
   * score descending then chunk id ascending (deterministic). Query terms that
   * repeat count once per occurrence. Only chunks sharing a term with the query
   * are returned (all with score > 0); an empty query, an empty corpus or
   * `topK` ≤ 0 gives [].
   */
  search(kb: string, query: string, topK: number, params: Bm25Params): Bm25Hit[] {
    const queryTerms = termFrequencies(tokenize(query, analyzerOptions(params.analyzer ?? "english")));
    if (queryTerms.size === 0 || !(topK > 0)) return [];
    const stats = this.statsOf.get(kb) as
      | { chunks: number; body_tokens: number; title_tokens: number; version: number }
      | undefined;
    if (!stats || stats.chunks <= 0) return [];
    const state = `${stats.version}:${stats.chunks}:${stats.body_tokens}:${stats.title_tokens}`;
    let cached = this.dfCache.get(kb);
    if (!cached || cached.state !== state || cached.df.size > DF_CACHE_TERMS) {
      cached = { state, df: new Map() };
      this.dfCache.set(kb, cached);
    }
    const dfs = cached.df;
    const N = stats.chunks;
    const titleWeight = params.titleWeight ?? DEFAULT_BM25_PARAMS.titleWeight;
    const k1 = params.k1;
    const lists: QueryList[] = [];
    const addList = (term: string, weight: number, avg: number) => {
      let df = dfs.get(term);
      if (df === undefined) {
        df = this.dfOf.get(kb, term) as number;
        dfs.set(term, df);
      }
      if (df === 0) return;
      const idf = bm25Idf(N, df);
      // tf·(k1 + 1) / (tf + k1·norm) < k1 + 1 for every tf > 0 and norm > 0.
      // (A relative slack of 1e-12 covers rounding in the score.)
      lists.push({ term, weight, avg, idf, df, bound: weight * idf * (k1 + 1) * (1 + 1e-12) });
    };
    for (const [term, qtf] of queryTerms) {
      addList(term, qtf, stats.body_tokens / N);
      if (titleWeight > 0) addList(TITLE_FIELD_PREFIX + term, titleWeight * qtf, stats.title_tokens / N);
    }
    if (lists.length === 0) return [];
    lists.sort((x, y) => y.bound - x.bound || x.df - y.df);
    // rest[i]: the most lists i… can add to any chunk's score.
    const rest = new Array<number>(lists.length + 1).fill(0);
    for (let i = lists.length - 1; i >= 0; i--)
      rest[i] = (rest[i + 1] as number) + (lists[i] as QueryList).bound;
    const scores = new Map<number, number>();
    const score = (list: QueryList, tf: number, len: number) =>
      list.weight * bm25TermScore(tf, len, list.avg, list.idf, params);
    let i = 0;
    // Full reads, while an unseen chunk could still reach the top k. The k-th score is at
    // most the best one, so it is only worked out once the bound falls below the best.
    let best = 0;
    let theta = Number.NEGATIVE_INFINITY;
    for (; i < lists.length; i++) {
      const bound = rest[i] as number;
      if (scores.size >= topK && bound < best) {
        theta = kthLargest(scores, topK);
        if (bound < theta) break;
      }
      const list = lists[i] as QueryList;
      for (const [id, tf, len] of this.listOf.all(kb, list.term) as [number, number, number][]) {
        const s = (scores.get(id) ?? 0) + score(list, tf, len);
        scores.set(id, s);
        if (s > best) best = s;
      }
    }
    // The lists left only complete the scores of chunks that can still reach the top k.
    for (let first = true; i < lists.length; i++, first = false) {
      // Pruning keeps the top k, so the k-th score only changes as the scores complete.
      if (!first) theta = kthLargest(scores, topK);
      for (const [id, s] of scores) if (s + (rest[i] as number) < theta) scores.delete(id);
      const list = lists[i] as QueryList;
      const rows =
        scores.size * 4 < list.df
          ? (this.probe.all(kb, list.term, JSON.stringify([...scores.keys()])) as [number, number, number][])
          : (this.listOf.all(kb, list.term) as [number, number, number][]);
      for (const [id, tf, len] of rows) {
        const s = scores.get(id);
        if (s !== undefined) scores.set(id, s + score(list, tf, len));
      }
    }
    theta = scores.size > topK ? kthLargest(scores, topK) : Number.NEGATIVE_INFINITY;
    const hits: Bm25Hit[] = [];
    for (const [chunkId, s] of scores) if (s >= theta) hits.push({ chunkId, score: s });
    return hits.sort((x, y) => y.score - x.score || x.chunkId - y.chunkId).slice(0, topK);
  }
}

/** Terms whose document frequency a {@link Bm25Index} keeps per KB before starting over. */
const DF_CACHE_TERMS = 50_000;

/** The k-th largest value of `scores` (−∞ when it holds fewer than k), in linear time. */
function kthLargest(scores: Map<number, number>, k: number): number {
  if (scores.size < k) return Number.NEGATIVE_INFINITY;
  const values = Float64Array.from(scores.values());
  // Quickselect for the index of the k-th largest in ascending order.
  const target = values.length - k;
  let lo = 0;
  let hi = values.length - 1;
  while (lo < hi) {
    const pivot = values[(lo + hi) >>> 1] as number;
    let l = lo;
    let r = hi;
    while (l <= r) {
      while ((values[l] as number) < pivot) l++;
      while ((values[r] as number) > pivot) r--;
      if (l <= r) {
        const t = values[l] as number;
        values[l] = values[r] as number;
        values[r] = t;
        l++;
        r--;
      }
    }
    if (target <= r) hi = r;
    else if (target >= l) lo = l;
    else break;
  }
  return values[target] as number;
}

/** Options of a {@link MemoryBm25Index}. */
export interface MemoryBm25Options {
  /** Default 1.2. */
  k1?: number;
  /** Default 0.75. */
  b?: number;
  /** Analyzer for documents and queries. Default `english`. Ignored when `tokenize` is given. */
  analyzer?: Analyzer;
  /** Extra {@link TokenizeOptions} merged over the analyzer's (e.g. `{ cjk: "word" }`). */
  tokenizeOptions?: TokenizeOptions;
  /** Custom tokenizer for documents and queries; overrides `analyzer` and `tokenizeOptions`. */
  tokenize?: (text: string) => string[];
}

/** A hit of a {@link MemoryBm25Index}: the document's position in insertion order, and its score. */
export interface MemoryBm25Hit {
  /** 0-based index of the document in the order it was added. */
  doc: number;
  /** BM25 score, ≥ 0. */
  score: number;
}

/**
 * In-memory BM25 over a small corpus (tests, benchmarks, ad-hoc ranking), scoring
 * exactly like {@link Bm25Index}: Lucene's IDF ({@link bm25Idf}) and
 * {@link bm25TermScore}, summed over query terms (a repeated query term counts once
 * per occurrence). Statistics cover every document added so far.
 * @throws RangeError from the constructor when k1 < 0 or b is outside [0, 1].
 */
export class MemoryBm25Index {
  private readonly params: { k1: number; b: number };
  private readonly tokenizeText: (text: string) => string[];
  private readonly postings = new Map<string, { doc: number; tf: number }[]>();
  private readonly lengths: number[] = [];
  private totalLength = 0;

  constructor(options: MemoryBm25Options = {}) {
    const k1 = options.k1 ?? DEFAULT_BM25_PARAMS.k1;
    const b = options.b ?? DEFAULT_BM25_PARAMS.b;
    if (!(k1 >= 0)) throw new RangeError(`BM25 k1 must be >= 0 (got ${k1})`);
    if (!(b >= 0 && b <= 1)) throw new RangeError(`BM25 b must be in [0, 1] (got ${b})`);
    this.params = { k1, b };
    const tokenizeOptions = {
      ...analyzerOptions(options.analyzer ?? "english"),
      ...options.tokenizeOptions,
    };
    this.tokenizeText = options.tokenize ?? ((text) => tokenize(text, tokenizeOptions));
  }

  /** Number of documents added. */
  get size(): number {
    return this.lengths.length;
  }

  /** Index statistics: documents, distinct terms, and total tokens (sum of document lengths). */
  stats(): { documents: number; terms: number; tokens: number } {
    return { documents: this.lengths.length, terms: this.postings.size, tokens: this.totalLength };
  }

  /** Adds a document and returns its index (0-based, in insertion order). */
  add(text: string): number {
    const doc = this.lengths.length;
    const tokens = this.tokenizeText(text);
    for (const [term, tf] of termFrequencies(tokens)) {
      const list = this.postings.get(term);
      if (list) list.push({ doc, tf });
      else this.postings.set(term, [{ doc, tf }]);
    }
    this.lengths.push(tokens.length);
    this.totalLength += tokens.length;
    return doc;
  }

  /**
   * BM25 score of every document for `query`, indexed like the documents (0 for a
   * document sharing no term with the query, for an empty document, and for all
   * documents of an empty query). Never NaN.
   */
  scores(query: string): number[] {
    const out = new Array<number>(this.lengths.length).fill(0);
    const N = this.lengths.length;
    if (N === 0) return out;
    const avgdl = this.totalLength / N;
    for (const [term, qtf] of termFrequencies(this.tokenizeText(query))) {
      const list = this.postings.get(term);
      if (!list) continue;
      const idf = bm25Idf(N, list.length);
      for (const { doc, tf } of list) {
        out[doc] =
          (out[doc] as number) +
          qtf * bm25TermScore(tf, this.lengths[doc] as number, avgdl, idf, this.params);
      }
    }
    return out;
  }

  /**
   * The best `topK` documents with a score > 0, by score descending then insertion
   * order (deterministic). An empty query, an empty corpus or `topK` ≤ 0 gives [].
   */
  search(query: string, topK: number): MemoryBm25Hit[] {
    if (!(topK > 0)) return [];
    return this.scores(query)
      .map((score, doc) => ({ doc, score }))
      .filter((h) => h.score > 0)
      .sort((x, y) => y.score - x.score || x.doc - y.doc)
      .slice(0, topK);
  }
}
