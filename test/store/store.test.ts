import { createRequire } from "node:module";
import { describe, expect, it, test } from "vitest";
import { defaultKbConfig, type KnowledgeBaseConfig, validateKbConfig } from "../../src/config.js";
import { decodeDocumentText, encodeDocumentText } from "../../src/store/catalog.js";
import {
  blobToVector,
  openDatabase,
  releaseFreePages,
  SCHEMA_VERSION,
  vectorToBlob,
} from "../../src/store/database.js";
import { EmbeddingCacheTable } from "../../src/store/embedding-cache.js";
import { JobStore } from "../../src/store/jobs.js";
import { SqliteVectorStore } from "../../src/store/sqlite-vector-store.js";
import { vectorStoreConformance } from "../conformance/vector-store.js";
import { vectorStoreFilterConformance } from "../conformance/vector-store-filters.js";
import { tempDir } from "../helpers/helpers.js";

const require = createRequire(import.meta.url);

const sqliteFactory = (ann?: { minRecords: number }) => async () => {
  const { dir, cleanup } = tempDir();
  const db = openDatabase(dir);
  return {
    store: new SqliteVectorStore(db, ann ? { ann } : {}),
    cleanup: () => {
      db.close();
      cleanup();
    },
  };
};
vectorStoreConformance("sqlite (embedded default)", sqliteFactory());
vectorStoreFilterConformance("sqlite (exact)", sqliteFactory(), { exists: true, prefix: true, dates: true });
vectorStoreFilterConformance("sqlite (HNSW candidates)", sqliteFactory({ minRecords: 1 }), {
  exists: true,
  prefix: true,
  dates: true,
});

