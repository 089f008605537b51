import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApiKey, listApiKeys, revokeApiKey } from "../../src/store/api-keys.js";
import { docsPath } from "../helpers/helpers.js";
import { client, startServer, type TestServer, waitForJob } from "../helpers/server-helpers.js";

const rust = (f: string): string => docsPath("markdown", "rust_book_src", f);

describe("HTTP API tenancy: API keys and isolation", () => {
  let s: TestServer;
  let acme: ReturnType<typeof client>;
  let globex: ReturnType<typeof client>;
  let acmeKey: string;
  let globexKey: string;
  let jobId: string;
  let agentId: string;
  let docId: number;

  beforeAll(async () => {
    s = await startServer();
    acmeKey = s.key("acme");
    globexKey = s.key("globex");
    acme = client(s.base, acmeKey);
    globex = client(s.base, globexKey);
    expect((await acme.post("/kbs", { name: "docs", retrieval: { mode: "keyword" } })).status).toBe(201);
    const up = await acme.upload("docs", [rust("ch04-00-understanding-ownership.md")], "?embed=false");
    jobId = up.body.id;
    expect((await waitForJob(s.base, acmeKey, jobId)).status).toBe("succeeded");
    docId = (await acme.get("/kbs/docs/documents")).body.documents[0].id;
    agentId = (await acme.post("/agents", { name: "a", kbs: [{ kb: "docs" }] })).body.id;
  });
  afterAll(async () => s.close());

  it("answers 401 without a key, with a malformed header and with an unknown or revoked key", async () => {
    for (const path of ["/kbs", "/search", "/agents", "/jobs/x", "/nope"]) {
      const r = await client(s.base).get(path);
      expect(r.status).toBe(401);
      expect(r.body.error).toContain("missing API key");
      expect(r.headers.get("www-authenticate")).toContain("Bearer");
    }
    expect((await client(s.base, "kl_not-a-key").get("/kbs")).status).toBe(401);
    const basic = await fetch(`${s.base}/kbs`, { headers: { authorization: `Basic ${acmeKey}` } });
    expect(basic.status).toBe(401);
    const temp = createApiKey(s.kl.db, "acme", "temporary");
    expect((await client(s.base, temp.key).get("/kbs")).status).toBe(200);
    expect(revokeApiKey(s.kl.db, temp.id)).toBe(true);
    const revoked = await client(s.base, temp.key).get("/kbs");
    expect(revoked.status).toBe(401);
    expect(revoked.body.error).toBe("invalid API key");
  });

  it("stores only SHA-256 hashes of keys", () => {
    const rows = s.kl.db.prepare("SELECT * FROM server_api_keys").all() as Record<string, unknown>[];
    expect(rows.length).toBeGreaterThanOrEqual(2);
    const stored = JSON.stringify(rows);
    expect(stored).not.toContain(acmeKey);
    expect(stored).not.toContain(globexKey);
    for (const r of rows) expect(r.key_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(listApiKeys(s.kl.db, "globex").map((k) => k.tenant)).toEqual(["globex"]);
    expect(() => createApiKey(s.kl.db, "bad.tenant")).toThrow(/invalid tenant "bad.tenant"/);
  });

  it("gives another tenant 404 for the KB, its documents, jobs and agents", async () => {
    const notFound = [
      await globex.get("/kbs/docs"),
      await globex.patch("/kbs/docs", { retrieval: { topK: 2 } }),
      await globex.get("/kbs/docs/documents"),
      await globex.get(`/kbs/docs/documents/${docId}`),
      await globex.delete(`/kbs/docs/documents/${docId}`),
      await globex.upload("docs", [rust("ch06-00-enums.md")]),
      await globex.get(`/jobs/${jobId}`),
      await globex.get(`/jobs/${jobId}/events`),
      await globex.get(`/agents/${agentId}`),
      await globex.patch(`/agents/${agentId}`, { name: "stolen" }),
      await globex.put(`/agents/${agentId}/kbs/docs`, {}),
      await globex.delete(`/agents/${agentId}/kbs/docs`),
      await globex.post(`/agents/${agentId}/retrieve`, { query: "ownership" }),
      await globex.delete(`/agents/${agentId}`),
      await globex.post("/search", { query: "ownership", kbs: ["docs"] }),
      await globex.delete("/kbs/docs"),
    ];
    for (const r of notFound) {
      expect(r.status, r.text).toBe(404);
      expect(r.body.error).toMatch(/not found|not attached/);
      expect(r.text).not.toContain("acme");
    }
    // Catalog names of another tenant are no way in either.
    expect((await globex.get("/kbs/acme.docs")).status).toBe(404);
    expect((await globex.get("/kbs")).body.kbs).toEqual([]);
    expect((await globex.get("/agents")).body.agents).toEqual([]);
    expect((await globex.get("/jobs")).body.jobs).toEqual([]);
    // …and nothing changed for the owner.
    expect((await acme.get("/kbs/docs")).body.counts.documents).toBe(1);
    expect((await acme.get(`/agents/${agentId}`)).body.name).toBe("a");
  });

  it("never returns another tenant's results from /search, even for a KB of the same name", async () => {
    const none = await globex.post("/search", { query: "ownership Rust memory safety garbage collector" });
    expect(none.status).toBe(200);
    expect(none.body.results).toEqual([]);
    expect((await globex.post("/kbs", { name: "docs", retrieval: { mode: "keyword" } })).status).toBe(201);
    const up = await globex.upload("docs", [rust("ch06-00-enums.md")], "?embed=false");
    expect((await waitForJob(s.base, globexKey, up.body.id)).status).toBe("succeeded");
    const own = await globex.post("/search", {
      query: "ownership Rust memory safety garbage collector enums",
    });
    expect(own.body.results.length).toBeGreaterThan(0);
    for (const r of own.body.results) {
      expect(r.kb).toBe("docs");
      expect(r.source.path).toBe("ch06-00-enums.md");
    }
    const theirs = await acme.post("/search", { query: "enums pattern matching ownership", kbs: ["docs"] });
    for (const r of theirs.body.results) expect(r.source.path).toBe("ch04-00-understanding-ownership.md");
    // Each tenant's agent can only attach its own "docs".
    const agent = await globex.post("/agents", { name: "a", kbs: [{ kb: "docs" }] });
    expect(agent.status).toBe(201);
    const r = await globex.post(`/agents/${agent.body.id}/retrieve`, { query: "ownership enums" });
    for (const x of r.body.results) expect(x.source.path).toBe("ch06-00-enums.md");
    expect((await acme.get("/kbs/docs")).body.counts.documents).toBe(1);
    expect((await globex.get("/kbs/docs")).body.counts.documents).toBe(1);
  });

  it("never lets one tenant's cached embeddings answer another's (no cache side channel)", async () => {
    const note = {
      name: "note.md",
      content: "# Herons\n\nA heron waits in shallow water before it strikes.",
    };
    expect((await acme.post("/kbs", { name: "cached" })).status).toBe(201);
    expect((await globex.post("/kbs", { name: "cached" })).status).toBe(201);
    const first = await acme.upload("cached", [note]);
    const a = await waitForJob(s.base, acmeKey, first.body.id);
    expect(a.summary.embedded.computed).toBeGreaterThan(0);
    const second = await globex.upload("cached", [note]);
    const b = await waitForJob(s.base, globexKey, second.body.id);
    expect(b.summary.embedded).toMatchObject({ computed: a.summary.embedded.computed, cached: 0 });
    // Within a tenant the cache works as before.
    expect((await acme.post("/kbs", { name: "cached2" })).status).toBe(201);
    const again = await acme.upload("cached2", [note]);
    const c = await waitForJob(s.base, acmeKey, again.body.id);
    expect(c.summary.embedded).toMatchObject({ computed: 0, cached: a.summary.embedded.computed });
  }, 60_000);

  it("speaks of KBs by the tenant's names only", async () => {
    const r = await globex.post("/kbs", { name: "x", retrieval: { minScore: -1 } });
    expect(r.status).toBe(400);
    expect(r.body.error).toBe('knowledge base "x": retrieval.minScore must be >= 0 (got -1)');
    const long = await globex.post("/kbs", { name: "a".repeat(60) });
    expect(long.status).toBe(400);
    expect(long.body.error).toContain("use 1-57 letters");
  });
});

describe("HTTP API with --allow-tenant-services", () => {
  let s: TestServer;
  let api: ReturnType<typeof client>;

  beforeAll(async () => {
    s = await startServer({ allowTenantServices: true });
    api = client(s.base, s.key("acme"));
  });
  afterAll(async () => s.close());

  it("accepts remote services but never shows their secrets, nor a collection of another KB", async () => {
    const created = await api.post("/kbs", {
      name: "remote",
      embedding: { provider: "openai", apiKey: "sk-embedding-secret" },
      vectorStore: { type: "qdrant", url: "http://user:store-secret@127.0.0.1:9", apiKey: "qdrant-secret" },
      retrieval: {
        reranker: { type: "cohere", model: "rerank-v3.5", apiKey: "cohere-secret" },
        expansionLlm: { baseUrl: "http://127.0.0.1:9/v1", model: "m", apiKey: "llm-secret" },
      },
    });
    expect(created.status, created.text).toBe(201);
    const shown = (await api.get("/kbs/remote")).text;
    for (const secret of [
      "sk-embedding-secret",
      "store-secret",
      "qdrant-secret",
      "cohere-secret",
      "llm-secret",
    ])
      expect(shown).not.toContain(secret);
    expect(JSON.parse(shown).config.retrieval.reranker.apiKey).toBe("***");
    const stolen = await api.post("/kbs", {
      name: "x",
      vectorStore: { type: "sqlite", collection: "kb_other.docs" },
    });
    expect(stolen.status).toBe(400);
    expect(stolen.body.field).toBe("vectorStore.collection");
  });
});
