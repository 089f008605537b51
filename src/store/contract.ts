/**
 * The vector-store seam. Every backend (the embedded SQLite default, PostgreSQL +
 * pgvector, Qdrant, Pinecone, Chroma) implements this contract and runs the shared
 * conformance suite in `test/conformance/vector-store.ts`.
 *
 * Each knowledge base owns one collection, so knowledge bases never see each
 * other's vectors. Scores are similarities where higher is closer, whatever the
 * metric (see {@link Metric}).
 */

import type { Filter } from "../retrieve/filter.js";

/**
 * Distance metric of a collection, fixed when it is created.
 * - `cosine`: score = cosine similarity in [-1, 1].
 * - `dot`: score = inner product (equal to cosine for L2-normalised vectors).
 * - `euclidean`: score = −(L2 distance), so 0 is an exact match and larger is closer.
 */
export type Metric = "cosine" | "euclidean" | "dot";

/** The metrics every store supports. */
export const METRICS: readonly Metric[] = ["cosine", "euclidean", "dot"];

/** A payload value: flat, so every backend can store and filter on it. */
export type PayloadValue = string | number | boolean;

/** A record's payload, e.g. `{ text: "…", documentId: 12, chunkIndex: 0 }`. */
export type Payload = Record<string, PayloadValue>;

/** One stored vector with its payload. */
export interface VectorRecord {
  /** Unique id within the collection (the chunk id). Any non-empty string. */
  id: string;
  vector: Float32Array;
  /** Flat filterable payload. */
  payload: Payload;
}

/** A search hit. */
export interface VectorHit {
  id: string;
  /** Similarity under the collection's metric; higher is closer (see {@link Metric}). */
  score: number;
  payload: Payload;
}

/** Options for {@link VectorStore.search}. */
export interface VectorSearchOptions {
  /** Number of hits to return. */
  topK: number;
  /**
   * A metadata filter on payload fields, in the language of `retrieve/filter.ts`
   * (`{ documentId: { $in: [1, 2] } }`, `$eq $ne $in $nin $lt $lte $gt $gte $and $or`;
   * a flat `{ field: value }` object is equality on every field), applied by the store's
   * own filter before top-k, so matching records are never crowded out. Every store
   * supports those operators with numeric range bounds; `$exists`, `$not`, `$prefix`
   * and date bounds only where the backend can apply them natively (see each store): a
   * filter a store cannot apply throws a `FilterError` naming the position.
   */
  filter?: Filter;
  /** Hits with a score below this are dropped (0 means 0). */
  scoreThreshold?: number;
  /**
   * Scan every vector instead of using an approximate index. Stores that only
   * search exactly ignore it; the embedded store otherwise chooses (exact for small
   * collections and very selective filters, HNSW with exact rescoring above).
   */
  exact?: boolean;
  /**
   * How hard an approximate index searches, relative to its default (1): the embedded
   * store's HNSW search list is multiplied by it (never below the candidates it fetches),
   * so 0.5 costs about half the time for a little recall. Hybrid searches pass
   * `HYBRID_VECTOR_EFFORT` (retrieve/search.ts). Stores without such a setting ignore it.
   */
  effort?: number;
}

/** Collection description returned by {@link VectorStore.info}. */
export interface CollectionInfo {
  name: string;
  dimension: number;
  metric: Metric;
  /** Number of records. */
  count: number;
}

/**
 * A vector store. Implementations batch writes themselves (at most 100 records per
 * request to a server) and throw `KnowledgeLayerError`s that name the collection
 * and, for a bad record, the record id.
 */
export interface VectorStore {
  /** Backend name for messages and reports, e.g. `sqlite`, `pgvector`, `qdrant`. */
  readonly kind: string;
  /** Opens connections; idempotent. @throws when the server cannot be reached. */
  connect(): Promise<void>;
  /** Releases connections. */
  close(): Promise<void>;
  /** Creates the collection if absent. @throws if it exists with another dimension or metric. */
  createCollection(name: string, dimension: number, metric: Metric): Promise<void>;
  /** Removes a collection and all its records; a missing collection is not an error. */
  dropCollection(name: string): Promise<void>;
  /** Inserts or replaces records (re-adding an id replaces it). @throws if a vector has the wrong dimension; nothing of that batch call is written. */
  addBatch(collection: string, records: VectorRecord[]): Promise<void>;
  /** Nearest neighbours of `vector`, best first (ties by id). @throws for a missing collection or wrong dimension. */
  search(collection: string, vector: Float32Array, options: VectorSearchOptions): Promise<VectorHit[]>;
  /** The stored records with these ids, in the order given; ids not stored are left out. */
  get(collection: string, ids: string[]): Promise<VectorRecord[]>;
  /** Deletes records by id; unknown ids are ignored. */
  delete(collection: string, ids: string[]): Promise<void>;
  /** Replaces the payload and vector of existing records. @throws naming the id when one does not exist. */
  update(collection: string, records: VectorRecord[]): Promise<void>;
  /** Describes a collection, or `undefined` if it does not exist. */
  info(collection: string): Promise<CollectionInfo | undefined>;
  /**
   * True when the collection exists; optional, for stores where that is cheaper than
   * {@link info} (which counts the records). Search asks it on every query.
   */
  hasCollection?(collection: string): Promise<boolean>;
  /** True when the store answers. Never throws. */
  health(): Promise<boolean>;
}
