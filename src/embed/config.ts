/**
 * Configuration of the embedding providers, one options type per provider,
 * discriminated by `provider`. {@link createEmbedder} (./index.ts) takes an
 * {@link EmbeddingProviderConfig}. Plain data (JSON/YAML friendly): no
 * functions, so a knowledge base's config file can hold it.
 *
 * Common fields:
 * - `model`: the model id within the provider.
 * - `batchSize`: texts per model call or HTTP request (an integer ≥ 1).
 * - `dimension`: the expected vector length. When set, every vector the
 *   provider returns must have it (else an `EmbeddingError` names provider,
 *   model, expected and actual length); OpenAI `text-embedding-3-*` and
 *   Cohere `embed-v4.0` are asked for it (`dimensions` / `output_dimension`).
 *   When omitted it is taken from a table of well-known models, from the
 *   model's `config.json` (local), or discovered by the first call.
 *
 * Remote fields: `baseUrl`, `apiKey` (never logged; defaults from the
 * environment as documented per provider), `timeoutMs` (per attempt, default
 * 30 000) and `maxRetries` (on 408/429/5xx/timeouts/network errors, default 3,
 * honouring `Retry-After`).
 */

/** Fields every provider accepts. */
export interface CommonEmbeddingConfig {
  /** Model id within the provider. */
  model: string;
  /** Texts per model call or request, an integer ≥ 1. Default per provider. */
  batchSize?: number;
  /** Expected vector length (a positive integer); see the module comment. */
  dimension?: number;
}

/** Fields of the providers reached over HTTP. */
export interface RemoteEmbeddingConfig extends CommonEmbeddingConfig {
  /** Server root; default per provider. A trailing `/` is ignored. */
  baseUrl?: string;
  /** API key, sent as `Authorization: Bearer …`. Default per provider from the environment. */
  apiKey?: string;
  /** Timeout of one request attempt, in ms. Default 30 000. */
  timeoutMs?: number;
  /** Retries after the first attempt on 408, 429, 5xx, timeouts and network errors. Default 3. */
  maxRetries?: number;
}

/** Query/document prefixes of asymmetric models (e5, bge, nomic-embed). */
export interface PrefixConfig {
  /**
   * Text put before every query (`embedQuery`). Default from the
   * model name: e5 → `"query: "`, bge (English) → `"Represent this sentence
   * for searching relevant passages: "`, nomic-embed-text → `"search_query: "`,
   * otherwise none. `""` disables it.
   */
  queryPrefix?: string;
  /**
   * Text put before every document (`embedTexts`). Default from
   * the model name: e5 → `"passage: "`, nomic-embed-text → `"search_document: "`,
   * otherwise none. `""` disables it.
   */
  documentPrefix?: string;
}

/**
 * The offline default: Universal Sentence Encoder lite shipped in an npm
 * package. `model`: `use-lite` (512-d), `use-lite-int8` (512-d, 7-bit weights),
 * `use-lite-static` (512-d table distilled from it, no network; `longText`,
 * `workers`, `runtime`, `threads` and `batchSize` do not apply) or
 * `use-lite-mix` (1024-d: `use-lite-int8`'s first window + the table; no
 * `longText`). Default `batchSize` 32.
 */
export interface BundledConfig extends CommonEmbeddingConfig {
  provider: "bundled";
  /** Over-long texts: `mean` of 128-token windows (default) or `truncate` to the first window. */
  longText?: "mean" | "truncate";
  /** Worker threads for large jobs (default 2 on ≥ 2 cores, else 0). */
  workers?: number;
  /**
   * Where the model runs: `onnx` (default, onnxruntime-node) or `tfjs` (the
   * TF.js wasm backend, the reference implementation, 1.4-3.9x slower). Both give
   * the same vectors, so changing it never re-embeds a KB.
   */
  runtime?: "onnx" | "tfjs";
  /** onnxruntime intra-op threads per worker (default 1). */
  threads?: number;
}

/**
 * A sentence-transformers style model run locally with transformers.js on
 * onnxruntime-node, in worker threads. `model` is a folder (absolute,
 * `./relative` or `~/…`, with `config.json`, `tokenizer.json`,
 * `tokenizer_config.json`, `onnx/model.onnx`) or a Hugging Face id with an
 * ONNX export (downloaded on first use when the machine is online, then
 * cached). Default model `Xenova/all-MiniLM-L6-v2` (384-d). Default
 * `batchSize` 32.
 */
