/**
 * Worker thread of {@link ChunkWorker} (`chunk-client.ts`): chunks documents and analyses
 * each chunk for BM25 (tokens, term frequencies, field lengths) off the thread that writes
 * them, so an ingest of many sources keeps two cores busy: this thread prepares the next
 * sources while the calling thread embeds and commits the previous ones.
 *
 * Protocol (`workers/request-worker.ts`): the client posts a `ChunkRequest`; the worker
 * answers `{ id, value }` with a `ChunkedSource` (per document its chunks and their
 * analyses, in order, up to a document that could not be chunked) or `{ id, error }` when
 * the request itself failed (a bad chunking configuration). Requests are independent;
 * answers may come in any order.
 */
import type { Chunker } from "../chunk/contract.js";
import { createChunker } from "../chunk/index.js";
import { serveRequests } from "../workers/request-worker.js";
import { type ChunkRequest, chunkAndAnalyze } from "./chunk-client.js";

// One chunker per configuration (a worker serves every KB of its KnowledgeLayer).
const chunkers = new Map<string, Chunker>();
serveRequests((request: ChunkRequest) => {
  const key = JSON.stringify(request.chunking);
  let chunker = chunkers.get(key);
  if (!chunker) {
    chunker = createChunker(request.chunking);
    chunkers.set(key, chunker);
  }
  return chunkAndAnalyze(chunker, request.analyzer, request.docs);
});
