/**
 * Servers that speak OpenAI's embeddings wire format (`POST
 * {baseUrl}/embeddings`): LiteLLM, vLLM, Ollama's and LM Studio's `/v1`,
 * LocalAI, text-embeddings-inference's OpenAI route, gateways.
 */
import { ConfigError } from "../errors.js";
import { resolvePrefixes } from "./models.js";
import { type EmbeddingEncoding, OpenAiEmbedder, openAiInputLimit } from "./openai.js";
import type { RemoteEmbedderOptions } from "./remote.js";

/** Options of {@link OpenAiCompatibleEmbedder}. */
export interface OpenAiCompatibleEmbedderOptions extends RemoteEmbedderOptions {
  /** Endpoint root including the version path, e.g. `http://localhost:4000/v1`. Required. */
  baseUrl: string;
  /** Optional; never read from the environment (the key would go to a server of your choosing). */
  apiKey?: string;
  /** Send the configured `dimension` as `dimensions`. Default false. */
  sendDimensions?: boolean;
  /** Input limit in cl100k_base tokens. Default 8,191 for OpenAI model names, else none. */
  maxInputTokens?: number;
  /** Over-long inputs (with a limit): `mean` of token windows (default) or `truncate`. */
  longText?: "mean" | "truncate";
  /** `encoding_format` to ask for (default `float`; `base64` where the server supports it). */
  encodingFormat?: EmbeddingEncoding;
  /** Query prefix; default from the model name (e5, bge, nomic-embed-text), see src/embed/models.ts. */
  queryPrefix?: string;
  /** Document prefix; default from the model name. */
  documentPrefix?: string;
}

/**
 * Embeds through any OpenAI-compatible `/embeddings` endpoint. Same request,
 * response, batching, retry and validation rules as {@link OpenAiEmbedder},
 * with these differences: `baseUrl` is required; the API key is optional and
 * not taken from `OPENAI_API_KEY`; `dimensions` is sent only with
 * `sendDimensions`; the client-side token limit applies to OpenAI model names
 * (also behind a prefix such as `openai/text-embedding-3-small`) or when
 * `maxInputTokens` is set, else long inputs are left to the server; query and
 * document prefixes default from the model name (e5 `query: `/`passage: `,
 * bge's retrieval instruction, nomic-embed-text), since such servers often
 * host open models. Provider name `openai-compatible` (also for the
 * `litellm` alias), so the cache key does not depend on the alias.
 */
export class OpenAiCompatibleEmbedder extends OpenAiEmbedder {
  /** @throws ConfigError without `baseUrl` or with invalid options. */
  constructor(options: OpenAiCompatibleEmbedderOptions) {
    if (typeof options.baseUrl !== "string" || options.baseUrl.trim() === "") {
      throw new ConfigError(
        "openai-compatible embedder: baseUrl is required (the server's OpenAI-style root, e.g. http://localhost:4000/v1)",
      );
    }
    const limit = options.maxInputTokens ?? openAiInputLimit(options.model ?? "");
    if (limit !== undefined && (!Number.isInteger(limit) || limit < 1)) {
      throw new ConfigError(
        `openai-compatible embedder: maxInputTokens must be an integer >= 1, got ${limit}`,
      );
    }
    super(options, {
      traits: { provider: "openai-compatible", keyRequired: undefined },
      maxInputTokens: limit,
      sendDimensions: options.sendDimensions ?? false,
      prefixes: resolvePrefixes(options.model ?? "", options),
    });
  }
}
