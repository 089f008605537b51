/**
 * The embedder seam: builds an {@link Embedder} from configuration, through the
 * registry of providers (./registry.ts, each with its settings schema). All share the
 * contract of contract.ts, checked by test/conformance/embedder.ts. The bundled model
 * `use-lite-static` is a static table distilled from USE lite (./static.ts),
 * `use-lite-mix` its int8 first window joined with that table (./static-mix.ts).
 *
 * Dimension discovery: {@link createEmbedder} stays synchronous. When the
 * vector length is neither configured nor known for the model,
 * `embedder.dimension` is `0` until `await embedder.resolveDimension?.()`
 * (or the first embedding call) finds it; call that before creating a vector
 * collection.
 */
import { ConfigError } from "../errors.js";
import { orList } from "../settings.js";
import type { EmbeddingProviderConfig } from "./config.js";
import type { Embedder } from "./contract.js";
import { EMBEDDING_PROVIDER_REGISTRY, type EmbedderRuntime, embeddingProviderOf } from "./registry.js";

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
export type { Embedder } from "./contract.js";
export { EmbeddingError } from "./contract.js";
export { HuggingFaceEmbedder, type HuggingFaceEmbedderOptions } from "./huggingface.js";
export { DEFAULT_LOCAL_MODEL, LocalEmbedder, type LocalEmbedderOptions } from "./local.js";
export { OpenAiEmbedder, type OpenAiEmbedderOptions } from "./openai.js";
export { OpenAiCompatibleEmbedder, type OpenAiCompatibleEmbedderOptions } from "./openai-compatible.js";
export {
  EMBEDDING_PROVIDER_REGISTRY,
  EMBEDDING_PROVIDERS,
  type EmbedderRuntime,
  type EmbeddingProviderImplementation,
  type EmbeddingProviderName,
} from "./registry.js";

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
  const provider = embeddingProviderOf(String((config as { provider?: unknown }).provider));
  if (!provider) {
    const names = Object.entries(EMBEDDING_PROVIDER_REGISTRY).filter(([, p]) => p.aliasOf === undefined);
    const aliases = Object.entries(EMBEDDING_PROVIDER_REGISTRY).flatMap(([name, p]) =>
      p.aliasOf === undefined ? [] : [`alias ${name}`],
    );
    throw new ConfigError(
      `unknown embedding provider "${String((config as { provider?: unknown }).provider)}"; use ${orList(names.map(([n]) => n))}${aliases.length > 0 ? ` (${aliases.join(", ")})` : ""}`,
    );
  }
  return provider.create(config, runtime);
}
