/**
 * The registry of rerankers: each reranker's settings schema (see `settings.ts`) and
 * how to build it from a `retrieval.reranker` config, validating every field first. A
 * new reranker is its implementation file (of the `Reranker` contract, run through
 * `test/conformance/reranker.ts`; its config joins `RerankerConfig` in ./index.ts and
 * ../config.ts) and one entry here; the `reranker.type` values, the required settings,
 * the CLI's `--reranker` choices, the HTTP API's schema and the offline rerankers a
 * server allows follow from it.
 */
import type { Embedder } from "../embed/contract.js";
import { createEmbedder } from "../embed/index.js";
import { ConfigError } from "../errors.js";
import { HTTP_SCHEMES, urlProblem } from "../http.js";
import { type ImplementationSchema, registry, type Settings } from "../settings.js";
import { CohereReranker } from "./cohere.js";
import type { Reranker } from "./contract.js";
import { CROSS_ENCODER_DTYPES, type CrossEncoderDtype, CrossEncoderReranker } from "./cross-encoder.js";
import { LlmReranker } from "./llm.js";
import { NoneReranker } from "./none.js";
import { SentenceMaxSimReranker } from "./sentence-max-sim.js";

/** Everything `createReranker` can use besides the configuration. */
export interface RerankerDeps {
  /** Embedder of `sentence-max-sim`; default the bundled USE-lite model. */
  embedder?: Embedder;
}

/** A reranker of the registry. */
export interface RerankerImplementation extends ImplementationSchema {
  /**
   * Builds the reranker of `config` (its `type` is this one), validating every field.
   * @throws ConfigError naming the field (`reranker.model must be a non-empty string, …`).
   */
  create(config: Record<string, unknown>, deps: RerankerDeps): Reranker;
}

/** Transport settings of the remote rerankers (see http.ts). */
const remote: Settings = {
  timeoutMs: {
    type: "integer",
    minimum: 1,
    description: "timeout per request attempt, in ms (default 30000)",
  },
  maxRetries: {
    type: "integer",
    minimum: 0,
    description: "retries on 408/429/5xx, timeouts and network errors (default 3)",
  },
};

/** The rerankers, by `retrieval.reranker.type`. */
export const RERANKERS = registry<RerankerImplementation>()({
  auto: {
    summary: "the best reranker available offline; with the bundled model none beats hybrid, so none",
    offline: true,
    settings: {},
    create: () => new NoneReranker(),
  },
  none: {
    summary: "keeps the fused order",
    offline: true,
    settings: {},
    create: () => new NoneReranker(),
  },
  "sentence-max-sim": {
    summary: "the KB's embedder (offline with the bundled model): best sentence cosine",
    offline: true,
    settings: {
      passageWeight: {
        type: "number",
        minimum: 0,
        maximum: 1,
        description: "weight of the whole-passage cosine, in [0, 1] (default 0.5)",
      },
      maxSentences: {
        type: "integer",
        minimum: 1,
        description: "sentences embedded per passage, at most (default 64)",
      },
    },
    create: (c, deps) => {
      const w = c.passageWeight;
      if (w !== undefined && (typeof w !== "number" || !(w >= 0 && w <= 1))) {
        fail("passageWeight", `must be a number in [0, 1], got ${JSON.stringify(w)}`);
      }
      const maxSentences = optionalInt(c, "maxSentences", 1);
      const embedder =
        deps.embedder ?? createEmbedder({ provider: "bundled", model: "use-lite", batchSize: 32 });
      return new SentenceMaxSimReranker(embedder, { passageWeight: w as number | undefined, maxSentences });
    },
  },
  "cross-encoder": {
    summary: "a local ONNX cross-encoder (model folder, or Hugging Face id with internet)",
    settings: {
      model: { type: "string", required: true, description: "model folder or Hugging Face id" },
      batchSize: { type: "integer", minimum: 1, description: "pairs per model call (default 16)" },
      maxLength: { type: "integer", minimum: 4, description: "token budget per (query, passage) pair" },
      dtype: {
        type: "string",
        enum: Object.keys(CROSS_ENCODER_DTYPES),
        description: "weight file (default fp32)",
      },
      threads: { type: "integer", minimum: 1, description: "onnxruntime intra-op threads" },
    },
    create: (c) => {
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
    },
  },
  cohere: {
    summary: "Cohere Rerank API v2 (key from $CO_API_KEY)",
    settings: {
      model: { type: "string", required: true, description: "e.g. rerank-v3.5" },
      apiKey: { type: "string", secret: true, description: "API key (default $CO_API_KEY)" },
      baseUrl: {
        type: "string",
        schemes: HTTP_SCHEMES,
        description: "server root (default https://api.cohere.com)",
      },
      ...remote,
    },
    create: (c) => {
      const model = requireString(c, "model");
      const baseUrl = optionalUrl(c, "baseUrl");
      const apiKey = optionalString(c, "apiKey") ?? process.env.CO_API_KEY;
      const timeoutMs = optionalInt(c, "timeoutMs", 1);
      const maxRetries = optionalInt(c, "maxRetries", 0);
      if (!apiKey && (baseUrl === undefined || /(^|\.)cohere\.(com|ai)$/.test(new URL(baseUrl).hostname))) {
        fail("apiKey", "is required for the Cohere API (or set the CO_API_KEY environment variable)");
      }
      return new CohereReranker({ model, apiKey, baseUrl, timeoutMs, maxRetries });
    },
  },
  llm: {
    summary: "listwise ranking by an OpenAI-compatible chat model",
    settings: {
      model: { type: "string", required: true, description: "chat model, e.g. gpt-4o-mini" },
      baseUrl: {
        type: "string",
        required: true,
        schemes: HTTP_SCHEMES,
        description: "OpenAI-compatible server root (…/v1/chat/completions is appended)",
      },
      apiKey: { type: "string", secret: true, description: "API key" },
      windowSize: { type: "integer", minimum: 2, description: "passages per call (default 20)" },
      ...remote,
    },
    create: (c) => {
      const model = requireString(c, "model");
      if (c.baseUrl === undefined) fail("baseUrl", "is required (an OpenAI-compatible server root)");
      const baseUrl = optionalUrl(c, "baseUrl") as string;
      const apiKey = optionalString(c, "apiKey");
      const windowSize = optionalInt(c, "windowSize", 2);
      const timeoutMs = optionalInt(c, "timeoutMs", 1);
      const maxRetries = optionalInt(c, "maxRetries", 0);
      return new LlmReranker({ model, baseUrl, apiKey, windowSize, timeoutMs, maxRetries });
    },
  },
});

/** A `reranker.type`: a name of {@link RERANKERS}. */
export type RerankerType = keyof typeof RERANKERS;

/** Every {@link RerankerType}, in registration order. */
export const RERANKER_TYPES = Object.keys(RERANKERS) as readonly RerankerType[];

/** The reranker of a type, or undefined for a name that is not one. */
export function rerankerOf(type: string): RerankerImplementation | undefined {
  return Object.hasOwn(RERANKERS, type) ? RERANKERS[type as RerankerType] : undefined;
}

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
