/**
 * The persistent embedding cache's table (`embedding_cache` in `kl.db`): vectors keyed by
 * provider, model and SHA-256 of the text. A row holds the vector, or (empty vector) a
 * reference to the embedded vector store's record holding the same vector, so a vector
 * stored with a chunk is kept once. `CachedEmbedder` (embed/cache.ts) reads and writes
 * through it.
 */
import type { Statement } from "better-sqlite3";
import { blobToVector, type Db, vectorToBlob } from "./database.js";

/** The rows of the embedding cache, by (provider, model, text hash). */
export class EmbeddingCacheTable {
  private readonly getStatement: Statement;
  private readonly putStatement: Statement;
  private readonly putRefStatement: Statement;

  constructor(db: Db) {
    this.getStatement = db.prepare(
      `SELECT coalesce(r.vector, c.vector) AS vector FROM embedding_cache c
       LEFT JOIN vec_records r ON length(c.vector) = 0 AND r.collection = c.ref_collection AND r.id = c.ref_id
       WHERE c.provider = ? AND c.model = ? AND c.text_hash = ?`,
    );
    this.putRefStatement = db.prepare(
      `INSERT INTO embedding_cache (provider, model, text_hash, vector, ref_collection, ref_id)
       VALUES (?, ?, ?, x'', ?, ?)
       ON CONFLICT (provider, model, text_hash) DO UPDATE
       SET vector = x'', ref_collection = excluded.ref_collection, ref_id = excluded.ref_id`,
    );
    this.putStatement = db.prepare(
      "INSERT OR REPLACE INTO embedding_cache (provider, model, text_hash, vector) VALUES (?, ?, ?, ?)",
    );
  }

  /** The cached vector, or undefined (no entry, or a reference whose record is gone). */
  get(provider: string, model: string, hash: string): Float32Array | undefined {
    const row = this.getStatement.get(provider, model, hash) as { vector: Buffer | null } | undefined;
    if (!row?.vector || row.vector.length === 0) return undefined;
    return blobToVector(row.vector);
  }

  /** Stores (or replaces) a vector. */
  put(provider: string, model: string, hash: string, vector: Float32Array): void {
    this.putStatement.run(provider, model, hash, vectorToBlob(vector));
  }

  /**
   * A cached text (not a vector: an LLM-written chunk context) under provider
   * `text:<namespace>`, model `namespace` and `key`, stored as UTF-8 bytes in the same
   * table, so it survives restarts and is shared by the KBs of the data directory.
   */
  getText(namespace: string, key: string): string | undefined {
    const row = this.getStatement.get(`text:${namespace}`, namespace, key) as
      | { vector: Buffer | null }
      | undefined;
    return row?.vector ? row.vector.toString("utf8") : undefined;
  }

  /** Stores (or replaces) a text for {@link getText}. */
  putText(namespace: string, key: string, text: string): void {
    this.putStatement.run(`text:${namespace}`, namespace, key, Buffer.from(text, "utf8"));
  }

  /**
   * Stores a reference to the embedded store's record `id` of `collection` instead of a
   * copy of its vector (the entry goes when the record is replaced or deleted, by trigger).
   */
  putRef(provider: string, model: string, hash: string, collection: string, id: string): void {
    this.putRefStatement.run(provider, model, hash, collection, id);
  }
}
