import { createServer, type Server } from "node:http";
import { QdrantClient } from "@qdrant/js-client-rest";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { KnowledgeLayerError } from "../../src/errors.js";
import {
  QDRANT_ID_KEY,
  QdrantVectorStore,
  qdrantCollectionName,
  qdrantPointId,
  uuidV5,
} from "../../src/store/qdrant.js";
import { vectorStoreConformance } from "../conformance/vector-store.js";
import { vectorStoreFilterConformance } from "../conformance/vector-store-filters.js";
import { type FakeQdrant, startFakeQdrant } from "../helpers/fakes/qdrant-server.js";
import { describeUnless } from "../helpers/skip.js";

const KEY = "qdrant-test-key";
const UUID_V5 = /^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

// The client warns on every construction with an API key over plain http; the
// fake server is plain http on purpose, so keep that one warning out of the log.
const warn = console.warn;
beforeAll(() => {
  vi.spyOn(console, "warn").mockImplementation((...args: unknown[]) => {
    if (String(args[0]).startsWith("Api key is used with unsecure connection")) return;
    warn(...args);
  });
});
afterAll(() => {
  vi.restoreAllMocks();
});

const fakeQdrantStore = async () => {
  const fake = await startFakeQdrant({ apiKey: KEY });
  return {
    store: new QdrantVectorStore({ url: fake.url, apiKey: KEY, timeoutMs: 5000 }),
    cleanup: () => fake.close(),
  };
};
vectorStoreConformance("qdrant (local fake server)", fakeQdrantStore);
vectorStoreFilterConformance("qdrant (local fake server)", fakeQdrantStore, {
  exists: true,
  prefix: false,
  dates: false,
});

/** Settings of a real server, if the environment names one. */
const REAL_URL = process.env.QDRANT_URL;
describeUnless(
  import.meta.url,
  REAL_URL ? undefined : "QDRANT_URL is not set",
  "qdrant (real server from QDRANT_URL)",
  () => {
    const apiKey = process.env.QDRANT_API_KEY || undefined;
    vectorStoreConformance(`qdrant at ${REAL_URL}`, async () => {
      const prefix = `kltest_${process.pid}_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}_`;
      const url = REAL_URL as string;
      return {
        store: new QdrantVectorStore({ url, apiKey, prefix }),
        cleanup: async () => {
          const client = new QdrantClient({ url, apiKey, checkCompatibility: false });
          const { collections } = await client.getCollections();
          for (const { name } of collections)
            if (name.startsWith(prefix)) await client.deleteCollection(name);
        },
      };
    });
  },
);

