import { createServer, type Server } from "node:http";
import { Pinecone } from "@pinecone-database/pinecone";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { KnowledgeLayerError } from "../../src/errors.js";
import { PINECONE_MARKER_ID, PINECONE_MARKER_KEY, PineconeVectorStore } from "../../src/store/pinecone.js";
import { vectorStoreConformance } from "../conformance/vector-store.js";
import { vectorStoreFilterConformance } from "../conformance/vector-store-filters.js";
import {
  type FakePinecone,
  type FakePineconeIndexSpec,
  startFakePinecone,
} from "../helpers/fakes/pinecone-server.js";
import { describeUnless } from "../helpers/skip.js";

const KEY = "pinecone-test-key";

/**
 * The indexes the conformance suite needs: a Pinecone index has one dimension
 * and one metric, and the suite uses cosine collections of dimension 2, 3 and 4
 * plus a euclidean and a dot-product collection of dimension 2.
 */
const SUITE_INDEXES: FakePineconeIndexSpec[] = [
  { name: "kl-cosine-2", dimension: 2, metric: "cosine" },
  { name: "kl-cosine-3", dimension: 3, metric: "cosine" },
  { name: "kl-cosine-4", dimension: 4, metric: "cosine" },
  { name: "kl-euclidean-2", dimension: 2, metric: "euclidean" },
  { name: "kl-dot-2", dimension: 2, metric: "dotproduct" },
];

function storeFor(
  fake: FakePinecone,
  extra: Partial<ConstructorParameters<typeof PineconeVectorStore>[0]> = {},
) {
  const [first, ...rest] = [...fake.indexes.keys()];
  return new PineconeVectorStore({
    apiKey: KEY,
    index: first ?? "",
    indexes: rest,
    controllerHostUrl: fake.controllerUrl,
    maxRetries: 0,
    timeoutMs: 5000,
    ...extra,
  });
}

vectorStoreConformance("pinecone (local fake control and data planes)", async () => {
  const fake = await startFakePinecone({ apiKey: KEY, indexes: SUITE_INDEXES });
  return { store: storeFor(fake), cleanup: () => fake.close() };
});
vectorStoreFilterConformance(
  "pinecone (local fake)",
  async () => {
    const fake = await startFakePinecone({ apiKey: KEY, indexes: SUITE_INDEXES });
    return { store: storeFor(fake), cleanup: () => fake.close() };
  },
  { exists: true, prefix: false, dates: false },
);

/**
 * A real project, if the environment names one. PINECONE_INDEX alone runs a
 * smoke test on that index; PINECONE_INDEXES (comma-separated, covering the
 * suite's dimensions and metrics, see SUITE_INDEXES) adds the conformance suite.
 * Records are written under a unique namespace prefix and deleted afterwards.
 */
const REAL_KEY = process.env.PINECONE_API_KEY;
const REAL_INDEX = process.env.PINECONE_INDEX;
const REAL_EXTRA = (process.env.PINECONE_INDEXES ?? "")
  .split(",")
  .map((s) => s.trim())
  .filter(Boolean);
const realPrefix = () =>
  `kltest-${process.pid}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}-`;

async function dropRealNamespaces(prefix: string, indexNames: string[]): Promise<void> {
  const pc = new Pinecone({ apiKey: REAL_KEY as string });
  for (const name of indexNames) {
    const index = pc.index({ name });
    const stats = await index.describeIndexStats();
    for (const ns of Object.keys(stats.namespaces ?? {})) {
      if (ns.startsWith(prefix)) await index.deleteAll({ namespace: ns });
    }
  }
}

