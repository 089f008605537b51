import { spawn } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KnowledgeLayer } from "../src/knowledge-layer.js";
import { createApiKey } from "../src/store/api-keys.js";
import { tempDir } from "./helpers.js";
import {
  client,
  followJob,
  type SseEvent,
  startServer,
  type TestServer,
  watchServe,
} from "./server-helpers.js";

const ROOT = resolve(import.meta.dirname, "..");

/**
 * Holds the `n`th call of `kl.ingestDocuments` (1-based) until `release` is called;
 * `reached` resolves when that call has started.
 */
function gateIngest(kl: KnowledgeLayer, n: number): { reached: Promise<void>; release: () => void } {
  const original = kl.ingestDocuments.bind(kl);
  let calls = 0;
  let reachedResolve = (): void => {};
  let release = (): void => {};
  const reached = new Promise<void>((done) => {
    reachedResolve = done;
  });
  const gate = new Promise<void>((done) => {
    release = done;
  });
  kl.ingestDocuments = async (...args: Parameters<KnowledgeLayer["ingestDocuments"]>) => {
    calls++;
    if (calls === n) {
      reachedResolve();
      await gate;
    }
    return original(...args);
  };
  return { reached, release };
}

describe("HTTP API: shutting down with jobs queued and running", () => {
  let s: TestServer;

  beforeAll(async () => {
    s = await startServer();
  });
  // Closing the app a second time is a no-op: this closes the data directory and removes it.
  afterAll(async () => s.close());

  it("ends each followed job's event stream with a done event of status interrupted, keeping what was committed", async () => {
    const key = s.key("acme");
    const api = client(s.base, key);
    expect((await api.post("/kbs", { name: "docs", retrieval: { mode: "keyword" } })).status).toBe(201);
    // The running job is held inside its second file while the server closes.
    const gate = gateIngest(s.kl, 2);
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
    const runningEvents = followJob(s.base, key, running.body.id, onOpen);
    const queuedEvents = followJob(s.base, key, queued.body.id, onOpen);
    for (let i = 0; opened < 2 && i < 200; i++) await new Promise((done) => setTimeout(done, 10));
    expect(opened).toBe(2);

    const closing = s.app.close();
    // The queued job ends at once, before the server waits for the running one.
    const q = await queuedEvents;
    const qDone = q.at(-1) as SseEvent;
    expect(qDone.event).toBe("done");
    expect(qDone.data).toMatchObject({
      id: queued.body.id,
      status: "interrupted",
      done: 0,
      total: 1,
      error: "the server shut down before the job started: upload the files again once it is back",
    });
    expect(qDone.data.startedAt).toBeUndefined();

    // Requests while the server closes get a 503 in the API's error format.
    const during = await api.get(`/jobs/${running.body.id}`);
    expect(during.status).toBe(503);
    expect(during.body).toEqual({ error: "the server is shutting down; try again once it is back" });

    // The running job finishes the file it is on, then stops.
    gate.release();
    const r = await runningEvents;
    await closing;
    const rDone = r.at(-1) as SseEvent;
    expect(r[0]?.event).toBe("status");
    expect(rDone.event).toBe("done");
    expect(rDone.data).toMatchObject({
      id: running.body.id,
      status: "interrupted",
      done: 2,
      total: 5,
      error:
        'the server shut down after 2 of 5 files; not ingested: "c.md", "d.md", "e.md" (upload them again once it is back)',
      summary: { files: 5, added: 2, documents: 2, errors: [] },
    });
    expect(rDone.data.current).toBeUndefined();
    expect(rDone.data.finishedAt).toEqual(expect.any(String));
    // Event ids grow by one, the final event included.
    const seqs = r.filter((e) => e.id !== undefined).map((e) => Number(e.id));
    expect(seqs).toEqual(seqs.map((_, i) => (seqs[0] as number) + i));

    // The KB holds the two committed files, whole; the rest of the upload is gone.
    const docs = s.kl.db
      .prepare("SELECT uri, chunk_count FROM documents WHERE kb = 'acme.docs' ORDER BY uri")
      .all() as { uri: string; chunk_count: number }[];
    expect(docs.map((d) => d.uri)).toEqual(["a.md", "b.md"]);
    for (const d of docs) expect(d.chunk_count).toBeGreaterThan(0);
    const chunks = s.kl.db
      .prepare(
        "SELECT count(*) AS n FROM chunks c JOIN documents d ON d.id = c.document_id WHERE d.kb = 'acme.docs'",
      )
      .get() as { n: number };
    expect(chunks.n).toBe(docs.reduce((n, d) => n + d.chunk_count, 0));
    const uploads = join(s.kl.dataDir, "uploads", "acme");
    expect(existsSync(uploads) ? readdirSync(uploads) : []).toEqual([]);
  });
});

describe("kl serve: SIGTERM with jobs queued and running", () => {
  const tmp = tempDir("kl-serve-sigterm-");
  const dataDir = join(tmp.dir, "data");
  afterAll(() => tmp.cleanup());

  it("sends every followed job a final interrupted event, stops the running job after its current file and exits 0", async () => {
    const setup = KnowledgeLayer.open({ dataDir });
    const key = createApiKey(setup.db, "acme").key;
    await setup.close();
    const child = spawn(
      process.execPath,
      [
        "--import",
        join(ROOT, "node_modules/tsx/dist/loader.mjs"),
        join(ROOT, "src/cli/main.ts"),
        "serve",
        "--data-dir",
        dataDir,
        "--port",
        "0",
        "--log-level",
        "silent",
      ],
      { cwd: tmp.dir, env: { ...process.env, KL_CACHE_URL: "none" } },
    );
    const serve = watchServe(child);
    const exited = new Promise<number | null>((done) => child.on("exit", (code) => done(code)));
    try {
      const base = await serve.base;
      const api = client(base, key);
      expect((await api.post("/kbs", { name: "docs" })).status).toBe(201);
      // Embedded with the bundled model: the first file waits for the model to load.
      const files = Array.from({ length: 8 }, (_, i) => ({
        name: `part-${i + 1}.md`,
        content: `# Part ${i + 1}\n\n${"Shutdown must not lose a job's final event. ".repeat(20)}`,
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
      const q = (await queuedEvents).at(-1) as SseEvent;
      expect(q.event).toBe("done");
      expect(q.data).toMatchObject({ status: "interrupted", done: 0, total: 1 });
      expect(r.event).toBe("done");
      expect(r.data.status).toBe("interrupted");
      expect(r.data.total).toBe(8);
      expect(r.data.done).toBeGreaterThanOrEqual(1);
      expect(r.data.done).toBeLessThan(8);
      expect(r.data.error).toContain(`the server shut down after ${r.data.done} of 8 files`);
      expect(r.data.summary).toMatchObject({ documents: r.data.done, errors: [] });
      expect(await exited).toBe(0);
      expect(serve.stderr()).toContain("SIGTERM: stopping");
      // What the job reported is what the data directory holds, embedded.
      const after = KnowledgeLayer.open({ dataDir });
      try {
        const docs = after.db
          .prepare("SELECT uri, embedded FROM documents WHERE kb = 'acme.docs' ORDER BY id")
          .all() as { uri: string; embedded: number }[];
        expect(docs).toEqual(files.slice(0, r.data.done).map((f) => ({ uri: f.name, embedded: 1 })));
      } finally {
        await after.close();
      }
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  });
});
