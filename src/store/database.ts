import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import Database from "better-sqlite3";
import * as sqliteVec from "sqlite-vec";
import { KnowledgeLayerError } from "../errors.js";
import { blockRows, emptyList, type PostingList } from "../retrieve/postings.js";

/** A better-sqlite3 connection with sqlite-vec loaded and the schema applied. */
export type Db = Database.Database;

/** Schema version written to `meta.schema_version`; bump with a migration when tables change. */
export const SCHEMA_VERSION = 8;

/**
 * Documents whose metadata has a profile field (`organization`, `documentKind`, `period`:
 * see `retrieve/bm25.ts` PROFILE_FIELDS), as an SQL condition on `documents`. A partial
 * index on it (`documents_profiled`) lets keyword search read those documents without a
 * scan of every document of the KB; the query must use this exact text for SQLite to see
 * that the index applies.
 */
export const PROFILED_DOCUMENTS =
  "(json_extract(metadata, '$.organization') IS NOT NULL OR json_extract(metadata, '$.documentKind') IS NOT NULL OR json_extract(metadata, '$.period') IS NOT NULL)";

/** SQLite page cache per connection, in KiB (see {@link openDatabase}). */
const CACHE_KIB = 131_072;

/** Page size in bytes of a new database file. */
export const PAGE_SIZE = 16384;

/** File name of the embedded database inside the data directory. */
export const DB_FILE = "kl.db";

/**
 * Resolves the data directory: `explicit`, else `$KL_HOME` (when not empty), else `./.kl`
 * (relative to the current working directory). Returns an absolute path.
 */
export function resolveDataDir(explicit?: string): string {
  const fromEnv = process.env.KL_HOME?.trim() ? process.env.KL_HOME : undefined;
  return resolve(explicit ?? fromEnv ?? ".kl");
}

