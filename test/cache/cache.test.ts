/**
 * Cache layer: one behavioural suite run against every backend (memory, Redis),
 * backend-specific checks (LRU order, byte bound, fake-clock TTL; Redis sharing,
 * storage format, outages, timeouts), the key builders, createCache validation,
 * and shared case B32 (cache keys that ignore parameters serve stale results).
 *
 * The Redis tests start a throwaway `redis-server` (test/helpers/redis-server.ts). When
 * the binary is missing they are skipped with a visible reason, except under CI
 * (`CI` set), where they fail: CI must install it.
 */
import { readFileSync } from "node:fs";
import { createClient } from "redis";
import { afterAll, afterEach, beforeAll, describe, expect, test } from "vitest";
import {
  CACHE_KEY_SCHEMA,
  CACHE_NAMESPACES,
  type Cache,
  type CacheKey,
  cacheKey,
  canonicalJson,
  createCache,
  DEFAULT_REDIS_PREFIX,
  decodeValue,
  encodeValue,
  getOrCompute,
  LIBRARY_VERSION,
  MemoryCache,
  NoCache,
  queryEmbeddingKey,
  RedisCache,
  searchResultKey,
  sha256Hex,
} from "../../src/cache/index.js";
import { createFixedChunker } from "../../src/chunk/fixed.js";
import { ConfigError } from "../../src/errors.js";
import type { Chunk, ExtractedDocument } from "../../src/types.js";
import { readShared } from "../helpers/chunk-helpers.js";
import { findRedisServer, freePort, type RedisServer, startRedisServer } from "../helpers/redis-server.js";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Caches created by a test, closed after it. */
const open: Cache<unknown>[] = [];
function track<C extends Cache<unknown>>(cache: C): C {
  open.push(cache);
  return cache;
}
afterEach(async () => {
  await Promise.all(open.splice(0).map((cache) => cache.close()));
});

/** A logger that collects warnings instead of printing them. */
function collector(): { logger: (message: string) => void; messages: string[] } {
  const messages: string[] = [];
  return { logger: (message) => messages.push(message), messages };
}

const k = (namespace: string, id: string) => `${namespace}:${id}` as CacheKey;
const SR = CACHE_NAMESPACES.searchResult;
const QE = CACHE_NAMESPACES.queryEmbedding;

/** Float32 values that must survive bit-exactly (signed zero, NaN, infinities, subnormals, extremes). */
const SPECIAL_FLOATS = [0, -0, 1 / 3, -1e-30, 3.4e38, Number.NaN, Number.POSITIVE_INFINITY, -Infinity, 1e-45];

function expectSameFloats(actual: unknown, expected: Float32Array): void {
  expect(actual).toBeInstanceOf(Float32Array);
  const got = actual as Float32Array;
  expect(got.length).toBe(expected.length);
  for (let i = 0; i < expected.length; i++) expect(Object.is(got[i], expected[i])).toBe(true);
}

type Make = (options?: { ttlSeconds?: number }) => Cache<unknown>;

