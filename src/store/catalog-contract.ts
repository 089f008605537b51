/**
 * The catalog seam: everything the library keeps besides vectors — knowledge bases,
 * documents, chunks, the BM25 keyword index, the embedding cache, API keys of tenants,
 * agents, conversation memories and the HTTP API's ingest jobs — as one asynchronous contract, so a second backend
 * (PostgreSQL next) can implement it without touching an adapter. The embedded SQLite
 * database implements it today (`SqliteCatalogBackend` in `sqlite-catalog.ts`, wrapping
 * the synchronous `Catalog`, `Bm25Index`, … classes); every implementation runs the
 * conformance suite in `test/conformance/catalog.ts`.
 *
 * Atomicity: each method is atomic on its own. Writes that must commit together (a
 * document with its chunks and postings) are, for now, composed by the SQLite stages in
 * one synchronous transaction; a backend over the network will need them as operations
 * of this contract (`replaceSource`, `deleteDocuments`) — the next step of this seam.
 */
import type { KnowledgeBaseConfig } from "../config.js";
import type { Bm25Hit, Bm25Params, FieldLengths } from "../retrieve/bm25.js";
import type { FilterNode } from "../retrieve/filter.js";
import type { Analyzer } from "../retrieve/tokenizer.js";
import type { Chunk, DocumentMetadata } from "../types.js";
import type { Agent, AgentInput, AgentPatch, AttachmentRetrievalConfig } from "./agents.js";
import type { ApiKeyInfo, NewApiKey } from "./api-keys.js";
import type {
  DocumentRecord,
  FilteredChunks,
  KbCounts,
  KbRecord,
  NewDocument,
  StoredChunk,
} from "./catalog.js";
import type { JobEventRecord, JobIssue, JobRecord, JobStep, NewJob } from "./jobs.js";
import type { Memory, MemoryModel } from "./memories.js";

/** Knowledge bases and their statistics. */
export interface KbCatalog {
  /** A KB, or undefined. */
  get(name: string): Promise<KbRecord | undefined>;
  /** Every KB, by name. */
  list(): Promise<KbRecord[]>;
  /** Stores a new KB. @throws ConfigError for an invalid config; an error when the name exists. */
  insert(config: KnowledgeBaseConfig): Promise<KbRecord>;
  /** Replaces a KB's configuration. @throws ConfigError for an invalid config. */
  updateConfig(config: KnowledgeBaseConfig): Promise<void>;
  /** Deletes a KB's rows: documents, chunks, postings and the KB (vectors are the vector store's). */
  delete(name: string): Promise<void>;
  /** Document and chunk counts (zeros for an unknown KB). */
  counts(name: string): Promise<KbCounts>;
  /** A version that changes whenever a document of the KB is added, replaced or removed. */
  dataVersion(name: string): Promise<string>;
}

/** Documents of knowledge bases. */
export interface DocumentCatalog {
  /**
   * Documents of `kb` (all KBs when undefined) by id: after id `afterId`, skipping
   * `offset`, at most `limit`; with a filter, those with at least one matching chunk.
   */
  list(
    kb: string | undefined,
    options?: { filter?: FilterNode; afterId?: number; limit?: number; offset?: number; metadata?: false },
  ): Promise<DocumentRecord[]>;
  /** {@link list} with each document's metadata. */
  list(
    kb: string | undefined,
    options: { filter?: FilterNode; afterId?: number; limit?: number; offset?: number; metadata: true },
  ): Promise<(DocumentRecord & { metadata: DocumentMetadata })[]>;
  list(
    kb: string | undefined,
    options?: { filter?: FilterNode; afterId?: number; limit?: number; offset?: number; metadata?: boolean },
  ): Promise<DocumentRecord[]>;
  /** Number of documents {@link list} would return without paging. */
  count(kb: string | undefined, filter?: FilterNode): Promise<number>;
  /** A document with its metadata, or undefined. */
  byId(id: number): Promise<(DocumentRecord & { metadata: DocumentMetadata }) | undefined>;
  /** A KB's document of one URI, or undefined. */
  byUri(kb: string, uri: string): Promise<DocumentRecord | undefined>;
  /** A KB's documents whose source path is `path`. */
  atPath(kb: string, path: string): Promise<DocumentRecord[]>;
  /** A KB's documents from source `uri`: its own and its children's (`<uri>#…`), by id. */
  ofSource(kb: string, uri: string): Promise<DocumentRecord[]>;
  /** The extracted text of a document (empty for an unknown id). */
  text(id: number): Promise<string>;
  /** The subset of `ids` that are documents of `kb`, in the order given. */
  idsIn(kb: string, ids: readonly number[]): Promise<number[]>;
  /**
   * Stores a document row; returns its id: `doc.id` when given (a replaced document keeps
   * its id), else a new one, never used before.
   */
  insert(doc: NewDocument): Promise<number>;
  /** Marks a document as having vectors. */
  markEmbedded(id: number): Promise<void>;
  /** Deletes a document and its chunks (postings and vectors are removed by the caller). */
  delete(id: number): Promise<void>;
}