describe("embedded database", () => {
  it("stores long document texts deflated and reads every form back exactly", () => {
    const long = `${"Pumps move water uphill. 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 — ünïcödé 中文\n".repeat(200)}end`;
    const packed = encodeDocumentText(long);
    expect(Buffer.isBuffer(packed)).toBe(true);
    expect((packed as Buffer).length).toBeLessThan(Buffer.byteLength(long) / 4);
    expect(decodeDocumentText(packed)).toBe(long);
    // Short texts (and rows written before compression) stay plain TEXT.
    expect(encodeDocumentText("short")).toBe("short");
    expect(decodeDocumentText("legacy row text")).toBe("legacy row text");
    expect(decodeDocumentText(null)).toBe("");
  });

  it("round-trips vectors through BLOBs exactly", () => {
    const a = Float32Array.from([0.1, -2.5, 3e-8, 1]);
    expect(Array.from(blobToVector(vectorToBlob(a)))).toEqual(Array.from(a));
  });
  it("migrates a schema-1 database: chunks gain title_token_count, rows are kept", () => {
    const { dir, cleanup } = tempDir();
    const Database = require("better-sqlite3") as typeof import("better-sqlite3");
    const old = new Database(`${dir}/kl.db`);
    old.exec(`CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
      INSERT INTO meta VALUES ('schema_version', '1');
      CREATE TABLE chunks (id INTEGER PRIMARY KEY AUTOINCREMENT, kb TEXT NOT NULL, document_id INTEGER NOT NULL,
        chunk_index INTEGER NOT NULL, total_chunks INTEGER NOT NULL, chunk_type TEXT NOT NULL, start INTEGER NOT NULL,
        end INTEGER NOT NULL, text TEXT NOT NULL, context_prefix TEXT, metadata TEXT NOT NULL, token_count INTEGER NOT NULL);
      INSERT INTO chunks (kb, document_id, chunk_index, total_chunks, chunk_type, start, end, text, metadata, token_count)
        VALUES ('k', 1, 0, 1, 'text', 0, 5, 'hello', '{}', 1);`);
    old.close();
    const db = openDatabase(dir);
    expect(db.prepare("SELECT text, token_count, title_token_count FROM chunks").get()).toEqual({
      text: "hello",
      token_count: 1,
      title_token_count: 0,
    });
    expect(db.prepare("SELECT value FROM meta WHERE key = 'schema_version'").pluck().get()).toBe(
      String(SCHEMA_VERSION),
    );
    db.close();
    cleanup();
  });

  it("migrates a schema-6 database: the ingest job tables are added empty, rows are kept", () => {
    const { dir, cleanup } = tempDir();
    // A schema-6 file: today's schema without the job tables, marked 6.
    const db5 = openDatabase(dir);
    db5.exec(`INSERT INTO kbs (name, config, created_at) VALUES ('acme.docs', '{}', '2024-01-01T00:00:00Z');
      DROP TABLE ingest_job_events; DROP TABLE ingest_job_docs; DROP TABLE ingest_job_files; DROP TABLE ingest_jobs;
      UPDATE meta SET value = '6' WHERE key = 'schema_version';`);
    db5.close();
    const db = openDatabase(dir);
    try {
      expect(db.prepare("SELECT value FROM meta WHERE key = 'schema_version'").pluck().get()).toBe(
        String(SCHEMA_VERSION),
      );
      expect(db.prepare("SELECT name FROM kbs").pluck().all()).toEqual(["acme.docs"]);
      const tables = db
        .prepare(
          "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'ingest_job%' ORDER BY name",
        )
        .pluck()
        .all();
      expect(tables).toEqual(["ingest_job_docs", "ingest_job_events", "ingest_job_files", "ingest_jobs"]);
      // The tables work: a job, a step with its event, the documents record, and their cascade on prune.
      const jobs = new JobStore(db);
      expect(jobs.pending()).toEqual([]);
      jobs.create({
        id: "job_1",
        tenant: "acme",
        kb: "docs",
        internalKb: "acme.docs",
        options: { embed: false },
        dir: `${dir}/uploads/acme/job_1`,
        files: [{ name: "a.md", storedPath: `${dir}/uploads/acme/job_1/0`, bytes: 3 }],
      });
      const { job, event } = jobs.advance("job_1", {
        state: { status: "succeeded", done: 1, finishedAt: "2024-01-02T00:00:00Z" },
        file: { n: 0, state: "done", prior: [] },
        event: "done",
      });
      expect(job).toMatchObject({
        status: "succeeded",
        done: 1,
        seq: 1,
        files: [{ name: "a.md", state: "done", prior: [] }],
      });
      expect(event).toEqual({
        seq: 1,
        type: "done",
        state: { status: "succeeded", done: 1, finishedAt: "2024-01-02T00:00:00Z" },
      });
      jobs.recordDocuments("job_1", 0, [{ uri: "a.md", chunks: 2 }], []);
      expect(jobs.documents("job_1", 0)).toEqual([{ uri: "a.md", chunks: 2, warnings: [] }]);
      expect(jobs.prune("acme", 0)).toBe(1);
      for (const t of tables) expect(db.prepare(`SELECT count(*) FROM ${t}`).pluck().get()).toBe(0);
    } finally {
      db.close();
      cleanup();
    }
  });

  it("migrates a schema-7 embedding cache: vectors, live references and text entries kept, dangling references dropped", () => {
    const { dir, cleanup } = tempDir();
    const hash = (c: string) => c.repeat(64);
    const v = (x: number) => vectorToBlob(Float32Array.of(x, 1 - x));
    // A schema-7 file: today's schema with the old embedding_cache table, its index and triggers.
    const db7 = openDatabase(dir);
    db7.exec(`DROP VIEW embedding_cache; DROP TRIGGER embedding_entries_replace; DROP TRIGGER embedding_entries_update;
      DROP TRIGGER embedding_entries_delete; DROP TABLE embedding_entries; DROP TABLE embedding_models;
      CREATE TABLE embedding_cache (provider TEXT NOT NULL, model TEXT NOT NULL, text_hash TEXT NOT NULL,
        vector BLOB NOT NULL, ref_collection TEXT, ref_id TEXT, PRIMARY KEY (provider, model, text_hash)) WITHOUT ROWID;
      CREATE INDEX embedding_cache_ref ON embedding_cache (ref_collection, ref_id) WHERE ref_id IS NOT NULL;
      CREATE TRIGGER embedding_cache_ref_delete AFTER DELETE ON vec_records BEGIN
        DELETE FROM embedding_cache WHERE ref_collection = OLD.collection AND ref_id = OLD.id AND ref_id IS NOT NULL;
      END;
      UPDATE meta SET value = '7' WHERE key = 'schema_version';`);
    db7
      .prepare("INSERT INTO vec_records (collection, id, vector, payload) VALUES ('kb_a', '7', ?, '{}')")
      .run(v(0.25));
    const put = db7.prepare("INSERT INTO embedding_cache VALUES (?, ?, ?, ?, ?, ?)");
    put.run("openai", "m1", hash("a"), v(0.5), null, null);
    put.run("openai", "m1", hash("b"), Buffer.alloc(0), "kb_a", "7");
    put.run("openai", "m1", hash("c"), Buffer.alloc(0), "kb_a", "8"); // its record is gone
    put.run("cohere", "m2", hash("a"), v(0.75), null, null);
    put.run("text:ctx", "ctx", "some key", Buffer.from("a context", "utf8"), null, null);
    db7.close();

    const db = openDatabase(dir);
    try {
      expect(db.prepare("SELECT value FROM meta WHERE key = 'schema_version'").pluck().get()).toBe(
        String(SCHEMA_VERSION),
      );
      const cache = new EmbeddingCacheTable(db);
      expect([...(cache.get("openai", "m1", hash("a")) ?? [])]).toEqual([0.5, 0.5]);
      expect([...(cache.get("openai", "m1", hash("b")) ?? [])]).toEqual([0.25, 0.75]);
      expect(cache.get("openai", "m1", hash("c"))).toBeUndefined();
      expect([...(cache.get("cohere", "m2", hash("a")) ?? [])]).toEqual([0.75, 0.25]);
      expect(cache.get("cohere", "m1", hash("a"))).toBeUndefined();
      expect(cache.getText("ctx", "some key")).toBe("a context");
      // 16-byte keys, one row per live entry; the view shows them as before.
      expect(db.prepare("SELECT count(*) FROM embedding_entries").pluck().get()).toBe(4);
      expect(
        db
          .prepare(
            "SELECT text_hash, ref_collection, ref_id FROM embedding_cache WHERE model = 'm1' ORDER BY text_hash",
          )
          .all(),
      ).toEqual([
        { text_hash: "a".repeat(32), ref_collection: null, ref_id: null },
        { text_hash: "b".repeat(32), ref_collection: "kb_a", ref_id: "7" },
      ]);
      // The new triggers hold: replacing the record drops its reference.
      db.prepare(
        "INSERT OR REPLACE INTO vec_records (collection, id, vector, payload) VALUES ('kb_a', '7', ?, '{}')",
      ).run(v(0.9));
      expect(cache.get("openai", "m1", hash("b"))).toBeUndefined();
    } finally {
      db.close();
      cleanup();
    }
  });

  it("gives free pages back to the file system on close (new files use incremental auto-vacuum)", async () => {
    const { dir, cleanup } = tempDir();
    const { statSync } = await import("node:fs");
    const db = openDatabase(dir);
    try {
      expect(db.pragma("auto_vacuum", { simple: true })).toBe(2);
      db.exec("CREATE TABLE filler (x BLOB)");
      const add = db.prepare("INSERT INTO filler VALUES (randomblob(8000))");
      db.transaction(() => {
        for (let i = 0; i < 500; i++) add.run();
      })();
      db.pragma("wal_checkpoint(TRUNCATE)");
      const full = statSync(`${dir}/kl.db`).size;
      db.exec("DELETE FROM filler");
      expect(db.pragma("freelist_count", { simple: true })).toBeGreaterThan(200);
      releaseFreePages(db);
      expect(db.pragma("freelist_count", { simple: true })).toBe(0);
      db.pragma("wal_checkpoint(TRUNCATE)");
      expect(statSync(`${dir}/kl.db`).size).toBeLessThan(full / 4);
      // With no free pages left, a second call is a no-op.
      releaseFreePages(db);
    } finally {
      db.close();
      cleanup();
    }
  });

  it("rejects a file that is not a database with a clear error", async () => {
    const { dir, cleanup } = tempDir();
    const { writeFileSync } = await import("node:fs");
    writeFileSync(`${dir}/kl.db`, "this is not sqlite".repeat(100));
    expect(() => openDatabase(dir)).toThrow(/cannot open database .*kl\.db/);
    cleanup();
  });
});