/** The behaviour every backend must have. `make` creates a fresh, empty cache. */
function behaviouralSuite(make: Make): void {
  test("a missing key is undefined and counts a miss", async () => {
    const cache = make();
    expect(await cache.get(k(SR, "absent"))).toBeUndefined();
    const stats = cache.stats();
    expect(stats.misses).toBe(1);
    expect(stats.hits).toBe(0);
    expect(stats.namespaces[SR]).toEqual({ hits: 0, misses: 1 });
  });

  test("JSON values round-trip (undefined properties dropped, strings exact)", async () => {
    const cache = make();
    const value = {
      text: 'naïve café — 東京 😀 \u0000 tab\t quote" backslash\\ lone\ud800surrogate',
      numbers: [0, -1.5, 1e300, Number.MAX_SAFE_INTEGER, 5e-324],
      flags: [true, false, null],
      nested: { empty: {}, list: [[], [{ a: 1 }]] },
      dropped: undefined,
    };
    await cache.set(k(SR, "json"), value);
    const { dropped: _, ...expected } = value;
    const got = await cache.get(k(SR, "json"));
    expect(got).toEqual(expected);
    expect(Object.hasOwn(got as object, "dropped")).toBe(false);
    for (const scalar of ["plain", 42, true, null, [1, "two"]]) {
      await cache.set(k(SR, "scalar"), scalar);
      expect(await cache.get(k(SR, "scalar"))).toEqual(scalar);
    }
  });

  test("Float32Array values round-trip bit-exactly, also as views and nested", async () => {
    const cache = make();
    const special = Float32Array.from(SPECIAL_FLOATS);
    await cache.set(k(QE, "special"), special);
    expectSameFloats(await cache.get(k(QE, "special")), special);

    const vector = Float32Array.from({ length: 512 }, (_, i) => Math.sin(i) / (i + 1));
    await cache.set(k(QE, "vector"), vector);
    expectSameFloats(await cache.get(k(QE, "vector")), vector);

    // A view into a larger buffer, at an odd byte offset of the backing store: only the view is stored.
    const backing = new ArrayBuffer(4 * 10);
    const view = new Float32Array(backing, 8, 3);
    view.set([1.5, -2.25, 3.125]);
    await cache.set(k(QE, "view"), view);
    expectSameFloats(await cache.get(k(QE, "view")), Float32Array.of(1.5, -2.25, 3.125));

    await cache.set(k(QE, "empty"), new Float32Array(0));
    expectSameFloats(await cache.get(k(QE, "empty")), new Float32Array(0));

    await cache.set(k(SR, "nested"), { hits: [{ id: "a", vector: Float32Array.of(0.5, -0.5) }] });
    const nested = (await cache.get(k(SR, "nested"))) as { hits: { id: string; vector: Float32Array }[] };
    expect(nested.hits[0]?.id).toBe("a");
    expectSameFloats(nested.hits[0]?.vector, Float32Array.of(0.5, -0.5));
  });

  test("returns copies: neither the stored value nor the next reader sees a caller's mutations", async () => {
    const cache = make();
    const hit = { id: "a", score: 0.9, tags: ["x"] };
    const value = { results: [hit], vector: Float32Array.of(1, 2, 3) };
    await cache.set(k(SR, "copy"), value);
    // Mutating what was passed to set() does not change the entry.
    hit.score = 99;
    value.results.push({ id: "b", score: 0, tags: [] });
    value.vector[0] = 42;
    const expected = { results: [{ id: "a", score: 0.9, tags: ["x"] }], vector: Float32Array.of(1, 2, 3) };

    const first = (await cache.get(k(SR, "copy"))) as typeof value;
    expect(first).toEqual(expected);
    // Mutating what get() returned does not change what the next caller gets.
    (first.results[0] as typeof hit).tags.push("mutated");
    first.results.length = 0;
    first.vector[1] = -7;
    const second = (await cache.get(k(SR, "copy"))) as typeof value;
    expect(second).toEqual(expected);
    expect(second).not.toBe(first);
    expect(second.vector).not.toBe(first.vector);
    expect(second.vector.buffer).not.toBe(first.vector.buffer);
  });

  test("namespaces are separate; clear(namespace) clears one, clear() all", async () => {
    const cache = make();
    await cache.set(k(SR, "same-id"), "result");
    await cache.set(k(QE, "same-id"), Float32Array.of(1));
    await cache.set(k("other", "x"), 1);
    expect(await cache.get(k(SR, "same-id"))).toBe("result");
    expectSameFloats(await cache.get(k(QE, "same-id")), Float32Array.of(1));

    await cache.clear(SR);
    expect(await cache.get(k(SR, "same-id"))).toBeUndefined();
    expectSameFloats(await cache.get(k(QE, "same-id")), Float32Array.of(1));
    expect(await cache.get(k("other", "x"))).toBe(1);

    await cache.clear();
    expect(await cache.get(k(QE, "same-id"))).toBeUndefined();
    expect(await cache.get(k("other", "x"))).toBeUndefined();

    const stats = cache.stats();
    expect(stats.namespaces[SR]).toEqual({ hits: 1, misses: 1 });
    expect(stats.namespaces[QE]).toEqual({ hits: 2, misses: 1 });
    expect(stats.namespaces.other).toEqual({ hits: 1, misses: 1 });
  });

  test("set overwrites, delete removes", async () => {
    const cache = make();
    await cache.set(k(SR, "a"), 1);
    await cache.set(k(SR, "a"), 2);
    expect(await cache.get(k(SR, "a"))).toBe(2);
    await cache.delete(k(SR, "a"));
    expect(await cache.get(k(SR, "a"))).toBeUndefined();
    await cache.delete(k(SR, "never-set")); // no error
  });

  test("stats count hits, misses and sets", async () => {
    const cache = make();
    await cache.set(k(SR, "a"), "x");
    await cache.set(k(SR, "b"), "y");
    await cache.get(k(SR, "a"));
    await cache.get(k(SR, "a"));
    await cache.get(k(SR, "missing"));
    const stats = cache.stats();
    expect(stats).toMatchObject({ hits: 2, misses: 1, sets: 2, errors: 0 });
    // stats() is a snapshot.
    stats.hits = 100;
    expect(cache.stats().hits).toBe(2);
  });

  test("entries expire after their TTL (per-entry and default)", async () => {
    const cache = make({ ttlSeconds: 0.1 });
    await cache.set(k(SR, "short"), "gone soon");
    await cache.set(k(SR, "per-entry"), "kept", 60);
    expect(await cache.get(k(SR, "short"))).toBe("gone soon");
    await sleep(250);
    expect(await cache.get(k(SR, "short"))).toBeUndefined();
    expect(await cache.get(k(SR, "per-entry"))).toBe("kept");
  });

  test("getOrCompute computes once, then serves the cached copy", async () => {
    const cache = make();
    let calls = 0;
    const compute = () => {
      calls++;
      return { answer: 42 };
    };
    expect(await getOrCompute(cache, k(SR, "memo"), compute)).toEqual({ answer: 42 });
    expect(await getOrCompute(cache, k(SR, "memo"), compute)).toEqual({ answer: 42 });
    expect(calls).toBe(1);
  });

  test("invalid keys, values and TTLs reject (programming errors), and nothing is stored", async () => {
    const cache = make();
    for (const key of ["no-namespace", "Upper:x", ":x", "ns:", "has space:x", `ns:${"x".repeat(2000)}`]) {
      await expect(cache.get(key as CacheKey), key).rejects.toThrow(TypeError);
      await expect(cache.set(key as CacheKey, 1), key).rejects.toThrow(TypeError);
    }
    await expect(cache.clear("Bad Namespace")).rejects.toThrow(TypeError);
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const bad: [unknown, RegExp][] = [
      [undefined, /undefined/],
      [Number.NaN, /finite/],
      [{ a: [1, Number.POSITIVE_INFINITY] }, /\$\.a\[1\]/],
      [new Map(), /Map/],
      [{ when: new Date(0) }, /\$\.when: Date/],
      [cyclic, /cyclic/],
      [() => 1, /function/],
      [10n, /bigint/],
      [[1, undefined], /undefined in an array/],
      [Int8Array.of(1), /Int8Array/],
      [{ "$kl:f32": "AAAA" }, /reserved/],
    ];
    for (const [value, message] of bad) {
      await expect(cache.set(k(SR, "bad"), value), String(message)).rejects.toThrow(message);
    }
    for (const ttl of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
      await expect(cache.set(k(SR, "bad"), 1, ttl), String(ttl)).rejects.toThrow(RangeError);
    }
    expect(await cache.get(k(SR, "bad"))).toBeUndefined();
    expect(cache.stats().sets).toBe(0);
  });

  test("close() is idempotent; afterwards reads miss and writes are ignored", async () => {
    const cache = make();
    await cache.set(k(SR, "a"), 1);
    await cache.close();
    await cache.close();
    expect(await cache.get(k(SR, "a"))).toBeUndefined();
    await cache.set(k(SR, "a"), 2);
    await cache.delete(k(SR, "a"));
    await cache.clear();
  });
}

