/**
 * Hugging Face embeddings over HTTP, two endpoints with the same payload:
 *
 * - Text Embeddings Inference (TEI), self-hosted or an Inference Endpoint:
 *   `POST {baseUrl}/embed` with `{ inputs: string[], normalize: true,
 *   truncate: true }` → `number[][]`; errors `{ error, error_type }` (413
 *   batch too large, 422 validation, 424 model error, 429 overloaded).
 * - The hosted Inference API through the router (when no `baseUrl`):
 *   `POST https://router.huggingface.co/hf-inference/models/{model}/pipeline/feature-extraction`
 *   with the same body → `number[][]` for sentence-embedding models; a 503
 *   `{ error: "Model … is currently loading", estimated_time: 20.0 }` while
 *   the model loads.
 */

import { endpointUrl } from "../http.js";
import { EmbeddingError } from "./contract.js";
import { resolvePrefixes } from "./models.js";
import { envKey, type InputKind, RemoteEmbedder, type RemoteEmbedderOptions } from "./remote.js";

/** Root of the hosted Inference API (hf-inference provider through the router). */
export const HF_ROUTER_URL = "https://router.huggingface.co/hf-inference/models";
/** Texts per request unless configured: TEI's default `--max-client-batch-size`. */
export const HF_DEFAULT_BATCH_SIZE = 32;

/** Options of {@link HuggingFaceEmbedder}. */
export interface HuggingFaceEmbedderOptions extends RemoteEmbedderOptions {
  /** TEI server root (the part before `/embed`). Default: the hosted Inference API. */
  baseUrl?: string;
  /** Default: the `HF_TOKEN` environment variable. Required by the hosted API, optional for TEI. */
  apiKey?: string;
  /** Query prefix; default from the model name (e5, bge, nomic-embed-text), see src/embed/models.ts. */
  queryPrefix?: string;
  /** Document prefix; default from the model name. */
  documentPrefix?: string;
}

/**
 * Reads the wait a 503 "model is loading" answer suggests: `estimated_time`
 * seconds in its JSON body. Returns ms, or undefined for any other answer.
 */
export function loadingDelayMs(status: number, text: string): number | undefined {
  if (status !== 503) return undefined;
  try {
    const t = (JSON.parse(text) as { estimated_time?: unknown }).estimated_time;
    return typeof t === "number" && Number.isFinite(t) && t >= 0 ? Math.round(t * 1000) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Embeds with a Hugging Face model served by Text Embeddings Inference
 * (`baseUrl` set) or by the hosted Inference API (no `baseUrl`).
 *
 * - Requests ask the server to normalise and to truncate over-long inputs to
 *   the model's limit (`truncate: true`); vectors are re-normalised here.
 * - A 503 while the hosted model loads is retried after its
 *   `estimated_time` (capped to `retryMaxDelayMs`, default 30 s; each wait
 *   counts against `maxRetries`, default 3); 429/5xx otherwise as usual,
 *   honouring `Retry-After`.
 * - A token-level answer (`[batch][tokens][hidden]`, from a model without a
 *   pooling layer) is mean-pooled over its tokens.
 * - Query and document prefixes (asymmetric models such as e5 and bge) are
 *   added client-side; defaults come from the model name.
 * - Batching: `batchSize` texts per request (default 32, TEI's default limit;
 *   raise it together with TEI's `--max-client-batch-size`).
 * - The empty string is sent as a single space (TEI rejects empty inputs).
 * - Errors: {@link EmbeddingError} with the HTTP status and the body's
 *   `error` for 4xx answers; after the retries; for malformed responses and
 *   wrong dimensions; without an API key for the hosted API.
 */
export class HuggingFaceEmbedder extends RemoteEmbedder {
  private readonly url: string;

  /** @throws ConfigError for invalid options. */
  constructor(options: HuggingFaceEmbedderOptions) {
    super(
      { ...options, apiKey: options.apiKey ?? envKey("HF_TOKEN") },
      {
        provider: "huggingface",
        defaultBatchSize: HF_DEFAULT_BATCH_SIZE,
        prefixes: resolvePrefixes(options.model ?? "", options),
        keyRequired:
          options.baseUrl === undefined
            ? "the hosted Inference API needs a token: set apiKey or the HF_TOKEN environment variable"
            : undefined,
      },
    );
    this.url =
      options.baseUrl === undefined
        ? `${HF_ROUTER_URL}/${options.model.split("/").map(encodeURIComponent).join("/")}/pipeline/feature-extraction`
        : endpointUrl(options.baseUrl, "/embed");
  }

  protected async request(texts: string[], _kind: InputKind): Promise<unknown[]> {
    const response = await this.post(
      this.url,
      { inputs: texts, normalize: true, truncate: true },
      { retryDelayFromBody: loadingDelayMs },
    );
    if (!Array.isArray(response)) {
      throw this.error(`malformed response from ${this.url}: expected an array of vectors`);
    }
    return response.map((item: unknown) => (isTokenMatrix(item) ? meanOfRows(item, this) : item));
  }
}

/** True for `number[][]` (token vectors of one text) rather than `number[]`. */
function isTokenMatrix(item: unknown): item is unknown[][] {
  return Array.isArray(item) && item.length > 0 && Array.isArray(item[0]);
}

/** Mean of the rows of a token matrix; throws on ragged or non-numeric rows. */
function meanOfRows(rows: unknown[][], owner: { modelId: string }): number[] {
  const width = (rows[0] as unknown[]).length;
  const sum = new Array<number>(width).fill(0);
  for (const row of rows) {
    if (!Array.isArray(row) || row.length !== width) {
      throw new EmbeddingError("huggingface", owner.modelId, "malformed response: ragged token vectors");
    }
    for (let d = 0; d < width; d++) {
      const x = row[d];
      if (typeof x !== "number") {
        throw new EmbeddingError(
          "huggingface",
          owner.modelId,
          "malformed response: non-numeric token vector",
        );
      }
      sum[d] = (sum[d] as number) + x;
    }
  }
  return sum.map((x) => x / rows.length);
}
