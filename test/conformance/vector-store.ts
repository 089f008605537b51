import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { VectorStore } from "../../src/store/contract.js";

/** A factory that returns a fresh, empty store and a cleanup function. */
export type StoreFactory = () => Promise<{ store: VectorStore; cleanup: () => Promise<void> | void }>;

const v = (...xs: number[]): Float32Array => {
  const a = Float32Array.from(xs);
  const n = Math.hypot(...a);
  return a.map((x) => x / n);
};

/**
 * The vector-store contract, run against every implementation (embedded SQLite,
 * pgvector, Qdrant, Pinecone, Chroma). Collection names are the ones knowledge
 * bases use (`kb_<name>`-like identifiers); record ids are arbitrary strings.
 */
export function vectorStoreConformance(name: string, factory: StoreFactory): void {
  describe(`vector store contract: ${name}`, () => {
    let store: VectorStore;
    let cleanup: () => Promise<void> | void;
    beforeEach(async () => {
      ({ store, cleanup } = await factory());
      await store.connect();
    });
    afterEach(async () => {
      await store.close();
      await cleanup();
    });

    it("is healthy and creates collections idempotently, rejecting a different dimension", async () => {
      expect(await store.health()).toBe(true);
      await store.createCollection("c1", 3, "cosine");
      await store.createCollection("c1", 3, "cosine");
      await expect(store.createCollection("c1", 4, "cosine")).rejects.toThrow(/dimension/);
      expect(await store.info("c1")).toMatchObject({ name: "c1", dimension: 3, metric: "cosine", count: 0 });
      expect(await store.info("missing")).toBeUndefined();
    });

    it("returns nearest neighbours by cosine similarity, best first", async () => {
      await store.createCollection("c", 3, "cosine");
      await store.addBatch("c", [
        { id: "x", vector: v(1, 0, 0), payload: { doc: "a" } },
        { id: "y", vector: v(0, 1, 0), payload: { doc: "b" } },
        { id: "xy", vector: v(1, 1, 0), payload: { doc: "a" } },
      ]);
      const hits = await store.search("c", v(1, 0.1, 0), { topK: 3 });
      expect(hits.map((h) => h.id)).toEqual(["x", "xy", "y"]);
      expect(hits[0]?.score).toBeCloseTo(1 / Math.hypot(1, 0.1), 5);
      expect(hits[2]?.score).toBeCloseTo(0.1 / Math.hypot(1, 0.1), 5);
      expect(hits[0]?.payload).toEqual({ doc: "a" });
      expect(await store.search("c", v(1, 0, 0), { topK: 1 })).toHaveLength(1);
    });

    it("applies payload filters and the score threshold (0 means 0)", async () => {
      await store.createCollection("c", 2, "cosine");
      await store.addBatch("c", [
        { id: "p", vector: v(1, 0), payload: { doc: "a", n: 1 } },
        { id: "q", vector: v(0.9, 0.1), payload: { doc: "b", n: 2 } },
        { id: "r", vector: v(-1, 0), payload: { doc: "b", n: 2 } },
      ]);
      expect((await store.search("c", v(1, 0), { topK: 5, filter: { doc: "b" } })).map((h) => h.id)).toEqual([
        "q",
        "r",
      ]);
      expect((await store.search("c", v(1, 0), { topK: 5, filter: { n: 1 } })).map((h) => h.id)).toEqual([
        "p",
      ]);
      expect((await store.search("c", v(1, 0), { topK: 5, scoreThreshold: 0 })).map((h) => h.id)).toEqual([
        "p",
        "q",
      ]);
    });

    it("isolates collections", async () => {
      await store.createCollection("a", 2, "cosine");
      await store.createCollection("b", 2, "cosine");
      await store.addBatch("a", [{ id: "1", vector: v(1, 0), payload: {} }]);
      await store.addBatch("b", [{ id: "1", vector: v(0, 1), payload: {} }]);
      const hits = await store.search("b", v(1, 0), { topK: 5 });
      expect(hits).toHaveLength(1);
      expect(hits[0]?.score).toBeCloseTo(0, 5);
      expect((await store.info("a"))?.count).toBe(1);
    });

    it("updates, replaces and deletes records; rejects wrong dimensions", async () => {
      await store.createCollection("c", 2, "cosine");
      await store.addBatch("c", [{ id: "1", vector: v(1, 0), payload: { t: "old" } }]);
      await store.update("c", [{ id: "1", vector: v(0, 1), payload: { t: "new" } }]);
      let hits = await store.search("c", v(0, 1), { topK: 1 });
      expect(hits[0]).toMatchObject({ id: "1", payload: { t: "new" } });
      expect(hits[0]?.score).toBeCloseTo(1, 5);
      await store.addBatch("c", [{ id: "1", vector: v(1, 0), payload: { t: "again" } }]);
      expect((await store.info("c"))?.count).toBe(1);
      await expect(store.addBatch("c", [{ id: "2", vector: v(1, 0, 0), payload: {} }])).rejects.toThrow(
        /dimension/,
      );
      await expect(store.update("c", [{ id: "nope", vector: v(1, 0), payload: {} }])).rejects.toThrow(/nope/);
      await store.delete("c", ["1"]);
      hits = await store.search("c", v(0, 1), { topK: 1 });
      expect(hits).toEqual([]);
      await expect(store.search("missing", v(1, 0), { topK: 1 })).rejects.toThrow(/missing/);
    });
    it("round-trips payloads and vectors of many records written in batches", async () => {
      await store.createCollection("kb_many", 4, "cosine");
      const records = Array.from({ length: 250 }, (_, i) => ({
        id: `chunk-${i}`,
        vector: v(1, (i % 7) + 0.5, i / 250, 0.25),
        payload: {
          text: `chunk ${i}: naïve café — "quoted" \\ text`,
          documentId: Math.floor(i / 10),
          chunkIndex: i % 10,
          sourceId: `docs/${Math.floor(i / 10)}.md`,
          embedded: i % 2 === 0,
        },
      }));
      await store.addBatch("kb_many", records);
      expect((await store.info("kb_many"))?.count).toBe(250);
      const got = await store.get("kb_many", ["chunk-249", "absent", "chunk-0", "chunk-137"]);
      expect(got.map((r) => r.id)).toEqual(["chunk-249", "chunk-0", "chunk-137"]);
      for (const record of got) {
        const original = records[Number(record.id.slice(6))];
        expect(record.payload).toEqual(original?.payload);
        expect(record.vector).toHaveLength(4);
        for (let j = 0; j < 4; j++)
          expect(record.vector[j]).toBeCloseTo(original?.vector[j] ?? Number.NaN, 5);
      }
      const filtered = await store.search("kb_many", v(1, 1, 0, 0), {
        topK: 100,
        filter: { documentId: 3, embedded: true },
      });
      expect(filtered.map((h) => h.id).sort()).toEqual([
        "chunk-30",
        "chunk-32",
        "chunk-34",
        "chunk-36",
        "chunk-38",
      ]);
      expect(
        await store.search("kb_many", v(1, 1, 0, 0), { topK: 5, filter: { sourceId: "nowhere" } }),
      ).toEqual([]);
      const top = await store.search("kb_many", v(1, 1, 0, 0), { topK: 1000 });
      expect(top).toHaveLength(250);
      for (let i = 1; i < top.length; i++) {
        expect(top[i - 1]?.score ?? 0).toBeGreaterThanOrEqual((top[i]?.score ?? 0) - 1e-6);
      }
    });

    it("scores by the collection's metric: euclidean as negative distance, dot as inner product", async () => {
      await store.createCollection("kb_euclid", 2, "euclidean");
      await store.createCollection("kb_dot", 2, "dot");
      await expect(store.createCollection("kb_euclid", 2, "cosine")).rejects.toThrow(/metric|cosine|euclid/i);
      expect(await store.info("kb_dot")).toMatchObject({ dimension: 2, metric: "dot", count: 0 });
      const raw = [
        { id: "near", vector: Float32Array.from([1, 1]), payload: {} },
        { id: "far", vector: Float32Array.from([4, 5]), payload: {} },
        { id: "mid", vector: Float32Array.from([2, 1]), payload: {} },
      ];
      await store.addBatch("kb_euclid", raw);
      await store.addBatch("kb_dot", raw);
      const q = Float32Array.from([1, 0]);
      const euclid = await store.search("kb_euclid", q, { topK: 3 });
      expect(euclid.map((h) => h.id)).toEqual(["near", "mid", "far"]);
      expect(euclid[0]?.score).toBeCloseTo(-1, 4);
      expect(euclid[1]?.score).toBeCloseTo(-Math.SQRT2, 4);
      expect(euclid[2]?.score).toBeCloseTo(-Math.sqrt(34), 4);
      const dot = await store.search("kb_dot", q, { topK: 3 });
      expect(dot.map((h) => h.id)).toEqual(["far", "mid", "near"]);
      expect(dot.map((h) => h.score)).toEqual([
        expect.closeTo(4, 4),
        expect.closeTo(2, 4),
        expect.closeTo(1, 4),
      ]);
      expect((await store.search("kb_dot", q, { topK: 3, scoreThreshold: 1.5 })).map((h) => h.id)).toEqual([
        "far",
        "mid",
      ]);
    });

    it("drops collections, searches empty ones, and ignores unknown ids on delete", async () => {
      await store.createCollection("kb_tmp", 2, "cosine");
      expect(await store.search("kb_tmp", v(1, 0), { topK: 3 })).toEqual([]);
      await store.addBatch("kb_tmp", [{ id: "a", vector: v(1, 0), payload: { k: "x" } }]);
      await store.delete("kb_tmp", ["never-stored"]);
      expect((await store.info("kb_tmp"))?.count).toBe(1);
      await store.dropCollection("kb_tmp");
      expect(await store.info("kb_tmp")).toBeUndefined();
      await store.dropCollection("kb_tmp");
      await store.createCollection("kb_tmp", 3, "cosine");
      expect(await store.info("kb_tmp")).toMatchObject({ dimension: 3, count: 0 });
    });

    it("writes nothing of a batch holding a record of the wrong dimension", async () => {
      await store.createCollection("kb_atomic", 2, "cosine");
      await expect(
        store.addBatch("kb_atomic", [
          { id: "ok", vector: v(1, 0), payload: {} },
          { id: "bad", vector: v(1, 0, 0), payload: {} },
        ]),
      ).rejects.toThrow(/bad.*dimension|dimension.*bad/);
      expect((await store.info("kb_atomic"))?.count).toBe(0);
      await expect(store.addBatch("missing", [{ id: "x", vector: v(1, 0), payload: {} }])).rejects.toThrow(
        /missing/,
      );
    });
  });
}
