/**
 * The facade's search: options checked, the result cache consulted, the retrieval
 * pipeline (`retrieve/search.ts`) run over the KBs, results attributed; query vectors
 * through the query-embedding cache.
 */
import { queryEmbeddingKey, searchResultKey } from "../cache/keys.js";
import { DEFAULT_KB, type KnowledgeBaseConfig, parseRetrievalMode, RETRIEVAL_MODES } from "../config.js";
import { KnowledgeLayerError } from "../errors.js";
import { parseFilter } from "../retrieve/filter.js";
import { attributed, retrieve } from "../retrieve/search.js";
import { redactText } from "../secrets.js";
import type { KbRecord } from "../store/catalog.js";
import { collectionOf } from "../store/index.js";
import { embeddingCacheModel } from "./components.js";
import type { FacadeParts } from "./parts.js";
import type { SearchOptions, SearchResponse, SearchResult } from "./types.js";

/** Largest accepted `topK`. */
export const MAX_TOP_K = 10_000;

/**
 * Validates the numeric and per-KB search options.
 * @throws KnowledgeLayerError naming the option and the problem.
 */
function checkSearchOptions(options: SearchOptions, kbs: string[]): void {
  const nonNegative = (name: string, v: number | undefined): void => {
    if (v !== undefined && !(Number.isFinite(v) && v >= 0)) {
      throw new KnowledgeLayerError(`${name} must be a finite number >= 0 (got ${v})`);
    }
  };
  nonNegative("minScore", options.minScore);
  nonNegative("vectorWeight", options.vectorWeight);
  nonNegative("keywordWeight", options.keywordWeight);
  for (const [name, v] of [
    ["vectorTopK", options.vectorTopK],
    ["keywordTopK", options.keywordTopK],
  ] as const) {
    if (v !== undefined && !(Number.isInteger(v) && v >= 1)) {
      throw new KnowledgeLayerError(`${name} must be an integer >= 1 (got ${v})`);
    }
  }
  for (const [kb, over] of Object.entries(options.perKb ?? {})) {
    if (!kbs.includes(kb))
      throw new KnowledgeLayerError(`perKb.${kb}: "${kb}" is not one of the searched knowledge bases`);
    nonNegative(`perKb.${kb}.minScore`, over.minScore);
    if (over.maxResults !== undefined && !(Number.isInteger(over.maxResults) && over.maxResults >= 1)) {
      throw new KnowledgeLayerError(
        `perKb.${kb}.maxResults must be an integer >= 1 (got ${over.maxResults})`,
      );
    }
    if (over.mode !== undefined && parseRetrievalMode(String(over.mode)) === undefined) {
      throw new KnowledgeLayerError(
        `perKb.${kb}.mode: unknown mode "${over.mode}"; use one of ${RETRIEVAL_MODES.join(", ")}`,
      );
    }
  }
}