// ---------------------------------------------------------------- memory

describe("memory backend", () => {
  describe("behaviour", () => behaviouralSuite((options) => track(new MemoryCache(options))));

  test("evicts the least recently used entry beyond maxEntries (get refreshes recency)", async () => {
    const cache = track(new MemoryCache({ maxEntries: 3 }));
    await cache.set(k(SR, "a"), "a");
    await cache.set(k(SR, "b"), "b");
    await cache.set(k(SR, "c"), "c");
    expect(await cache.get(k(SR, "a"))).toBe("a"); // order now b, c, a (least → most recent)
    await cache.set(k(SR, "d"), "d"); // evicts b
    expect(cache.stats().size).toBe(3);
    await cache.set(k(SR, "e"), "e"); // evicts c
    const present = [];
    for (const id of ["a", "b", "c", "d", "e"])
      if ((await cache.get(k(SR, id))) !== undefined) present.push(id);
    expect(present).toEqual(["a", "d", "e"]);
  });

  test("evicts by encoded bytes beyond maxBytes; a value larger than maxBytes is not stored", async () => {
    const value = "x".repeat(100); // encoded as 102 bytes of JSON
    const cache = track(new MemoryCache({ maxBytes: 250 }));
    await cache.set(k(SR, "a"), value);
    await cache.set(k(SR, "b"), value);
    await cache.set(k(SR, "c"), value); // 306 bytes > 250: evicts a
    expect(await cache.get(k(SR, "a"))).toBeUndefined();
    expect(await cache.get(k(SR, "b"))).toBe(value);
    expect(await cache.get(k(SR, "c"))).toBe(value);
    await cache.set(k(SR, "huge"), "y".repeat(300));
    expect(await cache.get(k(SR, "huge"))).toBeUndefined();
    expect(await cache.get(k(SR, "c"))).toBe(value);
    // An oversized value replacing an entry removes it rather than leaving the older value.
    await cache.set(k(SR, "c"), "z".repeat(300));
    expect(await cache.get(k(SR, "c"))).toBeUndefined();
    expect(await cache.get(k(SR, "b"))).toBe(value);
    expect(cache.stats().sets).toBe(3);
  });

  test("default TTL is 3,600 s; per-entry TTL overrides it; reads do not extend it (fake clock)", async () => {
    let now = 1_000_000;
    const cache = track(new MemoryCache({ clock: { now: () => now } }));
    await cache.set(k(SR, "default"), "d");
    await cache.set(k(SR, "ten"), "t", 10);
    now += 9_999;
    expect(await cache.get(k(SR, "ten"))).toBe("t");
    now += 2;
    expect(await cache.get(k(SR, "ten"))).toBeUndefined();
    now = 1_000_000 + 3_600_000 - 1;
    expect(await cache.get(k(SR, "default"))).toBe("d");
    now += 2;
    expect(await cache.get(k(SR, "default"))).toBeUndefined();
  });

  test("rejects invalid bounds", () => {
    expect(() => new MemoryCache({ maxEntries: 0 })).toThrow(/maxEntries/);
    expect(() => new MemoryCache({ maxEntries: 2.5 })).toThrow(/maxEntries/);
    expect(() => new MemoryCache({ maxBytes: -1 })).toThrow(/maxBytes/);
    expect(() => new MemoryCache({ ttlSeconds: 0 })).toThrow(/ttlSeconds/);
  });
});

// ---------------------------------------------------------------- redis

const REDIS_BIN = findRedisServer();
const IN_CI = Boolean(process.env.CI) && process.env.CI !== "false" && process.env.CI !== "0";
const REDIS_MISSING =
  "redis-server not found (looked at $REDIS_SERVER, PATH, /usr/bin, /usr/local/bin); install it with `apt-get install -y redis-server`";

/** A raw client for inspecting what the cache stored. */
async function rawClient(url: string) {
  const client = createClient({ url });
  client.on("error", () => {});
  await client.connect();
  return client;
}

