/**
 * What the operations in `src/facade/` work on: the internals of one {@link KnowledgeLayer}
 * (its database, catalog, stores, cache) and the components it builds and caches per
 * configuration. The facade hands them over; no adapter sees them.
 */
import type { Cache } from "../cache/index.js";
import type { ChunkSituator } from "../chunk/llm-context.js";
import type { KnowledgeBaseConfig } from "../config.js";
import type { CachedEmbedder } from "../embed/cache.js";
import type { ChunkWorker } from "../ingest/chunk-client.js";
import type { Bm25Index } from "../retrieve/bm25.js";
import type { ParallelBm25Search } from "../retrieve/bm25-parallel.js";
import type { PipelineReranker, QueryExpander } from "../retrieve/search.js";
import type { Catalog, KbRecord } from "../store/catalog.js";
import type { VectorStore } from "../store/contract.js";
import type { Db } from "../store/database.js";
import type { JobStore } from "../store/jobs.js";
import type { SqliteCatalogBackend } from "../store/sqlite-catalog.js";
import type { SqliteVectorStore } from "../store/sqlite-vector-store.js";

export interface FacadeParts {
  /** The database connection. */
  readonly db: Db;
  /** The SQLite catalog. */
  readonly catalog: Catalog;
  /** The embedded vector store (in `kl.db`). */
  readonly store: SqliteVectorStore;
  /** The BM25 keyword index. */
  readonly bm25: Bm25Index;
  /** The keyword search of large KBs on two threads (over {@link bm25}). */
  readonly keywordSearch: ParallelBm25Search;
  /** The catalog behind the contract of `store/catalog-contract.ts`. */
  readonly backend: SqliteCatalogBackend;
  /** The chunking worker of ingest runs (see `OpenOptions.chunkThread`), or undefined. */
  readonly chunkWorker?: ChunkWorker;
  /** The ingest jobs' rows (synchronous, for the ingest transaction). */
  readonly jobs: JobStore;
  /** Search-result and query-embedding cache. */
  readonly cache: Cache;
  /** The cache scope of a KB (see `OpenOptions.cacheScope`), or undefined. */
  readonly cacheScope?: (kb: string) => string;
  /** A knowledge base (the default KB is created on first use). */
  getKb(name?: string): Promise<KbRecord>;
  /** The connected vector store of a KB configuration. */
  vectorStore(config: KnowledgeBaseConfig): Promise<VectorStore>;
  /** The cached embedder of a KB's embedding configuration. */
  embedder(config: KnowledgeBaseConfig, use?: "ingest" | "query"): CachedEmbedder;
  /** The reranker of a KB's retrieval configuration, or undefined. */
  reranker(config: KnowledgeBaseConfig): PipelineReranker | undefined;
  /** The LLM query expander of a KB, or undefined. */
  expander(config: KnowledgeBaseConfig): QueryExpander | undefined;
  /** The LLM chunk-context writer of a KB, or undefined. */
  situator(config: KnowledgeBaseConfig): ChunkSituator | undefined;
}
