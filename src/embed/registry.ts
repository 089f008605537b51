/**
 * The registry of embedding providers: each provider's settings schema (see
 * `settings.ts`), its default model and how to build its embedder. A new provider is
 * its implementation file (of the `Embedder` contract, run through
 * `test/conformance/embedder.ts`; its options type joins `EmbeddingProviderConfig` in
 * ./config.ts) and one entry here; the `embedding.provider` values, the known
 * `embedding` keys, default models, the CLI's `--embedding-provider` choices, the HTTP
 * API's schema and the offline providers a server allows follow from it.
 */

import { type ImplementationSchema, registry, type Settings } from "../settings.js";
import { createBundledEmbedder } from "./bundled-factory.js";
import { BUNDLED_MODELS } from "./bundled-models.js";
import { CohereEmbedder } from "./cohere.js";
import type {
  BundledConfig,
  CohereConfig,
  EmbeddingProviderConfig,
  HuggingFaceConfig,
  LocalConfig,
  OpenAiCompatibleConfig,
  OpenAiConfig,
} from "./config.js";
import type { Embedder } from "./contract.js";
import { HuggingFaceEmbedder } from "./huggingface.js";
import { DEFAULT_LOCAL_MODEL, LocalEmbedder } from "./local.js";
import { OpenAiEmbedder } from "./openai.js";
import { OpenAiCompatibleEmbedder } from "./openai-compatible.js";

/** Process-level options of `createEmbedder`, not stored in KB configs. */
export interface EmbedderRuntime {
  /** Run all bundled-model inference in worker threads (default false; servers set it). */
  offThread?: boolean;
  /** Worker-pool lane of the bundled model, e.g. `"query"` to keep searches apart from ingest batches. */
  lane?: string;
}

/** An embedding provider of the registry. */
export interface EmbeddingProviderImplementation extends ImplementationSchema {
  /** Model used when a KB names the provider but no model (none: the model is required). */
  defaultModel?: string;
  /**
   * Builds the embedder of `config` (its `provider` is this one) without loading or
   * calling the model.
   * @throws ConfigError for an invalid option value.
   */
  create(config: EmbeddingProviderConfig, runtime: EmbedderRuntime): Embedder;
}

/** Settings every provider accepts besides `provider`. */
export const COMMON_EMBEDDING_SETTINGS: Settings = {
  model: { type: "string", description: "model id within the provider (default per provider)" },
  batchSize: { type: "integer", minimum: 1, description: "texts per model call or request (default 32)" },
  dimension: {
    type: "integer",
    minimum: 1,
    description: "expected vector length (sent to models that accept it; default the model's)",
  },
};

const baseUrl = {
  type: "string",
  schemes: ["http:", "https:"],
  description: "server root (default per provider)",
} as const;

const remote: Settings = {
  baseUrl,
  apiKey: {
    type: "string",
    secret: true,
    description: "API key (default per provider from the environment)",
  },
  timeoutMs: {
    type: "integer",
    minimum: 1,
    description: "timeout of one request attempt, in ms (default 30000)",
  },
  maxRetries: {
    type: "integer",
    minimum: 0,
    description: "retries on 408/429/5xx, timeouts and network errors (default 3)",
  },
};

const prefixes: Settings = {
  queryPrefix: { type: "string", description: "text put before every query (default from the model name)" },
  documentPrefix: {
    type: "string",
    description: "text put before every document (default from the model name)",
  },
};

const longText = {
  type: "string",
  enum: ["mean", "truncate"],
  description: "a text over the model's input: mean of windows (default) or truncate",
} as const;

/** OpenAI's `encoding_format` (openai, openai-compatible). */
const encodingFormat = {
  type: "string",
  enum: ["float", "base64"],
  description: "encoding_format of the requests: float (default) or base64 (a quarter of the bytes)",
} as const;

const openAiCompatible: EmbeddingProviderImplementation = {
  summary:
    "any server speaking OpenAI's embeddings wire format (LiteLLM, vLLM, Ollama /v1…); baseUrl required",
  settings: {
    ...remote,
    baseUrl: {
      ...baseUrl,
      required: true,
      description: "server root with the version path, e.g. http://localhost:4000/v1",
    },
    ...prefixes,
    sendDimensions: {
      type: "boolean",
      description: "send dimension as OpenAI's dimensions parameter (default false)",
    },
    maxInputTokens: {
      type: "integer",
      minimum: 1,
      description: "input limit in tokens (default 8191 for OpenAI model names)",
    },
    longText,
    encodingFormat,
  },
  create: (config) => {
    const { provider: _, ...options } = config as OpenAiCompatibleConfig;
    return new OpenAiCompatibleEmbedder(options);
  },
};