if (!REDIS_BIN && IN_CI) {
  describe("redis backend", () => {
    test("redis-server is installed (required in CI)", () => {
      throw new Error(`${REDIS_MISSING}. CI must install it before running the tests (see .ci/run).`);
    });
  });
} else if (!REDIS_BIN) {
  console.warn(`cache.test.ts: Redis tests skipped: ${REDIS_MISSING}`);
  describe.skip(`redis backend — SKIPPED: ${REDIS_MISSING}`, () => {
    test("needs redis-server", () => {});
  });
} else {
  describe("redis backend", () => {
    let server: RedisServer;
    let prefixes = 0;
    /** A unique prefix per cache so tests never see each other's keys. */
    const nextPrefix = () => `kl-test-${process.pid}-${prefixes++}:`;

    beforeAll(async () => {
      server = await startRedisServer();
    });
    afterAll(async () => {
      await server?.stop();
    });

    describe("behaviour", () =>
      behaviouralSuite((options) =>
        track(
          new RedisCache({ url: server.url, prefix: nextPrefix(), logger: collector().logger, ...options }),
        ),
      ));

    test("two cache instances (two clients) on one prefix share entries", async () => {
      const prefix = nextPrefix();
      const a = track(new RedisCache({ url: server.url, prefix }));
      const b = track(new RedisCache({ url: server.url, prefix }));
      await a.set(k(QE, "v"), Float32Array.of(0.25, -1));
      expectSameFloats(await b.get(k(QE, "v")), Float32Array.of(0.25, -1));
      await b.set(k(SR, "r"), [{ id: "doc#1", score: 0.5 }]);
      expect(await a.get(k(SR, "r"))).toEqual([{ id: "doc#1", score: 0.5 }]);
      await b.delete(k(QE, "v"));
      expect(await a.get(k(QE, "v"))).toBeUndefined();
      await a.clear();
      expect(await b.get(k(SR, "r"))).toBeUndefined();
    });

    test("prefixes isolate caches; clear() touches only its own prefix (glob characters escaped)", async () => {
      const a = track(new RedisCache({ url: server.url, prefix: "iso*[a]:" }));
      const b = track(new RedisCache({ url: server.url, prefix: "iso-b:" }));
      const raw = await rawClient(server.url);
      try {
        await raw.set("unrelated-key", "keep");
        await raw.set("isoX[a]:search-result:x", "keep"); // would match an unescaped glob
        await a.set(k(SR, "x"), "a");
        await b.set(k(SR, "x"), "b");
        expect(await a.get(k(SR, "x"))).toBe("a");
        expect(await b.get(k(SR, "x"))).toBe("b");
        await a.clear();
        expect(await a.get(k(SR, "x"))).toBeUndefined();
        expect(await b.get(k(SR, "x"))).toBe("b");
        expect(await raw.get("unrelated-key")).toBe("keep");
        expect(await raw.get("isoX[a]:search-result:x")).toBe("keep");
      } finally {
        await raw.del(["unrelated-key", "isoX[a]:search-result:x"]);
        await raw.close();
      }
    });

    test("storage: <prefix><namespace>:<id>, JSON value with base64 floats, TTL set by Redis (SET PX)", async () => {
      const prefix = nextPrefix();
      const cache = track(new RedisCache({ url: server.url, prefix }));
      const raw = await rawClient(server.url);
      try {
        const key = queryEmbeddingKey({ provider: "bundled", model: "use-lite", text: "hello" });
        await cache.set(key, Float32Array.of(1, 2));
        const stored = await raw.get(`${prefix}${key}`);
        expect(JSON.parse(stored as string)).toEqual({
          "$kl:f32": Buffer.from(Float32Array.of(1, 2).buffer).toString("base64"),
        });
        const defaultTtl = await raw.pTTL(`${prefix}${key}`);
        expect(defaultTtl).toBeGreaterThan(3_590_000);
        expect(defaultTtl).toBeLessThanOrEqual(3_600_000);
        await cache.set(k(SR, "two-minutes"), 1, 120);
        const ttl = await raw.pTTL(`${prefix}${SR}:two-minutes`);
        expect(ttl).toBeGreaterThan(110_000);
        expect(ttl).toBeLessThanOrEqual(120_000);
        expect(DEFAULT_REDIS_PREFIX).toBe("kl:cache:");
      } finally {
        await raw.close();
      }
    });

    test("an undecodable entry is a logged miss and is removed", async () => {
      const prefix = nextPrefix();
      const log = collector();
      const cache = track(new RedisCache({ url: server.url, prefix, logger: log.logger }));
      const raw = await rawClient(server.url);
      try {
        await raw.set(`${prefix}${SR}:corrupt`, "{not json");
        expect(await cache.get(k(SR, "corrupt"))).toBeUndefined();
        expect(cache.stats()).toMatchObject({ misses: 1, errors: 1 });
        expect(log.messages.join("\n")).toMatch(/cannot be decoded/);
        expect(await raw.get(`${prefix}${SR}:corrupt`)).toBeNull();
      } finally {
        await raw.close();
      }
    });

    test("close() quits the connection", async () => {
      const cache = track(new RedisCache({ url: server.url, prefix: nextPrefix() }));
      const raw = await rawClient(server.url);
      try {
        await cache.set(k(SR, "a"), 1);
        expect(await raw.clientList()).toContainEqual(
          expect.objectContaining({ name: "knowledge-layer-cache" }),
        );
        await cache.close();
        const named = async () =>
          (await raw.clientList()).filter((c) => c.name === "knowledge-layer-cache").length;
        const deadline = Date.now() + 2000;
        while ((await named()) > 0 && Date.now() < deadline) await sleep(20);
        expect(await named()).toBe(0);
      } finally {
        await raw.close();
      }
    });

    test("Redis down from the start: gets miss quickly, sets do not throw, one warning", async () => {
      const log = collector();
      const url = `redis://127.0.0.1:${await freePort()}`;
      const cache = track(new RedisCache({ url, logger: log.logger }));
      const started = Date.now();
      expect(await cache.get(k(SR, "a"))).toBeUndefined();
      await cache.set(k(SR, "a"), 1);
      await cache.delete(k(SR, "a"));
      await cache.clear();
      expect(await cache.get(k(SR, "a"))).toBeUndefined();
      expect(Date.now() - started).toBeLessThan(1500);
      expect(cache.stats()).toMatchObject({ hits: 0, misses: 2, sets: 0 });
      expect(cache.stats().errors).toBeGreaterThanOrEqual(5);
      await sleep(300); // reconnect attempts meanwhile do not log again
      expect(log.messages).toHaveLength(1);
      expect(log.messages[0]).toMatch(/unavailable.*serving cache misses/);
    });

    test("Redis stopped mid-test: misses without throwing, warns, and recovers when it is back", async () => {
      const own = await startRedisServer();
      const log = collector();
      const cache = track(new RedisCache({ url: own.url, prefix: nextPrefix(), logger: log.logger }));
      try {
        await cache.set(k(SR, "a"), "before");
        expect(await cache.get(k(SR, "a"))).toBe("before");
        await own.stop();
        expect(await cache.get(k(SR, "a"))).toBeUndefined();
        await expect(cache.set(k(SR, "b"), "during")).resolves.toBeUndefined();
        expect(await cache.get(k(SR, "b"))).toBeUndefined();
        expect(log.messages.join("\n")).toMatch(/unavailable/);
        expect(log.messages.join("\n")).not.toMatch(/password/);

        const again = await startRedisServer({ port: own.port });
        try {
          const deadline = Date.now() + 5000;
          let value: unknown;
          while (Date.now() < deadline) {
            await cache.set(k(SR, "c"), "after");
            value = await cache.get(k(SR, "c"));
            if (value !== undefined) break;
            await sleep(50);
          }
          expect(value).toBe("after");
          expect(log.messages.join("\n")).toMatch(/available again/);
        } finally {
          await cache.close();
          await again.stop();
        }
      } finally {
        await own.stop();
      }
    });

    test("a hung server: commands time out after commandTimeoutMs and count as misses", async () => {
      const own = await startRedisServer();
      const log = collector();
      const cache = track(
        new RedisCache({ url: own.url, prefix: nextPrefix(), commandTimeoutMs: 150, logger: log.logger }),
      );
      try {
        await cache.set(k(SR, "a"), 1);
        own.process.kill("SIGSTOP");
        const started = Date.now();
        expect(await cache.get(k(SR, "a"))).toBeUndefined();
        // After a timeout Redis is skipped for a while: this set is not even sent.
        await cache.set(k(SR, "a"), 2);
        expect(await cache.get(k(SR, "a"))).toBeUndefined();
        expect(Date.now() - started).toBeLessThan(1000);
        expect(log.messages).toHaveLength(1);
        expect(log.messages[0]).toMatch(/GET .*failed \(no reply within 150 ms\)/);
        own.process.kill("SIGCONT");
        // Served again once the pause after the timeout is over.
        const deadline = Date.now() + 3000;
        let value: unknown;
        while (value === undefined && Date.now() < deadline) {
          await sleep(100);
          value = await cache.get(k(SR, "a"));
        }
        expect(value).toBe(1);
      } finally {
        own.process.kill("SIGCONT");
        await cache.close();
        await own.stop();
      }
    });

    test("a server that accepts connections but never answers: operations give up after the timeouts", async () => {
      const own = await startRedisServer();
      const log = collector();
      own.process.kill("SIGSTOP");
      const cache = track(
        new RedisCache({
          url: own.url,
          prefix: nextPrefix(),
          connectTimeoutMs: 200,
          commandTimeoutMs: 200,
          logger: log.logger,
        }),
      );
      try {
        const started = Date.now();
        expect(await cache.get(k(SR, "a"))).toBeUndefined();
        expect(Date.now() - started).toBeLessThan(1500);
        const second = Date.now();
        await cache.set(k(SR, "a"), 1);
        expect(await cache.get(k(SR, "a"))).toBeUndefined();
        expect(Date.now() - second).toBeLessThan(300); // no second wait of 400 ms
        expect(log.messages).toHaveLength(1);
        expect(log.messages[0]).toMatch(/unavailable \(no connection within 400 ms\)/);
      } finally {
        own.process.kill("SIGCONT");
        await cache.close();
        await own.stop();
      }
    });

    test("createCache builds a working Redis cache", async () => {
      const cache = track(
        createCache({ type: "redis", url: server.url, prefix: nextPrefix(), ttlSeconds: 5 }),
      );
      expect(cache.kind).toBe("redis");
      await cache.set(k(SR, "a"), { ok: true });
      expect(await cache.get(k(SR, "a"))).toEqual({ ok: true });
    });
  });
}

