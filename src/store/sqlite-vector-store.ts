import type { Statement } from "better-sqlite3";
import { KnowledgeLayerError } from "../errors.js";
import { parseFilter } from "../retrieve/filter.js";
import { AnnWorkerIndexes } from "./ann-client.js";
import { AnnIndexes, type AnnOptions, defaultAnnDir, ensureAnnSchema } from "./ann-index.js";
import { checkCollectionSpec } from "./checks.js";
import type {
  CollectionInfo,
  Metric,
  VectorHit,
  VectorRecord,
  VectorSearchOptions,
  VectorStore,
} from "./contract.js";
import { blobToVector, type Db, statementCache, vectorToBlob, withinTransaction } from "./database.js";
import { compileSqliteFilter, payloadField } from "./filter-sql.js";

/** A row of a search's SQL: record id, payload JSON and score. */
type SearchRow = { id: string; payload: string; score: number };

/** Options of {@link SqliteVectorStore}. */
export interface SqliteVectorStoreOptions {
  /** Approximate-index tuning, or `false` to always search exactly. */
  ann?: AnnOptions | false;
}

/**
 * The embedded default vector store: vectors as BLOBs in the project's SQLite
 * file, scored with sqlite-vec's distance functions: cosine similarity =
 * 1 − `vec_distance_cosine`, euclidean score = −`vec_distance_l2`, dot product =
 * (|q|² + |v|² − l2²) / 2.
 *
 * Collections of at least `ann.minRecords` vectors (default 10,000) are searched
 * through an HNSW index (see `ann-index.ts`) whose candidates are rescored exactly
 * in SQL, so scores are exact and only recall is approximate; smaller collections,
 * `exact: true` searches and filters too selective for the candidates are scanned
 * exactly. The index is derived from the stored vectors and repairs itself, so
 * SQLite stays the only source of truth.
 *
 * It shares the connection of the catalog, so a caller may wrap store writes and
 * catalog writes in one SQLite transaction. The async methods run synchronously.
 */
export class SqliteVectorStore implements VectorStore {
  /** The prepared statement for an SQL text, prepared once per store (search runs one per call). */
  private readonly prepare: (sql: string) => Statement;

  readonly kind = "sqlite";

  /**
   * The approximate indexes, or undefined when disabled: on a worker thread
   * ({@link AnnWorkerIndexes}, asynchronous) for a database in a file, else in process.
   */
  readonly ann: AnnIndexes | AnnWorkerIndexes | undefined;

  constructor(
    private readonly db: Db,
    options: SqliteVectorStoreOptions = {},
  ) {
    this.prepare = statementCache(db);
    ensureAnnSchema(db);
    const ann = options.ann;
    if (ann === false) this.ann = undefined;
    else {
      const inWorker =
        (ann?.worker ?? process.env.KL_ANN_WORKER !== "0") &&
        (ann?.dir === undefined ? defaultAnnDir(db) : ann.dir) !== null;
      this.ann = inWorker ? new AnnWorkerIndexes(db, ann) : new AnnIndexes(db, ann);
    }
  }

  async connect(): Promise<void> {}

  /**
   * Saves approximate indexes with unsaved changes (and ends their worker thread); the
   * database stays open (it is shared).
   */
  async close(): Promise<void> {
    if (this.ann instanceof AnnWorkerIndexes) await this.ann.close();
    else this.closeSync();
  }

  /**
   * Starts {@link close} without waiting: in process the indexes are saved now (call before
   * closing the database); a worker saves them through its own connection and ends, and
   * {@link close} resolves when it has.
   */
  closeSync(): void {
    if (this.ann instanceof AnnWorkerIndexes) void this.ann.close();
    else if (this.db.open) this.ann?.saveAll(true);
  }

  /**
   * Brings a collection's approximate index up to date and saves it (building it once the
   * collection is large enough). Optional: searches do it themselves; calling it after an
   * ingest moves the indexing cost out of the first search. With a worker thread the update
   * runs there while the caller goes on (await the result to wait for it).
   * @returns true when the collection has an approximate index (now loaded and up to date),
   *   false when its searches scan exactly (small, indexes disabled, no native module).
   * @throws KnowledgeLayerError for an unknown collection.
   */
  async syncIndex(collection: string): Promise<boolean> {
    const info = this.requireCollection(collection);
    if (!this.ann) return false;
    return (await this.ann.sync(collection, info.dimension, info.metric)) ?? false;
  }

  async createCollection(name: string, dimension: number, metric: Metric): Promise<void> {
    this.createCollectionSync(name, dimension, metric);
  }

