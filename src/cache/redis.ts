/**
 * Redis cache backend (node-redis v6 client): one cache shared by every
 * process that points at the same server and prefix.
 *
 * Storage: an entry with key `<namespace>:<id>` is the Redis string
 * `<prefix><namespace>:<id>` (default prefix `kl:cache:`), holding the
 * value's JSON (`Float32Array`s as base64 of their little-endian bytes, see
 * `codec.ts`), written with `SET … PX <ttl in ms>` so Redis expires it.
 *
 * Failure behaviour (the cache never fails a search):
 * - the connection is opened on first use; while it is not ready (Redis down,
 *   unreachable, restarting) every `get` resolves to `undefined` (a miss) and
 *   `set`/`delete`/`clear` resolve without effect — commands are not queued
 *   for later;
 * - an operation without a reply within `commandTimeoutMs` is abandoned the same
 *   way, and the cache then skips Redis for 1 s (so a hung server costs one
 *   timeout per second, not one per call, and commands do not pile up on it);
 * - a stored entry that cannot be decoded is a miss, and is removed;
 * - the client keeps reconnecting in the background (backoff 50 ms doubling up
 *   to 2 s), and the cache is used again as soon as Redis answers;
 * - each outage is logged once through the logger (`console.warn` by default)
 *   when it starts and once when Redis is back; the URL's password is never logged;
 * - operations wait for the first connection attempt (at most
 *   `connectTimeoutMs` + `commandTimeoutMs`, for the TCP connection and the
 *   handshake); once it has failed or succeeded, none waits for a connection.
 * Invalid keys, TTLs and values still reject (programming errors), as for every backend.
 */
import { createClient } from "redis";
import { maskUrl, redactText } from "../secrets.js";
import { decodeValue, encodeValue } from "./codec.js";
import {
  type Cache,
  type CacheKey,
  type CacheLogger,
  type CacheStats,
  checkNamespace,
  consoleLogger,
  DEFAULT_TTL_SECONDS,
  namespaceOf,
  StatsRecorder,
  ttlMilliseconds,
} from "./contract.js";

/** Default key prefix of {@link RedisCache}. */
export const DEFAULT_REDIS_PREFIX = "kl:cache:";
/** Default time allowed to open a connection: 1,000 ms. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 1000;
/** Default time allowed for one command before it counts as failed: 500 ms. */
export const DEFAULT_COMMAND_TIMEOUT_MS = 500;
/** After a command times out, the cache skips Redis (serving misses) for this long: 1,000 ms. */
export const SUSPEND_AFTER_TIMEOUT_MS = 1000;
/** Name the cache's connections carry in `CLIENT LIST`. */
export const REDIS_CLIENT_NAME = "knowledge-layer-cache";

/** Options of {@link RedisCache}. */
export interface RedisCacheOptions {
  /** Server URL: `redis[s]://[[user]:password@]host[:port][/db]`, e.g. `redis://127.0.0.1:6379`. */
  url: string;
  /** Prefix of every Redis key this cache writes (non-empty). Default `kl:cache:`. */
  prefix?: string;
  /** Default time to live of an entry, in seconds (> 0, fractions allowed). Default 3,600. */
  ttlSeconds?: number;
  /** Time allowed to open a connection, in milliseconds (positive integer). Default 1,000. */
  connectTimeoutMs?: number;
  /** Time allowed for one command, in milliseconds (positive integer). Default 500. */
  commandTimeoutMs?: number;
  /** Receives outage warnings. Default `console.warn`. */
  logger?: CacheLogger;
}

type Client = ReturnType<typeof createClient>;

/** An operation got no reply in time (the server may be hung). */
class ReplyTimeoutError extends Error {
  constructor(ms: number) {
    super(`no reply within ${ms} ms`);
    this.name = "ReplyTimeoutError";
  }
}

/** Escapes the glob characters of a `SCAN MATCH` pattern. */
function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\]/g, "\\$&");
}

function message(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    const text = error.message || error.name;
    return redactText(typeof code === "string" && !text.includes(code) ? `${code} ${text}` : text);
  }
  return redactText(String(error));
}

function positiveInteger(value: number | undefined, field: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1) {
    throw new RangeError(`${field} must be a positive integer of milliseconds, got ${String(value)}`);
  }
  return value;
}

/**
 * Redis-backed {@link Cache} (see the module comment for storage and failure behaviour).
 * Call {@link RedisCache.close} when done: an open connection keeps the process alive.
 */