// ---------------------------------------------------------------- keys

describe("key builders", () => {
  const base = {
    query: "how are backups encrypted?",
    kbIds: ["ops", "handbook"],
    kbVersions: { ops: 7, handbook: "2024-05-01T10:00:00Z#3", unrelated: 1 },
    params: {
      mode: "hybrid",
      topK: 5,
      vectorTopK: 20,
      keywordTopK: 20,
      rrfK: 60,
      vectorWeight: 1,
      keywordWeight: 1,
      minScore: 0,
      dedupThreshold: 0.9,
      bm25K1: 1.2,
      bm25B: 0.75,
      analyzer: "english",
      filter: { type: ["pdf", "markdown"], after: "2024-01-01" },
      embedding: { provider: "bundled", model: "use-lite" },
    } as Record<string, unknown>,
  };
  const baseKey = searchResultKey(base);

  test("search-result keys are <namespace>:<sha256 hex> and deterministic", () => {
    expect(baseKey).toMatch(/^search-result:[0-9a-f]{64}$/);
    expect(searchResultKey(structuredClone(base))).toBe(baseKey);
  });

  test("parameter key order (at any depth) and KB id order do not matter", () => {
    const reordered = Object.fromEntries(Object.entries(base.params).reverse());
    reordered.filter = { after: "2024-01-01", type: ["pdf", "markdown"] };
    expect(searchResultKey({ ...base, params: reordered, kbIds: ["handbook", "ops"] })).toBe(baseKey);
    expect(searchResultKey({ ...base, params: { ...base.params, extra: undefined } })).toBe(baseKey);
  });

  test("every retrieval parameter changes the key", () => {
    const changed: Record<string, unknown> = {
      mode: "vector",
      topK: 6,
      vectorTopK: 21,
      keywordTopK: 19,
      rrfK: 61,
      vectorWeight: 0.5,
      keywordWeight: 2,
      minScore: 0.1,
      dedupThreshold: 0.95,
      bm25K1: 1.5,
      bm25B: 0.8,
      analyzer: "standard",
      filter: { type: ["pdf"], after: "2024-01-01" },
      embedding: { provider: "bundled", model: "other" },
    };
    const keys = new Set([baseKey]);
    for (const [name, value] of Object.entries(changed)) {
      const key = searchResultKey({ ...base, params: { ...base.params, [name]: value } });
      expect(key, name).not.toBe(baseKey);
      keys.add(key);
    }
    expect(keys.size).toBe(Object.keys(changed).length + 1);
    expect(searchResultKey({ ...base, params: { ...base.params, newParam: true } })).not.toBe(baseKey);
    const { topK: _, ...withoutTopK } = base.params;
    expect(searchResultKey({ ...base, params: withoutTopK })).not.toBe(baseKey);
    // Array order inside parameters is significant.
    expect(
      searchResultKey({
        ...base,
        params: { ...base.params, filter: { type: ["markdown", "pdf"], after: "2024-01-01" } },
      }),
    ).not.toBe(baseKey);
  });

  test("query text, the searched KBs and their data versions change the key; other KBs' versions do not", () => {
    expect(searchResultKey({ ...base, query: `${base.query} ` })).not.toBe(baseKey);
    expect(searchResultKey({ ...base, query: base.query.toUpperCase() })).not.toBe(baseKey);
    expect(searchResultKey({ ...base, kbIds: ["ops"] })).not.toBe(baseKey);
    expect(searchResultKey({ ...base, kbVersions: { ...base.kbVersions, ops: 8 } })).not.toBe(baseKey);
    expect(searchResultKey({ ...base, kbVersions: { ...base.kbVersions, ops: "7" } })).not.toBe(baseKey);
    expect(searchResultKey({ ...base, kbVersions: { ...base.kbVersions, unrelated: 2 } })).toBe(baseKey);
  });

  test("invalid inputs are rejected with the reason", () => {
    expect(() => searchResultKey({ ...base, kbVersions: { ops: 1 } })).toThrow(/no data version .*handbook/);
    expect(() => searchResultKey({ ...base, kbIds: [] })).toThrow(/kbIds/);
    expect(() => searchResultKey({ ...base, kbIds: [""] })).toThrow(/KB id/);
    expect(() => searchResultKey({ ...base, params: { topK: Number.NaN } })).toThrow(
      /\$\.params\.retrieval\.topK/,
    );
    expect(() => searchResultKey({ ...base, params: { when: new Date() } })).toThrow(/Date/);
    expect(() =>
      searchResultKey({ ...base, kbVersions: { ops: Number.POSITIVE_INFINITY, handbook: 1 } }),
    ).toThrow(/data version/);
    expect(() => queryEmbeddingKey({ provider: "", model: "m", text: "t" })).toThrow(/provider/);
    expect(() => cacheKey("Bad", { operation: "x", params: {} })).toThrow(/namespace/);
    expect(() => cacheKey("ok", { operation: "", params: {} })).toThrow(/operation/);
  });

  test("query-embedding keys depend on provider, model, options and exact text", () => {
    const input = { provider: "bundled", model: "use-lite", text: "Hello" };
    const key = queryEmbeddingKey(input);
    expect(key).toMatch(/^query-embedding:[0-9a-f]{64}$/);
    expect(queryEmbeddingKey({ ...input })).toBe(key);
    expect(queryEmbeddingKey({ ...input, options: {} })).toBe(key);
    const variants = [
      { ...input, provider: "openai" },
      { ...input, model: "use-large" },
      { ...input, text: "hello" },
      { ...input, text: "Hello " },
      { ...input, options: { dimensions: 256 } },
    ];
    const keys = new Set(variants.map(queryEmbeddingKey));
    expect(keys.size).toBe(variants.length);
    expect(keys.has(key)).toBe(false);
  });

  test("cacheKey hashes schema, library version, namespace, operation, canonical params and content hash", () => {
    const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
      version: string;
    };
    expect(LIBRARY_VERSION).toBe(pkg.version);
    const key = cacheKey("chunks", { operation: "chunk.fixed", params: { b: 1, a: [2] }, content: "text" });
    const material = canonicalJson({
      schema: CACHE_KEY_SCHEMA,
      library: LIBRARY_VERSION,
      namespace: "chunks",
      operation: "chunk.fixed",
      params: { a: [2], b: 1 },
      content: sha256Hex("text"),
    });
    expect(key).toBe(`chunks:${sha256Hex(material)}`);
    expect(
      cacheKey("chunks", { operation: "chunk.semantic", params: { b: 1, a: [2] }, content: "text" }),
    ).not.toBe(key);
  });

  test("canonicalJson sorts keys at every depth and keeps array order", () => {
    expect(canonicalJson({ b: { d: 1, c: [3, { f: 1, e: 2 }] }, a: null })).toBe(
      '{"a":null,"b":{"c":[3,{"e":2,"f":1}],"d":1}}',
    );
  });

  test("an ingest (data version bump) or a parameter change is a miss, never a stale hit", async () => {
    const cache = track(new MemoryCache());
    let searches = 0;
    let corpus = ["backups are encrypted"];
    const search = async (query: string, params: Record<string, unknown>, version: number) =>
      getOrCompute(
        cache,
        searchResultKey({ query, kbIds: ["kb"], params, kbVersions: { kb: version } }),
        () => {
          searches++;
          return corpus.filter((text) => text.includes(query)).slice(0, params.topK as number);
        },
      );
    expect(await search("backups", { topK: 5 }, 1)).toEqual(["backups are encrypted"]);
    expect(await search("backups", { topK: 5 }, 1)).toEqual(["backups are encrypted"]);
    expect(searches).toBe(1);
    corpus = [...corpus, "backups run nightly"]; // ingest bumps the version
    expect(await search("backups", { topK: 5 }, 2)).toEqual(["backups are encrypted", "backups run nightly"]);
    expect(await search("backups", { topK: 1 }, 2)).toEqual(["backups are encrypted"]);
    expect(searches).toBe(3);
  });
});

