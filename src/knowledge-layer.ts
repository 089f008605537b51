import { createHash, randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { type Cache, type CacheConfig, createCache } from "./cache/index.js";
import { queryEmbeddingKey, searchResultKey } from "./cache/keys.js";
import { type ChunkSituator, createLlmSituator } from "./chunk/llm-context.js";
import {
  DEFAULT_KB,
  defaultKbConfig,
  embeddingConfig,
  type KnowledgeBaseConfig,
  parseRetrievalMode,
  RETRIEVAL_MODES,
  type RetrievalMode,
  type VectorStoreConfig,
  validateKbConfig,
} from "./config.js";
import { CachedEmbedder } from "./embed/cache.js";
import { createEmbedder } from "./embed/index.js";
import { ConfigError, KnowledgeLayerError, NotFoundError } from "./errors.js";
import type { ExtractOptions } from "./extract/contract.js";
import {
  checkUserMetadata,
  embeddingIdentity,
  type IngestContext,
  type IngestProgress,
  type IngestSummary,
  ingestDocuments,
  ingestPaths,
  pipelineHash,
  removeDocuments,
  type UserMetadata,
} from "./ingest/pipeline.js";
import { createReranker, type Reranker } from "./rerank/index.js";
import type { Attribution } from "./retrieve/attribution.js";
import type { Bm25Index } from "./retrieve/bm25.js";
import { createLlmExpander } from "./retrieve/expansion.js";
import { type Filter, type FilterScalar, parseFilter } from "./retrieve/filter.js";
import {
  attributed,
  type KbRetrievalOverrides,
  type PipelineReranker,
  type QueryExpander,
  type ResultExplanation,
  retrieve,
} from "./retrieve/search.js";
import { redactText } from "./secrets.js";
import type { Agent, AgentInput, AgentPatch, AttachmentRetrievalConfig } from "./store/agents.js";
import type { ApiKeyInfo, NewApiKey } from "./store/api-keys.js";
import type { Catalog, DocumentRecord, KbCounts, KbRecord } from "./store/catalog.js";
import type { MemoryCatalog } from "./store/catalog-contract.js";
import type { VectorStore } from "./store/contract.js";
import { DB_FILE, type Db, openDatabase, resolveDataDir } from "./store/database.js";
import { collectionOf, createVectorStore, describeStore } from "./store/index.js";
import type { JobEventRecord, JobIssue, JobRecord, JobStep, JobStore, NewJob } from "./store/jobs.js";

export type {
  JobEventRecord,
  JobFileRecord,
  JobFileResult,
  JobIssue,
  JobOptions,
  JobRecord,
  JobState,
  JobStatus,
  JobStep,
  JobSummary,
  NewJob,
} from "./store/jobs.js";

import { chunkPayload, type FillProgress, FillVerificationError, fillCollection } from "./store/migrate.js";
import { SqliteCatalogBackend } from "./store/sqlite-catalog.js";
import { SqliteVectorStore } from "./store/sqlite-vector-store.js";
import type { DocumentMetadata, ExtractedDocument } from "./types.js";

// The types (and pure config helpers) adapters need, so they never import from `store/`.
export type { Agent, AgentInput, AgentPatch, Attachment, AttachmentRetrievalConfig } from "./store/agents.js";
export type { ApiKeyInfo, NewApiKey } from "./store/api-keys.js";
export type { DocumentRecord, KbCounts, KbRecord } from "./store/catalog.js";
export type { CatalogBackend, MemoryCatalog } from "./store/catalog-contract.js";
export { collectionOf, describeStore } from "./store/index.js";
export type { Memory, MemoryModel, MemoryStore } from "./store/memories.js";

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
}

