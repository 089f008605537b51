import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { docsPath } from "../helpers/helpers.js";
import {
  client,
  followJob,
  type SseEvent,
  startServer,
  type TestServer,
  waitForJob,
} from "../helpers/server-helpers.js";

const rust = (f: string): string => docsPath("markdown", "rust_book_src", f);
const ham = (f: string): string => docsPath("email", "spamassassin_sample", "easy-ham-1", f);

const RUST_FILES = [
  rust("ch04-00-understanding-ownership.md"),
  rust("ch08-00-common-collections.md"),
  rust("ch09-00-error-handling.md"),
];
const WEEKEND_MAIL = ham("00046.c8491e68aa5652272d6511bb7d848d37.txt");
const CORRUPT_PDF = docsPath("pdf", "pdf-parse_npm_test_data", "03-invalid.pdf");

describe("HTTP API: knowledge bases, uploads, jobs, agents, search", () => {
  let s: TestServer;
  let api: ReturnType<typeof client>;
  let key: string;
  let rustEvents: SseEvent[];
  let mailJob: { id: string; status: string; summary: { errors: { file: string; reason: string }[] } };

  beforeAll(async () => {
    s = await startServer();
    key = s.key("acme");
    api = client(s.base, key);
  });
  afterAll(async () => s.close());

  it("answers /health and /openapi.json without a key", async () => {
    const anonymous = client(s.base);
    const health = await anonymous.get("/health");
    expect(health.status).toBe(200);
    expect(health.body.status).toBe("ok");
    const spec = await anonymous.get("/openapi.json");
    expect(spec.status).toBe(200);
    expect(spec.body.openapi).toMatch(/^3\./);
    for (const path of [
      "/kbs",
      "/kbs/{kb}",
      "/kbs/{kb}/documents",
      "/jobs/{id}/events",
      "/agents/{id}/retrieve",
      "/search",
    ])
      expect(Object.keys(spec.body.paths)).toContain(path);
    expect(spec.body.paths["/search"].post.requestBody.content["application/json"].schema.required).toEqual([
      "query",
    ]);
    expect(Object.keys(spec.body.paths["/kbs/{kb}/documents"].post.requestBody.content)).toEqual([
      "multipart/form-data",
    ]);
    expect(spec.body.components.securitySchemes.bearerAuth).toMatchObject({ type: "http", scheme: "bearer" });
  });

  it("creates knowledge bases with config overrides and rejects a duplicate with 409", async () => {
    const created = await api.post("/kbs", {
      name: "rust",
      chunking: { strategy: "document", chunkSize: 800 },
    });
    expect(created.status).toBe(201);
    expect(created.headers.get("location")).toBe("/kbs/rust");
    expect(created.body.name).toBe("rust");
    expect(created.body.config.name).toBe("rust");
    expect(created.body.config.chunking).toMatchObject({ strategy: "document", chunkSize: 800 });
    expect(created.body.counts.documents).toBe(0);
    expect((await api.post("/kbs", { name: "mail", retrieval: { mode: "keyword" } })).status).toBe(201);
    const dup = await api.post("/kbs", { name: "rust" });
    expect(dup.status).toBe(409);
    expect(dup.body).toEqual({ error: 'knowledge base "rust" already exists', field: "name" });
    const list = await api.get("/kbs");
    expect(list.body.kbs.map((k: { name: string }) => k.name)).toEqual(["mail", "rust"]);
  });

  it("validates KB configs with a field-level 400", async () => {
    const bad = await api.post("/kbs", { name: "bad", chunking: { chunkSize: 100, chunkOverlap: 200 } });
    expect(bad.status).toBe(400);
    expect(bad.body.field).toBe("chunking.chunkOverlap");
    expect(bad.body.error).toContain('knowledge base "bad"');
    expect(bad.body.error).not.toContain("acme.");
    const typo = await api.post("/kbs", { name: "bad", retrieval: { topk: 3 } });
    expect(typo.status).toBe(400);
    expect(typo.body.field).toBe("retrieval.topk");
    const name = await api.post("/kbs", { name: "no spaces" });
    expect(name.status).toBe(400);
    expect(name.body.field).toBe("name");
    const remote = await api.post("/kbs", { name: "bad", embedding: { provider: "openai" } });
    expect(remote.status).toBe(400);
    expect(remote.body.field).toBe("embedding.provider");
    const collection = await api.post("/kbs", {
      name: "bad",
      vectorStore: { type: "sqlite", collection: "kb_other" },
    });
    expect(collection.status).toBe(400);
    expect(collection.body.field).toBe("vectorStore.collection");
    expect((await api.get("/kbs/bad")).status).toBe(404);
  });

  it("uploads real files as multipart and follows the ingest job over server-sent events", async () => {
    const up = await api.upload("rust", RUST_FILES);
    expect(up.status).toBe(202);
    expect(up.headers.get("location")).toBe(`/jobs/${up.body.id}`);
    expect(up.body).toMatchObject({ kb: "rust", total: 3, done: 0 });
    expect(["queued", "running"]).toContain(up.body.status);
    expect(up.body.files.map((f: { name: string }) => f.name)).toEqual([
      "ch04-00-understanding-ownership.md",
      "ch08-00-common-collections.md",
      "ch09-00-error-handling.md",
    ]);
    rustEvents = await followJob(s.base, key, up.body.id);
    expect(rustEvents[0]?.event).toBe("status");
    const progress = rustEvents.filter((e) => e.event === "progress");
    expect(progress.length).toBeGreaterThanOrEqual(3);
    const dones = progress.map((e) => e.data.done as number);
    expect(dones).toEqual([...dones].sort((a, b) => a - b));
    expect(dones.at(-1)).toBe(3);
    const last = rustEvents.at(-1) as SseEvent;
    expect(last.event).toBe("done");
    expect(last.data.status).toBe("succeeded");
    expect(last.data.summary).toMatchObject({ files: 3, added: 3, documents: 3, errors: [] });
    expect(last.data.summary.chunks).toBeGreaterThanOrEqual(3);
    expect(last.data.summary.embedded.computed).toBeGreaterThan(0);
    const job = await api.get(`/jobs/${up.body.id}`);
    expect(job.body).toMatchObject({ status: "succeeded", done: 3, total: 3 });
    // A finished job's events: the state, then the final event at once.
    const replay = await followJob(s.base, key, up.body.id);
    expect(replay.map((e) => e.event)).toEqual(["status", "done"]);
  });

  it("reports a file that cannot be parsed in the job summary and ingests the rest", async () => {
    const up = await api.upload("mail", [WEEKEND_MAIL, CORRUPT_PDF]);
    expect(up.status).toBe(202);
    mailJob = await waitForJob(s.base, key, up.body.id);
    expect(mailJob.status).toBe("succeeded");
    expect(mailJob.summary.errors).toHaveLength(1);
    expect(mailJob.summary.errors[0]?.file).toBe("03-invalid.pdf");
    expect(mailJob.summary.errors[0]?.reason.length).toBeGreaterThan(5);
    const all = await api.upload("mail", [{ name: "broken.pdf", content: "%PDF-1.4 not really" }]);
    const failed = await waitForJob(s.base, key, all.body.id);
    expect(failed.status).toBe("failed");
    expect(failed.error).toContain("no file could be ingested");
    expect(failed.summary.errors[0].file).toBe("broken.pdf");
  });

  it("lists documents and returns one with metadata and text", async () => {
    const list = await api.get("/kbs/rust/documents");
    expect(list.status).toBe(200);
    expect(list.body.total).toBe(3);
    const doc = list.body.documents.find((d: { path: string }) => d.path === "ch09-00-error-handling.md");
    expect(doc).toMatchObject({ uri: "ch09-00-error-handling.md", type: "markdown", embedded: true });
    const one = await api.get(`/kbs/rust/documents/${doc.id}`);
    expect(one.status).toBe(200);
    expect(one.body.text).toContain("Rust groups errors into two major categories");
    expect(one.body.metadata.title).toBe("Error Handling");
    const page = await api.get("/kbs/rust/documents?limit=2&offset=2");
    expect(page.body.documents).toHaveLength(1);
    expect((await api.get("/kbs/mail/documents")).body.total).toBe(1);
    expect((await api.get(`/kbs/mail/documents/${doc.id}`)).status).toBe(404);
  });

  it("searches directly with attribution", async () => {
    const r = await api.post("/search", {
      query: "What are the two major categories of errors?",
      kbs: ["rust"],
    });
    expect(r.status).toBe(200);
    expect(r.body.kbs).toEqual(["rust"]);
    const top = r.body.results[0];
    expect(top).toMatchObject({ rank: 1, kb: "rust" });
    expect(top.source.path).toBe("ch09-00-error-handling.md");
    expect(top.citation).toContain("ch09-00-error-handling.md");
    const keyword = await api.post("/search", { query: "weekend email", mode: "keyword", topK: 1 });
    expect(keyword.body.results).toHaveLength(1);
    expect(keyword.body.results[0].kb).toBe("mail");
    expect(keyword.body.results[0].source.type).toBe("email");
  });

  let agentId: string;

  it("creates an agent over two KBs and retrieves from both with per-KB settings", async () => {
    const created = await api.post("/agents", {
      name: "helper",
      description: "answers Rust and mail questions",
      kbs: [
        { kb: "rust", retrievalConfig: { maxResults: 2 } },
        { kb: "mail", retrievalConfig: { maxResults: 1, mode: "keyword" } },
      ],
    });
    expect(created.status).toBe(201);
    agentId = created.body.id;
    expect(created.body.kbs.map((a: { kb: string }) => a.kb).sort()).toEqual(["mail", "rust"]);
    expect(created.body.kbs.find((a: { kb: string }) => a.kb === "mail").retrievalConfig).toEqual({
      maxResults: 1,
      mode: "keyword",
    });
    const r = await api.post(`/agents/${agentId}/retrieve`, {
      query: "error handling while reading email this weekend",
    });
    expect(r.status).toBe(200);
    expect(r.body.agent).toBe(agentId);
    expect(r.body.kbs.sort()).toEqual(["mail", "rust"]);
    const results = r.body.results as {
      kb: string;
      source: { path: string; uri: string };
      citation: string;
      rank: number;
    }[];
    expect(results.filter((x) => x.kb === "rust").length).toBeLessThanOrEqual(2);
    expect(results.filter((x) => x.kb === "mail")).toHaveLength(1);
    expect(results.some((x) => x.kb === "rust")).toBe(true);
    for (const x of results) {
      expect(x.source.path).toBe(x.source.uri);
      expect(x.citation).toContain(x.source.path);
      expect(x.source.path).not.toContain("/");
    }
    expect(results.find((x) => x.kb === "mail")?.source.path).toBe(
      "00046.c8491e68aa5652272d6511bb7d848d37.txt",
    );
    expect(results.map((x) => x.rank)).toEqual(results.map((_, i) => i + 1));
  });

  it("updates, detaches and re-attaches agent KBs", async () => {
    const renamed = await api.patch(`/agents/${agentId}`, { name: "rust-helper", topK: 3 });
    expect(renamed.body).toMatchObject({ name: "rust-helper", topK: 3 });
    const dupName = await api.post("/agents", { name: "rust-helper" });
    expect(dupName.status).toBe(409);
    const detached = await api.delete(`/agents/${agentId}/kbs/mail`);
    expect(detached.status).toBe(200);
    expect(detached.body.kbs.map((a: { kb: string }) => a.kb)).toEqual(["rust"]);
    expect((await api.delete(`/agents/${agentId}/kbs/mail`)).status).toBe(404);
    const r = await api.post(`/agents/${agentId}/retrieve`, { query: "weekend email", topK: 2 });
    expect(r.body.results.every((x: { kb: string }) => x.kb === "rust")).toBe(true);
    const attached = await api.put(`/agents/${agentId}/kbs/mail`, { retrievalConfig: { minScore: 0.1 } });
    expect(attached.status).toBe(200);
    expect(attached.body.kbs.find((a: { kb: string }) => a.kb === "mail").retrievalConfig).toEqual({
      minScore: 0.1,
    });
    expect((await api.put(`/agents/${agentId}/kbs/nope`, {})).status).toBe(404);
    expect((await api.get("/agents")).body.agents).toHaveLength(1);
  });

  it("updates retrieval settings of a KB and refuses fixed ones", async () => {
    const patched = await api.patch("/kbs/rust", { retrieval: { topK: 3, minScore: 0.05 } });
    expect(patched.status).toBe(200);
    expect(patched.body.config.retrieval).toMatchObject({ topK: 3, minScore: 0.05 });
    expect((await api.get("/kbs/rust")).body.config.retrieval.topK).toBe(3);
    const chunking = await api.patch("/kbs/rust", { chunking: { chunkSize: 100 } });
    expect(chunking.status).toBe(400);
    expect(chunking.body.field).toBe("chunking");
    const analyzer = await api.patch("/kbs/rust", { retrieval: { analyzer: "standard" } });
    expect(analyzer.status).toBe(400);
    expect(analyzer.body.field).toBe("retrieval.analyzer");
    const invalid = await api.patch("/kbs/rust", { retrieval: { rerankWeight: 2 } });
    expect(invalid.status).toBe(400);
    expect(invalid.body.field).toBe("retrieval.rerankWeight");
  });

  it("re-uploading an unchanged file changes nothing; deleting a document removes its chunks, postings and vectors", async () => {
    const again = await api.upload("rust", [RUST_FILES[2] as string]);
    const job = await waitForJob(s.base, key, again.body.id);
    expect(job.summary).toMatchObject({ unchanged: 1, documents: 0 });
    const docs = (await api.get("/kbs/rust/documents")).body.documents as { id: number; path: string }[];
    const target = docs.find((d) => d.path === "ch09-00-error-handling.md") as { id: number };
    const chunkIds = s.kl.catalog.chunkIds(target.id);
    expect(chunkIds.length).toBeGreaterThan(0);
    expect((await api.delete(`/kbs/rust/documents/${target.id}`)).status).toBe(204);
    expect((await api.get(`/kbs/rust/documents/${target.id}`)).status).toBe(404);
    expect((await api.delete(`/kbs/rust/documents/${target.id}`)).status).toBe(404);
    const placeholders = chunkIds.map(() => "?").join(",");
    const count = (sql: string, ...args: unknown[]): number =>
      (s.kl.db.prepare(sql).get(...args) as { n: number }).n;
    const indexed = s.kl.bm25.indexedChunkIds("rust");
    expect(chunkIds.filter((id) => indexed.has(id))).toEqual([]);
    expect(count(`SELECT count(*) AS n FROM chunks WHERE id IN (${placeholders})`, ...chunkIds)).toBe(0);
    expect(
      count(
        `SELECT count(*) AS n FROM vec_records WHERE collection = ? AND id IN (${placeholders})`,
        "kb_acme.rust",
        ...chunkIds.map(String),
      ),
    ).toBe(0);
    expect(
      count("SELECT count(*) AS n FROM vec_records WHERE collection = ?", "kb_acme.rust"),
    ).toBeGreaterThan(0);
    const r = await api.post("/search", { query: "two major categories of errors", kbs: ["rust"] });
    expect(r.body.results.map((x: { source: { path: string } }) => x.source.path)).not.toContain(
      "ch09-00-error-handling.md",
    );
    expect((await api.get("/kbs/rust")).body.counts.documents).toBe(2);
  });

  it("re-uploading a file that now yields fewer documents removes the ones it no longer has", async () => {
    const msg = (n: number): string =>
      `From a@b.c Mon Jan  1 00:00:00 2024\nFrom: A <a@b.c>\nSubject: llama report ${n}\n` +
      `Date: Mon, 1 Jan 2024 00:00:0${n} +0000\n\nBody of llama report number ${n}.\n\n`;
    const first = await api.upload(
      "mail",
      [{ name: "box.mbox", content: msg(1) + msg(2) + msg(3) }],
      "?embed=false",
    );
    expect((await waitForJob(s.base, key, first.body.id)).summary).toMatchObject({ documents: 3, added: 1 });
    const uris = async (): Promise<string[]> =>
      (await api.get("/kbs/mail/documents")).body.documents.map((d: { uri: string }) => d.uri).sort();
    expect(await uris()).toContain("box.mbox#message/3");
    const second = await api.upload("mail", [{ name: "box.mbox", content: msg(1) + msg(2) }], "?embed=false");
    const job = await waitForJob(s.base, key, second.body.id);
    expect(job.summary).toMatchObject({ unchanged: 1, documents: 0, removed: ["box.mbox#message/3"] });
    expect(await uris()).toEqual([
      "00046.c8491e68aa5652272d6511bb7d848d37.txt",
      "box.mbox#message/1",
      "box.mbox#message/2",
    ]);
    const hit = await api.post("/search", { query: "llama report", kbs: ["mail"], mode: "keyword" });
    expect(hit.body.results.map((r: { source: { uri: string } }) => r.source.uri).sort()).toEqual([
      "box.mbox#message/1",
      "box.mbox#message/2",
    ]);
  });

  it("deletes a KB (204), detaching it from agents, then 404s it", async () => {
    expect((await api.delete("/kbs/mail")).status).toBe(204);
    expect((await api.get("/kbs/mail")).status).toBe(404);
    expect((await api.delete("/kbs/mail")).status).toBe(404);
    const agent = await api.get(`/agents/${agentId}`);
    expect(agent.body.kbs.map((a: { kb: string }) => a.kb)).toEqual(["rust"]);
    expect((await api.delete(`/agents/${agentId}`)).status).toBe(204);
    expect((await api.get(`/agents/${agentId}`)).status).toBe(404);
    const jobs = await api.get("/jobs");
    expect(jobs.body.jobs.length).toBeGreaterThanOrEqual(4);
    expect(jobs.body.jobs[0].createdAt >= jobs.body.jobs.at(-1).createdAt).toBe(true);
  });
});