export class RedisCache<V = unknown> implements Cache<V> {
  readonly kind = "redis";
  /** The key prefix in use. */
  readonly prefix: string;
  private readonly client: Client;
  private readonly defaultTtlMs: number;
  private readonly logger: CacheLogger;
  private readonly where: string;
  private readonly counters = new StatsRecorder();
  /** Settles when the first connection attempt succeeded or failed. */
  private firstAttempt: Promise<void> | undefined;
  private state: "idle" | "up" | "down" | "closed" = "idle";
  /** True after a command failed while connected, until one succeeds (one warning per streak). */
  private failing = false;
  /** After a command timed out, operations are skipped (misses) until this time (ms since epoch). */
  private suspendedUntil = 0;
  private readonly commandTimeoutMs: number;
  private readonly connectTimeoutMs: number;

  /**
   * Creates the client; the connection is opened on first use.
   * @throws TypeError when `url` is not a `redis:`/`rediss:` URL or `prefix` is empty.
   * @throws RangeError for a non-positive TTL or timeout.
   */
  constructor(options: RedisCacheOptions) {
    let parsed: URL;
    try {
      parsed = new URL(options.url);
    } catch {
      throw new TypeError(`url ${JSON.stringify(String(options.url))} is not a valid URL`);
    }
    if (parsed.protocol !== "redis:" && parsed.protocol !== "rediss:") {
      throw new TypeError(`url must start with redis:// or rediss://, got ${maskUrl(options.url)}`);
    }
    const prefix = options.prefix ?? DEFAULT_REDIS_PREFIX;
    if (typeof prefix !== "string" || prefix.length === 0) {
      throw new TypeError(
        "prefix must be a non-empty string (an empty prefix would let clear() wipe the database)",
      );
    }
    this.prefix = prefix;
    this.defaultTtlMs = ttlMilliseconds(options.ttlSeconds ?? DEFAULT_TTL_SECONDS);
    const connectTimeout = positiveInteger(
      options.connectTimeoutMs,
      "connectTimeoutMs",
      DEFAULT_CONNECT_TIMEOUT_MS,
    );
    const commandTimeout = positiveInteger(
      options.commandTimeoutMs,
      "commandTimeoutMs",
      DEFAULT_COMMAND_TIMEOUT_MS,
    );
    this.commandTimeoutMs = commandTimeout;
    this.connectTimeoutMs = connectTimeout;
    this.logger = options.logger ?? consoleLogger;
    this.where = maskUrl(options.url);
    this.client = createClient({
      url: options.url,
      name: REDIS_CLIENT_NAME,
      // Fail fast instead of queueing commands while disconnected: a cache miss is cheaper than a wait.
      disableOfflineQueue: true,
      commandOptions: { timeout: commandTimeout },
      socket: {
        connectTimeout,
        reconnectStrategy: (retries: number) => Math.min(50 * 2 ** Math.min(retries, 6), 2000),
      },
    });
    this.client.on("error", (error: unknown) => this.markDown(error));
    this.client.on("ready", () => this.markUp());
  }

  private markDown(error: unknown): void {
    if (this.state === "closed" || this.state === "down") return;
    this.state = "down";
    this.logger(
      `cache: Redis at ${this.where} is unavailable (${message(error)}); serving cache misses until it reconnects`,
    );
  }

  private markUp(): void {
    if (this.state === "closed") return;
    if (this.state === "down") this.logger(`cache: Redis at ${this.where} is available again`);
    this.state = "up";
    this.failing = false;
  }

