import { type Db, PROFILED_DOCUMENTS } from "../store/database.js";
import { isTableRow } from "../text-tables.js";
import {
  appendPostings,
  BLOCK_POSTINGS,
  blockBounds,
  blockRows,
  decodeBlock,
  emptyList,
  encodeBlock,
  mergeLists,
  type PostingList,
} from "./postings.js";
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
  /**
   * Weight of the document profile (see {@link PROFILE_FIELDS}: the organisation,
   * kind and period a document states, e.g. a report's cover page) added to the score
   * of each of its chunks: `+ documentWeight × BM25(profile)`, the profile scored as a
   * field of the *document*, with document frequencies counted over the KB's
   * documents — so a query naming a company or a fiscal year lifts the chunks of the
   * documents it names, although every chunk of theirs repeats those words (a
   * passage score combined with its document's, Callan 1994). 0 turns it off.
   * Documents without a profile get nothing. Default 1.
   */
  documentWeight?: number;
}

/** The default BM25 parameters: k1 = 1.2, b = 0.75 (Lucene's and Elasticsearch's defaults). */
export const DEFAULT_BM25_PARAMS: Readonly<Required<Bm25Params>> = Object.freeze({
  k1: 1.2,
  b: 0.75,
  analyzer: "english",
  titleWeight: 0.3,
  documentWeight: 1,
});

/** Document metadata fields that make up its profile (see {@link Bm25Params.documentWeight}). */
export const PROFILE_FIELDS = ["organization", "documentKind", "period"] as const;

/**
 * The profile text of a document's metadata: its {@link PROFILE_FIELDS} joined (a
 * form's description left out: `Form 10-K annual report` → `Form 10-K`), with
 * hyphenated form codes also written without the hyphen (`Form 8-K` → `8K`), as
 * questions often write them; `""` when it has none.
 */
export function profileText(metadata: Readonly<Record<string, unknown>>): string {
  const parts = PROFILE_FIELDS.map((f) => metadata[f])
    .filter((v): v is string => typeof v === "string" && v.trim() !== "")
    // A form's description ("annual report") would match ordinary words of questions ("annual expense").
    .map((v) => v.replace(/^(Form \S+) (?:annual|quarterly|current) report$/, "$1"));
  const codes = parts.flatMap((p) => [...p.matchAll(/\b(\d+)-([A-Z])\b/g)].map((m) => `${m[1]}${m[2]}`));
  return [...parts, ...codes].join(" ");
}

/** Most documents whose profiles lift their chunks in one search (the best-matching ones). */
const PROFILE_DOCUMENTS = 20;

/** Profiles of a KB's documents, tokenised, for one state of its statistics. */
interface ProfileIndex {
  state: string;
  docs: { id: number; tf: Map<string, number>; length: number }[];
  df: Map<string, number>;
  avg: number;
}

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
  /** A list of fixed contributions (the document profile): chunk id → weighted score. */
  fixed?: Map<number, number>;
}

/**
 * Corpus-level BM25 over the chunks of one knowledge base, with a segmented,
 * block-compressed inverted index persisted in SQLite (see `postings.ts`). Two fields: the
 * chunk's text and its document's title (terms prefixed with {@link TITLE_FIELD_PREFIX}).
 * N and the field-length sums come from `kb_stats`, kept by triggers in the transaction
 * that writes the chunks, so they always reflect the whole corpus. Scoring is
 * {@link bm25TermScore} with {@link bm25Idf}, summed over query terms, plus the title
 * field's score times {@link Bm25Params.titleWeight}.
 *
 * Layout: indexing a chunk writes one `kw_pending` row (its terms). Every
 * {@link PENDING_MERGE_CHUNKS} pending chunks (and at {@link Bm25Index.flush}) the pending
 * chunks become a new immutable **segment**: for each term, its postings (chunk id, tf, field
 * length) cut into blocks of 128 (`kw_seg_blocks`, keyed (kb, segment, term, last id)) and
 * its document frequency in the segment (`kw_seg_terms`). A segment's rows are written in
 * key order after the KB's other segments, so a merge writes fresh pages instead of
 * rewriting a block in every term's list across the whole index (which made the write cost
 * of a merge grow with the index). Segments are merged in tiers, as Lucene's
 * TieredMergePolicy and LSM trees do (O'Neil et al. 1996, "The log-structured merge-tree"):
 * when {@link SEGMENT_MERGE_FACTOR} segments share a size tier they become one segment of
 * the next tier, so a KB has O(log N) segments and each posting is rewritten O(log N) times.
 * A term's list is the union of its lists in every segment (one index seek per segment) and
 * its df the sum. Search reads pending chunks too, so a crash between ingest and merge loses
 * nothing; every merge bumps the KB's data version (`kb_stats.version`), so readers in any
 * process drop what they cached about the old layout.
 *
 * Top-k is exact but does not read every posting (MaxScore, Turtle & Flood 1995):
 * lists are read from the rarest (highest score bound) down; once the bounds of the
 * lists left cannot lift an unseen chunk to the current k-th score, the remaining
 * lists are only probed, block by block, for the chunks still able to reach the top k.
 */
export class Bm25Index {
  private readonly db: Db;
  private readonly statsOf;
  private readonly dfOf;
  /**
   * Document frequencies per KB, valid for one state of its statistics (`kb_stats` row:
   * the data version and the counts, which every write of the KB changes), so a term
   * common to many queries is counted once per state of the index.
   */
  private readonly dfCache = new Map<string, { state: string; df: Map<string, number> }>();
  /**
   * Pending chunks' postings per KB, parsed once per state of its statistics and of its
   * pending rows (a merge, here or in another process, empties them without changing the
   * statistics: postings cached from before it would be counted twice).
   */
  private readonly pendingCache = new Map<string, PendingEntry>();
  /** Segments per KB (id and chunk-id range), read once per state of its statistics. */
  private readonly segmentCache = new Map<string, { state: string; segments: Segment[] }>();
  private readonly addPending;
  private readonly pendingRows;
  private readonly pendingCount;
  private readonly pendingState;
  private readonly pendingOf;
  private readonly dropPending;
  private readonly dropPendingChunk;
  private readonly segmentsOf;
  private readonly nextSegment;
  private readonly insertSegment;
  private readonly deleteSegment;
  private readonly termBlocks;
  private readonly blockAt;
  private readonly insertBlock;
  private readonly updateBlock;
  private readonly deleteBlock;
  private readonly deleteSegmentBlocks;
  private readonly mergeFirstPage;
  private readonly mergeNextPage;
  private readonly insertTerm;
  private readonly deleteSegmentTerms;
  private readonly addDf;
  private readonly dropEmptyTerm;
  private readonly bumpVersion;
  private readonly documentChunks;
  private readonly kbConfig;
  private readonly profileRows;
  private readonly documentCount;
  private readonly chunksOfDocument;
  /** Tokenised document profiles per KB (see {@link Bm25Params.documentWeight}). */
  private readonly profileCache = new Map<string, ProfileIndex>();
  /** Chunks indexed by this instance since it last counted the pending rows. */
  private sinceCheck = 0;
  /**
   * Blocks the searches of this instance decoded in full (`blocksRead`), decoded only to
   * complete chunks already scored (`blocksCompleted`), and skipped unread (`blocksSkipped`):
   * diagnostics and tests of the block-max pruning.
   */
  readonly searchStats = { blocksRead: 0, blocksCompleted: 0, blocksSkipped: 0 };
  /** Score accumulators, reused by every search of this instance (searches are synchronous). */
  private readonly scratch = new Accumulators();