/** Chunks of documents. */
export interface ChunkCatalog {
  /** Stores a chunk with its BM25 field lengths in tokens; returns its id (never reused). */
  insert(
    kb: string,
    documentId: number,
    chunk: Chunk,
    tokenCount: number,
    titleTokenCount?: number,
  ): Promise<number>;
  /** A document's chunk ids, in chunk order. */
  idsOf(documentId: number): Promise<number[]>;
  /** Chunks with their documents' attribution fields, by id (unknown ids left out). */
  load(ids: readonly number[]): Promise<Map<number, StoredChunk>>;
  /** The subset of `ids` that are chunks of `kb`. */
  known(kb: string, ids: readonly number[]): Promise<Set<number>>;
  /** The chunks of `kb` a metadata filter lets through. */
  filter(kb: string, filter: FilterNode): Promise<FilteredChunks>;
}

/** The BM25 keyword index of every KB. */
export interface KeywordIndex {
  /** Indexes a chunk's text (and its document's title as the title field); returns the field lengths. */
  indexChunk(
    kb: string,
    chunkId: number,
    text: string,
    analyzer?: Analyzer,
    title?: string,
  ): Promise<FieldLengths>;
  /** Makes pending postings of `kb` final (search is correct before, only slower). */
  flush(kb: string): Promise<void>;
  /** Removes the postings of a document's chunks. */
  removeDocument(documentId: number, analyzer?: Analyzer): Promise<void>;
  /** The top `topK` chunks of `kb` for `query` (restricted to `allowed` when given), best first. */
  search(
    kb: string,
    query: string,
    topK: number,
    params: Bm25Params,
    allowed?: ReadonlySet<number>,
  ): Promise<Bm25Hit[]>;
}

/** The persistent embedding cache, keyed by provider, model and SHA-256 of the text. */
export interface EmbeddingCache {
  /** The cached vector, or undefined. */
  get(provider: string, model: string, textHash: string): Promise<Float32Array | undefined>;
  /** Stores (or replaces) a vector. */
  put(provider: string, model: string, textHash: string, vector: Float32Array): Promise<void>;
}

/** API keys of tenants (only their SHA-256 is stored). */
export interface ApiKeyCatalog {
  /** Creates a key for `tenant`; the key itself is returned only here. @throws for an invalid tenant name. */
  create(tenant: string, label?: string): Promise<NewApiKey>;
  /** Keys (all, or one tenant's), oldest first, without secrets. */
  list(tenant?: string): Promise<ApiKeyInfo[]>;
  /** Deletes a key by id; true when it existed. */
  revoke(id: string): Promise<boolean>;
  /** The tenant of a key, or undefined when it is unknown. */
  tenantOf(key: string): Promise<string | undefined>;
}

