import { randomUUID } from "node:crypto";
import { deflateRawSync, inflateRawSync } from "node:zlib";
import type { Statement } from "better-sqlite3";
import { canonicalJson } from "../cache/keys.js";
import {
  defaultKbConfig,
  type KnowledgeBaseConfig,
  parseRetrievalMode,
  validateKbConfig,
} from "../config.js";
import type { FilterNode } from "../retrieve/filter.js";
import type { Chunk, DocumentMetadata } from "../types.js";
import { type Db, statementCache } from "./database.js";
import { EmbeddingCacheTable } from "./embedding-cache.js";
import { catalogField, compileSqliteFilter } from "./filter-sql.js";

/** The chunks of a KB a filter lets through (see {@link Catalog.filterChunks}). */
export interface FilteredChunks {
  /** Chunk ids, ascending. */
  ids: number[];
  /** Document id and chunk index of each chunk, in the order of `ids`. */
  documentIds: number[];
  chunkIndexes: number[];
  /** Chunk count of each document that has a chunk in `ids`. */
  documentChunks: Map<number, number>;
  /** `ids` as a set. */
  set: ReadonlySet<number>;
}

/** A knowledge base as stored in the catalog. */
export interface KbRecord {
  name: string;
  config: KnowledgeBaseConfig;
  createdAt: string;
}

/** A document row (without its text). */
export interface DocumentRecord {
  id: number;
  kb: string;
  uri: string;
  path: string;
  type: string;
  title: string | null;
  contentHash: string;
  pipelineHash: string;
  embedded: boolean;
  chunkCount: number;
  ingestedAt: string;
}

/** A document row to store (see {@link Catalog.insertDocument}). */
export interface NewDocument {
  /**
   * The id to store it under: a document replaced by a re-ingest keeps its id (the old row
   * is deleted first). Absent: a new id, never used before.
   */
  id?: number;
  kb: string;
  uri: string;
  path: string;
  type: string;
  title?: string;
  contentHash: string;
  pipelineHash: string;
  embedded: boolean;
  metadata: DocumentMetadata;
  /** The extracted text (stored compressed when that is smaller). */
  text: string;
  chunkCount: number;
}

/** A stored chunk with its document's attribution fields, as search returns it. */
export interface StoredChunk {
  id: number;
  kb: string;
  documentId: number;
  chunkIndex: number;
  totalChunks: number;
  chunkType: string;
  start: number;
  end: number;
  text: string;
  contextPrefix: string | null;
  metadata: Record<string, unknown>;
  document: { uri: string; path: string; type: string; title: string | null; metadata: DocumentMetadata };
}

/** Counts per knowledge base, for `kb list` / `kb show`. */
export interface KbCounts {
  documents: number;
  chunks: number;
  embeddedDocuments: number;
  /** Documents per source type (`{ markdown: 462, pdf: 53, … }`), types with none left out. */
  documentsByType: Record<string, number>;
}

/**
 * The catalog: knowledge bases, documents (with their extracted text and
 * content hashes) and chunks, in the embedded SQLite database. All writes of
 * one document happen in one transaction (see `ingest/pipeline.ts`).
 */
export class Catalog {
  /** The prepared statement for an SQL text, prepared once per catalog. */
  private readonly prepare: (sql: string) => Statement;

  /** Recent {@link filterChunks} answers per KB, valid for one data version. */
  private readonly filterCache = new Map<string, { version: string; result: FilteredChunks }>();

  /** The embedding cache table, which also keeps LLM-written texts (see {@link cachedText}). */
  private textCache?: EmbeddingCacheTable;

  constructor(readonly db: Db) {
    this.prepare = statementCache(db);
  }

  /** A cached text (an LLM-written chunk context), see {@link EmbeddingCacheTable.getText}. */
  cachedText(namespace: string, key: string): string | undefined {
    this.textCache ??= new EmbeddingCacheTable(this.db);
    return this.textCache.getText(namespace, key);
  }