// ---------------------------------------------------------------- codec

describe("codec", () => {
  test("Float32Array is tagged base64 of little-endian bytes; bad payloads are rejected", () => {
    const text = encodeValue({ v: Float32Array.of(1) });
    expect(text).toBe('{"v":{"$kl:f32":"AACAPw=="}}');
    expectSameFloats((decodeValue(text) as { v: Float32Array }).v, Float32Array.of(1));
    expect(() => decodeValue('{"$kl:f32":"AAA="}')).toThrow(/multiple of 4/);
  });
});

// ---------------------------------------------------------------- createCache

describe("createCache", () => {
  test("builds each backend", async () => {
    const memory = track(createCache({ type: "memory", maxEntries: 2, ttlSeconds: 60 }));
    expect(memory).toBeInstanceOf(MemoryCache);
    await memory.set(k(SR, "a"), 1);
    await memory.set(k(SR, "b"), 2);
    await memory.set(k(SR, "c"), 3);
    expect(memory.stats().size).toBe(2);

    const none = track(createCache({ type: "none" }));
    expect(none).toBeInstanceOf(NoCache);
    await none.set(k(SR, "a"), 1);
    expect(await none.get(k(SR, "a"))).toBeUndefined();
    expect(none.stats()).toMatchObject({ hits: 0, misses: 1, size: 0 });
    await expect(none.get("bad" as CacheKey)).rejects.toThrow(TypeError);

    // Creating a Redis cache does not connect (nothing listens on port 1).
    const redis = track(createCache({ type: "redis", url: "redis://127.0.0.1:1" }));
    expect(redis).toBeInstanceOf(RedisCache);
  });

  test("invalid configuration names the field", () => {
    const cases: [unknown, RegExp][] = [
      [null, /cache configuration/],
      [{}, /cache\.type/],
      [{ type: "memcached" }, /cache\.type/],
      [{ type: "memory", maxEntries: 0 }, /cache\.maxEntries .*entries/],
      [{ type: "memory", maxEntries: 1.5 }, /cache\.maxEntries/],
      [{ type: "memory", maxBytes: "1MB" }, /cache\.maxBytes .*bytes/],
      [{ type: "memory", ttlSeconds: -1 }, /cache\.ttlSeconds .*seconds/],
      [{ type: "memory", maxEntires: 5 }, /cache\.maxEntires is not a setting/],
      [{ type: "memory", url: "redis://x" }, /cache\.url is not a setting of a memory cache/],
      [{ type: "redis" }, /cache\.url is required/],
      [{ type: "redis", url: "not a url" }, /cache\.url/],
      [{ type: "redis", url: "http://127.0.0.1:6379" }, /cache\.url must start with redis/],
      [{ type: "redis", url: "redis://127.0.0.1", prefix: "" }, /cache\.prefix/],
      [{ type: "redis", url: "redis://127.0.0.1", ttlSeconds: 0 }, /cache\.ttlSeconds/],
      [{ type: "redis", url: "redis://127.0.0.1", commandTimeoutMs: 0 }, /cache\.commandTimeoutMs/],
      [{ type: "redis", url: "redis://127.0.0.1", connectTimeoutMs: 2.5 }, /cache\.connectTimeoutMs/],
      [{ type: "none", ttlSeconds: 5 }, /cache\.ttlSeconds is not a setting of a none cache/],
    ];
    for (const [config, message] of cases) {
      let error: unknown;
      try {
        createCache(config as Parameters<typeof createCache>[0]);
      } catch (e) {
        error = e;
      }
      expect(error, JSON.stringify(config)).toBeInstanceOf(ConfigError);
      expect((error as Error).message, JSON.stringify(config)).toMatch(message);
    }
  });

  test("a password in the URL is never logged", async () => {
    const log = collector();
    const port = await freePort();
    const cache = track(new RedisCache({ url: `redis://user:s3cret@127.0.0.1:${port}`, logger: log.logger }));
    expect(await cache.get(k(SR, "a"))).toBeUndefined();
    expect(log.messages.join("\n")).toMatch(/unavailable/);
    expect(log.messages.join("\n")).not.toMatch(/s3cret/);
  });
});

