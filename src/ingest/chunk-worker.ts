/**
 * Worker thread of {@link ChunkWorker} (`chunk-client.ts`): chunks documents and analyses
 * each chunk for BM25 (tokens, term frequencies, field lengths) off the thread that writes
 * them, so an ingest of many sources keeps two cores busy: this thread prepares the next
 * sources while the calling thread embeds and commits the previous ones.
 *
 * Protocol: the client posts a `ChunkRequest`; the worker answers `{ id, source }` (per
 * document its chunks and their analyses, in order, up to a document that could not be
 * chunked: see `ChunkedSource`) or `{ id, error }` when the request itself failed (a bad
 * chunking configuration). Requests are independent; answers may come in any order.
 */
import { parentPort } from "node:worker_threads";
import type { Chunker } from "../chunk/contract.js";
import { createChunker } from "../chunk/index.js";
import { type ChunkRequest, type ChunkResponse, chunkAndAnalyze } from "./chunk-client.js";

function main(): void {
  const port = parentPort;
  if (!port) throw new Error("chunk-worker.ts runs as a worker thread");
  // One chunker per configuration (a worker serves every KB of its KnowledgeLayer).
  const chunkers = new Map<string, Chunker>();
  port.on("message", async (request: ChunkRequest) => {
    try {
      const key = JSON.stringify(request.chunking);
      let chunker = chunkers.get(key);
      if (!chunker) {
        chunker = createChunker(request.chunking);
        chunkers.set(key, chunker);
      }
      const source = await chunkAndAnalyze(chunker, request.analyzer, request.docs);
      port.postMessage({ id: request.id, source } satisfies ChunkResponse);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      port.postMessage({ id: request.id, error: message } satisfies ChunkResponse);
    }
  });
}

main();
