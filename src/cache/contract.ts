/**
 * The cache seam of the retrieval pipeline: a small async key-value contract
 * that the in-process (`MemoryCache`, memory.ts) and shared (`RedisCache`, redis.ts)
 * backends implement, so that query embeddings and search results can be
 * reused across calls and, with Redis, across processes.
 *
 * Keys are `<namespace>:<id>` strings built by `keys.ts` (namespaces such as
 * `query-embedding` and `search-result`). Values are JSON-serialisable data plus
 * `Float32Array` (see `codec.ts`); every read returns a fresh copy.
 *
 * Failure model: a backend failure (Redis down, a timeout, a corrupt entry)
 * never rejects — `get` resolves to `undefined` (a miss) and `set`/`delete`/
 * `clear` resolve without effect; the backend logs a warning. Only programming
 * errors reject: an invalid key, namespace or TTL, or a value that is not
 * JSON-serialisable (`TypeError`/`RangeError`).
 *
 * @module
 */

/** Namespaces used by the retrieval pipeline. Other namespaces may be used freely. */
export const CACHE_NAMESPACES = {
  /** Query vectors: key = hash of (provider, model, embedding options, text). */
  queryEmbedding: "query-embedding",
  /** Ranked search results: key = hash of (query, KB ids, every retrieval parameter, KB data versions). */
  searchResult: "search-result",
} as const;

/** Default time to live of an entry: 3,600 seconds (one hour). */
export const DEFAULT_TTL_SECONDS = 3600;

/**
 * A cache key: `<namespace>:<id>`. The namespace is 1–64 characters of
 * lowercase letters, digits and hyphens, starting with a letter or digit; the
 * id is any non-empty text (the key builders use a SHA-256 hex digest).
 */
export type CacheKey = `${string}:${string}`;

/** Hit and miss counters of one namespace. */
export interface NamespaceStats {
  hits: number;
  misses: number;
}

/** Counters of a cache instance since it was created (this process only). */
export interface CacheStats {
  /** `get` calls that returned a value. */
  hits: number;
  /** `get` calls that returned `undefined` (absent, expired, or the backend failed). */
  misses: number;
  /** `set` calls that stored a value. */
  sets: number;
  /** Backend failures (connection, timeout, corrupt entry), each also counted as a miss or a skipped write. */
  errors: number;
  /** Entries held, where the backend knows it synchronously (memory: yes; Redis: omitted). */
  size?: number;
  /** Hits and misses per namespace. */
  namespaces: Record<string, NamespaceStats>;
}

/**
 * An async key-value cache with per-entry expiry.
 *
 * `V` is the type of the values this handle reads and writes; it must be
 * JSON-serialisable (plus `Float32Array`), which `set` checks at run time.
 * Returned values are always copies: mutating one changes neither the cache
 * nor what the next caller gets, and mutating an object after passing it to
 * `set` does not change the stored entry.
 */
export interface Cache<V = unknown> {
  /** Backend name, for logs and diagnostics. */
  readonly kind: "memory" | "redis" | "none";
  /**
   * The value stored under `key`, or `undefined` when it is absent, expired,
   * or the backend failed (never rejects for a backend failure).
   * @throws TypeError for a malformed key.
   */
  get(key: CacheKey): Promise<V | undefined>;
  /**
   * Stores a copy of `value` under `key` for `ttlSeconds` seconds (default: the
   * cache's TTL, itself 3,600 s unless configured). Fractions of a second are
   * allowed. A backend failure is logged and ignored.
   * @throws TypeError for a malformed key or a value that is not JSON-serialisable.
   * @throws RangeError when `ttlSeconds` is not a positive finite number.
   */
  set(key: CacheKey, value: V, ttlSeconds?: number): Promise<void>;
  /** Removes `key` if present. @throws TypeError for a malformed key. */
  delete(key: CacheKey): Promise<void>;
  /**
   * Removes every entry of `namespace`, or every entry of this cache when
   * omitted (for Redis: every key under this cache's prefix, nothing else).
   * @throws TypeError for a malformed namespace.
   */
  clear(namespace?: string): Promise<void>;
  /** Counters since creation (see {@link CacheStats}). */
  stats(): CacheStats;
  /**
   * Releases the backend (Redis: waits for pending commands, then quits the
   * connection). Idempotent. Afterwards `get` returns `undefined` and writes do nothing.
   */
  close(): Promise<void>;
}