  constructor(db: Db) {
    this.db = db;
    this.statsOf = db.prepare("SELECT chunks, body_tokens, title_tokens, version FROM kb_stats WHERE kb = ?");
    // One seek per segment (SQLite runs `seg IN (…)` on the key's second column as one lookup each).
    this.dfOf = db
      .prepare(
        "SELECT coalesce(sum(df), 0) FROM kw_seg_terms WHERE kb = ? AND seg IN (SELECT seg FROM kw_segments WHERE kb = ?) AND term = ?",
      )
      .pluck();
    this.addPending = db.prepare("INSERT OR REPLACE INTO kw_pending (kb, chunk_id, terms) VALUES (?, ?, ?)");
    this.pendingRows = db
      .prepare("SELECT chunk_id, terms FROM kw_pending WHERE kb = ? ORDER BY chunk_id")
      .raw();
    this.pendingCount = db.prepare("SELECT count(*) FROM kw_pending WHERE kb = ?").pluck();
    this.pendingState = db
      .prepare("SELECT count(*) || ':' || coalesce(max(chunk_id), 0) FROM kw_pending WHERE kb = ?")
      .pluck();
    this.pendingOf = db.prepare("SELECT terms FROM kw_pending WHERE kb = ? AND chunk_id = ?").pluck();
    this.dropPending = db.prepare("DELETE FROM kw_pending WHERE kb = ? AND chunk_id <= ?");
    this.dropPendingChunk = db.prepare("DELETE FROM kw_pending WHERE kb = ? AND chunk_id = ?");
    this.segmentsOf = db
      .prepare("SELECT seg, chunks, min_id, max_id FROM kw_segments WHERE kb = ? ORDER BY min_id, seg")
      .raw();
    this.nextSegment = db.prepare("SELECT coalesce(max(seg), 0) + 1 FROM kw_segments WHERE kb = ?").pluck();
    this.insertSegment = db.prepare(
      "INSERT INTO kw_segments (kb, seg, chunks, min_id, max_id) VALUES (?, ?, ?, ?, ?)",
    );
    this.deleteSegment = db.prepare("DELETE FROM kw_segments WHERE kb = ? AND seg = ?");
    // The blocks of a term in the segments that lie inside a chunk-id range (a search part).
    this.termBlocks = db
      .prepare(
        "SELECT last_id, max_tf, min_len, data FROM kw_seg_blocks WHERE kb = ? AND seg IN (SELECT seg FROM kw_segments WHERE kb = ? AND min_id >= ? AND max_id <= ?) AND term = ?",
      )
      .raw();
    this.blockAt = db
      .prepare(
        "SELECT last_id, data FROM kw_seg_blocks WHERE kb = ? AND seg = ? AND term = ? AND last_id >= ? ORDER BY last_id LIMIT 1",
      )
      .raw();
    this.insertBlock = db.prepare(
      "INSERT INTO kw_seg_blocks (kb, seg, term, last_id, n, max_tf, min_len, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    );
    this.updateBlock = db.prepare(
      "UPDATE kw_seg_blocks SET last_id = ?, n = ?, max_tf = ?, min_len = ?, data = ? WHERE kb = ? AND seg = ? AND term = ? AND last_id = ?",
    );
    this.deleteBlock = db.prepare(
      "DELETE FROM kw_seg_blocks WHERE kb = ? AND seg = ? AND term = ? AND last_id = ?",
    );
    this.deleteSegmentBlocks = db.prepare("DELETE FROM kw_seg_blocks WHERE kb = ? AND seg = ?");
    // A segment's blocks in key order, a page at a time (merges).
    const blockColumns =
      "SELECT term, last_id, n, max_tf, min_len, data FROM kw_seg_blocks WHERE kb = ? AND seg = ?";
    this.mergeFirstPage = db.prepare(`${blockColumns} ORDER BY term, last_id LIMIT ?`).raw();
    this.mergeNextPage = db
      .prepare(`${blockColumns} AND term >= ? AND (term > ? OR last_id > ?) ORDER BY term, last_id LIMIT ?`)
      .raw();
    this.insertTerm = db.prepare("INSERT INTO kw_seg_terms (kb, seg, term, df) VALUES (?, ?, ?, ?)");
    this.deleteSegmentTerms = db.prepare("DELETE FROM kw_seg_terms WHERE kb = ? AND seg = ?");
    this.addDf = db.prepare("UPDATE kw_seg_terms SET df = df + ? WHERE kb = ? AND seg = ? AND term = ?");
    this.dropEmptyTerm = db.prepare(
      "DELETE FROM kw_seg_terms WHERE kb = ? AND seg = ? AND term = ? AND df <= 0",
    );
    this.bumpVersion = db.prepare("UPDATE kb_stats SET version = version + 1 WHERE kb = ?");
    this.documentChunks = db
      .prepare(
        "SELECT c.id, c.kb, c.text, d.title FROM chunks c JOIN documents d ON d.id = c.document_id WHERE c.document_id = ?",
      )
      .raw();
    this.kbConfig = db.prepare("SELECT config FROM kbs WHERE name = ?").pluck();
    // PROFILED_DOCUMENTS is the condition of the partial index `documents_profiled`.
    this.profileRows = db
      .prepare(
        `SELECT id, metadata FROM documents INDEXED BY documents_profiled WHERE kb = ? AND ${PROFILED_DOCUMENTS}`,
      )
      .raw();
    this.documentCount = db.prepare("SELECT documents FROM kb_stats WHERE kb = ?").pluck();
    this.chunksOfDocument = db.prepare("SELECT id FROM chunks WHERE document_id = ?").pluck();
  }

  /** The tokenised document profiles of a KB, read once per state of its statistics. */
  private profiles(kb: string, state: string, analyzer: Analyzer): ProfileIndex {
    const key = `${kb}\u0000${analyzer}`;
    const cached = this.profileCache.get(key);
    if (cached?.state === state) return cached;
    const options = analyzerOptions(analyzer);
    const docs: ProfileIndex["docs"] = [];
    const df = new Map<string, number>();
    let total = 0;
    for (const [id, metadata] of this.profileRows.all(kb) as [number, string][]) {
      let parsed: Record<string, unknown>;
      try {
        parsed = JSON.parse(metadata) as Record<string, unknown>;
      } catch {
        continue;
      }
      const tokens = tokenize(profileText(parsed), options);
      if (tokens.length === 0) continue;
      const tf = termFrequencies(tokens);
      for (const t of tf.keys()) df.set(t, (df.get(t) ?? 0) + 1);
      docs.push({ id, tf, length: tokens.length });
      total += tokens.length;
    }
    const index = { state, docs, df, avg: docs.length > 0 ? total / docs.length : 0 };
    if (this.profileCache.size > 64) this.profileCache.clear();
    this.profileCache.set(key, index);
    return index;
  }

  /**
   * The document-profile contributions of a query (see {@link Bm25Params.documentWeight}):
   * chunk id → `weight × BM25(profile of its document)`, for the chunks of the
   * {@link PROFILE_DOCUMENTS} best-matching documents; empty when no profile matches.
   */
  private profileScores(
    kb: string,
    state: string,
    queryTerms: ReadonlyMap<string, number>,
    params: Bm25Params,
    weight: number,
  ): Map<number, number> {
    const out = new Map<number, number>();
    const index = this.profiles(kb, state, params.analyzer ?? "english");
    if (index.docs.length === 0) return out;
    const N = Math.max(index.docs.length, Number(this.documentCount.get(kb) ?? 0));
    const scored: { id: number; score: number }[] = [];
    for (const d of index.docs) {
      let score = 0;
      for (const [term, qtf] of queryTerms) {
        const tf = d.tf.get(term);
        if (!tf) continue;
        score += qtf * bm25TermScore(tf, d.length, index.avg, bm25Idf(N, index.df.get(term) ?? 1), params);
      }
      if (score > 0) scored.push({ id: d.id, score });
    }
    scored.sort((a, b) => b.score - a.score || a.id - b.id);
    for (const { id, score } of scored.slice(0, PROFILE_DOCUMENTS))
      for (const chunk of this.chunksOfDocument.all(id) as number[]) out.set(chunk, weight * score);
    return out;
  }

  /**
   * Tokenises `text` (and the document's `title`, as the title field) and indexes the
   * chunk. Call inside the transaction that inserts the chunk row. Returns both field
   * lengths in tokens (store them in `chunks.token_count` and `chunks.title_token_count`);
   * an empty field has length 0 and no postings.
   */
  indexChunk(
    kb: string,
    chunkId: number,
    text: string,
    analyzer: Analyzer = "english",
    title = "",
  ): FieldLengths {
    const analyzed = analyzeChunk(text, analyzer, title);
    this.indexAnalyzed(kb, chunkId, analyzed);
    return analyzed;
  }

  /**
   * Indexes a chunk analysed by {@link analyzeChunk} (so its field lengths can be written
   * with the chunk row, before its id is known). Call inside the transaction that inserts
   * the chunk row.
   */
  indexAnalyzed(kb: string, chunkId: number, analyzed: AnalyzedChunk): void {
    this.addPending.run(kb, chunkId, analyzed.terms);
    if (++this.sinceCheck >= 64) {
      this.sinceCheck = 0;
      if ((this.pendingCount.get(kb) as number) >= PENDING_MERGE_CHUNKS) this.flush(kb);
    }
  }

  /**
   * When at least {@link PENDING_MERGE_CHUNKS} chunks are pending, turns them into a new
   * segment and merges segments whose tier is full (see the class comment), in a
   * transaction of its own or the caller's. Ingest calls it at the end of a run, so a run of
   * a few documents does not leave a tiny segment behind (each segment costs a row per term
   * and more merges); search reads pending chunks too, so nothing waits for a merge.
   */
  flushIfFull(kb: string): void {
    if ((this.pendingCount.get(kb) as number) >= PENDING_MERGE_CHUNKS) this.flush(kb);
  }

  /**
   * Turns the pending chunks of `kb` into a new segment whatever their number (see
   * {@link flushIfFull}), in a transaction of its own or the caller's.
   */
  flush(kb: string): void {
    // Inside the caller's transaction, no savepoint of its own: a savepoint would copy every
    // page the merge touches to a sub-journal first.
    if (this.db.inTransaction) this.flushRows(kb);
    else this.db.transaction(() => this.flushRows(kb))();
  }

  /** The body of {@link flush}, in the caller's transaction. */
  private flushRows(kb: string): void {
    const rows = this.pendingRows.all(kb) as [number, string][];
    if (rows.length === 0) return;
    const lists = new Map<string, PostingList>();
    for (const [id, terms] of rows) parsePending(id, terms, lists);
    const seg = this.nextSegment.get(kb) as number;
    const terms = [...lists.keys()].sort(compareTerms);
    for (const term of terms) this.writeList(kb, seg, term, lists.get(term) as PostingList);
    const first = (rows[0] as [number, string])[0];
    const last = (rows[rows.length - 1] as [number, string])[0];
    this.insertSegment.run(kb, seg, rows.length, first, last);
    this.dropPending.run(kb, last);
    this.compact(kb);
    this.bumpVersion.run(kb);
  }

  /** Writes a term's whole list in segment `seg`: its blocks and its df row. */
  private writeList(kb: string, seg: number, term: string, list: PostingList): void {
    for (const b of blockRows(list))
      this.insertBlock.run(kb, seg, term, b.lastId, b.n, b.maxTf, b.minLen, b.data);
    this.insertTerm.run(kb, seg, term, list.ids.length);
  }

  /**
   * Merges segments in tiers: a segment's tier is ⌊log_F(chunks / base)⌋ (F =
   * {@link SEGMENT_MERGE_FACTOR}, base = {@link SEGMENT_BASE_CHUNKS}); when F segments share
   * a tier they become one segment (of the next tier), repeated until no tier is full.
   */
  private compact(kb: string): void {
    for (;;) {
      const segments = this.readSegments(kb);
      const byTier = new Map<number, Segment[]>();
      for (const s of segments) {
        const tier = segmentTier(s.chunks);
        const list = byTier.get(tier) ?? [];
        list.push(s);
        byTier.set(tier, list);
      }
      const full = [...byTier.entries()].filter(([, list]) => list.length >= SEGMENT_MERGE_FACTOR);
      if (full.length === 0) return;
      full.sort((a, b) => a[0] - b[0]);
      this.mergeSegments(kb, (full[0] as [number, Segment[]])[1]);
    }
  }

  /**
   * Rewrites `segments` as one new segment, term by term in order, then deletes them. Each
   * segment's blocks are read in key order a page at a time (one statement per page, not one
   * per term), so memory holds a page of blocks per segment and one term's carry. When the
   * segments' id ranges do not overlap (the usual case: segments are cut in chunk-id order)
   * a term's lists are concatenated: a full block is copied as it is (blocks are
   * self-contained, their ids are gaps from 0), and only partial blocks — a segment's tail,
   * blocks a deletion shrank — are decoded and cut again. Overlapping ranges fall back to
   * decoding every list and merging them.
   */
  private mergeSegments(kb: string, segments: readonly Segment[]): void {
    const seg = this.nextSegment.get(kb) as number;
    const ordered = [...segments].sort((a, b) => a.minId - b.minId || a.seg - b.seg);
    const disjoint = ordered.every((s, i) => i === 0 || s.minId > (ordered[i - 1] as Segment).maxId);
    const PAGE = 4096;
    type BlockRowRead = [string, number, number, number, number, Buffer];
    const cursors = ordered.map((s) => ({ seg: s.seg, rows: [] as BlockRowRead[], at: 0, done: false }));
    const refill = (c: (typeof cursors)[number]): void => {
      if (c.at < c.rows.length || c.done) return;
      const last = c.rows[c.rows.length - 1];
      c.rows = (
        last === undefined
          ? this.mergeFirstPage.all(kb, c.seg, PAGE)
          : this.mergeNextPage.all(kb, c.seg, last[0], last[0], last[1], PAGE)
      ) as BlockRowRead[];
      c.at = 0;
      if (c.rows.length < PAGE) c.done = true;
    };
    const head = (c: (typeof cursors)[number]): BlockRowRead | undefined => {
      refill(c);
      return c.rows[c.at];
    };
    const half = BLOCK_POSTINGS / 2;
    for (;;) {
      let term: string | undefined;
      for (const c of cursors) {
        const t = head(c)?.[0];
        if (t !== undefined && (term === undefined || compareTerms(t, term) < 0)) term = t;
      }
      if (term === undefined) break;
      let df = 0;
      if (disjoint) {
        let carry = emptyList();
        const writeCarry = (): void => {
          for (const b of blockRows(carry))
            this.insertBlock.run(kb, seg, term, b.lastId, b.n, b.maxTf, b.minLen, b.data);
          carry = emptyList();
        };
        for (const c of cursors) {
          for (let row = head(c); row !== undefined && row[0] === term; row = head(c)) {
            c.at++;
            const [, lastId, n, maxTf, minLen, data] = row;
            df += n;
            if (n === BLOCK_POSTINGS && carry.ids.length === 0) {
              this.insertBlock.run(kb, seg, term, lastId, n, maxTf, minLen, data);
              continue;
            }
            if (n === BLOCK_POSTINGS && carry.ids.length >= half) {
              // A half-full block in the middle costs less than re-encoding the rest.
              writeCarry();
              this.insertBlock.run(kb, seg, term, lastId, n, maxTf, minLen, data);
              continue;
            }
            decodeBlock(data, carry);
            if (carry.ids.length >= BLOCK_POSTINGS) {
              const full = carry.ids.length - (carry.ids.length % BLOCK_POSTINGS);
              for (const b of blockRows({
                ids: carry.ids.slice(0, full),
                tfs: carry.tfs.slice(0, full),
                lens: carry.lens.slice(0, full),
              }))
                this.insertBlock.run(kb, seg, term, b.lastId, b.n, b.maxTf, b.minLen, b.data);
              carry = {
                ids: carry.ids.slice(full),
                tfs: carry.tfs.slice(full),
                lens: carry.lens.slice(full),
              };
            }
          }
        }
        writeCarry();
      } else {
        const parts: PostingList[] = [];
        for (const c of cursors) {
          const list = emptyList();
          for (let row = head(c); row !== undefined && row[0] === term; row = head(c)) {
            c.at++;
            decodeBlock(row[5], list);
          }
          if (list.ids.length > 0) parts.push(list);
        }
        const list = combineLists(parts);
        df = list.ids.length;
        for (const b of blockRows(list))
          this.insertBlock.run(kb, seg, term, b.lastId, b.n, b.maxTf, b.minLen, b.data);
      }
      if (df > 0) this.insertTerm.run(kb, seg, term, df);
    }
    let chunks = 0;
    let min = Number.POSITIVE_INFINITY;
    let max = Number.NEGATIVE_INFINITY;
    for (const s of segments) {
      chunks += s.chunks;
      min = Math.min(min, s.minId);
      max = Math.max(max, s.maxId);
      this.deleteSegmentBlocks.run(kb, s.seg);
      this.deleteSegmentTerms.run(kb, s.seg);
      this.deleteSegment.run(kb, s.seg);
    }
    this.insertSegment.run(kb, seg, chunks, min, max);
  }

  /** The segments of `kb`, by chunk-id range. */
  private readSegments(kb: string): Segment[] {
    return (this.segmentsOf.all(kb) as [number, number, number, number][]).map(
      ([seg, chunks, minId, maxId]) => ({
        seg,
        chunks,
        minId,
        maxId,
      }),
    );
  }

  /** The segments of `kb`, read once per state of the KB. */
  private segments(kb: string, state: string): Segment[] {
    const cached = this.segmentCache.get(kb);
    if (cached && cached.state === state) return cached.segments;
    const segments = this.readSegments(kb);
    this.segmentCache.set(kb, { state, segments });
    return segments;
  }

  /**
   * Removes the postings of every chunk of a document (before its chunks are deleted).
   * A merged chunk's terms are found again by tokenising its text and its document's title
   * with `analyzer` (default: the KB's configured analyzer, else `english`), which must be
   * the one it was indexed with.
   */
  removeDocument(documentId: number, analyzer?: Analyzer): void {
    const segmentsByKb = new Map<string, Segment[]>();
    let changed: string | undefined;
    for (const [id, kb, text, title] of this.documentChunks.all(documentId) as [
      number,
      string,
      string,
      string | null,
    ][]) {
      if (this.pendingOf.get(kb, id) !== undefined) {
        this.dropPendingChunk.run(kb, id);
        continue;
      }
      let segments = segmentsByKb.get(kb);
      if (!segments) {
        segments = this.readSegments(kb);
        segmentsByKb.set(kb, segments);
      }
      const holding = segments.filter((s) => s.minId <= id && id <= s.maxId);
      if (holding.length === 0) continue;
      const options = analyzerOptions(analyzer ?? this.analyzerOf(kb));
      const terms = new Set(tokenize(text, options));
      if (title) for (const t of tokenize(title, options)) terms.add(TITLE_FIELD_PREFIX + t);
      for (const term of terms) for (const s of holding) if (this.removePosting(kb, s.seg, term, id)) break;
      changed = kb;
    }
    // Segment rows changed without a change of the KB's counts: readers must drop their caches.
    if (changed !== undefined) this.bumpVersion.run(changed);
  }

  /** Removes chunk `id` from a term's list in segment `seg`; false when it is not there. */
  private removePosting(kb: string, seg: number, term: string, id: number): boolean {
    const row = this.blockAt.get(kb, seg, term, id) as [number, Buffer] | undefined;
    if (!row) return false;
    const [lastId, data] = row;
    const list = decodeBlock(data, emptyList());
    const at = list.ids.indexOf(id);
    if (at < 0) return false;
    list.ids.splice(at, 1);
    list.tfs.splice(at, 1);
    list.lens.splice(at, 1);
    if (list.ids.length === 0) this.deleteBlock.run(kb, seg, term, lastId);
    else {
      const { maxTf, minLen } = blockBounds(list, 0, list.ids.length);
      this.updateBlock.run(
        list.ids[list.ids.length - 1],
        list.ids.length,
        maxTf,
        minLen,
        encodeBlock(list, 0, list.ids.length),
        kb,
        seg,
        term,
        lastId,
      );
    }
    this.addDf.run(-1, kb, seg, term);
    this.dropEmptyTerm.run(kb, seg, term);
    return true;
  }

  /** The analyzer a KB is configured with (`english` when the KB has no catalog row). */
  private analyzerOf(kb: string): Analyzer {
    const config = this.kbConfig.get(kb) as string | undefined;
    if (!config) return "english";
    try {
      return (JSON.parse(config) as { retrieval?: { analyzer?: Analyzer } }).retrieval?.analyzer ?? "english";
    } catch {
      return "english";
    }
  }

  /**
   * Every chunk id with at least one posting in `kb` (merged or pending), for consistency
   * checks: it reads the whole index.
   */
  indexedChunkIds(kb: string): Set<number> {
    const out = new Set<number>();
    const list = emptyList();
    for (const data of this.db
      .prepare("SELECT data FROM kw_seg_blocks WHERE kb = ?")
      .pluck()
      .all(kb) as Buffer[])
      decodeBlock(data, list);
    for (const id of list.ids) out.add(id);
    for (const id of this.db
      .prepare("SELECT chunk_id FROM kw_pending WHERE kb = ?")
      .pluck()
      .all(kb) as number[])
      out.add(id);
    return out;
  }

  /** How many segments `kb`'s keyword index has (tests, diagnostics). */
  segmentCount(kb: string): number {
    return this.readSegments(kb).length;
  }

  private pendingEntry(kb: string, statsState: string): PendingEntry {
    const state = `${statsState}:${this.pendingState.get(kb) as string}`;
    const cached = this.pendingCache.get(kb);
    if (cached && cached.state === state) return cached;
    const lists = new Map<string, PostingList>();
    let min = Number.POSITIVE_INFINITY;
    let max = 0;
    for (const [id, terms] of this.pendingRows.all(kb) as [number, string][]) {
      parsePending(id, terms, lists);
      if (id < min) min = id;
      if (id > max) max = id;
    }
    const entry = { state, lists, min, max };
    this.pendingCache.set(kb, entry);
    return entry;
  }

  /**
   * The postings of a term for the chunk ids in `wanted` only, reading just the blocks that
   * hold them: per id, a seek in each segment whose id range holds it.
   */
  private probeList(
    kb: string,
    term: string,
    wanted: readonly number[],
    pending: PostingList | undefined,
    segments: readonly Segment[],
  ): PostingList {
    const out = emptyList();
    const ids = [...wanted].sort((a, b) => a - b);
    for (const s of segments) {
      let covered = 0;
      for (const id of ids) {
        if (id < s.minId || id <= covered) continue;
        if (id > s.maxId) break;
        const row = this.blockAt.get(kb, s.seg, term, id) as [number, Buffer] | undefined;
        if (!row) break;
        covered = row[0];
        decodeBlock(row[1], out);
      }
    }
    return appendPostings(out, pending);
  }

  /**
   * Scores the chunks of `kb` against `query` and returns the best `topK`, by
   * score descending then chunk id ascending (deterministic). Query terms that
   * repeat count once per occurrence. Only chunks sharing a term with the query
   * are returned (all with score > 0); an empty query, an empty corpus or
   * `topK` ≤ 0 gives [].
   *
   * `allowed` (a metadata filter's chunks) restricts the search to those chunks before
   * top-k: postings of other chunks are skipped, so the top k are the best allowed chunks
   * and MaxScore stays exact (its bounds hold for any subset). Statistics (N, df, average
   * lengths) stay the whole KB's, so a chunk scores the same with and without a filter.
   */
  search(
    kb: string,
    query: string,
    topK: number,
    params: Bm25Params,
    allowed?: ReadonlySet<number>,
  ): Bm25Hit[] {
    return this.searchPart(kb, query, topK, params, allowed).hits;
  }

  /**
   * {@link search} over the chunks whose ids lie in `part` only (all of them when it is
   * absent), with the whole KB's statistics, so the union of the parts' top k, re-ranked
   * ({@link mergeBm25Hits}), is the KB's top k: searches of disjoint parts can run on
   * several threads. `part` must not cut a segment (see {@link searchParts}). Also returns the
   * state of the KB the search saw (statistics, segments and pending rows): parts searched
   * by different connections agree only when their states are equal.
   * @throws RangeError when `part` cuts a segment.
   */
  searchPart(
    kb: string,
    query: string,
    topK: number,
    params: Bm25Params,
    allowed?: ReadonlySet<number>,
    part: IdRange = WHOLE_RANGE,
  ): { hits: Bm25Hit[]; state: string } {
    const none = { hits: [], state: "" };
    const queryTerms = termFrequencies(tokenize(query, analyzerOptions(params.analyzer ?? "english")));
    if (queryTerms.size === 0 || !(topK > 0) || allowed?.size === 0) return none;
    const stats = this.statsOf.get(kb) as
      | { chunks: number; body_tokens: number; title_tokens: number; version: number }
      | undefined;
    if (!stats || stats.chunks <= 0) return none;
    const state = `${stats.version}:${stats.chunks}:${stats.body_tokens}:${stats.title_tokens}`;
    let cached = this.dfCache.get(kb);
    if (!cached || cached.state !== state || cached.df.size > DF_CACHE_TERMS) {
      cached = { state, df: new Map() };
      this.dfCache.set(kb, cached);
    }
    const dfs = cached.df;
    const whole = part === WHOLE_RANGE;
    const allSegments = this.segments(kb, state);
    const segments = whole
      ? allSegments
      : allSegments.filter((seg) => {
          const inside = seg.minId >= part.from && seg.maxId <= part.to;
          if (!inside && seg.maxId >= part.from && seg.minId <= part.to) {
            throw new RangeError(
              `keyword search part ${part.from}…${part.to} cuts segment ${seg.seg} (${seg.minId}…${seg.maxId})`,
            );
          }
          return inside;
        });
    const pendingEntry = this.pendingEntry(kb, state);
    const pending = whole ? pendingEntry.lists : pendingInRange(pendingEntry.lists, queryTerms, part);
    const fullState = `${pendingEntry.state}:${allSegments.length}`;
    const N = stats.chunks;
    const titleWeight = params.titleWeight ?? DEFAULT_BM25_PARAMS.titleWeight;
    const k1 = params.k1;
    const lists: QueryList[] = [];
    const addList = (term: string, weight: number, avg: number) => {
      let df = dfs.get(term);
      if (df === undefined) {
        df =
          ((this.dfOf.get(kb, kb, term) as number | undefined) ?? 0) +
          // The whole KB's pending postings: a part's df is the KB's df.
          (pendingEntry.lists.get(term)?.ids.length ?? 0);
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
    const documentWeight = params.documentWeight ?? DEFAULT_BM25_PARAMS.documentWeight;
    if (documentWeight > 0) {
      const all = this.profileScores(kb, state, queryTerms, params, documentWeight);
      if (all.size > 0) {
        let max = 0;
        for (const v of all.values()) max = Math.max(max, v);
        // Bound and size of the whole list, so the lists keep the whole search's order in a
        // part too (a chunk's score adds its lists in that order: the same sum to the last bit).
        const fixed = whole ? all : new Map([...all].filter(([id]) => id >= part.from && id <= part.to));
        lists.push({ term: "", weight: 1, avg: 0, idf: 0, df: all.size, bound: max * (1 + 1e-12), fixed });
      }
    }
    if (lists.length === 0) return none;
    lists.sort((x, y) => y.bound - x.bound || x.df - y.df);
    // rest[i]: the most lists i… can add to any chunk's score.
    const rest = new Array<number>(lists.length + 1).fill(0);
    for (let i = lists.length - 1; i >= 0; i--)
      rest[i] = (rest[i + 1] as number) + (lists[i] as QueryList).bound;
    // Chunk ids of the KB lie in [low, high]: scores accumulate in a dense array indexed by
    // id − low (term-at-a-time accumulators, Turtle & Flood 1995), which is far cheaper than a
    // hash map at 10^5–10^6 scored chunks. A chunk is scored iff its accumulator is > 0 (every
    // BM25 term score and profile contribution is > 0).
    let low = Number.POSITIVE_INFINITY;
    let high = 0;
    for (const seg of segments) {
      if (seg.minId < low) low = seg.minId;
      if (seg.maxId > high) high = seg.maxId;
    }
    if (pendingEntry.min < low) low = pendingEntry.min;
    if (pendingEntry.max > high) high = pendingEntry.max;
    for (const list of lists) {
      if (!list.fixed) continue;
      for (const id of list.fixed.keys()) {
        if (id < low) low = id;
        if (id > high) high = id;
      }
    }
    if (low < part.from) low = part.from;
    if (high > part.to) high = part.to;
    if (!(high >= low)) return { hits: [], state: fullState };
    const run = this.scratch.begin(low, high - low + 1, topK);
    try {
      return {
        hits: this.maxScore(kb, lists, rest, topK, params, run, pending, segments, allowed, part),
        state: fullState,
      };
    } finally {
      run.reset();
    }
  }

  /**
   * Cuts the chunk ids of `kb` into `count` parts of about equal size for {@link searchPart},
   * along segment boundaries (no segment is cut); pending chunks go to the part holding their
   * ids. Fewer parts (one, the whole range) come back when the segments do not allow more
   * (few segments, or id ranges overlapping after deletes and merges).
   */
  searchParts(kb: string, count: number): IdRange[] {
    const segments = [...this.readSegments(kb)].sort((x, y) => x.minId - y.minId);
    const total = segments.reduce((sum, seg) => sum + seg.chunks, 0);
    // Places to cut: before segment i + 1 when no segment up to i reaches past its first id,
    // with the chunks of the segments before the cut.
    const cuts: { at: number; before: number }[] = [];
    let seen = 0;
    let reach = 0;
    for (let i = 0; i < segments.length - 1; i++) {
      const seg = segments[i] as Segment;
      seen += seg.chunks;
      reach = Math.max(reach, seg.maxId);
      const next = segments[i + 1] as Segment;
      if (reach < next.minId) cuts.push({ at: next.minId, before: seen });
    }
    // For each of the count − 1 targets (k/count of the chunks), the cut closest to it.
    const parts: IdRange[] = [];
    let from = WHOLE_RANGE.from;
    let c = 0;
    for (let k = 1; k < count && c < cuts.length; k++) {
      const target = (total * k) / count;
      let best = c;
      for (let j = c + 1; j < cuts.length; j++) {
        if (
          Math.abs((cuts[j] as { before: number }).before - target) <
          Math.abs((cuts[best] as { before: number }).before - target)
        )
          best = j;
      }
      const cut = cuts[best] as { at: number; before: number };
      parts.push({ from, to: cut.at - 1 });
      from = cut.at;
      c = best + 1;
    }
    parts.push({ from, to: WHOLE_RANGE.to });
    return parts;
  }

  /**
   * MaxScore over the query's lists (sorted by bound, `rest[i]` = the bound of lists i…):
   * lists are read whole while an unseen chunk could still reach the top k; the rest only
   * complete the scores of chunks that still can (Turtle & Flood 1995).
   */
  private maxScore(
    kb: string,
    lists: readonly QueryList[],
    rest: readonly number[],
    topK: number,
    params: Bm25Params,
    run: Accumulators,
    pending: Map<string, PostingList>,
    segments: readonly Segment[],
    allowed: ReadonlySet<number> | undefined,
    part: IdRange,
  ): Bm25Hit[] {
    const { acc, low } = run;
    const k1 = params.k1;
    const b = params.b;
    let i = 0;
    // Full reads. `run.floor()` is the k-th best score so far (its top-k heap holds the k
    // best chunks with their current scores), a lower bound of the final k-th score.
    for (; i < lists.length; i++) {
      if ((rest[i] as number) < run.floor()) break;
      const list = lists[i] as QueryList;
      if (list.fixed) {
        for (const [id, add] of list.fixed) {
          if (allowed && !allowed.has(id)) continue;
          run.add(id - low, add);
        }
        continue;
      }
      const scorer = termScorer(list, k1, b);
      const after = rest[i + 1] as number;
      for (const [lastId, maxTf, minLen, data] of this.termBlocks.all(
        kb,
        kb,
        part.from,
        part.to,
        list.term,
      ) as BlockRow[]) {
        // Block-max (Ding & Suel 2011): when even the block's best posting plus every list
        // after it stays under the k-th score, no chunk first seen here can reach the top k,
        // so only chunks already scored gain, and a block holding none of them is skipped
        // unread. (A chunk skipped here and met again later stays under the k-th score.)
        if (blockBound(scorer, maxTf, minLen) + after < run.floor()) {
          if (run.anyScored(firstId(data) - low, lastId - low)) {
            accumulateBlock(data, run, scorer, allowed, true);
            this.searchStats.blocksCompleted++;
          } else this.searchStats.blocksSkipped++;
        } else {
          accumulateBlock(data, run, scorer, allowed, false);
          this.searchStats.blocksRead++;
        }
      }
      const termPending = pending.get(list.term);
      if (termPending) accumulateList(termPending, run, scorer, allowed, false);
    }
    // The lists left only complete the scores of chunks that can still reach the top k.
    let candidates = run.candidates();
    // Whether the coarse marks hold only (a superset of) the candidates left.
    let marked = false;
    for (; i < lists.length; i++) {
      // Scores only grow and every change is offered to the heap, so its floor stays the
      // k-th best score; pruning never drops a chunk the heap holds.
      const theta = run.floor();
      const bound = rest[i] as number;
      let kept = 0;
      for (let c = 0; c < candidates.length; c++) {
        const j = candidates[c] as number;
        if ((acc[j] as number) + bound < theta) acc[j] = 0;
        else candidates[kept++] = j;
      }
      candidates = candidates.subarray(0, kept);
      const list = lists[i] as QueryList;
      if (list.fixed) {
        for (let c = 0; c < candidates.length; c++) {
          const j = candidates[c] as number;
          const add = list.fixed.get(j + low);
          if (add !== undefined) run.bump(j, add);
        }
        continue;
      }
      const scorer = termScorer(list, k1, b);
      const termPending = pending.get(list.term);
      const blocks = Math.ceil(list.df / BLOCK_POSTINGS);
      if (candidates.length * 2 < blocks) {
        const ids = Array.from(candidates, (j) => j + low).sort((x, y) => x - y);
        accumulateList(
          this.probeList(kb, list.term, ids, termPending, segments),
          run,
          scorer,
          undefined,
          true,
        );
      } else {
        if (!marked) {
          run.markOnly(candidates);
          marked = true;
        }
        for (const [lastId, , , data] of this.termBlocks.all(
          kb,
          kb,
          part.from,
          part.to,
          list.term,
        ) as BlockRow[]) {
          if (run.anyScored(firstId(data) - low, lastId - low)) {
            accumulateBlock(data, run, scorer, undefined, true);
            this.searchStats.blocksCompleted++;
          } else this.searchStats.blocksSkipped++;
        }
        if (termPending) accumulateList(termPending, run, scorer, undefined, true);
      }
    }
    const theta = run.floor();
    const hits: Bm25Hit[] = [];
    for (let c = 0; c < candidates.length; c++) {
      const j = candidates[c] as number;
      const score = acc[j] as number;
      if (score > 0 && score >= theta) hits.push({ chunkId: j + low, score });
    }
    return hits.sort((x, y) => y.score - x.score || x.chunkId - y.chunkId).slice(0, topK);
  }
}

/** A range of chunk ids, both ends included: a part of a keyword search. */
export interface IdRange {
  from: number;
  to: number;
}

/** Every chunk id. */
const WHOLE_RANGE: IdRange = Object.freeze({ from: 0, to: Number.MAX_SAFE_INTEGER });

/** The pending postings of the query's terms with ids in `part`. */
function pendingInRange(
  lists: ReadonlyMap<string, PostingList>,
  terms: ReadonlyMap<string, number>,
  part: IdRange,
): Map<string, PostingList> {
  const out = new Map<string, PostingList>();
  const keep = (term: string) => {
    const list = lists.get(term);
    if (!list) return;
    const kept = emptyList();
    for (let p = 0; p < list.ids.length; p++) {
      const id = list.ids[p] as number;
      if (id < part.from || id > part.to) continue;
      kept.ids.push(id);
      kept.tfs.push(list.tfs[p] as number);
      kept.lens.push(list.lens[p] as number);
    }
    if (kept.ids.length > 0) out.set(term, kept);
  };
  for (const term of terms.keys()) {
    keep(term);
    keep(TITLE_FIELD_PREFIX + term);
  }
  return out;
}

/**
 * The best `topK` of several parts' hits ({@link Bm25Index.searchPart}), by score descending
 * then chunk id ascending, as one search gives.
 */
export function mergeBm25Hits(parts: readonly (readonly Bm25Hit[])[], topK: number): Bm25Hit[] {
  return parts
    .flat()
    .sort((x, y) => y.score - x.score || x.chunkId - y.chunkId)
    .slice(0, Math.max(0, topK));
}

/** Pending chunks' postings of a KB, parsed for one state, with their id range. */
interface PendingEntry {
  state: string;
  lists: Map<string, PostingList>;
  min: number;
  max: number;
}

/** A chunk's BM25 fields, tokenised: both lengths and its terms in the `kw_pending` layout. */
export interface AnalyzedChunk extends FieldLengths {
  /** Body length, title length, then `term␂tf` entries (title terms prefixed), joined by ␁. */
  terms: string;
}

/**
 * Tokenises a chunk's text and its document's title (the title field) with `analyzer`,
 * for {@link Bm25Index.indexAnalyzed}.
 */
export function analyzeChunk(text: string, analyzer: Analyzer = "english", title = ""): AnalyzedChunk {
  const options = analyzerOptions(analyzer);
  const tokens = tokenize(text, options);
  const titleField = analyzeTitle(title, analyzer);
  const body = fieldLength(text, tokens, (line) => tokenize(line, options));
  const parts = [String(body), String(titleField.length)];
  for (const [term, tf] of termFrequencies(tokens)) parts.push(term + TF_SEPARATOR + tf);
  if (titleField.entries) parts.push(titleField.entries);
  return { body, title: titleField.length, terms: parts.join(TERM_SEPARATOR) };
}

/** The last title {@link analyzeTitle} analysed: a document's chunks share their title. */
let lastTitle: { title: string; analyzer: Analyzer; length: number; entries: string } | undefined;

/** A title's token count and its `kw_pending` entries (`␂t:term␂tf`, joined by ␁), memoised for the last title. */
function analyzeTitle(title: string, analyzer: Analyzer): { length: number; entries: string } {
  if (!title) return { length: 0, entries: "" };
  if (lastTitle && lastTitle.title === title && lastTitle.analyzer === analyzer) return lastTitle;
  const tokens = tokenize(title, analyzerOptions(analyzer));
  const parts: string[] = [];
  for (const [term, tf] of termFrequencies(tokens)) parts.push(TITLE_FIELD_PREFIX + term + TF_SEPARATOR + tf);
  lastTitle = { title, analyzer, length: tokens.length, entries: parts.join(TERM_SEPARATOR) };
  return lastTitle;
}

/**
 * BM25 length of a field: its tokens, less the numbers of table rows (lines ending in
 * two or more figures, such as `Accounts payable 1,174 1,587` or `(Millions) 2018 2017`).
 * A table of figures — each `1,577` or `(370)` one to four tokens — is not a verbose
 * text, so its numbers do not lower the score of the row labels and headings beside
 * them; they are still indexed. Numbers in sentences count as usual.
 */
export function fieldLength(
  text: string,
  tokens: readonly string[],
  tokenizeLine: (line: string) => string[],
): number {
  if (!TABLE_ROW.test(text)) return tokens.length;
  let numbers = 0;
  for (const line of text.split("\n")) {
    if (!isTableRow(line)) continue;
    for (const t of tokenizeLine(line)) if (NUMBER_TOKEN.test(t)) numbers++;
  }
  return Math.max(0, tokens.length - numbers);
}

/** A token made of digits and `.`/`,` only. */
const NUMBER_TOKEN = /^[\d.,]+$/;
/** A figure in a table cell: `1,577`, `(370)`, `$ 5,363`, `12.3%`, `—`. */
const FIGURE = String.raw`(?:\(?[$€£¥]?\s?-?\d[\d,.]*%?\)?%?|[—–-])`;
/** Some line of the text may end in two or more figures (a quick test before splitting lines). */
const TABLE_ROW = new RegExp(String.raw`(?:^|\s)${FIGURE}\s+(?:[$€£¥]\s+)?${FIGURE}[ \t]*(?:\n|$)`);

/** Pending chunks a {@link Bm25Index} collects before turning them into a segment. */
export const PENDING_MERGE_CHUNKS = 2048;

/** Segments of one size tier that are merged into one (Lucene's default `segmentsPerTier` is 10). */
export const SEGMENT_MERGE_FACTOR = 8;

/** Chunks of a tier-0 segment's upper size (see {@link segmentTier}). */
export const SEGMENT_BASE_CHUNKS = 512;

/** A segment of a KB's keyword index: its id, how many chunks it indexed, and their id range. */
interface Segment {
  seg: number;
  chunks: number;
  minId: number;
  maxId: number;
}

/** The size tier of a segment of `chunks` chunks: ⌊log_F(chunks / base)⌋, at least 0. */
function segmentTier(chunks: number): number {
  if (chunks <= SEGMENT_BASE_CHUNKS) return 0;
  return Math.floor(Math.log(chunks / SEGMENT_BASE_CHUNKS) / Math.log(SEGMENT_MERGE_FACTOR) + 1e-9);
}

/**
 * Byte order of terms (SQLite's BINARY collation on UTF-8 text, which is code-point order),
 * for merges. UTF-16 code units sort like code points except that surrogates (U+D800–DFFF)
 * must come after U+E000–FFFF, hence the shift of both ranges when both units are ≥ U+D800.
 */
export function compareTerms(a: string, b: string): number {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x === y) continue;
    if (x >= 0xd800 && y >= 0xd800) {
      x = x >= 0xe000 ? x - 0x800 : x + 0x2000;
      y = y >= 0xe000 ? y - 0x800 : y + 0x2000;
    }
    return x - y;
  }
  return a.length - b.length;
}

/**
 * One list from a term's lists in several segments: concatenated when their id ranges
 * follow each other (the usual case: segments are made in chunk-id order), else merged.
 */
function combineLists(parts: PostingList[]): PostingList {
  parts.sort((a, b) => (a.ids[0] ?? 0) - (b.ids[0] ?? 0));
  let out = emptyList();
  for (const part of parts) {
    const last = out.ids[out.ids.length - 1];
    if (last === undefined || (part.ids[0] ?? 0) > last) appendPostings(out, part);
    else out = mergeLists(out, part);
  }
  return out;
}

/** Separates the entries of a `kw_pending.terms` value (the tokenizer never emits control characters). */
const TERM_SEPARATOR = "\u0001";
/** Separates a term from its frequency in a `kw_pending.terms` entry. */
const TF_SEPARATOR = "\u0002";

/**
 * Adds the postings of one pending chunk (`kw_pending.terms`: body length, title length,
 * then `term␂tf` entries, all joined by ␁) to `into`. Chunks must come in id order.
 */
function parsePending(id: number, terms: string, into: Map<string, PostingList>): void {
  const parts = terms.split(TERM_SEPARATOR);
  const bodyLength = Number(parts[0]);
  const titleLength = Number(parts[1]);
  for (let i = 2; i < parts.length; i++) {
    const entry = parts[i] as string;
    const cut = entry.lastIndexOf(TF_SEPARATOR);
    const term = entry.slice(0, cut);
    let list = into.get(term);
    if (!list) {
      list = emptyList();
      into.set(term, list);
    }
    list.ids.push(id);
    list.tfs.push(Number(entry.slice(cut + 1)));
    list.lens.push(term.startsWith(TITLE_FIELD_PREFIX) ? titleLength : bodyLength);
  }
}

/** Terms whose document frequency a {@link Bm25Index} keeps per KB before starting over. */
const DF_CACHE_TERMS = 50_000;

/** log2 of the indices one coarse mark of {@link Accumulators} covers (64). */
const MARK_SHIFT = 6;

/** A `kw_seg_blocks` row as search reads it: last chunk id, largest tf, smallest length, postings. */
type BlockRow = [number, number, number, Buffer];

/** The first chunk id of a block (its first varint: a gap from 0). */
function firstId(data: Uint8Array): number {
  let value = 0;
  let scale = 1;
  for (let i = 0; i < data.length; i++) {
    const byte = data[i] as number;
    value += (byte & 0x7f) * scale;
    if (byte < 0x80) return value;
    scale *= 0x80;
  }
  return value;
}

/**
 * Upper bound of a block's term scores from its largest tf and smallest length: the term
 * score grows with tf and falls with length, so no posting of the block scores more.
 */
function blockBound(t: TermScorer, maxTf: number, minLen: number): number {
  return (t.scale * maxTf) / (maxTf + t.base + t.perToken * minLen);
}

/**
 * Score accumulators of one search: a dense `Float64Array` indexed by chunk id − `low`,
 * the indices touched (to find and reset them without a pass over the array), and a
 * min-heap of the k best indices with their current scores, whose positions are kept in a
 * dense array too (scores only grow, so a held index moves down the heap when it gains).
 * Its {@link floor} — the smallest score held, −∞ until k indices are held — is the k-th
 * largest current score, so MaxScore may stop or prune with it and the top k stay exact.
 * Reused across searches (grown as needed, cleared after each).
 */
class Accumulators {
  acc = new Float64Array(0);
  low = 0;
  /** Indices with a score, in first-touch order (the first {@link count}). */
  touched = new Int32Array(1024);
  count = 0;
  /** Heap position + 1 of each index (0: not in the heap). */
  private posOf = new Int32Array(0);
  /** One flag per 2^{@link MARK_SHIFT} indices: set when one of them may hold a score. */
  private marks = new Uint8Array(0);
  private k = 0;
  private heapIdx = new Int32Array(16);
  private heapVal = new Float64Array(16);
  private size = 0;

