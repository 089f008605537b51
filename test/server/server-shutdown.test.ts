import { existsSync, readdirSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { join, resolve } from "node:path";
import type { FastifyInstance } from "fastify";
import { afterAll, describe, expect, it } from "vitest";
import { KnowledgeLayer } from "../../src/knowledge-layer.js";
import { buildServer } from "../../src/server/app.js";
import { tenantScope } from "../../src/server/tenancy.js";
import { createApiKey } from "../../src/store/api-keys.js";
import { tempDir } from "../helpers/helpers.js";
import {
  client,
  followJob,
  gateIngest,
  type SseEvent,
  spawnServe,
  waitForJob,
} from "../helpers/server-helpers.js";

const ROOT = resolve(import.meta.dirname, "..", "..");

/** Opens a data directory as the tests' servers do and serves it on a free port. */
async function serveDir(
  dataDir: string,
): Promise<{ kl: KnowledgeLayer; app: FastifyInstance; base: string }> {
  const kl = KnowledgeLayer.open({ dataDir, cache: { type: "none" }, cacheScope: tenantScope });
  const app = await buildServer(kl);
  await app.listen({ host: "127.0.0.1", port: 0 });
  return { kl, app, base: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}` };
}

/** Documents of a catalog KB (uri and chunk count), and whether the chunk rows agree with the counts. */
function documentsOf(
  kl: KnowledgeLayer,
  kb: string,
): { docs: { uri: string; chunk_count: number }[]; chunks: number } {
  const docs = kl.db.prepare("SELECT uri, chunk_count FROM documents WHERE kb = ? ORDER BY uri").all(kb) as {
    uri: string;
    chunk_count: number;
  }[];
  const chunks = kl.db.prepare("SELECT count(*) FROM chunks WHERE kb = ?").pluck().get(kb) as number;
  return { docs, chunks };
}

describe("HTTP API: shutting down with jobs queued and running, then starting again", () => {
  const tmp = tempDir("kl-server-restart-");
  const dataDir = join(tmp.dir, "data");
  afterAll(() => tmp.cleanup());

  it("stops the running job after its current file and keeps both jobs queued; the next server resumes them and Last-Event-ID replays what the closed stream missed", async () => {
    const first = await serveDir(dataDir);
    const key = createApiKey(first.kl.db, "acme").key;
    const api = client(first.base, key);
    expect((await api.post("/kbs", { name: "docs", retrieval: { mode: "keyword" } })).status).toBe(201);
    // The running job is held inside its second file while the server closes.
    const gate = gateIngest(first.kl, 2);
    const names = ["a.md", "b.md", "c.md", "d.md", "e.md"];
    const running = await api.upload(
      "docs",
      names.map((n) => ({ name: n, content: `# Notes ${n}\n\nshutdown notes about ${n}, file ${n}` })),
      "?embed=false",
    );
    expect(running.status).toBe(202);
    const queued = await api.upload(
      "docs",
      [{ name: "later.md", content: "# Later\n\nqueued behind the first job" }],
      "?embed=false",
    );
    expect(queued.status).toBe(202);
    expect(queued.body.status).toBe("queued");
    await gate.reached;

    let opened = 0;
    const onOpen = (): void => {
      opened++;
    };
    const runningEvents = followJob(first.base, key, running.body.id, onOpen);
    const queuedEvents = followJob(first.base, key, queued.body.id, onOpen);
    for (let i = 0; opened < 2 && i < 200; i++) await new Promise((done) => setTimeout(done, 10));
    expect(opened).toBe(2);

    const closing = first.app.close();
    // Requests while the server closes get a 503 in the API's error format.
    const during = await api.get(`/jobs/${running.body.id}`);
    expect(during.status).toBe(503);
    expect(during.body).toEqual({ error: "the server is shutting down; try again once it is back" });

    // The running job finishes the file it is on, then goes back to the queue.
    gate.release();
    const r = await runningEvents;
    const q = await queuedEvents;
    await closing;
    // The queued job's stream ends without an event: it stays queued.
    expect(q.map((e) => e.event)).toEqual(["status"]);
    expect(q[0]?.data).toMatchObject({ id: queued.body.id, status: "queued", done: 0, total: 1 });
    const last = r.at(-1) as SseEvent;
    expect(r[0]?.event).toBe("status");
    expect(last.event).toBe("progress");
    expect(last.data).toMatchObject({ id: running.body.id, status: "queued", done: 2, total: 5 });
    expect(last.data.current).toBeUndefined();
    expect(last.data.finishedAt).toBeUndefined();
    expect(last.data.summary).toBeUndefined();
    // Event ids grow by one.
    const seqs = r.map((e) => Number(e.id));
    expect(seqs).toEqual(seqs.map((_, i) => (seqs[0] as number) + i));

    // The KB holds the two committed files, whole; the rest of the uploads wait on disk.
    expect(documentsOf(first.kl, "acme.docs").docs.map((d) => d.uri)).toEqual(["a.md", "b.md"]);
    const uploads = join(dataDir, "uploads", "acme");
    expect(readdirSync(uploads).sort()).toEqual([running.body.id, queued.body.id].sort());
    expect(readdirSync(join(uploads, running.body.id)).sort()).toEqual(["2", "3", "4"]);
    await first.kl.close();

    // A new server on the data directory knows the jobs and resumes them.
    const second = await serveDir(dataDir);
    try {
      const api2 = client(second.base, key);
      const now = await api2.get(`/jobs/${running.body.id}`);
      expect(now.status).toBe(200);
      expect(now.body.total).toBe(5);
      expect(now.body.done).toBeGreaterThanOrEqual(2);
      // Reconnecting with the last event id replays every later event, up to the final one.
      const rest = await followJob(second.base, key, running.body.id, undefined, { lastEventId: last.id });
      const restSeqs = rest.map((e) => Number(e.id));
      expect(restSeqs).toEqual(restSeqs.map((_, i) => Number(last.id) + 1 + i));
      expect(rest[0]?.data).toMatchObject({ status: "running", done: 2 });
      const done = rest.at(-1) as SseEvent;
      expect(done.event).toBe("done");
      expect(done.data).toMatchObject({
        id: running.body.id,
        status: "succeeded",
        done: 5,
        total: 5,
        summary: { files: 5, added: 5, updated: 0, unchanged: 0, documents: 5, errors: [] },
      });
      expect(done.data.error).toBeUndefined();
      const later = await waitForJob(second.base, key, queued.body.id);
      expect(later).toMatchObject({ status: "succeeded", summary: { added: 1, documents: 1 } });
      // A finished job has nothing after its last event: 204, so EventSource stops reconnecting.
      const after = await fetch(`${second.base}/jobs/${running.body.id}/events`, {
        headers: { authorization: `Bearer ${key}`, "last-event-id": String(done.id) },
      });
      expect(after.status).toBe(204);
      const listed = (await api2.get("/jobs")).body.jobs.map((j: { id: string }) => j.id);
      expect(listed).toEqual([queued.body.id, running.body.id]);

      // Every file once, whole; the uploads are gone.
      const { docs, chunks } = documentsOf(second.kl, "acme.docs");
      expect(docs.map((d) => d.uri)).toEqual([...names, "later.md"]);
      expect(chunks).toBe(docs.reduce((n, d) => n + d.chunk_count, 0));
      expect(done.data.summary.chunks + later.summary.chunks).toBe(chunks);
      expect(existsSync(uploads) ? readdirSync(uploads) : []).toEqual([]);
    } finally {
      await second.app.close();
      await second.kl.close();
    }
  });
});

