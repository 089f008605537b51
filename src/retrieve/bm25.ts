import type { Db } from "../store/database.js";
import { type Analyzer, analyzerOptions, termFrequencies, tokenize } from "./tokenizer.js";

/** BM25 parameters. */
export interface Bm25Params {
  /** Term-frequency saturation. Default 1.2. */
  k1: number;
  /** Length normalisation in [0, 1]. Default 0.75. */
  b: number;
  /** Analyzer used at index time; queries must use the same one. Default `english`. */
  analyzer?: Analyzer;
}

/** A keyword hit: chunk row id and its BM25 score (unbounded, ≥ 0). */
export interface Bm25Hit {
  chunkId: number;
  score: number;
}

/**
 * BM25 inverse document frequency, Lucene's variant
 * `ln(1 + (N − n + 0.5) / (n + 0.5))`, which is never negative
 * (Robertson & Zaragoza 2009, "The Probabilistic Relevance Framework: BM25 and Beyond").
 * `N` = chunks in the corpus, `n` = chunks containing the term.
 */
export function bm25Idf(N: number, n: number): number {
  return Math.log(1 + (N - n + 0.5) / (n + 0.5));
}

/**
 * Corpus-level BM25 over the chunks of one knowledge base, with postings
 * persisted in SQLite (`postings(kb, term, chunk_id, tf)`; chunk lengths in
 * `chunks.token_count`). Statistics (N, average length, document frequency) are
 * read from the index at query time, so they always reflect the whole corpus.
 */
export class Bm25Index {
  private readonly insert;
  private readonly removeForDoc;

  constructor(private readonly db: Db) {
    this.insert = db.prepare("INSERT INTO postings (kb, term, chunk_id, tf) VALUES (?, ?, ?, ?)");
    this.removeForDoc = db.prepare(
      "DELETE FROM postings WHERE chunk_id IN (SELECT id FROM chunks WHERE document_id = ?)",
    );
  }

  /**
   * Tokenises `text` and writes its postings. Call inside the transaction that
   * inserts the chunk row. Returns the chunk length in tokens (store it in
   * `chunks.token_count`).
   */
  indexChunk(kb: string, chunkId: number, text: string, analyzer: Analyzer = "english"): number {
    const tokens = tokenize(text, analyzerOptions(analyzer));
    for (const [term, tf] of termFrequencies(tokens)) this.insert.run(kb, term, chunkId, tf);
    return tokens.length;
  }

  /** Removes the postings of every chunk of a document (before its chunks are deleted). */
  removeDocument(documentId: number): void {
    this.removeForDoc.run(documentId);
  }

  /**
   * Scores the chunks of `kb` against `query` and returns the best `topK`, by
   * score descending then chunk id ascending (deterministic). Query terms that
   * repeat count once per occurrence. An empty query or empty corpus gives [].
   */
  search(kb: string, query: string, topK: number, params: Bm25Params): Bm25Hit[] {
    const queryTerms = termFrequencies(tokenize(query, analyzerOptions(params.analyzer ?? "english")));
    if (queryTerms.size === 0 || topK <= 0) return [];
    const stats = this.db
      .prepare("SELECT count(*) AS n, coalesce(avg(token_count), 0) AS avgdl FROM chunks WHERE kb = ?")
      .get(kb) as { n: number; avgdl: number };
    if (stats.n === 0) return [];
    const avgdl = stats.avgdl > 0 ? stats.avgdl : 1;
    const postings = this.db.prepare(
      `SELECT p.chunk_id AS id, p.tf AS tf, c.token_count AS len FROM postings p
       JOIN chunks c ON c.id = p.chunk_id WHERE p.kb = ? AND p.term = ?`,
    );
    const scores = new Map<number, number>();
    const { k1, b } = params;
    for (const [term, qtf] of queryTerms) {
      const rows = postings.all(kb, term) as { id: number; tf: number; len: number }[];
      if (rows.length === 0) continue;
      const idf = bm25Idf(stats.n, rows.length);
      for (const row of rows) {
        const norm = row.tf + k1 * (1 - b + (b * row.len) / avgdl);
        const s = (qtf * idf * (row.tf * (k1 + 1))) / norm;
        scores.set(row.id, (scores.get(row.id) ?? 0) + s);
      }
    }
    return [...scores]
      .map(([chunkId, score]) => ({ chunkId, score }))
      .sort((x, y) => y.score - x.score || x.chunkId - y.chunkId)
      .slice(0, topK);
  }
}