describe("qdrant adapter", () => {
  let fake: FakeQdrant;
  let store: QdrantVectorStore;
  beforeEach(async () => {
    fake = await startFakeQdrant({ apiKey: KEY });
    store = new QdrantVectorStore({ url: fake.url, apiKey: KEY, timeoutMs: 5000 });
    await store.connect();
  });
  afterEach(async () => {
    await store.close();
    await fake.close();
  });

  it("derives RFC 9562 name-based UUIDs", () => {
    // RFC 9562 appendix A.4: UUIDv5 of "www.example.com" in the DNS namespace.
    expect(uuidV5("www.example.com", "6ba7b810-9dad-11d1-80b4-00c04fd430c8")).toBe(
      "2ed6657d-e927-568b-95e1-2665a8aea6a2",
    );
    expect(qdrantPointId("chunk-1")).toMatch(UUID_V5);
    expect(qdrantPointId("chunk-1")).toBe(qdrantPointId("chunk-1"));
    expect(qdrantPointId("chunk-1")).not.toBe(qdrantPointId("chunk-2"));
  });

  it("round-trips arbitrary string ids through UUID point ids, hiding the id payload field", async () => {
    await store.createCollection("kb", 2, "dot");
    const ids = ["docs/a.md#0", "ünïcödé — 🚀", "42", "0b5f2c6e-8d2a-4f57-9c3e-6a1d4e7b9f20", " spaced id "];
    await store.addBatch(
      "kb",
      ids.map((id, i) => ({ id, vector: Float32Array.from([1, i]), payload: { i } })),
    );
    const stored = fake.collections.get("kb");
    expect([...(stored?.points.keys() ?? [])].sort()).toEqual(ids.map(qdrantPointId).sort());
    for (const point of stored?.points.values() ?? []) expect(point.id).toMatch(UUID_V5);
    const got = await store.get("kb", [...ids].reverse());
    expect(got.map((r) => r.id)).toEqual([...ids].reverse());
    for (const record of got) {
      expect(record.payload).toEqual({ i: ids.indexOf(record.id) });
      expect(QDRANT_ID_KEY in record.payload).toBe(false);
    }
    const hits = await store.search("kb", Float32Array.from([0, 1]), { topK: 10 });
    expect(hits.map((h) => h.id)).toEqual([
      " spaced id ",
      "0b5f2c6e-8d2a-4f57-9c3e-6a1d4e7b9f20",
      "42",
      "ünïcödé — 🚀",
      "docs/a.md#0",
    ]);
    expect(hits.every((h) => !(QDRANT_ID_KEY in h.payload))).toBe(true);
    await store.delete("kb", ["42"]);
    expect((await store.info("kb"))?.count).toBe(4);
    await expect(
      store.addBatch("kb", [
        { id: "x", vector: Float32Array.from([1, 0]), payload: { [QDRANT_ID_KEY]: "y" } },
      ]),
    ).rejects.toThrow(/reserved/);
  });

  it("writes in batches of 100 with wait=true and reads in batches of 100", async () => {
    await store.createCollection("kb_big", 2, "cosine");
    const records = Array.from({ length: 250 }, (_, i) => ({
      id: `r${i}`,
      vector: Float32Array.from([1, i]),
      payload: { i },
    }));
    await store.addBatch("kb_big", records);
    expect(fake.upsertRequests("kb_big")).toBe(3);
    const upserts = fake.server.requests.filter((r) => r.method === "PUT" && r.path.includes("/points"));
    expect(upserts.every((r) => r.path.includes("wait=true"))).toBe(true);
    expect(upserts.map((r) => (r.body as { points: unknown[] }).points.length)).toEqual([100, 100, 50]);
    const before = fake.server.requests.length;
    const got = await store.get(
      "kb_big",
      records.map((r) => r.id),
    );
    expect(got).toHaveLength(250);
    expect(fake.server.requests.length - before).toBe(3);
    expect((await store.info("kb_big"))?.count).toBe(250);
  });

  it("applies score thresholds by metric: server-side similarity for cosine/dot, −distance for euclid", async () => {
    await store.createCollection("e", 2, "euclidean");
    await store.createCollection("d", 2, "dot");
    const raw = [
      { id: "near", vector: Float32Array.from([1, 1]), payload: {} },
      { id: "far", vector: Float32Array.from([4, 5]), payload: {} },
      { id: "mid", vector: Float32Array.from([2, 1]), payload: {} },
    ];
    await store.addBatch("e", raw);
    await store.addBatch("d", raw);
    const q = Float32Array.from([1, 0]);
    const euclid = await store.search("e", q, { topK: 3, scoreThreshold: -1.5 });
    expect(euclid.map((h) => h.id)).toEqual(["near", "mid"]);
    expect(await store.search("e", q, { topK: 3, scoreThreshold: 0.5 })).toEqual([]);
    const exact = await store.search("e", Float32Array.from([1, 1]), { topK: 1 });
    expect(Object.is(exact[0]?.score, 0)).toBe(true);
    const queries = fake.server.requests.filter((r) => r.path.endsWith("/points/query"));
    expect(queries.every((r) => !("score_threshold" in (r.body as object)))).toBe(true);
    await store.search("d", q, { topK: 3, scoreThreshold: 1.5 });
    expect(fake.server.requests.at(-1)?.body).toMatchObject({ score_threshold: 1.5, limit: 3 });
  });

  it("orders equal scores by id and filters on strings, integers, floats and booleans", async () => {
    await store.createCollection("t", 2, "cosine");
    const ids = ["m", "c", "x", "a", "q"];
    await store.addBatch(
      "t",
      ids.map((id, i) => ({
        id,
        vector: Float32Array.from([1, 0]),
        payload: { s: id, n: i, f: i + 0.5, b: i % 2 === 0 },
      })),
    );
    const hits = await store.search("t", Float32Array.from([1, 0]), { topK: 10 });
    expect(hits.map((h) => h.id)).toEqual(["a", "c", "m", "q", "x"]);
    const ids1 = async (filter: Record<string, string | number | boolean>) =>
      (await store.search("t", Float32Array.from([1, 0]), { topK: 10, filter })).map((h) => h.id);
    expect(await ids1({ s: "x" })).toEqual(["x"]);
    expect(await ids1({ n: 3 })).toEqual(["a"]);
    expect(await ids1({ f: 1.5 })).toEqual(["c"]);
    expect(await ids1({ b: true })).toEqual(["m", "q", "x"]);
    expect(await ids1({ b: false, n: 1 })).toEqual(["c"]);
    // A dotted name is a nested path (valid in the filter language); Qdrant payloads are flat here.
    await expect(ids1({ "a.b": 1 })).rejects.toThrow(
      /filter\["a\.b"\]: nested field names are not supported/,
    );
  });

  it("maps collection names to Qdrant-safe names deterministically, with a prefix", async () => {
    expect(qdrantCollectionName("kb_docs")).toBe("kb_docs");
    expect(qdrantCollectionName("kb_docs", "app-")).toBe("app-kb_docs");
    const odd = qdrantCollectionName("kb/my docs?");
    expect(odd).toMatch(/^kb_my_docs_-[0-9a-f]{10}$/);
    expect(odd).toBe(qdrantCollectionName("kb/my docs?"));
    expect(qdrantCollectionName("kb/my docs!")).not.toBe(odd);
    const prefixed = new QdrantVectorStore({ url: fake.url, apiKey: KEY, prefix: "app-" });
    await prefixed.createCollection("kb/my docs?", 2, "cosine");
    expect([...fake.collections.keys()]).toEqual([qdrantCollectionName("kb/my docs?", "app-")]);
    expect(qdrantCollectionName("kb/my docs?", "app-")).toMatch(/^app-kb_my_docs_-[0-9a-f]{10}$/);
    expect(await prefixed.info("kb/my docs?")).toEqual({
      name: "kb/my docs?",
      dimension: 2,
      metric: "cosine",
      count: 0,
    });
    expect(await store.info("kb/my docs?")).toBeUndefined();
  });

  it("rejects a wrong API key with a clear error; health() says false without throwing", async () => {
    const bad = new QdrantVectorStore({ url: fake.url, apiKey: "wrong", timeoutMs: 5000 });
    const err = await bad.connect().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KnowledgeLayerError);
    expect((err as Error).message).toMatch(/authentication failed \(HTTP 401.*API key/);
    expect((err as Error).message).toContain(fake.url);
    await expect(bad.createCollection("kb", 2, "cosine")).rejects.toThrow(/"kb".*401/);
    expect(await bad.health()).toBe(false);
    expect(await store.health()).toBe(true);
  });

  it("wraps server errors naming the collection and the server", async () => {
    await store.createCollection("c", 2, "cosine");
    fake.server.script.push({
      status: 500,
      body: { status: { error: "Service internal error: disk full" } },
    });
    const err = await store
      .addBatch("c", [{ id: "a", vector: Float32Array.from([1, 0]), payload: {} }])
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KnowledgeLayerError);
    expect((err as Error).message).toBe(
      `qdrant: cannot write to collection "c" at ${fake.url}: HTTP 500: Service internal error: disk full`,
    );
  });

  it("detects an existing collection with another distance or size, and a dropped one", async () => {
    await store.createCollection("c", 3, "dot");
    const other = new QdrantVectorStore({ url: fake.url, apiKey: KEY });
    await expect(other.createCollection("c", 3, "cosine")).rejects.toThrow(/metric dot, not .*metric cosine/);
    await expect(other.createCollection("c", 2, "dot")).rejects.toThrow(/dimension 3.*not dimension 2/);
    await other.dropCollection("c");
    expect(await store.info("c")).toBeUndefined();
    await expect(store.search("c", Float32Array.from([1, 0, 0]), { topK: 1 })).rejects.toThrow(/"c"/);
  });
});

