/**
 * The reranker seam: builds a {@link Reranker} from configuration.
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

import type { Embedder } from "../embed/contract.js";
import { createEmbedder } from "../embed/index.js";
import { ConfigError } from "../errors.js";
import { HTTP_SCHEMES, urlProblem } from "../http.js";
import { CohereReranker } from "./cohere.js";
import type { Reranker } from "./contract.js";
import { CROSS_ENCODER_DTYPES, type CrossEncoderDtype, CrossEncoderReranker } from "./cross-encoder.js";
import { LlmReranker } from "./llm.js";
import { NoneReranker } from "./none.js";
import { SentenceMaxSimReranker } from "./sentence-max-sim.js";

export { CohereReranker, type CohereRerankerOptions } from "./cohere.js";
export type { Reranker, RerankOptions, RerankScale, RerankScore } from "./contract.js";
export { RerankError } from "./contract.js";
export { type CrossEncoderOptions, CrossEncoderReranker } from "./cross-encoder.js";
export { LlmReranker, type LlmRerankerOptions } from "./llm.js";
export { NoneReranker } from "./none.js";
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

/** Everything {@link createReranker} can use besides the configuration. */
export interface RerankerDeps {
  /** Embedder of `sentence-max-sim`; default the bundled USE-lite model. */
  embedder?: Embedder;
}

const TYPES = ["auto", "none", "sentence-max-sim", "cross-encoder", "cohere", "llm"] as const;

function fail(field: string, problem: string): never {
  throw new ConfigError(`reranker.${field} ${problem}`);
}

function requireString(config: Record<string, unknown>, field: string): string {
  const v = config[field];
  if (typeof v !== "string" || v.trim() === "")
    fail(field, `must be a non-empty string, got ${JSON.stringify(v)}`);
  return v;
}

function optionalString(config: Record<string, unknown>, field: string): string | undefined {
  const v = config[field];
  if (v === undefined) return undefined;
  if (typeof v !== "string") fail(field, `must be a string, got ${JSON.stringify(v)}`);
  return v;
}

function optionalInt(config: Record<string, unknown>, field: string, min: number): number | undefined {
  const v = config[field];
  if (v === undefined) return undefined;
  if (typeof v !== "number" || !Number.isInteger(v) || v < min) {
    fail(field, `must be an integer ≥ ${min}, got ${JSON.stringify(v)}`);
  }
  return v;
}

function optionalUrl(config: Record<string, unknown>, field: string): string | undefined {
  const v = optionalString(config, field);
  if (v === undefined) return undefined;
  const problem = urlProblem(v, { schemes: HTTP_SCHEMES, credentials: false });
  if (problem !== undefined) fail(field, problem);
  return v;
}

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
  const c = config as Record<string, unknown>;
  switch (config.type) {
    case "auto":
    case "none":
      return new NoneReranker();
    case "sentence-max-sim": {
      const w = c.passageWeight;
      if (w !== undefined && (typeof w !== "number" || !(w >= 0 && w <= 1))) {
        fail("passageWeight", `must be a number in [0, 1], got ${JSON.stringify(w)}`);
      }
      const maxSentences = optionalInt(c, "maxSentences", 1);
      const embedder =
        deps.embedder ?? createEmbedder({ provider: "bundled", model: "use-lite", batchSize: 32 });
      return new SentenceMaxSimReranker(embedder, { passageWeight: w as number | undefined, maxSentences });
    }
    case "cross-encoder": {
      const model = requireString(c, "model");
      const batchSize = optionalInt(c, "batchSize", 1);
      const maxLength = optionalInt(c, "maxLength", 4);
      const threads = optionalInt(c, "threads", 1);
      const dtype = optionalString(c, "dtype");
      if (dtype !== undefined && !Object.hasOwn(CROSS_ENCODER_DTYPES, dtype)) {
        fail(
          "dtype",
          `must be one of ${Object.keys(CROSS_ENCODER_DTYPES).join(", ")}, got ${JSON.stringify(dtype)}`,
        );
      }
      return new CrossEncoderReranker({
        model,
        batchSize,
        maxLength,
        threads,
        dtype: dtype as CrossEncoderDtype | undefined,
      });
    }
    case "cohere": {
      const model = requireString(c, "model");
      const baseUrl = optionalUrl(c, "baseUrl");
      const apiKey = optionalString(c, "apiKey") ?? process.env.CO_API_KEY;
      const timeoutMs = optionalInt(c, "timeoutMs", 1);
      const maxRetries = optionalInt(c, "maxRetries", 0);
      if (!apiKey && (baseUrl === undefined || /(^|\.)cohere\.(com|ai)$/.test(new URL(baseUrl).hostname))) {
        fail("apiKey", "is required for the Cohere API (or set the CO_API_KEY environment variable)");
      }
      return new CohereReranker({ model, apiKey, baseUrl, timeoutMs, maxRetries });
    }
    case "llm": {
      const model = requireString(c, "model");
      if (c.baseUrl === undefined) fail("baseUrl", "is required (an OpenAI-compatible server root)");
      const baseUrl = optionalUrl(c, "baseUrl") as string;
      const apiKey = optionalString(c, "apiKey");
      const windowSize = optionalInt(c, "windowSize", 2);
      const timeoutMs = optionalInt(c, "timeoutMs", 1);
      const maxRetries = optionalInt(c, "maxRetries", 0);
      return new LlmReranker({ model, baseUrl, apiKey, windowSize, timeoutMs, maxRetries });
    }
    default:
      throw new ConfigError(
        `reranker.type must be one of ${TYPES.join(", ")}, got ${JSON.stringify((config as { type?: unknown }).type)}`,
      );
  }
}
