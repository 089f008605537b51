import type { KnowledgeBaseConfig, VectorStoreConfig } from "../config.js";
import { ConfigError } from "../errors.js";
import { maskUrl, redactSecrets } from "../secrets.js";
import type { VectorStore } from "./contract.js";
import type { Db } from "./database.js";
import { vectorStoreOf } from "./registry.js";

export type { CollectionInfo, Metric, VectorHit, VectorRecord, VectorStore } from "./contract.js";
export { VECTOR_STORES, type VectorStoreImplementation } from "./registry.js";

/** Name of a KB's vector collection: `vectorStore.collection`, else `kb_<name>`. */
export function collectionOf(config: Pick<KnowledgeBaseConfig, "name" | "vectorStore">): string {
  return config.vectorStore.collection ?? `kb_${config.name}`;
}

/**
 * Builds the vector store a KB config names (not yet connected), from the registry of
 * stores (`registry.ts`). Server adapters are imported on first use, so the embedded
 * default never loads their clients. `db` is the project's database, which the
 * embedded `sqlite` store shares.
 * @throws ConfigError for an unknown type, or when a required setting (URL, index, API key) is missing.
 */
export async function createVectorStore(config: VectorStoreConfig, db: Db): Promise<VectorStore> {
  const store = vectorStoreOf(config.type);
  if (!store) throw new ConfigError(`vectorStore.type "${String(config.type)}" is not a vector store`);
  return store.create(config, db);
}

/**
 * A short description of a store config for messages and `kb show`, with the
 * password of a URL and any API key masked.
 */
export function describeStore(config: VectorStoreConfig): string {
  const parts: string[] = [config.type];
  if (config.url) parts.push(maskUrl(config.url));
  if (config.index) parts.push(`index ${config.index}`);
  if (config.schema) parts.push(`schema ${config.schema}`);
  return parts.join(" ");
}

/**
 * A copy of a KB config fit to print: every secret field masked and URL
 * credentials hidden.
 * @deprecated Use {@link redactSecrets} (from `secrets.ts`), which masks every secret of any object.
 */
export function redactKbConfig<T extends { vectorStore: VectorStoreConfig }>(config: T): T {
  return redactSecrets(config);
}
