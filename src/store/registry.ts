/**
 * The registry of vector stores: each store's settings schema (see `settings.ts`) and
 * how to build it. A new store is its implementation file (of the `VectorStore`
 * contract, run through `test/conformance/vector-store.ts`) and one entry here; the
 * `vectorStore.type` values, config validation, the CLI's `--store` choices and
 * `--store-*` flags, the HTTP API's schema and the MCP description follow from it.
 *
 * Server stores are imported when first built, so the embedded default never loads
 * their clients.
 */
import type { VectorStoreConfig } from "../config.js";
import { ConfigError } from "../errors.js";
import { type ImplementationSchema, registry, type Settings } from "../settings.js";
import type { VectorStore } from "./contract.js";
import type { Db } from "./database.js";

/** A vector store of the registry. */
export interface VectorStoreImplementation extends ImplementationSchema {
  /**
   * Builds the store of `config` (not yet connected); `db` is the data directory's
   * database, which the embedded store shares.
   * @throws ConfigError when a required setting (URL, index, API key) is missing.
   */
  create(config: VectorStoreConfig, db: Db): Promise<VectorStore>;
}

/** Settings every vector store accepts. */
export const COMMON_STORE_SETTINGS: Settings = {
  collection: {
    type: "string",
    description: "collection, table or namespace (default kb_<name>)",
  },
};

const timeoutMs = {
  type: "integer",
  minimum: 1,
  description: "timeout of one request, in ms (default 30000)",
} as const;

const HTTP = ["http:", "https:"] as const;

/** The vector stores, by `vectorStore.type`. */
export const VECTOR_STORES = registry<VectorStoreImplementation>()({
  sqlite: {
    summary: "the embedded store",
    offline: true,
    settings: {},
    create: async (_config, db) => {
      const { SqliteVectorStore } = await import("./sqlite-vector-store.js");
      return new SqliteVectorStore(db);
    },
  },
  pgvector: {
    summary: "PostgreSQL with the pgvector extension",
    settings: {
      url: {
        type: "string",
        required: true,
        schemes: ["postgres:", "postgresql:"],
        example: "postgres://user@host:5432/db",
        description: "postgres://user:pass@host:5432/db",
      },
      schema: { type: "string", description: "PostgreSQL schema (default kl)" },
    },
    create: async (config) => {
      const { PgVectorStore } = await import("./pgvector.js");
      return new PgVectorStore({ url: required(config, "url"), schema: config.schema });
    },
  },
  qdrant: {
    summary: "Qdrant",
    settings: {
      url: {
        type: "string",
        required: true,
        schemes: HTTP,
        example: "http://host:port",
        description: "http://host:6333",
      },
      apiKey: { type: "string", secret: true, description: "API key (default $QDRANT_API_KEY)" },
      timeoutMs,
    },
    create: async (config) => {
      const { QdrantVectorStore } = await import("./qdrant.js");
      return new QdrantVectorStore({
        url: required(config, "url"),
        apiKey: config.apiKey ?? env("QDRANT_API_KEY"),
        timeoutMs: config.timeoutMs,
      });
    },
  },
  pinecone: {
    summary: "Pinecone (the KB is a namespace of the index)",
    settings: {
      index: {
        type: "string",
        required: true,
        description: "Pinecone index (the KB is a namespace of it; key from $PINECONE_API_KEY)",
      },
      apiKey: { type: "string", secret: true, description: "API key (default $PINECONE_API_KEY)" },
      url: {
        type: "string",
        schemes: HTTP,
        example: "http://host:port",
        description: "control plane (default https://api.pinecone.io)",
      },
      timeoutMs,
    },
    create: async (config) => {
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
    },
  },
  chroma: {
    summary: "Chroma",
    settings: {
      url: {
        type: "string",
        required: true,
        schemes: HTTP,
        example: "http://host:port",
        description: "http://host:8000",
      },
    },
    create: async (config) => {
      const { ChromaVectorStore } = await import("./chroma.js");
      return new ChromaVectorStore({ url: required(config, "url") });
    },
  },
});

/** A `vectorStore.type`: a name of {@link VECTOR_STORES}. */
export type VectorStoreType = keyof typeof VECTOR_STORES;

/** The store of a type, or undefined for a name that is not one. */
export function vectorStoreOf(type: string): VectorStoreImplementation | undefined {
  return Object.hasOwn(VECTOR_STORES, type) ? VECTOR_STORES[type as VectorStoreType] : undefined;
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