// ---------------------------------------------------------------- B32

interface CaseB32 {
  text: string;
}
interface ExpectB32 {
  id: string;
  calls: { step: number }[];
  must: string[];
}

/**
 * Case B32 (cache keys that ignore parameters serve stale results after tuning),
 * mapped onto cached functions built on a Cache and the key builders: `chunk` is
 * the real FIXED chunker, `embed` a stub per model. Both share one cache.
 */
function b32Harness(
  cache: Cache<unknown>,
  keyOf: (namespace: string, operation: string, params: Record<string, unknown>, content: string) => CacheKey,
) {
  const calls = { chunk: 0, embed: { "m-a": 0, "m-b": 0 } as Record<string, number> };
  const doc = (text: string): ExtractedDocument => ({
    uri: "/case/B32.json",
    text,
    metadata: { path: "/case/B32.json", type: "text" },
  });
  const chunkUncached = (text: string, params: { chunkSize: number; chunkOverlap: number }): Chunk[] =>
    createFixedChunker({ strategy: "fixed", minChunkSize: 0, ...params }).chunk(doc(text)) as Chunk[];
  const embedUncached = (text: string, params: { model: string; dimensions?: number }): Float32Array => {
    const dims = params.dimensions ?? 8;
    const seed = params.model === "m-a" ? 1 : 100;
    return Float32Array.from({ length: dims }, (_, i) => seed + i + text.length / 1000);
  };
  /** Wraps `fn` with the cache: the key comes from `keyOf(namespace, operation, params, content)`. */
  const cached =
    <P extends Record<string, unknown>, R>(
      namespace: string,
      operation: string,
      fn: (content: string, params: P) => R,
    ) =>
    (content: string, params: P): Promise<R> =>
      getOrCompute(cache as Cache<R>, keyOf(namespace, operation, params, content), () =>
        fn(content, params),
      );
  const chunk = cached(
    "chunks",
    "chunk.fixed",
    (text: string, params: { chunkSize: number; chunkOverlap: number }) => {
      calls.chunk++;
      return chunkUncached(text, params);
    },
  );
  const embed = cached(QE, "embed-query", (text: string, params: { model: string; dimensions?: number }) => {
    calls.embed[params.model] = (calls.embed[params.model] ?? 0) + 1;
    return embedUncached(text, params);
  });
  return { calls, chunk, embed, chunkUncached, embedUncached };
}

