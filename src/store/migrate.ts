import { KnowledgeLayerError } from "../errors.js";
import type { Catalog } from "./catalog.js";
import type { VectorRecord, VectorStore } from "./contract.js";

/** Progress of {@link fillCollection}: chunks handled so far out of `total`. */
export interface FillProgress {
  done: number;
  total: number;
  /** Chunks written by this run. */
  written: number;
  /** Chunks already in the target (from an interrupted earlier run), left as they are. */
  skipped: number;
}

/** A chunk of a KB's embedded documents, as {@link fillCollection} hands it to `produce`. */
export interface EmbeddedChunk {
  id: number;
  text: string;
  documentId: number;
  chunkIndex: number;
  type: string;
}

/**
 * The copy cannot be trusted: the KB changed while it ran, or the target holds a
 * different number of vectors than the KB has embedded chunks. Callers remove the
 * partial copy, so the next run starts clean.
 */
export class FillVerificationError extends KnowledgeLayerError {
  override name = "KnowledgeLayerError";
}

/** Chunks read from the catalog and written to the target per round (the stores batch by 100). */
const ROUND = 200;

/**
 * Fills `collection` of `target` with one record per chunk of the KB's embedded
 * documents, `ROUND` chunks at a time: chunks whose id the target already holds are
 * skipped, so an interrupted run resumes where it stopped; `produce` makes the
 * records of the others (copied from another store, or embedded anew). Finally
 * checks that the target holds exactly one record per chunk.
 *
 * Used by `kl kb migrate` (copy vectors without re-embedding) and `kl kb reembed`
 * (embed into a new collection with another model).
 * @throws KnowledgeLayerError when `produce` gives a record count other than asked,
 *   or the final count differs (the collection then holds records of deleted chunks,
 *   or the KB changed during the run).
 */
export async function fillCollection(args: {
  catalog: Catalog;
  kb: string;
  target: VectorStore;
  collection: string;
  produce: (chunks: EmbeddedChunk[]) => Promise<VectorRecord[]>;
  onProgress?: (progress: FillProgress) => void;
  /** The KB's data version (`Catalog.dataVersion`); a change during the run fails it. */
  version?: () => string;
}): Promise<FillProgress> {
  const { catalog, kb, target, collection, produce } = args;
  const versionBefore = args.version?.();
  const progress: FillProgress = { done: 0, total: catalog.embeddedChunkCount(kb), written: 0, skipped: 0 };
  args.onProgress?.({ ...progress });
  let after = 0;
  for (;;) {
    const chunks = catalog.embeddedChunks(kb, after, ROUND);
    if (chunks.length === 0) break;
    after = chunks[chunks.length - 1]?.id ?? after;
    const present = new Set(
      (
        await target.get(
          collection,
          chunks.map((c) => String(c.id)),
        )
      ).map((r) => r.id),
    );
    const missing = chunks.filter((c) => !present.has(String(c.id)));
    if (missing.length > 0) {
      const records = await produce(missing);
      if (records.length !== missing.length) {
        throw new KnowledgeLayerError(
          `knowledge base "${kb}": expected ${missing.length} vectors for chunks ${missing[0]?.id}…${after}, got ${records.length}`,
        );
      }
      await target.addBatch(collection, records);
    }
    progress.done += chunks.length;
    progress.written += missing.length;
    progress.skipped += chunks.length - missing.length;
    args.onProgress?.({ ...progress });
  }
  if (args.version && args.version() !== versionBefore) {
    throw new FillVerificationError(`knowledge base "${kb}" changed during the copy (an ingest ran)`);
  }
  const count = (await target.info(collection))?.count ?? 0;
  if (count !== progress.done) {
    throw new FillVerificationError(
      `knowledge base "${kb}": verification failed: collection "${collection}" holds ${count} vectors, the KB has ${progress.done} embedded chunks`,
    );
  }
  return progress;
}

/** The payload stored with a chunk's vector (the same at ingest, migrate and reembed). */
export function chunkPayload(
  chunk: Pick<EmbeddedChunk, "documentId" | "chunkIndex" | "type">,
): VectorRecord["payload"] {
  return { documentId: chunk.documentId, chunkIndex: chunk.chunkIndex, type: chunk.type };
}