  /** Stores a text for {@link cachedText}. */
  cacheText(namespace: string, key: string, text: string): void {
    this.textCache ??= new EmbeddingCacheTable(this.db);
    this.textCache.putText(namespace, key, text);
  }

  /**
   * The chunks of knowledge base `kb` that match a filter (see `retrieve/filter.ts`), from
   * one parameterised query over its chunks and documents (no filter value is spliced into
   * the SQL). Answers are kept for the KB's current data version (the last 64 filters).
   */
  filterChunks(kb: string, filter: FilterNode): FilteredChunks {
    const key = `${kb}\u0000${canonicalJson(filter)}`;
    const version = this.dataVersion(kb);
    const cached = this.filterCache.get(key);
    if (cached && cached.version === version) return cached.result;
    const where = compileSqliteFilter(filter, catalogField);
    const rows = this.db
      .prepare(
        `SELECT c.id, c.document_id, c.chunk_index, d.chunk_count FROM chunks c JOIN documents d ON d.id = c.document_id
         WHERE c.kb = ? AND ${where.sql} ORDER BY c.id`,
      )
      .raw()
      .all(kb, ...where.params) as [number, number, number, number][];
    const result: FilteredChunks = {
      ids: rows.map((r) => r[0]),
      documentIds: rows.map((r) => r[1]),
      chunkIndexes: rows.map((r) => r[2]),
      documentChunks: new Map(rows.map((r) => [r[1], r[3]])),
      set: new Set(rows.map((r) => r[0])),
    };
    this.filterCache.delete(key);
    this.filterCache.set(key, { version, result });
    if (this.filterCache.size > 64) this.filterCache.delete(this.filterCache.keys().next().value as string);
    return result;
  }

  /**
   * Documents of `kb` (all KBs when undefined) by id, `limit` after id `afterId`, skipping
   * the first `offset` of those; with a filter, those with at least one matching chunk.
   */
  listDocuments(
    kb: string | undefined,
    options?: { filter?: FilterNode; afterId?: number; limit?: number; offset?: number; metadata?: false },
  ): DocumentRecord[];
  /** {@link listDocuments} with each document's metadata. */
  listDocuments(
    kb: string | undefined,
    options: { filter?: FilterNode; afterId?: number; limit?: number; offset?: number; metadata: true },
  ): (DocumentRecord & { metadata: DocumentMetadata })[];
  listDocuments(
    kb: string | undefined,
    options?: { filter?: FilterNode; afterId?: number; limit?: number; offset?: number; metadata?: boolean },
  ): DocumentRecord[];
  listDocuments(
    kb: string | undefined,
    options: {
      filter?: FilterNode;
      afterId?: number;
      limit?: number;
      offset?: number;
      metadata?: boolean;
    } = {},
  ): DocumentRecord[] {
    const where = options.filter ? compileSqliteFilter(options.filter, catalogField) : undefined;
    const rows = this.db
      .prepare(
        `SELECT ${DOCUMENT_COLUMNS}${options.metadata ? ", metadata" : ""} FROM documents d WHERE (? IS NULL OR d.kb = ?) AND d.id > ?${
          where ? ` AND EXISTS (SELECT 1 FROM chunks c WHERE c.document_id = d.id AND ${where.sql})` : ""
        } ORDER BY d.id LIMIT ? OFFSET ?`,
      )
      .all(
        kb ?? null,
        kb ?? null,
        options.afterId ?? 0,
        ...(where?.params ?? []),
        options.limit ?? -1,
        options.offset ?? 0,
      ) as (DocumentRow & { metadata?: string })[];
    return rows.map((r) =>
      r.metadata === undefined
        ? toDocumentRecord(r)
        : { ...toDocumentRecord(r), metadata: JSON.parse(r.metadata) as DocumentMetadata },
    );
  }

