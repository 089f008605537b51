import { readdirSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { defaultShards, mergeCandidates } from "../../src/store/ann-client.js";
import { AnnIndexes, setAnnWarn, setUsearchLoader } from "../../src/store/ann-index.js";
import type { VectorRecord } from "../../src/store/contract.js";
import { type Db, openDatabase } from "../../src/store/database.js";
import { SqliteVectorStore } from "../../src/store/sqlite-vector-store.js";
import { tempDir } from "../helpers/helpers.js";

const DIM = 48;
const ANN = { minRecords: 300, threads: 1 };
/** Whether the stores of the running suite keep their indexes on worker threads, and in how many shards. */
let inWorker = true;
let shards = 2;
/** Index files a collection has after a save: one per shard on workers, one in process. */
const filesPerCollection = (): number => (inWorker ? shards : 1);

/** Deterministic clustered unit vectors: `clusters` centres plus Gaussian noise. */
function generator(seed: number, clusters = 40) {
  let s = seed >>> 0;
  const rnd = (): number => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
  const gauss = (): number => Math.sqrt(-2 * Math.log(rnd() + 1e-12)) * Math.cos(2 * Math.PI * rnd());
  const centres = Array.from({ length: clusters }, () => Float32Array.from({ length: DIM }, gauss));
  return (): Float32Array => {
    const c = centres[Math.floor(rnd() * clusters)] as Float32Array;
    const v = Float32Array.from(c, (x) => x + 0.8 * gauss());
    const n = Math.hypot(...v);
    return v.map((x) => x / n);
  };
}

function records(make: () => Float32Array, from: number, count: number, tag = "a"): VectorRecord[] {
  return Array.from({ length: count }, (_, i) => ({
    id: `r${from + i}`,
    vector: make(),
    payload: { n: from + i, tag, even: (from + i) % 2 === 0 },
  }));
}

const opened: { db: Db; store: SqliteVectorStore }[] = [];
const cleanups: (() => void)[] = [];

function open(dir: string): { db: Db; store: SqliteVectorStore } {
  const db = openDatabase(dir);
  const store = new SqliteVectorStore(db, { ann: { ...ANN, worker: inWorker, shards } });
  opened.push({ db, store });
  return { db, store };
}

function newDir(): string {
  const { dir, cleanup } = tempDir("kl-ann-");
  cleanups.push(cleanup);
  return dir;
}

afterEach(() => {
  for (const { db } of opened.splice(0)) if (db.open) db.close();
  for (const cleanup of cleanups.splice(0)) cleanup();
});

async function recallAt10(
  store: SqliteVectorStore,
  collection: string,
  queries: Float32Array[],
): Promise<number> {
  let found = 0;
  for (const q of queries) {
    const exact = await store.search(collection, q, { topK: 10, exact: true });
    const approx = await store.search(collection, q, { topK: 10 });
    const want = new Set(exact.map((h) => h.id));
    found += approx.filter((h) => want.has(h.id)).length;
    // Rescored exactly: the same record has the same score either way.
    const byId = new Map(exact.map((h) => [h.id, h.score]));
    for (const hit of approx) if (byId.has(hit.id)) expect(hit.score).toBeCloseTo(byId.get(hit.id) ?? 0, 5);
  }
  return found / (queries.length * 10);
}

describe.each([
  ["on two worker threads (two shards)", true, 2],
  ["on a worker thread (one shard)", true, 1],
  ["in process", false, 1],
])("embedded store: approximate (HNSW) index %s", (_, worker, shardCount) => {
  beforeEach(() => {
    inWorker = worker;
    shards = shardCount;
  });
  it("answers with recall@10 >= 0.95 against exact search and uses the index", async () => {
    const dir = newDir();
    const { store } = open(dir);
    const make = generator(1);
    await store.createCollection("kb_a", DIM, "cosine");
    await store.addBatch("kb_a", records(make, 0, 3000));
    const queries = Array.from({ length: 40 }, make);
    expect(await recallAt10(store, "kb_a", queries)).toBeGreaterThanOrEqual(0.95);
    expect(await store.ann?.isLoaded("kb_a")).toBe(true);
    await store.close();
    expect(readdirSync(join(dir, "kl-ann")).filter((f) => f.endsWith(".usearch"))).toHaveLength(
      filesPerCollection(),
    );
  });

  it("searches small collections exactly without building an index", async () => {
    const { store } = open(newDir());
    const make = generator(2);
    await store.createCollection("small", DIM, "cosine");
    await store.addBatch("small", records(make, 0, 100));
    await store.search("small", make(), { topK: 5 });
    expect(await store.ann?.isLoaded("small")).toBe(false);
  });

  it("repairs the index after a crash between the vector commit and the index save", async () => {
    const dir = newDir();
    const make = generator(3);
    const first = open(dir);
    await first.store.createCollection("kb", DIM, "cosine");
    await first.store.addBatch("kb", records(make, 0, 1000));
    await first.store.search("kb", make(), { topK: 10 }); // builds and saves the index file
    const added = records(make, 1000, 200, "late");
    await first.store.addBatch("kb", added);
    await first.store.delete("kb", ["r0", "r1", "r2"]);
    // Crash: the catalog committed, the in-memory index never saw the writes or saved them.
    first.db.close();

    const second = open(dir);
    for (const record of added.slice(0, 20)) {
      const hits = await second.store.search("kb", record.vector, { topK: 1 });
      expect(hits[0]?.id).toBe(record.id);
      expect(hits[0]?.score).toBeCloseTo(1, 5);
    }
    const gone = new Set(["r0", "r1", "r2"]);
    const queries = Array.from({ length: 30 }, make);
    for (const q of queries) {
      const hits = await second.store.search("kb", q, { topK: 50 });
      expect(hits.some((h) => gone.has(h.id))).toBe(false);
    }
    expect(await recallAt10(second.store, "kb", queries)).toBeGreaterThanOrEqual(0.95);
  });

  it("saves on close an index with saveOnCloseAfter or more unsaved changes; fewer stay in the log", async () => {
    for (const [after, saved] of [
      [100, true],
      [5000, false],
    ] as const) {
      const dir = newDir();
      const make = generator(16);
      const db = openDatabase(dir);
      const store = new SqliteVectorStore(db, {
        ann: { ...ANN, worker: inWorker, shards, saveOnCloseAfter: after },
      });
      opened.push({ db, store });
      await store.createCollection("kb", DIM, "cosine");
      await store.addBatch("kb", records(make, 0, 600));
      await store.syncIndex("kb"); // built and saved through log entry 600
      await store.addBatch("kb", records(make, 600, 300, "late"));
      // Replays the 300 changes: under the threshold of saves while running (1,000 records).
      await store.search("kb", make(), { topK: 5 });
      await store.close();
      const seqs = readdirSync(join(dir, "kl-ann"))
        .filter((f) => f.endsWith(".usearch"))
        .map((f) => Number(f.split(".")[1]));
      expect(seqs).toHaveLength(filesPerCollection());
      for (const seq of seqs) expect(seq, `saveOnCloseAfter ${after}`).toBe(saved ? 900 : 600);
    }
  });

  it("rebuilds from SQLite when the index file is unreadable", async () => {
    const dir = newDir();
    const make = generator(4);
    const first = open(dir);
    await first.store.createCollection("kb", DIM, "cosine");
    const stored = records(make, 0, 800);
    await first.store.addBatch("kb", stored);
    await first.store.syncIndex("kb");
    await first.store.close();
    first.db.close();
    const files = readdirSync(join(dir, "kl-ann")).filter((f) => f.endsWith(".usearch"));
    expect(files).toHaveLength(filesPerCollection());
    writeFileSync(join(dir, "kl-ann", files[0] as string), "not an index");
    const second = open(dir);
    const probe = stored[123] as VectorRecord;
    const hits = await second.store.search("kb", probe.vector, { topK: 3 });
    expect(hits[0]?.id).toBe(probe.id);
    expect(await recallAt10(second.store, "kb", Array.from({ length: 20 }, make))).toBeGreaterThanOrEqual(
      0.95,
    );
  });

  it("never returns deleted records and finds re-ingested (changed) ones by their new vector", async () => {
    const { store } = open(newDir());
    const make = generator(5);
    await store.createCollection("kb", DIM, "cosine");
    const stored = records(make, 0, 1000);
    await store.addBatch("kb", stored);
    await store.search("kb", make(), { topK: 10 });
    expect(await store.ann?.isLoaded("kb")).toBe(true);

    const victim = stored[10] as VectorRecord;
    await store.delete("kb", [victim.id]);
    expect((await store.search("kb", victim.vector, { topK: 10 })).map((h) => h.id)).not.toContain(victim.id);

    // Re-ingest of a changed file: same id, new vector (INSERT OR REPLACE) and update().
    const changed = stored[20] as VectorRecord;
    const fresh = make();
    await store.addBatch("kb", [{ ...changed, vector: fresh, payload: { tag: "changed" } }]);
    let hits = await store.search("kb", fresh, { topK: 1 });
    expect(hits[0]).toMatchObject({ id: changed.id, payload: { tag: "changed" } });
    expect(hits[0]?.score).toBeCloseTo(1, 5);
    const old = await store.search("kb", changed.vector, { topK: 1 });
    expect(old[0]?.id === changed.id && (old[0]?.score ?? 0) > 0.9999).toBe(false);

    const updated = stored[30] as VectorRecord;
    const other = make();
    await store.update("kb", [{ id: updated.id, vector: other, payload: { tag: "updated" } }]);
    hits = await store.search("kb", other, { topK: 1 });
    expect(hits[0]).toMatchObject({ id: updated.id, payload: { tag: "updated" } });
    expect((await store.info("kb"))?.count).toBe(999);
  });

  it("drops a collection with its index and re-creates it empty", async () => {
    const dir = newDir();
    const { store } = open(dir);
    const make = generator(6);
    await store.createCollection("kb", DIM, "cosine");
    const before = records(make, 0, 600, "before");
    await store.addBatch("kb", before);
    await store.search("kb", make(), { topK: 10 });
    await store.close();
    await store.dropCollection("kb");
    expect(readdirSync(join(dir, "kl-ann")).filter((f) => f.endsWith(".usearch"))).toEqual([]);

    await store.createCollection("kb", DIM, "cosine");
    const after = records(make, 0, 600, "after");
    await store.addBatch("kb", after);
    for (const record of before.slice(0, 10)) {
      const hits = await store.search("kb", record.vector, { topK: 20 });
      expect(hits.every((h) => h.payload.tag === "after")).toBe(true);
    }
    const probe = after[5] as VectorRecord;
    expect((await store.search("kb", probe.vector, { topK: 1 }))[0]?.id).toBe(probe.id);
    expect(await store.ann?.isLoaded("kb")).toBe(true);
  });

  it("answers filtered searches exactly when the filter is too selective for the candidates", async () => {
    const { store } = open(newDir());
    const make = generator(7);
    await store.createCollection("kb", DIM, "cosine");
    await store.addBatch("kb", records(make, 0, 1500));
    for (const q of Array.from({ length: 10 }, make)) {
      const filter = { n: 777 };
      expect(await store.search("kb", q, { topK: 5, filter })).toEqual(
        await store.search("kb", q, { topK: 5, filter, exact: true }),
      );
      const half = await store.search("kb", q, { topK: 10, filter: { even: true } });
      expect(half).toHaveLength(10);
      expect(half.every((h) => h.payload.even === true)).toBe(true);
    }
  });

  it("keeps two connections to one database consistent (another process writes and prunes the log)", async () => {
    const dir = newDir();
    const make = generator(8);
    const writer = open(dir);
    const reader = open(dir);
    await writer.store.createCollection("kb", DIM, "cosine");
    await writer.store.addBatch("kb", records(make, 0, 700));
    await reader.store.search("kb", make(), { topK: 5 });
    expect(await reader.store.ann?.isLoaded("kb")).toBe(true);
    const late = records(make, 700, 50, "late");
    await writer.store.addBatch("kb", late);
    await writer.store.delete("kb", ["r1"]);
    await writer.store.syncIndex("kb"); // saves a newer file and prunes the log the reader has not applied
    for (const record of late.slice(0, 5)) {
      expect((await reader.store.search("kb", record.vector, { topK: 1 }))[0]?.id).toBe(record.id);
    }
    expect((await reader.store.get("kb", ["r1"])).length).toBe(0);
  });

  it("searches exactly when the index is disabled", async () => {
    const db = openDatabase(newDir());
    const store = new SqliteVectorStore(db, { ann: false });
    opened.push({ db, store });
    const make = generator(9);
    await store.createCollection("kb", DIM, "cosine");
    await store.addBatch("kb", records(make, 0, 400));
    const q = make();
    expect(await store.search("kb", q, { topK: 10 })).toEqual(
      await store.search("kb", q, { topK: 10, exact: true }),
    );
    expect(store.ann).toBeUndefined();
  });

  it("effort scales the HNSW search list (at least the candidates fetched); rescored hits keep exact scores", async () => {
    const real = createRequire(import.meta.url)("usearch") as { Index: new (...a: never[]) => object };
    const lists: number[] = [];
    class Spy extends (real.Index as new (
      ...a: unknown[]
    ) => { search(v: Float32Array, n: number, t: number): unknown }) {
      override search(v: Float32Array, n: number, t: number): unknown {
        lists.push(n);
        return super.search(v, n, t);
      }
    }
    const previousLoader = setUsearchLoader(() => ({ ...real, Index: Spy }) as never);
    try {
      const db = openDatabase(newDir());
      const store = new SqliteVectorStore(db, { ann: { ...ANN, worker: false } });
      opened.push({ db, store });
      const make = generator(11);
      await store.createCollection("kb", DIM, "cosine");
      await store.addBatch("kb", records(make, 0, 500));
      const q = make();
      const exact = new Map(
        (await store.search("kb", q, { topK: 10, exact: true })).map((h) => [h.id, h.score]),
      );
      lists.length = 0;
      for (const effort of [undefined, 2, 0.5]) {
        const hits = await store.search("kb", q, { topK: 10, effort });
        for (const h of hits) if (exact.has(h.id)) expect(h.score).toBeCloseTo(exact.get(h.id) ?? 0, 5);
      }
      // 500 vectors: automatic list round(2.5 × √500) = 56; 10 hits fetch 40 candidates.
      expect(lists).toEqual([56, 112, 40]);
    } finally {
      setUsearchLoader(previousLoader);
    }
  });

  it("falls back to exact search, with one warning, when the native module cannot be loaded", async () => {
    const warnings: string[] = [];
    const previousWarn = setAnnWarn((m) => warnings.push(m));
    const previousLoader = setUsearchLoader(() => {
      throw new Error("no prebuilt binary for this platform");
    });
    try {
      const { store } = open(newDir());
      const make = generator(10);
      await store.createCollection("kb", DIM, "cosine");
      await store.addBatch("kb", records(make, 0, 500));
      for (const q of Array.from({ length: 3 }, make)) {
        expect(await store.search("kb", q, { topK: 10 })).toEqual(
          await store.search("kb", q, { topK: 10, exact: true }),
        );
      }
      expect(await store.ann?.isLoaded("kb")).toBe(false);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(/no prebuilt binary/);
    } finally {
      setAnnWarn(previousWarn);
      setUsearchLoader(previousLoader);
    }
  });
});

describe("embedded store: sharded approximate index", () => {
  it("merges shard candidates by distance, k at most, lower shard first on ties", () => {
    const a = { keys: [1, 3, 5], distances: [0.1, 0.3, 0.5] };
    const b = { keys: [2, 4], distances: [0.2, 0.3] };
    expect(mergeCandidates([a, b], 4)).toEqual([1, 2, 3, 4]);
    expect(mergeCandidates([a, b], 10)).toEqual([1, 2, 3, 4, 5]);
    expect(mergeCandidates([a], 2)).toEqual([1, 3]);
    expect(mergeCandidates([{ keys: [], distances: [] }, b], 1)).toEqual([2]);
  });

  it("prunes the log only through what every shard's newest file covers", async () => {
    const dir = newDir();
    const db = openDatabase(dir);
    const store = new SqliteVectorStore(db, { ann: false });
    opened.push({ db, store });
    const make = generator(12);
    await store.createCollection("kb", DIM, "cosine");
    await store.addBatch("kb", records(make, 0, 700));
    const logged = (): number =>
      (db.prepare("SELECT count(*) AS n FROM vec_ann_log WHERE collection = 'kb'").get() as { n: number }).n;
    expect(logged()).toBe(700);
    const shard = (index: number) =>
      new AnnIndexes(db, { ...ANN, dir: join(dir, "kl-ann"), shard: { index, count: 2 } });
    const even = shard(0);
    expect(even.sync("kb", DIM, "cosine")).toBe(true);
    expect(even.indexedCount("kb")).toBe(350);
    // Shard 1 has no file yet: its records must stay in the log.
    expect(logged()).toBe(700);
    const odd = shard(1);
    expect(odd.sync("kb", DIM, "cosine")).toBe(true);
    expect(odd.indexedCount("kb")).toBe(350);
    expect(logged()).toBe(0);
    expect(readdirSync(join(dir, "kl-ann")).sort()).toEqual([
      expect.stringMatching(/\.s0of2\.usearch$/),
      expect.stringMatching(/\.s1of2\.usearch$/),
    ]);
    // Each shard finds its own records: rowids 1..700, odd ones in shard 1.
    const probe = (await store.get("kb", ["r10"]))[0] as VectorRecord;
    const hits = [
      ...(even.candidates("kb", DIM, "cosine", probe.vector, 1) ?? []),
      ...(odd.candidates("kb", DIM, "cosine", probe.vector, 1) ?? []),
    ];
    expect(hits).toContain(11);
    expect(() => new AnnIndexes(db, { shard: { index: 2, count: 2 } })).toThrow(/shard 2 of 2/);
  });

  const usearchFilesOf = (dir: string) =>
    readdirSync(join(dir, "kl-ann")).filter((f) => f.endsWith(".usearch"));
  const withShards = (dir: string, count: number, otherSplitEntries?: number) => {
    const db = openDatabase(dir);
    const store = new SqliteVectorStore(db, {
      ann: { ...ANN, worker: true, shards: count, otherSplitEntries },
    });
    opened.push({ db, store });
    return { db, store };
  };

  it("rebuilds an index saved with another shard count, and removes its files once they are stale", async () => {
    const dir = newDir();
    const make = generator(13);
    const stored = records(make, 0, 800);
    const usearchFiles = () => usearchFilesOf(dir);
    const one = withShards(dir, 1);
    await one.store.createCollection("kb", DIM, "cosine");
    await one.store.addBatch("kb", stored);
    expect(await one.store.syncIndex("kb")).toBe(true);
    await one.store.close();
    await one.store.addBatch("kb", records(make, 800, 5, "after"));
    one.db.close();
    expect(usearchFiles()).toEqual([expect.not.stringMatching(/\.s\d+of\d+\./)]);

    // The single file is 5 log entries behind: with a window of 0 entries it is stale.
    const two = withShards(dir, 2, 0);
    const probe = stored[321] as VectorRecord;
    expect((await two.store.search("kb", probe.vector, { topK: 1 }))[0]?.id).toBe(probe.id);
    expect(await two.store.ann?.indexedCount("kb")).toBe(805);
    await two.store.close();
    two.db.close();
    expect(usearchFiles().sort()).toEqual([
      expect.stringMatching(/\.s0of2\.usearch$/),
      expect.stringMatching(/\.s1of2\.usearch$/),
    ]);
  });

  it("two processes with different shard counts keep each other's recent files and the log they need", async () => {
    const dir = newDir();
    const make = generator(14);
    const one = withShards(dir, 1);
    const two = withShards(dir, 2);
    await one.store.createCollection("kb", DIM, "cosine");
    await one.store.addBatch("kb", records(make, 0, 700));
    expect(await one.store.syncIndex("kb")).toBe(true);
    expect(await two.store.syncIndex("kb")).toBe(true);
    const files = usearchFilesOf(dir).sort();
    expect(files).toHaveLength(3);
    // More writes and saves by the one-shard process: the two-shard files stay, and the log
    // is not pruned past them, so the two-shard process catches up without a rebuild.
    const late = records(make, 700, 1200, "late");
    await one.store.addBatch("kb", late);
    await one.store.syncIndex("kb");
    const after = usearchFilesOf(dir);
    for (const name of files.filter((f) => /\.s\dof2\./.test(f))) expect(after).toContain(name);
    const pruned = one.db
      .prepare("SELECT pruned_through FROM vec_ann_state WHERE collection = 'kb'")
      .pluck()
      .get();
    const twoSeq = Math.min(...files.filter((f) => /\.s\dof2\./.test(f)).map((f) => Number(f.split(".")[1])));
    expect(pruned).toBeLessThanOrEqual(twoSeq);
    for (const record of late.slice(0, 5))
      expect((await two.store.search("kb", record.vector, { topK: 1 }))[0]?.id).toBe(record.id);
    expect(await two.store.ann?.indexedCount("kb")).toBe(1900);
  });

  it("an index rebuilt after pruning emptied the log is named with the last sequence, so it is not rebuilt again", async () => {
    const dir = newDir();
    const make = generator(15);
    const first = withShards(dir, 1);
    await first.store.createCollection("kb", DIM, "cosine");
    const stored = records(make, 0, 600);
    await first.store.addBatch("kb", stored);
    await first.store.syncIndex("kb");
    await first.store.close();
    const logged = first.db.prepare("SELECT count(*) FROM vec_ann_log").pluck().get();
    expect(logged).toBe(0);
    first.db.close();
    const [name] = usearchFilesOf(dir);
    writeFileSync(join(dir, "kl-ann", name as string), "not an index");
    const second = withShards(dir, 1);
    const probe = stored[42] as VectorRecord;
    expect((await second.store.search("kb", probe.vector, { topK: 1 }))[0]?.id).toBe(probe.id);
    const rebuilt = usearchFilesOf(dir);
    expect(rebuilt).toHaveLength(1);
    expect(Number((rebuilt[0] as string).split(".")[1])).toBe(600);
    // Searching again uses the rebuilt index (no second rebuild: the file stays the same).
    expect((await second.store.search("kb", probe.vector, { topK: 1 }))[0]?.id).toBe(probe.id);
    expect(usearchFilesOf(dir)).toEqual(rebuilt);
  });

  it("refuses an ann.shards option that is not a whole number from 1 to 64", () => {
    const db = openDatabase(newDir());
    opened.push({ db, store: new SqliteVectorStore(db, { ann: false }) });
    for (const bad of [0, -1, 2.5, 65, Number.NaN])
      expect(
        () => new SqliteVectorStore(db, { ann: { worker: true, shards: bad, dir: join(newDir(), "a") } }),
      ).toThrow(`ann.shards must be a whole number from 1 to 64, not ${bad}`);
  });

  it("refuses a $KL_ANN_MIN_RECORDS that is not a whole number, naming it", () => {
    const db = openDatabase(newDir());
    opened.push({ db, store: new SqliteVectorStore(db, { ann: false }) });
    for (const bad of ["abc", "-5", "1.5"]) {
      process.env.KL_ANN_MIN_RECORDS = bad;
      try {
        for (const worker of [true, false])
          expect(() => new SqliteVectorStore(db, { ann: { worker, dir: join(newDir(), "a") } })).toThrow(
            `$KL_ANN_MIN_RECORDS must be a whole number of vectors, not "${bad}"`,
          );
      } finally {
        delete process.env.KL_ANN_MIN_RECORDS;
      }
    }
  });

  it("refuses a $KL_ANN_SHARDS that is not a whole number from 1 to 64, naming it", () => {
    const db = openDatabase(newDir());
    opened.push({ db, store: new SqliteVectorStore(db, { ann: false }) });
    for (const bad of ["0", "two", "1.5", "65"]) {
      process.env.KL_ANN_SHARDS = bad;
      try {
        expect(() => new SqliteVectorStore(db, { ann: { worker: true, dir: join(newDir(), "a") } })).toThrow(
          `$KL_ANN_SHARDS must be a whole number from 1 to 64, not "${bad}"`,
        );
      } finally {
        delete process.env.KL_ANN_SHARDS;
      }
    }
  });

  it("splits each index in two shards on a machine with two or more cores, unless $KL_ANN_SHARDS says otherwise", () => {
    expect(defaultShards(1)).toBe(1);
    expect(defaultShards(2)).toBe(2);
    expect(defaultShards(8)).toBe(2);
    process.env.KL_ANN_SHARDS = "1";
    try {
      expect(defaultShards(8)).toBe(1);
    } finally {
      delete process.env.KL_ANN_SHARDS;
    }
  });
});
