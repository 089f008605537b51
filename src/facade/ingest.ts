/**
 * The facade's side of an ingest: the ingest context of a KB (store, embedders, user
 * metadata, the job a run records its documents for) and the embedded store's index
 * brought up to date afterwards.
 */
import { DEFAULT_KB } from "../config.js";
import { checkUserMetadata, type IngestContext, type UserMetadata } from "../ingest/pipeline.js";
import type { VectorStore } from "../store/contract.js";
import { collectionOf } from "../store/index.js";
import type { FacadeParts } from "./parts.js";
import type { IngestOptions } from "./types.js";

/** The ingest context of a call's options: its KB's store and embedders, user metadata and job. */
export async function ingestContext(parts: FacadeParts, options: IngestOptions): Promise<IngestContext> {
  const userMetadata: UserMetadata = {
    meta: options.metadata,
    tags: options.tags,
    untag: options.removeTags,
    replace: options.replaceMetadata,
  };
  checkUserMetadata(userMetadata);
  const kb = await parts.getKb(options.kb ?? DEFAULT_KB);
  const embed = options.embed ?? true;
  const job = options.job;
  return {
    catalog: parts.catalog,
    bm25: parts.bm25,
    // Keyword-only ingest writes no vectors, so it goes on when the store is unreachable
    // (stale vectors it cannot delete are ignored by search).
    store: embed
      ? await parts.vectorStore(kb.config)
      : await parts.vectorStore(kb.config).catch((err: unknown) => unavailableStore(err)),
    embedder: embed ? parts.embedder(kb.config) : undefined,
    // embedding_semantic chunking embeds sentences even without chunk vectors (see IngestOptions.embed).
    chunkingEmbedder:
      kb.config.chunking.strategy === "embedding_semantic" ? parts.embedder(kb.config) : undefined,
    config: kb.config,
    collection: collectionOf(kb.config),
    onProgress: options.onProgress,
    signal: options.signal,
    userMetadata,
    situator: parts.situator(kb.config),
    chunkWorker: parts.chunkWorker,
    onUnitWritten: job
      ? (unit) =>
          parts.jobs.recordDocuments(
            job.id,
            job.file,
            unit.documents,
            unit.warnings.map((w) => ({ file: w.path, reason: w.reason })),
          )
      : undefined,
  };
}

/**
 * Brings the embedded store's approximate index up to date after an ingest, so
 * indexing is paid by the ingest rather than the next search. With the index on a
 * worker thread the update runs there while the caller goes on (the next ingest's
 * writes overlap with it; a search waits for it in the worker's queue). Best effort: a
 * search repairs the index itself.
 */
export function syncVectorIndex(parts: FacadeParts, ctx: IngestContext): void {
  if (ctx.store !== parts.store || !parts.db.open) return;
  try {
    if (parts.db.prepare("SELECT 1 FROM vec_collections WHERE name = ?").get(ctx.collection)) {
      void parts.store.syncIndex(ctx.collection).catch(() => undefined);
    }
  } catch {
    // The next search rebuilds or repairs the index.
  }
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
