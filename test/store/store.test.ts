import { createRequire } from "node:module";
import { describe, expect, it, test } from "vitest";
import { defaultKbConfig, type KnowledgeBaseConfig, validateKbConfig } from "../../src/config.js";
import { decodeDocumentText, encodeDocumentText } from "../../src/store/catalog.js";
import { blobToVector, openDatabase, SCHEMA_VERSION, vectorToBlob } from "../../src/store/database.js";
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
      expect(SCHEMA_VERSION).toBe(7);
      expect(db.prepare("SELECT value FROM meta WHERE key = 'schema_version'").pluck().get()).toBe("7");
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
