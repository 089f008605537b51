import { readdirSync, readFileSync } from "node:fs";
import { basename, join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AgentStore } from "../../src/store/agents.js";
import { docsPath } from "../helpers/helpers.js";
import {
  type Answer,
  client,
  followJob,
  startServer,
  type TestServer,
  waitForJob,
} from "../helpers/server-helpers.js";

const rust = (f: string): string => docsPath("markdown", "rust_book_src", f);

/** 1,370 characters extracted: inline under the default limit. */
const SHORT = rust("ch09-00-error-handling.md");
/** 2,994 characters extracted: inline up to a limit of 2,994, indexed below. */
const BOUNDARY = rust("ch16-00-concurrency.md");
/** 3,762 characters extracted: over the default limit of 3,000. */
const LONG = rust("ch07-01-packages-and-crates.md");

/** Posts one or more files (and form fields) as multipart to an agent's attachments. */
async function attach(
  base: string,
  key: string,
  agentId: string,
  files: (string | { name: string; content: string })[],
  fields: Record<string, string> = {},
  query = "",
): Promise<Answer> {
  const form = new FormData();
  for (const [k, v] of Object.entries(fields)) form.append(k, v);
  for (const f of files) {
    if (typeof f === "string") form.append("file", new Blob([readFileSync(f)]), basename(f));
    else form.append("file", new Blob([f.content]), f.name);
  }
  const res = await fetch(`${base}/agents/${agentId}/attachments${query}`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}` },
    body: form,
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers, text };
}

describe("HTTP API: agent attachments, conversation memory and context", () => {
  let s: TestServer;
  let acmeKey: string;
  let globexKey: string;
  let acme: ReturnType<typeof client>;
  let globex: ReturnType<typeof client>;
  let agentId: string;
  let bareAgentId: string;
  let globexAgentId: string;

  const documents = async (kb: string): Promise<number> =>
    (await acme.get(`/kbs/${kb}`)).body.counts.documents as number;

  beforeAll(async () => {
    s = await startServer({ maxFileBytes: 16 * 1024 });
    acmeKey = s.key("acme");
    globexKey = s.key("globex");
    acme = client(s.base, acmeKey);
    globex = client(s.base, globexKey);
    expect((await acme.post("/kbs", { name: "notes" })).status).toBe(201);
    expect((await acme.post("/kbs", { name: "extra" })).status).toBe(201);
    const agent = await acme.post("/agents", { name: "helper", kbs: [{ kb: "notes" }] });
    expect(agent.status).toBe(201);
    agentId = agent.body.id;
    bareAgentId = (await acme.post("/agents", { name: "bare" })).body.id;
    globexAgentId = (await globex.post("/agents", { name: "helper" })).body.id;
  });
  afterAll(async () => s.close());

  it("documents the new routes in /openapi.json", async () => {
    const spec = (await client(s.base).get("/openapi.json")).body;
    for (const path of [
      "/agents/{id}/attachments",
      "/agents/{id}/turns",
      "/agents/{id}/sessions/{sessionId}",
      "/agents/{id}/context",
    ])
      expect(Object.keys(spec.paths)).toContain(path);
    expect(Object.keys(spec.paths["/agents/{id}/attachments"].post.requestBody.content)).toEqual([
      "multipart/form-data",
    ]);
    expect(
      spec.paths["/agents/{id}/context"].post.requestBody.content["application/json"].schema.required,
    ).toEqual(["query", "sessionId", "threadId"]);
    expect(
      spec.paths["/agents/{id}/turns"].post.requestBody.content["application/json"].schema.required,
    ).toEqual(["sessionId", "threadId", "user", "assistant"]);
  });

  it("gives agents an inline limit (default 3,000 characters), validated", async () => {
    expect((await acme.get(`/agents/${agentId}`)).body.inlineLimit).toBe(3000);
    const negative = await acme.post("/agents", { name: "x", inlineLimit: -1 });
    expect(negative.status).toBe(400);
    expect(negative.body.field).toBe("inlineLimit");
    const fraction = await acme.patch(`/agents/${agentId}`, { inlineLimit: 2.5 });
    expect(fraction.status).toBe(400);
    expect(fraction.body).toEqual({ error: '"inlineLimit" must be integer', field: "inlineLimit" });
    const huge = await acme.patch(`/agents/${agentId}`, { inlineLimit: 10_000_000 });
    expect(huge.status).toBe(400);
    expect(huge.body.field).toBe("inlineLimit");
    const created = await acme.post("/agents", { name: "tiny", inlineLimit: 0 });
    expect(created.body.inlineLimit).toBe(0);
    expect((await acme.delete(`/agents/${created.body.id}`)).status).toBe(204);
  });

  it("answers a short attachment inline and indexes nothing", async () => {
    const r = await attach(s.base, acmeKey, agentId, [SHORT]);
    expect(r.status, r.text).toBe(200);
    expect(r.body).toMatchObject({
      route: "inline",
      name: "ch09-00-error-handling.md",
      chars: 1370,
      limit: 3000,
    });
    expect(r.body.text).toHaveLength(1370);
    expect(r.body.text).toContain("Rust groups errors into two major categories");
    // Exactly at the limit is still inline.
    expect((await acme.patch(`/agents/${agentId}`, { inlineLimit: 2994 })).status).toBe(200);
    const edge = await attach(s.base, acmeKey, agentId, [BOUNDARY]);
    expect(edge.status, edge.text).toBe(200);
    expect(edge.body).toMatchObject({ route: "inline", chars: 2994, limit: 2994 });
    expect(await documents("notes")).toBe(0);
    expect((await acme.get("/jobs")).body.jobs).toEqual([]);
    expect(readdirSync(join(s.kl.dataDir, "uploads", "acme"))).toEqual([]);
  });

  it("indexes a long attachment into the agent's first KB in a background job, then finds it", async () => {
    const r = await attach(s.base, acmeKey, agentId, [LONG]);
    expect(r.status, r.text).toBe(202);
    expect(r.body).toMatchObject({
      route: "retrieve",
      name: "ch07-01-packages-and-crates.md",
      kb: "notes",
      chars: 3762,
      limit: 2994,
    });
    expect(r.headers.get("location")).toBe(`/jobs/${r.body.job.id}`);
    expect(r.body.job).toMatchObject({ kb: "notes", total: 1 });
    const events = await followJob(s.base, acmeKey, r.body.job.id);
    const done = events.at(-1);
    expect(done?.event).toBe("done");
    expect(done?.data.status).toBe("succeeded");
    expect(done?.data.summary).toMatchObject({ files: 1, added: 1, documents: 1, errors: [] });
    expect(events.some((e) => e.event === "progress")).toBe(true);
    expect(await documents("notes")).toBe(1);
    const found = await acme.post(`/agents/${agentId}/retrieve`, {
      query: "What is the difference between a package and a crate?",
    });
    expect(found.body.results[0].source.path).toBe("ch07-01-packages-and-crates.md");
    expect(found.body.results[0].kb).toBe("notes");
  });

  it("indexes into the KB named by `kb` (form field or query), which must be attached", async () => {
    expect((await acme.patch(`/agents/${agentId}`, { inlineLimit: 2993 })).status).toBe(200);
    const unattached = await attach(s.base, acmeKey, agentId, [BOUNDARY], { kb: "extra" });
    expect(unattached.status).toBe(400);
    expect(unattached.body).toEqual({
      error: `knowledge base "extra" is not attached to agent "${agentId}"`,
      field: "kb",
    });
    const unknown = await attach(s.base, acmeKey, agentId, [BOUNDARY], {}, "?kb=nope");
    expect(unknown.status).toBe(400);
    expect(unknown.body).toEqual({ error: 'unknown knowledge base "nope"', field: "kb" });
    expect((await acme.put(`/agents/${agentId}/kbs/extra`, {})).status).toBe(200);
    const conflict = await attach(s.base, acmeKey, agentId, [BOUNDARY], { kb: "extra" }, "?kb=notes");
    expect(conflict.status).toBe(400);
    expect(conflict.body.field).toBe("kb");
    const r = await attach(s.base, acmeKey, agentId, [BOUNDARY], {}, "?kb=extra");
    expect(r.status, r.text).toBe(202);
    expect(r.body).toMatchObject({ route: "retrieve", kb: "extra", chars: 2994, limit: 2993 });
    expect((await waitForJob(s.base, acmeKey, r.body.job.id)).status).toBe("succeeded");
    expect(await documents("extra")).toBe(1);
    expect(await documents("notes")).toBe(1);
    expect((await acme.delete(`/agents/${agentId}/kbs/extra`)).status).toBe(200);
  });

  it("refuses bad attachments", async () => {
    const none = await attach(s.base, acmeKey, bareAgentId, [LONG]);
    expect(none.status).toBe(400);
    expect(none.body.field).toBe("kb");
    expect(none.body.error).toContain("no knowledge base attached");
    const two = await attach(s.base, acmeKey, agentId, [SHORT, BOUNDARY]);
    expect(two.status).toBe(400);
    expect(two.body.error).toContain("exactly one file");
    const big = await attach(s.base, acmeKey, agentId, [{ name: "big.md", content: "word ".repeat(4000) }]);
    expect(big.status).toBe(413);
    expect(big.body.error).toBe('file "big.md" is larger than the upload limit of 16 KiB');
    const empty = await attach(s.base, acmeKey, agentId, [{ name: "blank.md", content: "   \n\n  " }]);
    expect(empty.status).toBe(400);
    expect(empty.body.field).toBe("file");
    const binary = await attach(s.base, acmeKey, agentId, [{ name: "photo.png", content: "\x89PNG\r\n" }]);
    expect(binary.status).toBe(400);
    expect(binary.body.field).toBe("file");
    const field = await attach(s.base, acmeKey, agentId, [SHORT], { note: "x" });
    expect(field.status).toBe(400);
    expect(field.body.field).toBe("note");
    const noFile = await attach(s.base, acmeKey, agentId, [], { kb: "notes" });
    expect(noFile.status).toBe(400);
    expect(noFile.body.field).toBe("file");
    const json = await acme.post(`/agents/${agentId}/attachments`, { file: "x" });
    expect(json.status).toBe(415);
    const query = await attach(s.base, acmeKey, agentId, [SHORT], {}, "?embed=false");
    expect(query.status).toBe(400);
    expect(query.body.field).toBe("embed");
    const other = await attach(s.base, globexKey, agentId, [SHORT]);
    expect(other.status).toBe(404);
    // Nothing was queued by the refused ones and no upload folder is left behind.
    expect((await acme.get("/jobs")).body.jobs).toHaveLength(2);
    expect(readdirSync(join(s.kl.dataDir, "uploads", "acme"))).toEqual([]);
  });

  it("remembers turns and recalls them in the session's other threads only, per tenant", async () => {
    const turns = [
      {
        sessionId: "s1",
        threadId: "pets",
        user: "My dog Biscuit is a golden retriever who loves swimming in the lake.",
        assistant: "Golden retrievers are natural swimmers; rinse Biscuit's coat after lake swims.",
      },
      {
        sessionId: "s1",
        threadId: "travel",
        user: "I am flying to Lisbon in May and want to see the old town.",
        assistant: "Alfama is Lisbon's oldest district; take tram 28 through it.",
      },
    ];
    for (const turn of turns) {
      const r = await acme.post(`/agents/${agentId}/turns`, turn);
      expect(r.status, r.text).toBe(201);
      expect(r.body).toMatchObject({ sessionId: "s1", threadId: turn.threadId });
      expect(r.body.text).toBe(`User: ${turn.user}\nAssistant: ${turn.assistant}`);
    }
    // Another tenant, same session id.
    const rex = await globex.post(`/agents/${globexAgentId}/turns`, {
      sessionId: "s1",
      threadId: "pets",
      user: "My dog Rex is a terrier who loves chasing balls in the park.",
      assistant: "Terriers have lots of energy; Rex will enjoy fetch every day.",
      at: "2024-05-01T10:00:00Z",
    });
    expect(rex.status, rex.text).toBe(201);
    expect(rex.body.at).toBe("2024-05-01T10:00:00.000Z");
    // Stored under namespaced session ids.
    const stored = s.kl.db.prepare("SELECT DISTINCT session_id FROM agent_memories ORDER BY 1").pluck().all();
    expect(stored).toEqual([`acme:${agentId}:s1`, `globex:${globexAgentId}:s1`]);

    const ask = async (api: ReturnType<typeof client>, id: string, threadId: string, query: string) => {
      const r = await api.post(`/agents/${id}/context`, { query, sessionId: "s1", threadId, chunkTopK: 0 });
      expect(r.status, r.text).toBe(200);
      return r.body as { memories: { threadId: string; user: string; sessionId: string }[] };
    };
    const elsewhere = await ask(acme, agentId, "new", "What does my dog like to do?");
    expect(elsewhere.memories[0]?.threadId).toBe("pets");
    expect(elsewhere.memories[0]?.user).toContain("Biscuit");
    expect(elsewhere.memories.every((m) => m.sessionId === "s1")).toBe(true);
    expect(JSON.stringify(elsewhere)).not.toContain("Rex");
    // Never the current thread's own turns.
    const own = await ask(acme, agentId, "pets", "What does my dog like to do?");
    expect(own.memories.map((m) => m.threadId)).not.toContain("pets");
    // The other tenant sees its own only.
    const theirs = await ask(globex, globexAgentId, "new", "What does my dog like to do?");
    expect(theirs.memories.map((m) => m.user)).toEqual([
      "My dog Rex is a terrier who loves chasing balls in the park.",
    ]);
    expect(JSON.stringify(theirs)).not.toContain("Biscuit");
    // Another agent of the same tenant does not share the session either.
    const bare = await ask(acme, bareAgentId, "new", "What does my dog like to do?");
    expect(bare.memories).toEqual([]);
  });

  it("assembles the context in order with labelled chunks and memories", async () => {
    const r = await acme.post(`/agents/${agentId}/context`, {
      query: "How do packages and crates relate in Rust?",
      sessionId: "s1",
      threadId: "rust",
      system: ["You are a helpful assistant."],
      summaries: ["Earlier the user asked about Cargo."],
      anchor: "Task: explain Rust's module system.",
      recent: [
        { role: "user", content: "Hi!", id: "m1" },
        { role: "assistant", content: "Hello, how can I help?", id: "m2" },
        { role: "user", content: "How do packages and crates relate in Rust?", id: "m3" },
      ],
    });
    expect(r.status, r.text).toBe(200);
    const body = r.body;
    expect(body.parts.map((p: { kind: string }) => p.kind)).toEqual([
      "system",
      "summary",
      "anchor",
      "chunks",
      "memories",
      "recent",
      "recent",
      "recent",
    ]);
    expect(body.messages[0]).toEqual({ role: "system", content: "You are a helpful assistant." });
    expect(body.messages.at(-1)).toEqual({
      role: "user",
      content: "How do packages and crates relate in Rust?",
    });
    expect(body.chunks.length).toBeGreaterThan(0);
    expect(body.chunks.length).toBeLessThanOrEqual(4);
    expect(body.chunks[0]).toMatchObject({ kb: "notes", source: { path: "ch07-01-packages-and-crates.md" } });
    expect(body.chunks[0].citation).toContain("ch07-01-packages-and-crates.md");
    const chunkText: string = body.messages[3].content;
    expect(chunkText.startsWith(`[file chunk 1] ${body.chunks[0].citation}\n`)).toBe(true);
    if (body.chunks.length > 1) expect(chunkText).toContain("[file chunk 2]");
    expect(body.messages[4].content).toMatch(/^\[memory 1\] \(/);
    expect(body.memories.length).toBeGreaterThan(0);
    expect(body.memories.length).toBeLessThanOrEqual(3);
    expect(body.dropped).toEqual([]);
    expect(body.totalChars).toBe(
      body.messages.reduce((n: number, m: { content: string }) => n + m.content.length, 0),
    );
    expect(body.budget).toBe(18000);
    expect(JSON.stringify(body)).not.toContain("acme");
  });

  it("respects the attachment's retrieval settings", async () => {
    expect(
      (await acme.put(`/agents/${agentId}/kbs/notes`, { retrievalConfig: { maxResults: 1 } })).status,
    ).toBe(200);
    const r = await acme.post(`/agents/${agentId}/context`, {
      query: "packages crates binary library",
      sessionId: "s1",
      threadId: "rust",
      memoryTopK: 0,
    });
    expect(r.status, r.text).toBe(200);
    expect(r.body.chunks).toHaveLength(1);
    expect(r.body.memories).toEqual([]);
    expect((await acme.put(`/agents/${agentId}/kbs/notes`, {})).status).toBe(200);
    const bare = await acme.post(`/agents/${bareAgentId}/context`, {
      query: "packages",
      sessionId: "s1",
      threadId: "t",
    });
    expect(bare.body.chunks).toEqual([]);
    expect(bare.body.warnings[0]).toContain("no knowledge bases attached");
  });

  it("keeps within the budget, replacing long messages and dropping the oldest", async () => {
    const long = "Tell me everything about crates. ".repeat(40);
    const recent = [
      { role: "user", content: "An old question about Cargo workspaces?", id: "old-1" },
      { role: "assistant", content: "An old answer about workspaces and members.", id: "old-2" },
      { role: "user", content: long, id: "long" },
      { role: "assistant", content: "Sure, here is an overview.", id: "a2" },
      { role: "user", content: "And what is a binary crate?", id: "last" },
    ];
    const budget = 700;
    const r = await acme.post(`/agents/${agentId}/context`, {
      query: "What is a binary crate?",
      sessionId: "s1",
      threadId: "rust",
      system: ["Be brief."],
      recent,
      budget,
      messageLimit: 500,
    });
    expect(r.status, r.text).toBe(200);
    expect(r.body.totalChars).toBeLessThanOrEqual(budget);
    expect(r.body.budget).toBe(budget);
    const dropped = r.body.dropped as { kind: string; reason: string; id?: string }[];
    expect(dropped[0]).toMatchObject({ kind: "recent", reason: "placeholder", id: "long" });
    expect(dropped.some((d) => d.reason === "budget")).toBe(true);
    expect(dropped.filter((d) => d.reason === "budget" && d.kind === "recent")[0]?.id).toBe("old-1");
    expect(r.body.messages[0]).toEqual({ role: "system", content: "Be brief." });
    expect(r.body.messages.at(-1)).toEqual({ role: "user", content: "And what is a binary crate?" });
    const tooSmall = await acme.post(`/agents/${agentId}/context`, {
      query: "What is a binary crate?",
      sessionId: "s1",
      threadId: "rust",
      system: ["x".repeat(200)],
      budget: 100,
    });
    expect(tooSmall.status).toBe(400);
    expect(tooSmall.body.field).toBe("budget");
    expect(tooSmall.body.error).toContain("context does not fit");
  });

  it("validates turns and context requests naming the field", async () => {
    const missing = await acme.post(`/agents/${agentId}/context`, { query: "x", threadId: "t" });
    expect(missing.status).toBe(400);
    expect(missing.body).toEqual({ error: '"sessionId" is required', field: "sessionId" });
    const turn = await acme.post(`/agents/${agentId}/turns`, { sessionId: "s", user: "a", assistant: "b" });
    expect(turn.status).toBe(400);
    expect(turn.body).toEqual({ error: '"threadId" is required', field: "threadId" });
    const emptyId = await acme.post(`/agents/${agentId}/turns`, {
      sessionId: "",
      threadId: "t",
      user: "a",
      assistant: "b",
    });
    expect(emptyId.status).toBe(400);
    expect(emptyId.body.field).toBe("sessionId");
    const emptyTurn = await acme.post(`/agents/${agentId}/turns`, {
      sessionId: "s",
      threadId: "t",
      user: " ",
      assistant: "",
    });
    expect(emptyTurn.status).toBe(400);
    expect(emptyTurn.body.error).toContain("the turn is empty");
    const badAt = await acme.post(`/agents/${agentId}/turns`, {
      sessionId: "s",
      threadId: "t",
      user: "a",
      assistant: "b",
      at: "yesterday",
    });
    expect(badAt.status).toBe(400);
    expect(badAt.body.field).toBe("at");
    const role = await acme.post(`/agents/${agentId}/context`, {
      query: "x",
      sessionId: "s",
      threadId: "t",
      recent: [{ role: "tool", content: "x" }],
    });
    expect(role.status).toBe(400);
    expect(role.body.field).toBe("recent.0.role");
    const budget = await acme.post(`/agents/${agentId}/context`, {
      query: "x",
      sessionId: "s",
      threadId: "t",
      budget: 0,
    });
    expect(budget.status).toBe(400);
    expect(budget.body.field).toBe("budget");
    const unknown = await acme.post(`/agents/${agentId}/context`, {
      query: "x",
      sessionId: "s",
      threadId: "t",
      topK: 3,
    });
    expect(unknown.status).toBe(400);
    expect(unknown.body.field).toBe("topK");
    for (const r of [
      await globex.post(`/agents/${agentId}/turns`, {
        sessionId: "s1",
        threadId: "t",
        user: "a",
        assistant: "b",
      }),
      await globex.post(`/agents/${agentId}/context`, { query: "dog", sessionId: "s1", threadId: "t" }),
      await globex.delete(`/agents/${agentId}/sessions/s1`),
    ]) {
      expect(r.status, r.text).toBe(404);
      expect(r.text).not.toContain("acme");
    }
  });

  it("forgets a thread, a session, and an agent's memories with the agent", async () => {
    const thread = await acme.delete(`/agents/${agentId}/sessions/s1?threadId=travel`);
    expect(thread.status).toBe(200);
    expect(thread.body).toEqual({ sessionId: "s1", threadId: "travel", deleted: 1 });
    const r = await acme.post(`/agents/${agentId}/context`, {
      query: "Lisbon trip",
      sessionId: "s1",
      threadId: "new",
      chunkTopK: 0,
    });
    expect(r.body.memories.map((m: { threadId: string }) => m.threadId)).toEqual(["pets"]);
    const session = await acme.delete(`/agents/${agentId}/sessions/s1`);
    expect(session.body).toEqual({ sessionId: "s1", deleted: 1 });
    expect((await acme.delete(`/agents/${agentId}/sessions/s1`)).body.deleted).toBe(0);
    // The other tenant's session of the same id is untouched until its agent goes.
    const count = (): number =>
      (s.kl.db.prepare("SELECT count(*) AS n FROM agent_memories").get() as { n: number }).n;
    expect(count()).toBe(1);
    expect((await globex.delete(`/agents/${globexAgentId}`)).status).toBe(204);
    expect(count()).toBe(0);
  });
});

describe("AgentStore on a database from before inline limits", () => {
  it("adds the inline_limit column with the default", () => {
    const db = new Database(":memory:");
    db.exec(`
CREATE TABLE server_agents (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, name TEXT NOT NULL, description TEXT,
  top_k INTEGER NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL, UNIQUE (tenant, name));
INSERT INTO server_agents VALUES ('agt_old', 'acme', 'old', NULL, 5, '2024-01-01', '2024-01-01');`);
    const store = new AgentStore(db);
    expect(store.get("acme", "agt_old")).toMatchObject({ name: "old", topK: 5, inlineLimit: 3000 });
    expect(store.update("acme", "agt_old", { inlineLimit: 10 }).inlineLimit).toBe(10);
    new AgentStore(db);
    expect(store.get("acme", "agt_old")?.inlineLimit).toBe(10);
    db.close();
  });
});