export interface LocalConfig extends Omit<CommonEmbeddingConfig, "model">, PrefixConfig {
  provider: "local";
  /** Folder or Hugging Face id. Default `Xenova/all-MiniLM-L6-v2`. */
  model?: string;
  /**
   * How token vectors become one text vector: `mean` over the attention mask
   * or the `cls` token. Default: the folder's `1_Pooling/config.json` when
   * present, else `cls` for bge models and `mean` otherwise. Vectors are
   * always L2-normalised.
   */
  pooling?: "mean" | "cls";
  /**
   * Tokens per text; longer texts are truncated (as sentence-transformers
   * does, keeping the closing special token). Default: `max_seq_length` of
   * the folder's `sentence_bert_config.json` when present; capped by the
   * tokenizer's `model_max_length` and the config's `max_position_embeddings`
   * (512 when none is set).
   */
  maxLength?: number;
  /** Worker threads, each with its own model session. Default 1. */
  workers?: number;
  /** onnxruntime intra-op threads per worker. Default: onnxruntime's choice. */
  threads?: number;
  /** Weight file: `fp32` (`onnx/model.onnx`, default) or a quantised variant (`q8` → `model_quantized.onnx`, …). */
  dtype?: "fp32" | "fp16" | "q8" | "int8" | "uint8" | "q4" | "bnb4" | "q4f16";
  /**
   * May a Hugging Face id be downloaded? Default true unless the environment
   * sets `HF_HUB_OFFLINE=1` or `TRANSFORMERS_OFFLINE=1`. A folder is never
   * downloaded.
   */
  allowDownload?: boolean;
}

/**
 * OpenAI's embeddings API (`POST {baseUrl}/embeddings`). `baseUrl` default
 * `https://api.openai.com/v1`; `apiKey` default `OPENAI_API_KEY`. Default
 * `batchSize` 96, and a request carries at most `maxBatchTokens` tokens.
 */
export interface OpenAiConfig extends RemoteEmbeddingConfig {
  provider: "openai";
  /**
   * A text over the model's input limit (8,191 tokens for `text-embedding-3-*`
   * and `ada-002`, counted with cl100k_base): `mean` (default) embeds it in
   * ⌈n/limit⌉ near-equal token windows and returns their token-count-weighted
   * mean, re-normalised, so the whole text counts; `truncate` embeds the first
   * `limit` tokens only.
   */
  longText?: "mean" | "truncate";
  /** Token budget of one request (sum over its inputs). Default 300 000 (OpenAI's limit). */
  maxBatchTokens?: number;
  /**
   * `encoding_format` of the requests: `float` (default) or `base64` (float32 bytes in
   * base64: about a quarter of the response bytes, and no JavaScript array per vector).
   */
  encodingFormat?: "float" | "base64";
}

/**
 * Cohere's embed API v2 (`POST {baseUrl}/v2/embed`). `baseUrl` default
 * `https://api.cohere.com`; `apiKey` default `COHERE_API_KEY`. Documents are
 * sent as `search_document`, queries as `search_query`. `batchSize` default
 * and maximum 96.
 */
export interface CohereConfig extends RemoteEmbeddingConfig {
  provider: "cohere";
  /** Cohere's server-side handling of over-long texts: `END` (default, cut the end), `START` or `NONE` (error). */
  truncate?: "NONE" | "START" | "END";
}

/**
 * Hugging Face: a Text Embeddings Inference server (`POST {baseUrl}/embed`)
 * when `baseUrl` is set, else the hosted Inference API
 * (`https://router.huggingface.co/hf-inference/models/{model}/pipeline/feature-extraction`).
 * `apiKey` default `HF_TOKEN` (required by the hosted API, optional for TEI).
 * Default `batchSize` 32 (TEI's default `max_client_batch_size`).
 */
export interface HuggingFaceConfig extends RemoteEmbeddingConfig, PrefixConfig {
  provider: "huggingface";
}

/**
 * Any server speaking OpenAI's embeddings wire format (LiteLLM, vLLM,
 * Ollama's `/v1`, LocalAI, Azure-style gateways…). `baseUrl` is required
 * (including the version path, e.g. `http://localhost:4000/v1`); `apiKey` is
 * optional and never taken from the environment. `litellm` is an alias.
 * Default `batchSize` 96.
 */
export interface OpenAiCompatibleConfig extends RemoteEmbeddingConfig, PrefixConfig {
  provider: "openai-compatible" | "litellm";
  baseUrl: string;
  /** Send `dimension` as OpenAI's `dimensions` parameter (not every server accepts it). Default false. */
  sendDimensions?: boolean;
  /**
   * Input limit in tokens (counted with cl100k_base, an approximation for
   * non-OpenAI models); longer texts are handled as `longText` says. Default:
   * 8,191 for OpenAI model names, else no client-side limit (the server
   * truncates or rejects).
   */
  maxInputTokens?: number;
  /** As {@link OpenAiConfig.longText}. Default `mean`. */
  longText?: "mean" | "truncate";
  /** As {@link OpenAiConfig.encodingFormat}; `base64` only for servers that support it (vLLM, TEI, LiteLLM…). Default `float`. */
  encodingFormat?: "float" | "base64";
}

/** Settings of one embedding provider, discriminated by `provider`. */
export type EmbeddingProviderConfig =
  | BundledConfig
  | LocalConfig
  | OpenAiConfig
  | CohereConfig
  | HuggingFaceConfig
  | OpenAiCompatibleConfig;