  /** Synchronous {@link createCollection}, usable inside a transaction. */
  createCollectionSync(name: string, dimension: number, metric: Metric): void {
    checkCollectionSpec(name, dimension, metric);
    const existing = this.collection(name);
    if (existing) {
      if (existing.dimension !== dimension || existing.metric !== metric) {
        throw new KnowledgeLayerError(
          `collection "${name}" exists with dimension ${existing.dimension}/${existing.metric}, not ${dimension}/${metric}`,
        );
      }
      return;
    }
    this.db.transaction(() => {
      this.prepare("INSERT INTO vec_collections (name, dimension, metric) VALUES (?, ?, ?)").run(
        name,
        dimension,
        metric,
      );
      this.ann?.onCreate(name);
    })();
  }

  async addBatch(collection: string, records: VectorRecord[]): Promise<void> {
    this.addBatchSync(collection, records);
  }

  /** Synchronous {@link addBatch}, usable inside a transaction. */
  addBatchSync(collection: string, records: VectorRecord[]): void {
    const info = this.requireCollection(collection);
    const insert = this.prepare(
      "INSERT OR REPLACE INTO vec_records (collection, id, vector, payload) VALUES (?, ?, ?, ?)",
    );
    // Every record is checked before any is written (no savepoint inside a caller's transaction).
    for (const record of records) this.checkDimension(info, record);
    withinTransaction(this.db, () => {
      for (const record of records)
        insert.run(collection, record.id, vectorToBlob(record.vector), JSON.stringify(record.payload));
    });
  }

  /**
   * Top-k records by the collection's metric (see the class comment). With a worker, the
   * HNSW request is posted before the first `await`, so the caller's synchronous work
   * after this call (a hybrid query's keyword search) runs while the worker searches.
   */
  async search(collection: string, vector: Float32Array, options: VectorSearchOptions): Promise<VectorHit[]> {
    const query = this.prepareSearch(collection, vector, options);
    let rows: SearchRow[] | undefined;
    if (query.ann) {
      // Filters are applied to the candidates; when too few pass, widen once, then scan.
      let want = query.ann.candidateCount(query.topK, options.filter !== undefined);
      for (let attempt = 0; attempt < 2 && rows === undefined; attempt++) {
        const candidates = await query.ann.candidates(
          collection,
          query.info.dimension,
          query.info.metric,
          vector,
          want,
          undefined,
          options.effort,
        );
        if (!candidates) break;
        const found = query.run(candidates);
        if (found.length >= query.topK || candidates.length < want) rows = found;
        want *= 16;
      }
    }
    return query.hits(rows ?? query.run(undefined));
  }

  /**
   * Synchronous {@link search}: through an in-process index, or an exact scan when the
   * indexes run on a worker thread.
   */
  searchSync(collection: string, vector: Float32Array, options: VectorSearchOptions): VectorHit[] {
    const query = this.prepareSearch(collection, vector, options);
    let rows: SearchRow[] | undefined;
    if (query.ann instanceof AnnIndexes) {
      let want = query.ann.candidateCount(query.topK, options.filter !== undefined);
      for (let attempt = 0; attempt < 2 && rows === undefined; attempt++) {
        const candidates = query.ann.candidates(
          collection,
          query.info.dimension,
          query.info.metric,
          vector,
          want,
          undefined,
          options.effort,
        );
        if (!candidates) break;
        const found = query.run(candidates);
        if (found.length >= query.topK || candidates.length < want) rows = found;
        want *= 16;
      }
    }
    return query.hits(rows ?? query.run(undefined));
  }

  /** The parts of a search: the collection, its SQL (for candidates or a scan), and its index. */
  private prepareSearch(
    collection: string,
    vector: Float32Array,
    options: VectorSearchOptions,
  ): {
    info: Omit<CollectionInfo, "count">;
    topK: number;
    ann: AnnIndexes | AnnWorkerIndexes | undefined;
    run: (candidates: number[] | undefined) => SearchRow[];
    hits: (rows: SearchRow[]) => VectorHit[];
  } {
    const info = this.requireCollection(collection);
    if (vector.length !== info.dimension) {
      throw new KnowledgeLayerError(
        `query vector has dimension ${vector.length}, collection "${collection}" expects ${info.dimension}`,
      );
    }
    const blob = vectorToBlob(vector);
    let scoreSql: string;
    const params: unknown[] = [];
    if (info.metric === "cosine") {
      scoreSql = "1 - vec_distance_cosine(vector, ?)";
      params.push(blob);
    } else if (info.metric === "euclidean") {
      scoreSql = "-vec_distance_l2(vector, ?)";
      params.push(blob);
    } else {
      let qq = 0;
      for (const x of vector) qq += x * x;
      scoreSql =
        "(? + vec_distance_l2(vector, ?) * vec_distance_l2(vector, ?) - vec_distance_l2(vector, ?) * vec_distance_l2(vector, ?)) / 2";
      const zero = vectorToBlob(new Float32Array(info.dimension));
      params.push(qq, zero, zero, blob, blob);
    }
    let filterSql = "";
    let filterParams: unknown[] = [];
    if (options.filter) {
      // Every operator, with number and date bounds, compiled to parameterised SQL.
      const where = compileSqliteFilter(parseFilter(options.filter), payloadField);
      filterSql = ` AND ${where.sql}`;
      filterParams = where.params;
    }
    const topK = Math.max(0, Math.floor(options.topK));
    // With candidates, `+collection` keeps SQLite on rowid lookups instead of scanning the collection.
    const run = (candidates: number[] | undefined): SearchRow[] =>
      this.prepare(
        `SELECT id, payload, ${scoreSql} AS score FROM vec_records
           WHERE ${candidates ? "rowid IN (SELECT value FROM json_each(?)) AND +" : ""}collection = ?${filterSql}
           ORDER BY score DESC, id ASC LIMIT ?`,
      ).all(
        ...params,
        ...(candidates ? [JSON.stringify(candidates)] : []),
        collection,
        ...filterParams,
        topK,
      ) as SearchRow[];
    const threshold = options.scoreThreshold;
    const hits = (rows: SearchRow[]): VectorHit[] => {
      const out: VectorHit[] = [];
      for (const row of rows) {
        const score = row.score;
        if (threshold !== undefined && score < threshold) continue;
        out.push({ id: row.id, score, payload: JSON.parse(row.payload) });
      }
      return out;
    };
    const ann = options.exact !== true && topK > 0 ? this.ann : undefined;
    return { info, topK, ann, run, hits };
  }