  /** Starts a search for the `k` best over ids `low` … `low + span − 1`. */
  begin(low: number, span: number, k: number): this {
    if (this.acc.length < span) {
      const length = Math.max(span, this.acc.length * 2);
      this.acc = new Float64Array(length);
      this.posOf = new Int32Array(length);
      this.marks = new Uint8Array((length >> MARK_SHIFT) + 1);
    }
    if (this.heapIdx.length < k) {
      this.heapIdx = new Int32Array(k);
      this.heapVal = new Float64Array(k);
    }
    this.low = low;
    this.k = k;
    this.count = 0;
    this.size = 0;
    return this;
  }

  /** The k-th best score so far (−∞ until k chunks are scored). */
  floor(): number {
    return this.size >= this.k ? (this.heapVal[0] as number) : Number.NEGATIVE_INFINITY;
  }

  /** Adds `value` (> 0) to the score at index `j`, which may be new. */
  add(j: number, value: number): void {
    const before = this.acc[j] as number;
    if (before === 0) {
      if (this.count === this.touched.length) {
        const grown = new Int32Array(this.touched.length * 2);
        grown.set(this.touched);
        this.touched = grown;
      }
      this.touched[this.count++] = j;
      this.marks[j >> MARK_SHIFT] = 1;
    }
    const after = before + value;
    this.acc[j] = after;
    this.offer(j, after);
  }

