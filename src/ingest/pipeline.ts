import { createHash } from "node:crypto";
import { readdir, readFile, stat } from "node:fs/promises";
import { join, resolve, sep } from "node:path";
import type { Chunker } from "../chunk/contract.js";
import { FIXED_FALLBACK_CHUNKER } from "../chunk/embedding-semantic.js";
import { createChunker } from "../chunk/index.js";
import type { ChunkSituator } from "../chunk/llm-context.js";
import type { KnowledgeBaseConfig } from "../config.js";
import { CachedEmbedder } from "../embed/cache.js";
import type { Embedder } from "../embed/contract.js";
import { ConfigError, ExtractionError, KnowledgeLayerError } from "../errors.js";
import { discoverSources, extractFile, frontMatterTags } from "../extract/index.js";
import { type AnalyzedChunk, analyzeChunk, type Bm25Index } from "../retrieve/bm25.js";
import type { FilterScalar } from "../retrieve/filter.js";
import { redactText } from "../secrets.js";
import type { Catalog } from "../store/catalog.js";
import type { VectorRecord, VectorStore } from "../store/contract.js";
import { SOURCE_FILTER_FIELDS } from "../store/filter-sql.js";
import { SqliteVectorStore } from "../store/sqlite-vector-store.js";
import type { Chunk, DocumentMetadata, ExtractedDocument, SourceType } from "../types.js";
import { type ChunkedSource, type ChunkWorker, ChunkWorkerFailure } from "./chunk-client.js";

/** Version of the extract+chunk pipeline; bump to force re-ingest when its output changes. */
export const PIPELINE_VERSION = 7;

/** A per-file problem reported by ingest. */
export interface IngestIssue {
  path: string;
  reason: string;
}

/** What an ingest run did. */
export interface IngestSummary {
  kb: string;
  /** Sources (files, Slack exports, in-memory documents) considered. */
  files: number;
  /** Sources whose content and pipeline were unchanged: nothing was done. */
  unchanged: number;
  /**
   * Previously ingested sources removed from the KB because they are gone from
   * an ingested folder, are now skipped (binary, unsupported, ignored) or empty.
   */
  removed: string[];
  /** Sources ingested for the first time. */
  added: number;
  /** Sources whose old chunks were replaced. */
  updated: number;
  /** Documents written (a Slack export gives one per channel). */
  documents: number;
  /** Chunks written. */
  chunks: number;
  /** Files skipped (unknown type, binary, ignored) with the reason. */
  skipped: IngestIssue[];
  /** Files that failed (parse errors, empty files) with the reason; the run went on. */
  errors: IngestIssue[];
  /**
   * Documents ingested with a degraded result, with the reason: extraction warnings
   * (a PDF page without a text layer, an attachment that could not be read) and
   * EMBEDDING_SEMANTIC chunking that fell back to fixed windows because the embedder failed.
   */
  warnings: IngestIssue[];
  /**
   * Texts embedded by the model vs served from the embedding cache (sentences
   * embedded for EMBEDDING_SEMANTIC chunking included), and chunk vectors reused
   * from the chunker (the mean of its sentence vectors) without an embedding call.
   */
  embedded: { computed: number; cached: number; reused: number };
  /** Chunk context sentences written by the KB's context LLM, and served from the cache (0 without one). */
  situated: { written: number; cached: number };
  durationMs: number;
  /**
   * True when the run was stopped by its `signal` before it finished: the counts
   * are what was committed; sources not reached keep their previous state (a
   * source is always fully old or fully new) and the next run continues with them.
   */
  stopped?: boolean;
}

/**
 * Progress events for a progress bar: sources found; each source read and
 * chunked (`done` of `total`; `chunks`: chunks made so far in this run); and
 * chunks embedded so far in this run (`embedded` events, cumulative: computed,
 * cached and reused vectors alike, sent as embedding batches complete, so a
 * bar can show chunks/s and an ETA).
 */
export type IngestProgress =
  | { phase: "discovered"; total: number }
  | { phase: "source"; done: number; total: number; path: string; chunks?: number }
  | { phase: "embedded"; chunks: number };

/** Everything ingest writes to. */
export interface IngestContext {
  catalog: Catalog;
  bm25: Bm25Index;
  /**
   * The KB's vector store. The embedded SQLite store is written in the same
   * transaction as the catalog; a server store is written after the catalog commit
   * (see {@link commitUnit}).
   */
  store: VectorStore;
  /** Embedder with the persistent cache; absent when `embed` is false. */
  embedder?: CachedEmbedder;
  /**
   * Embedder the `embedding_semantic` chunker embeds sentences with, also when
   * `embed` is false (default: `embedder`). It should be the KB's cached
   * embedder: sentence vectors are then cached, and chunk vectors derived from
   * them are stored without embedding the chunks again.
   */
  chunkingEmbedder?: CachedEmbedder;
  config: KnowledgeBaseConfig;
  /** Vector collection of the knowledge base. */
  collection: string;
  onProgress?: (event: IngestProgress) => void;
  /**
   * Stops the run when aborted, checked between sources and before each batch is
   * embedded: batches already embedded are committed, sources prepared but not yet
   * embedded are left for the next run, and the summary says `stopped`.
   */
  signal?: AbortSignal;
  /** User metadata given at ingest, stored on every document of the run (see {@link withUserMetadata}). */
  userMetadata?: UserMetadata;
  /** Writes LLM context for each chunk (the KB's `chunking.contextLlm`); absent when it has none. */
  situator?: ChunkSituator;
  /**
   * Chunks and analyses sources on a worker thread while this one embeds and commits,
   * in runs of at least {@link CHUNK_WORKER_MIN_SOURCES} sources (not with
   * `embedding_semantic` chunking or LLM context); absent: everything on this thread.
   */
  chunkWorker?: ChunkWorker;
  /**
   * Called inside the transaction that writes a source's documents (a savepoint of the
   * group's transaction with the embedded store), once per source written: what it writes
   * to the same database commits or rolls back with the documents, so a record of what was
   * ingested never disagrees with the KB (durable HTTP jobs use it). A throw rolls the
   * source back and reports it as an error.
   */
  onUnitWritten?: (unit: WrittenUnit) => void;
}

