/**
 * `use-lite-mix`: USE lite's first 128-token window (int8 graph, the network's
 * cheapest pass) joined with the `use-lite-static` table vector of the whole
 * text. The network reads the start of a chunk in context; the table covers
 * every word of it at almost no cost. Joined as `[α·table ; (1−α)·network]`
 * and renormalised, so the cosine of two mixed vectors is the weighted mean
 * of the two cosines (weights α², (1−α)², normalised). α = 0.4 (README "Bundled
 * embedder speed": chosen between 0.3 and 0.4 on the quality benchmarks, both
 * of which beat `use-lite` there).
 */
import type { Embedder } from "./contract.js";

/** Weight of the table part (α); the network part gets 1 − α. */
export const MIX_TABLE_WEIGHT = 0.4;

/**
 * Joins unit vectors `table` and `network` as `[α·table ; (1−α)·network]`,
 * normalised to unit length.
 */
export function mixVectors(
  table: Float32Array,
  network: Float32Array,
  alpha = MIX_TABLE_WEIGHT,
): Float32Array {
  const out = new Float32Array(table.length + network.length);
  const norm = Math.sqrt(alpha * alpha + (1 - alpha) * (1 - alpha));
  for (let d = 0; d < table.length; d++) out[d] = ((table[d] as number) * alpha) / norm;
  for (let d = 0; d < network.length; d++)
    out[table.length + d] = ((network[d] as number) * (1 - alpha)) / norm;
  return out;
}

/**
 * Offline embedder mixing a network embedder (USE lite int8, first window) and
 * a table embedder (`use-lite-static`); see the module comment.
 *
 * - Vectors: `Float32Array` of `table.dimension + network.dimension` (1024), unit length.
 * - The two parts run concurrently (the network in its worker threads, the
 *   table on the calling thread). Deterministic as its parts are.
 * - Errors are those of the parts (EmbeddingError for the table, the bundled
 *   model's load errors for the network).
 */
export class StaticMixEmbedder implements Embedder {
  /** Always `"bundled"`. */
  readonly provider = "bundled";
  readonly dimension: number;

  /**
   * @param modelId the id to report (`use-lite-mix`).
   * @param network the network part (its vectors must be unit length).
   * @param table the table part.
   */
  constructor(
    readonly modelId: string,
    private readonly network: Embedder,
    private readonly table: Embedder,
  ) {
    this.dimension = table.dimension + network.dimension;
  }

  /** Dimension is always known. */
  async resolveDimension(): Promise<number> {
    return this.dimension;
  }

  /**
   * Embeds texts, in order; `[]` for `[]` without loading anything.
   * @throws as the parts do.
   */
  async embedTexts(texts: string[]): Promise<Float32Array[]> {
    if (texts.length === 0) return [];
    const [network, table] = await Promise.all([
      this.network.embedTexts(texts),
      this.table.embedTexts(texts),
    ]);
    return texts.map((_, i) => mixVectors(table[i] as Float32Array, network[i] as Float32Array));
  }

  /** Embeds a query: the same as a document. */
  async embedQuery(text: string): Promise<Float32Array> {
    const [vector] = await this.embedTexts([text]);
    if (vector === undefined) throw new Error("mixed embedder returned no vector");
    return vector;
  }

  /** Lets go of the network part's worker threads. */
  async close(): Promise<void> {
    await this.network.close?.();
    await this.table.close?.();
  }
}