  /** Number of documents of `kb` (all KBs when undefined); with a filter, those with a matching chunk. */
  countDocuments(kb: string | undefined, filter?: FilterNode): number {
    const where = filter ? compileSqliteFilter(filter, catalogField) : undefined;
    return this.db
      .prepare(
        `SELECT count(*) FROM documents d WHERE (? IS NULL OR d.kb = ?)${
          where ? ` AND EXISTS (SELECT 1 FROM chunks c WHERE c.document_id = d.id AND ${where.sql})` : ""
        }`,
      )
      .pluck()
      .get(kb ?? null, kb ?? null, ...(where?.params ?? [])) as number;
  }

  /**
   * Documents of a KB that came from one source `uri`: the document of that uri and its
   * child documents (`<uri>#…`, e.g. an upload's attachments or an mbox's messages), by id.
   */
  documentsOfSource(kb: string, uri: string): DocumentRecord[] {
    const rows = this.prepare(
      `SELECT ${DOCUMENT_COLUMNS} FROM documents WHERE kb = ? AND (uri = ? OR substr(uri, 1, ?) = ?) ORDER BY id`,
    ).all(kb, uri, uri.length + 1, `${uri}#`) as DocumentRow[];
    return rows.map(toDocumentRecord);
  }

  /** The subset of `ids` that are documents of knowledge base `kb`, in the order given. */
  documentIdsIn(kb: string, ids: readonly number[]): number[] {
    const owned = this.prepare("SELECT 1 FROM documents WHERE id = ? AND kb = ?").pluck();
    return ids.filter((id) => Number.isSafeInteger(id) && owned.get(id, kb) !== undefined);
  }

  /** Runs `fn` in one write transaction (`BEGIN IMMEDIATE`), committed when it returns, rolled back when it throws. */
  transaction<T>(fn: () => T): T {
    return this.db.transaction(fn).immediate();
  }

  /** Reads one row, so a health check knows the database answers. @throws when it does not. */
  ping(): void {
    this.prepare("SELECT 1").get();
  }

  /** A document by id, with its metadata, or undefined. */
  documentById(id: number): (DocumentRecord & { metadata: DocumentMetadata }) | undefined {
    const row = this.prepare(`SELECT ${DOCUMENT_COLUMNS}, metadata FROM documents WHERE id = ?`).get(id) as
      | (DocumentRow & { metadata: string })
      | undefined;
    return row && { ...toDocumentRecord(row), metadata: JSON.parse(row.metadata) };
  }

  /** A document's metadata (without reading its text), or undefined when there is no such document. */
  documentMetadata(id: number): DocumentMetadata | undefined {
    const row = this.prepare("SELECT metadata FROM documents WHERE id = ?").get(id) as
      | { metadata: string }
      | undefined;
    return row && (JSON.parse(row.metadata) as DocumentMetadata);
  }

  /** Returns a knowledge base, or undefined. */
  getKb(name: string): KbRecord | undefined {
    const row = this.prepare("SELECT name, config, created_at FROM kbs WHERE name = ?").get(name) as
      | { name: string; config: string; created_at: string }
      | undefined;
    return row && { name: row.name, config: withDefaults(JSON.parse(row.config)), createdAt: row.created_at };
  }

  /** Lists knowledge bases by name. */
  listKbs(): KbRecord[] {
    const rows = this.prepare("SELECT name, config, created_at FROM kbs ORDER BY name").all() as {
      name: string;
      config: string;
      created_at: string;
    }[];
    return rows.map((r) => ({
      name: r.name,
      config: withDefaults(JSON.parse(r.config)),
      createdAt: r.created_at,
    }));
  }

  /** Inserts a knowledge base. @throws ConfigError if the config is invalid. */
  insertKb(config: KnowledgeBaseConfig): KbRecord {
    validateKbConfig(config);
    const createdAt = new Date().toISOString();
    this.prepare("INSERT INTO kbs (name, config, created_at) VALUES (?, ?, ?)").run(
      config.name,
      JSON.stringify(config),
      createdAt,
    );
    return { name: config.name, config, createdAt };
  }

