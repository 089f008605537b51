import type { KnowledgeBaseConfig, VectorStoreConfig } from "../config.js";
import { ConfigError } from "../errors.js";
import { maskUrl, redactSecrets } from "../secrets.js";
import type { VectorStore } from "./contract.js";
import type { Db } from "./database.js";
import { SqliteVectorStore } from "./sqlite-vector-store.js";

export type { CollectionInfo, Metric, VectorHit, VectorRecord, VectorStore } from "./contract.js";

/** Name of a KB's vector collection: `vectorStore.collection`, else `kb_<name>`. */
export function collectionOf(config: Pick<KnowledgeBaseConfig, "name" | "vectorStore">): string {
  return config.vectorStore.collection ?? `kb_${config.name}`;
}

/**
 * Builds the vector store a KB config names (not yet connected). Server adapters
 * are imported on first use, so the embedded default never loads their clients.
 * `db` is the project's database, which the embedded `sqlite` store shares.
 * @throws ConfigError when a required setting (URL, index, API key) is missing.
 */
export async function createVectorStore(config: VectorStoreConfig, db: Db): Promise<VectorStore> {
  switch (config.type) {
    case "sqlite":
      return new SqliteVectorStore(db);
    case "pgvector": {
      const { PgVectorStore } = await import("./pgvector.js");
      return new PgVectorStore({ url: required(config, "url"), schema: config.schema });
    }
    case "qdrant": {
      const { QdrantVectorStore } = await import("./qdrant.js");
      return new QdrantVectorStore({
        url: required(config, "url"),
        apiKey: config.apiKey ?? env("QDRANT_API_KEY"),
        timeoutMs: config.timeoutMs,
      });
    }
    case "pinecone": {
      const { PineconeVectorStore } = await import("./pinecone.js");
      const apiKey = config.apiKey ?? env("PINECONE_API_KEY");
      if (!apiKey)
        throw new ConfigError(
          "vectorStore: pinecone needs an API key: set PINECONE_API_KEY or vectorStore.apiKey",
        );
      return new PineconeVectorStore({
        apiKey,
        index: required(config, "index"),
        controllerHostUrl: config.url,
        timeoutMs: config.timeoutMs,
      });
    }
    case "chroma": {
      const { ChromaVectorStore } = await import("./chroma.js");
      return new ChromaVectorStore({ url: required(config, "url") });
    }
    default:
      throw new ConfigError(`vectorStore.type "${String(config.type)}" is not a vector store`);
  }
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

function required(config: VectorStoreConfig, field: "url" | "index"): string {
  const value = config[field];
  if (!value) throw new ConfigError(`vectorStore.${field} is required for ${config.type}`);
  return value;
}

function env(name: string): string | undefined {
  const value = process.env[name];
  return value?.trim() ? value : undefined;
}

/**
 * A copy of a KB config fit to print: every secret field masked and URL
 * credentials hidden.
 * @deprecated Use {@link redactSecrets} (from `secrets.ts`), which masks every secret of any object.
 */
export function redactKbConfig<T extends { vectorStore: VectorStoreConfig }>(config: T): T {
  return redactSecrets(config);
}
