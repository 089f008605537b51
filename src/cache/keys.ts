/**
 * Cache key builders. A key is `<namespace>:<sha256 hex>`, the digest taken
 * over the canonical JSON of everything that can change the cached result:
 *
 * - the key scheme version ({@link CACHE_KEY_SCHEMA}) and the library version
 *   (so an upgrade that changes chunking, embedding or ranking starts afresh);
 * - the operation name (`embed-query`, `search`, …);
 * - every parameter, as an object serialised with sorted keys at every depth
 *   (so `{a, b}` and `{b, a}` give one key; `undefined` properties count as absent);
 * - the SHA-256 of the content (query text, document text).
 *
 * Nothing is normalised beyond key order: `"Foo"` and `"foo "` are different
 * queries, and `{ topK: 5 }` differs from `{}` even if 5 is the default — pass
 * resolved parameters (defaults applied) to share entries between callers.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { toJsonTree } from "./codec.js";
import { CACHE_NAMESPACES, type CacheKey, checkNamespace } from "./contract.js";

/** Version of the key material layout and value encoding; bump it to orphan every existing entry. */
export const CACHE_KEY_SCHEMA = 1;

function readLibraryVersion(): string {
  try {
    // src/cache/keys.ts and dist/cache/keys.js both sit two levels below package.json.
    const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
      version?: unknown;
    };
    return typeof pkg.version === "string" ? pkg.version : "unknown";
  } catch {
    return "unknown";
  }
}

/** Version of this library (from package.json), part of every key. */
export const LIBRARY_VERSION: string = readLibraryVersion();

/**
 * JSON of `value` with object keys sorted at every depth, so equal values give
 * equal text whatever their key order. Accepts what the cache accepts
 * (JSON data and `Float32Array`; `undefined` properties are dropped).
 * @throws TypeError naming the path of a value that is not JSON-serialisable (NaN, Map, Date, cycles, …).
 */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(toJsonTree(value, true, "key material"));
}

/** SHA-256 of a string (UTF-8), as 64 lowercase hex digits. */
export function sha256Hex(text: string): string {
  return createHash("sha256").update(text, "utf8").digest("hex");
}

/** What a generic cache key is computed from (see {@link cacheKey}). */
export interface KeyMaterial {
  /** Name of the cached operation, e.g. `chunk.fixed`, `embed-query`, `search`. */
  operation: string;
  /** Every parameter that can change the result (a JSON object; key order does not matter). */
  params: Record<string, unknown>;
  /** The content operated on (hashed with SHA-256); omit when there is none. */
  content?: string;
}

/**
 * Builds `<namespace>:<sha256>` over (schema, library version, namespace,
 * operation, canonical params, SHA-256 of content).
 * @throws TypeError for an invalid namespace, an empty operation, or params that are not a JSON object.
 */
export function cacheKey(namespace: string, material: KeyMaterial): CacheKey {
  checkNamespace(namespace);
  if (typeof material.operation !== "string" || material.operation.length === 0) {
    throw new TypeError("cacheKey: operation must be a non-empty string");
  }
  const { params } = material;
  if (params === null || typeof params !== "object" || Array.isArray(params)) {
    throw new TypeError("cacheKey: params must be an object");
  }
  if (material.content !== undefined && typeof material.content !== "string") {
    throw new TypeError("cacheKey: content must be a string");
  }
  const digest = sha256Hex(
    canonicalJson({
      schema: CACHE_KEY_SCHEMA,
      library: LIBRARY_VERSION,
      namespace,
      operation: material.operation,
      params,
      content: material.content === undefined ? null : sha256Hex(material.content),
    }),
  );
  return `${namespace}:${digest}`;
}

/** Inputs of {@link queryEmbeddingKey}. */
export interface QueryEmbeddingKeyInput {
  /** Embedding provider, e.g. `bundled`. */
  provider: string;
  /** Model id within the provider. */
  model: string;
  /** The query text, exactly as embedded. */
  text: string;
  /** Any other option that changes the vector (dimensions, normalisation, instruction prefix…). */
  options?: Record<string, unknown>;
}

/**
 * Key of a query vector in the `query-embedding` namespace: hash of
 * (provider, model, options, text) plus schema and library versions.
 * @throws TypeError when provider or model is empty, text is not a string, or options are not JSON.
 */
export function queryEmbeddingKey(input: QueryEmbeddingKeyInput): CacheKey {
  for (const field of ["provider", "model"] as const) {
    if (typeof input[field] !== "string" || input[field].length === 0) {
      throw new TypeError(`queryEmbeddingKey: ${field} must be a non-empty string`);
    }
  }
  if (typeof input.text !== "string") throw new TypeError("queryEmbeddingKey: text must be a string");
  return cacheKey(CACHE_NAMESPACES.queryEmbedding, {
    operation: "embed-query",
    params: { provider: input.provider, model: input.model, options: input.options ?? {} },
    content: input.text,
  });
}

/** Inputs of {@link searchResultKey}. */
export interface SearchResultKeyInput {
  /** The query text, exactly as searched. */
  query: string;
  /** Knowledge bases searched (order does not matter; at least one). */
  kbIds: readonly string[];
  /**
   * EVERY retrieval parameter that can change the results (mode, topK,
   * vectorTopK, keywordTopK, rrfK, weights, minScore, dedupThreshold, BM25
   * settings, filters, embedding provider/model…), as a JSON object. Key order
   * does not matter; nested objects are canonicalised too.
   */
  params: Record<string, unknown>;
  /**
   * Current data version of each knowledge base (bumped by every ingest or
   * deletion). Must contain every id in `kbIds`; versions of other KBs are ignored.
   */
  kbVersions: Readonly<Record<string, string | number>>;
}

/**
 * Key of a search result in the `search-result` namespace: hash of (query,
 * sorted KB ids, canonical params, each searched KB's data version) plus schema
 * and library versions. Any parameter change or ingest gives a new key, so a
 * stale result is never served (old entries simply expire).
 * @throws TypeError when `kbIds` is empty or has a non-string/empty id, a searched KB has no
 *   version, a version is not a string or finite number, or params are not JSON.
 */
export function searchResultKey(input: SearchResultKeyInput): CacheKey {
  if (typeof input.query !== "string") throw new TypeError("searchResultKey: query must be a string");
  if (!Array.isArray(input.kbIds) || input.kbIds.length === 0) {
    throw new TypeError("searchResultKey: kbIds must be a non-empty array");
  }
  const kbIds = [...input.kbIds].sort();
  const versions: [string, string | number][] = kbIds.map((id) => {
    if (typeof id !== "string" || id.length === 0) {
      throw new TypeError("searchResultKey: every KB id must be a non-empty string");
    }
    const version = Object.hasOwn(input.kbVersions ?? {}, id) ? input.kbVersions[id] : undefined;
    if (version === undefined) {
      throw new TypeError(`searchResultKey: no data version given for knowledge base ${JSON.stringify(id)}`);
    }
    if (typeof version !== "string" && !(typeof version === "number" && Number.isFinite(version))) {
      throw new TypeError(
        `searchResultKey: data version of ${JSON.stringify(id)} must be a string or number`,
      );
    }
    return [id, version];
  });
  return cacheKey(CACHE_NAMESPACES.searchResult, {
    operation: "search",
    // Versions as [id, version] pairs in id order: a string "1" and a number 1 stay distinct.
    params: { kbIds, kbVersions: versions, retrieval: input.params },
    content: input.query,
  });
}
