/**
 * The reranker seam: re-scores a short list of candidate passages against a
 * query, after first-stage retrieval (BM25, vectors, hybrid) has picked them.
 *
 * Every implementation honours the same contract, checked by the shared
 * conformance suite (test/conformance/reranker.ts):
 *
 * - `rerank(query, docs)` returns one {@link RerankScore} per input document
 *   (or the first `topN` of them), where `index` is the position of the
 *   document in the input `docs` array.
 * - Results are sorted by `score` descending; equal scores are ordered by
 *   `index` ascending, so the output is deterministic.
 * - `topN`: `undefined` → all documents; `topN >= docs.length` → all;
 *   `0` → `[]`. A negative or non-integer `topN` is rejected with a
 *   {@link RerankError}.
 * - Empty `docs` → `[]` without calling the model or the remote service (and
 *   without loading a model).
 * - Duplicate texts keep their own indices; each is returned once.
 * - Scores are finite and lie in [0, 1]; what they mean depends on
 *   {@link Reranker.scale} (and is documented on each implementation).
 * - `signal`: an already-aborted signal rejects before any work; an abort
 *   during the call rejects as soon as the implementation reaches a check
 *   point (between model batches, during an HTTP request or a retry wait).
 *   The rejection is the signal's `reason` — by default a `DOMException`
 *   named `AbortError`.
 * - Any other failure (model missing, HTTP error, malformed response) rejects
 *   with a {@link RerankError} whose message starts with the reranker's name.
 */
import { KnowledgeLayerError } from "../errors.js";

/** One scored document. */
export interface RerankScore {
  /** Position of the document in the `docs` array passed to {@link Reranker.rerank}. */
  index: number;
  /** Relevance in [0, 1]; higher is more relevant. Meaning per {@link Reranker.scale}. */
  score: number;
}

/**
 * What a score means:
 * - `probability`: an estimate of P(relevant | query, passage), e.g. the
 *   sigmoid of a cross-encoder logit or a hosted reranker's relevance score.
 *   Comparable across queries, so a threshold makes (some) sense.
 * - `similarity`: a similarity mapped to [0, 1] (e.g. (cosine + 1) / 2).
 *   Meaningful within one query; thresholds are model-specific.
 * - `rank`: derived from the position in a ranking only (e.g. 1 − rank/n);
 *   carries no information beyond the order.
 */
export type RerankScale = "probability" | "similarity" | "rank";

/** Options of one {@link Reranker.rerank} call. */
export interface RerankOptions {
  /**
   * How many results to return: `undefined` → all; larger than the number of
   * documents → all; `0` → none. Must be a non-negative integer.
   */
  topN?: number;
  /** Cancels the call; the promise rejects with `signal.reason`. */
  signal?: AbortSignal;
}

/** Re-scores candidate passages for a query. See the module comment for the contract. */
export interface Reranker {
  /**
   * `method:model`, e.g. `cross-encoder:ms-marco-MiniLM-L-6-v2`,
   * `cohere:rerank-v3.5`, `llm:gpt-4o-mini`, `sentence-max-sim:use-lite`, or
   * `none`. Used in logs and error messages.
   */
  readonly name: string;
  /** What the scores mean; see {@link RerankScale}. */
  readonly scale: RerankScale;
  /**
   * Scores `docs` against `query`.
   * @returns scores sorted by score descending, ties by index ascending; at most `topN` of them.
   * @throws RerankError when the model cannot be loaded, the service fails or answers malformed data,
   *   or `topN` is invalid; the abort reason when `signal` is aborted.
   */
  rerank(query: string, docs: string[], options?: RerankOptions): Promise<RerankScore[]>;
  /**
   * Releases what the reranker holds (the cross-encoder: its worker threads
   * and the model sessions in them) and resolves once it is released.
   * Calls still running may reject. Optional: rerankers that hold nothing
   * omit it; callers use `await reranker.close?.()`. The reranker must not be
   * used afterwards.
   */
  close?(): Promise<void>;
}

/**
 * A reranker failed: the model could not be loaded or run, a remote service
 * answered an error or a malformed response, or an option was invalid.
 * The message starts with the reranker name (`cohere:rerank-v3.5: HTTP 400 …`).
 */
export class RerankError extends KnowledgeLayerError {
  /** Name of the reranker that failed ({@link Reranker.name}). */
  readonly reranker: string;
  /** HTTP status of the failed request, for remote rerankers. */
  readonly status: number | undefined;

  constructor(reranker: string, message: string, options?: { cause?: unknown; status?: number }) {
    super(`${reranker}: ${message}`, options);
    this.name = "RerankError";
    this.reranker = reranker;
    this.status = options?.status;
  }
}
