/**
 * The embedder seam: maps texts to dense vectors.
 *
 * Vectors are `Float32Array`s of length `dimension`, L2-normalised so that the
 * dot product equals cosine similarity. The same text always maps to the same
 * vector for a given `provider` + `modelId`, which is what the embedding cache
 * keys on.
 *
 * Every implementation honours the same contract, checked by the shared
 * conformance suite (test/conformance/embedder.ts): `embedTexts([])` is `[]`
 * without loading a model or calling a service; results come back in input
 * order whatever the batching; the empty string gets a valid vector; every
 * vector has length `dimension` and unit norm; failures reject with an
 * {@link EmbeddingError} (or another Error whose message names the provider).
 */
import { KnowledgeLayerError } from "../errors.js";

export interface Embedder {
  /** Provider name, e.g. `bundled`, `local`, `openai`, `cohere`, `huggingface`, `openai-compatible`. */
  readonly provider: string;
  /** Model identifier within the provider, e.g. `use-lite`, `text-embedding-3-small`. */
  readonly modelId: string;
  /**
   * Vector length. Known up front for the bundled model, for a configured
   * `dimension` and for well-known models; otherwise `0` until discovered
   * by {@link resolveDimension} or by the first successful embedding call,
   * after which it is the model's output length.
   */
  readonly dimension: number;
  /**
   * Embeds documents, in order. Batches internally.
   * @throws Error (an {@link EmbeddingError} for the providers of this module)
   *   when the model cannot be loaded, inference or the remote service fails,
   *   or the vectors do not have the expected dimension.
   */
  embedTexts(texts: string[]): Promise<Float32Array[]>;
  /**
   * Embeds one search query. For asymmetric models it applies the query side
   * (a query prefix/instruction, Cohere's `search_query` input type); for
   * symmetric ones it equals `embedTexts([text])[0]`.
   */
  embedQuery(text: string): Promise<Float32Array>;
  /**
   * Makes {@link dimension} known and returns it: immediately when it already
   * is, else by loading the model (local) or embedding one short probe text
   * (remote; one request). Call it before creating a vector collection for an
   * embedder whose `dimension` is `0`. Optional: embedders whose dimension is
   * always known may omit it.
   * @throws as {@link embedTexts}.
   */
  resolveDimension?(): Promise<number>;
  /** Releases resources (worker threads, model sessions). Optional; the embedder must not be used afterwards. */
  close?(): Promise<void>;
}

/**
 * An embedding provider failed: a model could not be loaded or run, a remote
 * service answered an error (HTTP status and the service's own message) or a
 * malformed response, a vector had the wrong dimension, or an option was
 * invalid. The message starts with the provider and model:
 * `openai embedder (model "text-embedding-3-small"): HTTP 401 from …: Incorrect API key provided`.
 */
export class EmbeddingError extends KnowledgeLayerError {
  /** Provider name ({@link Embedder.provider}). */
  readonly provider: string;
  /** Model id ({@link Embedder.modelId}). */
  readonly model: string;
  /** HTTP status of the failed request, for remote providers. */
  readonly status: number | undefined;

  constructor(
    provider: string,
    model: string,
    message: string,
    options?: { cause?: unknown; status?: number },
  ) {
    super(`${provider} embedder (model "${model}"): ${message}`, options);
    this.name = "EmbeddingError";
    this.provider = provider;
    this.model = model;
    this.status = options?.status;
  }
}