  /** Replaces a knowledge base's configuration. @throws ConfigError if the config is invalid. */
  updateKbConfig(config: KnowledgeBaseConfig): void {
    validateKbConfig(config);
    this.prepare("UPDATE kbs SET config = ? WHERE name = ?").run(JSON.stringify(config), config.name);
  }

  /**
   * Chunks of a KB's embedded documents (the ones that have vectors), by id, as
   * `{ id, text, documentId, chunkIndex, type }`, `limit` at a time after id `afterId`.
   */
  embeddedChunks(
    kb: string,
    afterId: number,
    limit: number,
  ): { id: number; text: string; documentId: number; chunkIndex: number; type: string }[] {
    return this.prepare(
      `SELECT c.id, c.text, c.document_id AS documentId, c.chunk_index AS chunkIndex, d.type
         FROM chunks c JOIN documents d ON d.id = c.document_id
         WHERE c.kb = ? AND d.embedded = 1 AND c.id > ? ORDER BY c.id LIMIT ?`,
    ).all(kb, afterId, limit) as {
      id: number;
      text: string;
      documentId: number;
      chunkIndex: number;
      type: string;
    }[];
  }

  /** Number of chunks of a KB's embedded documents. */
  embeddedChunkCount(kb: string): number {
    return (
      this.db
        .prepare(
          "SELECT count(*) AS n FROM chunks c JOIN documents d ON d.id = c.document_id WHERE c.kb = ? AND d.embedded = 1",
        )
        .get(kb) as { n: number }
    ).n;
  }

  /** Re-labels a KB's documents processed with pipeline hash `from` as processed with `to`. */
  relabelPipeline(kb: string, from: string, to: string): void {
    this.prepare("UPDATE documents SET pipeline_hash = ? WHERE kb = ? AND pipeline_hash = ?").run(
      to,
      kb,
      from,
    );
  }

  /**
   * Deletes a knowledge base's catalog rows: postings, chunks, documents and the
   * KB itself. Call inside a transaction together with dropping its vectors.
   * The embedding cache is shared and kept.
   */
  deleteKb(name: string): void {
    for (const table of ["kw_seg_blocks", "kw_seg_terms", "kw_segments", "kw_pending"])
      this.prepare(`DELETE FROM ${table} WHERE kb = ?`).run(name);
    this.prepare("DELETE FROM chunks WHERE kb = ?").run(name);
    this.prepare("DELETE FROM documents WHERE kb = ?").run(name);
    this.prepare("DELETE FROM kbs WHERE name = ?").run(name);
  }

  /** Document and chunk counts of a knowledge base. */
  counts(kb: string): KbCounts {
    // Document and chunk counts from the statistics the triggers keep (no scan of the KB).
    const stats = this.prepare("SELECT documents, unembedded, chunks FROM kb_stats WHERE kb = ?").get(kb) as
      | { documents: number; unembedded: number; chunks: number }
      | undefined;
    const d = { n: stats?.documents ?? 0, e: (stats?.documents ?? 0) - (stats?.unembedded ?? 0) };
    const c = { n: stats?.chunks ?? 0 };
    const byType: Record<string, number> = {};
    const rows = this.prepare(
      "SELECT type, count(*) AS n FROM documents WHERE kb = ? GROUP BY type ORDER BY type",
    ).all(kb) as { type: string; n: number }[];
    for (const row of rows) byType[row.type] = row.n;
    return { documents: d.n, chunks: c.n, embeddedDocuments: d.e, documentsByType: byType };
  }

  /**
   * Number of documents of a KB stored without vectors (ingested with embedding off), from
   * the statistics the database keeps by trigger (one row read, whatever the KB's size).
   */
  unembeddedDocuments(kb: string): { documents: number; unembedded: number } {
    const row = this.prepare("SELECT documents, unembedded FROM kb_stats WHERE kb = ?").get(kb) as
      | { documents: number; unembedded: number }
      | undefined;
    return { documents: row?.documents ?? 0, unembedded: row?.unembedded ?? 0 };
  }

