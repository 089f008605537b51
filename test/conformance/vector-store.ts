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
 * The vector-store contract, run against every implementation
 * (embedded SQLite now; pgvector, Qdrant and Pinecone later).
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
  });
}
