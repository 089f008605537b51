/**
 * The PostgreSQL + pgvector store against a real, throwaway PostgreSQL server
 * (test/helpers/postgres-server.ts). Without PostgreSQL or pgvector installed the tests are
 * skipped locally (see the reason in the suite name) but fail under CI.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Metric } from "../../src/store/contract.js";
import { collectionTableName, PgVectorStore } from "../../src/store/pgvector.js";
import { vectorStoreConformance } from "../conformance/vector-store.js";
import { vectorStoreFilterConformance } from "../conformance/vector-store-filters.js";
import {
  findPostgres,
  type PostgresServer,
  postgresMissingReason,
  startPostgresServer,
} from "../helpers/postgres-server.js";
import { freePort } from "../helpers/redis-server.js";
import { skipNotice } from "../helpers/skip.js";

const install = findPostgres();
const missing = install ? undefined : (postgresMissingReason() ?? "PostgreSQL not found");

if (missing && process.env.CI) {
  describe("pgvector store", () => {
    it("needs PostgreSQL and pgvector under CI", () => {
      throw new Error(`PostgreSQL + pgvector are required under CI: ${missing}`);
    });
  });
}

const suite = install ? describe : describe.skip;
const title = install
  ? `pgvector store (PostgreSQL ${install.major})`
  : `pgvector store (skipped: ${missing})`;
if (missing && !process.env.CI) skipNotice(import.meta.url, "pgvector store", missing);

/** A database where the planner avoids sequential scans, so searches go through the HNSW index. */
const FORCED_DB = "forced_index";