describe("qdrant adapter: unreachable servers", () => {
  it("names the URL when nothing listens there", async () => {
    const fake = await startFakeQdrant();
    const url = fake.url;
    await fake.close();
    const store = new QdrantVectorStore({ url, timeoutMs: 2000 });
    const err = await store.connect().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KnowledgeLayerError);
    expect((err as Error).message).toMatch(new RegExp(`${url}.*cannot connect \\(ECONNREFUSED\\)`));
    expect(await store.health()).toBe(false);
  });

  it("gives up after the timeout when the server does not answer", async () => {
    const silent: Server = createServer(() => {});
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const address = silent.address();
    const url = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`;
    try {
      const store = new QdrantVectorStore({ url, timeoutMs: 300 });
      const started = Date.now();
      const err = await store.createCollection("kb", 2, "cosine").catch((e: unknown) => e);
      expect(Date.now() - started).toBeLessThan(3000);
      expect((err as Error).message).toBe(
        `qdrant: cannot read collection "kb" at ${url}: no answer within 300 ms`,
      );
      expect(await store.health()).toBe(false);
    } finally {
      silent.closeAllConnections();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  });

  it("accepts host and port instead of a URL", async () => {
    const fake = await startFakeQdrant();
    try {
      const port = Number(new URL(fake.url).port);
      const store = new QdrantVectorStore({ host: "127.0.0.1", port });
      expect(store.url).toBe(fake.url);
      expect(await store.health()).toBe(true);
      expect(() => new QdrantVectorStore({})).toThrow(/url.*host/);
    } finally {
      await fake.close();
    }
  });
});