describeUnless(
  import.meta.url,
  REAL_KEY && REAL_INDEX ? undefined : "PINECONE_API_KEY and PINECONE_INDEX are not both set",
  "pinecone (real service from PINECONE_API_KEY, PINECONE_INDEX)",
  () => {
    it("creates, writes, searches, reads, counts, deletes and drops a collection", async () => {
      const prefix = realPrefix();
      const index = REAL_INDEX as string;
      const store = new PineconeVectorStore({ apiKey: REAL_KEY as string, index, namespacePrefix: prefix });
      try {
        await store.connect();
        expect(await store.health()).toBe(true);
        const pc = new Pinecone({ apiKey: REAL_KEY as string });
        const model = await pc.describeIndex(index);
        const dimension = model.dimension as number;
        const metric = ({ cosine: "cosine", euclidean: "euclidean", dotproduct: "dot" } as const)[
          model.metric as "cosine" | "euclidean" | "dotproduct"
        ];
        const unit = (k: number) => Float32Array.from({ length: dimension }, (_, j) => (j === k ? 1 : 0));
        await store.createCollection("smoke", dimension, metric);
        await expect(store.createCollection("smoke", dimension + 1, metric)).rejects.toThrow(/dimension/);
        await store.addBatch("smoke", [
          { id: "a", vector: unit(0), payload: { doc: "x", n: 1 } },
          { id: "b", vector: unit(1), payload: { doc: "y", n: 2 } },
        ]);
        // The service is eventually consistent: wait for the writes to show.
        await vi.waitFor(
          async () =>
            expect((await store.search("smoke", unit(0), { topK: 5 })).map((h) => h.id)).toContain("b"),
          { timeout: 60_000, interval: 2000 },
        );
        const hits = await store.search("smoke", unit(0), { topK: 5, filter: { doc: "x" } });
        expect(hits.map((h) => h.id)).toEqual(["a"]);
        expect((await store.get("smoke", ["b", "zz", "a"])).map((r) => r.id)).toEqual(["b", "a"]);
        await vi.waitFor(async () => expect((await store.info("smoke"))?.count).toBe(2), {
          timeout: 60_000,
          interval: 2000,
        });
        await store.delete("smoke", ["a"]);
        await vi.waitFor(async () => expect((await store.get("smoke", ["a"])).length).toBe(0), {
          timeout: 60_000,
          interval: 2000,
        });
        await store.dropCollection("smoke");
        expect(await store.info("smoke")).toBeUndefined();
      } finally {
        await dropRealNamespaces(prefix, [index]);
      }
    });
  },
);

describeUnless(
  import.meta.url,
  REAL_KEY && REAL_INDEX && REAL_EXTRA.length > 0
    ? undefined
    : "PINECONE_API_KEY, PINECONE_INDEX and PINECONE_INDEXES are not all set",
  "pinecone (real service, conformance over PINECONE_INDEX + PINECONE_INDEXES)",
  () => {
    vectorStoreConformance("pinecone (real service)", async () => {
      const prefix = realPrefix();
      const names = [REAL_INDEX as string, ...REAL_EXTRA];
      return {
        store: new PineconeVectorStore({
          apiKey: REAL_KEY as string,
          index: REAL_INDEX as string,
          indexes: REAL_EXTRA,
          namespacePrefix: prefix,
        }),
        cleanup: () => dropRealNamespaces(prefix, names),
      };
    });
  },
);