/** Agents of tenants and their KB attachments; every read and write is within one tenant. */
export interface AgentCatalog {
  /** Creates an agent with its attachments. @throws ConflictError (field `name`) for a taken name. */
  create(tenant: string, input: AgentInput): Promise<Agent>;
  /** The tenant's agents, by name. */
  list(tenant: string): Promise<Agent[]>;
  /** One of the tenant's agents, or undefined (also another tenant's). */
  get(tenant: string, id: string): Promise<Agent | undefined>;
  /** Changes an agent. @throws NotFoundError for an unknown agent; ConflictError for a taken name. */
  update(tenant: string, id: string, patch: AgentPatch): Promise<Agent>;
  /** Deletes an agent and its attachments; false when the tenant has none of that id. */
  delete(tenant: string, id: string): Promise<boolean>;
  /** Attaches a KB or replaces the attachment's settings. @throws NotFoundError for an unknown agent. */
  setAttachment(tenant: string, id: string, kb: string, config: AttachmentRetrievalConfig): Promise<Agent>;
  /** Detaches a KB. @throws NotFoundError for an unknown agent or a KB not attached. */
  detach(tenant: string, id: string, kb: string): Promise<Agent>;
  /** Removes a KB from every agent (when the KB is deleted). */
  detachEverywhere(kb: string): Promise<void>;
}

/** Conversation memories: turns and their vectors, one per embedding model. */
export interface MemoryCatalog {
  /** Stores a turn with its vector of `model`; returns the stored turn. */
  insert(turn: Omit<Memory, "id">, vector: Float32Array, model: MemoryModel): Promise<Memory>;
  /** A session's turns, oldest first: of one thread, of all but one, or all. */
  list(sessionId: string, options?: { threadId?: string; exceptThread?: string }): Promise<Memory[]>;
  /** Each turn's vector of `model` (undefined where there is none), in the order given. */
  vectors(ids: readonly number[], model: MemoryModel): Promise<(Float32Array | undefined)[]>;
  /** Stores vectors of `model` for turns; turns forgotten meanwhile are skipped. */
  storeVectors(entries: readonly { id: number; vector: Float32Array }[], model: MemoryModel): Promise<void>;
  /** Deletes a session's turns (one thread's); returns how many went. */
  forget(sessionId: string, threadId?: string): Promise<number>;
  /** Deletes the turns of every session whose id starts with `prefix`; returns how many went. */
  forgetSessionsWithPrefix(prefix: string): Promise<number>;
}

/**
 * Durable ingest jobs of the HTTP API: a job, its uploaded files' progress and its
 * numbered events. Each write is atomic, so a crash leaves a job as of its last step.
 */
export interface JobCatalog {
  /** Stores a new `queued` job with its files; returns it. */
  create(job: NewJob): Promise<JobRecord>;
  /** A job by id, or undefined. */
  get(id: string): Promise<JobRecord | undefined>;
  /** A tenant's jobs, newest first (files without `prior` and `result`). */
  list(tenant: string): Promise<JobRecord[]>;
  /** Jobs queued or running (every tenant's), in submission order. */
  pending(): Promise<JobRecord[]>;
  /** Ids of the jobs queued or running on a KB (catalog name), in submission order. */
  active(internalKb: string): Promise<string[]>;
  /** A job's events after event id `afterSeq`, in order. */
  events(id: string, afterSeq?: number): Promise<JobEventRecord[]>;
  /**
   * Applies one step (new state, a file's progress, the event it is) atomically; returns the
   * job as it is now and the stored event. @throws when the job does not exist.
   */
  advance(id: string, step: JobStep): Promise<{ job: JobRecord; event?: JobEventRecord }>;
  /** The documents file `n` of a job wrote so far, by uri. */
  documents(id: string, n: number): Promise<{ uri: string; chunks: number; warnings: JobIssue[] }[]>;
  /** Deletes a tenant's finished jobs but the newest `keep`; returns how many went. */
  prune(tenant: string, keep: number): Promise<number>;
  /** Tenants that have jobs. */
  tenants(): Promise<string[]>;
}

/** A catalog backend: the sections above over one database. */
export interface CatalogBackend {
  /** Backend name for messages, e.g. `sqlite`. */
  readonly kind: string;
  readonly kbs: KbCatalog;
  readonly documents: DocumentCatalog;
  readonly chunks: ChunkCatalog;
  readonly keywords: KeywordIndex;
  readonly embeddings: EmbeddingCache;
  readonly apiKeys: ApiKeyCatalog;
  readonly agents: AgentCatalog;
  readonly memories: MemoryCatalog;
  readonly jobs: JobCatalog;
  /** Resolves when the database answers (a health check). @throws when it does not. */
  ping(): Promise<void>;
}
