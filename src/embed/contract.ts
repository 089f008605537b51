/**
 * The embedder seam: maps texts to dense vectors.
 *
 * Vectors are `Float32Array`s of length `dimension`, L2-normalised so that the
 * dot product equals cosine similarity. The same text always maps to the same
 * vector for a given `provider` + `modelId`, which is what the embedding cache
 * keys on.
 */
export interface Embedder {
  /** Provider name, e.g. `bundled`. */
  readonly provider: string;
  /** Model identifier within the provider, e.g. `use-lite`. */
  readonly modelId: string;
  /** Vector length. */
  readonly dimension: number;
  /**
   * Embeds documents, in order. Batches internally.
   * @throws Error when the model cannot be loaded or inference fails.
   */
  embedTexts(texts: string[]): Promise<Float32Array[]>;
  /** Embeds one search query. */
  embedQuery(text: string): Promise<Float32Array>;
}