describe("pinecone adapter", () => {
  let fake: FakePinecone;
  let store: PineconeVectorStore;
  beforeEach(async () => {
    fake = await startFakePinecone({ apiKey: KEY, indexes: SUITE_INDEXES });
    store = storeFor(fake);
    await store.connect();
  });
  afterEach(async () => {
    await store.close();
    await fake.close();
  });

  it("places each collection in the index of its dimension and metric, as a namespace", async () => {
    await store.createCollection("kb_a", 3, "cosine");
    await store.createCollection("kb_b", 2, "euclidean");
    await store.createCollection("kb_c", 2, "dot");
    expect([...(fake.indexes.get("kl-cosine-3")?.namespaces.keys() ?? [])]).toEqual(["kb_a"]);
    expect([...(fake.indexes.get("kl-euclidean-2")?.namespaces.keys() ?? [])]).toEqual(["kb_b"]);
    expect([...(fake.indexes.get("kl-dot-2")?.namespaces.keys() ?? [])]).toEqual(["kb_c"]);
    const err = await store.createCollection("kb_d", 8, "cosine").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KnowledgeLayerError);
    expect((err as Error).message).toMatch(
      /"kb_d": no configured Pinecone index has dimension 8 and metric cosine/,
    );
    expect((err as Error).message).toContain('"kl-euclidean-2": dimension 2, metric euclidean');
    const single = new PineconeVectorStore({
      apiKey: KEY,
      index: "kl-cosine-2",
      controllerHostUrl: fake.controllerUrl,
    });
    await expect(single.createCollection("kb_e", 2, "dot")).rejects.toThrow(/metric dot/);
    // Another store finds existing collections by their marker, whatever the index.
    const other = storeFor(fake);
    expect(await other.info("kb_b")).toEqual({ name: "kb_b", dimension: 2, metric: "euclidean", count: 0 });
    await expect(other.createCollection("kb_b", 2, "cosine")).rejects.toThrow(
      /exists in Pinecone index "kl-euclidean-2" with dimension 2 and metric euclidean/,
    );
  });

  it("keeps a marker record per collection, out of counts, searches and gets", async () => {
    await store.createCollection("kb", 2, "cosine");
    const ns = fake.indexes.get("kl-cosine-2")?.namespaces.get("kb");
    expect(ns?.get(PINECONE_MARKER_ID)?.metadata).toEqual({ [PINECONE_MARKER_KEY]: true });
    expect(await store.info("kb")).toMatchObject({ count: 0 });
    await store.addBatch("kb", [{ id: "a", vector: Float32Array.from([1, 0]), payload: {} }]);
    expect(await store.info("kb")).toMatchObject({ count: 1 });
    const hits = await store.search("kb", Float32Array.from([1, 0]), { topK: 10 });
    expect(hits.map((h) => h.id)).toEqual(["a"]);
    expect(await store.get("kb", [PINECONE_MARKER_ID, "a"])).toHaveLength(1);
    await store.delete("kb", [PINECONE_MARKER_ID, "a"]);
    expect(await store.info("kb")).toMatchObject({ count: 0 });
    await expect(
      store.addBatch("kb", [{ id: PINECONE_MARKER_ID, vector: Float32Array.from([1, 0]), payload: {} }]),
    ).rejects.toThrow(/reserved/);
    await expect(
      store.addBatch("kb", [
        { id: "x", vector: Float32Array.from([1, 0]), payload: { [PINECONE_MARKER_KEY]: 1 } },
      ]),
    ).rejects.toThrow(/reserved/);
    await store.dropCollection("kb");
    expect(fake.indexes.get("kl-cosine-2")?.namespaces.has("kb")).toBe(false);
  });

  it("upserts in batches of 100 and fetches in batches of 100", async () => {
    await store.createCollection("kb_big", 4, "cosine");
    const before = fake.upsertRequests("kl-cosine-4");
    const records = Array.from({ length: 250 }, (_, i) => ({
      id: `r${i}`,
      vector: Float32Array.from([1, i, 0, 0]),
      payload: { i },
    }));
    await store.addBatch("kb_big", records);
    expect(fake.upsertRequests("kl-cosine-4") - before).toBe(3);
    const server = fake.indexes.get("kl-cosine-4")?.server;
    const sizes = server?.requests
      .filter((r) => r.path === "/vectors/upsert")
      .slice(-3)
      .map((r) => (r.body as { vectors: unknown[]; namespace: string }).vectors.length);
    expect(sizes).toEqual([100, 100, 50]);
    const fetchesBefore = server?.requests.filter((r) => r.path.startsWith("/vectors/fetch")).length ?? 0;
    expect(
      await store.get(
        "kb_big",
        records.map((r) => r.id),
      ),
    ).toHaveLength(250);
    expect(
      (server?.requests.filter((r) => r.path.startsWith("/vectors/fetch")).length ?? 0) - fetchesBefore,
    ).toBe(3);
    await store.update("kb_big", records);
    expect(fake.upsertRequests("kl-cosine-4") - before).toBe(6);
  });

  it("converts squared euclidean distances and applies thresholds per metric; ties by id", async () => {
    await store.createCollection("e", 2, "euclidean");
    await store.addBatch("e", [
      { id: "near", vector: Float32Array.from([1, 1]), payload: {} },
      { id: "far", vector: Float32Array.from([4, 5]), payload: {} },
      { id: "mid", vector: Float32Array.from([2, 1]), payload: {} },
      { id: "same", vector: Float32Array.from([1, 0]), payload: {} },
    ]);
    const hits = await store.search("e", Float32Array.from([1, 0]), { topK: 4, scoreThreshold: -1.5 });
    expect(hits.map((h) => [h.id, h.score])).toEqual([
      ["same", 0],
      ["near", expect.closeTo(-1, 5)],
      ["mid", expect.closeTo(-Math.SQRT2, 5)],
    ]);
    await store.createCollection("t", 2, "cosine");
    await store.addBatch(
      "t",
      ["m", "c", "x", "a"].map((id) => ({ id, vector: Float32Array.from([1, 0]), payload: { k: id } })),
    );
    expect((await store.search("t", Float32Array.from([1, 0]), { topK: 10 })).map((h) => h.id)).toEqual([
      "a",
      "c",
      "m",
      "x",
    ]);
    const query = fake.indexes.get("kl-cosine-2")?.server.requests.at(-1);
    expect(query?.body).toMatchObject({
      filter: { [PINECONE_MARKER_KEY]: { $exists: false } },
      includeMetadata: true,
    });
    await store.search("t", Float32Array.from([1, 0]), { topK: 5000, filter: { k: "c" } });
    expect(fake.indexes.get("kl-cosine-2")?.server.requests.at(-1)?.body).toMatchObject({
      topK: 1000,
      filter: { k: { $eq: "c" } },
    });
  });

  it("rejects a wrong API key with a clear error; health() says false without throwing", async () => {
    const bad = storeFor(fake, { apiKey: "wrong" });
    const err = await bad.connect().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KnowledgeLayerError);
    expect((err as Error).message).toMatch(
      /^pinecone: cannot describe index "kl-cosine-2" at .*: the API key was rejected/,
    );
    expect((err as Error).message).toContain(fake.controllerUrl);
    expect(await bad.health()).toBe(false);
    expect(await store.health()).toBe(true);
    // A key the data plane rejects (the control plane accepted it before).
    await store.createCollection("kb", 2, "cosine");
    const host = fake.indexes.get("kl-cosine-2")?.host;
    fake.indexes.get("kl-cosine-2")?.server.script.push({ status: 401, body: "Unauthorized" });
    await expect(store.info("kb")).rejects.toThrow(
      new RegExp(
        `cannot count collection "kb" \\(index "kl-cosine-2" at ${host}\\): the API key was rejected`,
      ),
    );
  });

  it("reports server errors without retrying forever, naming collection, index and host", async () => {
    await store.createCollection("kb", 2, "cosine");
    const index = fake.indexes.get("kl-cosine-2");
    index?.server.script.push({ status: 503, body: { code: 14, message: "unavailable", details: [] } });
    const n = index?.server.requests.length ?? 0;
    const err = await store.search("kb", Float32Array.from([1, 0]), { topK: 1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KnowledgeLayerError);
    expect((err as Error).message).toMatch(
      new RegExp(
        `^pinecone: cannot search collection "kb" \\(index "kl-cosine-2" at ${index?.host}\\): server error \\(HTTP 5xx\\), still failing after 0 retries$`,
      ),
    );
    expect((index?.server.requests.length ?? 0) - n).toBe(1);
    // With retries, a passing 5xx is absorbed (the client backs off and retries).
    const retrying = storeFor(fake, { maxRetries: 1 });
    index?.server.script.push({ status: 503, body: { code: 14, message: "unavailable", details: [] } });
    expect(await retrying.search("kb", Float32Array.from([1, 0]), { topK: 1 })).toEqual([]);
    const unknown = storeFor(fake, { index: "no-such-index", indexes: [] });
    await expect(unknown.connect()).rejects.toThrow(
      /^pinecone: cannot describe index "no-such-index" at .*: not found \(HTTP 404\)$/,
    );
    await expect(store.search("missing", Float32Array.from([1, 0]), { topK: 1 })).rejects.toThrow(
      /collection "missing" does not exist/,
    );
  });

  it("uses indexHost for the data plane of the main index", async () => {
    const index = fake.indexes.get("kl-cosine-2");
    if (index) index.advertisedHost = "http://127.0.0.1:1"; // what describe_index says: unusable
    const direct = new PineconeVectorStore({
      apiKey: KEY,
      index: "kl-cosine-2",
      controllerHostUrl: fake.controllerUrl,
      indexHost: index?.host,
      maxRetries: 0,
    });
    await direct.createCollection("kb", 2, "cosine");
    await direct.addBatch("kb", [{ id: "a", vector: Float32Array.from([0, 1]), payload: { t: "x" } }]);
    expect(await direct.get("kb", ["a"])).toEqual([
      { id: "a", vector: Float32Array.from([0, 1]), payload: { t: "x" } },
    ]);
    const viaDescribe = storeFor(fake);
    await expect(viaDescribe.info("kb")).rejects.toThrow(/http:\/\/127\.0\.0\.1:1/);
  });

  it("keeps namespaces apart with a prefix", async () => {
    const a = storeFor(fake, { namespacePrefix: "app1-" });
    const b = storeFor(fake, { namespacePrefix: "app2-" });
    await a.createCollection("kb", 2, "cosine");
    expect(await b.info("kb")).toBeUndefined();
    await b.createCollection("kb", 2, "dot");
    expect([...(fake.indexes.get("kl-cosine-2")?.namespaces.keys() ?? [])]).toEqual(["app1-kb"]);
    expect([...(fake.indexes.get("kl-dot-2")?.namespaces.keys() ?? [])]).toEqual(["app2-kb"]);
  });
});