  /** May an index in `from` … `to` (inclusive, clamped to the span) hold a score? */
  anyScored(from: number, to: number): boolean {
    const last = Math.min(to, this.acc.length - 1) >> MARK_SHIFT;
    for (let m = Math.max(0, from) >> MARK_SHIFT; m <= last; m++) if (this.marks[m] !== 0) return true;
    return false;
  }

  /** Narrows the marks to `indices` (the candidates left after pruning). */
  markOnly(indices: Int32Array): void {
    for (let c = 0; c < this.count; c++) this.marks[(this.touched[c] as number) >> MARK_SHIFT] = 0;
    for (let c = 0; c < indices.length; c++) this.marks[(indices[c] as number) >> MARK_SHIFT] = 1;
  }

  /** Adds `value` (> 0) to the score of an index already scored. */
  bump(j: number, value: number): void {
    const after = (this.acc[j] as number) + value;
    this.acc[j] = after;
    this.offer(j, after);
  }

  /** Records `score` as the current score of index `j` in the top-k heap. */
  private offer(j: number, score: number): void {
    // A full heap takes only a score above its floor; a held index always has one (its
    // score was ≥ the floor and grew), so most postings stop here without a lookup.
    if (this.size >= this.k && !(score > (this.heapVal[0] as number))) return;
    const held = this.posOf[j] as number;
    if (held > 0) {
      this.heapVal[held - 1] = score;
      this.down(held - 1);
      return;
    }
    if (this.size < this.k) {
      const at = this.size++;
      this.heapIdx[at] = j;
      this.heapVal[at] = score;
      this.posOf[j] = at + 1;
      this.up(at);
      return;
    }
    this.posOf[this.heapIdx[0] as number] = 0;
    this.heapIdx[0] = j;
    this.heapVal[0] = score;
    this.posOf[j] = 1;
    this.down(0);
  }