// Document and chunk ids use AUTOINCREMENT so an id is never reused after a delete:
// a vector stored under a chunk id can never be mistaken for a newer chunk.
const SCHEMA = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS kbs (
  name TEXT PRIMARY KEY,
  config TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS documents (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  kb TEXT NOT NULL,
  uri TEXT NOT NULL,
  path TEXT NOT NULL,
  type TEXT NOT NULL,
  title TEXT,
  content_hash TEXT NOT NULL,
  pipeline_hash TEXT NOT NULL,
  embedded INTEGER NOT NULL DEFAULT 0,
  metadata TEXT NOT NULL,
  text TEXT NOT NULL,
  chunk_count INTEGER NOT NULL,
  ingested_at TEXT NOT NULL,
  UNIQUE (kb, uri)
);
CREATE INDEX IF NOT EXISTS documents_path ON documents (kb, path);
CREATE INDEX IF NOT EXISTS documents_profiled ON documents (kb) WHERE ${PROFILED_DOCUMENTS};
CREATE TABLE IF NOT EXISTS chunks (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  kb TEXT NOT NULL,
  document_id INTEGER NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
  chunk_index INTEGER NOT NULL,
  total_chunks INTEGER NOT NULL,
  chunk_type TEXT NOT NULL,
  start INTEGER NOT NULL,
  end INTEGER NOT NULL,
  text TEXT NOT NULL,
  context_prefix TEXT,
  metadata TEXT NOT NULL,
  token_count INTEGER NOT NULL,
  title_token_count INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS chunks_document ON chunks (document_id);
CREATE INDEX IF NOT EXISTS chunks_kb ON chunks (kb, token_count);
CREATE TABLE IF NOT EXISTS kw_segments (
  kb TEXT NOT NULL,
  seg INTEGER NOT NULL,
  chunks INTEGER NOT NULL,
  min_id INTEGER NOT NULL,
  max_id INTEGER NOT NULL,
  PRIMARY KEY (kb, seg)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS kw_seg_blocks (
  kb TEXT NOT NULL,
  seg INTEGER NOT NULL,
  term TEXT NOT NULL,
  last_id INTEGER NOT NULL,
  n INTEGER NOT NULL,
  max_tf INTEGER NOT NULL,
  min_len INTEGER NOT NULL,
  data BLOB NOT NULL,
  PRIMARY KEY (kb, seg, term, last_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS kw_seg_terms (
  kb TEXT NOT NULL,
  seg INTEGER NOT NULL,
  term TEXT NOT NULL,
  df INTEGER NOT NULL,
  PRIMARY KEY (kb, seg, term)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS kw_pending (
  kb TEXT NOT NULL,
  chunk_id INTEGER NOT NULL,
  terms TEXT NOT NULL,
  PRIMARY KEY (kb, chunk_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS kb_stats (
  kb TEXT PRIMARY KEY,
  chunks INTEGER NOT NULL DEFAULT 0,
  body_tokens INTEGER NOT NULL DEFAULT 0,
  title_tokens INTEGER NOT NULL DEFAULT 0,
  documents INTEGER NOT NULL DEFAULT 0,
  unembedded INTEGER NOT NULL DEFAULT 0,
  version INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS embedding_models (
  id INTEGER PRIMARY KEY,
  provider TEXT NOT NULL,
  model TEXT NOT NULL,
  UNIQUE (provider, model)
);
CREATE TABLE IF NOT EXISTS embedding_entries (
  model INTEGER NOT NULL,
  key BLOB NOT NULL,
  vector BLOB NOT NULL,
  record INTEGER,
  PRIMARY KEY (model, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS vec_collections (
  name TEXT PRIMARY KEY,
  dimension INTEGER NOT NULL,
  metric TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS vec_records (
  rowid INTEGER PRIMARY KEY,
  collection TEXT NOT NULL,
  id TEXT NOT NULL,
  vector BLOB NOT NULL,
  payload TEXT NOT NULL,
  UNIQUE (collection, id)
);
-- Durable ingest jobs of the HTTP API (see store/jobs.ts).
CREATE TABLE IF NOT EXISTS ingest_jobs (
  id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  kb TEXT NOT NULL,
  internal_kb TEXT NOT NULL,
  options TEXT NOT NULL,
  dir TEXT NOT NULL,
  status TEXT NOT NULL,
  done INTEGER NOT NULL DEFAULT 0,
  current TEXT,
  started_at TEXT,
  finished_at TEXT,
  error TEXT,
  summary TEXT,
  seq INTEGER NOT NULL DEFAULT 0,
  elapsed_ms INTEGER NOT NULL DEFAULT 0,
  created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS ingest_jobs_tenant ON ingest_jobs (tenant);
CREATE INDEX IF NOT EXISTS ingest_jobs_active ON ingest_jobs (status) WHERE status IN ('queued', 'running');
CREATE TABLE IF NOT EXISTS ingest_job_files (
  job_id TEXT NOT NULL REFERENCES ingest_jobs (id) ON DELETE CASCADE,
  n INTEGER NOT NULL,
  name TEXT NOT NULL,
  stored_path TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  mimetype TEXT,
  state TEXT NOT NULL DEFAULT 'pending',
  prior TEXT,
  result TEXT,
  PRIMARY KEY (job_id, n)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ingest_job_docs (
  job_id TEXT NOT NULL REFERENCES ingest_jobs (id) ON DELETE CASCADE,
  n INTEGER NOT NULL,
  uri TEXT NOT NULL,
  chunks INTEGER NOT NULL,
  warnings TEXT NOT NULL,
  PRIMARY KEY (job_id, n, uri)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ingest_job_events (
  job_id TEXT NOT NULL REFERENCES ingest_jobs (id) ON DELETE CASCADE,
  seq INTEGER NOT NULL,
  type TEXT NOT NULL,
  state TEXT NOT NULL,
  PRIMARY KEY (job_id, seq)
) WITHOUT ROWID;
`;

// Per-KB corpus statistics kept by triggers, so they commit (or roll back) with the rows
// they count, whichever code path writes them (ingest, delete, cascade, KB drop): BM25's N
// and field-length sums, the unembedded-documents count, and a data version that grows on
// every document change (it is never reset, so a KB dropped and re-created never reuses one).
/** Trigger body counting the NEW chunk row into its KB's statistics. */
const ADD_CHUNK = `
  INSERT INTO kb_stats (kb, chunks, body_tokens, title_tokens)
  VALUES (NEW.kb, 1, NEW.token_count, NEW.title_token_count)
  ON CONFLICT (kb) DO UPDATE SET chunks = chunks + 1,
    body_tokens = body_tokens + excluded.body_tokens, title_tokens = title_tokens + excluded.title_tokens;`;
/** Trigger body taking the OLD chunk row out of its KB's statistics. */
const REMOVE_CHUNK = `
  UPDATE kb_stats SET chunks = chunks - 1, body_tokens = body_tokens - OLD.token_count,
    title_tokens = title_tokens - OLD.title_token_count WHERE kb = OLD.kb;`;

const TRIGGERS = `
CREATE INDEX IF NOT EXISTS embedding_entries_record ON embedding_entries (record) WHERE record IS NOT NULL;
CREATE TRIGGER IF NOT EXISTS embedding_entries_replace BEFORE INSERT ON vec_records BEGIN
  DELETE FROM embedding_entries
  WHERE record = (SELECT rowid FROM vec_records WHERE collection = NEW.collection AND id = NEW.id);
END;
CREATE TRIGGER IF NOT EXISTS embedding_entries_update AFTER UPDATE OF vector ON vec_records BEGIN
  DELETE FROM embedding_entries WHERE record = OLD.rowid;
END;
CREATE TRIGGER IF NOT EXISTS embedding_entries_delete AFTER DELETE ON vec_records BEGIN
  DELETE FROM embedding_entries WHERE record = OLD.rowid;
END;
CREATE VIEW IF NOT EXISTS embedding_cache AS
  SELECT m.provider AS provider, m.model AS model,
    CASE WHEN typeof(e.key) = 'blob' THEN lower(hex(e.key)) ELSE e.key END AS text_hash,
    e.vector AS vector, r.collection AS ref_collection, r.id AS ref_id
  FROM embedding_entries e JOIN embedding_models m ON m.id = e.model
  LEFT JOIN vec_records r ON r.rowid = e.record;
CREATE TRIGGER IF NOT EXISTS kb_stats_chunk_insert AFTER INSERT ON chunks BEGIN
${ADD_CHUNK}
END;
CREATE TRIGGER IF NOT EXISTS kb_stats_chunk_delete AFTER DELETE ON chunks BEGIN
${REMOVE_CHUNK}
END;
CREATE TRIGGER IF NOT EXISTS kb_stats_chunk_update AFTER UPDATE OF kb, token_count, title_token_count ON chunks BEGIN
${REMOVE_CHUNK}
${ADD_CHUNK}
END;
CREATE TRIGGER IF NOT EXISTS kb_stats_document_insert AFTER INSERT ON documents BEGIN
  INSERT INTO kb_stats (kb, documents, unembedded, version)
  VALUES (NEW.kb, 1, 1 - (NEW.embedded <> 0), 1)
  ON CONFLICT (kb) DO UPDATE SET documents = documents + 1,
    unembedded = unembedded + excluded.unembedded, version = version + 1;
END;
CREATE TRIGGER IF NOT EXISTS kb_stats_document_delete AFTER DELETE ON documents BEGIN
  UPDATE kb_stats SET documents = documents - 1, unembedded = unembedded - (1 - (OLD.embedded <> 0)),
    version = version + 1 WHERE kb = OLD.kb;
END;
CREATE TRIGGER IF NOT EXISTS kb_stats_document_update AFTER UPDATE OF kb, embedded ON documents BEGIN
  UPDATE kb_stats SET documents = documents - 1, unembedded = unembedded - (1 - (OLD.embedded <> 0)),
    version = version + 1 WHERE kb = OLD.kb;
  INSERT INTO kb_stats (kb, documents, unembedded, version)
  VALUES (NEW.kb, 1, 1 - (NEW.embedded <> 0), 1)
  ON CONFLICT (kb) DO UPDATE SET documents = documents + 1,
    unembedded = unembedded + excluded.unembedded, version = version + 1;
END;
`;

/**
 * Recounts every KB's {@link TRIGGERS} statistics from the rows (migration, and tests that
 * check the triggers against a recount). Versions are kept, and bumped so cached results
 * of the recounted KBs are not reused.
 */
export function recountKbStats(db: Db): void {
  db.exec(`
    INSERT INTO kb_stats (kb) SELECT DISTINCT kb FROM documents WHERE true ON CONFLICT (kb) DO NOTHING;
    INSERT INTO kb_stats (kb) SELECT DISTINCT kb FROM chunks WHERE true ON CONFLICT (kb) DO NOTHING;
    UPDATE kb_stats SET
      chunks = (SELECT count(*) FROM chunks c WHERE c.kb = kb_stats.kb),
      body_tokens = (SELECT coalesce(sum(token_count), 0) FROM chunks c WHERE c.kb = kb_stats.kb),
      title_tokens = (SELECT coalesce(sum(title_token_count), 0) FROM chunks c WHERE c.kb = kb_stats.kb),
      documents = (SELECT count(*) FROM documents d WHERE d.kb = kb_stats.kb),
      unembedded = (SELECT count(*) FROM documents d WHERE d.kb = kb_stats.kb AND d.embedded = 0),
      version = version + 1;
  `);
}

/**
 * Opens (creating if needed) the embedded database `kl.db` in `dataDir`, in WAL
 * mode so an interrupted write leaves the last committed state intact.
 * @throws KnowledgeLayerError when the directory cannot be created or the file is not a database.
 */
export function openDatabase(dataDir: string): Db {
  try {
    mkdirSync(dataDir, { recursive: true });
  } catch (error) {
    throw new KnowledgeLayerError(`cannot create data directory ${dataDir}: ${(error as Error).message}`);
  }
  const file = join(dataDir, DB_FILE);
  let db: Db;
  try {
    db = new Database(file);
    // 16 KiB pages (new files only: SQLite keeps an existing file's page size). A 512-d vector
    // is a 2 KiB row; on 4 KiB pages one row fills half a page, or spills to an overflow page
    // in a WITHOUT ROWID table, which doubled the bytes per vector.
    db.pragma(`page_size = ${PAGE_SIZE}`);
    // Incremental auto-vacuum (new files only): pages freed by keyword-segment merges and
    // pruned logs can be handed back to the file system when the database is closed
    // (releaseFreePages), instead of staying in the file as its free list.
    db.pragma("auto_vacuum = INCREMENTAL");
    db.pragma("journal_mode = WAL");
    db.pragma("synchronous = NORMAL");
    db.pragma("foreign_keys = ON");
    // A 128 MiB page cache (SQLite's default is 2 MiB): at 100k+ chunks the interior pages of
    // the chunk, vector and keyword-index B-trees no longer fit in 2 MiB, and every lookup
    // went to the OS for them. Pages are allocated as used, so a small KB stays small.
    db.pragma(`cache_size = -${CACHE_KIB}`);
    // Statement journals in memory. An INSERT that fires a trigger (the kb_stats counters) or
    // may replace a row needs one inside a transaction, and SQLite spills it to a temporary
    // file past 64 KiB — four of our 16 KiB pages — so every chunk written went to disk a
    // second time (about 250 KB per chunk at 30k chunks). Temporary sort B-trees live in
    // memory too; none of ours sorts more than a page of rows.
    db.pragma("temp_store = MEMORY");
    // Writers take the lock up front (BEGIN IMMEDIATE) and wait up to 60 s for each other.
    db.pragma("busy_timeout = 60000");
    sqliteVec.load(db);
    db.exec(SCHEMA);
  } catch (error) {
    throw new KnowledgeLayerError(`cannot open database ${file}: ${(error as Error).message}`, {
      cause: error,
    });
  }
  const version = db.prepare("SELECT value FROM meta WHERE key = 'schema_version'").get() as
    | { value: string }
    | undefined;
  if (!version) {
    db.prepare("INSERT INTO meta (key, value) VALUES ('schema_version', ?)").run(String(SCHEMA_VERSION));
  } else if (Number(version.value) > SCHEMA_VERSION) {
    db.close();
    throw new KnowledgeLayerError(
      `${file} was written by a newer knowledge-layer (schema ${version.value} > ${SCHEMA_VERSION}); upgrade kl`,
    );
  } else if (Number(version.value) < SCHEMA_VERSION) {
    migrate(db, Number(version.value));
  }
  db.exec(TRIGGERS);
  return db;
}

/**
 * Brings a database written by an older schema up to {@link SCHEMA_VERSION}, in one
 * transaction. Schema 1 → 2: `chunks.title_token_count` (BM25 title field; chunks
 * ingested before it have no title postings until they are re-ingested). Schema 2 → 3:
 * `postings.len` (the field length of the posting's chunk, so keyword search reads a
 * posting list without joining chunks) and `kb_stats` (corpus statistics kept by triggers),
 * both built from the existing rows. Schema 3 → 4: the row-per-posting `postings` table
 * becomes block-compressed lists (see `retrieve/postings.ts`).
 * Schema 4 → 5: `embedding_cache.ref_collection`/`ref_id`, an entry that points at the
 * embedded store's copy of a vector instead of holding a second one. Schema 5 → 6: the
 * keyword index becomes segmented (`kw_seg_blocks`, `kw_seg_terms`, `kw_segments`): the
 * existing lists become each KB's first segment. Schema 6 → 7: the durable ingest jobs of
 * `kl serve` (`ingest_jobs`, `ingest_job_files`, `ingest_job_docs`, `ingest_job_events`, see
 * `store/jobs.ts`), created empty by the schema's `CREATE TABLE IF NOT EXISTS`: an older
 * server kept its jobs in memory, so there are none to carry over (its leftover uploads
 * belong to no job and are removed when the server starts). Schema 7 → 8: the embedding cache's
 * rows move to `embedding_entries` (see {@link compactEmbeddingCache}).
 */
function migrate(db: Db, from: number): void {
  db.transaction(() => {
    if (from < 2) {
      const columns = db.prepare("PRAGMA table_info(chunks)").all() as { name: string }[];
      if (!columns.some((c) => c.name === "title_token_count")) {
        db.exec("ALTER TABLE chunks ADD COLUMN title_token_count INTEGER NOT NULL DEFAULT 0");
      }
    }
    if (from < 3) {
      const columns = db.prepare("PRAGMA table_info(postings)").all() as { name: string }[];
      if (columns.length > 0 && !columns.some((c) => c.name === "len")) {
        db.exec("ALTER TABLE postings ADD COLUMN len INTEGER NOT NULL DEFAULT 0");
      }
      if (columns.length > 0)
        db.exec(`UPDATE postings SET len = coalesce((SELECT CASE WHEN substr(postings.term, 1, 3) = char(31) || 't:'
        THEN c.title_token_count ELSE c.token_count END FROM chunks c WHERE c.id = postings.chunk_id), 0)`);
      recountKbStats(db);
      db.exec(TRIGGERS);
    }
    if (from < 4) convertPostings(db);
    if (from < 5) {
      const columns = db.prepare("PRAGMA table_info(embedding_cache)").all() as { name: string }[];
      if (columns.length > 0 && !columns.some((c) => c.name === "ref_id")) {
        db.exec("ALTER TABLE embedding_cache ADD COLUMN ref_collection TEXT");
        db.exec("ALTER TABLE embedding_cache ADD COLUMN ref_id TEXT");
      }
    }
    if (from < 6) segmentKeywordIndex(db);
    if (from < 8) compactEmbeddingCache(db);
    db.prepare("UPDATE meta SET value = ? WHERE key = 'schema_version'").run(String(SCHEMA_VERSION));
  })();
}

/**
 * Schema 7 → 8: the `embedding_cache` table (provider and model text, a 64-character hex
 * SHA-256 and a (collection, id) reference in every row and again in its index: ~350 bytes
 * per cached chunk) becomes `embedding_entries` keyed by an `embedding_models` id and the
 * first 16 bytes of the SHA-256, with references as `vec_records` rowids (~70 bytes per row,
 * ~110 per chunk with the index). References whose record is gone are dropped; text entries
 * (LLM-written contexts) keep their keys. The old name stays as a read-only view.
 */
function compactEmbeddingCache(db: Db): void {
  const old = db
    .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'embedding_cache'")
    .get();
  if (!old) return;
  db.exec(`
    DROP TRIGGER IF EXISTS embedding_cache_ref_insert;
    DROP TRIGGER IF EXISTS embedding_cache_ref_update;
    DROP TRIGGER IF EXISTS embedding_cache_ref_delete;
    DROP INDEX IF EXISTS embedding_cache_ref;
    INSERT OR IGNORE INTO embedding_models (provider, model) SELECT DISTINCT provider, model FROM embedding_cache;
    INSERT OR REPLACE INTO embedding_entries (model, key, vector, record)
      SELECT m.id,
        CASE WHEN c.provider NOT LIKE 'text:%' AND length(c.text_hash) = 64 AND c.text_hash NOT GLOB '*[^0-9a-f]*'
          THEN unhex(substr(c.text_hash, 1, 32)) ELSE c.text_hash END,
        c.vector, r.rowid
      FROM embedding_cache c JOIN embedding_models m ON m.provider = c.provider AND m.model = c.model
      LEFT JOIN vec_records r ON c.ref_id IS NOT NULL AND r.collection = c.ref_collection AND r.id = c.ref_id
      WHERE length(c.vector) > 0 OR r.rowid IS NOT NULL;
    DROP TABLE embedding_cache;
  `);
}

/**
 * Schema 5 → 6: moves the one-list-per-term keyword index (`kw_blocks`, `kw_terms`) into
 * segment 1 of each KB (`kw_seg_blocks`, `kw_seg_terms`, one `kw_segments` row covering
 * the KB's chunk ids), then drops the old tables.
 */
function segmentKeywordIndex(db: Db): void {
  const exists = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'kw_blocks'").get();
  if (!exists) return;
  db.exec(`
    INSERT INTO kw_seg_blocks (kb, seg, term, last_id, n, max_tf, min_len, data)
      SELECT kb, 1, term, last_id, n, max_tf, min_len, data FROM kw_blocks;
    INSERT INTO kw_seg_terms (kb, seg, term, df) SELECT kb, 1, term, df FROM kw_terms;
    INSERT INTO kw_segments (kb, seg, chunks, min_id, max_id)
      SELECT kb, 1, count(*), min(id), max(id) FROM chunks
      WHERE kb IN (SELECT DISTINCT kb FROM kw_terms) GROUP BY kb;
    DROP TABLE kw_blocks;
    DROP TABLE kw_terms;
  `);
}

/**
 * Schema 3 → 4: rewrites every `postings` row into block-compressed lists, one term's
 * list at a time (read in (kb, term, chunk id) order), as segment 1 of each KB (the
 * layout of schema 6), then drops the old table.
 */
function convertPostings(db: Db): void {
  const exists = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'postings'").get();
  if (!exists) return;
  const insertBlock = db.prepare(
    "INSERT INTO kw_seg_blocks (kb, seg, term, last_id, n, max_tf, min_len, data) VALUES (?, 1, ?, ?, ?, ?, ?, ?)",
  );
  const insertTerm = db.prepare("INSERT INTO kw_seg_terms (kb, seg, term, df) VALUES (?, 1, ?, ?)");
  const write = (kb: string, term: string, list: PostingList) => {
    for (const b of blockRows(list)) insertBlock.run(kb, term, b.lastId, b.n, b.maxTf, b.minLen, b.data);
    insertTerm.run(kb, term, list.ids.length);
  };

  // One list at a time (a statement cannot iterate while the connection writes).
  const terms = db.prepare("SELECT DISTINCT kb, term FROM postings").raw().all() as [string, string][];
  const listOf = db.prepare(
    "SELECT chunk_id, tf, len FROM postings WHERE kb = ? AND term = ? ORDER BY chunk_id",
  );
  for (const [kb, term] of terms) {
    const list = emptyList();
    for (const [id, tf, len] of listOf.raw().all(kb, term) as [number, number, number][]) {
      list.ids.push(id);
      list.tfs.push(tf);
      list.lens.push(len);
    }
    write(kb, term, list);
  }
  db.exec(`INSERT INTO kw_segments (kb, seg, chunks, min_id, max_id)
    SELECT kb, 1, count(DISTINCT chunk_id), min(chunk_id), max(chunk_id) FROM postings GROUP BY kb`);
  db.exec("DROP TABLE postings");
}

/** Free pages {@link releaseFreePages} gives back per call: 16,384 pages of 16 KiB, 256 MiB. */
const RELEASE_PAGES_PER_CLOSE = 16_384;

/**
 * Gives a database's free pages back to the file system, shrinking the file (files created
 * with incremental auto-vacuum, see openDatabase; others keep their free list for reuse).
 * Call before closing a connection that wrote: the free pages are what keyword-segment
 * merges and pruned logs left (about 2% of a freshly ingested 10k-chunk KB). Best effort:
 * a busy or read-only database is left as it is.
 */
export function releaseFreePages(db: Db): void {
  // At most RELEASE_PAGES_PER_CLOSE pages a call, so closing after a large delete stays quick;
  // the rest goes at later closes (or is reused by later writes).
  try {
    if (!db.open || db.readonly || db.inTransaction) return;
    if (db.pragma("auto_vacuum", { simple: true }) !== 2) return;
    if ((db.pragma("freelist_count", { simple: true }) as number) === 0) return;
    db.pragma(`incremental_vacuum(${RELEASE_PAGES_PER_CLOSE})`);
  } catch {
    // Busy (another connection writes) or read-only: the pages stay free for reuse.
  }
}

/**
 * Runs `fn` inside the caller's transaction when one is open, else in a new IMMEDIATE
 * transaction. Unlike a nested `db.transaction`, it opens no savepoint: a savepoint copies
 * every page it touches to a sub-journal before changing it, which doubled what a large
 * ingest wrote. So `fn` must not leave half its changes behind when it throws inside a
 * caller's transaction: check inputs first, or let the error roll the caller back.
 */
export function withinTransaction<T>(db: Db, fn: () => T): T {
  return db.inTransaction ? fn() : db.transaction(fn).immediate();
}

/**
 * A function returning the prepared statement for an SQL text, prepared once per
 * connection (preparing costs more than running a small statement).
 */
export function statementCache(db: Db): (sql: string) => Database.Statement {
  const statements = new Map<string, Database.Statement>();
  return (sql) => {
    let statement = statements.get(sql);
    if (!statement) {
      statement = db.prepare(sql);
      statements.set(sql, statement);
    }
    return statement;
  };
}

/** Stores a Float32Array as a little-endian BLOB (the layout sqlite-vec reads). */
export function vectorToBlob(vector: Float32Array): Buffer {
  return Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength);
}

/** Reads a BLOB written by {@link vectorToBlob}. The result owns its memory. */
export function blobToVector(blob: Buffer): Float32Array {
  const out = new Float32Array(blob.byteLength / 4);
  new Uint8Array(out.buffer).set(blob);
  return out;
}