/** The embedding providers, by `embedding.provider`. */
export const EMBEDDING_PROVIDER_REGISTRY = registry<EmbeddingProviderImplementation>()({
  bundled: {
    summary:
      "the offline Universal Sentence Encoder lite and its variants, shipped with the package (default use-lite-mix, 1024-d)",
    offline: true,
    defaultModel: "use-lite-mix",
    settings: {
      model: {
        type: "string",
        enum: BUNDLED_MODELS,
        description: `${BUNDLED_MODELS.join(", ")} (default use-lite-mix)`,
      },
      longText,
      workers: {
        type: "integer",
        minimum: 0,
        description: "worker threads for large jobs (default 2 on 2+ cores)",
      },
      runtime: {
        type: "string",
        enum: ["onnx", "tfjs"],
        description: "onnxruntime (default) or the TF.js reference",
      },
      threads: { type: "integer", minimum: 1, description: "onnxruntime threads per worker (default 1)" },
    },
    create: (config, runtime) => createBundledEmbedder(config as BundledConfig, runtime),
  },
  local: {
    summary: "a sentence-transformers ONNX model folder (or Hugging Face id) run with transformers.js",
    defaultModel: DEFAULT_LOCAL_MODEL,
    settings: {
      model: {
        type: "string",
        description: `model folder or Hugging Face id (default ${DEFAULT_LOCAL_MODEL})`,
      },
      ...prefixes,
      pooling: {
        type: "string",
        enum: ["mean", "cls"],
        description: "token pooling (default from the folder)",
      },
      maxLength: { type: "integer", minimum: 1, description: "tokens per text (default the model's)" },
      workers: { type: "integer", minimum: 1, description: "worker threads (default 1)" },
      threads: { type: "integer", minimum: 1, description: "onnxruntime threads per worker" },
      dtype: {
        type: "string",
        enum: ["fp32", "fp16", "q8", "int8", "uint8", "q4", "bnb4", "q4f16"],
        description: "weight file (default fp32)",
      },
      allowDownload: {
        type: "boolean",
        description: "may a Hugging Face id be downloaded (default true unless offline)",
      },
    },
    create: (config) => {
      const { provider: _, ...options } = config as LocalConfig;
      return new LocalEmbedder(options);
    },
  },
  openai: {
    summary: "OpenAI's embeddings API (key from $OPENAI_API_KEY)",
    defaultModel: "text-embedding-3-small",
    settings: {
      ...remote,
      longText,
      encodingFormat,
      maxBatchTokens: {
        type: "integer",
        minimum: 1,
        description: "token budget of one request (default 300000)",
      },
    },
    create: (config) => {
      const { provider: _, ...options } = config as OpenAiConfig;
      return new OpenAiEmbedder(options);
    },
  },
  cohere: {
    summary: "Cohere's embed API v2 (key from $COHERE_API_KEY)",
    defaultModel: "embed-english-v3.0",
    settings: {
      ...remote,
      truncate: {
        type: "string",
        enum: ["NONE", "START", "END"],
        description: "server-side truncation (default END)",
      },
    },
    create: (config) => {
      const { provider: _, ...options } = config as CohereConfig;
      return new CohereEmbedder(options);
    },
  },
  huggingface: {
    summary: "a Text Embeddings Inference server (baseUrl) or the hosted Inference API (key from $HF_TOKEN)",
    defaultModel: "sentence-transformers/all-MiniLM-L6-v2",
    settings: { ...remote, ...prefixes },
    create: (config) => {
      const { provider: _, ...options } = config as HuggingFaceConfig;
      return new HuggingFaceEmbedder(options);
    },
  },
  "openai-compatible": openAiCompatible,
  litellm: { ...openAiCompatible, aliasOf: "openai-compatible" },
});

/** The provider names `embedding.provider` accepts (`litellm` is an alias of `openai-compatible`). */
export const EMBEDDING_PROVIDERS = Object.keys(
  EMBEDDING_PROVIDER_REGISTRY,
) as readonly EmbeddingProviderName[];

/** A name of {@link EMBEDDING_PROVIDER_REGISTRY}. */
export type EmbeddingProviderName = keyof typeof EMBEDDING_PROVIDER_REGISTRY;

/** The provider of a name, or undefined for a name that is not one. */
export function embeddingProviderOf(name: string): EmbeddingProviderImplementation | undefined {
  return Object.hasOwn(EMBEDDING_PROVIDER_REGISTRY, name)
    ? EMBEDDING_PROVIDER_REGISTRY[name as EmbeddingProviderName]
    : undefined;
}
