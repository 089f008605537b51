/**
 * Turn retrieval: what an agent looks up before answering a user message —
 * document chunks from its knowledge bases and memories from the session's other
 * threads, fetched concurrently.
 */
import { KnowledgeLayerError } from "../errors.js";
import type { KnowledgeLayer, SearchResult } from "../knowledge-layer.js";
import type { KbRetrievalOverrides } from "../retrieve/search.js";
import {
  type ConversationMemory,
  checkThreshold,
  DEFAULT_MEMORY_THRESHOLD,
  DEFAULT_MEMORY_TOP_K,
  type RecalledMemory,
} from "./memory.js";

/** Default number of document chunks per turn. */
export const DEFAULT_CHUNK_TOP_K = 4;

/** Options for {@link retrieveForTurn}. */
export interface TurnRetrievalOptions {
  /** The user's message (or a query derived from it). */
  query: string;
  /** Knowledge bases to search (default: the default KB). */
  kbs?: string[];
  sessionId: string;
  /** The current thread (excluded from memory recall). */
  threadId: string;
  /** Document chunks returned (default 4); 0 skips document retrieval. */
  chunkTopK?: number;
  /** Memories returned (default 3); 0 skips memory recall. */
  memoryTopK?: number;
  /**
   * Minimum score for both sides (default 0.45): the KB-level search score
   * (`minScore`; see `SearchResult.score`) and the memories' cosine similarity.
   * From 0 to 1.
   */
  threshold?: number;
  /**
   * When a side finds nothing at the threshold, return its best results flagged
   * `belowThreshold` (default true).
   */
  fallback?: boolean;
  /** Per-KB overrides of the document search (an agent's attachment settings: `maxResults`, `minScore`, `mode`). */
  perKb?: Record<string, KbRetrievalOverrides>;
}

/** What {@link retrieveForTurn} found. */
export interface TurnRetrieval {
  /**
   * Document chunks, best first, each attributed (`kb`, `source`, `citation`,
   * `chunk` offsets); they fit `assembleContext`'s `chunks` as they are.
   */
  chunks: SearchResult[];
  /**
   * Memories from the session's other threads, best first, attributed by
   * `sessionId`, `threadId` and `at`; they fit `assembleContext`'s `memories`.
   */
  memories: RecalledMemory[];
  /** The search's warnings (e.g. documents without vectors). */
  warnings: string[];
  /** Wall time of the whole lookup, in milliseconds. */
  tookMs: number;
}

/**
 * Runs document retrieval (`kl.search` with `minScore: threshold` and
 * `fallbackBelowThreshold: fallback`) and memory recall concurrently
 * (`Promise.all`), so a turn waits for the slower of the two, not their sum.
 * @throws KnowledgeLayerError for invalid options or an unknown KB; the first
 *   error of either side (the other side's result is discarded).
 */
export async function retrieveForTurn(
  kl: KnowledgeLayer,
  memory: ConversationMemory,
  options: TurnRetrievalOptions,
): Promise<TurnRetrieval> {
  const started = Date.now();
  const chunkTopK = options.chunkTopK ?? DEFAULT_CHUNK_TOP_K;
  const memoryTopK = options.memoryTopK ?? DEFAULT_MEMORY_TOP_K;
  const threshold = options.threshold ?? DEFAULT_MEMORY_THRESHOLD;
  const fallback = options.fallback ?? true;
  for (const [name, v] of [
    ["chunkTopK", chunkTopK],
    ["memoryTopK", memoryTopK],
  ] as const) {
    if (!(Number.isInteger(v) && v >= 0)) {
      throw new KnowledgeLayerError(`retrieveForTurn: ${name} must be an integer >= 0 (got ${String(v)})`);
    }
  }
  checkThreshold("retrieveForTurn: threshold", threshold);
  if (threshold < 0) {
    throw new KnowledgeLayerError(`retrieveForTurn: threshold must be from 0 to 1 (got ${threshold})`);
  }
  if (typeof options.query !== "string" || options.query.trim() === "") {
    throw new KnowledgeLayerError("retrieveForTurn: the query is empty");
  }
  const [search, memories] = await Promise.all([
    chunkTopK === 0
      ? undefined
      : kl.search(options.query, {
          kbs: options.kbs,
          topK: chunkTopK,
          minScore: threshold,
          fallbackBelowThreshold: fallback,
          perKb: options.perKb,
        }),
    memoryTopK === 0
      ? []
      : memory.recall({
          sessionId: options.sessionId,
          threadId: options.threadId,
          query: options.query,
          topK: memoryTopK,
          threshold,
          fallback,
        }),
  ]);
  return {
    chunks: search?.results ?? [],
    memories,
    warnings: search?.warnings ?? [],
    tookMs: Date.now() - started,
  };
}
