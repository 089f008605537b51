/**
 * OpenAI embeddings over HTTP (`POST {baseUrl}/embeddings`).
 *
 * Wire format (OpenAI API): request `{ model, input: string[],
 * encoding_format: "float" | "base64", dimensions? }` with `Authorization:
 * Bearer`; response `{ object: "list", data: [{ object: "embedding", index,
 * embedding: number[] | string }], model, usage }` (with `base64`, each
 * embedding is the base64 of its little-endian float32 values); errors
 * `{ error: { message, type, code } }`.
 */
import { ConfigError } from "../errors.js";
import { endpointUrl } from "../http.js";
import { isOpenAiModel, OPENAI_MAX_INPUT_TOKENS, type Prefixes } from "./models.js";
import {
  envKey,
  type InputKind,
  type InputPart,
  RemoteEmbedder,
  type RemoteEmbedderOptions,
  type RemoteTraits,
} from "./remote.js";
import { fitToTokenLimit, tokenBound } from "./tokens.js";

/** Default endpoint root of OpenAI's API. */
export const OPENAI_BASE_URL = "https://api.openai.com/v1";
/** Inputs per request unless configured (OpenAI accepts up to 2,048). */
export const OPENAI_DEFAULT_BATCH_SIZE = 96;
/** OpenAI's limit on the tokens of one request, summed over its inputs. */
export const OPENAI_MAX_REQUEST_TOKENS = 300_000;

/** Options of {@link OpenAiEmbedder}. */
export interface OpenAiEmbedderOptions extends RemoteEmbedderOptions {
  /** Default {@link OPENAI_BASE_URL}. */
  baseUrl?: string;
  /** Default: the `OPENAI_API_KEY` environment variable. Required for the default `baseUrl`. */
  apiKey?: string;
  /** Over-long inputs: `mean` of token windows (default) or `truncate` to the limit. */
  longText?: "mean" | "truncate";
  /** Token budget per request. Default {@link OPENAI_MAX_REQUEST_TOKENS}. */
  maxBatchTokens?: number;
  /** How the server sends vectors, see {@link EmbeddingEncoding}. Default `float`. */
  encodingFormat?: EmbeddingEncoding;
}

/**
 * OpenAI's `encoding_format`: `float` (JSON number arrays) or `base64` (each vector the
 * base64 of its little-endian float32 values: about a quarter of the bytes, decoded without
 * building a JavaScript array per vector, which is what OpenAI's own SDKs ask for). A
 * server that ignores the field and answers with the other format is read either way.
 */
export type EmbeddingEncoding = "float" | "base64";

/** Is this host little-endian (a Float32Array's bytes are then the wire's bytes)? */
const LITTLE_ENDIAN = new Uint8Array(Float32Array.of(1).buffer)[3] === 0x3f;

/**
 * Reads one `embedding` of a response: a number array as it is, a base64 string as
 * little-endian float32 values (a Float32Array); anything else unchanged (rejected later).
 * @throws Error (message for the caller's malformed-response error) when a base64 string
 *   is not a whole number of float32 values.
 */
export function decodeEmbedding(embedding: unknown): unknown {
  if (typeof embedding !== "string") return embedding;
  const bytes = Buffer.from(embedding, "base64");
  if (bytes.length === 0 || bytes.length % 4 !== 0) {
    throw new Error(`a base64 embedding of ${bytes.length} bytes is not float32 values`);
  }
  const out = new Float32Array(bytes.length / 4);
  if (LITTLE_ENDIAN) new Uint8Array(out.buffer).set(bytes);
  else for (let i = 0; i < out.length; i++) out[i] = bytes.readFloatLE(i * 4);
  return out;
}

/** How a subclass (OpenAI-compatible servers) differs from OpenAI itself. */
export interface OpenAiFlavour {
  traits: Partial<RemoteTraits> & { provider: string };
  /** Input limit in cl100k_base tokens, or undefined for none. */
  maxInputTokens: number | undefined;
  /** Send the configured dimension as `dimensions`. */
  sendDimensions: boolean;
  prefixes?: Prefixes;
}

interface EmbeddingsResponse {
  data?: unknown;
}

/**
 * Embeds with OpenAI's embedding models (`text-embedding-3-small` 1536-d,
 * `text-embedding-3-large` 3072-d, `text-embedding-ada-002` 1536-d).
 *
 * - Batching: up to `batchSize` (default 96) inputs and at most
 *   `maxBatchTokens` (default 300,000) tokens per request, one request at a
 *   time, in order.
 * - Long inputs: the limit is 8,191 tokens per input (counted locally with
 *   cl100k_base, the models' encoding). A longer text is, with `longText:
 *   "mean"` (default), cut into ⌈n/8191⌉ near-equal token windows that are
 *   embedded separately and averaged weighted by their token counts, then
 *   re-normalised (the approach of OpenAI's cookbook "Embedding texts that are
 *   longer than the model's maximum context length"), so the whole text
 *   counts; with `truncate`, only its first 8,191 tokens are embedded. Either
 *   way no request is rejected for length and nothing is logged.
 * - `dimension`: sent as `dimensions` for `text-embedding-3-*` (shortened
 *   Matryoshka vectors); every vector is checked against it.
 * - The empty string is sent as a single space (the API rejects empty inputs).
 * - Vectors are re-normalised to unit length (OpenAI's already are, up to float rounding).
 * - Errors: {@link EmbeddingError} with the HTTP status and `error.message`
 *   for 4xx answers (bad key, unknown model); after `maxRetries` retries for
 *   429/5xx/timeouts (honouring `Retry-After`); for malformed responses
 *   (missing `data`, indices missing or repeated, non-numeric vectors) and
 *   vectors of the wrong dimension.
 */
