/**
 * The reranker seam: builds a {@link Reranker} from configuration, through the registry
 * of rerankers (./registry.ts, each with its settings schema).
 *
 * Implementations (all share the contract of contract.ts):
 * - `cross-encoder` — a local ONNX cross-encoder (ms-marco-MiniLM layout) via
 *   transformers.js; sigmoid of the relevance logit (Nogueira & Cho 2019);
 * - `cohere` — Cohere Rerank API v2; Cohere's relevance_score;
 * - `llm` — listwise ranking by an OpenAI-compatible chat model (RankGPT,
 *   Sun et al. 2023); score from rank;
 * - `sentence-max-sim` — offline, the bundled embedder; best sentence cosine;
 * - `none` (and `auto`, which currently means `none`) — keeps the input order.
 *
 * transformers.js is imported on the first cross-encoder call only, so a
 * knowledge base without a cross-encoder never loads it.
 */

import { ConfigError } from "../errors.js";
import type { Reranker } from "./contract.js";
import type { CrossEncoderDtype } from "./cross-encoder.js";
import { RERANKER_TYPES, type RerankerDeps, rerankerOf } from "./registry.js";

export { CohereReranker, type CohereRerankerOptions } from "./cohere.js";
export type { Reranker, RerankOptions, RerankScale, RerankScore } from "./contract.js";
export { RerankError } from "./contract.js";
export { type CrossEncoderOptions, CrossEncoderReranker } from "./cross-encoder.js";
export { LlmReranker, type LlmRerankerOptions } from "./llm.js";
export { NoneReranker } from "./none.js";
export {
  RERANKER_TYPES,
  RERANKERS,
  type RerankerDeps,
  type RerankerImplementation,
  type RerankerType,
} from "./registry.js";
export { type SentenceMaxSimOptions, SentenceMaxSimReranker } from "./sentence-max-sim.js";

/** Transport settings shared by the remote rerankers (see http.ts). */
interface RemoteFields {
  /** Timeout per request attempt, ms. Default 30 000. */
  timeoutMs?: number;
  /** Retries on 408/429/5xx/timeouts/network errors. Default 3. */
  maxRetries?: number;
}

/**
 * Reranker configuration. Structurally a superset of `RerankerConfig` in
 * src/config.ts, so a KB's `retrieval.reranker` can be passed as is.
 */
export type RerankerConfig =
  | { type: "auto" }
  | { type: "none" }
  | {
      type: "sentence-max-sim";
      /** Weight of the whole-passage cosine, in [0, 1]. Default 0.5. */
      passageWeight?: number;
      /** Sentences embedded per passage, at most. Default 64. */
      maxSentences?: number;
    }
  | {
      type: "cross-encoder";
      /** Local model folder, or Hugging Face id (with internet). */
      model: string;
      /** Pairs per model call. Default 16. */
      batchSize?: number;
      /** Token budget per (query, passage) pair; default the model's maximum. */
      maxLength?: number;
      /** Weight file to load. Default `fp32` (`onnx/model.onnx`). */
      dtype?: CrossEncoderDtype;
      /** onnxruntime intra-op threads. */
      threads?: number;
    }
  | ({
      type: "cohere";
      /** e.g. `rerank-v3.5`. */
      model: string;
      /** Bearer key; default the `CO_API_KEY` environment variable. Required for api.cohere.com. */
      apiKey?: string;
      /** Server root, default `https://api.cohere.com`. */
      baseUrl?: string;
    } & RemoteFields)
  | ({
      type: "llm";
      /** Chat model, e.g. `gpt-4o-mini`. */
      model: string;
      /** OpenAI-compatible server root (`…/v1/chat/completions` is appended; a trailing `/v1` is not doubled). */
      baseUrl: string;
      apiKey?: string;
      /** Passages per call (sliding window). Default 20. */
      windowSize?: number;
    } & RemoteFields);

/**
 * Builds the reranker a configuration describes. Validates every field first.
 *
 * `auto` currently resolves to `none` (the offline default of src/config.ts);
 * `none` returns a {@link NoneReranker} that keeps the input order.
 *
 * @throws ConfigError naming the field (`reranker.model must be a non-empty string, …`).
 */
export function createReranker(config: RerankerConfig, deps: RerankerDeps = {}): Reranker {
  if (config === null || typeof config !== "object") {
    throw new ConfigError(`reranker must be an object with a "type", got ${JSON.stringify(config)}`);
  }
  const impl = rerankerOf(String((config as { type?: unknown }).type));
  if (!impl) {
    throw new ConfigError(
      `reranker.type must be one of ${RERANKER_TYPES.join(", ")}, got ${JSON.stringify((config as { type?: unknown }).type)}`,
    );
  }
  return impl.create(config as Record<string, unknown>, deps);
}