describe("knowledge base configuration", () => {
  test("a misspelt or unknown setting is a ConfigError naming it; strategy options validate", () => {
    const base = defaultKbConfig("kb1");
    const withChunking = (chunking: Record<string, unknown>) =>
      ({ ...base, chunking: { ...base.chunking, ...chunking } }) as KnowledgeBaseConfig;
    expect(() => validateKbConfig(withChunking({ chunkSise: 100 }))).toThrow(
      /chunking\.chunkSise is not a known setting/,
    );
    expect(() => validateKbConfig(withChunking({ email: { wholeUndr: 5 } }))).toThrow(
      /chunking\.email\.wholeUndr is not a known setting/,
    );
    expect(() =>
      validateKbConfig({ ...base, retrieval: { ...base.retrieval, topk: 3 } } as KnowledgeBaseConfig),
    ).toThrow(/retrieval\.topk/);
    expect(() => validateKbConfig(withChunking({ unit: "words" }))).toThrow(
      /unit must be "chars" or "tokens"/,
    );
    expect(() => validateKbConfig(withChunking({ unit: "tokens", tokenizer: "bert" }))).toThrow(
      /unknown tokenizer "bert"/,
    );
    expect(() => validateKbConfig(withChunking({ email: { quotedReplies: "hide" } }))).toThrow(
      /quotedReplies/,
    );
    expect(() => validateKbConfig(withChunking({ embeddingSemantic: { threshold: 2 } }))).toThrow(
      /threshold/,
    );
    expect(
      validateKbConfig(withChunking({ unit: "tokens", slack: { maxGapSeconds: 60 } })).chunking.unit,
    ).toBe("tokens");
  });
});
