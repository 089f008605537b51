/**
 * The components the facade builds and keeps, one per configuration: the default cache
 * configuration, connected vector stores, cached embedders, rerankers, LLM query
 * expanders and chunk-context writers.
 */
import { createHash } from "node:crypto";
import type { CacheConfig } from "../cache/index.js";
import { type ChunkSituator, createLlmSituator } from "../chunk/llm-context.js";
import type { KnowledgeBaseConfig } from "../config.js";
import { CachedEmbedder } from "../embed/cache.js";
import { createEmbedder } from "../embed/index.js";
import { ConfigError, KnowledgeLayerError } from "../errors.js";
import { embeddingIdentity } from "../ingest/pipeline.js";
import { createReranker, type Reranker } from "../rerank/index.js";
import { createLlmExpander } from "../retrieve/expansion.js";
import type { PipelineReranker, QueryExpander } from "../retrieve/search.js";
import type { Catalog } from "../store/catalog.js";
import type { VectorStore } from "../store/contract.js";
import type { Db } from "../store/database.js";
import { createVectorStore, describeStore } from "../store/index.js";
import type { SqliteVectorStore } from "../store/sqlite-vector-store.js";

/** The cache configuration {@link KnowledgeLayer.open} uses when none is given. */
export function defaultCacheConfig(env: NodeJS.ProcessEnv = process.env): CacheConfig {
  const url = env.KL_CACHE_URL;
  if (url && /^rediss?:\/\//.test(url)) return { type: "redis", url };
  if (url === "none") return { type: "none" };
  return { type: "memory", maxEntries: 10_000, maxBytes: 64 * 1024 * 1024, ttlSeconds: 3600 };
}

/** The embedders a facade keeps and what it builds them with (see {@link kbEmbedder}). */
export interface EmbedderCache {
  embedders: Map<string, CachedEmbedder>;
  db: Db;
  offThread: boolean;
  cacheScope: ((kb: string) => string) | undefined;
}

/** The body of `KnowledgeLayer.vectorStore` (documented there). */
export async function connectVectorStore(
  config: KnowledgeBaseConfig,
  embedded: SqliteVectorStore,
  db: Db,
  stores: Map<string, Promise<VectorStore>>,
): Promise<VectorStore> {
  const vs = config.vectorStore;
  if (vs.type === "sqlite") return embedded;
  const key = JSON.stringify({ ...vs, collection: undefined });
  let store = stores.get(key);
  if (!store) {
    store = (async () => {
      const created = await createVectorStore(vs, db);
      try {
        await created.connect();
      } catch (err) {
        await created.close().catch(() => {});
        throw new KnowledgeLayerError(
          `knowledge base "${config.name}": cannot connect to vector store ${describeStore(vs)}: ${(err as Error).message}`,
          { cause: err },
        );
      }
      return created;
    })();
    stores.set(key, store);
    store.catch(() => stores.delete(key));
  }
  return store;
}

/** The body of `KnowledgeLayer.embedder` (documented there). */
export function kbEmbedder(
  config: KnowledgeBaseConfig,
  use: "ingest" | "query",
  { embedders, db, offThread, cacheScope }: EmbedderCache,
): CachedEmbedder {
  const lane = offThread ? use : "ingest";
  const scope = cacheScope?.(config.name) ?? "";
  const key = `${lane}\u0000${scope}\u0000${JSON.stringify(config.embedding)}`;
  let e = embedders.get(key);
  if (!e) {
    const model = embeddingCacheModel(config.embedding);
    e = new CachedEmbedder(
      createEmbedder(config.embedding, { offThread, lane }),
      db,
      scope ? `${scope}\u0000${model}` : model,
    );
    embedders.set(key, e);
  }
  return e;
}

/** The body of `KnowledgeLayer.reranker` (documented there). */
export function kbReranker(
  config: KnowledgeBaseConfig,
  rerankers: Map<string, Reranker>,
  embedder: (config: KnowledgeBaseConfig) => CachedEmbedder,
): PipelineReranker | undefined {
  const rc = config.retrieval.reranker;
  if (rc.type === "none" || rc.type === "auto") return undefined;
  const key = `${JSON.stringify(rc)}\u0000${config.embedding.provider}/${config.embedding.model}`;
  let reranker = rerankers.get(key);
  if (!reranker) {
    try {
      reranker = createReranker(rc, { embedder: embedder(config) });
    } catch (err) {
      if (err instanceof ConfigError)
        throw new ConfigError(`knowledge base "${config.name}": ${err.message}`);
      throw err;
    }
    rerankers.set(key, reranker);
  }
  return reranker;
}

/** The LLM query expander of a KB (advanced strategy), or undefined when none is configured. */
export function kbExpander(
  config: KnowledgeBaseConfig,
  expanders: Map<string, QueryExpander>,
): QueryExpander | undefined {
  const llm = config.retrieval.expansionLlm;
  if (!llm) return undefined;
  const key = JSON.stringify(llm);
  let expander = expanders.get(key);
  if (!expander) {
    expander = createLlmExpander(llm);
    expanders.set(key, expander);
  }
  return expander;
}

/**
 * The LLM chunk-context writer of a KB (`chunking.contextLlm`), or undefined when it has
 * none. Sentences are cached in the data directory's database (per cache scope).
 */
export function kbSituator(
  config: KnowledgeBaseConfig,
  catalog: Catalog,
  cacheScope: ((kb: string) => string) | undefined,
): ChunkSituator | undefined {
  const llm = config.chunking.contextLlm;
  if (!llm) return undefined;
  const scope = cacheScope?.(config.name) ?? "";
  const namespace = `llm-context\u0000${scope}\u0000${llm.model}\u0000${llm.baseUrl}`;
  return createLlmSituator(llm, {
    get: (key) => catalog.cachedText(namespace, key),
    set: (key, text) => catalog.cacheText(namespace, key, text),
  });
}

/**
 * The model part of an embedding-cache key: the model name, plus a hash of every other
 * setting that changes vectors (endpoint URL, dimension, prefixes, pooling…) when there
 * are any, so two endpoints serving one model name never share cached vectors.
 */
export function embeddingCacheModel(e: KnowledgeBaseConfig["embedding"]): string {
  const { provider: _p, model: _m, ...rest } = embeddingIdentity(e);
  const settings = Object.entries(rest)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => a.localeCompare(b));
  if (settings.length === 0) return e.model;
  return `${e.model}#${createHash("sha256").update(JSON.stringify(settings)).digest("hex").slice(0, 12)}`;
}
