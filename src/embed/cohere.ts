/**
 * Cohere embeddings over HTTP (`POST {baseUrl}/v2/embed`).
 *
 * Wire format (Cohere API v2): request `{ model, texts: string[],
 * input_type: "search_document" | "search_query", embedding_types: ["float"],
 * truncate, output_dimension? }` with `Authorization: Bearer`; response
 * `{ id, embeddings: { float: number[][] }, texts, meta }`; errors
 * `{ message }`.
 */
import { ConfigError } from "../errors.js";
import { endpointUrl } from "../http.js";
import { envKey, type InputKind, RemoteEmbedder, type RemoteEmbedderOptions } from "./remote.js";

/** Default endpoint of Cohere's hosted API. */
export const COHERE_BASE_URL = "https://api.cohere.com";
/** Cohere's limit on texts per embed request (also the default batch size). */
export const COHERE_MAX_BATCH = 96;

/** Options of {@link CohereEmbedder}. */
export interface CohereEmbedderOptions extends RemoteEmbedderOptions {
  /** Server root without `/v2`. Default {@link COHERE_BASE_URL}. */
  baseUrl?: string;
  /** Default: the `COHERE_API_KEY` environment variable. Required for the default `baseUrl`. */
  apiKey?: string;
  /** Server-side handling of texts over the model's limit: `END` (default), `START` or `NONE` (reject). */
  truncate?: "NONE" | "START" | "END";
}

/**
 * Embeds with Cohere's embed models (`embed-v4.0` 1536-d, `embed-english-v3.0`
 * and `embed-multilingual-v3.0` 1024-d, the `-light-v3.0` ones 384-d, …).
 *
 * - Documents are embedded with `input_type: "search_document"`, queries
 *   ({@link embedQuery}) with `"search_query"`, as Cohere's retrieval models
 *   expect; the two sides of one text differ.
 * - Batching: at most 96 texts per request (Cohere's limit; also the default).
 * - Long texts: truncated by Cohere (`truncate`, default `END`).
 * - `dimension`: sent as `output_dimension` for `embed-v4.0` (256, 512, 1024
 *   or 1536); every vector is checked against it.
 * - The empty string is sent as a single space; vectors are L2-normalised.
 * - Errors: {@link EmbeddingError} with the HTTP status and Cohere's `message`
 *   (bad key, unknown model, invalid input) for 4xx answers; after the retries
 *   for 429/5xx (honouring `Retry-After`); for malformed responses and wrong
 *   dimensions.
 */
export class CohereEmbedder extends RemoteEmbedder {
  private readonly url: string;
  private readonly truncate: "NONE" | "START" | "END";
  private readonly outputDimension: number | undefined;

  /** @throws ConfigError for a batch size over 96 or other invalid options. */
  constructor(options: CohereEmbedderOptions) {
    super(
      { ...options, apiKey: options.apiKey ?? envKey("COHERE_API_KEY") },
      {
        provider: "cohere",
        defaultBatchSize: COHERE_MAX_BATCH,
        maxBatchSize: COHERE_MAX_BATCH,
        keyRequired:
          options.baseUrl === undefined ? "set apiKey or the COHERE_API_KEY environment variable" : undefined,
      },
    );
    this.url = endpointUrl(options.baseUrl ?? COHERE_BASE_URL, "/v2/embed");
    this.truncate = options.truncate ?? "END";
    if (!["NONE", "START", "END"].includes(this.truncate)) {
      throw new ConfigError(
        `cohere embedder: truncate must be NONE, START or END, got ${String(options.truncate)}`,
      );
    }
    this.outputDimension = /^embed-v4/.test(options.model) ? options.dimension : undefined;
  }

  protected async request(texts: string[], kind: InputKind): Promise<unknown[]> {
    const body: Record<string, unknown> = {
      model: this.modelId,
      texts,
      input_type: kind === "query" ? "search_query" : "search_document",
      embedding_types: ["float"],
      truncate: this.truncate,
    };
    if (this.outputDimension !== undefined) body.output_dimension = this.outputDimension;
    const response = (await this.post(this.url, body)) as { embeddings?: unknown } | null;
    const embeddings = response?.embeddings;
    const float = Array.isArray(embeddings)
      ? embeddings // v1-style `embeddings_floats` answer from an older compatible server
      : (embeddings as { float?: unknown } | null | undefined)?.float;
    if (!Array.isArray(float)) {
      throw this.error(`malformed response from ${this.url}: no embeddings.float array`);
    }
    return float;
  }
}
