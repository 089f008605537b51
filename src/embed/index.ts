import type { EmbeddingConfig } from "../config.js";
import { ConfigError } from "../errors.js";
import type { Embedder } from "./contract.js";

export type { Embedder } from "./contract.js";

/** Output dimension of the bundled Universal Sentence Encoder lite. */
export const BUNDLED_DIMENSION = 512;

/**
 * Builds the embedder a knowledge base is configured with. Model runtimes are
 * imported on first use, so keyword-only work never loads them.
 * @throws ConfigError for an unknown provider or model.
 */
export function createEmbedder(config: EmbeddingConfig): Embedder {
  switch (config.provider) {
    case "bundled":
      if (config.model !== "use-lite") {
        throw new ConfigError(
          `embedding model "${config.model}" is not available for provider "bundled"; use "use-lite"`,
        );
      }
      return lazyEmbedder("bundled", "use-lite", BUNDLED_DIMENSION, async () => {
        const { BundledEmbedder } = await import("./bundled.js");
        return new BundledEmbedder({ batchSize: config.batchSize });
      });
    default:
      throw new ConfigError(`unknown embedding provider "${String(config.provider)}"`);
  }
}

/** An embedder whose implementation module is loaded on the first embedding call. */
function lazyEmbedder(
  provider: string,
  modelId: string,
  dimension: number,
  load: () => Promise<Embedder>,
): Embedder {
  let loaded: Promise<Embedder> | undefined;
  const get = (): Promise<Embedder> => {
    loaded ??= load();
    return loaded;
  };
  return {
    provider,
    modelId,
    dimension,
    embedTexts: async (texts) => (await get()).embedTexts(texts),
    embedQuery: async (text) => (await get()).embedQuery(text),
  };
}
