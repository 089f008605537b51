/**
 * Cache layer of the retrieval pipeline: {@link createCache} builds a backend
 * from configuration; the key builders and the contract are re-exported.
 *
 * ```ts
 * const cache = createCache({ type: "redis", url: "redis://127.0.0.1:6379" });
 * const key = queryEmbeddingKey({ provider, model, text });
 * const vector = await getOrCompute(cache, key, () => embedder.embedQuery(text));
 * await cache.close();
 * ```
 */
import { ConfigError } from "../errors.js";
import {
  type Cache,
  type CacheKey,
  type CacheLogger,
  type CacheStats,
  checkNamespace,
  namespaceOf,
  StatsRecorder,
} from "./contract.js";
import { MemoryCache } from "./memory.js";
import { RedisCache } from "./redis.js";

export { decodeValue, encodeValue, FLOAT32_TAG } from "./codec.js";
export {
  CACHE_NAMESPACES,
  type Cache,
  type CacheKey,
  type CacheLogger,
  type CacheStats,
  consoleLogger,
  DEFAULT_TTL_SECONDS,
  getOrCompute,
  type NamespaceStats,
} from "./contract.js";
export {
  CACHE_KEY_SCHEMA,
  cacheKey,
  canonicalJson,
  type KeyMaterial,
  LIBRARY_VERSION,
  type QueryEmbeddingKeyInput,
  queryEmbeddingKey,
  type SearchResultKeyInput,
  searchResultKey,
  sha256Hex,
} from "./keys.js";
export { DEFAULT_MAX_ENTRIES, MemoryCache, type MemoryCacheOptions } from "./memory.js";
export {
  DEFAULT_COMMAND_TIMEOUT_MS,
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_REDIS_PREFIX,
  RedisCache,
  type RedisCacheOptions,
} from "./redis.js";

/** In-process cache (see {@link MemoryCache}). */
export interface MemoryCacheConfig {
  type: "memory";
  /** Maximum number of entries (positive integer). Default 10,000. */
  maxEntries?: number;
  /** Maximum total size of the encoded values in bytes (positive integer). Default: unbounded. */
  maxBytes?: number;
  /** Default time to live in seconds (> 0). Default 3,600. */
  ttlSeconds?: number;
}

/** Cache shared through Redis (see {@link RedisCache}). */
export interface RedisCacheConfig {
  type: "redis";
  /** `redis://host:port[/db]` or `rediss://…`. */
  url: string;
  /** Prefix of every key (non-empty). Default `kl:cache:`. */
  prefix?: string;
  /** Default time to live in seconds (> 0). Default 3,600. */
  ttlSeconds?: number;
  /** Connection timeout in milliseconds (positive integer). Default 1,000. */
  connectTimeoutMs?: number;
  /** Per-command timeout in milliseconds (positive integer). Default 500. */
  commandTimeoutMs?: number;
}

/** No caching: every `get` misses, writes do nothing. */
export interface NoCacheConfig {
  type: "none";
}

/** Configuration accepted by {@link createCache}. */
export type CacheConfig = MemoryCacheConfig | RedisCacheConfig | NoCacheConfig;

/** Options that are not configuration (not serialisable). */
export interface CreateCacheOptions {
  /** Receives backend warnings (Redis outages). Default `console.warn`. */
  logger?: CacheLogger;
}

/** The `none` backend: a cache that never holds anything but still validates its inputs and counts misses. */
export class NoCache<V = unknown> implements Cache<V> {
  readonly kind = "none";
  private readonly counters = new StatsRecorder();

  /** Always `undefined` (counted as a miss). @throws TypeError for a malformed key. */
  async get(key: CacheKey): Promise<V | undefined> {
    this.counters.miss(namespaceOf(key));
    return undefined;
  }
  /** Does nothing. @throws TypeError for a malformed key. */
  async set(key: CacheKey, _value: V, _ttlSeconds?: number): Promise<void> {
    namespaceOf(key);
  }
  /** Does nothing. @throws TypeError for a malformed key. */
  async delete(key: CacheKey): Promise<void> {
    namespaceOf(key);
  }
  /** Does nothing. @throws TypeError for a malformed namespace. */
  async clear(namespace?: string): Promise<void> {
    if (namespace !== undefined) checkNamespace(namespace);
  }
  /** Misses per namespace; `size` is always 0. */
  stats(): CacheStats {
    return this.counters.snapshot(0);
  }
  /** Does nothing. */
  async close(): Promise<void> {}
}

