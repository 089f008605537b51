/**
 * The catalog contract (`catalog-contract.ts`) over the embedded SQLite database:
 * each asynchronous method wraps the synchronous class that owns the table (`Catalog`,
 * `Bm25Index`, `EmbeddingCacheTable`, `ApiKeyStore`, `AgentStore`, `MemoryStore`, `JobStore`), so the
 * SQL stays where it is and the stages that need one SQLite transaction (ingest, the
 * embedded vector store) keep using those classes directly.
 */
import { Bm25Index } from "../retrieve/bm25.js";
import { AgentStore } from "./agents.js";
import { ApiKeyStore } from "./api-keys.js";
import { Catalog } from "./catalog.js";
import type {
  AgentCatalog,
  ApiKeyCatalog,
  CatalogBackend,
  ChunkCatalog,
  DocumentCatalog,
  EmbeddingCache,
  JobCatalog,
  KbCatalog,
  KeywordIndex,
  MemoryCatalog,
} from "./catalog-contract.js";
import type { Db } from "./database.js";
import { EmbeddingCacheTable } from "./embedding-cache.js";
import { JobStore } from "./jobs.js";
import { MemoryStore } from "./memories.js";

/**
 * Runs a synchronous call as a promise: its value resolves, its exception rejects
 * (never thrown synchronously, as a backend over the network would behave).
 */
function later<T>(call: () => T): Promise<T> {
  try {
    return Promise.resolve(call());
  } catch (error) {
    return Promise.reject(error);
  }
}

/** The SQLite catalog backend of one data directory's `kl.db`. */
export class SqliteCatalogBackend implements CatalogBackend {
  readonly kind = "sqlite";
  /** The synchronous catalog (for stages that write in one SQLite transaction). */
  readonly catalog: Catalog;
  /** The synchronous BM25 index (likewise). */
  readonly bm25: Bm25Index;
  /** The synchronous job rows (the ingest pipeline records a job's documents in its transaction). */
  readonly jobRows: JobStore;
  private apiKeyStore?: ApiKeyStore;
  private agentStore?: AgentStore;
  private memoryStore?: MemoryStore;
  private embeddingTable?: EmbeddingCacheTable;

  readonly kbs: KbCatalog;
  readonly documents: DocumentCatalog;
  readonly chunks: ChunkCatalog;
  readonly keywords: KeywordIndex;
  readonly embeddings: EmbeddingCache;
  readonly apiKeys: ApiKeyCatalog;
  readonly agents: AgentCatalog;
  readonly memories: MemoryCatalog;
  readonly jobs: JobCatalog;

