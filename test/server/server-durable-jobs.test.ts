import { existsSync, readdirSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { join, resolve } from "node:path";
import type { FastifyInstance } from "fastify";
import { afterAll, describe, expect, it } from "vitest";
import { extractBytes } from "../../src/extract/index.js";
import { KnowledgeLayer } from "../../src/knowledge-layer.js";
import { buildServer, type ServerOptions } from "../../src/server/app.js";
import { tenantScope } from "../../src/server/tenancy.js";
import { createApiKey } from "../../src/store/api-keys.js";
import { tempDir } from "../helpers/helpers.js";
import {
  type Answer,
  client,
  followJob,
  gateIngest,
  spawnServe,
  waitForJob,
} from "../helpers/server-helpers.js";

const ROOT = resolve(import.meta.dirname, "..", "..");

/** Opens a data directory as `kl serve` does (without worker threads) and serves it on a free port. */
async function serveDir(
  dataDir: string,
  options: ServerOptions = {},
): Promise<{ kl: KnowledgeLayer; app: FastifyInstance; base: string }> {
  const kl = KnowledgeLayer.open({ dataDir, cache: { type: "none" }, cacheScope: tenantScope });
  const app = await buildServer(kl, options);
  await app.listen({ host: "127.0.0.1", port: 0 });
  return { kl, app, base: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}` };
}

/**
 * Abandons a server as a crash would: its connections and listener go, its jobs are never
 * resumed or finished by it (one is held at a gate that never opens), nothing is closed in order.
 */
async function crash(server: { kl: KnowledgeLayer; app: FastifyInstance }): Promise<void> {
  server.app.server.closeAllConnections();
  await new Promise((done) => server.app.server.close(done));
}

/**
 * A markdown file whose text holds a word found in no other file (`unique`). Each file is large
 * enough (300 paragraphs, ~25 KB) that a job of five takes a while on a fast machine too, so a
 * kill -9 can land while one job is part-way and a later one waits.
 */
function file(i: number): { name: string; content: string; unique: string } {
  const unique = `zqx${String(i).padStart(3, "0")}marker`;
  const body = Array.from(
    { length: 300 },
    (_, p) => `Paragraph ${p} of file ${i} mentions ${unique} and ledger${(i * 31 + p) % 97} entries.`,
  ).join("\n\n");
  return { name: `file-${String(i).padStart(2, "0")}.md`, content: `# File ${i}\n\n${body}\n`, unique };
}

/** What a KB holds: its documents (uri, chunk count), chunk rows, and the triggers' counters. */
function holdings(kl: KnowledgeLayer, kb: string) {
  const docs = kl.db.prepare("SELECT uri, chunk_count FROM documents WHERE kb = ? ORDER BY uri").all(kb) as {
    uri: string;
    chunk_count: number;
  }[];
  const chunks = kl.db.prepare("SELECT count(*) FROM chunks WHERE kb = ?").pluck().get(kb) as number;
  const stats = kl.db.prepare("SELECT documents, chunks FROM kb_stats WHERE kb = ?").get(kb) as
    | { documents: number; chunks: number }
    | undefined;
  return { docs, chunks, stats };
}

describe("kl serve: kill -9 with ingest jobs queued and running", () => {
  const tmp = tempDir("kl-serve-kill-");
  const dataDir = join(tmp.dir, "data");
  afterAll(() => tmp.cleanup());

  it("resumes after a restart on the data directory: every acknowledged file is ingested exactly once", async () => {
    const setup = KnowledgeLayer.open({ dataDir });
    const key = createApiKey(setup.db, "acme").key;
    await setup.close();
    const files = Array.from({ length: 20 }, (_, i) => file(i + 1));
    const first = spawnServe(ROOT, dataDir, tmp.dir);
    let second: ReturnType<typeof spawnServe> | undefined;
    try {
      const base = await first.serve.base;
      const api = client(base, key);
      expect((await api.post("/kbs", { name: "docs", retrieval: { mode: "keyword" } })).status).toBe(201);
      // Four uploads of five files, sent together (an upload waits while the server's loop ingests,
      // so uploads sent one after another can finish after every job has): one KB, so the jobs run
      // one after another.
      const jobs: Answer[] = await Promise.all(
        [0, 1, 2, 3].map((u) => api.upload("docs", files.slice(u * 5, u * 5 + 5), "?embed=false")),
      );
      for (const up of jobs) expect(up.status).toBe(202);
      const ids = jobs.map((j) => j.body.id as string);
      // kill -9 once a job is part-way and a later one still waits.
      let seen: { status: string; done: number }[] = [];
      for (let i = 0; i < 1000; i++) {
        seen = (await api.get("/jobs")).body.jobs;
        const runningPartWay = seen.some((j) => j.status === "running" && j.done >= 1);
        if (runningPartWay && seen.some((j) => j.status === "queued")) break;
        await new Promise((done) => setTimeout(done, 5));
      }
      first.child.kill("SIGKILL");
      await first.exited;
      expect(seen.filter((j) => j.status === "running")).toHaveLength(1);
      expect(seen.filter((j) => j.status === "queued").length).toBeGreaterThanOrEqual(1);
      const doneBefore = seen.reduce((n, j) => n + j.done, 0);
      expect(doneBefore).toBeLessThan(20);

      second = spawnServe(ROOT, dataDir, tmp.dir);
      const base2 = await second.serve.base;
      const api2 = client(base2, key);
      // Every job answers after the restart, and each finishes.
      for (const id of ids) expect((await api2.get(`/jobs/${id}`)).status).toBe(200);
      const finished = [];
      for (const id of ids) finished.push(await waitForJob(base2, key, id));
      for (const [u, job] of finished.entries()) {
        expect(job).toMatchObject({
          status: "succeeded",
          done: 5,
          total: 5,
          summary: { files: 5, added: 5, updated: 0, unchanged: 0, documents: 5, errors: [], removed: [] },
        });
        expect(job.files.map((f: { name: string }) => f.name)).toEqual(
          files.slice(u * 5, u * 5 + 5).map((f) => f.name),
        );
      }
      const reportedChunks = finished.reduce((n, j) => n + j.summary.chunks, 0);
      // Each file is found by its own word, once.
      for (const f of files.slice(0, 20).filter((_, i) => i % 4 === 0)) {
        const hits = (await api2.post("/search", { query: f.unique, kbs: ["docs"], topK: 50 })).body.results;
        expect(new Set(hits.map((h: { source: { uri: string } }) => h.source.uri))).toEqual(
          new Set([f.name]),
        );
      }
      second.child.kill("SIGTERM");
      expect(await second.exited).toBe(0);

      const after = KnowledgeLayer.open({ dataDir });
      try {
        const { docs, chunks, stats } = holdings(after, "acme.docs");
        expect(docs.map((d) => d.uri)).toEqual(files.map((f) => f.name));
        expect(chunks).toBe(docs.reduce((n, d) => n + d.chunk_count, 0));
        expect(chunks).toBe(reportedChunks);
        expect(stats).toEqual({ documents: 20, chunks });
        expect(await after.pendingJobs()).toEqual([]);
      } finally {
        await after.close();
      }
      const uploads = join(dataDir, "uploads", "acme");
      expect(existsSync(uploads) ? readdirSync(uploads) : []).toEqual([]);
    } finally {
      if (first.child.exitCode === null) first.child.kill("SIGKILL");
      if (second && second.child.exitCode === null) second.child.kill("SIGKILL");
    }
  });
});

describe("HTTP API: a crash at each point of a file's ingest", () => {
  const tmp = tempDir("kl-jobs-crash-");
  afterAll(() => tmp.cleanup());

  for (const when of ["before", "after"] as const) {
    it(`a crash ${when} a file's documents are committed: the restarted server ingests it once and counts it once`, async () => {
      const dataDir = join(tmp.dir, `data-${when}`);
      const first = await serveDir(dataDir);
      const key = createApiKey(first.kl.db, "acme").key;
      const api = client(first.base, key);
      expect((await api.post("/kbs", { name: "docs", retrieval: { mode: "keyword" } })).status).toBe(201);
      // An earlier upload of file 2 that the new one replaces.
      const old = await api.upload(
        "docs",
        [{ name: "file-02.md", content: "# Old\n\nan older version" }],
        "?embed=false",
      );
      expect((await waitForJob(first.base, key, old.body.id)).status).toBe("succeeded");
      const files = [1, 2, 3, 4].map(file);
      const gate = gateIngest(first.kl, 2, when);
      const up = await api.upload("docs", files, "?embed=false");
      expect(up.status).toBe(202);
      await gate.reached;
      const stored = await first.kl.getJob(up.body.id);
      expect(stored).toMatchObject({ status: "running", done: 1 });
      expect(stored?.files.map((f) => f.state)).toEqual(["done", "started", "pending", "pending"]);
      // The held file's new version is in the KB only when the crash comes after its commit.
      const version = (kl: KnowledgeLayer) =>
        kl.db
          .prepare(
            "SELECT id, title, chunk_count FROM documents WHERE kb = 'acme.docs' AND uri = 'file-02.md'",
          )
          .get() as { id: number; title: string; chunk_count: number };
      const atCrash = version(first.kl);
      expect(atCrash.title).toBe(when === "after" ? "File 2" : "Old");
      await crash(first);

      const second = await serveDir(dataDir);
      try {
        const job = await waitForJob(second.base, key, up.body.id);
        // Committed before the crash: the redo found it unchanged and left the document as it was.
        if (when === "after") expect(version(second.kl)).toEqual(atCrash);
        else expect(version(second.kl).title).toBe("File 2");
        const { docs, chunks, stats } = holdings(second.kl, "acme.docs");
        expect(docs.map((d) => d.uri)).toEqual(files.map((f) => f.name));
        expect(stats).toEqual({ documents: 4, chunks });
        expect(job).toMatchObject({
          status: "succeeded",
          done: 4,
          summary: {
            files: 4,
            added: 3,
            updated: 1,
            unchanged: 0,
            documents: 4,
            chunks,
            errors: [],
            removed: [],
          },
        });
        // The job's events tell the whole story once, in order: one run, back to the queue, the second run.
        const events = await followJob(second.base, key, up.body.id, undefined, { lastEventId: "0" });
        expect(events.map((e) => Number(e.id))).toEqual(events.map((_, i) => i + 1));
        const statuses = events.map((e) => e.data.status);
        expect(statuses.indexOf("queued")).toBeGreaterThan(0);
        expect(statuses.at(-1)).toBe("succeeded");
        expect(events.filter((e) => e.event === "done")).toHaveLength(1);
      } finally {
        await second.app.close();
        await second.kl.close();
        await first.kl.close();
      }
    });
  }

  it("a crash inside a file of several documents (one committed, one not): the redo counts both once", async () => {
    const dataDir = join(tmp.dir, "data-partial");
    const mbox = [
      "From alice@example.com Mon Jan  1 00:00:00 2024",
      "From: Alice <alice@example.com>",
      "Subject: First message",
      "Date: Mon, 1 Jan 2024 00:00:00 +0000",
      "",
      "The first message talks about invoices.",
      "",
      "From bob@example.com Tue Jan  2 00:00:00 2024",
      "From: Bob <bob@example.com>",
      "Subject: Second message",
      "Date: Tue, 2 Jan 2024 00:00:00 +0000",
      "",
      "The second message talks about receipts.",
      "",
    ].join("\n");
    // The state a crash leaves between the commits of a file's two documents, made through the facade:
    // the job is running, its file started, the first message committed and recorded for it.
    const kl = KnowledgeLayer.open({ dataDir, cache: { type: "none" }, cacheScope: tenantScope });
    const key = createApiKey(kl.db, "acme").key;
    await kl.createKb("acme.mail", { retrieval: { mode: "keyword" } });
    const dir = join(dataDir, "uploads", "acme", "job_partial");
    const { mkdirSync, writeFileSync } = await import("node:fs");
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "0"), mbox);
    await kl.createJob({
      id: "job_partial",
      tenant: "acme",
      kb: "mail",
      internalKb: "acme.mail",
      options: { embed: false, tags: ["inbox"] },
      dir,
      files: [{ name: "box.mbox", storedPath: join(dir, "0"), bytes: mbox.length }],
    });
    await kl.advanceJob("job_partial", {
      state: { status: "running", done: 0, current: "box.mbox", startedAt: new Date().toISOString() },
      file: { n: 0, state: "started", prior: [] },
      event: "progress",
    });
    const docs = await extractBytes("box.mbox", Buffer.from(mbox));
    expect(docs.map((d) => d.uri)).toEqual(["box.mbox#message/1", "box.mbox#message/2"]);
    await kl.ingestDocuments(docs.slice(0, 1), {
      kb: "acme.mail",
      embed: false,
      tags: ["inbox"],
      job: { id: "job_partial", file: 0 },
    });
    expect((await kl.jobFileDocuments("job_partial", 0)).map((d) => d.uri)).toEqual(["box.mbox#message/1"]);
    await kl.close();
    // An upload cut off before its 202 left a folder no job owns.
    const orphan = join(dataDir, "uploads", "acme", "job_orphan");
    mkdirSync(orphan, { recursive: true });
    writeFileSync(join(orphan, "0"), "half an upload");

    const server = await serveDir(dataDir);
    try {
      expect(existsSync(orphan)).toBe(false);
      const job = await waitForJob(server.base, key, "job_partial");
      const { docs: held, chunks, stats } = holdings(server.kl, "acme.mail");
      expect(held.map((d) => d.uri)).toEqual(["box.mbox#message/1", "box.mbox#message/2"]);
      expect(stats).toEqual({ documents: 2, chunks });
      expect(job).toMatchObject({
        status: "succeeded",
        summary: { files: 1, added: 1, unchanged: 0, documents: 2, chunks, errors: [] },
      });
      expect(existsSync(dir)).toBe(false);
    } finally {
      await server.app.close();
      await server.kl.close();
    }
  });
});