  /** Looks up a document by its URI. */
  getDocument(kb: string, uri: string): DocumentRecord | undefined {
    const row = this.prepare("SELECT * FROM documents WHERE kb = ? AND uri = ?").get(kb, uri) as
      | DocumentRow
      | undefined;
    return row && toDocumentRecord(row);
  }

  /** Documents whose `path` is `path` (a Slack export yields several per path). */
  documentsByPath(kb: string, path: string): DocumentRecord[] {
    const rows = this.prepare("SELECT * FROM documents WHERE kb = ? AND path = ?").all(
      kb,
      path,
    ) as DocumentRow[];
    return rows.map(toDocumentRecord);
  }

  /** Distinct source paths of a KB that start with `prefix` (e.g. a folder path ending in `/`). */
  sourcePathsUnder(kb: string, prefix: string): string[] {
    const rows = this.prepare(
      "SELECT DISTINCT path FROM documents WHERE kb = ? AND substr(path, 1, ?) = ?",
    ).all(kb, prefix.length, prefix) as { path: string }[];
    return rows.map((r) => r.path);
  }

  /** The extracted text of a document. */
  documentText(documentId: number): string {
    const row = this.prepare("SELECT text FROM documents WHERE id = ?").get(documentId) as
      | { text: string | Buffer }
      | undefined;
    return row ? decodeDocumentText(row.text) : "";
  }

  /**
   * A random id of this database, made when it is first needed and kept in its
   * `meta` table: caches shared between processes (Redis) scope their keys with it,
   * so two data directories, or a data directory wiped and rebuilt, never share results.
   */
  storeId(): string {
    const row = this.prepare("SELECT value FROM meta WHERE key = 'store_id'").get() as
      | { value: string }
      | undefined;
    if (row) return row.value;
    const id = randomUUID();
    this.prepare("INSERT OR IGNORE INTO meta (key, value) VALUES ('store_id', ?)").run(id);
    return (this.prepare("SELECT value FROM meta WHERE key = 'store_id'").get() as { value: string }).value;
  }

  /**
   * A version of a KB's indexed data that changes whenever a document is added, replaced,
   * re-labelled as embedded or removed: a counter the database's triggers bump in the same
   * transaction, never reset (a KB dropped and re-created continues from where it was), so
   * reading it costs one row whatever the KB's size. Search-result cache keys include it,
   * so an ingest invalidates cached results.
   */
  dataVersion(kb: string): string {
    const row = this.prepare("SELECT version FROM kb_stats WHERE kb = ?").get(kb) as
      | { version: number }
      | undefined;
    return `v${row?.version ?? 0}`;
  }

  /**
   * The most recently ingested document of a KB (latest `ingested_at`, then the
   * highest id), or undefined when the KB has none.
   */
  latestDocument(kb: string): DocumentRecord | undefined {
    const row = this.prepare(
      "SELECT * FROM documents WHERE kb = ? ORDER BY ingested_at DESC, id DESC LIMIT 1",
    ).get(kb) as DocumentRow | undefined;
    return row && toDocumentRecord(row);
  }

  /** The most recently ingested of these documents (as {@link latestDocument}), or undefined. */
  latestDocumentAmong(ids: readonly number[]): DocumentRecord | undefined {
    if (ids.length === 0) return undefined;
    const row = this.db
      .prepare(
        "SELECT * FROM documents WHERE id IN (SELECT value FROM json_each(?)) ORDER BY ingested_at DESC, id DESC LIMIT 1",
      )
      .get(JSON.stringify(ids)) as DocumentRow | undefined;
    return row && toDocumentRecord(row);
  }

  /** Chunk row ids of a document, in chunk order. */
  chunkIds(documentId: number): number[] {
    return (
      this.prepare("SELECT id FROM chunks WHERE document_id = ? ORDER BY chunk_index").all(documentId) as {
        id: number;
      }[]
    ).map((r) => r.id);
  }