  /** Opens the connection on first use and waits for the first attempt's outcome; true when ready. */
  private async ready(): Promise<boolean> {
    if (this.state === "closed") return false;
    if (!this.firstAttempt) {
      this.firstAttempt = new Promise<void>((resolve) => {
        this.client.once("ready", () => resolve());
        this.client.once("error", () => resolve());
        this.client.connect().then(
          () => resolve(),
          (error: unknown) => {
            this.markDown(error);
            resolve();
          },
        );
      });
    }
    if (this.state === "idle") {
      // A server that accepts the connection but never answers the handshake must not hold us up either.
      let timer: NodeJS.Timeout | undefined;
      const limit = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, this.connectTimeoutMs + this.commandTimeoutMs);
      });
      await Promise.race([this.firstAttempt, limit]);
      clearTimeout(timer);
      if (this.state === "idle" && !this.client.isReady) {
        this.markDown(new Error(`no connection within ${this.connectTimeoutMs + this.commandTimeoutMs} ms`));
      }
    }
    return this.client.isReady;
  }

  /**
   * Runs one Redis operation, bounded by `commandTimeoutMs`; a failure is
   * logged (once per streak), counted, and turned into `undefined`.
   */
  private async run<T>(operation: string, fn: (client: Client) => Promise<T>): Promise<T | undefined> {
    if (!(await this.ready())) {
      if (this.state !== "closed") this.counters.failed();
      return undefined;
    }
    if (Date.now() < this.suspendedUntil) {
      this.counters.failed();
      return undefined;
    }
    let timer: NodeJS.Timeout | undefined;
    try {
      const pending = fn(this.client);
      // node-redis's own timeout stops at the write; a server that stops answering needs this one.
      pending.catch(() => {});
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new ReplyTimeoutError(this.commandTimeoutMs)), this.commandTimeoutMs);
      });
      const result = await Promise.race([pending, timeout]);
      this.failing = false;
      return result;
    } catch (error) {
      this.counters.failed();
      if (error instanceof ReplyTimeoutError) {
        this.suspendedUntil = Date.now() + SUSPEND_AFTER_TIMEOUT_MS;
      }
      // Errors while disconnected were already reported by the connection's 'error' event.
      if (this.client.isReady && !this.failing) {
        this.failing = true;
        this.logger(
          `cache: Redis ${operation} at ${this.where} failed (${message(error)}); treating it as a cache miss`,
        );
      }
      return undefined;
    } finally {
      clearTimeout(timer);
    }
  }

  /** See {@link Cache.get}. A backend failure or an undecodable entry (then removed) is a miss. */
  async get(key: CacheKey): Promise<V | undefined> {
    const namespace = namespaceOf(key);
    const text = await this.run("GET", (client) => client.get(this.prefix + key));
    if (typeof text !== "string") {
      this.counters.miss(namespace);
      return undefined;
    }
    try {
      const value = decodeValue(text) as V;
      this.counters.hit(namespace);
      return value;
    } catch (error) {
      this.counters.failed();
      this.counters.miss(namespace);
      this.logger(
        `cache: entry ${this.prefix + key} in Redis cannot be decoded (${message(error)}); removed`,
      );
      await this.run("UNLINK", (client) => client.unlink(this.prefix + key));
      return undefined;
    }
  }

  /** See {@link Cache.set}. Uses `SET key value PX ttl`. */
  async set(key: CacheKey, value: V, ttlSeconds?: number): Promise<void> {
    namespaceOf(key);
    const ttl = ttlSeconds === undefined ? this.defaultTtlMs : ttlMilliseconds(ttlSeconds);
    const text = encodeValue(value);
    const reply = await this.run("SET", (client) =>
      client.set(this.prefix + key, text, { expiration: { type: "PX", value: ttl } }),
    );
    if (reply !== undefined) this.counters.stored();
  }

  /** See {@link Cache.delete}. */
  async delete(key: CacheKey): Promise<void> {
    namespaceOf(key);
    await this.run("UNLINK", (client) => client.unlink(this.prefix + key));
  }

  /**
   * See {@link Cache.clear}. Walks the keys under the prefix (and namespace)
   * with `SCAN` and unlinks each batch; each step is bounded by
   * `commandTimeoutMs`, and a failed step ends the walk (the rest expire by TTL).
   * Keys written meanwhile may survive.
   */
  async clear(namespace?: string): Promise<void> {
    const pattern = `${escapeGlob(this.prefix)}${namespace === undefined ? "" : `${escapeGlob(checkNamespace(namespace))}:`}*`;
    let cursor = "0";
    do {
      const reply = await this.run("SCAN", (client) => client.scan(cursor, { MATCH: pattern, COUNT: 500 }));
      if (!reply) return;
      if (reply.keys.length > 0) {
        const removed = await this.run("UNLINK", (client) => client.unlink(reply.keys));
        if (removed === undefined) return;
      }
      cursor = String(reply.cursor);
    } while (cursor !== "0");
  }

  /** See {@link Cache.stats}. `size` is omitted (it would need a server round trip). */
  stats(): CacheStats {
    return this.counters.snapshot();
  }

  /**
   * Quits the connection after pending commands complete (or drops it at once
   * if Redis is unreachable). Idempotent; never rejects.
   */
  async close(): Promise<void> {
    if (this.state === "closed") return;
    this.state = "closed";
    if (!this.client.isOpen) return;
    try {
      if (this.client.isReady) await this.client.close();
      else this.client.destroy();
    } catch {
      this.client.destroy();
    }
  }
}
