/**
 * Chunking and BM25 analysis on a worker thread (`chunk-worker.ts`), for ingest runs of
 * many sources: the worker prepares the next sources while the calling thread embeds and
 * commits the previous ones (see `ingestUnits` in `pipeline.ts`). One worker per
 * {@link ChunkWorker}, started on first use; it holds no database connection and no
 * state a crash could lose (what it returns is written by the calling thread, in the
 * ingest's transactions).
 */
import type { Chunker } from "../chunk/contract.js";
import type { ChunkingConfig } from "../config.js";
import { KnowledgeLayerError } from "../errors.js";
import { type AnalyzedChunk, analyzeChunk } from "../retrieve/bm25.js";
import type { Analyzer } from "../retrieve/tokenizer.js";
import type { Chunk, ExtractedDocument } from "../types.js";
import { siblingModule } from "../workers/module-worker.js";
import { RequestWorker } from "../workers/request-worker.js";

/** A request: the documents of one source, with the KB's chunking and analyzer. */
export interface ChunkRequest {
  id: number;
  chunking: ChunkingConfig;
  analyzer: Analyzer;
  docs: ExtractedDocument[];
}

/** One document's chunks and, per chunk, its BM25 analysis ({@link analyzeChunk}). */
export interface ChunkedDocument {
  chunks: Chunk[];
  analyzed: AnalyzedChunk[];
}

/**
 * A source's documents chunked in order: `docs` holds those done; when one could not be
 * chunked, `error` is its chunker's message and it is `docs[docs.length]` (the rest were
 * not tried), as on the calling thread, where the chunker's throw ends the source.
 */
export interface ChunkedSource {
  docs: ChunkedDocument[];
  error?: string;
}

/**
 * Chunks and analyses the documents of a request: what the calling thread would do with
 * `createChunker(chunking)` and {@link analyzeChunk} (the same code, so the same output),
 * stopping at the first document that cannot be chunked.
 */
export async function chunkAndAnalyze(
  chunker: Chunker,
  analyzer: Analyzer,
  docs: readonly ExtractedDocument[],
): Promise<ChunkedSource> {
  const out: ChunkedDocument[] = [];
  for (const doc of docs) {
    let chunks: Chunk[];
    try {
      chunks = await chunker.chunk(doc);
    } catch (error) {
      return { docs: out, error: error instanceof Error ? error.message : String(error) };
    }
    const title = doc.metadata.title;
    out.push({ chunks, analyzed: chunks.map((c) => analyzeChunk(c.text, analyzer, title)) });
  }
  return { docs: out };
}

/** A chunking request failed because of the worker (it could not start, failed or exited), not a document. */
export class ChunkWorkerFailure extends KnowledgeLayerError {}

/**
 * Client of one chunking worker thread. The worker is unreferenced while idle, so it never
 * keeps a process alive; {@link close} ends it for good. A worker that fails (an `error`
 * event, a message that cannot be read, or it cannot start) is not started again: later
 * requests fail with {@link ChunkWorkerFailure} at once and the caller chunks on its own thread.
 */
export class ChunkWorker {
  private running: RequestWorker<Omit<ChunkRequest, "id">, ChunkedSource> | undefined;
  /** Why no worker is started any more (closed, or it failed), once so. */
  private unusable: string | undefined;

  /**
   * Chunks `docs` with `chunking` and analyses every chunk with `analyzer`, on the worker
   * (started if needed). Resolves to what `createChunker(chunking)` and
   * `analyzeChunk(text, analyzer, doc.metadata.title)` give on this thread, document by
   * document, with the chunker's message for a document that could not be chunked (see
   * {@link ChunkedSource}).
   * @throws ChunkWorkerFailure when the worker cannot be used (closed, failed, exited, or
   *   the documents cannot be sent to it): the caller may chunk on its own thread instead.
   */
  prepare(chunking: ChunkingConfig, analyzer: Analyzer, docs: ExtractedDocument[]): Promise<ChunkedSource> {
    try {
      return this.start().request({ chunking, analyzer, docs });
    } catch (error) {
      return Promise.reject(
        error instanceof ChunkWorkerFailure
          ? error
          : new ChunkWorkerFailure(`cannot start the chunking worker: ${(error as Error).message}`),
      );
    }
  }

  /**
   * Ends the worker for good: pending and later requests fail with {@link ChunkWorkerFailure}.
   * Resolves once the thread has exited.
   */
  async close(): Promise<void> {
    this.unusable ??= "the chunking worker is closed";
    const running = this.running;
    if (!running) return;
    this.running = undefined;
    await running.terminate();
  }

  private start(): RequestWorker<Omit<ChunkRequest, "id">, ChunkedSource> {
    if (this.unusable !== undefined) throw new ChunkWorkerFailure(this.unusable);
    if (this.running) return this.running;
    const running: RequestWorker<Omit<ChunkRequest, "id">, ChunkedSource> = new RequestWorker(
      siblingModule(import.meta.url, "chunk-worker"),
      {
        name: "chunking worker",
        error: (message) => new ChunkWorkerFailure(message),
        onFail: (reason) => {
          this.unusable ??= reason;
        },
        onExit: () => {
          if (this.running === running) this.running = undefined;
        },
      },
    );
    this.running = running;
    return running;
  }
}
