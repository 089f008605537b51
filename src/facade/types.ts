/**
 * The public option and result types of the {@link KnowledgeLayer} facade
 * (re-exported by `knowledge-layer.ts`).
 */
import type { CacheConfig } from "../cache/index.js";
import type { KnowledgeBaseConfig, RetrievalMode } from "../config.js";
import type { ExtractOptions } from "../extract/contract.js";
import type { IngestProgress } from "../ingest/pipeline.js";
import type { Attribution } from "../retrieve/attribution.js";
import type { Filter, FilterScalar } from "../retrieve/filter.js";
import type { KbRetrievalOverrides, ResultExplanation } from "../retrieve/search.js";
import type { DocumentRecord } from "../store/catalog.js";
import type { DocumentMetadata } from "../types.js";

/** A document with its metadata (what `kl docs show` and the HTTP API show of one). */
export type DocumentDetails = DocumentRecord & { metadata: DocumentMetadata };

/** The settings of a KB that can change once it exists (see {@link KnowledgeLayer.updateKb}). */
export interface KbUpdate {
  /** Retrieval settings laid over the current ones, key by key. */
  retrieval?: Partial<KnowledgeBaseConfig["retrieval"]>;
  /** Extraction settings laid over the current ones, section by section and key by key. */
  extraction?: DeepPartial<ExtractOptions>;
}

/** Options for {@link KnowledgeLayer.search}. Unset fields come from each KB's retrieval config. */
export interface SearchOptions {
  /** Knowledge bases to query (default: the default KB). */
  kbs?: string[];
  /** Retrieval strategy (`vector` is accepted for `vector_only`); default each KB's. */
  mode?: RetrievalMode | "vector";
  /** Results returned. */
  topK?: number;
  /** Vector candidates per KB. */
  vectorTopK?: number;
  /** BM25 candidates per KB. */
  keywordTopK?: number;
  /** Hybrid fusion weights; default from each KB's config. */
  vectorWeight?: number;
  keywordWeight?: number;
  /** Skip near-duplicate removal (used by evaluation). */
  keepDuplicates?: boolean;
  /** Minimum final score (default each KB's `minScore`); 0 means no threshold. */
  minScore?: number;
  /** When nothing passes the threshold, return the best results flagged `belowThreshold`. */
  fallbackBelowThreshold?: boolean;
  /** Per-KB overrides (an agent's attachment config): max results, min score, mode. */
  perKb?: Record<string, KbRetrievalOverrides>;
  /** Attach per-result ranks and scores of every stage (`kl search --explain`). */
  explain?: boolean;
  /**
   * Metadata filter (see `retrieve/filter.ts` and the README's "Filters"): only matching
   * chunks are retrieved, before top-k, in every KB searched; e.g.
   * `{ type: "email", date: { $gte: "2024-03-01" } }`.
   * @throws FilterError (a KnowledgeLayerError) naming the position of a problem.
   */
  filter?: Filter;
  /**
   * Scan every vector instead of the approximate (HNSW) index of the embedded store: exact
   * nearest neighbours at a cost linear in the KB's size (for checking recall).
   */
  exactVectors?: boolean;
  /**
   * How hard the approximate vector index searches, as a factor of its search list
   * (default 1 for `vector_only`, `HYBRID_VECTOR_EFFORT` = 0.35 in hybrid modes); higher is
   * slower with better recall.
   */
  vectorEffort?: number;
}

/** One ranked search result with its source attribution. */
export interface SearchResult {
  /** 1-based rank. */
  rank: number;
  /**
   * The KB-level score (see `RetrievedResult.score`): cosine for vector_only, BM25
   * for keyword, the fused score normalised to [0, 1] for hybrid, the final rerank mix
   * (`0.7 × rerank + 0.3 × retrieval`) for hybrid_rerank/advanced. Several KBs are
   * fused by rank, so results are ordered by rank, not by this score.
   */
  score: number;
  /** Component scores: cosine similarity, BM25 score, fused RRF score, rerank score in [0, 1]. */
  scores: { vector?: number; keyword?: number; fused?: number; rerank?: number };
  /** The reranker that scored this result, when one ran. */
  reranker?: string;
  /** Returned although below the threshold (`fallbackBelowThreshold`). */
  belowThreshold?: boolean;
  /** Ranks and scores of each stage, with `explain`. */
  explain?: ResultExplanation;
  kb: string;
  chunkId: number;
  /** Chunk text as embedded (context prefix + body). */
  text: string;
  chunk: { index: number; total: number; type: string; start: number; end: number };
  source: Attribution;
  /** One-line citation for display. */
  citation: string;
}