/** A source as written by ingest (see {@link IngestContext.onUnitWritten}). */
export interface WrittenUnit {
  /** The source's path (an in-memory document's uri). */
  path: string;
  /** Its documents, with their chunk counts (documents without chunks are not stored). */
  documents: { uri: string; chunks: number }[];
  /** The source had documents before, which this write replaced. */
  replaced: boolean;
  /** Warnings of its documents (extraction, chunking fallback, stored without vectors). */
  warnings: IngestIssue[];
}

/**
 * Metadata a user attaches at ingest (`kl ingest --meta key=value --tag t`, HTTP upload
 * fields, `IngestOptions`): `meta` goes to the document's `meta` object, `tags` join its
 * `tags` list (front matter tags included). Filters read both (`{"customer": "acme"}`,
 * `{"tags": {"$contains": "finance"}}`) and results show them in `source.metadata` / `source.tags`.
 *
 * It sticks: a document keeps the metadata and tags given at earlier ingests until they are
 * changed, also when the file is re-ingested (changed or not) without any. A run's `meta`
 * sets those keys (a `null` value removes the key, as in JSON merge patch, RFC 7396),
 * `tags` adds tags, `untag` removes tags given earlier, and `replace` forgets everything
 * given earlier first (so `replace` alone clears it).
 */
export interface UserMetadata {
  meta?: Record<string, FilterScalar | null>;
  tags?: string[];
  untag?: string[];
  replace?: boolean;
}

/** Keys of user metadata: a letter or `_`, then letters, digits, `_` or `-` (at most 64). */
export const META_KEY = /^[A-Za-z_][A-Za-z0-9_-]{0,63}$/;

/**
 * Names that cannot be user metadata keys: the source attributes (`type`, `path`, `date`…,
 * which come from the document itself) and the metadata fields that hold user metadata.
 */
const RESERVED_META_KEYS = new Set([...SOURCE_FILTER_FIELDS, "meta", "userTags"]);

/**
 * Checks user metadata: keys are filter field names (see {@link META_KEY}) that are not
 * source attributes nor `meta`/`userTags`; values are strings, finite numbers, booleans or
 * `null` (remove the key); tags are non-empty strings.
 * @throws KnowledgeLayerError naming the key (`metadata.type: "type" is a source attribute…`).
 */
export function checkUserMetadata(metadata: UserMetadata, root = "metadata"): void {
  for (const [key, value] of Object.entries(metadata.meta ?? {})) {
    if (!META_KEY.test(key))
      throw new KnowledgeLayerError(
        `${root}.${key}: invalid key (letters, digits, "_" and "-", starting with a letter or "_", at most 64 characters)`,
      );
    if (RESERVED_META_KEYS.has(key))
      throw new KnowledgeLayerError(
        `${root}.${key}: "${key}" is ${key === "meta" || key === "userTags" ? "where user metadata is kept" : "a source attribute set from the document itself"}; choose another key${key === "tags" ? " (or use tags)" : ""}`,
      );
    if (
      !(
        value === null ||
        typeof value === "string" ||
        typeof value === "boolean" ||
        (typeof value === "number" && Number.isFinite(value))
      )
    )
      throw new KnowledgeLayerError(
        `${root}.${key}: expected a string, number, boolean or null (null removes the key)`,
      );
  }
  for (const [name, list] of [
    ["tags", metadata.tags],
    ["untag", metadata.untag],
  ] as const) {
    if (list === undefined) continue;
    if (!Array.isArray(list)) throw new KnowledgeLayerError(`${name}: expected a list of strings`);
    for (const tag of list)
      if (typeof tag !== "string" || tag.trim() === "")
        throw new KnowledgeLayerError(`${name}: expected non-empty strings, got ${JSON.stringify(tag)}`);
  }
}

/**
 * A `key=value` metadata value (`kl ingest --meta`) typed: `true`/`false` become booleans; a decimal number written plainly
 * (`42`, `-3`, `0.25`: no leading zeros, exponent, `+` or spaces) becomes a number when that
 * number reads back exactly — an integer within ±(2^53 − 1), a decimal of at most 15
 * significant digits; anything else stays the string as given (`007`, `1e3`,
 * `12345678901234567890`, `1.0000000000000001`).
 */
export function typedMetaValue(raw: string): FilterScalar {
  if (raw === "true") return true;
  if (raw === "false") return false;
  const m = /^-?(0|[1-9]\d*)(?:\.(\d+))?$/.exec(raw);
  if (!m || raw === "-0") return raw;
  const n = Number(raw);
  if (m[2] === undefined) return Number.isSafeInteger(n) ? n : raw;
  const digits = `${m[1] === "0" ? "" : m[1]}${m[2]}`.replace(/^0+/, "").replace(/0+$/, "");
  return digits.length <= 15 ? n : raw;
}

/** The user metadata a document carries: its `meta` keys and the tags given at ingest. */
export interface StoredUserMetadata {
  meta: Record<string, FilterScalar>;
  tags: string[];
}

/** `stored` with a run's changes applied (see {@link UserMetadata}). */
export function applyUserMetadata(
  stored: StoredUserMetadata | undefined,
  run: UserMetadata | undefined,
): StoredUserMetadata {
  const base = run?.replace || !stored ? { meta: {}, tags: [] } : stored;
  const meta: Record<string, FilterScalar> = { ...base.meta };
  for (const [key, value] of Object.entries(run?.meta ?? {})) {
    if (value === null) delete meta[key];
    else meta[key] = value;
  }
  const drop = new Set(run?.untag ?? []);
  const tags = [...new Set([...base.tags, ...(run?.tags ?? [])])].filter((t) => !drop.has(t));
  return { meta, tags };
}