  private place(at: number, j: number, score: number): void {
    this.heapIdx[at] = j;
    this.heapVal[at] = score;
    this.posOf[j] = at + 1;
  }

  private up(from: number): void {
    let at = from;
    const j = this.heapIdx[at] as number;
    const score = this.heapVal[at] as number;
    while (at > 0) {
      const parent = (at - 1) >> 1;
      if ((this.heapVal[parent] as number) <= score) break;
      this.place(at, this.heapIdx[parent] as number, this.heapVal[parent] as number);
      at = parent;
    }
    this.place(at, j, score);
  }

  private down(from: number): void {
    let at = from;
    const j = this.heapIdx[at] as number;
    const score = this.heapVal[at] as number;
    const n = this.size;
    for (;;) {
      const left = 2 * at + 1;
      if (left >= n) break;
      const right = left + 1;
      const child =
        right < n && (this.heapVal[right] as number) < (this.heapVal[left] as number) ? right : left;
      if ((this.heapVal[child] as number) >= score) break;
      this.place(at, this.heapIdx[child] as number, this.heapVal[child] as number);
      at = child;
    }
    this.place(at, j, score);
  }

  /** The touched indices (a view: pruning compacts it in place; {@link reset} still clears every score). */
  candidates(): Int32Array {
    return this.touched.subarray(0, this.count);
  }