/** The answer to a search. Stable JSON shape (`kl search --json`). */
export interface SearchResponse {
  query: string;
  mode: RetrievalMode;
  kbs: string[];
  /** The reranker that ran per KB (`none` when the mode does not rerank or no reranker is available). */
  rerankers: Record<string, string>;
  /** Query variants per KB (advanced). */
  variants?: Record<string, string[]>;
  results: SearchResult[];
  /** True when the response came from the result cache (same query, parameters and KB data). */
  cached?: boolean;
  /** Problems worth telling the user, e.g. documents without vectors in a vector search. */
  warnings: string[];
  tookMs: number;
}

/** Options for opening a {@link KnowledgeLayer}. */
export interface OpenOptions {
  /** Data directory; default `$KL_HOME` or `./.kl`. */
  dataDir?: string;
  /**
   * Cache of search results and query embeddings: in-process memory (default,
   * at most 10,000 entries and 64 MiB, TTL 3,600 s), Redis (shared across processes; default when
   * `$KL_CACHE_URL` is a `redis://` URL) or none.
   */
  cache?: CacheConfig;
  /**
   * Run all local-model inference off the calling thread: the bundled model in
   * worker threads for queries too, with queries on their own worker so a search
   * never waits behind an ingest's batches. Servers (`kl serve`, `kl mcp --http`)
   * set it; default false (a CLI call embeds a query on its own thread, without
   * the start-up cost of a worker). Cross-encoder reranking always runs in workers.
   */
  offThread?: boolean;
  /**
   * Partitions the embedding caches (persistent and query) by knowledge base: KBs
   * whose scopes differ never share cached vectors, so one tenant of a server cannot
   * tell from cache hits (or their timing) what another embedded or asked. `kl serve`
   * scopes by tenant. Default: one scope (everything shared, the fastest).
   */
  cacheScope?: (kb: string) => string;
  /**
   * Create the data directory and its database when they do not exist (default
   * true). Readers (`kl search`, `kl kb list`, …) pass false: a data directory
   * without a database is then an error naming the path, and nothing is created.
   */
  create?: boolean;
  /**
   * Chunk and analyse (tokenize for BM25) on a worker thread during ingests of 16 or more
   * sources, ahead of the calling thread, which embeds and commits: two cores busy instead
   * of one (default true). Runs with `embedding_semantic` chunking or LLM context always
   * chunk on the calling thread. The worker starts on first use and ends with `close()`.
   */
  chunkThread?: boolean;
}

/** Options for ingest calls. */
export interface IngestOptions {
  kb?: string;
  /**
   * Compute and store chunk vectors (default true). Keyword-only evaluation turns
   * this off. A KB with `embedding_semantic` chunking still embeds sentences to
   * find its cuts (through the embedding cache, so a later embedding ingest reuses
   * them), so its chunks are the same with and without vectors; if the model
   * cannot run, its documents are cut into fixed windows and a warning is reported.
   */
  embed?: boolean;
  onProgress?: (event: IngestProgress) => void;
  /**
   * Stops the run when aborted (`kl ingest` aborts it on SIGINT/SIGTERM): checked
   * between sources and batches, so every source is either fully committed or left
   * as it was; the summary then has `stopped: true` and counts what was committed.
   */
  signal?: AbortSignal;
  /**
   * User metadata set on every document of this ingest (filters read it by key; results
   * show it in `source.metadata`); keys must not be source attributes (`type`, `path`,
   * `date`…). It sticks: documents keep metadata given at earlier ingests until it is
   * changed (a later ingest without it keeps it); a key given again gets the new value,
   * a `null` value removes the key. Changing it re-ingests unchanged files (their
   * embeddings come from the cache).
   */
  metadata?: Record<string, FilterScalar | null>;
  /**
   * Tags added to every document's `tags` (front matter tags are kept); filter with
   * `$contains`. They stick as `metadata` does.
   */
  tags?: string[];
  /** Tags given at earlier ingests to remove from every document of this ingest. */
  removeTags?: string[];
  /**
   * Forget the metadata and tags given at earlier ingests before applying this run's
   * `metadata` and `tags` (alone: clear them).
   */
  replaceMetadata?: boolean;
  /**
   * The stored ingest job and file (0-based) this ingest does (see {@link KnowledgeLayer.createJob}):
   * the documents each source writes are recorded for it in the same transaction
   * ({@link KnowledgeLayer.jobFileDocuments}), so a job resumed after a crash knows exactly
   * what was committed.
   */
  job?: { id: string; file: number };
}

/** Recursive partial, for configuration overrides. */
export type DeepPartial<T> = { [K in keyof T]?: T[K] extends object ? DeepPartial<T[K]> : T[K] };

/**
 * Which documents `KnowledgeLayer.listDocuments` returns: of one KB (`kb`) or all, those
 * with at least one chunk matching `filter`, a page of at most `limit` after id `afterId`
 * (keyset paging) or after skipping `offset`; `metadata` adds each document's metadata.
 */
export interface DocumentListOptions {
  kb?: string;
  filter?: Filter;
  afterId?: number;
  limit?: number;
  offset?: number;
  metadata?: boolean;
}