  constructor(readonly db: Db) {
    const catalog = new Catalog(db);
    const bm25 = new Bm25Index(db);
    const jobs = new JobStore(db);
    this.catalog = catalog;
    this.bm25 = bm25;
    this.jobRows = jobs;
    this.kbs = {
      get: (name) => later(() => catalog.getKb(name)),
      list: () => later(() => catalog.listKbs()),
      insert: (config) => later(() => catalog.insertKb(config)),
      updateConfig: (config) => later(() => catalog.updateKbConfig(config)),
      delete: (name) => later(() => catalog.transaction(() => catalog.deleteKb(name))),
      counts: (name) => later(() => catalog.counts(name)),
      dataVersion: (name) => later(() => catalog.dataVersion(name)),
    };
    this.documents = {
      list: ((kb: string | undefined, options?: Parameters<Catalog["listDocuments"]>[1]) =>
        later(() => catalog.listDocuments(kb, options))) as DocumentCatalog["list"],
      count: (kb, filter) => later(() => catalog.countDocuments(kb, filter)),
      byId: (id) => later(() => catalog.documentById(id)),
      byUri: (kb, uri) => later(() => catalog.getDocument(kb, uri)),
      atPath: (kb, path) => later(() => catalog.documentsByPath(kb, path)),
      ofSource: (kb, uri) => later(() => catalog.documentsOfSource(kb, uri)),
      text: (id) => later(() => catalog.documentText(id)),
      idsIn: (kb, ids) => later(() => catalog.documentIdsIn(kb, ids)),
      insert: (doc) => later(() => catalog.insertDocument(doc)),
      markEmbedded: (id) => later(() => catalog.markEmbedded(id)),
      delete: (id) => later(() => catalog.deleteDocument(id)),
    };
    this.chunks = {
      insert: (kb, documentId, chunk, tokenCount, titleTokenCount) =>
        later(() => catalog.insertChunk(kb, documentId, chunk, tokenCount, titleTokenCount)),
      idsOf: (documentId) => later(() => catalog.chunkIds(documentId)),
      load: (ids) => later(() => catalog.loadChunks(ids)),
      known: (kb, ids) => later(() => catalog.knownChunkIds(kb, ids)),
      filter: (kb, filter) => later(() => catalog.filterChunks(kb, filter)),
    };
    this.keywords = {
      indexChunk: (kb, chunkId, text, analyzer, title) =>
        later(() => catalog.transaction(() => bm25.indexChunk(kb, chunkId, text, analyzer, title))),
      flush: (kb) => later(() => bm25.flush(kb)),
      removeDocument: (documentId, analyzer) =>
        later(() => catalog.transaction(() => bm25.removeDocument(documentId, analyzer))),
      search: (kb, query, topK, params, allowed) =>
        later(() => bm25.search(kb, query, topK, params, allowed)),
    };
    const embeddings = (): EmbeddingCacheTable => {
      this.embeddingTable ??= new EmbeddingCacheTable(db);
      return this.embeddingTable;
    };
    this.embeddings = {
      get: (provider, model, hash) => later(() => embeddings().get(provider, model, hash)),
      put: (provider, model, hash, vector) => later(() => embeddings().put(provider, model, hash, vector)),
    };
    this.apiKeys = {
      create: (tenant, label) => later(() => this.apiKeyRows().create(tenant, label)),
      list: (tenant) => later(() => this.apiKeyRows().list(tenant)),
      revoke: (id) => later(() => this.apiKeyRows().revoke(id)),
      tenantOf: (key) => later(() => this.apiKeyRows().tenantOf(key)),
    };
    this.agents = {
      create: (tenant, input) => later(() => this.agentRows().create(tenant, input)),
      list: (tenant) => later(() => this.agentRows().list(tenant)),
      get: (tenant, id) => later(() => this.agentRows().get(tenant, id)),
      update: (tenant, id, patch) => later(() => this.agentRows().update(tenant, id, patch)),
      delete: (tenant, id) => later(() => this.agentRows().delete(tenant, id)),
      setAttachment: (tenant, id, kb, config) =>
        later(() => this.agentRows().setAttachment(tenant, id, kb, config)),
      detach: (tenant, id, kb) => later(() => this.agentRows().detach(tenant, id, kb)),
      detachEverywhere: (kb) => later(() => this.agentRows().detachEverywhere(kb)),
    };
    this.memories = {
      insert: (turn, vector, model) => later(() => this.memoryRows().insert(turn, vector, model)),
      list: (sessionId, options) => later(() => this.memoryRows().list(sessionId, options)),
      vectors: (ids, model) => later(() => this.memoryRows().vectors(ids, model)),
      storeVectors: (entries, model) => later(() => this.memoryRows().storeVectors(entries, model)),
      forget: (sessionId, threadId) => later(() => this.memoryRows().forget(sessionId, threadId)),
      forgetSessionsWithPrefix: (prefix) => later(() => this.memoryRows().forgetSessionsWithPrefix(prefix)),
    };
    this.jobs = {
      create: (job) => later(() => jobs.create(job)),
      get: (id) => later(() => jobs.get(id)),
      list: (tenant) => later(() => jobs.list(tenant)),
      pending: () => later(() => jobs.pending()),
      active: (kb) => later(() => jobs.active(kb)),
      events: (id, afterSeq) => later(() => jobs.events(id, afterSeq)),
      advance: (id, step) => later(() => jobs.advance(id, step)),
      documents: (id, n) => later(() => jobs.documents(id, n)),
      prune: (tenant, keep) => later(() => jobs.prune(tenant, keep)),
      tenants: () => later(() => jobs.tenants()),
    };
  }

  /** Resolves when the database answers one read. */
  ping(): Promise<void> {
    return later(() => this.catalog.ping());
  }

  /** The API-key rows, their table created on first use. */
  apiKeyRows(): ApiKeyStore {
    this.apiKeyStore ??= new ApiKeyStore(this.db);
    return this.apiKeyStore;
  }

  /** The agent rows, their tables created (or migrated) on first use. */
  agentRows(): AgentStore {
    this.agentStore ??= new AgentStore(this.db);
    return this.agentStore;
  }

  /** The memory rows, their tables created on first use (synchronous: `ConversationMemory` uses them). */
  memoryRows(): MemoryStore {
    this.memoryStore ??= new MemoryStore(this.db);
    return this.memoryStore;
  }
}