describe("HTTP API: job events after a reconnect, and finished jobs kept", () => {
  const tmp = tempDir("kl-jobs-events-");
  afterAll(() => tmp.cleanup());

  it("a client reconnecting with Last-Event-ID gets every event after it, exactly as sent live", async () => {
    const server = await serveDir(join(tmp.dir, "data-events"));
    try {
      const key = createApiKey(server.kl.db, "acme").key;
      const api = client(server.base, key);
      expect((await api.post("/kbs", { name: "docs", retrieval: { mode: "keyword" } })).status).toBe(201);
      const gate = gateIngest(server.kl, 2);
      const up = await api.upload("docs", [1, 2, 3].map(file), "?embed=false");
      await gate.reached;
      // One client follows the whole job; another leaves after two events and comes back.
      let opened = 0;
      const onOpen = (): void => {
        opened++;
      };
      const whole = followJob(server.base, key, up.body.id, onOpen);
      const leaving = followJob(server.base, key, up.body.id, onOpen, { stopAfter: 2 });
      for (let i = 0; opened < 2 && i < 200; i++) await new Promise((done) => setTimeout(done, 10));
      gate.release();
      const part = await leaving;
      expect(part.map((e) => e.event)).toEqual(["status", "progress"]);
      const all = await whole;
      const rest = await followJob(server.base, key, up.body.id, undefined, {
        lastEventId: (part.at(-1) as { id: string }).id,
      });
      // The status event carries the id of the job's last event, so the rejoined stream continues it.
      const ids = [...part, ...rest].map((e) => Number(e.id));
      expect(ids).toEqual(ids.map((_, i) => (ids[0] as number) + i));
      const live = new Map(all.filter((e) => e.event !== "status").map((e) => [e.id, e]));
      for (const e of rest) expect(e).toEqual(live.get(e.id));
      expect(rest.at(-1)?.event).toBe("done");
      expect(rest.at(-1)?.data).toMatchObject({ status: "succeeded", done: 3 });
      // Replaying from the start gives the same events as the live stream sent.
      const replay = await followJob(server.base, key, up.body.id, undefined, { lastEventId: "0" });
      const fromStatus = Number(all[0]?.id);
      expect(replay.filter((e) => Number(e.id) > fromStatus)).toEqual(all.slice(1));
      // A malformed id is a 400; another tenant's job a 404.
      const bad = await fetch(`${server.base}/jobs/${up.body.id}/events`, {
        headers: { authorization: `Bearer ${key}`, "last-event-id": "abc" },
      });
      expect(bad.status).toBe(400);
      const other = await fetch(`${server.base}/jobs/${up.body.id}/events`, {
        headers: {
          authorization: `Bearer ${createApiKey(server.kl.db, "globex").key}`,
          "last-event-id": "1",
        },
      });
      expect(other.status).toBe(404);
    } finally {
      await server.app.close();
      await server.kl.close();
    }
  });

  it("keeps the newest finished jobs per tenant, deleting older ones with their events", async () => {
    const dataDir = join(tmp.dir, "data-prune");
    const server = await serveDir(dataDir, { maxFinishedJobs: 2 });
    try {
      const key = createApiKey(server.kl.db, "acme").key;
      const api = client(server.base, key);
      expect((await api.post("/kbs", { name: "docs", retrieval: { mode: "keyword" } })).status).toBe(201);
      const ids: string[] = [];
      for (let i = 1; i <= 4; i++) {
        const up = await api.upload("docs", [file(i)], "?embed=false");
        ids.push(up.body.id);
        await waitForJob(server.base, key, up.body.id);
      }
      expect((await api.get("/jobs")).body.jobs.map((j: { id: string }) => j.id)).toEqual([ids[3], ids[2]]);
      expect((await api.get(`/jobs/${ids[0]}`)).status).toBe(404);
      const rows = (table: string) =>
        server.kl.db.prepare(`SELECT count(DISTINCT job_id) FROM ${table}`).pluck().get() as number;
      expect([rows("ingest_job_files"), rows("ingest_job_events"), rows("ingest_job_docs")]).toEqual([
        2, 2, 2,
      ]);
    } finally {
      await server.app.close();
      await server.kl.close();
    }
  });
});