/**
 * The user metadata stored on a document (see {@link withUserMetadata}). A document written
 * before user tags were kept apart (no `userTags`) gets its tags less the ones its own
 * content gives (`ownTags`, and the tags of its stored front matter).
 */
export function storedUserMetadata(
  metadata: DocumentMetadata,
  ownTags: readonly string[] = [],
): StoredUserMetadata {
  const meta: Record<string, FilterScalar> = {};
  if (metadata.meta !== null && typeof metadata.meta === "object" && !Array.isArray(metadata.meta))
    for (const [k, v] of Object.entries(metadata.meta as Record<string, unknown>))
      if (typeof v === "string" || typeof v === "boolean" || (typeof v === "number" && Number.isFinite(v)))
        meta[k] = v;
  const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((t) => typeof t === "string") : []);
  if (Array.isArray(metadata.userTags)) return { meta, tags: strings(metadata.userTags) };
  const fm = metadata.frontMatter;
  const own = new Set([
    ...ownTags,
    ...(fm !== null && typeof fm === "object" && !Array.isArray(fm)
      ? (frontMatterTags(fm as Record<string, unknown>) ?? [])
      : []),
  ]);
  return { meta, tags: strings(metadata.tags).filter((t) => !own.has(t)) };
}

/**
 * A document with user metadata merged in: `meta` over its own `meta`, the tags added to
 * its own `tags`, and the user's tags kept apart in `userTags` (so a later ingest knows
 * which tags came from the user, whatever the file's own tags become); `userTags` is
 * written whenever the document has tags.
 */
export function withUserMetadata(
  doc: ExtractedDocument,
  user: StoredUserMetadata | UserMetadata,
): ExtractedDocument {
  const metadata = { ...doc.metadata };
  const meta = Object.fromEntries(
    Object.entries(user.meta ?? {}).filter((e): e is [string, FilterScalar] => e[1] !== null),
  );
  if (Object.keys(meta).length > 0) {
    const own = metadata.meta !== null && typeof metadata.meta === "object" ? (metadata.meta as object) : {};
    metadata.meta = { ...own, ...meta };
  }
  const userTags = user.tags ?? [];
  const own = Array.isArray(metadata.tags) ? metadata.tags.map(String) : [];
  if (userTags.length > 0) metadata.tags = [...new Set([...own, ...userTags])];
  if (userTags.length > 0 || own.length > 0) metadata.userTags = [...userTags];
  return { ...doc, metadata };
}

/**
 * The content hash a unit is stored with: its content's, mixed with the user metadata it
 * carries (sorted, so the order keys were given in does not matter), so that changed user
 * metadata re-ingests an unchanged file and unchanged metadata does not.
 */
