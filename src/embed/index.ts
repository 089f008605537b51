/**
 * The embedder seam: builds an {@link Embedder} from configuration.
 *
 * Providers (all share the contract of contract.ts, checked by
 * test/conformance/embedder.ts):
 * - `bundled` — offline Universal Sentence Encoder lite (512-d), the default;
 *   model `use-lite-static` is a static table distilled from it (./static.ts),
 *   `use-lite-mix` its int8 first window joined with that table (./static-mix.ts);
 * - `local` — a sentence-transformers style ONNX model via transformers.js, in worker threads;
 * - `openai` — OpenAI's embeddings API;
 * - `cohere` — Cohere's embed API v2;
 * - `huggingface` — Text Embeddings Inference or the hosted Inference API;
 * - `openai-compatible` (alias `litellm`) — any server speaking OpenAI's embeddings wire format.
 *
 * Dimension discovery: {@link createEmbedder} stays synchronous. When the
 * vector length is neither configured nor known for the model,
 * `embedder.dimension` is `0` until `await embedder.resolveDimension?.()`
 * (or the first embedding call) finds it; call that before creating a vector
 * collection.
 */
import { ConfigError } from "../errors.js";
import { BUNDLED_DIMENSIONS, BUNDLED_MODELS, type BundledModel } from "./bundled-models.js";
import { CohereEmbedder } from "./cohere.js";
import type { EmbeddingProviderConfig } from "./config.js";
import type { Embedder } from "./contract.js";
import { HuggingFaceEmbedder } from "./huggingface.js";
import { LocalEmbedder } from "./local.js";
import { OpenAiEmbedder } from "./openai.js";
import { OpenAiCompatibleEmbedder } from "./openai-compatible.js";

export { CohereEmbedder, type CohereEmbedderOptions } from "./cohere.js";
export type {
  BundledConfig,
  CohereConfig,
  EmbeddingProviderConfig,
  HuggingFaceConfig,
  LocalConfig,
  OpenAiCompatibleConfig,
  OpenAiConfig,
} from "./config.js";
export { EMBEDDING_PROVIDERS } from "./config.js";
export type { Embedder } from "./contract.js";
export { EmbeddingError } from "./contract.js";
export { HuggingFaceEmbedder, type HuggingFaceEmbedderOptions } from "./huggingface.js";
export { DEFAULT_LOCAL_MODEL, LocalEmbedder, type LocalEmbedderOptions } from "./local.js";
export { OpenAiEmbedder, type OpenAiEmbedderOptions } from "./openai.js";
export { OpenAiCompatibleEmbedder, type OpenAiCompatibleEmbedderOptions } from "./openai-compatible.js";

/** Output dimension of the bundled Universal Sentence Encoder lite (and of every bundled model). */
export const BUNDLED_DIMENSION = 512;

/**
 * Builds the embedder a knowledge base is configured with. The bundled
 * model's runtime is imported on its first embedding call, so keyword-only
 * work never loads it; local models load in worker threads on first use;
 * remote providers make no request until the first embedding call.
 * `runtime` holds process-level choices that are not part of a KB's config: a
 * server sets `offThread` so bundled-model inference never runs on the calling
 * thread, and gives queries their own worker `lane` (see {@link EmbedderRuntime}).
 * @throws ConfigError for an unknown provider, an unknown bundled model, a
 *   missing `baseUrl` (openai-compatible) or an invalid option value.
 */
export function createEmbedder(config: EmbeddingProviderConfig, runtime: EmbedderRuntime = {}): Embedder {
  switch (config.provider) {
    case "bundled": {
      const model = config.model as BundledModel;
      if (!BUNDLED_MODELS.includes(model)) {
        throw new ConfigError(
          `embedding model "${config.model}" is not available for provider "bundled"; use ${BUNDLED_MODELS.map((m) => `"${m}"`).join(" or ")}`,
        );
      }
      const dimension = BUNDLED_DIMENSIONS[model];
      if (config.dimension !== undefined && config.dimension !== dimension) {
        throw new ConfigError(
          `embedding dimension ${config.dimension} is not available for provider "bundled" (${model} is ${dimension}-d)`,
        );
      }
      if (model !== "use-lite" && config.runtime === "tfjs") {
        throw new ConfigError(
          model === "use-lite-static"
            ? 'bundled model "use-lite-static" is a table lookup, with no TF.js runtime; leave runtime unset'
            : `bundled model "${model}" runs on onnxruntime only, not TF.js; leave runtime unset or "onnx"`,
        );
      }
      if (model === "use-lite-static" || model === "use-lite-mix") {
        if (config.longText !== undefined) {
          throw new ConfigError(
            `longText does not apply to bundled model "${model}" (${model === "use-lite-static" ? "the table reads the whole text" : "the network reads the first 128-token window, the table the whole text"}); remove it`,
          );
        }
      }
      if (model === "use-lite-static") {
        // A table lookup: no network, no worker threads (batch, window and thread options do not apply).
        return lazyEmbedder("bundled", model, dimension, async () => {
          const { StaticEmbedder } = await import("./static.js");
          return new StaticEmbedder();
        });
      }
      const offThread = runtime.offThread === true;
      const workers = config.workers ?? (offThread ? 1 : undefined);
      if (model === "use-lite-mix") {
        const { batchSize, threads } = config;
        return lazyEmbedder("bundled", model, dimension, async () => {
          const [{ BundledEmbedder }, { StaticEmbedder }, { StaticMixEmbedder }] = await Promise.all([
            import("./bundled.js"),
            import("./static.js"),
            import("./static-mix.js"),
          ]);
          const network = new BundledEmbedder({
            batchSize,
            longText: "truncate",
            workers,
            offThread,
            lane: runtime.lane,
            threads,
            model: "use-lite-int8",
          });
          return new StaticMixEmbedder(model, network, new StaticEmbedder());
        });
      }
      const { batchSize, longText, runtime: engine, threads } = config;
      return lazyEmbedder("bundled", model, dimension, async () => {
        const { BundledEmbedder } = await import("./bundled.js");
        return new BundledEmbedder({
          batchSize,
          longText,
          workers,
          offThread,
          lane: runtime.lane,
          runtime: engine,
          threads,
          model,
        });
      });
    }
    case "local": {
      const { provider: _, ...options } = config;
      return new LocalEmbedder(options);
    }
    case "openai": {
      const { provider: _, ...options } = config;
      return new OpenAiEmbedder(options);
    }
    case "cohere": {
      const { provider: _, ...options } = config;
      return new CohereEmbedder(options);
    }
    case "huggingface": {
      const { provider: _, ...options } = config;
      return new HuggingFaceEmbedder(options);
    }
    case "openai-compatible":
    case "litellm": {
      const { provider: _, ...options } = config;
      return new OpenAiCompatibleEmbedder(options);
    }
    default:
      throw new ConfigError(
        `unknown embedding provider "${String((config as { provider?: unknown }).provider)}"; use bundled, local, openai, cohere, huggingface or openai-compatible (alias litellm)`,
      );
  }
}

/** An embedder whose implementation module is loaded on the first embedding call. */
/** Process-level options of {@link createEmbedder}, not stored in KB configs. */
export interface EmbedderRuntime {
  /** Run all bundled-model inference in worker threads (default false; servers set it). */
  offThread?: boolean;
  /** Worker-pool lane of the bundled model, e.g. `"query"` to keep searches apart from ingest batches. */
  lane?: string;
}

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
    resolveDimension: async () => dimension,
    close: async () => {
      if (loaded) await (await loaded).close?.();
    },
  };
}
