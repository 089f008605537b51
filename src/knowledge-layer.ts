/**
 * The facade's public entry point: the `KnowledgeLayer` class, whose operations are the
 * boundary every adapter calls, and the types adapters need. The operations' bodies live
 * in `src/facade/`: option and result types (`types.ts`), KB lifecycle (`kbs.ts`, with
 * `kb-config.ts`), documents (`documents.ts`), ingest (`ingest.ts`), search (`search.ts`),
 * and the components built per configuration (`components.ts`).
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { type Cache, createCache } from "./cache/index.js";
import { DEFAULT_KB, defaultKbConfig, type KnowledgeBaseConfig, type VectorStoreConfig } from "./config.js";
import type { CachedEmbedder } from "./embed/cache.js";
import { KnowledgeLayerError, NotFoundError } from "./errors.js";
import {
  connectVectorStore,
  defaultCacheConfig,
  kbEmbedder,
  kbExpander,
  kbReranker,
  kbSituator,
} from "./facade/components.js";
import * as documents from "./facade/documents.js";
import { ingestContext, syncVectorIndex } from "./facade/ingest.js";
import * as kbs from "./facade/kbs.js";
import type { FacadeParts } from "./facade/parts.js";
import { search, type WarmReport, warmSearch } from "./facade/search.js";
import type {
  DeepPartial,
  DocumentDetails,
  DocumentListOptions,
  IngestOptions,
  KbUpdate,
  OpenOptions,
  SearchOptions,
  SearchResponse,
} from "./facade/types.js";
import { ChunkWorker } from "./ingest/chunk-client.js";
import { type IngestSummary, ingestDocuments, ingestPaths } from "./ingest/pipeline.js";
import type { Reranker } from "./rerank/index.js";
import type { Bm25Index } from "./retrieve/bm25.js";
import { ParallelBm25Search } from "./retrieve/bm25-parallel.js";
import type { Filter } from "./retrieve/filter.js";
import type { PipelineReranker, QueryExpander } from "./retrieve/search.js";
import type { Agent, AgentInput, AgentPatch, AttachmentRetrievalConfig } from "./store/agents.js";
import type { ApiKeyInfo, NewApiKey } from "./store/api-keys.js";
import type { Catalog, DocumentRecord, KbCounts, KbRecord } from "./store/catalog.js";
import type { MemoryCatalog } from "./store/catalog-contract.js";
import type { VectorStore } from "./store/contract.js";
import { DB_FILE, type Db, openDatabase, releaseFreePages, resolveDataDir } from "./store/database.js";
import type { JobEventRecord, JobIssue, JobRecord, JobStep, NewJob } from "./store/jobs.js";
import type { FillProgress } from "./store/migrate.js";
import { SqliteCatalogBackend } from "./store/sqlite-catalog.js";
import { SqliteVectorStore } from "./store/sqlite-vector-store.js";
import type { ExtractedDocument } from "./types.js";

export { defaultCacheConfig } from "./facade/components.js";
export { MAX_TOP_K, type WarmReport } from "./facade/search.js";
export type {
  DeepPartial,
  DocumentDetails,
  DocumentListOptions,
  IngestOptions,
  KbUpdate,
  OpenOptions,
  SearchOptions,
  SearchResponse,
  SearchResult,
} from "./facade/types.js";
// The types (and pure config helpers) adapters need, so they never import from `store/`.
export type { Agent, AgentInput, AgentPatch, Attachment, AttachmentRetrievalConfig } from "./store/agents.js";
export type { ApiKeyInfo, NewApiKey } from "./store/api-keys.js";
export type { DocumentRecord, KbCounts, KbRecord } from "./store/catalog.js";
export type { CatalogBackend, MemoryCatalog } from "./store/catalog-contract.js";
export { collectionOf, describeStore } from "./store/index.js";
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
export type { Memory, MemoryModel, MemoryStore } from "./store/memories.js";

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
  /** Keyword search of large KBs on two threads (`retrieve/bm25-parallel.ts`). */
  private readonly keywordSearch: ParallelBm25Search;
  /** Chunks and analyses sources of large ingests on a worker thread (`ingest/chunk-client.ts`). */
  private readonly chunkWorker: ChunkWorker | undefined;
  /**
   * The catalog behind the contract of `store/catalog-contract.ts` (the embedded SQLite
   * database today). The facade's asynchronous operations go through it.
   */
  private readonly backend: SqliteCatalogBackend;
  private readonly embedders = new Map<string, CachedEmbedder>();
  private readonly rerankers = new Map<string, Reranker>();
  private readonly expanders = new Map<string, QueryExpander>();
  /** What the operations in `src/facade/` work on. */
  private readonly parts: FacadeParts;

  private constructor(
    readonly dataDir: string,
    /** The database connection. Internal, like {@link catalog}. */
    readonly db: Db,
    /** Search-result and query-embedding cache (see {@link OpenOptions.cache}). */
    readonly cache: Cache,
    /** See {@link OpenOptions.offThread}. */
    readonly offThread = false,
    private readonly cacheScope?: (kb: string) => string,
    chunkThread = true,
  ) {
    this.backend = new SqliteCatalogBackend(db);
    this.catalog = this.backend.catalog;
    this.store = new SqliteVectorStore(db);
    this.bm25 = this.backend.bm25;
    this.keywordSearch = new ParallelBm25Search(db, this.bm25);
    this.chunkWorker = chunkThread ? new ChunkWorker() : undefined;
    this.parts = {
      db,
      catalog: this.catalog,
      store: this.store,
      bm25: this.bm25,
      keywordSearch: this.keywordSearch,
      chunkWorker: this.chunkWorker,
      backend: this.backend,
      jobs: this.backend.jobRows,
      cache,
      cacheScope,
      getKb: (name) => this.getKb(name),
      vectorStore: (config) => this.vectorStore(config),
      embedder: (config, use) => this.embedder(config, use),
      reranker: (config) => this.reranker(config),
      expander: (config) => kbExpander(config, this.expanders),
      situator: (config) => kbSituator(config, this.catalog, cacheScope),
    };
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
      options.chunkThread !== false,
    );
  }

  /**
   * Closes the database at once, then the connections to vector-store servers and
   * the cache (await the result to know they are closed).
   */
  async close(): Promise<void> {
    // In process, the approximate indexes are saved before this returns its promise; a
    // worker thread saves them through its own connection, awaited below.
    let indexes: Promise<void> = Promise.resolve();
    try {
      indexes = this.store.close().catch(() => undefined);
    } catch {
      // An unsaved approximate index is rebuilt from the log on the next open.
    }
    const keywordWorker = this.keywordSearch.close().catch(() => undefined);
    const chunkWorker = this.chunkWorker?.close().catch(() => undefined);
    releaseFreePages(this.db);
    this.db.close();
    const stores = [...this.stores.values()];
    this.stores.clear();
    await Promise.allSettled([
      indexes,
      keywordWorker,
      chunkWorker,
      ...stores.map(async (s) => (await s).close()),
      this.cache.close(),
    ]);
  }

  /**
   * The connected vector store of a KB configuration: the embedded store for
   * `sqlite`, else one client per distinct server configuration, connected on
   * first use (a failed connection is retried by the next call).
   * @throws KnowledgeLayerError naming the store when it cannot be reached.
   */
  async vectorStore(config: KnowledgeBaseConfig): Promise<VectorStore> {
    return connectVectorStore(config, this.store, this.db, this.stores);
  }

  /**
   * Creates a knowledge base from the defaults overridden by `overrides`.
   * @throws ConfigError if it exists already or the configuration is invalid.
   */
  async createKb(
    name: string,
    overrides: DeepPartial<Omit<KnowledgeBaseConfig, "name">> = {},
  ): Promise<KbRecord> {
    return kbs.createKb(this.parts, name, overrides);
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
    return kbs.updateKb(this.parts, name, update);
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
    return kbs.deleteKb(this.parts, name, options);
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
    return kbs.migrateKb(this.parts, name, to, options);
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
    return kbs.reembedKb(this.parts, name, settings, options);
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
  listDocuments(options?: DocumentListOptions & { metadata?: false }): Promise<DocumentRecord[]>;
  /** {@link listDocuments} with each document's metadata (as `kl docs show` prints it). */
  listDocuments(options: DocumentListOptions & { metadata: true }): Promise<DocumentDetails[]>;
  listDocuments(options: DocumentListOptions = {}): Promise<DocumentRecord[]> {
    return documents.listDocuments(this.backend, options);
  }

  /**
   * Number of documents of one KB or all; with a filter, of those with at least one
   * matching chunk (as {@link listDocuments}).
   * @throws FilterError for a malformed filter.
   */
  async countDocuments(options: { kb?: string; filter?: Filter } = {}): Promise<number> {
    return documents.countDocuments(this.backend, options);
  }

  /**
   * A document by id with its metadata; undefined when there is none (or, with `kb`,
   * when it belongs to another KB).
   */
  async getDocument(id: number, options: { kb?: string } = {}): Promise<DocumentDetails | undefined> {
    return documents.getDocument(this.backend, id, options);
  }

  /** A document of a KB by its URI, with its metadata, or undefined. */
  async getDocumentByUri(kb: string, uri: string): Promise<DocumentDetails | undefined> {
    return documents.getDocumentByUri(this.backend, kb, uri);
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
    return documents.deleteDocuments(this.parts, kb, ids);
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
    const ctx = await ingestContext(this.parts, options);
    const summary = await ingestPaths(ctx, paths, options.embed ?? true);
    syncVectorIndex(this.parts, ctx);
    return summary;
  }

  /** Ingests in-memory documents (one unit per document URI). */
  async ingestDocuments(
    docs: Iterable<ExtractedDocument>,
    options: IngestOptions = {},
  ): Promise<IngestSummary> {
    const ctx = await ingestContext(this.parts, options);
    const summary = await ingestDocuments(ctx, docs, options.embed ?? true);
    syncVectorIndex(this.parts, ctx);
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
   * Searches one or more knowledge bases.
   *
   * - `vector`: cosine top-k from each KB's vector collection;
   * - `keyword`: corpus-level BM25 top-k;
   * - `hybrid` (default): both lists fused with reciprocal rank fusion (k from the KB config, 60).
   * Several KBs are fused with RRF too. Near-duplicates (token-set Jaccard ≥ threshold) are removed.
   * @throws KnowledgeLayerError for an unknown KB or mode.
   */
  async search(query: string, options: SearchOptions = {}): Promise<SearchResponse> {
    return search(this.parts, query, options);
  }

  /**
   * Readies large KBs of the embedded store for fast first searches: loads their HNSW indexes
   * and starts the keyword search's second thread (see `warmSearch` in `facade/search.ts`).
   * `kl serve` and `kl mcp --http` call it after they start listening.
   * @throws KnowledgeLayerError or an I/O error when the catalog or an index file cannot be read.
   */
  async warm(): Promise<WarmReport> {
    return warmSearch(this.parts);
  }

  /**
   * The reranker of a KB's retrieval config, created once per configuration;
   * undefined for `none` and for `auto` when no offline reranker beats hybrid with
   * the KB's embedder (the bundled model: see the README's measurements).
   */
  reranker(config: KnowledgeBaseConfig): PipelineReranker | undefined {
    return kbReranker(config, this.rerankers, (c) => this.embedder(c));
  }

  /**
   * The cached embedder of a KB's embedding configuration (one per configuration
   * and use). With {@link OpenOptions.offThread}, `"query"` embedders run on their
   * own worker lane, apart from ingest batches.
   */
  embedder(config: KnowledgeBaseConfig, use: "ingest" | "query" = "ingest"): CachedEmbedder {
    return kbEmbedder(config, use, {
      embedders: this.embedders,
      db: this.db,
      offThread: this.offThread,
      cacheScope: this.cacheScope,
    });
  }
}