  async get(collection: string, ids: string[]): Promise<VectorRecord[]> {
    this.requireCollection(collection);
    const one = this.prepare("SELECT vector, payload FROM vec_records WHERE collection = ? AND id = ?");
    const out: VectorRecord[] = [];
    for (const id of ids) {
      const row = one.get(collection, id) as { vector: Buffer; payload: string } | undefined;
      if (row) out.push({ id, vector: blobToVector(row.vector), payload: JSON.parse(row.payload) });
    }
    return out;
  }

  async dropCollection(name: string): Promise<void> {
    this.dropCollectionSync(name);
  }

  async delete(collection: string, ids: string[]): Promise<void> {
    this.deleteSync(collection, ids);
  }

  /** Synchronous {@link delete}, usable inside a transaction. */
  deleteSync(collection: string, ids: string[]): void {
    const del = this.prepare("DELETE FROM vec_records WHERE collection = ? AND id = ?");
    withinTransaction(this.db, () => {
      for (const id of ids) del.run(collection, id);
    });
  }

  async update(collection: string, records: VectorRecord[]): Promise<void> {
    const info = this.requireCollection(collection);
    const upd = this.prepare(
      "UPDATE vec_records SET vector = ?, payload = ? WHERE collection = ? AND id = ?",
    );
    this.db
      .transaction(() => {
        for (const record of records) {
          this.checkDimension(info, record);
          const result = upd.run(
            vectorToBlob(record.vector),
            JSON.stringify(record.payload),
            collection,
            record.id,
          );
          if (result.changes === 0) {
            throw new KnowledgeLayerError(
              `collection "${collection}" has no record "${record.id}" to update`,
            );
          }
        }
      })
      .immediate();
  }

  /** True when the collection exists (one primary-key lookup; {@link info} also counts the records). */
  async hasCollection(collection: string): Promise<boolean> {
    return this.collection(collection) !== undefined;
  }

  async info(collection: string): Promise<CollectionInfo | undefined> {
    const info = this.collection(collection);
    if (!info) return undefined;
    const { count } = this.prepare("SELECT count(*) AS count FROM vec_records WHERE collection = ?").get(
      collection,
    ) as { count: number };
    return { ...info, count };
  }

  async health(): Promise<boolean> {
    try {
      this.prepare("SELECT vec_version()").get();
      return true;
    } catch {
      return false;
    }
  }

  /** Removes a collection and all its vectors. */
  dropCollectionSync(name: string): void {
    this.db.transaction(() => {
      // The collection row goes first so the delete trigger does not log every record.
      this.prepare("DELETE FROM vec_collections WHERE name = ?").run(name);
      this.prepare("DELETE FROM vec_records WHERE collection = ?").run(name);
      this.ann?.onDrop(name);
    })();
  }

  private collection(name: string): Omit<CollectionInfo, "count"> | undefined {
    return this.prepare("SELECT name, dimension, metric FROM vec_collections WHERE name = ?").get(name) as
      | Omit<CollectionInfo, "count">
      | undefined;
  }

  private requireCollection(name: string): Omit<CollectionInfo, "count"> {
    const info = this.collection(name);
    if (!info) throw new KnowledgeLayerError(`vector collection "${name}" does not exist`);
    return info;
  }

  private checkDimension(info: Omit<CollectionInfo, "count">, record: VectorRecord): void {
    if (record.vector.length !== info.dimension) {
      throw new KnowledgeLayerError(
        `record "${record.id}" has dimension ${record.vector.length}, collection "${info.name}" expects ${info.dimension}`,
      );
    }
  }
}
