/**
 * The vector-store seam. The embedded default (SQLite + sqlite-vec) implements it
 * now; PostgreSQL+pgvector, Qdrant and Pinecone implement the same contract.
 *
 * Each knowledge base owns one collection, so knowledge bases never see each
 * other's vectors. Scores are cosine similarities in [-1, 1] (higher is closer).
 */

/** Distance metric of a collection. */
export type Metric = "cosine";

/** One stored vector with its payload. */
export interface VectorRecord {
  /** Unique id within the collection (the chunk id). */
  id: string;
  vector: Float32Array;
  /** Flat filterable payload, e.g. `{ documentId: "…", type: "pdf" }`. */
  payload: Record<string, string | number>;
}

/** A search hit. */
export interface VectorHit {
  id: string;
  /** Cosine similarity in [-1, 1]. */
  score: number;
  payload: Record<string, string | number>;
}

/** Options for {@link VectorStore.search}. */
export interface VectorSearchOptions {
  /** Number of hits to return. */
  topK: number;
  /** Equality filters on payload fields; all must match. */
  filter?: Record<string, string | number>;
  /** Hits with a score below this are dropped (0 means 0). */
  scoreThreshold?: number;
}

/** Collection description returned by {@link VectorStore.info}. */
export interface CollectionInfo {
  name: string;
  dimension: number;
  metric: Metric;
  count: number;
}

export interface VectorStore {
  /** Opens connections; idempotent. */
  connect(): Promise<void>;
  /** Releases connections. */
  close(): Promise<void>;
  /** Creates the collection if absent. @throws if it exists with another dimension or metric. */
  createCollection(name: string, dimension: number, metric: Metric): Promise<void>;
  /** Inserts or replaces records. @throws if a vector has the wrong dimension. */
  addBatch(collection: string, records: VectorRecord[]): Promise<void>;
  /** Nearest neighbours of `vector`, best first. */
  search(collection: string, vector: Float32Array, options: VectorSearchOptions): Promise<VectorHit[]>;
  /** Deletes records by id. */
  delete(collection: string, ids: string[]): Promise<void>;
  /** Replaces the payload and/or vector of existing records. */
  update(collection: string, records: VectorRecord[]): Promise<void>;
  /** Describes a collection, or `undefined` if it does not exist. */
  info(collection: string): Promise<CollectionInfo | undefined>;
  /** True when the store answers. */
  health(): Promise<boolean>;
}