  /** Zeroes every score and heap position of this search. */
  reset(): void {
    for (let c = 0; c < this.count; c++) {
      const j = this.touched[c] as number;
      this.acc[j] = 0;
      this.marks[j >> MARK_SHIFT] = 0;
    }
    for (let h = 0; h < this.size; h++) this.posOf[this.heapIdx[h] as number] = 0;
    this.count = 0;
    this.size = 0;
  }
}

/**
 * The constants of one list's BM25 term score, for the inner loops: a posting of term
 * frequency tf in a field of `len` tokens scores `scale · tf / (tf + base + perToken · len)`,
 * which is `weight × bm25TermScore(tf, len, avg, idf)` rearranged (scale = weight · idf ·
 * (k1 + 1), base = k1 · (1 − b), perToken = k1 · b / avg): equal up to rounding.
 */
interface TermScorer {
  scale: number;
  base: number;
  perToken: number;
}

function termScorer(list: QueryList, k1: number, b: number): TermScorer {
  const avgdl = list.avg > 0 ? list.avg : 1;
  return { scale: list.weight * list.idf * (k1 + 1), base: k1 * (1 - b), perToken: (k1 * b) / avgdl };
}

/**
 * Adds one block's postings (the {@link decodeBlock} layout: three LEB128 varints per
 * posting, mostly one byte each) to the accumulators. With `onlyScored`, only chunks
 * already scored gain (MaxScore's completion phase); else every posting counts, unless
 * `allowed` leaves it out.
 */
function accumulateBlock(
  data: Uint8Array,
  run: Accumulators,
  t: TermScorer,
  allowed: ReadonlySet<number> | undefined,
  onlyScored: boolean,
): void {
  const acc = run.acc;
  const low = run.low;
  const { scale, base, perToken } = t;
  const n = data.length;
  let id = 0;
  let i = 0;
  while (i < n) {
    let gap = data[i++] as number;
    if (gap >= 0x80) {
      gap &= 0x7f;
      let shift = 0x80;
      let byte: number;
      do {
        byte = data[i++] as number;
        gap += (byte & 0x7f) * shift;
        shift *= 0x80;
      } while (byte >= 0x80);
    }
    let tf = data[i++] as number;
    if (tf >= 0x80) {
      tf &= 0x7f;
      let shift = 0x80;
      let byte: number;
      do {
        byte = data[i++] as number;
        tf += (byte & 0x7f) * shift;
        shift *= 0x80;
      } while (byte >= 0x80);
    }
    let len = data[i++] as number;
    if (len >= 0x80) {
      len &= 0x7f;
      let shift = 0x80;
      let byte: number;
      do {
        byte = data[i++] as number;
        len += (byte & 0x7f) * shift;
        shift *= 0x80;
      } while (byte >= 0x80);
    }
    id += gap;
    if (tf === 0 || (allowed !== undefined && !allowed.has(id))) continue;
    const j = id - low;
    if (onlyScored) {
      if ((acc[j] as number) > 0) run.bump(j, (scale * tf) / (tf + base + perToken * len));
    } else run.add(j, (scale * tf) / (tf + base + perToken * len));
  }
}

/** {@link accumulateBlock} for a decoded list (pending chunks, probed blocks). */
function accumulateList(
  list: PostingList,
  run: Accumulators,
  t: TermScorer,
  allowed: ReadonlySet<number> | undefined,
  onlyScored: boolean,
): void {
  const acc = run.acc;
  const low = run.low;
  const { scale, base, perToken } = t;
  for (let p = 0; p < list.ids.length; p++) {
    const id = list.ids[p] as number;
    const tf = list.tfs[p] as number;
    if (!(tf > 0) || (allowed && !allowed.has(id))) continue;
    const j = id - low;
    if (onlyScored && !((acc[j] as number) > 0)) continue;
    const score = (scale * tf) / (tf + base + perToken * (list.lens[p] as number));
    if (onlyScored) run.bump(j, score);
    else run.add(j, score);
  }
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
    const length = fieldLength(text, tokens, this.tokenizeText);
    this.lengths.push(length);
    this.totalLength += length;
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