export class OpenAiEmbedder extends RemoteEmbedder {
  private readonly url: string;
  private readonly longText: "mean" | "truncate";
  private readonly maxInputTokens: number | undefined;
  private readonly requestDimensions: number | undefined;
  private readonly encodingFormat: EmbeddingEncoding;

  /** @throws ConfigError for invalid options (see {@link RemoteEmbedder}). */
  constructor(options: OpenAiEmbedderOptions, flavour?: OpenAiFlavour) {
    const own = flavour === undefined;
    const maxBatchTokens = options.maxBatchTokens ?? OPENAI_MAX_REQUEST_TOKENS;
    const baseUrl = options.baseUrl ?? OPENAI_BASE_URL;
    const apiKey = options.apiKey ?? (own ? envKey("OPENAI_API_KEY") : undefined);
    super(
      { ...options, apiKey },
      {
        provider: "openai",
        defaultBatchSize: OPENAI_DEFAULT_BATCH_SIZE,
        maxBatchSize: 2048,
        maxBatchUnits: maxBatchTokens,
        keyRequired:
          own && options.baseUrl === undefined
            ? "set apiKey or the OPENAI_API_KEY environment variable"
            : undefined,
        ...flavour?.traits,
        prefixes: flavour?.prefixes,
      },
    );
    if (!Number.isInteger(maxBatchTokens) || maxBatchTokens < 1) {
      throw new ConfigError(
        `${this.provider} embedder: maxBatchTokens must be an integer >= 1, got ${maxBatchTokens}`,
      );
    }
    const longText = options.longText ?? "mean";
    if (longText !== "mean" && longText !== "truncate") {
      throw new ConfigError(
        `${this.provider} embedder: longText must be "mean" or "truncate", got ${String(longText)}`,
      );
    }
    this.longText = longText;
    const encodingFormat = options.encodingFormat ?? "float";
    if (encodingFormat !== "float" && encodingFormat !== "base64") {
      throw new ConfigError(
        `${this.provider} embedder: encodingFormat must be "float" or "base64", got ${String(encodingFormat)}`,
      );
    }
    this.encodingFormat = encodingFormat;
    this.url = endpointUrl(baseUrl, "/embeddings");
    this.maxInputTokens = flavour ? flavour.maxInputTokens : OPENAI_MAX_INPUT_TOKENS;
    const send = flavour ? flavour.sendDimensions : /^text-embedding-3/.test(options.model);
    this.requestDimensions = send ? options.dimension : undefined;
  }

  protected override split(text: string): InputPart[] {
    if (this.maxInputTokens === undefined) return [{ text, weight: 1, units: tokenBound(text) }];
    return fitToTokenLimit(text, this.maxInputTokens, this.longText).map((w) => ({
      text: w.text,
      weight: w.tokens,
      units: w.tokens,
    }));
  }

  protected async request(texts: string[], _kind: InputKind): Promise<unknown[]> {
    const body: Record<string, unknown> = {
      model: this.modelId,
      input: texts,
      encoding_format: this.encodingFormat,
    };
    if (this.requestDimensions !== undefined) body.dimensions = this.requestDimensions;
    const response = (await this.post(this.url, body)) as EmbeddingsResponse | null;
    const data = response?.data;
    const bad = (why: string) => this.error(`malformed response from ${this.url}: ${why}`);
    if (!Array.isArray(data)) throw bad("no data array");
    if (data.length !== texts.length) throw bad(`expected ${texts.length} embeddings, got ${data.length}`);
    const out = new Array<unknown>(texts.length).fill(undefined);
    data.forEach((item: unknown, position) => {
      const entry = item as { index?: unknown; embedding?: unknown } | null;
      const index = entry?.index ?? position;
      if (typeof index !== "number" || !Number.isInteger(index) || index < 0 || index >= texts.length) {
        throw bad(`embedding index ${JSON.stringify(index)} is out of range`);
      }
      if (out[index] !== undefined) throw bad(`embedding index ${index} appears twice`);
      try {
        out[index] = decodeEmbedding(entry?.embedding) ?? null;
      } catch (error) {
        throw bad((error as Error).message);
      }
    });
    return out;
  }
}

/** A `dimension`-less model name is a known OpenAI one: used by the compatible flavour for input limits. */
export function openAiInputLimit(model: string): number | undefined {
  return isOpenAiModel(model) ? OPENAI_MAX_INPUT_TOKENS : undefined;
}