/** The body of `KnowledgeLayer.search` (documented there). */
export async function search(
  parts: FacadeParts,
  query: string,
  options: SearchOptions = {},
): Promise<SearchResponse> {
  const started = Date.now();
  const names = options.kbs && options.kbs.length > 0 ? [...new Set(options.kbs)] : [DEFAULT_KB];
  const kbs: KbRecord[] = [];
  for (const n of names) kbs.push(await parts.getKb(n));
  const first = kbs[0] as KbRecord;
  const mode = parseRetrievalMode(String(options.mode ?? first.config.retrieval.mode));
  if (mode === undefined) {
    throw new KnowledgeLayerError(
      `unknown search mode "${String(options.mode)}"; use one of ${RETRIEVAL_MODES.join(", ")}`,
    );
  }
  const effort = options.vectorEffort;
  if (effort !== undefined && !(typeof effort === "number" && Number.isFinite(effort) && effort > 0)) {
    throw new KnowledgeLayerError(`vectorEffort must be a positive number (got ${JSON.stringify(effort)})`);
  }
  const topK = options.topK ?? first.config.retrieval.topK;
  if (!Number.isInteger(topK) || topK < 1 || topK > MAX_TOP_K) {
    throw new KnowledgeLayerError(`top-k must be an integer from 1 to ${MAX_TOP_K} (got ${topK})`);
  }
  if (typeof query !== "string")
    throw new KnowledgeLayerError(`the query must be a string (got ${typeof query})`);
  if (query.trim().length === 0) throw new KnowledgeLayerError("the query is empty");
  checkSearchOptions(options, names);
  // A malformed filter fails here, naming its position (`filter.date.$gte: …`).
  if (options.filter !== undefined) parseFilter(options.filter);
  for (const [kb, over] of Object.entries(options.perKb ?? {}))
    if (over.filter !== undefined) parseFilter(over.filter, `perKb.${kb}.filter`);
  const warnings: string[] = [];
  for (const kb of kbs) {
    const kbMode =
      options.perKb?.[kb.name]?.mode ?? (options.mode === undefined ? kb.config.retrieval.mode : mode);
    if (kbMode === "keyword") continue;
    // Documents table only: cheap enough for every search, unlike counting chunks.
    const { documents, unembedded } = parts.catalog.unembeddedDocuments(kb.name);
    if (unembedded > 0) {
      warnings.push(
        `${unembedded} of ${documents} documents in knowledge base "${kb.name}" have no vectors ` +
          "(ingested with --no-embed, or their vectors could not be stored): vector search cannot find them; " +
          "ingest them again (without --no-embed)",
      );
    }
  }
  const resultKey = searchResultKey({
    query,
    kbIds: kbs.map((k) => k.name),
    // Every parameter: the call's options and each KB's whole configuration.
    params: { options: { ...options, kbs: undefined }, mode, topK, configs: kbs.map((k) => k.config) },
    // The store id scopes the key to this database (a shared Redis serves several).
    kbVersions: Object.fromEntries(
      kbs.map((k) => [k.name, `${parts.catalog.storeId()}:${parts.catalog.dataVersion(k.name)}`]),
    ),
  });
  const hit = (await parts.cache.get(resultKey)) as SearchResponse | undefined;
  if (hit) return { ...hit, cached: true, tookMs: Date.now() - started };
  const queryVectors = new Map<string, Promise<Float32Array>>();
  const outcome = await retrieve(
    {
      catalog: parts.catalog,
      store: (config) => parts.vectorStore(config),
      bm25: parts.bm25,
      keywordSearch: (kb, query, topK, params, allowed) =>
        parts.keywordSearch.search(kb, query, topK, params, allowed),
      collection: collectionOf,
      embedQuery: (config, text) => {
        const key = `${config.embedding.provider}/${config.embedding.model}\u0000${text}`;
        let vector = queryVectors.get(key);
        if (!vector) {
          vector = cachedQueryVector(parts, config, text);
          queryVectors.set(key, vector);
        }
        return vector;
      },
      reranker: (config) => parts.reranker(config),
      expander: (config) => parts.expander(config),
    },
    kbs,
    query,
    {
      mode: options.mode === undefined ? undefined : mode,
      topK,
      vectorTopK: options.vectorTopK,
      keywordTopK: options.keywordTopK,
      vectorWeight: options.vectorWeight,
      keywordWeight: options.keywordWeight,
      minScore: options.minScore,
      fallbackBelowThreshold: options.fallbackBelowThreshold,
      keepDuplicates: options.keepDuplicates,
      perKb: options.perKb,
      filter: options.filter,
      exactVectors: options.exactVectors,
      vectorEffort: options.vectorEffort,
    },
  );
  // A failing reranker or expansion endpoint is reported, its credentials masked.
  warnings.push(...outcome.warnings.map(redactText));
  const results: SearchResult[] = outcome.results.map((r, i) => {
    const { source, citation } = attributed(r.chunk);
    const s = r.chunk;
    const result: SearchResult = {
      rank: i + 1,
      score: r.score,
      scores: r.scores,
      kb: r.kb,
      chunkId: s.id,
      text: s.text,
      chunk: { index: s.chunkIndex, total: s.totalChunks, type: s.chunkType, start: s.start, end: s.end },
      source,
      citation,
    };
    if (r.reranker) result.reranker = r.reranker;
    if (r.belowThreshold) result.belowThreshold = true;
    if (options.explain)
      result.explain = s.contextPrefix ? { ...r.explain, context: s.contextPrefix } : r.explain;
    return result;
  });
  const response: SearchResponse = {
    query,
    mode,
    kbs: kbs.map((k) => k.name),
    rerankers: outcome.rerankers,
    results,
    warnings,
    tookMs: Date.now() - started,
  };
  if (Object.keys(outcome.variants).length > 0) response.variants = outcome.variants;
  await parts.cache.set(resultKey, response);
  return response;
}

/**
 * A query vector through the shared cache (keyed by provider, model and text),
 * then the KB's persistent embedding cache, then the model.
 */
async function cachedQueryVector(
  parts: FacadeParts,
  config: KnowledgeBaseConfig,
  text: string,
): Promise<Float32Array> {
  const scope = parts.cacheScope?.(config.name) ?? "";
  const key = queryEmbeddingKey({
    provider: config.embedding.provider,
    model: scope
      ? `${scope}\u0000${embeddingCacheModel(config.embedding)}`
      : embeddingCacheModel(config.embedding),
    text,
  });
  const hit = await parts.cache.get(key);
  if (hit instanceof Float32Array) return hit;
  const vector = await parts.embedder(config, "query").embedQuery(text);
  await parts.cache.set(key, vector);
  return vector;
}

/** What {@link warmSearch} readied. */
export interface WarmReport {
  /** KBs of the embedded store whose approximate vector index is now loaded and up to date. */
  vectorIndexes: string[];
  /** KBs large enough for their keyword searches to run on two threads (the second one is now started). */
  keywordThreads: string[];
}

/**
 * Readies the embedded store's large KBs for their first searches: loads each one's HNSW
 * index (bringing it up to date with the database, as the first search would: seconds at a
 * million vectors) and starts the keyword search's second thread when a KB is large enough to
 * be split. Small KBs and KBs of other stores cost a count each. Searches do the same work
 * themselves when it was not done, so this only moves it to a moment of the caller's choosing.
 * @throws what reading the catalog or an index file throws (searches then load them as usual).
 */
export async function warmSearch(parts: FacadeParts): Promise<WarmReport> {
  const kbs = (await parts.backend.kbs.list()).filter((kb) => kb.config.vectorStore.type === "sqlite");
  const vectorIndexes: string[] = [];
  for (const kb of kbs) {
    const collection = collectionOf(kb.config);
    if (!(await parts.store.hasCollection(collection))) continue;
    if (await parts.store.syncIndex(collection)) vectorIndexes.push(kb.name);
  }
  const large = kbs.map((kb) => kb.name).filter((name) => parts.keywordSearch.splits(name));
  const keywordThreads = large.length > 0 && (await parts.keywordSearch.warm()) ? large : [];
  return { vectorIndexes, keywordThreads };
}
