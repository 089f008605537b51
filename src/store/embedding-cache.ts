/**
 * The persistent embedding cache's tables in `kl.db`: `embedding_entries`, vectors keyed by
 * an `embedding_models` id (provider and model) and the first 16 bytes of the text's SHA-256.
 * An entry holds the vector, or (empty vector) the rowid of the embedded vector store's
 * record holding the same vector, so a vector stored with a chunk is kept once. Triggers on
 * `vec_records` drop a reference when its record is replaced, changed or deleted. The view
 * `embedding_cache` shows the entries with provider, model, hex hash and (collection, id)
 * for diagnostics. `CachedEmbedder` (embed/cache.ts) reads and writes through this class.
 */
import type { Statement } from "better-sqlite3";
import { blobToVector, type Db, vectorToBlob } from "./database.js";

/** Bytes of the SHA-256 kept as an entry's key (128 bits: collisions are out of reach). */
const KEY_BYTES = 16;

/**
 * The key stored for a vector's text hash: a 64-character hex SHA-256 becomes its first 16
 * bytes; any other key is kept as given. (Text entries keep their keys as given.)
 */
function entryKey(hash: string): Buffer | string {
  return hash.length === 64 && /^[0-9a-f]+$/.test(hash)
    ? Buffer.from(hash.slice(0, KEY_BYTES * 2), "hex")
    : hash;
}

/** The rows of the embedding cache, by (provider, model, text hash). */
export class EmbeddingCacheTable {
  private readonly getStatement: Statement;
  private readonly putStatement: Statement;
  private readonly putRefStatement: Statement;
  private readonly modelStatement: Statement;
  private readonly addModelStatement: Statement;
  /** Committed model ids by `provider\0model` (a committed id never changes). */
  private readonly models = new Map<string, number>();

  constructor(private readonly db: Db) {
    this.getStatement = db.prepare(
      `SELECT coalesce(r.vector, e.vector) AS vector FROM embedding_entries e
       LEFT JOIN vec_records r ON length(e.vector) = 0 AND r.rowid = e.record
       WHERE e.model = ? AND e.key = ?`,
    );
    this.putRefStatement = db.prepare(
      `INSERT INTO embedding_entries (model, key, vector, record)
       SELECT ?, ?, x'', rowid FROM vec_records WHERE collection = ? AND id = ?
       ON CONFLICT (model, key) DO UPDATE SET vector = x'', record = excluded.record`,
    );
    this.putStatement = db.prepare(
      "INSERT OR REPLACE INTO embedding_entries (model, key, vector, record) VALUES (?, ?, ?, NULL)",
    );
    this.modelStatement = db
      .prepare("SELECT id FROM embedding_models WHERE provider = ? AND model = ?")
      .pluck();
    this.addModelStatement = db.prepare(
      "INSERT INTO embedding_models (provider, model) VALUES (?, ?) ON CONFLICT DO NOTHING",
    );
  }

  /** The id of (provider, model); with `create`, registered when missing, else undefined. */
  private modelId(provider: string, model: string, create: boolean): number | undefined {
    const name = `${provider}\u0000${model}`;
    let id = this.models.get(name);
    if (id !== undefined) return id;
    id = this.modelStatement.get(provider, model) as number | undefined;
    if (id === undefined && create) {
      this.addModelStatement.run(provider, model);
      id = this.modelStatement.get(provider, model) as number | undefined;
    }
    // An id read inside a transaction may be this transaction's own insert, gone on rollback.
    if (id !== undefined && !this.db.inTransaction) this.models.set(name, id);
    return id;
  }

  private read(provider: string, model: string, key: Buffer | string): Buffer | undefined {
    const id = this.modelId(provider, model, false);
    if (id === undefined) return undefined;
    const row = this.getStatement.get(id, key) as { vector: Buffer | null } | undefined;
    return row?.vector ?? undefined;
  }

  /** The cached vector, or undefined (no entry, or a reference whose record is gone). */
  get(provider: string, model: string, hash: string): Float32Array | undefined {
    const vector = this.read(provider, model, entryKey(hash));
    if (!vector || vector.length === 0) return undefined;
    return blobToVector(vector);
  }

  /** Stores (or replaces) a vector. */
  put(provider: string, model: string, hash: string, vector: Float32Array): void {
    this.putStatement.run(this.modelId(provider, model, true), entryKey(hash), vectorToBlob(vector));
  }

  /**
   * A cached text (not a vector: an LLM-written chunk context) under provider
   * `text:<namespace>`, model `namespace` and `key`, stored as UTF-8 bytes in the same
   * table, so it survives restarts and is shared by the KBs of the data directory.
   */
  getText(namespace: string, key: string): string | undefined {
    return this.read(`text:${namespace}`, namespace, key)?.toString("utf8");
  }

  /** Stores (or replaces) a text for {@link getText}. */
  putText(namespace: string, key: string, text: string): void {
    this.putStatement.run(this.modelId(`text:${namespace}`, namespace, true), key, Buffer.from(text, "utf8"));
  }

  /**
   * Stores a reference to the embedded store's record `id` of `collection` instead of a
   * copy of its vector (the entry goes when the record is replaced or deleted, by trigger).
   * Nothing is stored when there is no such record.
   */
  putRef(provider: string, model: string, hash: string, collection: string, id: string): void {
    this.putRefStatement.run(this.modelId(provider, model, true), entryKey(hash), collection, id);
  }
}
