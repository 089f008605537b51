/**
 * The bundled provider's embedders: Universal Sentence Encoder lite (`use-lite`, its
 * int8 variant), the static table distilled from it (`use-lite-static`, ./static.ts) and
 * their mix (`use-lite-mix`, ./static-mix.ts). Each model's runtime is imported on its
 * first embedding call, so keyword-only work never loads it.
 */
import { ConfigError } from "../errors.js";
import { BUNDLED_DIMENSIONS, BUNDLED_MODELS, type BundledModel } from "./bundled-models.js";
import type { BundledConfig } from "./config.js";
import type { Embedder } from "./contract.js";
import type { EmbedderRuntime } from "./registry.js";

/**
 * The embedder of a bundled-provider config (not loaded yet).
 * @throws ConfigError for an unknown bundled model, a dimension other than the model's,
 *   or an option the model does not take (`runtime: "tfjs"`, `longText` of the table models).
 */
export function createBundledEmbedder(config: BundledConfig, runtime: EmbedderRuntime): Embedder {
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
    resolveDimension: async () => dimension,
    close: async () => {
      if (loaded) await (await loaded).close?.();
    },
  };
}