/** Receives the warnings a cache logs when its backend fails. Default: `console.warn`. */
export type CacheLogger = (message: string) => void;

/** The default {@link CacheLogger}. */
export const consoleLogger: CacheLogger = (message) => console.warn(message);

const NAMESPACE = /^[a-z0-9][a-z0-9-]{0,63}$/;

/** Maximum length of a key in UTF-16 code units (namespace, colon and id). */
export const MAX_KEY_LENGTH = 1024;

/**
 * Checks a namespace name (see {@link CacheKey}) and returns it.
 * @throws TypeError naming the bad namespace.
 */
export function checkNamespace(namespace: string): string {
  if (typeof namespace !== "string" || !NAMESPACE.test(namespace)) {
    throw new TypeError(
      `cache namespace ${JSON.stringify(namespace)} is invalid: use 1-64 lowercase letters, digits and hyphens`,
    );
  }
  return namespace;
}

/**
 * Returns the namespace part of a key after checking the whole key.
 * @throws TypeError for a key that is not `<namespace>:<non-empty id>` or longer than {@link MAX_KEY_LENGTH}.
 */
export function namespaceOf(key: CacheKey): string {
  if (typeof key !== "string") throw new TypeError(`cache key must be a string, got ${typeof key}`);
  const colon = key.indexOf(":");
  if (colon < 0 || colon === key.length - 1 || key.length > MAX_KEY_LENGTH) {
    throw new TypeError(
      `cache key ${JSON.stringify(key.slice(0, 80))} is invalid: expected "<namespace>:<id>" of at most ${MAX_KEY_LENGTH} characters`,
    );
  }
  return checkNamespace(key.slice(0, colon));
}

/**
 * Checks a TTL in seconds and returns it in whole milliseconds (rounded up, at least 1).
 * @throws RangeError when it is not a positive finite number.
 */
export function ttlMilliseconds(ttlSeconds: number, field = "ttlSeconds"): number {
  if (typeof ttlSeconds !== "number" || !Number.isFinite(ttlSeconds) || ttlSeconds <= 0) {
    throw new RangeError(`${field} must be a positive number of seconds, got ${String(ttlSeconds)}`);
  }
  return Math.max(1, Math.ceil(ttlSeconds * 1000));
}

/** Mutable counters behind {@link Cache.stats}; shared by the backends. */
export class StatsRecorder {
  private hits = 0;
  private misses = 0;
  private sets = 0;
  private errors = 0;
  private readonly byNamespace = new Map<string, NamespaceStats>();

  private ns(namespace: string): NamespaceStats {
    let entry = this.byNamespace.get(namespace);
    if (!entry) {
      entry = { hits: 0, misses: 0 };
      this.byNamespace.set(namespace, entry);
    }
    return entry;
  }

  /** Counts a hit in `namespace`. */
  hit(namespace: string): void {
    this.hits++;
    this.ns(namespace).hits++;
  }

  /** Counts a miss in `namespace`. */
  miss(namespace: string): void {
    this.misses++;
    this.ns(namespace).misses++;
  }

  /** Counts a stored value. */
  stored(): void {
    this.sets++;
  }

  /** Counts a backend failure. */
  failed(): void {
    this.errors++;
  }

  /** A snapshot (a fresh object) of the counters, with `size` when given. */
  snapshot(size?: number): CacheStats {
    const namespaces: Record<string, NamespaceStats> = {};
    for (const [name, s] of this.byNamespace) namespaces[name] = { ...s };
    const out: CacheStats = {
      hits: this.hits,
      misses: this.misses,
      sets: this.sets,
      errors: this.errors,
      namespaces,
    };
    if (size !== undefined) out.size = size;
    return out;
  }
}

/**
 * Returns the cached value under `key`, or computes it with `compute`, stores
 * it (for `ttlSeconds`, default the cache's TTL) and returns it. Concurrent
 * misses on one key each compute (no single-flight).
 * @throws whatever `compute` throws (nothing is stored then), and the errors of {@link Cache.set}
 *   for a value that is not JSON-serialisable.
 */
export async function getOrCompute<V>(
  cache: Cache<V>,
  key: CacheKey,
  compute: () => V | Promise<V>,
  ttlSeconds?: number,
): Promise<V> {
  const cached = await cache.get(key);
  if (cached !== undefined) return cached;
  const value = await compute();
  await cache.set(key, value, ttlSeconds);
  return value;
}