  /** Chunk texts of a document, in chunk order (for re-embedding). */
  chunkTexts(documentId: number): { id: number; text: string }[] {
    return this.prepare("SELECT id, text FROM chunks WHERE document_id = ? ORDER BY chunk_index").all(
      documentId,
    ) as { id: number; text: string }[];
  }

  /**
   * Inserts a document row; returns its id: `doc.id` when given (a replaced document keeping
   * its id; no row may have it), else a new one. Call inside a transaction.
   */
  insertDocument(doc: NewDocument): number {
    const result = this.prepare(
      `INSERT INTO documents (id, kb, uri, path, type, title, content_hash, pipeline_hash, embedded, metadata, text, chunk_count, ingested_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(
      doc.id ?? null,
      doc.kb,
      doc.uri,
      doc.path,
      doc.type,
      doc.title ?? null,
      doc.contentHash,
      doc.pipelineHash,
      doc.embedded ? 1 : 0,
      JSON.stringify(doc.metadata),
      encodeDocumentText(doc.text),
      doc.chunkCount,
      new Date().toISOString(),
    );
    return Number(result.lastInsertRowid);
  }

  /**
   * Inserts a chunk row with its BM25 field lengths in tokens (body, title); returns its id.
   * Call inside a transaction.
   */
  insertChunk(kb: string, documentId: number, chunk: Chunk, tokenCount: number, titleTokenCount = 0): number {
    const result = this.prepare(
      `INSERT INTO chunks (kb, document_id, chunk_index, total_chunks, chunk_type, start, end, text, context_prefix, metadata, token_count, title_token_count)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(
      kb,
      documentId,
      chunk.chunkIndex,
      chunk.totalChunks,
      chunk.chunkType,
      chunk.start,
      chunk.end,
      chunk.text,
      chunk.contextPrefix ?? null,
      JSON.stringify(chunk.metadata),
      tokenCount,
      titleTokenCount,
    );
    return Number(result.lastInsertRowid);
  }

  /** The subset of `ids` that are chunks of knowledge base `kb`. */
  knownChunkIds(kb: string, ids: readonly number[]): Set<number> {
    const wanted = ids.filter((id) => Number.isInteger(id));
    if (wanted.length === 0) return new Set();
    // One query for the whole hit list (this runs on every vector search).
    // Row id lookups (`+kb` keeps SQLite off the (kb, …) index, which would scan the whole KB).
    const rows = this.prepare(
      "SELECT id FROM chunks WHERE id IN (SELECT value FROM json_each(?)) AND +kb = ?",
    )
      .pluck()
      .all(JSON.stringify(wanted), kb) as number[];
    return new Set(rows);
  }

  /** Sets the BM25 field lengths of a chunk in tokens (after BM25 indexing). */
  setTokenCount(chunkId: number, tokenCount: number, titleTokenCount = 0): void {
    this.prepare("UPDATE chunks SET token_count = ?, title_token_count = ? WHERE id = ?").run(
      tokenCount,
      titleTokenCount,
      chunkId,
    );
  }

  /** Marks a document as embedded. */
  markEmbedded(documentId: number): void {
    this.prepare("UPDATE documents SET embedded = 1 WHERE id = ?").run(documentId);
  }

  /** Deletes a document and (by cascade) its chunks. Postings and vectors are removed by the caller. */
  deleteDocument(documentId: number): void {
    this.prepare("DELETE FROM documents WHERE id = ?").run(documentId);
  }

  /** Loads chunks with their documents' attribution fields, keyed by chunk id. */
  loadChunks(ids: readonly number[]): Map<number, StoredChunk> {
    const out = new Map<number, StoredChunk>();
    const stmt = this.prepare(
      `SELECT c.id, c.kb, c.document_id, c.chunk_index, c.total_chunks, c.chunk_type, c.start, c.end, c.text,
              c.context_prefix, c.metadata, d.uri, d.path, d.type, d.title, d.metadata AS doc_metadata
       FROM chunks c JOIN documents d ON d.id = c.document_id WHERE c.id = ?`,
    );
    for (const id of ids) {
      const r = stmt.get(id) as ChunkRow | undefined;
      if (!r) continue;
      out.set(id, {
        id: r.id,
        kb: r.kb,
        documentId: r.document_id,
        chunkIndex: r.chunk_index,
        totalChunks: r.total_chunks,
        chunkType: r.chunk_type,
        start: r.start,
        end: r.end,
        text: r.text,
        contextPrefix: r.context_prefix,
        metadata: JSON.parse(r.metadata),
        document: {
          uri: r.uri,
          path: r.path,
          type: r.type,
          title: r.title,
          metadata: JSON.parse(r.doc_metadata),
        },
      });
    }
    return out;
  }
}

/** The columns of a {@link DocumentRecord} (never the text, which can be large). */
const DOCUMENT_COLUMNS =
  "id, kb, uri, path, type, title, content_hash, pipeline_hash, embedded, chunk_count, ingested_at";

interface DocumentRow {
  id: number;
  kb: string;
  uri: string;
  path: string;
  type: string;
  title: string | null;
  content_hash: string;
  pipeline_hash: string;
  embedded: number;
  chunk_count: number;
  ingested_at: string;
}

interface ChunkRow {
  id: number;
  kb: string;
  document_id: number;
  chunk_index: number;
  total_chunks: number;
  chunk_type: string;
  start: number;
  end: number;
  text: string;
  context_prefix: string | null;
  metadata: string;
  uri: string;
  path: string;
  type: string;
  title: string | null;
  doc_metadata: string;
}

/** Fills fields added to the configuration after a KB was created with their defaults. */
function withDefaults(stored: KnowledgeBaseConfig): KnowledgeBaseConfig {
  const base = defaultKbConfig(stored.name);
  return {
    name: stored.name,
    chunking: { ...base.chunking, ...stored.chunking },
    embedding: { ...base.embedding, ...stored.embedding },
    vectorStore: { ...base.vectorStore, ...stored.vectorStore },
    retrieval: {
      ...base.retrieval,
      ...stored.retrieval,
      mode: parseRetrievalMode(String(stored.retrieval?.mode ?? base.retrieval.mode)) ?? base.retrieval.mode,
    },
    ...(stored.extraction ? { extraction: stored.extraction } : {}),
  };
}

/** Document texts shorter than this (UTF-8 bytes) are stored as they are. */
const COMPRESS_FROM_BYTES = 256;

/**
 * The stored form of a document's text: raw DEFLATE (RFC 1951, `node:zlib`) as a BLOB when
 * that is smaller, else the text itself. Chunk texts stay plain (search reads them); the whole
 * text is only read to show a document, so it is kept compressed (about a third of its size).
 */
export function encodeDocumentText(text: string): string | Buffer {
  const bytes = Buffer.from(text, "utf8");
  if (bytes.length < COMPRESS_FROM_BYTES) return text;
  const packed = deflateRawSync(bytes);
  return packed.length < bytes.length ? packed : text;
}

/** Reads a value written by {@link encodeDocumentText} (a plain TEXT value as it is). */
export function decodeDocumentText(value: string | Buffer | null | undefined): string {
  if (value == null) return "";
  return typeof value === "string" ? value : inflateRawSync(value).toString("utf8");
}

function toDocumentRecord(r: DocumentRow): DocumentRecord {
  return {
    id: r.id,
    kb: r.kb,
    uri: r.uri,
    path: r.path,
    type: r.type,
    title: r.title,
    contentHash: r.content_hash,
    pipelineHash: r.pipeline_hash,
    embedded: r.embedded === 1,
    chunkCount: r.chunk_count,
    ingestedAt: r.ingested_at,
  };
}