function unitHash(contentHash: string, user: StoredUserMetadata): string {
  if (Object.keys(user.meta).length === 0 && user.tags.length === 0) return contentHash;
  const meta = Object.fromEntries(Object.entries(user.meta).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  const extra = JSON.stringify({ meta, tags: [...user.tags].sort() });
  return createHash("sha256").update(contentHash).update(extra).digest("hex");
}

/** One unit of ingest: a file (or Slack export, or in-memory document) and the documents it yields. */
export interface SourceUnit {
  /** Path (or URI for in-memory documents) that identifies the unit; its documents are replaced together. */
  path: string;
  type?: SourceType;
  /** SHA-256 of the raw content. */
  contentHash: string;
  /** Produces the unit's documents (extraction). May throw; the error is reported for `path`. */
  load: () => Promise<ExtractedDocument[]>;
}

interface PreparedUnit {
  unit: SourceUnit;
  /** The unit had documents before this run. */
  replaces: boolean;
  /** Per document: its chunks and, when chunked on the worker, their BM25 analyses. */
  docs: { doc: ExtractedDocument; chunks: Chunk[]; analyzed?: AnalyzedChunk[] }[];
  /** Warnings reported for the unit's documents (also in the run's summary). */
  warnings: IngestIssue[];
  vectors?: (Float32Array | undefined)[];
  /**
   * Per chunk (as `vectors`): the vector is the embedder's for the chunk's text, so the
   * embedding cache may point at its stored copy (false for reused sentence means).
   */
  embedded?: boolean[];
}

/** Fingerprint of everything that determines a document's chunks and vectors. */
export function pipelineHash(config: KnowledgeBaseConfig): string {
  const parts = {
    v: PIPELINE_VERSION,
    extraction: config.extraction ?? {},
    chunking: chunkingIdentity(config.chunking),
    embedding: embeddingIdentity(config.embedding),
    analyzer: config.retrieval.analyzer,
  };
  return createHash("sha256").update(JSON.stringify(parts)).digest("hex").slice(0, 16);
}

/** The chunking settings that change chunks: all of them but the context LLM's API key. */
export function chunkingIdentity(chunking: KnowledgeBaseConfig["chunking"]): Record<string, unknown> {
  if (!chunking.contextLlm) return { ...chunking };
  const { apiKey: _k, ...llm } = chunking.contextLlm;
  return { ...chunking, contextLlm: llm };
}

/**
 * The embedding settings that change vectors: without the API key, batch size,
 * timeouts, retries, worker and thread counts and the bundled model's runtime
 * (onnxruntime and TF.js give the same vectors) and the wire encoding (float or base64
 * carry the same float32 values), so rotating a key or tuning
 * throughput does not re-ingest a KB.
 */
export function embeddingIdentity(embedding: KnowledgeBaseConfig["embedding"]): Record<string, unknown> {
  const {
    apiKey: _k,
    batchSize: _b,
    timeoutMs: _t,
    maxRetries: _r,
    workers: _w,
    threads: _th,
    runtime: _rt,
    encodingFormat: _ef,
    ...rest
  } = embedding as unknown as Record<string, unknown>;
  return rest;
}

/**
 * Hashes a file, or every file under a folder (relative path + content, sorted),
 * with SHA-256. @throws when the path cannot be read.
 */
export async function hashPath(path: string): Promise<string> {
  const hash = createHash("sha256");
  const info = await stat(path);
  if (!info.isDirectory()) {
    hash.update(await readFile(path));
    return hash.digest("hex");
  }
  const walk = async (dir: string, rel: string): Promise<void> => {
    // Code-unit order, not localeCompare: the hash must not depend on the host's locale.
    const entries = (await readdir(dir, { withFileTypes: true })).sort((a, b) =>
      a.name < b.name ? -1 : a.name > b.name ? 1 : 0,
    );
    for (const entry of entries) {
      const full = join(dir, entry.name);
      const relPath = `${rel}/${entry.name}`;
      if (entry.isDirectory()) await walk(full, relPath);
      else if (entry.isFile()) {
        hash.update(`${relPath}\0`);
        hash.update(await readFile(full));
        hash.update("\0");
      }
    }
  };
  await walk(path, "");
  return hash.digest("hex");
}

/**
 * Ingests files and folders: discovers sources, skips unchanged ones (same
 * content hash and pipeline), extracts, chunks, embeds (through the cache) and
 * replaces each source's documents in one SQLite transaction, so an interrupted
 * run leaves every source either fully old or fully new. A source that fails
 * is reported in `errors` and the run continues.
 *
 * With `embedding_semantic` chunking, sentences are embedded while chunking
 * (through `ctx.chunkingEmbedder`, the KB's cached embedder), also when `embed`
 * is false, so a keyword-only ingest yields the same chunks; a chunk that carries
 * the mean of its sentence vectors is stored with it instead of being embedded
 * again (counted in `embedded.reused`). If the embedder fails while chunking, the
 * document is cut into FIXED windows and a `warnings` entry names it.
 * @throws KnowledgeLayerError when a given path does not exist.
 * @throws ConfigError when the KB uses `embedding_semantic` and no embedder is given.
 */
export async function ingestPaths(ctx: IngestContext, paths: string[], embed = true): Promise<IngestSummary> {
  const started = Date.now();
  const { sources, skipped } = await discoverSources(paths);
  const units: SourceUnit[] = [];
  const errors: IngestIssue[] = [];
  let stopped = false;
  for (const source of sources) {
    if (ctx.signal?.aborted) {
      stopped = true;
      break;
    }
    try {
      const contentHash = await hashPath(source.path);
      units.push({
        path: source.path,
        type: source.type,
        contentHash,
        load: () => extractFile(source.path, source.type, ctx.config.extraction),
      });
    } catch (error) {
      errors.push({ path: source.path, reason: `cannot read: ${(error as Error).message}` });
    }
  }
  const summary = await ingestUnits(ctx, units, embed);
  if (stopped || summary.stopped) {
    // Stopped: the sources not reached are neither counted nor removed.
    summary.stopped = true;
    summary.errors.unshift(...errors);
    summary.files += errors.length;
    summary.durationMs = Date.now() - started;
    return summary;
  }
  // Mirror the given folders: sources no longer found there leave the KB.
  const found = new Set(sources.map((s) => s.path));
  const gone = new Set<string>();
  for (const p of paths) {
    const dir = resolve(p);
    const info = await stat(dir).catch(() => undefined);
    if (info?.isDirectory() && !found.has(dir)) {
      for (const path of ctx.catalog.sourcePathsUnder(ctx.config.name, dir + sep)) {
        if (!found.has(path)) gone.add(path);
      }
    }
  }
  for (const e of summary.errors) if (NO_CONTENT.test(e.reason)) gone.add(e.path);
  for (const s of skipped) gone.add(s.path);
  for (const path of gone) {
    if (await removeSource(ctx, path)) summary.removed.push(path);
  }
  summary.skipped.push(...skipped);
  summary.errors.unshift(...errors);
  summary.files += errors.length;
  summary.durationMs = Date.now() - started;
  return summary;
}

/** Failure reasons meaning the source now has nothing to index: its old documents leave the KB. */
const NO_CONTENT = /^(file is empty|no messages|no text content|no text layer)/;

/**
 * Ingests in-memory documents (e.g. a BEIR corpus): each document is its own
 * unit, identified by its `uri`, with the SHA-256 of its text as content hash.
 */
export async function ingestDocuments(
  ctx: IngestContext,
  docs: Iterable<ExtractedDocument>,
  embed = true,
): Promise<IngestSummary> {
  const units: SourceUnit[] = [];
  for (const doc of docs) {
    const contentHash = createHash("sha256")
      .update(doc.text)
      .update(JSON.stringify(doc.metadata))
      .digest("hex");
    units.push({ path: doc.uri, type: doc.metadata.type, contentHash, load: async () => [doc] });
  }
  return ingestUnits(ctx, units, embed);
}

/** Chunks pending embedding before a batch is flushed. */
const FLUSH_CHUNKS = 256;

/**
 * Sources an ingest run needs before it chunks on a worker thread ({@link ChunkWorker}): a
 * worker takes ~0.1–0.3 s to start, and a run of one large source gains nothing from it
 * (the calling thread would wait for the chunks).
 */
export const CHUNK_WORKER_MIN_SOURCES = 16;
/** Sources begun (loaded, sent to the chunking worker) ahead of the one being finished. */
const CHUNK_WORKER_AHEAD_SOURCES = 128;
/** Loaded text ahead (UTF-16 code units) past which no further source is begun. */
const CHUNK_WORKER_AHEAD_CHARS = 8_000_000;

/** A source begun by the ingest loop: unchanged, or being loaded and chunked. */
type BegunUnit = { unit: SourceUnit; unchanged: true } | ChangedUnit;

/** A begun source that is not unchanged. */
interface ChangedUnit {
  unit: SourceUnit;
  unchanged: false;
  /** Its documents' text (UTF-16 code units) once loaded, counted ahead until it is finished. */
  chars: number;
  work: Promise<LoadedUnit>;
}

/** A begun source once loaded (and, on the worker, chunked and analysed). */
interface LoadedUnit {
  docs: ExtractedDocument[];
  userMetadata: StoredUserMetadata;
  /** From the chunking worker; undefined when chunked on this thread. */
  chunked?: ChunkedSource;
  replaces: boolean;
}

/**
 * The KB's chunker. `embedding_semantic` gets `ctx.chunkingEmbedder` (else
 * `ctx.embedder`) and the KB's embedding batch size.
 * @throws ConfigError when `embedding_semantic` has no embedder to use.
 */
function kbChunker(ctx: IngestContext): Chunker {
  const { config } = ctx;
  if (config.chunking.strategy !== "embedding_semantic") return createChunker(config.chunking);
  const embedder = ctx.chunkingEmbedder ?? ctx.embedder;
  if (!embedder) {
    throw new ConfigError(
      `knowledge base "${config.name}" uses embedding_semantic chunking, which needs an embedder; none was given to ingest`,
    );
  }
  return createChunker(config.chunking, undefined, { embedder, batchSize: config.embedding.batchSize });
}

/**
 * The chunk's precomputed vector when it may be stored as the chunk's embedding:
 * the chunker attached one for exactly this text (no context prefix), made from
 * vectors of the same provider and model as `embedder`, of its dimension.
 */
function reusableVector(chunk: Chunk, embedder: Embedder): Float32Array | undefined {
  const e = chunk.embedding;
  if (!e || chunk.contextPrefix !== undefined || e.text !== chunk.text) return undefined;
  if (e.provider !== embedder.provider || e.modelId !== embedder.modelId) return undefined;
  return e.vector.length === embedder.dimension ? e.vector : undefined;
}

async function ingestUnits(ctx: IngestContext, units: SourceUnit[], embed: boolean): Promise<IngestSummary> {
  const started = Date.now();
  const user = ctx.userMetadata;
  const { catalog, config } = ctx;
  const kb = config.name;
  const hash = pipelineHash(config);
  const summary: IngestSummary = {
    kb,
    files: units.length,
    unchanged: 0,
    removed: [],
    added: 0,
    updated: 0,
    documents: 0,
    chunks: 0,
    skipped: [],
    errors: [],
    warnings: [],
    embedded: { computed: 0, cached: 0, reused: 0 },
    situated: { written: 0, cached: 0 },
    durationMs: 0,
  };
  if (embed && !ctx.embedder) throw new Error("ingest: embedding requested but no embedder given");
  const chunker = kbChunker(ctx);
  if (embed && ctx.embedder) {
    const dimension = await ctx.embedder.resolveDimension();
    try {
      await ctx.store.createCollection(ctx.collection, dimension, "cosine");
    } catch (error) {
      const info = await ctx.store.info(ctx.collection).catch(() => undefined);
      if (info && info.dimension !== dimension) {
        throw new KnowledgeLayerError(
          `knowledge base "${kb}": its ${ctx.store.kind} collection "${ctx.collection}" holds ${info.dimension}-d vectors, ` +
            `but ${ctx.embedder.provider}:${ctx.embedder.modelId} makes ${dimension}-d ones; ` +
            `use kl kb reembed ${kb} to move the KB to the new model`,
          { cause: error },
        );
      }
      throw error;
    }
  }
  // Sentence embeddings of embedding_semantic chunking count too, also when `embed` is false.
  const counted = ctx.embedder ?? ctx.chunkingEmbedder;
  const statsBefore = counted ? { ...counted.stats } : { hits: 0, misses: 0 };
  ctx.onProgress?.({ phase: "discovered", total: units.length });

  let pending: PreparedUnit[] = [];
  let pendingChunks = 0;
  /** Chunks made, and embedded by the model or the cache, in this run (for progress). */
  let chunkedTotal = 0;
  let embeddedChunks = 0;
  let stopped = false;
  // After the vector store fails once, the rest of the run stops embedding: its sources are
  // stored for keyword search (not embedded) and are embedded by the next ingest.
  const store: { failure?: string } = {};
  const flush = async (): Promise<void> => {
    if (pending.length === 0) return;
    if (ctx.signal?.aborted) {
      // Stopped before embedding: these sources are not committed (the next run does them).
      stopped = true;
      pending = [];
      pendingChunks = 0;
      return;
    }
    const embedNow = embed && store.failure === undefined;
    const reusedBefore = summary.embedded.reused;
    if (embedNow && ctx.embedder) {
      // Chunks that carry a usable vector (embedding_semantic) are not embedded again.
      const embedder = ctx.embedder;
      const texts: string[] = [];
      for (const p of pending) {
        p.vectors = p.docs.flatMap((d) =>
          d.chunks.map((c) => {
            const vector = reusableVector(c, embedder);
            if (vector) summary.embedded.reused++;
            else texts.push(c.text);
            return vector;
          }),
        );
        p.embedded = p.vectors.map((v) => v === undefined);
      }
      // Reused vectors count at once; the others as the embedder's batches complete.
      const base = embeddedChunks + (summary.embedded.reused - reusedBefore);
      const progress = (doneTexts: number): void =>
        ctx.onProgress?.({ phase: "embedded", chunks: base + doneTexts });
      // With the embedded store, vectors are kept once: in the store, the cache pointing at them.
      const computed =
        embedder instanceof CachedEmbedder && ctx.store instanceof SqliteVectorStore
          ? await embedder.embedTexts(texts, progress, { store: false })
          : await embedder.embedTexts(texts, progress);
      embeddedChunks = base + texts.length;
      let k = 0;
      for (const p of pending) {
        const vectors = p.vectors ?? [];
        for (let i = 0; i < vectors.length; i++) vectors[i] ??= computed[k++];
      }
    }
    for (const p of pending) {
      if (embed && !embedNow) {
        const warning = {
          path: p.unit.path,
          reason:
            "stored without vectors: the vector store failed earlier in this run; the next ingest embeds it",
        };
        summary.warnings.push(warning);
        p.warnings.push(warning);
      }
    }
    if (ctx.store instanceof SqliteVectorStore) {
      // Embedded store: the group's sources commit together, in one transaction without a
      // savepoint per source (a savepoint copies every page a source touches to a sub-journal
      // first, which at 100k chunks was most of the bytes ingest wrote). Should a source fail
      // to store, the group rolls back whole and its sources are written again one
      // transaction each, so only the failing one is left out.
      const counts = { ...summary, errors: [...summary.errors] };
      try {
        catalog.db
          .transaction(() => {
            for (const p of pending) writeUnitRows(ctx, p, hash, embedNow, counts);
          })
          .immediate();
        Object.assign(summary, counts);
      } catch {
        for (const p of pending) {
          try {
            writeUnit(ctx, p, hash, embedNow, summary);
          } catch (error) {
            summary.errors.push({ path: p.unit.path, reason: `cannot store: ${errorReason(error)}` });
          }
        }
      }
    } else {
      for (const p of pending) {
        try {
          await commitUnit(ctx, p, hash, embedNow, summary, store);
        } catch (error) {
          // The transaction rolled back: the source keeps its previous chunks, if any.
          summary.errors.push({ path: p.unit.path, reason: `cannot store: ${errorReason(error)}` });
        }
      }
    }
    pending = [];
    pendingChunks = 0;
  };

  // With many sources, a worker thread chunks and analyses the next ones while this thread
  // embeds and commits (see ChunkWorker). Sources are begun in order — their unchanged check
  // and load run here, one load at a time — and finished in order, so the run's outcome is
  // the same as one source after another. Only chunkers that need nothing but the document
  // go to the worker, and only when no path repeats (a repeated path's check must see the
  // earlier one written).
  const worker =
    ctx.chunkWorker &&
    config.chunking.strategy !== "embedding_semantic" &&
    !ctx.situator &&
    units.length >= CHUNK_WORKER_MIN_SOURCES &&
    new Set(units.map((u) => u.path)).size === units.length
      ? ctx.chunkWorker
      : undefined;
  let previousLoad: Promise<unknown> = Promise.resolve();
  /** Text of sources loaded and not yet finished (UTF-16 code units), bounds the look-ahead. */
  let aheadChars = 0;
  /** Resolves (and is replaced) when a finished source releases its text: loads waiting on the bound wake. */
  let wake: () => void = () => undefined;
  const nextRelease = (): Promise<void> =>
    new Promise<void>((r) => {
      wake = r;
    });
  let released = nextRelease();
  const release = (chars: number): void => {
    aheadChars -= chars;
    const woken = wake;
    released = nextRelease();
    woken();
  };
  /** Set when the loop has ended (done, stopped or thrown): sources begun ahead stop short. */
  let ended = false;
  const begin = (unit: SourceUnit): BegunUnit => {
    const existing = catalog.documentsByPath(kb, unit.path);
    // User metadata sticks to a source's documents (see UserMetadata): this run's changes
    // apply over what they carry, and the unit is unchanged only if the result is too.
    const stored = existing[0] ? catalog.documentMetadata(existing[0].id) : undefined;
    const userMetadataFor = (ownTags: readonly string[]): StoredUserMetadata =>
      applyUserMetadata(stored && storedUserMetadata(stored, ownTags), user);
    const expected = unitHash(unit.contentHash, userMetadataFor([]));
    const unchanged =
      existing.length > 0 &&
      existing.every((d) => d.contentHash === expected && d.pipelineHash === hash && (d.embedded || !embed));
    if (unchanged) return { unit, unchanged: true };
    // `work` is set below, once `load` (which counts into `begun.chars`) exists.
    const begun: ChangedUnit = { unit, unchanged: false, chars: 0, work: Promise.resolve() as never };
    // One load at a time, in order, and none while the loaded text ahead is over the bound
    // (the sources before this one are loaded then, so the oldest is finished and releases).
    const load = previousLoad.then(async () => {
      while (aheadChars >= CHUNK_WORKER_AHEAD_CHARS && !ended) await released;
      if (ended) throw new Error("ingest ended before this source was loaded");
      const loaded = await unit.load();
      begun.chars = loaded.reduce((n, d) => n + d.text.length, 0);
      aheadChars += begun.chars;
      return loaded;
    });
    previousLoad = load.catch(() => undefined);
    begun.work = (async (): Promise<LoadedUnit> => {
      const loaded = await load;
      const first = loaded[0]?.metadata.tags;
      const userMetadata = userMetadataFor(Array.isArray(first) ? first.map(String) : []);
      const docs = loaded.map((d) => withUserMetadata(d, userMetadata));
      let chunked: ChunkedSource | undefined;
      if (worker && !ended) {
        try {
          chunked = await worker.prepare(config.chunking, config.retrieval.analyzer, docs);
        } catch (error) {
          // The worker failed (not a document): chunk on this thread instead.
          if (!(error instanceof ChunkWorkerFailure)) throw error;
        }
      }
      return { docs, userMetadata, chunked, replaces: existing.length > 0 };
    })();
    // Awaited by finish(); a source never finished (a stopped run) must not reject unhandled.
    begun.work.catch(() => undefined);
    return begun;
  };
  const finish = async (begun: BegunUnit): Promise<void> => {
    const { unit } = begun;
    if (begun.unchanged) {
      summary.unchanged++;
      return;
    }
    try {
      const { docs, userMetadata, chunked, replaces } = await begun.work;
      const prepared: PreparedUnit = {
        unit: { ...unit, contentHash: unitHash(unit.contentHash, userMetadata) },
        replaces,
        docs: [],
        warnings: [],
      };
      const warn = (issue: IngestIssue): void => {
        summary.warnings.push(issue);
        prepared.warnings.push(issue);
      };
      for (const [i, doc] of docs.entries()) {
        for (const warning of doc.warnings ?? []) warn({ path: doc.uri, reason: warning });
        const done = chunked?.docs[i];
        // The worker stopped at this document: its chunker threw there, as it would here.
        if (chunked && !done) throw new Error(chunked.error ?? "the chunking worker skipped this document");
        const chunks = done ? done.chunks : await chunker.chunk(doc);
        if (ctx.situator && chunks.length > 0) {
          const outcome = await ctx.situator.situate(doc, chunks, chunker.limits);
          summary.situated.written += outcome.situated - outcome.cached;
          summary.situated.cached += outcome.cached;
          if (outcome.failure !== undefined)
            warn({
              path: doc.uri,
              reason: `LLM context written for ${outcome.situated} of ${chunks.length} chunks: ${outcome.failure}`,
            });
        }
        prepared.docs.push({ doc, chunks, analyzed: done?.analyzed });
        pendingChunks += chunks.length;
        chunkedTotal += chunks.length;
        const fallback = chunks.find((c) => c.metadata.chunker === FIXED_FALLBACK_CHUNKER);
        if (fallback) {
          warn({
            path: doc.uri,
            reason: `embedding_semantic chunking fell back to fixed windows: ${String(fallback.metadata.fallbackReason)}`,
          });
        }
      }
      if (prepared.docs.every((d) => d.chunks.length === 0)) {
        summary.errors.push({ path: unit.path, reason: "no text to index (extracted text is empty)" });
      } else {
        pending.push(prepared);
      }
    } catch (error) {
      summary.errors.push({ path: unit.path, reason: errorReason(error) });
    } finally {
      release(begun.chars);
    }
    if (pendingChunks >= FLUSH_CHUNKS) await flush();
  };

  const ahead: BegunUnit[] = [];
  let next = 0;
  // Without the worker, one source at a time (begun, then finished) as before.
  const window = worker ? CHUNK_WORKER_AHEAD_SOURCES : 1;
  try {
    for (let done = 0; done < units.length; ) {
      if (ctx.signal?.aborted) {
        stopped = true;
        break;
      }
      while (next < units.length && ahead.length < window) ahead.push(begin(units[next++] as SourceUnit));
      const begun = ahead.shift() as BegunUnit;
      await finish(begun);
      done++;
      ctx.onProgress?.({
        phase: "source",
        done,
        total: units.length,
        path: begun.unit.path,
        chunks: chunkedTotal,
      });
    }
  } finally {
    ended = true;
    wake();
  }
  await flush();
  // Pending keyword postings become a segment once 2,048 have gathered, across runs (search reads them either way).
  catalog.db.transaction(() => ctx.bm25.flushIfFull(kb)).immediate();
  if (stopped) {
    summary.stopped = true;
    // Sources with an outcome: the ones not reached (or not committed) are not counted.
    summary.files = summary.added + summary.updated + summary.unchanged + summary.errors.length;
  }
  if (counted) {
    summary.embedded.computed = counted.stats.misses - statsBefore.misses;
    summary.embedded.cached = counted.stats.hits - statsBefore.hits;
  }
  summary.durationMs = Date.now() - started;
  return summary;
}

/** What deleting documents needs of an ingest context: the KB's catalog, keyword index and vector store. */
export type DocumentRemovalContext = Pick<
  IngestContext,
  "catalog" | "bm25" | "store" | "config" | "collection"
>;

/**
 * Deletes every document of a source (chunks, postings, vectors) in one transaction;
 * true if any existed. A server store's vectors are deleted after the commit.
 */
async function removeSource(ctx: IngestContext, path: string): Promise<boolean> {
  const docs = ctx.catalog.documentsByPath(ctx.config.name, path);
  if (docs.length === 0) return false;
  await removeDocuments(
    ctx,
    docs.map((d) => d.id),
  );
  return true;
}

/**
 * Deletes documents of the context's KB with their chunks, BM25 postings and vectors: the
 * one document deletion of the library (`KnowledgeLayer.deleteDocuments`, re-ingest of a
 * changed source). With the embedded store everything is one transaction; a server store's
 * vectors are deleted after the catalog commit (a failure there leaves orphan vectors,
 * which search ignores because their chunks are gone). Ids that are not documents of the
 * KB are ignored. Returns the number of documents deleted.
 */
export async function removeDocuments(ctx: DocumentRemovalContext, ids: readonly number[]): Promise<number> {
  if (ids.length === 0) return 0;
  const stale: string[] = [];
  const deleted = ctx.catalog.transaction(() => {
    const owned = ctx.catalog.documentIdsIn(ctx.config.name, ids);
    for (const id of owned) stale.push(...deleteDocument(ctx, id));
    return owned.length;
  });
  await deleteStaleVectors(ctx, stale);
  return deleted;
}

/**
 * Deletes one document's postings and rows, and its vectors when the store is the
 * embedded one. Call inside a transaction. Returns the chunk ids whose vectors a
 * server store still holds (delete them after the commit).
 */
function deleteDocument(ctx: DocumentRemovalContext, documentId: number): string[] {
  const ids = ctx.catalog.chunkIds(documentId).map(String);
  ctx.bm25.removeDocument(documentId, ctx.config.retrieval.analyzer);
  ctx.catalog.deleteDocument(documentId);
  if (ctx.store instanceof SqliteVectorStore) {
    if (ids.length > 0) ctx.store.deleteSync(ctx.collection, ids);
    return [];
  }
  return ids;
}

/**
 * Deletes vectors of chunks the catalog no longer has from a server store. A
 * failure leaves orphan vectors, which search ignores (their ids are not chunks
 * of the KB), so it is not an ingest error.
 */
async function deleteStaleVectors(
  ctx: Pick<IngestContext, "store" | "collection">,
  ids: string[],
): Promise<void> {
  if (ids.length === 0) return;
  try {
    if (await ctx.store.info(ctx.collection)) await ctx.store.delete(ctx.collection, ids);
  } catch {
    // Orphans are harmless; see above.
  }
}

/**
 * Replaces a unit's documents, chunks, postings and vectors.
 *
 * With the embedded store everything is one SQLite transaction. With a server
 * store, the catalog transaction commits first with the new documents marked as
 * not embedded, then their vectors are written, then the documents are marked
 * embedded; old vectors are deleted last. If the vector write fails, the source
 * is searchable by keyword only and is embedded again by the next ingest (which
 * sees it as not embedded); the error is reported for the source.
 */
async function commitUnit(
  ctx: IngestContext,
  prepared: PreparedUnit,
  hash: string,
  embed: boolean,
  summary: IngestSummary,
  storeState: { failure?: string } = {},
): Promise<void> {
  const { catalog, store } = ctx;
  const { stale, records, documentIds } = writeUnit(ctx, prepared, hash, embed, summary);
  if (store instanceof SqliteVectorStore) return;
  if (storeState.failure !== undefined) {
    // The store already failed in this run: keep the source for keyword search, embed it next time.
    if (records.length > 0) {
      summary.warnings.push({
        path: prepared.unit.path,
        reason:
          "stored without vectors: the vector store failed earlier in this run; the next ingest embeds it",
      });
    }
    await deleteStaleVectors(ctx, stale);
    return;
  }
  try {
    if (records.length > 0) await store.addBatch(ctx.collection, records);
    if (embed)
      catalog.db
        .transaction(() => {
          for (const id of documentIds) catalog.markEmbedded(id);
        })
        .immediate();
  } catch (error) {
    storeState.failure = errorReason(error);
    summary.errors.push({
      path: prepared.unit.path,
      reason:
        `vectors not stored in ${store.kind}: ${storeState.failure}; ` +
        "the source is searchable by keyword and is embedded again by the next ingest" +
        " (the rest of this run is stored without vectors)",
    });
  } finally {
    await deleteStaleVectors(ctx, stale);
  }
}

/**
 * The catalog part of {@link commitUnit}, in one transaction (a savepoint inside a
 * caller's): replaces the unit's documents, chunks and postings, and, with the embedded
 * store, its vectors. Counts the unit into `summary` once written. Returns what a server
 * store still has to do: the vectors to add, the stale chunk ids and the new document ids.
 */
function writeUnit(
  ctx: IngestContext,
  prepared: PreparedUnit,
  hash: string,
  embed: boolean,
  summary: IngestSummary,
): { stale: string[]; records: VectorRecord[]; documentIds: number[] } {
  const counts = { ...summary, errors: [...summary.errors] };
  const out = ctx.catalog.db.transaction(() => writeUnitRows(ctx, prepared, hash, embed, counts)).immediate();
  // Counted once the catalog transaction has committed.
  Object.assign(summary, counts);
  return out;
}

/**
 * The rows of {@link writeUnit}, inside the caller's transaction: replaces the unit's
 * documents, chunks and postings (and, with the embedded store, its vectors), and counts
 * the unit into `summary` (which the caller keeps only if the transaction commits).
 */
function writeUnitRows(
  ctx: IngestContext,
  prepared: PreparedUnit,
  hash: string,
  embed: boolean,
  summary: IngestSummary,
): { stale: string[]; records: VectorRecord[]; documentIds: number[] } {
  const { catalog, bm25, store, collection, config } = ctx;
  const kb = config.name;
  const inTransaction = store instanceof SqliteVectorStore ? store : undefined;
  const stale: string[] = [];
  const records: VectorRecord[] = [];
  const documentIds: number[] = [];
  // A document keeps its id while it stays in the KB: a replaced document (same uri)
  // gets its old id back. Chunk ids are always new (vectors are stored under them).
  const ids = new Map<string, number>();
  for (const old of catalog.documentsByPath(kb, prepared.unit.path)) {
    ids.set(old.uri, old.id);
    stale.push(...deleteDocument(ctx, old.id));
  }
  let v = 0;
  for (const { doc, chunks, analyzed: ready } of prepared.docs) {
    if (chunks.length === 0) continue;
    const documentId = catalog.insertDocument({
      id: ids.get(doc.uri),
      kb,
      uri: doc.uri,
      path: prepared.unit.path,
      type: doc.metadata.type,
      title: doc.metadata.title,
      contentHash: prepared.unit.contentHash,
      pipelineHash: hash,
      embedded: embed && inTransaction !== undefined,
      metadata: doc.metadata,
      text: doc.text,
      chunkCount: chunks.length,
    });
    documentIds.push(documentId);
    const docRecords: VectorRecord[] = [];
    const remember: [VectorRecord, string][] = [];
    for (const [i, chunk] of chunks.entries()) {
      const analyzed = ready?.[i] ?? analyzeChunk(chunk.text, config.retrieval.analyzer, doc.metadata.title);
      const chunkId = catalog.insertChunk(kb, documentId, chunk, analyzed.body, analyzed.title);
      bm25.indexAnalyzed(kb, chunkId, analyzed);
      const embedded = prepared.embedded?.[v] ?? false;
      const vector = prepared.vectors?.[v++];
      if (vector) {
        const record = {
          id: String(chunkId),
          vector,
          payload: { documentId, chunkIndex: chunk.chunkIndex, type: doc.metadata.type },
        };
        docRecords.push(record);
        if (embedded) remember.push([record, chunk.text]);
      }
    }
    if (inTransaction && docRecords.length > 0) {
      inTransaction.addBatchSync(collection, docRecords);
      if (ctx.embedder instanceof CachedEmbedder)
        for (const [record, text] of remember) ctx.embedder.rememberStored(text, collection, record.id);
    } else records.push(...docRecords);
  }
  ctx.onUnitWritten?.({
    path: prepared.unit.path,
    documents: prepared.docs
      .filter((d) => d.chunks.length > 0)
      .map((d) => ({ uri: d.doc.uri, chunks: d.chunks.length })),
    replaced: prepared.replaces,
    warnings: prepared.warnings,
  });
  const written = prepared.docs.filter((d) => d.chunks.length > 0);
  summary.documents += written.length;
  summary.chunks += written.reduce((n, d) => n + d.chunks.length, 0);
  if (prepared.replaces) summary.updated++;
  else summary.added++;
  return { stale, records, documentIds };
}

function errorReason(error: unknown): string {
  if (error instanceof ExtractionError) return error.reason;
  // Reasons are printed and sent (CLI, HTTP jobs, MCP): a store's connection string stays masked.
  return redactText(error instanceof Error ? error.message : String(error));
}
