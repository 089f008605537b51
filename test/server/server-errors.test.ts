import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildServer } from "../../src/server/app.js";
import { docsPath } from "../helpers/helpers.js";
import { client, startServer, type TestServer, waitForJob } from "../helpers/server-helpers.js";

describe("HTTP API: malformed requests and error mapping", () => {
  let s: TestServer;
  let api: ReturnType<typeof client>;
  let key: string;

  beforeAll(async () => {
    // Small limits keep the oversized requests small.
    s = await startServer({ bodyLimit: 64 * 1024, maxFileBytes: 4 * 1024, maxFiles: 3 });
    key = s.key("acme");
    api = client(s.base, key);
    expect((await api.post("/kbs", { name: "docs", retrieval: { mode: "keyword" } })).status).toBe(201);
  });
  afterAll(async () => s.close());

  it("answers bad JSON with 400 and a JSON error", async () => {
    const r = await api.raw("POST", "/search", '{"query": "x",');
    expect(r.status).toBe(400);
    expect(r.body.error).toMatch(/^request body is not valid JSON/);
    const empty = await api.raw("POST", "/search", "");
    expect(empty.status).toBe(400);
    expect(empty.body.error).toContain("empty");
  });

  it("rejects unknown fields, missing fields and wrong types naming the field", async () => {
    const unknown = await api.post("/search", { query: "x", top_k: 3 });
    expect(unknown.status).toBe(400);
    expect(unknown.body).toEqual({ error: '"top_k" is not a known field', field: "top_k" });
    const missing = await api.post("/search", { kbs: ["docs"] });
    expect(missing.status).toBe(400);
    expect(missing.body).toEqual({ error: '"query" is required', field: "query" });
    const type = await api.post("/search", { query: "x", topK: "5" });
    expect(type.status).toBe(400);
    expect(type.body).toEqual({ error: '"topK" must be integer', field: "topK" });
    const range = await api.post("/search", { query: "x", topK: 1000 });
    expect(range.status).toBe(400);
    expect(range.body.field).toBe("topK");
    expect(range.body.error).toContain("<= 100");
    const mode = await api.post("/search", { query: "x", mode: "magic" });
    expect(mode.status).toBe(400);
    expect(mode.body.field).toBe("mode");
    expect(mode.body.error).toContain("keyword");
    const emptyQuery = await api.post("/search", { query: "" });
    expect(emptyQuery.status).toBe(400);
    expect(emptyQuery.body.field).toBe("query");
    const blank = await api.post("/search", { query: "   " });
    expect(blank.status).toBe(400);
    expect(blank.body.error).toContain("query is empty");
    const nested = await api.post("/agents", {
      name: "a",
      kbs: [{ kb: "docs", retrievalConfig: { maxResult: 2 } }],
    });
    expect(nested.status).toBe(400);
    expect(nested.body.field).toBe("kbs.0.retrievalConfig.maxResult");
    const unknownKb = await api.post("/agents", { name: "a", kbs: [{ kb: "nope" }] });
    expect(unknownKb.status).toBe(400);
    expect(unknownKb.body).toEqual({ error: 'unknown knowledge base "nope"', field: "kbs.0.kb" });
    const notArray = await api.raw("POST", "/search", "[1, 2]");
    expect(notArray.status).toBe(400);
    const query = await api.get("/kbs/docs/documents?limit=ten");
    expect(query.status).toBe(400);
    expect(query.body.field).toBe("limit");
    expect(query.body.error).toContain('query parameter "limit"');
  });

  it("lets a tenant lower the extraction limits but never raise them (zip bombs)", async () => {
    const raised = await api.post("/kbs", {
      name: "bomb",
      extraction: { limits: { maxUnpackedBytes: 1e18 } },
    });
    expect(raised.status).toBe(400);
    expect(raised.body).toEqual({
      error: expect.stringMatching(
        /^extraction\.limits\.maxUnpackedBytes cannot exceed the server's limit 536870912/,
      ),
      field: "extraction.limits.maxUnpackedBytes",
    });
    const lowered = await api.post("/kbs", { name: "small", extraction: { limits: { maxPages: 10 } } });
    expect(lowered.status).toBe(201);
    const patched = await api.raw(
      "PATCH",
      "/kbs/small",
      JSON.stringify({ extraction: { limits: { maxFileBytes: 1e15 } } }),
    );
    expect(patched.status).toBe(400);
    expect(patched.body.field).toBe("extraction.limits.maxFileBytes");
  });

  it("answers a truncated multipart upload with 400, not 500", async () => {
    const boundary = "----kltest";
    const body = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.md"\r\nContent-Type: text/markdown\r\n\r\n# Title\nsome text that never ends`;
    const res = await fetch(`${s.base}/kbs/docs/documents`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${key}`,
        "content-type": `multipart/form-data; boundary=${boundary}`,
      },
      body,
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toMatch(/^malformed multipart body: /);
  });

  it("answers a body over the limit with 413", async () => {
    const huge = await api.post("/search", { query: "x".repeat(100 * 1024) });
    expect(huge.status).toBe(413);
    expect(huge.body.error).toBe("request body is larger than the limit of 64 KiB");
  });

  it("answers unknown routes with a JSON 404 and wrong content types with 415", async () => {
    const r = await api.get("/no/such/route?x=1");
    expect(r.status).toBe(404);
    expect(r.headers.get("content-type")).toContain("application/json");
    expect(r.body).toEqual({ error: "no route GET /no/such/route" });
    expect((await api.delete("/search")).status).toBe(404);
    const text = await fetch(`${s.base}/search`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "text/plain" },
      body: "query",
    });
    expect(text.status).toBe(415);
    expect(((await text.json()) as { error: string }).error).toContain("application/json");
    const json = await api.post("/kbs/docs/documents", { file: "x" });
    expect(json.status).toBe(415);
    expect(json.body.error).toContain("multipart/form-data");
  });

  it("refuses oversized uploads, too many files, non-file fields and empty uploads", async () => {
    const big = await api.upload("docs", [{ name: "big.md", content: "word ".repeat(2000) }]);
    expect(big.status).toBe(413);
    expect(big.body.error).toBe('file "big.md" is larger than the upload limit of 4 KiB');
    const many = await api.upload(
      "docs",
      ["a", "b", "c", "d"].map((n) => ({ name: `${n}.md`, content: `# ${n}\n\ntext` })),
    );
    expect(many.status).toBe(413);
    expect(many.body.error).toBe("too many files in one request (the limit is 3)");
    const form = new FormData();
    form.append("note", "hello");
    const field = await fetch(`${s.base}/kbs/docs/documents`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}` },
      body: form,
    });
    expect(field.status).toBe(400);
    expect(await field.json()).toEqual({
      error:
        'unexpected form field "note": send file parts, and optionally "meta" (key=value or a JSON object) and "tag" fields',
      field: "note",
    });
    const none = await fetch(`${s.base}/kbs/docs/documents`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "multipart/form-data; boundary=xyz" },
      body: "--xyz--\r\n",
    });
    expect(none.status).toBe(400);
    expect(((await none.json()) as { error: string }).error).toContain("no files");
    // Nothing was queued, and no upload folder was left behind.
    expect((await api.get("/jobs")).body.jobs).toEqual([]);
    const { readdirSync } = await import("node:fs");
    const { join } = await import("node:path");
    expect(readdirSync(join(s.kl.dataDir, "uploads", "acme"))).toEqual([]);
  });

  it("refuses an upload naming one file twice with a 400 naming it, storing nothing", async () => {
    const { readdirSync } = await import("node:fs");
    const { join } = await import("node:path");
    expect((await api.post("/kbs", { name: "twins", retrieval: { mode: "keyword" } })).status).toBe(201);
    const same = await api.upload(
      "twins",
      [
        { name: "notes.md", content: "# First\n\nthe first notes file" },
        { name: "notes.md", content: "# Second\n\nthe second notes file" },
      ],
      "?embed=false",
    );
    expect(same.status).toBe(400);
    expect(same.body).toEqual({
      error:
        "file \"notes.md\" is in the upload twice, as file parts 1 and 2: a file's name is its document's uri, so each file of an upload needs its own name; rename one (nothing was stored)",
      field: "file",
    });
    // Different client paths that sanitise to one name are the same document too.
    const paths = await api.upload(
      "twins",
      [
        { name: "a.md", content: "# A\n\ntext a" },
        { name: "2024/report.md", content: "# Report 2024\n\nthis year" },
        { name: "2023\\report.md", content: "# Report 2023\n\nlast year" },
      ],
      "?embed=false",
    );
    expect(paths.status).toBe(400);
    expect(paths.body.field).toBe("file");
    expect(paths.body.error).toMatch(/^file "report\.md" is in the upload twice, as file parts 2 and 3: /);
    // Names the server sanitises to one name are named as the client sent them.
    const hash = await api.upload(
      "twins",
      [
        { name: "notes#1.md", content: "# One\n\nhash" },
        { name: "notes_1.md", content: "# One\n\nunderscore" },
      ],
      "?embed=false",
    );
    expect(hash.status).toBe(400);
    expect(hash.body.error).toMatch(
      /^file "notes_1\.md" is in the upload twice, as file parts 1 and 2 \(sent as "notes#1\.md" and "notes_1\.md"\): /,
    );
    // Nothing was queued or stored: no job, no document, no upload folder left behind.
    expect((await api.get("/jobs")).body.jobs.filter((j: { kb: string }) => j.kb === "twins")).toEqual([]);
    expect((await api.get("/kbs/twins/documents")).body).toMatchObject({ documents: [], total: 0 });
    expect(readdirSync(join(s.kl.dataDir, "uploads", "acme"))).toEqual([]);
    // Names differing in case are distinct documents: both are kept.
    const cases = await api.upload(
      "twins",
      [
        { name: "Notes.md", content: "# Upper\n\ncapital notes" },
        { name: "notes.md", content: "# Lower\n\nsmall notes" },
      ],
      "?embed=false",
    );
    expect(cases.status).toBe(202);
    const job = await waitForJob(s.base, key, cases.body.id);
    expect(job).toMatchObject({ status: "succeeded", summary: { files: 2, added: 2, documents: 2 } });
    const docs = (await api.get("/kbs/twins/documents")).body.documents.map((d: { uri: string }) => d.uri);
    expect(docs.sort()).toEqual(["Notes.md", "notes.md"]);
  });

  it("keeps the file name only, never the client's path", async () => {
    const up = await api.upload(
      "docs",
      [{ name: "../../etc/notes#1.md", content: "# Notes\n\nupload names are sanitised" }],
      "?embed=false",
    );
    expect(up.status).toBe(202);
    expect(up.body.files[0].name).toBe("notes_1.md");
    const real = await api.upload(
      "docs",
      [docsPath("markdown", "rust_book_src", "appendix-00.md")],
      "?embed=x",
    );
    expect(real.status).toBe(400);
    expect(real.body.field).toBe("embed");
  });

  it("answers 503 when a KB's vector store cannot be reached", async () => {
    // A KB whose stored config points at a vector store nobody runs.
    expect((await api.post("/kbs", { name: "remote" })).status).toBe(201);
    s.kl.db
      .prepare(
        "UPDATE kbs SET config = json_set(config, '$.vectorStore', json(?)) WHERE name = 'acme.remote'",
      )
      .run(JSON.stringify({ type: "chroma", url: "http://127.0.0.1:9" }));
    const r = await api.post("/search", { query: "anything", mode: "vector_only", kbs: ["remote"] });
    expect(r.status).toBe(503);
    expect(r.body.error).toContain('knowledge base "remote": cannot connect to vector store chroma');
    expect(r.text).not.toContain("acme.");
  });

  it("maps unexpected failures to a generic 500 without internals", async () => {
    const kl = s.kl;
    const app = await buildServer(kl);
    app.get("/boom", async () => {
      throw new Error("secret detail at /srv/kl/private.ts:12");
    });
    await app.listen({ host: "127.0.0.1", port: 0 });
    try {
      const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
      const r = await client(base, key).get("/boom");
      expect(r.status).toBe(500);
      expect(r.body).toEqual({ error: "internal server error (details are in the server log)" });
      expect(r.text).not.toContain("secret");
    } finally {
      await app.close();
    }
  });
});