suite(title, () => {
  let server: PostgresServer;
  const admins = new Map<string, pg.Pool>();
  const urlOf = (db = "postgres") => server.url.replace(/\/postgres$/, `/${db}`);
  const admin = (db = "postgres"): pg.Pool => {
    let pool = admins.get(db);
    if (!pool) {
      pool = new pg.Pool({ connectionString: urlOf(db), max: 2 });
      admins.set(db, pool);
    }
    return pool;
  };
  let schemas = 0;
  const freshSchema = () => `t_${process.pid}_${++schemas}`;

  beforeAll(async () => {
    server = await startPostgresServer({ install });
    await admin().query(`CREATE DATABASE ${FORCED_DB}`);
    await admin().query(`ALTER DATABASE ${FORCED_DB} SET enable_seqscan = off`);
  });
  afterAll(async () => {
    for (const pool of admins.values()) await pool.end();
    await server?.stop();
  });

  const factory = (db?: string) => async () => {
    const schema = freshSchema();
    const store = new PgVectorStore({ url: urlOf(db), schema });
    return {
      store,
      cleanup: async () => {
        await admin(db).query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      },
    };
  };

  vectorStoreConformance("pgvector", factory());
  vectorStoreConformance("pgvector (HNSW index forced)", factory(FORCED_DB));
  vectorStoreFilterConformance("pgvector", factory(), { exists: true, prefix: true, dates: false });
  vectorStoreFilterConformance("pgvector (HNSW index forced)", factory(FORCED_DB), {
    exists: true,
    prefix: true,
    dates: false,
  });

  describe("pgvector specifics", () => {
    const v = (...xs: number[]) => Float32Array.from(xs);

    it("creates the extension, the registry and an HNSW index with the metric's operator class", async () => {
      const schema = freshSchema();
      const store = new PgVectorStore({ url: urlOf(), schema, hnsw: { m: 8, efConstruction: 32 } });
      await store.connect();
      await store.connect();
      const metrics: [string, Metric, string][] = [
        ["kb_cos", "cosine", "vector_cosine_ops"],
        ["kb_l2", "euclidean", "vector_l2_ops"],
        ["kb_ip", "dot", "vector_ip_ops"],
      ];
      for (const [name, metric] of metrics) await store.createCollection(name, 3, metric);
      const ext = await admin().query("SELECT extversion FROM pg_extension WHERE extname = 'vector'");
      expect(ext.rowCount).toBe(1);
      const migrations = await admin().query(`SELECT version FROM "${schema}".schema_migrations`);
      expect(migrations.rows.map((r) => r.version)).toEqual([1]);
      for (const [name, , opclass] of metrics) {
        const { rows } = await admin().query<{ indexdef: string }>(
          "SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND tablename = $2",
          [schema, collectionTableName(name)],
        );
        const hnsw = rows.map((r) => r.indexdef).filter((def) => /USING hnsw/.test(def));
        expect(hnsw).toHaveLength(1);
        expect(hnsw[0]).toContain(opclass);
        expect(hnsw[0]).toMatch(/m='?8'?/);
        expect(hnsw[0]).toMatch(/ef_construction='?32'?/);
        expect(rows.some((r) => /USING gin \(payload jsonb_path_ops\)/.test(r.indexdef))).toBe(true);
      }
      await store.dropCollection("kb_l2");
      const left = await admin().query("SELECT tablename FROM pg_tables WHERE schemaname = $1", [schema]);
      expect(left.rows.map((r) => r.tablename).sort()).toEqual(
        [
          "collections",
          "schema_migrations",
          collectionTableName("kb_cos"),
          collectionTableName("kb_ip"),
        ].sort(),
      );
      await store.close();
      await store.close();
      // A second store on the same schema sees the collections (no re-migration).
      const again = new PgVectorStore({ url: urlOf(), schema });
      expect(await again.info("kb_ip")).toMatchObject({ dimension: 3, metric: "dot", count: 0 });
      await again.close();
    });

    it("searches through the HNSW index and still returns every match for large topK and selective filters", async () => {
      const schema = freshSchema();
      const store = new PgVectorStore({ url: urlOf(FORCED_DB), schema, hnsw: { efSearch: 10 } });
      await store.connect();
      await store.createCollection("kb_big", 8, "cosine");
      let seed = 42;
      const rand = () => {
        seed = (seed * 1103515245 + 12345) % 2 ** 31;
        return seed / 2 ** 31 - 0.5;
      };
      const records = Array.from({ length: 1200 }, (_, i) => ({
        id: `r${String(i).padStart(4, "0")}`,
        vector: Float32Array.from({ length: 8 }, rand),
        payload: { group: i % 4, even: i % 2 === 0 },
      }));
      await store.addBatch("kb_big", records);
      const query = Float32Array.from({ length: 8 }, rand);
      const table = `"${schema}"."${collectionTableName("kb_big")}"`;
      const plan = await admin(FORCED_DB).query(
        `EXPLAIN SELECT id FROM ${table} ORDER BY embedding <=> '[${query.join(",")}]' LIMIT 5`,
      );
      expect(plan.rows.map((r) => r["QUERY PLAN"]).join("\n")).toMatch(/Index Scan using .*_hnsw/);

      // topK far above the configured ef_search: all rows come back, best first.
      const all = await store.search("kb_big", query, { topK: 5000 });
      expect(all).toHaveLength(1200);
      for (let i = 1; i < all.length; i++)
        expect(all[i - 1]?.score).toBeGreaterThanOrEqual(all[i]?.score ?? 0);

      // A filter keeping a quarter of the rows: topK 250 of 300 matches, ranked like brute force.
      const cos = (a: Float32Array, b: Float32Array) => {
        let dot = 0;
        let na = 0;
        let nb = 0;
        for (let i = 0; i < a.length; i++) {
          dot += (a[i] ?? 0) * (b[i] ?? 0);
          na += (a[i] ?? 0) ** 2;
          nb += (b[i] ?? 0) ** 2;
        }
        return dot / Math.sqrt(na * nb);
      };
      const exact = records
        .filter((r) => r.payload.group === 1)
        .map((r) => ({ id: r.id, score: cos(query, r.vector) }))
        .sort((a, b) => b.score - a.score)
        .slice(0, 250);
      const filtered = await store.search("kb_big", query, { topK: 250, filter: { group: 1 } });
      expect(filtered).toHaveLength(250);
      expect(filtered.every((h) => h.payload.group === 1)).toBe(true);
      const exactIds = new Set(exact.map((h) => h.id));
      const recall = filtered.filter((h) => exactIds.has(h.id)).length / 250;
      expect(recall).toBeGreaterThanOrEqual(0.95);
      expect(filtered[0]?.score).toBeCloseTo(exact[0]?.score ?? Number.NaN, 5);
      const both = await store.search("kb_big", query, { topK: 1000, filter: { group: 2, even: true } });
      expect(both).toHaveLength(300);
      expect(await store.search("kb_big", query, { topK: 10, filter: { group: 2, even: false } })).toEqual(
        [],
      );
      await store.close();
    });

    it("orders ties by id and applies the score threshold after ranking", async () => {
      const store = new PgVectorStore({ url: urlOf(), schema: freshSchema() });
      await store.createCollection("kb_ties", 2, "euclidean");
      await store.addBatch("kb_ties", [
        { id: "b", vector: v(1, 0), payload: {} },
        { id: "c", vector: v(1, 0), payload: {} },
        { id: "a", vector: v(1, 0), payload: {} },
        { id: "z", vector: v(0, 0), payload: {} },
      ]);
      const hits = await store.search("kb_ties", v(1, 0), { topK: 4 });
      expect(hits.map((h) => h.id)).toEqual(["a", "b", "c", "z"]);
      expect(hits[0]?.score).toBe(-0);
      expect(await store.search("kb_ties", v(1, 0), { topK: 0 })).toEqual([]);
      expect(
        (await store.search("kb_ties", v(1, 0), { topK: 4, scoreThreshold: -0.5 })).map((h) => h.id),
      ).toEqual(["a", "b", "c"]);
      await store.close();
    });

    it("isolates stores on different schemas of one database", async () => {
      const one = new PgVectorStore({ url: urlOf(), schema: freshSchema() });
      const two = new PgVectorStore({ url: urlOf(), schema: freshSchema() });
      await Promise.all([one.connect(), two.connect()]);
      await one.createCollection("kb", 2, "cosine");
      await two.createCollection("kb", 3, "dot");
      await one.addBatch("kb", [{ id: "same", vector: v(1, 0), payload: { from: "one" } }]);
      await two.addBatch("kb", [
        { id: "same", vector: v(0, 0, 1), payload: { from: "two" } },
        { id: "other", vector: v(0, 1, 0), payload: { from: "two" } },
      ]);
      expect(await one.info("kb")).toMatchObject({ dimension: 2, metric: "cosine", count: 1 });
      expect(await two.info("kb")).toMatchObject({ dimension: 3, metric: "dot", count: 2 });
      expect((await one.get("kb", ["same"]))[0]?.payload).toEqual({ from: "one" });
      expect((await two.get("kb", ["same"]))[0]?.payload).toEqual({ from: "two" });
      await one.dropCollection("kb");
      expect(await one.info("kb")).toBeUndefined();
      expect((await two.info("kb"))?.count).toBe(2);
      await Promise.all([one.close(), two.close()]);
    });

    it("fails to connect to a dead port with an error naming host and port (not the password)", async () => {
      const port = await freePort();
      const store = new PgVectorStore({
        url: `postgres://kl:s3cret@127.0.0.1:${port}/kb`,
        connectTimeoutMs: 2000,
      });
      expect(await store.health()).toBe(false);
      const error = await store.connect().then(
        () => undefined,
        (e: unknown) => e as Error,
      );
      expect(error?.name).toBe("KnowledgeLayerError");
      expect(error?.message).toMatch(
        new RegExp(`cannot connect to PostgreSQL at 127\\.0\\.0\\.1:${port}/kb`),
      );
      expect(error?.message).toMatch(/ECONNREFUSED/);
      expect(error?.message).not.toContain("s3cret");
      expect(await store.health()).toBe(false);
      await expect(store.info("kb")).rejects.toThrow(`127.0.0.1:${port}`);
      await store.close();
    });

    it("turns a server that dies mid-write into an error, without crashing the process", async () => {
      const own = await startPostgresServer({ install });
      const store = new PgVectorStore({ url: own.url, connectTimeoutMs: 2000 });
      await store.connect();
      await store.createCollection("doomed", 64, "cosine");
      const records = Array.from({ length: 4000 }, (_, i) => ({
        id: `r${i}`,
        vector: Float32Array.from({ length: 64 }, (_, j) => Math.sin(i * 7 + j) + 1.5),
        payload: {},
      }));
      const write = store.addBatch("doomed", records).then(
        () => undefined,
        (e: unknown) => e as Error,
      );
      await new Promise((r) => setTimeout(r, 150));
      await own.stop();
      const error = await write;
      expect(error?.name).toBe("KnowledgeLayerError");
      expect(error?.message).toMatch(/collection "doomed"/);
      await expect(store.info("doomed")).rejects.toThrow(/PostgreSQL/);
      expect(await store.health()).toBe(false);
      await store.close();
    });

    it("accepts collection names with odd characters, each in its own table", async () => {
      const store = new PgVectorStore({ url: urlOf(), schema: `odd "schema" ${freshSchema()}` });
      const names = [
        "kb_my-docs.v2",
        "kb_my_docs_v2",
        `kb "quoted" 'single'; DROP TABLE x; --`,
        "KB Ünïcode 文档",
        "-",
        "x".repeat(300),
      ];
      for (const [i, name] of names.entries()) {
        await store.createCollection(name, 2, "cosine");
        await store.addBatch(name, [{ id: `id ${i} "q"`, vector: v(1, i + 1), payload: { name, i } }]);
      }
      for (const [i, name] of names.entries()) {
        expect(await store.info(name)).toMatchObject({ name, dimension: 2, count: 1 });
        const hits = await store.search(name, v(1, 0), { topK: 5, filter: { name } });
        expect(hits.map((h) => h.id)).toEqual([`id ${i} "q"`]);
        expect(hits[0]?.payload).toEqual({ name, i });
      }
      expect(new Set(names.map(collectionTableName)).size).toBe(names.length);
      for (const name of names) expect(collectionTableName(name)).toMatch(/^c_[a-z0-9_]{1,53}$/);
      for (const name of names) await store.dropCollection(name);
      for (const name of names) expect(await store.info(name)).toBeUndefined();
      await store.close();
    });

    it("replaces duplicate ids within one batch, writes >100 records per call, and names missing ids on update", async () => {
      const store = new PgVectorStore({ url: urlOf(), schema: freshSchema() });
      await store.createCollection("kb", 2, "dot");
      const many = Array.from({ length: 345 }, (_, i) => ({ id: `r${i}`, vector: v(i, 1), payload: { i } }));
      await store.addBatch("kb", [...many, { id: "r0", vector: v(7, 7), payload: { i: -1 } }]);
      expect((await store.info("kb"))?.count).toBe(345);
      expect(await store.get("kb", ["r0", "r0", "nope"])).toEqual([
        { id: "r0", vector: v(7, 7), payload: { i: -1 } },
        { id: "r0", vector: v(7, 7), payload: { i: -1 } },
      ]);
      await expect(
        store.update("kb", [
          { id: "r1", vector: v(0, 0), payload: {} },
          { id: "ghost", vector: v(0, 0), payload: {} },
        ]),
      ).rejects.toThrow(/collection "kb" has no record "ghost"/);
      expect((await store.get("kb", ["r1"]))[0]?.payload).toEqual({ i: 1 });
      await expect(
        store.addBatch("kb", [{ id: "nan", vector: v(Number.NaN, 1), payload: {} }]),
      ).rejects.toThrow(/record "nan".*non-finite.*collection "kb"/);
      await expect(store.search("kb", v(1, 0, 0), { topK: 1 })).rejects.toThrow(
        /dimension 3.*"kb" expects 2/,
      );
      await store.close();
    });
  });
});