describe("kl serve: SIGTERM with jobs queued and running", () => {
  const tmp = tempDir("kl-serve-sigterm-");
  const dataDir = join(tmp.dir, "data");
  afterAll(() => tmp.cleanup());

  it("stops the running job after its current file, keeps both jobs queued in kl.db with their uploads, and exits 0", async () => {
    const setup = KnowledgeLayer.open({ dataDir });
    const key = createApiKey(setup.db, "acme").key;
    await setup.close();
    const { child, serve, exited } = spawnServe(ROOT, dataDir, tmp.dir);
    try {
      const base = await serve.base;
      const api = client(base, key);
      expect((await api.post("/kbs", { name: "docs" })).status).toBe(201);
      // Embedded with the bundled model: the first file waits for the model to load.
      const files = Array.from({ length: 8 }, (_, i) => ({
        name: `part-${i + 1}.md`,
        content: `# Part ${i + 1}\n\n${"Shutdown must not lose an acknowledged upload. ".repeat(20)}`,
      }));
      const running = await api.upload("docs", files);
      expect(running.status).toBe(202);
      const queued = await api.upload("docs", [{ name: "later.md", content: "# Later\n\nqueued" }]);
      expect(queued.body.status).toBe("queued");
      let opened = 0;
      const onOpen = (): void => {
        opened++;
      };
      const queuedEvents = followJob(base, key, queued.body.id, onOpen);
      const runningEvents = followJob(base, key, running.body.id, onOpen);
      // SIGTERM once both streams are open and the first job is on a file.
      for (let i = 0; opened < 2 && i < 300; i++) await new Promise((done) => setTimeout(done, 10));
      expect(opened).toBe(2);
      for (let i = 0; i < 300; i++) {
        const job = (await api.get(`/jobs/${running.body.id}`)).body;
        if (job.status === "running" && job.current !== undefined) break;
        await new Promise((done) => setTimeout(done, 20));
      }
      child.kill("SIGTERM");
      const r = (await runningEvents).at(-1) as SseEvent;
      const q = await queuedEvents;
      // Both streams end without a done event: the jobs wait in the queue for the next start.
      expect(q.map((e) => e.event)).toEqual(["status"]);
      expect(q[0]?.data).toMatchObject({ status: "queued", done: 0, total: 1 });
      expect(r.event).toBe("progress");
      expect(r.data.status).toBe("queued");
      expect(r.data.total).toBe(8);
      expect(r.data.done).toBeGreaterThanOrEqual(1);
      expect(r.data.done).toBeLessThan(8);
      expect(await exited).toBe(0);
      expect(serve.stderr()).toContain("SIGTERM: stopping");
      // What the job reported is what the data directory holds, embedded; the jobs wait in kl.db
      // with the bytes of the files not yet ingested (the next start resumes them: see the test above
      // and server-durable-jobs.test.ts).
      const after = KnowledgeLayer.open({ dataDir });
      try {
        const docs = after.db
          .prepare("SELECT uri, embedded FROM documents WHERE kb = 'acme.docs' ORDER BY id")
          .all() as { uri: string; embedded: number }[];
        expect(docs).toEqual(files.slice(0, r.data.done).map((f) => ({ uri: f.name, embedded: 1 })));
        const stored = await after.getJob(running.body.id);
        expect(stored).toMatchObject({ status: "queued", done: r.data.done, seq: Number(r.id) });
        expect(stored?.files.map((f) => f.state)).toEqual(
          files.map((_, i) => (i < r.data.done ? "done" : "pending")),
        );
        for (const f of stored?.files ?? []) expect(existsSync(f.storedPath)).toBe(f.state !== "done");
        expect(await after.getJob(queued.body.id)).toMatchObject({ status: "queued", done: 0 });
        expect((await after.pendingJobs()).map((j) => j.id)).toEqual([running.body.id, queued.body.id]);
      } finally {
        await after.close();
      }
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  });
});