describe("pinecone adapter: unreachable services", () => {
  it("names the control-plane URL when nothing listens there", async () => {
    const fake = await startFakePinecone({ apiKey: KEY, indexes: SUITE_INDEXES.slice(0, 1) });
    const url = fake.controllerUrl;
    await fake.close();
    const store = new PineconeVectorStore({ apiKey: KEY, index: "kl-cosine-2", controllerHostUrl: url });
    const err = await store.createCollection("kb", 2, "cosine").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KnowledgeLayerError);
    expect((err as Error).message).toBe(
      `pinecone: cannot describe index "kl-cosine-2" at ${url}: cannot connect (ECONNREFUSED)`,
    );
    expect(await store.health()).toBe(false);
  });

  it("gives up after the timeout when a data plane does not answer", async () => {
    const silent: Server = createServer(() => {});
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const address = silent.address();
    const host = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`;
    const fake = await startFakePinecone({ apiKey: KEY, indexes: SUITE_INDEXES.slice(0, 1) });
    try {
      const store = new PineconeVectorStore({
        apiKey: KEY,
        index: "kl-cosine-2",
        controllerHostUrl: fake.controllerUrl,
        indexHost: host,
        timeoutMs: 300,
      });
      const started = Date.now();
      const err = await store.info("kb").catch((e: unknown) => e);
      expect(Date.now() - started).toBeLessThan(3000);
      expect((err as Error).message).toBe(
        `pinecone: cannot look up collection "kb" (index "kl-cosine-2" at ${host}): no answer within 300 ms`,
      );
      expect(await store.health()).toBe(false);
    } finally {
      silent.closeAllConnections();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
      await fake.close();
    }
  });
});