/** Runs the six steps of B32 and returns what each observed. */
async function runB32(h: ReturnType<typeof b32Harness>, text: string) {
  const r120 = h.chunkUncached(text, { chunkSize: 120, chunkOverlap: 0 });
  const r60 = h.chunkUncached(text, { chunkSize: 60, chunkOverlap: 0 });
  const r60o10 = h.chunkUncached(text, { chunkSize: 60, chunkOverlap: 10 });
  const step1 = await h.chunk(text, { chunkSize: 120, chunkOverlap: 0 });
  const step2 = await h.chunk(text, { chunkSize: 60, chunkOverlap: 0 });
  const step3 = await h.chunk(text, { chunkSize: 60, chunkOverlap: 10 });
  const step4 = await h.chunk(text, { chunkSize: 120, chunkOverlap: 0 });
  const chunkCalls = h.calls.chunk;
  const step5a = await h.embed("hello", { model: "m-a" });
  const step5b = await h.embed("hello", { model: "m-b" });
  const step6 = await h.embed("hello", { model: "m-a", dimensions: 4 });
  return { r120, r60, r60o10, step1, step2, step3, step4, chunkCalls, step5a, step5b, step6 };
}

/** Keys from the real builders: embeddings via queryEmbeddingKey, everything else via cacheKey. */
function realKeys(
  namespace: string,
  operation: string,
  params: Record<string, unknown>,
  content: string,
): CacheKey {
  if (namespace === QE) {
    const { model, ...options } = params;
    return queryEmbeddingKey({ provider: "stub", model: model as string, text: content, options });
  }
  return cacheKey(namespace, { operation, params, content });
}

function b32Suite(make: () => Cache<unknown>): void {
  const input = JSON.parse(readShared("cases", "B32.json")) as CaseB32;
  const expected = JSON.parse(readShared("cases", "B32.expect.json")) as ExpectB32;

  test("B32: every parameter is part of the key; repeats are served from the cache", async () => {
    expect(expected.id).toBe("B32");
    expect(expected.calls.map((c) => c.step)).toEqual([1, 2, 3, 4, 5, 6]);
    const h = b32Harness(make(), realKeys);
    const r = await runB32(h, input.text);
    // Steps 1-3: equal to the uncached results; smaller chunks give more of them.
    expect(r.step1).toEqual(r.r120);
    expect(r.step2).toEqual(r.r60);
    expect(r.r60.length).toBeGreaterThan(r.r120.length);
    expect(r.step3).toEqual(r.r60o10);
    // Step 4: served from the cache — the chunker ran 3 times for steps 1-4.
    expect(r.step4).toEqual(r.r120);
    expect(r.chunkCalls).toBe(3);
    // Step 5: m-b's own vector, its stub called exactly once.
    expectSameFloats(r.step5a, h.embedUncached("hello", { model: "m-a" }));
    expectSameFloats(r.step5b, h.embedUncached("hello", { model: "m-b" }));
    expect(h.calls.embed["m-b"]).toBe(1);
    // Step 6: a 4-dimensional vector, not the cached default-dimension one.
    expect(r.step6.length).toBe(4);
    expectSameFloats(r.step6, h.embedUncached("hello", { model: "m-a", dimensions: 4 }));
  });

  test("B32 control: a content-only key (the fault) would serve stale results", async () => {
    const contentOnly = (namespace: string, _op: string, _params: Record<string, unknown>, content: string) =>
      `${namespace}:${sha256Hex(content)}` as CacheKey;
    const r = await runB32(b32Harness(make(), contentOnly), input.text);
    expect(r.step2).toEqual(r.r120); // stale: the 120-character chunks again
    expect(r.step2).not.toEqual(r.r60);
    expect(r.step6.length).toBe(8);
  });
}

describe("case B32 on the memory backend", () => b32Suite(() => track(new MemoryCache())));

if (REDIS_BIN) {
  describe("case B32 on the Redis backend", () => {
    let server: RedisServer;
    beforeAll(async () => {
      server = await startRedisServer();
    });
    afterAll(async () => {
      await server?.stop();
    });
    let n = 0;
    b32Suite(() => track(new RedisCache({ url: server.url, prefix: `b32-${n++}:` })));
  });
}