/** The cache configuration {@link KnowledgeLayer.open} uses when none is given. */
export function defaultCacheConfig(env: NodeJS.ProcessEnv = process.env): CacheConfig {
  const url = env.KL_CACHE_URL;
  if (url && /^rediss?:\/\//.test(url)) return { type: "redis", url };
  if (url === "none") return { type: "none" };
  return { type: "memory", maxEntries: 10_000, maxBytes: 64 * 1024 * 1024, ttlSeconds: 3600 };
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

/**
 * The library's entry point: knowledge bases in one data directory, ingest and
 * search. Every knowledge base keeps its own configuration (chunking, embedding,
 * retrieval) and its own vector collection and BM25 statistics.
 *
 * ```ts
 * const kl = KnowledgeLayer.open();
 * await kl.ingest(["./docs"]);
 * const { results } = await kl.search("how is overlap chosen?");
 * kl.close();
 * ```
 */
export class KnowledgeLayer {
  /**
   * The SQLite catalog. Internal: for the library's own stages and for tests; adapters
   * (CLI, HTTP, MCP, agents) use the public operations below (`test/architecture.test.ts`).
   */
  readonly catalog: Catalog;
  /**
   * The embedded vector store (in `kl.db`), used by KBs whose `vectorStore.type` is
   * `sqlite`. Internal, like {@link catalog}.
   */
  readonly store: SqliteVectorStore;
  private readonly stores = new Map<string, Promise<VectorStore>>();
  /** The BM25 keyword index. Internal, like {@link catalog}. */
  readonly bm25: Bm25Index;
  /**
   * The catalog behind the contract of `store/catalog-contract.ts` (the embedded SQLite
   * database today). The facade's asynchronous operations go through it.
   */
  private readonly backend: SqliteCatalogBackend;
  private readonly embedders = new Map<string, CachedEmbedder>();
  private readonly rerankers = new Map<string, Reranker>();
  private readonly expanders = new Map<string, QueryExpander>();
  private readonly jobs: JobStore;

  private constructor(
    readonly dataDir: string,
    /** The database connection. Internal, like {@link catalog}. */
    readonly db: Db,
    /** Search-result and query-embedding cache (see {@link OpenOptions.cache}). */
    readonly cache: Cache,
    /** See {@link OpenOptions.offThread}. */
    readonly offThread = false,
    private readonly cacheScope?: (kb: string) => string,
  ) {
    this.backend = new SqliteCatalogBackend(db);
    this.catalog = this.backend.catalog;
    this.store = new SqliteVectorStore(db);
    this.bm25 = this.backend.bm25;
    this.jobs = this.backend.jobRows;
  }

  /**
   * Opens the data directory, creating it unless `create` is false.
   * @throws KnowledgeLayerError if it cannot be opened, or (with `create: false`)
   *   when it holds no database, naming the path.
   */
  static open(options: OpenOptions = {}): KnowledgeLayer {
    const dataDir = resolveDataDir(options.dataDir);
    if (options.create === false && !existsSync(join(dataDir, DB_FILE))) {
      const what = existsSync(dataDir) ? `it holds no ${DB_FILE}` : "the folder does not exist";
      throw new KnowledgeLayerError(
        `no knowledge-layer data at ${dataDir}: ${what}; ingest documents first (kl ingest PATH) or point --data-dir or $KL_HOME at an existing data directory`,
      );
    }
    const cache = createCache(options.cache ?? defaultCacheConfig());
    return new KnowledgeLayer(
      dataDir,
      openDatabase(dataDir),
      cache,
      options.offThread === true,
      options.cacheScope,
    );
  }

  /**
   * Closes the database at once, then the connections to vector-store servers and
   * the cache (await the result to know they are closed).
   */
  async close(): Promise<void> {
    try {
      this.store.closeSync();
    } catch {
      // An unsaved approximate index is rebuilt from the log on the next open.
    }
    this.db.close();
    const stores = [...this.stores.values()];
    this.stores.clear();
    await Promise.allSettled([...stores.map(async (s) => (await s).close()), this.cache.close()]);
  }

  /**
   * The connected vector store of a KB configuration: the embedded store for
   * `sqlite`, else one client per distinct server configuration, connected on
   * first use (a failed connection is retried by the next call).
   * @throws KnowledgeLayerError naming the store when it cannot be reached.
   */
  async vectorStore(config: KnowledgeBaseConfig): Promise<VectorStore> {
    const vs = config.vectorStore;
    if (vs.type === "sqlite") return this.store;
    const key = JSON.stringify({ ...vs, collection: undefined });
    let store = this.stores.get(key);
    if (!store) {
      store = (async () => {
        const created = await createVectorStore(vs, this.db);
        try {
          await created.connect();
        } catch (err) {
          await created.close().catch(() => {});
          throw new KnowledgeLayerError(
            `knowledge base "${config.name}": cannot connect to vector store ${describeStore(vs)}: ${(err as Error).message}`,
            { cause: err },
          );
        }
        return created;
      })();
      this.stores.set(key, store);
      store.catch(() => this.stores.delete(key));
    }
    return store;
  }

  /**
   * Creates a knowledge base from the defaults overridden by `overrides`.
   * @throws ConfigError if it exists already or the configuration is invalid.
   */
  async createKb(
    name: string,
    overrides: DeepPartial<Omit<KnowledgeBaseConfig, "name">> = {},
  ): Promise<KbRecord> {
    if (await this.backend.kbs.get(name)) throw new ConfigError(`knowledge base "${name}" already exists`);
    const base = defaultKbConfig(name);
    const config: KnowledgeBaseConfig = {
      name,
      chunking: { ...base.chunking, ...defined(overrides.chunking) },
      embedding: embeddingConfig(defined(overrides.embedding)),
      vectorStore: withOwnCollection(name, { ...base.vectorStore, ...defined(overrides.vectorStore) }),
      retrieval: {
        ...base.retrieval,
        ...(defined(overrides.retrieval) as Partial<KnowledgeBaseConfig["retrieval"]>),
      },
    };
    const extraction = compactExtraction(overrides.extraction);
    if (extraction) config.extraction = extraction;
    if (overrides.chunking?.chunkSize !== undefined && overrides.chunking.minChunkSize === undefined) {
      config.chunking.minChunkSize = Math.min(
        config.chunking.minChunkSize,
        Math.floor(config.chunking.chunkSize / 3),
      );
    }
    if (overrides.chunking?.chunkSize !== undefined && overrides.chunking.chunkOverlap === undefined) {
      config.chunking.chunkOverlap = Math.min(
        config.chunking.chunkOverlap,
        Math.floor(config.chunking.chunkSize / 10),
      );
    }
    validateKbConfig(config);
    checkEmbedder(config);
    await this.checkCollectionFree(config);
    checkReranker(config);
    return this.backend.kbs.insert(config);
  }

  /**
   * Changes the settings of a KB that may change once it exists: `retrieval` (laid over
   * the current settings key by key; the BM25 analyzer only while the KB has no
   * documents) and `extraction` (section by section). The result is validated like a
   * new KB's, reranker settings included, before it is stored.
   * @throws KnowledgeLayerError for an unknown KB; ConfigError naming the field
   *   (`knowledge base "x": retrieval.analyzer …`) for an invalid or fixed setting.
   */
  async updateKb(name: string, update: KbUpdate): Promise<KbRecord> {
    const kb = await this.backend.kbs.get(name);
    if (!kb) throw new KnowledgeLayerError(`unknown knowledge base "${name}"`);
    const next: KnowledgeBaseConfig = { ...kb.config };
    if (update.retrieval) {
      const analyzer = update.retrieval.analyzer;
      if (analyzer !== undefined && analyzer !== kb.config.retrieval.analyzer) {
        const { documents } = await this.backend.kbs.counts(name);
        if (documents > 0)
          throw new ConfigError(
            `knowledge base "${name}": retrieval.analyzer is fixed once documents are indexed (it has ${documents}); create a new knowledge base to change it`,
          );
      }
      next.retrieval = { ...kb.config.retrieval, ...defined(update.retrieval) };
    }
    if (update.extraction) next.extraction = mergeExtraction(name, kb.config.extraction, update.extraction);
    validateKbConfig(next);
    checkReranker(next);
    await this.backend.kbs.updateConfig(next);
    return (await this.backend.kbs.get(name)) as KbRecord;
  }

  /**
   * A knowledge base, or undefined when there is none of that name. Unlike
   * {@link getKb} it never creates the default KB and never throws.
   */
  findKb(name: string): Promise<KbRecord | undefined> {
    return this.backend.kbs.get(name);
  }

  /**
   * The knowledge bases that exist, by name, without counts. Unlike {@link listKbs} it
   * does not create the default KB.
   */
  knowledgeBases(): Promise<KbRecord[]> {
    return this.backend.kbs.list();
  }

  /**
   * Returns a knowledge base. The default KB is created on first use.
   * @throws KnowledgeLayerError naming an unknown KB and the existing ones.
   */
  async getKb(name: string = DEFAULT_KB): Promise<KbRecord> {
    const kb = await this.backend.kbs.get(name);
    if (kb) return kb;
    if (name === DEFAULT_KB) return this.backend.kbs.insert(defaultKbConfig(DEFAULT_KB));
    const known = (await this.backend.kbs.list()).map((k) => k.name);
    throw new KnowledgeLayerError(
      `unknown knowledge base "${name}"${known.length ? ` (existing: ${known.join(", ")})` : ""}; create it with: kl kb create ${name}`,
    );
  }

  /** Lists knowledge bases with their document and chunk counts (the default KB always appears). */
  async listKbs(): Promise<(KbRecord & { counts: KbCounts })[]> {
    await this.getKb(DEFAULT_KB);
    const kbs = await this.backend.kbs.list();
    return Promise.all(kbs.map(async (kb) => ({ ...kb, counts: await this.backend.kbs.counts(kb.name) })));
  }

  /**
   * Deletes a knowledge base with its documents, chunks, BM25 postings and
   * vectors, in one transaction, and detaches it from every agent. Cached
   * embeddings are kept, so re-ingesting the same texts later costs no model calls.
   * @throws KnowledgeLayerError for an unknown KB.
   */
  async deleteKb(name: string, options: { force?: boolean } = {}): Promise<{ warning?: string }> {
    const kb = await this.backend.kbs.get(name);
    if (!kb) throw new KnowledgeLayerError(`unknown knowledge base "${name}"`);
    const collection = collectionOf(kb.config);
    if (kb.config.vectorStore.type === "sqlite") {
      const agents = this.backend.agentRows();
      this.db
        .transaction(() => {
          this.store.dropCollectionSync(collection);
          this.catalog.deleteKb(name);
          agents.detachEverywhere(name);
        })
        .immediate();
      return {};
    }
    // Server first: if it cannot be reached, the KB stays whole and the delete can be retried
    // (or forced, leaving the vectors on the server).
    let warning: string | undefined;
    try {
      await (await this.vectorStore(kb.config)).dropCollection(collection);
    } catch (err) {
      if (!options.force) {
        throw new KnowledgeLayerError(
          `${(err as Error).message}; the knowledge base was not deleted (use --force to delete it here and leave collection "${collection}" on the server)`,
          { cause: err },
        );
      }
      warning = `collection "${collection}" was left on ${describeStore(kb.config.vectorStore)}: ${(err as Error).message}`;
    }
    const agents = this.backend.agentRows();
    this.db
      .transaction(() => {
        this.catalog.deleteKb(name);
        agents.detachEverywhere(name);
      })
      .immediate();
    return warning ? { warning } : {};
  }

  /** 6 hex characters naming one KB of one data directory for its lifetime (store id, name, creation time). */
  private kbTag(kb: KbRecord): string {
    return createHash("sha256")
      .update(`${this.catalog.storeId()}\u0000${kb.name}\u0000${kb.createdAt}`)
      .digest("hex")
      .slice(0, 6);
  }

  /**
   * Refuses a KB config whose collection another KB of this data directory already
   * uses on the same store (deleting one would drop the other's vectors).
   * @throws ConfigError naming the other KB.
   */
  private async checkCollectionFree(config: KnowledgeBaseConfig): Promise<void> {
    const collection = collectionOf(config);
    for (const other of await this.backend.kbs.list()) {
      if (other.name === config.name) continue;
      if (
        sameStore(other.config.vectorStore, config.vectorStore) &&
        collectionOf(other.config) === collection
      ) {
        throw new ConfigError(
          `knowledge base "${config.name}": collection "${collection}" of ${describeStore(config.vectorStore)} belongs to knowledge base "${other.name}"`,
        );
      }
    }
  }

  /**
   * Copies a KB's vectors to another vector store without re-embedding, then
   * switches the KB to it (`kl kb migrate`). Resumable: records the target already
   * holds are skipped, so a rerun after an interruption continues. Verified: the
   * target must hold exactly one vector per embedded chunk before the switch. The
   * source collection is kept unless `dropSource`. Do not ingest into the KB while
   * it runs.
   * @throws ConfigError for an invalid target; KnowledgeLayerError when a store
   *   fails, the target equals the source, or verification fails (the KB then still
   *   uses the source).
   */
  async migrateKb(
    name: string,
    to: VectorStoreConfig,
    options: { dropSource?: boolean; onProgress?: (p: FillProgress) => void } = {},
  ): Promise<FillProgress & { from: string; to: string }> {
    const kb = await this.getKb(name);
    // Without a collection name the target's is derived from the KB (stable, so a rerun resumes).
    const target: KnowledgeBaseConfig = {
      ...kb.config,
      vectorStore: withOwnCollection(name, { ...to }, this.kbTag(kb)),
    };
    validateKbConfig(target);
    await this.checkCollectionFree(target);
    const sourceCollection = collectionOf(kb.config);
    const targetCollection = collectionOf(target);
    const from = describeStore(kb.config.vectorStore);
    const dest = describeStore(target.vectorStore);
    if (sameStore(kb.config.vectorStore, target.vectorStore) && sourceCollection === targetCollection) {
      throw new KnowledgeLayerError(
        `knowledge base "${name}" already uses ${dest} (collection "${targetCollection}")`,
      );
    }
    const source = await this.vectorStore(kb.config);
    const destination = await this.vectorStore(target);
    const info = await source.info(sourceCollection);
    const embedded = this.catalog.embeddedChunkCount(name);
    if (!info && embedded > 0) {
      throw new KnowledgeLayerError(
        `knowledge base "${name}": ${from} has no collection "${sourceCollection}", but ${embedded} chunks should have vectors there; ` +
          `re-create them with kl kb reembed ${name} or by ingesting again`,
      );
    }
    let progress: FillProgress = { done: 0, total: 0, written: 0, skipped: 0 };
    if (info) {
      await destination.createCollection(targetCollection, info.dimension, info.metric);
      try {
        progress = await fillCollection({
          catalog: this.catalog,
          kb: name,
          version: () => this.catalog.dataVersion(name),
          target: destination,
          collection: targetCollection,
          onProgress: options.onProgress,
          produce: async (chunks) => {
            const records = await source.get(
              sourceCollection,
              chunks.map((c) => String(c.id)),
            );
            if (records.length !== chunks.length) {
              const have = new Set(records.map((r) => r.id));
              const lost = chunks.filter((c) => !have.has(String(c.id))).map((c) => c.id);
              throw new KnowledgeLayerError(
                `knowledge base "${name}": ${from} has no vectors for chunks ${lost.slice(0, 5).join(", ")}${lost.length > 5 ? "…" : ""}; re-ingest the KB or run kl kb reembed`,
              );
            }
            return records;
          },
        });
      } catch (err) {
        if (err instanceof FillVerificationError) {
          await destination.dropCollection(targetCollection).catch(() => {});
          throw new KnowledgeLayerError(
            `${err.message}; the partial copy was removed and the KB still uses ${from}: run kl kb migrate again`,
          );
        }
        throw err;
      }
    }
    await this.backend.kbs.updateConfig(target);
    if (options.dropSource && info) await source.dropCollection(sourceCollection);
    return { ...progress, from, to: dest };
  }

  /**
   * Embeds a KB's chunks with another embedding model into a new collection of the
   * KB's vector store, then switches the KB to that model and collection and drops
   * the old collection unless `keepOld` (`kl kb reembed`). Models are never mixed in
   * one collection: the new collection's name carries the model. Resumable like
   * {@link migrateKb}; the chunk texts come from the catalog (nothing is extracted
   * or chunked again).
   * @throws ConfigError for an invalid embedding config; KnowledgeLayerError when the
   *   model is the KB's current one, or embedding, storing or verification fails (the
   *   KB then keeps its current model).
   */
  async reembedKb(
    name: string,
    settings: Partial<KnowledgeBaseConfig["embedding"]>,
    options: { keepOld?: boolean; onProgress?: (p: FillProgress) => void } = {},
  ): Promise<FillProgress & { collection: string; dimension: number }> {
    const kb = await this.getKb(name);
    const old = kb.config;
    const embedding = embeddingConfig(defined(settings));
    // The KB's collection name without an earlier model tag: deterministic, so a rerun resumes.
    const collection = `${collectionOf(old).split("@")[0]}@${embeddingSlug(embedding)}`;
    const target: KnowledgeBaseConfig = {
      ...old,
      embedding: { ...embedding },
      vectorStore: { ...old.vectorStore, collection },
    };
    validateKbConfig(target);
    checkEmbedder(target);
    if (collection === collectionOf(old) || embeddingSlug(embedding) === embeddingSlug(old.embedding)) {
      throw new KnowledgeLayerError(
        `knowledge base "${name}" is already embedded with ${embedding.provider}:${embedding.model}`,
      );
    }
    const store = await this.vectorStore(target);
    const embedder = this.embedder(target);
    const dimension = await embedder.resolveDimension();
    await store.createCollection(collection, dimension, "cosine");
    let progress: FillProgress;
    try {
      progress = await fillCollection({
        catalog: this.catalog,
        kb: name,
        version: () => this.catalog.dataVersion(name),
        target: store,
        collection,
        onProgress: options.onProgress,
        produce: async (chunks) => {
          const vectors = await embedder.embedTexts(chunks.map((c) => c.text));
          return chunks.map((c, i) => ({
            id: String(c.id),
            vector: vectors[i] as Float32Array,
            payload: chunkPayload(c),
          }));
        },
      });
    } catch (err) {
      if (err instanceof FillVerificationError) {
        await store.dropCollection(collection).catch(() => {});
        throw new KnowledgeLayerError(
          `${err.message}; the partial collection was removed and the KB keeps its current model: run kl kb reembed again`,
        );
      }
      // Nothing written yet (a bad key, an unreachable endpoint): leave no empty collection behind.
      if (((await store.info(collection).catch(() => undefined))?.count ?? 1) === 0) {
        await store.dropCollection(collection).catch(() => {});
      }
      throw err;
    }
    this.db
      .transaction(() => {
        this.catalog.updateKbConfig(target);
        this.catalog.relabelPipeline(name, pipelineHash(old), pipelineHash(target));
      })
      .immediate();
    if (!options.keepOld) {
      const oldStore = await this.vectorStore(old);
      await oldStore.dropCollection(collectionOf(old));
    }
    return { ...progress, collection, dimension };
  }

  /** Document and chunk counts of one KB. */
  async counts(name: string): Promise<KbCounts> {
    return this.backend.kbs.counts((await this.getKb(name)).name);
  }

  /**
   * Documents by id: of one KB or all, with a filter those with at least one matching
   * chunk (the filter language of {@link SearchOptions.filter}); a page of at most `limit`
   * after id `afterId` (keyset paging) or after skipping `offset` documents. `kl docs
   * list`, `kl docs rm --where` and HTTP `GET /kbs/:kb/documents` call it.
   * @throws FilterError for a malformed filter.
   */
  listDocuments(options?: {
    kb?: string;
    filter?: Filter;
    afterId?: number;
    limit?: number;
    offset?: number;
    metadata?: false;
  }): Promise<DocumentRecord[]>;
  /** {@link listDocuments} with each document's metadata (as `kl docs show` prints it). */
  listDocuments(options: {
    kb?: string;
    filter?: Filter;
    afterId?: number;
    limit?: number;
    offset?: number;
    metadata: true;
  }): Promise<DocumentDetails[]>;
  listDocuments(
    options: {
      kb?: string;
      filter?: Filter;
      afterId?: number;
      limit?: number;
      offset?: number;
      metadata?: boolean;
    } = {},
  ): Promise<DocumentRecord[]> {
    const filter = options.filter === undefined ? undefined : parseFilter(options.filter);
    return this.backend.documents.list(options.kb, { ...options, filter });
  }

  /**
   * Number of documents of one KB or all; with a filter, of those with at least one
   * matching chunk (as {@link listDocuments}).
   * @throws FilterError for a malformed filter.
   */
  async countDocuments(options: { kb?: string; filter?: Filter } = {}): Promise<number> {
    const filter = options.filter === undefined ? undefined : parseFilter(options.filter);
    return this.backend.documents.count(options.kb, filter);
  }

  /**
   * A document by id with its metadata; undefined when there is none (or, with `kb`,
   * when it belongs to another KB).
   */
  async getDocument(id: number, options: { kb?: string } = {}): Promise<DocumentDetails | undefined> {
    if (!Number.isSafeInteger(id)) return undefined;
    const doc = await this.backend.documents.byId(id);
    if (!doc || (options.kb !== undefined && doc.kb !== options.kb)) return undefined;
    return doc;
  }

  /** A document of a KB by its URI, with its metadata, or undefined. */
  async getDocumentByUri(kb: string, uri: string): Promise<DocumentDetails | undefined> {
    const doc = await this.backend.documents.byUri(kb, uri);
    return doc && this.backend.documents.byId(doc.id);
  }

  /** The documents of a KB whose source path is `path` (a mailbox or a Slack export yields several). */
  documentsAtPath(kb: string, path: string): Promise<DocumentRecord[]> {
    return this.backend.documents.atPath(kb, path);
  }

  /**
   * The documents of a KB that came from source `uri`: the document of that uri and its
   * child documents (`<uri>#…`: attachments, messages of a mailbox), by id.
   */
  documentsOfSource(kb: string, uri: string): Promise<DocumentRecord[]> {
    return this.backend.documents.ofSource(kb, uri);
  }

  /** The extracted text of a document (the text chunk offsets refer to); empty for an unknown id. */
  documentText(id: number): Promise<string> {
    return this.backend.documents.text(id);
  }

  /**
   * Deletes documents of a KB with their chunks, BM25 postings and vectors: the one
   * document deletion behind `kl docs rm`, HTTP `DELETE /kbs/:kb/documents/:id` and an
   * upload that replaces a source (see `removeDocuments` in `ingest/pipeline.ts` for the
   * transaction rules). Ids that are not documents of the KB are ignored.
   * @returns the number of documents deleted.
   * @throws KnowledgeLayerError for an unknown KB, or naming the vector store when it
   *   cannot be reached.
   */
  async deleteDocuments(kb: string, ids: readonly number[]): Promise<number> {
    const record = await this.backend.kbs.get(kb);
    if (!record) throw new KnowledgeLayerError(`unknown knowledge base "${kb}"`);
    if (ids.length === 0) return 0;
    return removeDocuments(
      {
        catalog: this.catalog,
        bm25: this.bm25,
        store: await this.vectorStore(record.config),
        config: record.config,
        collection: collectionOf(record.config),
      },
      ids,
    );
  }

  /**
   * Resolves when the data directory's database answers (a health check).
   * @throws when it does not (closed, unreadable).
   */
  checkHealth(): Promise<void> {
    return this.backend.ping();
  }

  // ---- API keys of the HTTP API (tenants) ----

  /**
   * Creates an API key for `tenant` (`kl apikey create`). The key itself is returned
   * only here: the database keeps its SHA-256.
   * @throws KnowledgeLayerError for an invalid tenant name.
   */
  createApiKey(tenant: string, label?: string): Promise<NewApiKey> {
    return this.backend.apiKeys.create(tenant, label);
  }

  /** API keys (all, or one tenant's), oldest first, never the keys themselves. */
  listApiKeys(tenant?: string): Promise<ApiKeyInfo[]> {
    return this.backend.apiKeys.list(tenant);
  }

  /** Deletes an API key by id; true when it existed. */
  revokeApiKey(id: string): Promise<boolean> {
    return this.backend.apiKeys.revoke(id);
  }

  /** The tenant an API key belongs to, or undefined when the key is unknown. */
  tenantOfApiKey(key: string): Promise<string | undefined> {
    return this.backend.apiKeys.tenantOf(key);
  }

  // ---- agents: retrieval profiles of a tenant with attached KBs ----

  /**
   * Creates an agent of `tenant` with its attachments (catalog KB names), in one transaction.
   * @throws ConflictError (field `name`) when the tenant has an agent of that name.
   */
  createAgent(tenant: string, input: AgentInput): Promise<Agent> {
    return this.backend.agents.create(tenant, input);
  }

  /** The tenant's agents, by name. */
  listAgents(tenant: string): Promise<Agent[]> {
    return this.backend.agents.list(tenant);
  }

  /** One of the tenant's agents, or undefined (also when it is another tenant's). */
  getAgent(tenant: string, id: string): Promise<Agent | undefined> {
    return this.backend.agents.get(tenant, id);
  }

  /**
   * Changes an agent's name, description, default topK or inline limit (`null` clears the description).
   * @throws NotFoundError for an unknown agent; ConflictError for a name another agent of the tenant has.
   */
  updateAgent(tenant: string, id: string, patch: AgentPatch): Promise<Agent> {
    return this.backend.agents.update(tenant, id, patch);
  }

  /** Deletes an agent and its attachments; false when the tenant has no such agent. */
  deleteAgent(tenant: string, id: string): Promise<boolean> {
    return this.backend.agents.delete(tenant, id);
  }

  /**
   * Attaches a KB (catalog name) to an agent, or replaces the attachment's settings.
   * @throws NotFoundError for an unknown agent or KB.
   */
  async attachKb(
    tenant: string,
    agentId: string,
    kb: string,
    config: AttachmentRetrievalConfig = {},
  ): Promise<Agent> {
    if (!(await this.backend.kbs.get(kb))) throw new NotFoundError(`knowledge base "${kb}" not found`);
    return this.backend.agents.setAttachment(tenant, agentId, kb, config);
  }

  /**
   * Detaches a KB (catalog name) from an agent.
   * @throws NotFoundError for an unknown agent or a KB that is not attached.
   */
  detachKb(tenant: string, agentId: string, kb: string): Promise<Agent> {
    return this.backend.agents.detach(tenant, agentId, kb);
  }

  /**
   * The conversation memories of the catalog (`agent/memory.ts` builds recall on them):
   * the asynchronous `MemoryCatalog` section of the catalog contract.
   */
  get memories(): MemoryCatalog {
    return this.backend.memories;
  }

  /** Ingests files and folders into a KB (see `ingest/pipeline.ts`). */
  async ingest(paths: string[], options: IngestOptions = {}): Promise<IngestSummary> {
    const ctx = await this.ingestContext(options);
    const summary = await ingestPaths(ctx, paths, options.embed ?? true);
    this.syncVectorIndex(ctx);
    return summary;
  }

  /** Ingests in-memory documents (one unit per document URI). */
  async ingestDocuments(
    docs: Iterable<ExtractedDocument>,
    options: IngestOptions = {},
  ): Promise<IngestSummary> {
    const ctx = await this.ingestContext(options);
    const summary = await ingestDocuments(ctx, docs, options.embed ?? true);
    this.syncVectorIndex(ctx);
    return summary;
  }

  // ---- durable ingest jobs (the HTTP API's uploads; see store/jobs.ts) ----

  /** Stores a new `queued` ingest job with its uploaded files (one transaction); returns it. */
  createJob(job: NewJob): Promise<JobRecord> {
    return this.backend.jobs.create(job);
  }

  /** A stored ingest job by id, or undefined (never stored, or pruned). */
  getJob(id: string): Promise<JobRecord | undefined> {
    return this.backend.jobs.get(id);
  }

  /** A tenant's stored ingest jobs, newest first (files without `prior` and `result`; {@link getJob} has them). */
  listJobs(tenant: string): Promise<JobRecord[]> {
    return this.backend.jobs.list(tenant);
  }

  /** Ingest jobs queued or running (every tenant's), in submission order: what a starting server resumes. */
  pendingJobs(): Promise<JobRecord[]> {
    return this.backend.jobs.pending();
  }

  /** Ids of the ingest jobs queued or running on a KB (catalog name), in submission order. */
  activeJobs(kb: string): Promise<string[]> {
    return this.backend.jobs.active(kb);
  }

  /** An ingest job's stored events after event id `afterSeq` (0: all), in order. */
  jobEvents(id: string, afterSeq = 0): Promise<JobEventRecord[]> {
    return this.backend.jobs.events(id, afterSeq);
  }

  /**
   * One step of an ingest job in one transaction: its new state, optionally a file's
   * progress, and the event the step is. Returns the job as it now is and the event.
   * @throws Error when the job is not stored.
   */
  advanceJob(id: string, step: JobStep): Promise<{ job: JobRecord; event?: JobEventRecord }> {
    return this.backend.jobs.advance(id, step);
  }

  /** Documents (uri, chunks, warnings) that ingests of file `file` of a job committed (see {@link IngestOptions.job}). */
  jobFileDocuments(
    id: string,
    file: number,
  ): Promise<{ uri: string; chunks: number; warnings: JobIssue[] }[]> {
    return this.backend.jobs.documents(id, file);
  }

  /** Deletes a tenant's finished ingest jobs but the newest `keep`; returns how many went. */
  pruneJobs(tenant: string, keep: number): Promise<number> {
    return this.backend.jobs.prune(tenant, keep);
  }

  /** Tenants with stored ingest jobs. */
  jobTenants(): Promise<string[]> {
    return this.backend.jobs.tenants();
  }

  /**
   * Brings the embedded store's approximate index up to date after an ingest, so
   * indexing is paid by the ingest rather than the next search. Best effort: a
   * search repairs the index itself.
   */
  private syncVectorIndex(ctx: IngestContext): void {
    if (ctx.store !== this.store || !this.db.open) return;
    try {
      if (this.db.prepare("SELECT 1 FROM vec_collections WHERE name = ?").get(ctx.collection)) {
        this.store.syncIndex(ctx.collection);
      }
    } catch {
      // The next search rebuilds or repairs the index.
    }
  }

  /**
   * Searches one or more knowledge bases.
   *
   * - `vector`: cosine top-k from each KB's vector collection;
   * - `keyword`: corpus-level BM25 top-k;
   * - `hybrid` (default): both lists fused with reciprocal rank fusion (k from the KB config, 60).
   * Several KBs are fused with RRF too. Near-duplicates (token-set Jaccard ≥ threshold) are removed.
   * @throws KnowledgeLayerError for an unknown KB or mode.
   */
  async search(query: string, options: SearchOptions = {}): Promise<SearchResponse> {
    const started = Date.now();
    const names = options.kbs && options.kbs.length > 0 ? [...new Set(options.kbs)] : [DEFAULT_KB];
    const kbs: KbRecord[] = [];
    for (const n of names) kbs.push(await this.getKb(n));
    const first = kbs[0] as KbRecord;
    const mode = parseRetrievalMode(String(options.mode ?? first.config.retrieval.mode));
    if (mode === undefined) {
      throw new KnowledgeLayerError(
        `unknown search mode "${String(options.mode)}"; use one of ${RETRIEVAL_MODES.join(", ")}`,
      );
    }
    const topK = options.topK ?? first.config.retrieval.topK;
    if (!Number.isInteger(topK) || topK < 1 || topK > MAX_TOP_K) {
      throw new KnowledgeLayerError(`top-k must be an integer from 1 to ${MAX_TOP_K} (got ${topK})`);
    }
    if (typeof query !== "string")
      throw new KnowledgeLayerError(`the query must be a string (got ${typeof query})`);
    if (query.trim().length === 0) throw new KnowledgeLayerError("the query is empty");
    checkSearchOptions(options, names);
    // A malformed filter fails here, naming its position (`filter.date.$gte: …`).
    if (options.filter !== undefined) parseFilter(options.filter);
    for (const [kb, over] of Object.entries(options.perKb ?? {}))
      if (over.filter !== undefined) parseFilter(over.filter, `perKb.${kb}.filter`);
    const warnings: string[] = [];
    for (const kb of kbs) {
      const kbMode =
        options.perKb?.[kb.name]?.mode ?? (options.mode === undefined ? kb.config.retrieval.mode : mode);
      if (kbMode === "keyword") continue;
      // Documents table only: cheap enough for every search, unlike counting chunks.
      const { documents, unembedded } = this.catalog.unembeddedDocuments(kb.name);
      if (unembedded > 0) {
        warnings.push(
          `${unembedded} of ${documents} documents in knowledge base "${kb.name}" have no vectors ` +
            "(ingested with --no-embed, or their vectors could not be stored): vector search cannot find them; " +
            "ingest them again (without --no-embed)",
        );
      }
    }
    const resultKey = searchResultKey({
      query,
      kbIds: kbs.map((k) => k.name),
      // Every parameter: the call's options and each KB's whole configuration.
      params: { options: { ...options, kbs: undefined }, mode, topK, configs: kbs.map((k) => k.config) },
      // The store id scopes the key to this database (a shared Redis serves several).
      kbVersions: Object.fromEntries(
        kbs.map((k) => [k.name, `${this.catalog.storeId()}:${this.catalog.dataVersion(k.name)}`]),
      ),
    });
    const hit = (await this.cache.get(resultKey)) as SearchResponse | undefined;
    if (hit) return { ...hit, cached: true, tookMs: Date.now() - started };
    const queryVectors = new Map<string, Promise<Float32Array>>();
    const outcome = await retrieve(
      {
        catalog: this.catalog,
        store: (config) => this.vectorStore(config),
        bm25: this.bm25,
        collection: collectionOf,
        embedQuery: (config, text) => {
          const key = `${config.embedding.provider}/${config.embedding.model}\u0000${text}`;
          let vector = queryVectors.get(key);
          if (!vector) {
            vector = this.cachedQueryVector(config, text);
            queryVectors.set(key, vector);
          }
          return vector;
        },
        reranker: (config) => this.reranker(config),
        expander: (config) => this.expander(config),
      },
      kbs,
      query,
      {
        mode: options.mode === undefined ? undefined : mode,
        topK,
        vectorTopK: options.vectorTopK,
        keywordTopK: options.keywordTopK,
        vectorWeight: options.vectorWeight,
        keywordWeight: options.keywordWeight,
        minScore: options.minScore,
        fallbackBelowThreshold: options.fallbackBelowThreshold,
        keepDuplicates: options.keepDuplicates,
        perKb: options.perKb,
        filter: options.filter,
      },
    );
    // A failing reranker or expansion endpoint is reported, its credentials masked.
    warnings.push(...outcome.warnings.map(redactText));
    const results: SearchResult[] = outcome.results.map((r, i) => {
      const { source, citation } = attributed(r.chunk);
      const s = r.chunk;
      const result: SearchResult = {
        rank: i + 1,
        score: r.score,
        scores: r.scores,
        kb: r.kb,
        chunkId: s.id,
        text: s.text,
        chunk: { index: s.chunkIndex, total: s.totalChunks, type: s.chunkType, start: s.start, end: s.end },
        source,
        citation,
      };
      if (r.reranker) result.reranker = r.reranker;
      if (r.belowThreshold) result.belowThreshold = true;
      if (options.explain)
        result.explain = s.contextPrefix ? { ...r.explain, context: s.contextPrefix } : r.explain;
      return result;
    });
    const response: SearchResponse = {
      query,
      mode,
      kbs: kbs.map((k) => k.name),
      rerankers: outcome.rerankers,
      results,
      warnings,
      tookMs: Date.now() - started,
    };
    if (Object.keys(outcome.variants).length > 0) response.variants = outcome.variants;
    await this.cache.set(resultKey, response);
    return response;
  }

  /**
   * A query vector through the shared cache (keyed by provider, model and text),
   * then the KB's persistent embedding cache, then the model.
   */
  private async cachedQueryVector(config: KnowledgeBaseConfig, text: string): Promise<Float32Array> {
    const scope = this.cacheScope?.(config.name) ?? "";
    const key = queryEmbeddingKey({
      provider: config.embedding.provider,
      model: scope
        ? `${scope}\u0000${embeddingCacheModel(config.embedding)}`
        : embeddingCacheModel(config.embedding),
      text,
    });
    const hit = await this.cache.get(key);
    if (hit instanceof Float32Array) return hit;
    const vector = await this.embedder(config, "query").embedQuery(text);
    await this.cache.set(key, vector);
    return vector;
  }

  /**
   * The LLM chunk-context writer of a KB (`chunking.contextLlm`), or undefined when it has
   * none. Sentences are cached in the data directory's database (per cache scope).
   */
  private situator(config: KnowledgeBaseConfig): ChunkSituator | undefined {
    const llm = config.chunking.contextLlm;
    if (!llm) return undefined;
    const scope = this.cacheScope?.(config.name) ?? "";
    const namespace = `llm-context\u0000${scope}\u0000${llm.model}\u0000${llm.baseUrl}`;
    const catalog = this.catalog;
    return createLlmSituator(llm, {
      get: (key) => catalog.cachedText(namespace, key),
      set: (key, text) => catalog.cacheText(namespace, key, text),
    });
  }

  /** The LLM query expander of a KB (advanced strategy), or undefined when none is configured. */
  private expander(config: KnowledgeBaseConfig): QueryExpander | undefined {
    const llm = config.retrieval.expansionLlm;
    if (!llm) return undefined;
    const key = JSON.stringify(llm);
    let expander = this.expanders.get(key);
    if (!expander) {
      expander = createLlmExpander(llm);
      this.expanders.set(key, expander);
    }
    return expander;
  }

  /**
   * The reranker of a KB's retrieval config, created once per configuration;
   * undefined for `none` and for `auto` when no offline reranker beats hybrid with
   * the KB's embedder (the bundled model: see the README's measurements).
   */
  reranker(config: KnowledgeBaseConfig): PipelineReranker | undefined {
    const rc = config.retrieval.reranker;
    if (rc.type === "none" || rc.type === "auto") return undefined;
    const key = `${JSON.stringify(rc)}\u0000${config.embedding.provider}/${config.embedding.model}`;
    let reranker = this.rerankers.get(key);
    if (!reranker) {
      try {
        reranker = createReranker(rc, { embedder: this.embedder(config) });
      } catch (err) {
        if (err instanceof ConfigError)
          throw new ConfigError(`knowledge base "${config.name}": ${err.message}`);
        throw err;
      }
      this.rerankers.set(key, reranker);
    }
    return reranker;
  }

  /**
   * The cached embedder of a KB's embedding configuration (one per configuration
   * and use). With {@link OpenOptions.offThread}, `"query"` embedders run on their
   * own worker lane, apart from ingest batches.
   */
  embedder(config: KnowledgeBaseConfig, use: "ingest" | "query" = "ingest"): CachedEmbedder {
    const lane = this.offThread ? use : "ingest";
    const scope = this.cacheScope?.(config.name) ?? "";
    const key = `${lane}\u0000${scope}\u0000${JSON.stringify(config.embedding)}`;
    let e = this.embedders.get(key);
    if (!e) {
      const model = embeddingCacheModel(config.embedding);
      e = new CachedEmbedder(
        createEmbedder(config.embedding, { offThread: this.offThread, lane }),
        this.db,
        scope ? `${scope}\u0000${model}` : model,
      );
      this.embedders.set(key, e);
    }
    return e;
  }

  private async ingestContext(options: IngestOptions): Promise<IngestContext> {
    const userMetadata: UserMetadata = {
      meta: options.metadata,
      tags: options.tags,
      untag: options.removeTags,
      replace: options.replaceMetadata,
    };
    checkUserMetadata(userMetadata);
    const kb = await this.getKb(options.kb ?? DEFAULT_KB);
    const embed = options.embed ?? true;
    const job = options.job;
    return {
      catalog: this.catalog,
      bm25: this.bm25,
      // Keyword-only ingest writes no vectors, so it goes on when the store is unreachable
      // (stale vectors it cannot delete are ignored by search).
      store: embed
        ? await this.vectorStore(kb.config)
        : await this.vectorStore(kb.config).catch((err: unknown) => unavailableStore(err)),
      embedder: embed ? this.embedder(kb.config) : undefined,
      // embedding_semantic chunking embeds sentences even without chunk vectors (see IngestOptions.embed).
      chunkingEmbedder:
        kb.config.chunking.strategy === "embedding_semantic" ? this.embedder(kb.config) : undefined,
      config: kb.config,
      collection: collectionOf(kb.config),
      onProgress: options.onProgress,
      signal: options.signal,
      userMetadata,
      situator: this.situator(kb.config),
      onUnitWritten: job
        ? (unit) =>
            this.jobs.recordDocuments(
              job.id,
              job.file,
              unit.documents,
              unit.warnings.map((w) => ({ file: w.path, reason: w.reason })),
            )
        : undefined,
    };
  }
}

/** Largest accepted `topK`. */
export const MAX_TOP_K = 10_000;

/**
 * Builds (without loading or calling it) the embedder of a KB config, so its
 * settings are checked when the KB is created, not at the first ingest.
 * @throws ConfigError naming the KB and the problem.
 */
function checkEmbedder(config: KnowledgeBaseConfig): void {
  try {
    void createEmbedder(config.embedding).close?.();
  } catch (err) {
    if (err instanceof ConfigError)
      throw new ConfigError(`knowledge base "${config.name}": embedding: ${err.message}`);
    throw err;
  }
}

/**
 * Builds (without loading or calling it) the reranker of a KB config, so its own settings
 * (URLs, model names, keys) are checked when the KB is created or changed, not at the first
 * search. `auto` and `none` need nothing.
 * @throws ConfigError naming the KB and the field (`retrieval.reranker…`).
 */
function checkReranker(config: KnowledgeBaseConfig): void {
  const rc = config.retrieval.reranker;
  if (rc.type === "auto" || rc.type === "none") return;
  try {
    createReranker(rc, {});
  } catch (err) {
    if (err instanceof ConfigError)
      throw new ConfigError(`knowledge base "${config.name}": retrieval.${err.message}`);
    throw err;
  }
}

/**
 * `base` with the sections of `patch` laid over it, key by key.
 * @throws ConfigError naming the KB and a section that is not an object.
 */
function mergeExtraction(
  kb: string,
  base: ExtractOptions | undefined,
  patch: DeepPartial<ExtractOptions>,
): ExtractOptions {
  const out: Record<string, unknown> = { ...base };
  for (const [section, value] of Object.entries(patch)) {
    if (typeof value !== "object" || value === null || Array.isArray(value))
      throw new ConfigError(`knowledge base "${kb}": extraction.${section} must be an object`);
    out[section] = { ...(out[section] as Record<string, unknown> | undefined), ...value };
  }
  return out as ExtractOptions;
}

/**
 * What identifies the server (and database or index) a store config points at: the type,
 * the URL without password, trailing slash or default port, the pgvector schema (default
 * `kl`) and the Pinecone index. Two configs written differently for the same place match.
 */
function storeIdentity(vs: VectorStoreConfig): string {
  let url = "";
  if (vs.url) {
    try {
      const u = new URL(vs.url);
      url = `${u.protocol}//${u.username}@${u.host.toLowerCase()}${u.pathname.replace(/\/+$/, "")}`;
    } catch {
      url = vs.url;
    }
  }
  const schema = vs.type === "pgvector" ? (vs.schema ?? "kl") : "";
  return JSON.stringify([vs.type, url, schema, vs.index ?? ""]);
}

/**
 * A server store config with its collection named: as given, else `kb_<name>_<6 random
 * hex>`, so KBs of two data directories (or a KB re-created under an old name) sharing a
 * server never write into each other's collection. The embedded store keeps `kb_<name>`.
 */
function withOwnCollection(name: string, vs: VectorStoreConfig, tag?: string): VectorStoreConfig {
  if (vs.type === "sqlite" || vs.collection) return vs;
  return { ...vs, collection: `kb_${name}_${tag ?? randomBytes(3).toString("hex")}` };
}

/**
 * The model part of an embedding-cache key: the model name, plus a hash of every other
 * setting that changes vectors (endpoint URL, dimension, prefixes, pooling…) when there
 * are any, so two endpoints serving one model name never share cached vectors.
 */
function embeddingCacheModel(e: KnowledgeBaseConfig["embedding"]): string {
  const { provider: _p, model: _m, ...rest } = embeddingIdentity(e);
  const settings = Object.entries(rest)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => a.localeCompare(b));
  if (settings.length === 0) return e.model;
  return `${e.model}#${createHash("sha256").update(JSON.stringify(settings)).digest("hex").slice(0, 12)}`;
}

/** A store whose every call fails with `error` (a server that could not be reached). */
function unavailableStore(error: unknown): VectorStore {
  const fail = async (): Promise<never> => {
    throw error;
  };
  return {
    kind: "unavailable",
    connect: fail,
    close: async () => {},
    createCollection: fail,
    dropCollection: fail,
    addBatch: fail,
    search: fail,
    get: fail,
    delete: fail,
    update: fail,
    info: fail,
    health: async () => false,
  };
}

/** True when two store configs point at the same server (or both at the embedded store). */
function sameStore(a: VectorStoreConfig, b: VectorStoreConfig): boolean {
  return storeIdentity(a) === storeIdentity(b);
}

/** A collection-name-safe tag of an embedding model: `provider-model` plus a short hash of the whole config. */
function embeddingSlug(e: KnowledgeBaseConfig["embedding"]): string {
  const readable = `${e.provider}-${e.model}`.replace(/[^A-Za-z0-9._-]+/g, "_").slice(0, 40);
  return `${readable}-${createHash("sha256")
    .update(JSON.stringify(embeddingIdentity(e)))
    .digest("hex")
    .slice(0, 8)}`;
}

/** Copies an object without its `undefined` fields, so they do not override defaults. */
function defined<T extends object>(o: T | undefined): Partial<T> {
  return Object.fromEntries(Object.entries(o ?? {}).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/**
 * Validates the numeric and per-KB search options.
 * @throws KnowledgeLayerError naming the option and the problem.
 */
function checkSearchOptions(options: SearchOptions, kbs: string[]): void {
  const nonNegative = (name: string, v: number | undefined): void => {
    if (v !== undefined && !(Number.isFinite(v) && v >= 0)) {
      throw new KnowledgeLayerError(`${name} must be a finite number >= 0 (got ${v})`);
    }
  };
  nonNegative("minScore", options.minScore);
  nonNegative("vectorWeight", options.vectorWeight);
  nonNegative("keywordWeight", options.keywordWeight);
  for (const [name, v] of [
    ["vectorTopK", options.vectorTopK],
    ["keywordTopK", options.keywordTopK],
  ] as const) {
    if (v !== undefined && !(Number.isInteger(v) && v >= 1)) {
      throw new KnowledgeLayerError(`${name} must be an integer >= 1 (got ${v})`);
    }
  }
  for (const [kb, over] of Object.entries(options.perKb ?? {})) {
    if (!kbs.includes(kb))
      throw new KnowledgeLayerError(`perKb.${kb}: "${kb}" is not one of the searched knowledge bases`);
    nonNegative(`perKb.${kb}.minScore`, over.minScore);
    if (over.maxResults !== undefined && !(Number.isInteger(over.maxResults) && over.maxResults >= 1)) {
      throw new KnowledgeLayerError(
        `perKb.${kb}.maxResults must be an integer >= 1 (got ${over.maxResults})`,
      );
    }
    if (over.mode !== undefined && parseRetrievalMode(String(over.mode)) === undefined) {
      throw new KnowledgeLayerError(
        `perKb.${kb}.mode: unknown mode "${over.mode}"; use one of ${RETRIEVAL_MODES.join(", ")}`,
      );
    }
  }
}

/** Extraction overrides without undefined fields or empty sections; undefined when nothing is set. */
function compactExtraction(o: DeepPartial<ExtractOptions> | undefined): ExtractOptions | undefined {
  if (!o) return undefined;
  const out: ExtractOptions = {};
  const limits = defined(o.limits);
  const slack = defined(o.slack);
  const email = defined(o.email);
  if (Object.keys(limits).length > 0) out.limits = limits as ExtractOptions["limits"];
  if (Object.keys(slack).length > 0) out.slack = slack as ExtractOptions["slack"];
  if (Object.keys(email).length > 0) out.email = email as ExtractOptions["email"];
  return Object.keys(out).length > 0 ? out : undefined;
}

/** Recursive partial, for configuration overrides. */
export type DeepPartial<T> = { [K in keyof T]?: T[K] extends object ? DeepPartial<T[K]> : T[K] };
