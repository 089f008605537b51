/**
 * In-process cache backend on `lru-cache`: bounded by entries (and optionally
 * bytes) with least-recently-used eviction and per-entry expiry.
 *
 * Entries are stored encoded (JSON text, see `codec.ts`), so every `get`
 * decodes a fresh copy and nothing the caller holds is ever shared with the
 * cache. The cost is one `JSON.parse` per hit, small next to an embedding or a
 * search.
 */
import { LRUCache } from "lru-cache";
import { decodeValue, encodedBytes, encodeValue } from "./codec.js";
import {
  type Cache,
  type CacheKey,
  type CacheStats,
  checkNamespace,
  DEFAULT_TTL_SECONDS,
  namespaceOf,
  StatsRecorder,
  ttlMilliseconds,
} from "./contract.js";

/** Default bound on the number of entries of a {@link MemoryCache}: 10,000. */
export const DEFAULT_MAX_ENTRIES = 10_000;

/** Options of {@link MemoryCache}. */
export interface MemoryCacheOptions {
  /** Maximum number of entries (a positive integer); the least recently used is evicted beyond it. Default 10,000. */
  maxEntries?: number;
  /**
   * Maximum total size in bytes of the encoded values (UTF-8 JSON, keys not
   * counted), a positive integer; least recently used entries are evicted
   * beyond it, and a single value larger than this is not stored (any older
   * entry under its key is removed). Default: no byte bound.
   */
  maxBytes?: number;
  /** Default time to live of an entry, in seconds (> 0, fractions allowed). Default 3,600. */
  ttlSeconds?: number;
  /**
   * Clock for expiry, returning milliseconds (for tests: a fake clock).
   * Default `performance.now`.
   */
  clock?: { now(): number };
}

function positiveInteger(value: number | undefined, field: string): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1) {
    throw new RangeError(`${field} must be a positive integer, got ${String(value)}`);
  }
  return value;
}

/**
 * In-process LRU cache with expiry (see the module comment).
 *
 * `get` counts as a use for LRU order; it does not extend the entry's TTL.
 * Expired entries are dropped when next read or when evicted.
 */
export class MemoryCache<V = unknown> implements Cache<V> {
  readonly kind = "memory";
  private readonly lru: LRUCache<string, string>;
  private readonly defaultTtlMs: number;
  private readonly counters = new StatsRecorder();
  private closed = false;

  /**
   * @throws RangeError when `maxEntries` or `maxBytes` is not a positive integer, or `ttlSeconds` is not positive.
   */
  constructor(options: MemoryCacheOptions = {}) {
    const max = positiveInteger(options.maxEntries, "maxEntries") ?? DEFAULT_MAX_ENTRIES;
    const maxBytes = positiveInteger(options.maxBytes, "maxBytes");
    this.defaultTtlMs = ttlMilliseconds(options.ttlSeconds ?? DEFAULT_TTL_SECONDS);
    this.lru = new LRUCache<string, string>({
      max,
      ttl: this.defaultTtlMs,
      ...(maxBytes !== undefined ? { maxSize: maxBytes, sizeCalculation: (text) => encodedBytes(text) } : {}),
      // A fake clock must be read on every check; the real one may be sampled once per millisecond.
      ...(options.clock ? { perf: options.clock, ttlResolution: 0 } : {}),
    });
  }

  /** See {@link Cache.get}. */
  async get(key: CacheKey): Promise<V | undefined> {
    const namespace = namespaceOf(key);
    const text = this.closed ? undefined : this.lru.get(key);
    if (text === undefined) {
      this.counters.miss(namespace);
      return undefined;
    }
    this.counters.hit(namespace);
    return decodeValue(text) as V;
  }

  /**
   * See {@link Cache.set}. A value larger than `maxBytes` is not stored, and any
   * previous entry under `key` is removed (a later `get` never returns the older value).
   */
  async set(key: CacheKey, value: V, ttlSeconds?: number): Promise<void> {
    namespaceOf(key);
    const ttl = ttlSeconds === undefined ? this.defaultTtlMs : ttlMilliseconds(ttlSeconds);
    const text = encodeValue(value);
    if (this.closed) return;
    this.lru.set(key, text, { ttl });
    if (this.lru.has(key)) this.counters.stored();
  }

  /** See {@link Cache.delete}. */
  async delete(key: CacheKey): Promise<void> {
    namespaceOf(key);
    this.lru.delete(key);
  }

  /** See {@link Cache.clear}. */
  async clear(namespace?: string): Promise<void> {
    if (namespace === undefined) {
      this.lru.clear();
      return;
    }
    const prefix = `${checkNamespace(namespace)}:`;
    for (const key of [...this.lru.keys()]) if (key.startsWith(prefix)) this.lru.delete(key);
  }

  /** See {@link Cache.stats}; `size` is the number of entries held (expired ones not yet dropped included). */
  stats(): CacheStats {
    return this.counters.snapshot(this.lru.size);
  }

  /** Drops every entry; afterwards reads miss and writes do nothing. */
  async close(): Promise<void> {
    this.closed = true;
    this.lru.clear();
  }
}