const FIELDS: Record<CacheConfig["type"], readonly string[]> = {
  memory: ["type", "maxEntries", "maxBytes", "ttlSeconds"],
  redis: ["type", "url", "prefix", "ttlSeconds", "connectTimeoutMs", "commandTimeoutMs"],
  none: ["type"],
};

function checkPositive(config: Record<string, unknown>, field: string, integer: boolean, unit: string): void {
  const value = config[field];
  if (value === undefined) return;
  if (
    typeof value !== "number" ||
    !Number.isFinite(value) ||
    value <= 0 ||
    (integer && !Number.isInteger(value))
  ) {
    throw new ConfigError(
      `cache.${field} must be a positive ${integer ? "integer" : "number"} (${unit}), got ${JSON.stringify(value) ?? String(value)}`,
    );
  }
}

/**
 * Checks a cache configuration without creating anything and returns it.
 * @throws ConfigError naming the offending field (`cache.type`, `cache.maxEntries`,
 *   `cache.url`, …): unknown type, unknown field, wrong type or out-of-range value.
 */
export function validateCacheConfig(config: CacheConfig): CacheConfig {
  if (config === null || typeof config !== "object" || Array.isArray(config)) {
    throw new ConfigError("cache configuration must be an object with a type");
  }
  const raw = config as unknown as Record<string, unknown>;
  const type = raw.type;
  if (type !== "memory" && type !== "redis" && type !== "none") {
    throw new ConfigError(
      `cache.type must be "memory", "redis" or "none", got ${JSON.stringify(type) ?? String(type)}`,
    );
  }
  for (const field of Object.keys(raw)) {
    if (!FIELDS[type].includes(field)) {
      throw new ConfigError(
        `cache.${field} is not a setting of a ${type} cache (allowed: ${FIELDS[type].join(", ")})`,
      );
    }
  }
  checkPositive(raw, "ttlSeconds", false, "seconds");
  if (type === "memory") {
    checkPositive(raw, "maxEntries", true, "entries");
    checkPositive(raw, "maxBytes", true, "bytes");
  }
  if (type === "redis") {
    const { url, prefix } = raw;
    if (typeof url !== "string" || url.length === 0) {
      throw new ConfigError("cache.url is required for a redis cache, e.g. redis://127.0.0.1:6379");
    }
    let protocol: string;
    try {
      protocol = new URL(url).protocol;
    } catch {
      throw new ConfigError(`cache.url is not a valid URL: ${JSON.stringify(url)}`);
    }
    if (protocol !== "redis:" && protocol !== "rediss:") {
      throw new ConfigError(`cache.url must start with redis:// or rediss://, got ${protocol}//…`);
    }
    if (prefix !== undefined && (typeof prefix !== "string" || prefix.length === 0)) {
      throw new ConfigError("cache.prefix must be a non-empty string");
    }
    checkPositive(raw, "connectTimeoutMs", true, "milliseconds");
    checkPositive(raw, "commandTimeoutMs", true, "milliseconds");
  }
  return config;
}

/**
 * Creates the cache described by `config` (see {@link CacheConfig}). A Redis
 * cache connects on first use and must be closed with `close()`.
 * @throws ConfigError naming the offending field when the configuration is invalid.
 */
export function createCache<V = unknown>(config: CacheConfig, options: CreateCacheOptions = {}): Cache<V> {
  validateCacheConfig(config);
  switch (config.type) {
    case "memory":
      return new MemoryCache<V>({
        maxEntries: config.maxEntries,
        maxBytes: config.maxBytes,
        ttlSeconds: config.ttlSeconds,
      });
    case "redis":
      return new RedisCache<V>({
        url: config.url,
        prefix: config.prefix,
        ttlSeconds: config.ttlSeconds,
        connectTimeoutMs: config.connectTimeoutMs,
        commandTimeoutMs: config.commandTimeoutMs,
        logger: options.logger,
      });
    case "none":
      return new NoCache<V>();
  }
}
