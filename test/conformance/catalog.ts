import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { defaultKbConfig } from "../../src/config.js";
import { ConfigError, ConflictError, NotFoundError } from "../../src/errors.js";
import { parseFilter } from "../../src/retrieve/filter.js";
import type { CatalogBackend } from "../../src/store/catalog-contract.js";
import type { Chunk, DocumentMetadata } from "../../src/types.js";

/** A factory that returns a fresh, empty catalog backend and a cleanup function. */
export type CatalogFactory = () => Promise<{ backend: CatalogBackend; cleanup: () => Promise<void> | void }>;

const BM25 = { k1: 1.2, b: 0.75 };

/**
 * The catalog contract (`src/store/catalog-contract.ts`), run against every
 * implementation (the embedded SQLite database today): knowledge bases, documents,
 * chunks, the keyword index, the embedding cache, API keys, agents, memories and ingest
 * jobs, as the
 * facade and its adapters use them. Only the asynchronous contract is used.
 */
export function catalogConformance(name: string, factory: CatalogFactory): void {
  describe(`catalog contract: ${name}`, () => {
    let c: CatalogBackend;
    let cleanup: () => Promise<void> | void;
    beforeEach(async () => {
      ({ backend: c, cleanup } = await factory());
      await c.kbs.insert(defaultKbConfig("a"));
      await c.kbs.insert(defaultKbConfig("b"));
    });
    afterEach(async () => {
      await cleanup();
    });

    /** Stores a document with one chunk per text (indexed for BM25); returns its id and chunk ids. */
    const addDoc = async (
      kb: string,
      uri: string,
      texts: string[],
      metadata: Partial<DocumentMetadata> = {},
      path = uri,
    ): Promise<{ id: number; chunks: number[] }> => {
      const full: DocumentMetadata = { path, type: "text", ...metadata };
      const id = await c.documents.insert({
        kb,
        uri,
        path,
        type: full.type,
        title: full.title,
        contentHash: `h-${uri}`,
        pipelineHash: "p1",
        embedded: false,
        metadata: full,
        text: texts.join("\n\n"),
        chunkCount: texts.length,
      });
      const chunks: number[] = [];
      let start = 0;
      for (const [i, text] of texts.entries()) {
        const chunk: Chunk = {
          text,
          start,
          end: start + text.length,
          chunkIndex: i,
          totalChunks: texts.length,
          chunkType: "text",
          metadata: { n: i },
        };
        start += text.length + 2;
        const chunkId = await c.chunks.insert(kb, id, chunk, text.split(/\s+/).length);
        await c.keywords.indexChunk(kb, chunkId, text);
        chunks.push(chunkId);
      }
      return { id, chunks };
    };

    it("answers a ping", async () => {
      await expect(c.ping()).resolves.toBeUndefined();
    });

    it("stores, lists, updates and deletes knowledge bases", async () => {
      expect((await c.kbs.get("a"))?.config.name).toBe("a");
      expect(await c.kbs.get("missing")).toBeUndefined();
      expect((await c.kbs.list()).map((k) => k.name)).toEqual(["a", "b"]);
      await expect(c.kbs.insert({ ...defaultKbConfig("bad name!") })).rejects.toThrow(ConfigError);
      const config = defaultKbConfig("a");
      await c.kbs.updateConfig({ ...config, retrieval: { ...config.retrieval, topK: 7 } });
      expect((await c.kbs.get("a"))?.config.retrieval.topK).toBe(7);
      await addDoc("a", "x.txt", ["alpha beta"]);
      await c.kbs.delete("a");
      expect(await c.kbs.get("a")).toBeUndefined();
      expect(await c.documents.count("a")).toBe(0);
      expect((await c.kbs.counts("a")).documents).toBe(0);
    });

    it("counts documents and chunks and versions a KB's data", async () => {
      expect(await c.kbs.counts("a")).toEqual({
        documents: 0,
        chunks: 0,
        embeddedDocuments: 0,
        documentsByType: {},
      });
      const v0 = await c.kbs.dataVersion("a");
      const { id } = await addDoc("a", "x.txt", ["one", "two"]);
      await addDoc("a", "y.md", ["three"], { type: "markdown" });
      const v1 = await c.kbs.dataVersion("a");
      expect(v1).not.toBe(v0);
      expect(await c.kbs.counts("a")).toEqual({
        documents: 2,
        chunks: 3,
        embeddedDocuments: 0,
        documentsByType: { markdown: 1, text: 1 },
      });
      await c.documents.markEmbedded(id);
      expect((await c.kbs.counts("a")).embeddedDocuments).toBe(1);
      expect(await c.kbs.dataVersion("a")).not.toBe(v1);
      expect((await c.kbs.counts("b")).documents).toBe(0);
    });

    it("finds documents by id, URI, path and source, with metadata and text", async () => {
      const long = "A long paragraph about compression. ".repeat(40);
      const msg = await addDoc("a", "box.mbox", [long], { title: "Box", customer: "acme" });
      const child = await addDoc("a", "box.mbox#1", ["first message"], {}, "box.mbox");
      await addDoc("a", "box.mbox2", ["not a child"]);
      await addDoc("b", "box.mbox", ["other KB"]);
      const doc = await c.documents.byId(msg.id);
      expect(doc).toMatchObject({ id: msg.id, kb: "a", uri: "box.mbox", title: "Box", chunkCount: 1 });
      expect(doc?.metadata).toMatchObject({ customer: "acme", type: "text" });
      expect(await c.documents.byId(999_999)).toBeUndefined();
      expect((await c.documents.byUri("a", "box.mbox#1"))?.id).toBe(child.id);
      expect(await c.documents.byUri("a", "nope")).toBeUndefined();
      expect((await c.documents.atPath("a", "box.mbox")).map((d) => d.id).sort()).toEqual(
        [msg.id, child.id].sort(),
      );
      expect((await c.documents.ofSource("a", "box.mbox")).map((d) => d.uri)).toEqual([
        "box.mbox",
        "box.mbox#1",
      ]);
      expect(await c.documents.text(msg.id)).toBe(long);
      expect(await c.documents.text(child.id)).toBe("first message");
      expect(await c.documents.text(999_999)).toBe("");
      expect(await c.documents.idsIn("a", [child.id, 999_999, msg.id])).toEqual([child.id, msg.id]);
    });

    it("lists documents by id with paging, counts, and filters on metadata", async () => {
      const ids: number[] = [];
      for (let i = 0; i < 5; i++)
        ids.push((await addDoc("a", `d${i}.txt`, [`doc ${i}`], { customer: i % 2 ? "acme" : "globex" })).id);
      await addDoc("b", "elsewhere.txt", ["b"]);
      expect((await c.documents.list("a")).map((d) => d.id)).toEqual(ids);
      expect((await c.documents.list(undefined)).length).toBe(6);
      expect((await c.documents.list("a", { limit: 2, offset: 1 })).map((d) => d.id)).toEqual(
        ids.slice(1, 3),
      );
      expect((await c.documents.list("a", { afterId: ids[2], limit: 10 })).map((d) => d.id)).toEqual(
        ids.slice(3),
      );
      const detailed = await c.documents.list("a", { limit: 2, metadata: true });
      expect(detailed.map((d) => [d.id, d.metadata.customer])).toEqual([
        [ids[0], "globex"],
        [ids[1], "acme"],
      ]);
      expect((await c.documents.list("a", { limit: 1 }))[0]).not.toHaveProperty("metadata");
      expect(await c.documents.count("a")).toBe(5);
      expect(await c.documents.count(undefined)).toBe(6);
      const acme = parseFilter({ customer: "acme" });
      expect((await c.documents.list("a", { filter: acme })).map((d) => d.uri)).toEqual(["d1.txt", "d3.txt"]);
      expect(await c.documents.count("a", acme)).toBe(2);
      expect(await c.documents.count("b", acme)).toBe(0);
    });

    it("stores chunks with attribution and restricts them by filter and KB", async () => {
      const x = await addDoc("a", "x.md", ["first part", "second part"], { type: "markdown", title: "X" });
      const y = await addDoc("b", "y.txt", ["other"]);
      expect(await c.chunks.idsOf(x.id)).toEqual(x.chunks);
      const loaded = await c.chunks.load([...x.chunks, 999_999]);
      expect([...loaded.keys()]).toEqual(x.chunks);
      expect(loaded.get(x.chunks[1] as number)).toMatchObject({
        kb: "a",
        documentId: x.id,
        chunkIndex: 1,
        totalChunks: 2,
        text: "second part",
        metadata: { n: 1 },
        document: { uri: "x.md", type: "markdown", title: "X" },
      });
      expect(await c.chunks.known("a", [...x.chunks, ...y.chunks])).toEqual(new Set(x.chunks));
      const md = await c.chunks.filter("a", parseFilter({ type: "markdown" }));
      expect(md.ids).toEqual(x.chunks);
      expect((await c.chunks.filter("a", parseFilter({ type: "pdf" }))).ids).toEqual([]);
    });

    it("deletes a document with its chunks once its postings are removed", async () => {
      const x = await addDoc("a", "x.txt", ["zebra crossing"]);
      const y = await addDoc("a", "y.txt", ["zebra stripes"]);
      expect((await c.keywords.search("a", "zebra", 10, BM25)).map((h) => h.chunkId).sort()).toEqual(
        [...x.chunks, ...y.chunks].sort(),
      );
      await c.keywords.removeDocument(x.id);
      await c.documents.delete(x.id);
      expect(await c.documents.byId(x.id)).toBeUndefined();
      expect((await c.chunks.load(x.chunks)).size).toBe(0);
      expect((await c.keywords.search("a", "zebra", 10, BM25)).map((h) => h.chunkId)).toEqual(y.chunks);
      expect((await c.kbs.counts("a")).chunks).toBe(1);
    });

    it("ranks keyword hits by BM25 within one KB, before and after a flush, and within allowed chunks", async () => {
      const a = await addDoc("a", "a.txt", ["the quick brown fox jumps"]);
      const b = await addDoc("a", "b.txt", ["fox fox fox den"]);
      await addDoc("b", "c.txt", ["fox in another kb"]);
      const before = await c.keywords.search("a", "fox", 10, BM25);
      expect(before.map((h) => h.chunkId)).toEqual([...b.chunks, ...a.chunks]);
      expect(before[0]?.score).toBeGreaterThan(before[1]?.score ?? Number.POSITIVE_INFINITY);
      await c.keywords.flush("a");
      expect(await c.keywords.search("a", "fox", 10, BM25)).toEqual(before);
      expect(
        (await c.keywords.search("a", "fox", 10, BM25, new Set(a.chunks))).map((h) => h.chunkId),
      ).toEqual(a.chunks);
      expect(await c.keywords.search("a", "absent", 10, BM25)).toEqual([]);
    });

    it("caches embeddings by provider, model and text hash", async () => {
      const v = Float32Array.from([0.5, -0.25, 1]);
      expect(await c.embeddings.get("p", "m", "h1")).toBeUndefined();
      await c.embeddings.put("p", "m", "h1", v);
      expect(await c.embeddings.get("p", "m", "h1")).toEqual(v);
      expect(await c.embeddings.get("p", "other", "h1")).toBeUndefined();
      await c.embeddings.put("p", "m", "h1", Float32Array.from([1, 2, 3]));
      expect(await c.embeddings.get("p", "m", "h1")).toEqual(Float32Array.from([1, 2, 3]));
    });

    it("keeps API keys of tenants by their hash only", async () => {
      const k1 = await c.apiKeys.create("acme", "ci");
      const k2 = await c.apiKeys.create("globex");
      expect(k1.key).toMatch(/^kl_[A-Za-z0-9_-]{43}$/);
      expect(await c.apiKeys.tenantOf(k1.key)).toBe("acme");
      expect(await c.apiKeys.tenantOf(k2.key)).toBe("globex");
      expect(await c.apiKeys.tenantOf("kl_unknown")).toBeUndefined();
      const listed = await c.apiKeys.list();
      expect(listed.map((k) => k.id).sort()).toEqual([k1.id, k2.id].sort());
      expect(JSON.stringify(listed)).not.toContain(k1.key);
      expect(await c.apiKeys.list("acme")).toEqual([
        { id: k1.id, tenant: "acme", label: "ci", createdAt: k1.createdAt },
      ]);
      expect(await c.apiKeys.revoke(k1.id)).toBe(true);
      expect(await c.apiKeys.revoke(k1.id)).toBe(false);
      expect(await c.apiKeys.tenantOf(k1.key)).toBeUndefined();
      await expect(c.apiKeys.create("bad.tenant")).rejects.toThrow(/invalid tenant "bad.tenant"/);
    });

    it("keeps agents within their tenant, with attachments", async () => {
      const agent = await c.agents.create("acme", {
        name: "helper",
        description: "d",
        kbs: [{ kb: "a", retrievalConfig: { maxResults: 3, filter: { type: "email" } } }],
      });
      expect(agent).toMatchObject({
        tenant: "acme",
        name: "helper",
        description: "d",
        topK: 5,
        inlineLimit: 3000,
      });
      expect(agent.kbs).toMatchObject([
        { kb: "a", retrievalConfig: { maxResults: 3, filter: { type: "email" } } },
      ]);
      expect(await c.agents.get("acme", agent.id)).toEqual(agent);
      expect(await c.agents.get("globex", agent.id)).toBeUndefined();
      await expect(c.agents.create("acme", { name: "helper" })).rejects.toThrow(ConflictError);
      await expect(c.agents.create("acme", { name: "helper" })).rejects.toMatchObject({ field: "name" });
      const other = await c.agents.create("globex", { name: "helper", topK: 2 });
      expect((await c.agents.list("acme")).map((a) => a.id)).toEqual([agent.id]);
      const second = await c.agents.create("acme", { name: "analyst" });
      expect((await c.agents.list("acme")).map((a) => a.name)).toEqual(["analyst", "helper"]);
      await expect(c.agents.update("acme", second.id, { name: "helper" })).rejects.toThrow(ConflictError);
      const updated = await c.agents.update("acme", agent.id, { description: null, topK: 9, inlineLimit: 0 });
      expect(updated).toMatchObject({ name: "helper", description: null, topK: 9, inlineLimit: 0 });
      await expect(c.agents.update("globex", agent.id, { topK: 1 })).rejects.toThrow(NotFoundError);
      const attached = await c.agents.setAttachment("acme", agent.id, "b", { minScore: 0.2 });
      expect(attached.kbs.map((a) => a.kb).sort()).toEqual(["a", "b"]);
      const replaced = await c.agents.setAttachment("acme", agent.id, "b", { mode: "keyword" });
      expect(replaced.kbs.find((a) => a.kb === "b")?.retrievalConfig).toEqual({ mode: "keyword" });
      await expect(c.agents.setAttachment("globex", agent.id, "b", {})).rejects.toThrow(NotFoundError);
      expect((await c.agents.detach("acme", agent.id, "a")).kbs.map((a) => a.kb)).toEqual(["b"]);
      await expect(c.agents.detach("acme", agent.id, "a")).rejects.toThrow(NotFoundError);
      await c.agents.detachEverywhere("b");
      expect((await c.agents.get("acme", agent.id))?.kbs).toEqual([]);
      expect(await c.agents.delete("globex", agent.id)).toBe(false);
      expect(await c.agents.delete("acme", agent.id)).toBe(true);
      expect(await c.agents.get("acme", agent.id)).toBeUndefined();
      expect(await c.agents.get("globex", other.id)).toMatchObject({ name: "helper", topK: 2 });
    });

    it("keeps ingest jobs with their files' progress and numbered events", async () => {
      const newJob = (id: string, tenant: string, kb: string) => ({
        id,
        tenant,
        kb,
        internalKb: `${tenant}.${kb}`,
        options: { embed: false, tags: ["t"] },
        dir: `/uploads/${id}`,
        files: [
          { name: "a.md", storedPath: `/uploads/${id}/0`, bytes: 10, mimetype: "text/markdown" },
          { name: "b.txt", storedPath: `/uploads/${id}/1`, bytes: 20 },
        ],
      });
      const j1 = await c.jobs.create(newJob("job_1", "acme", "docs"));
      expect(j1).toMatchObject({ id: "job_1", status: "queued", done: 0, seq: 0, internalKb: "acme.docs" });
      expect(j1.options).toEqual({ embed: false, tags: ["t"] });
      expect(j1.files).toEqual([
        {
          n: 0,
          name: "a.md",
          storedPath: "/uploads/job_1/0",
          bytes: 10,
          mimetype: "text/markdown",
          state: "pending",
        },
        { n: 1, name: "b.txt", storedPath: "/uploads/job_1/1", bytes: 20, state: "pending" },
      ]);
      await c.jobs.create(newJob("job_2", "acme", "other"));
      await c.jobs.create(newJob("job_3", "globex", "docs"));
      expect(await c.jobs.get("missing")).toBeUndefined();
      expect((await c.jobs.list("acme")).map((j) => j.id)).toEqual(["job_2", "job_1"]);
      expect((await c.jobs.pending()).map((j) => j.id)).toEqual(["job_1", "job_2", "job_3"]);
      expect(await c.jobs.active("acme.docs")).toEqual(["job_1"]);
      expect((await c.jobs.tenants()).sort()).toEqual(["acme", "globex"]);
      const started = await c.jobs.advance("job_1", {
        state: { status: "running", done: 0, current: "a.md", startedAt: "2024-03-01T00:00:00.000Z" },
        file: { n: 0, state: "started", prior: ["a.md#old"] },
        event: "progress",
      });
      expect(started.event).toMatchObject({
        seq: 1,
        type: "progress",
        state: { status: "running", current: "a.md" },
      });
      expect(started.job.files[0]).toMatchObject({ state: "started", prior: ["a.md#old"] });
      const result = {
        outcome: "added" as const,
        documents: 1,
        chunks: 2,
        removed: [],
        errors: [],
        warnings: [],
        embedded: { computed: 0, cached: 0, reused: 0 },
      };
      await c.jobs.advance("job_1", {
        state: { status: "running", done: 1, current: "b.txt" },
        file: { n: 0, state: "done", result },
        elapsedMs: 40,
      });
      const finished = await c.jobs.advance("job_1", {
        state: { status: "succeeded", done: 2, finishedAt: "2024-03-01T00:00:01.000Z" },
        event: "done",
      });
      expect(finished.event?.seq).toBe(2);
      expect(finished.job).toMatchObject({ status: "succeeded", done: 2, seq: 2, elapsedMs: 40 });
      expect(finished.job.files[0]).toMatchObject({ state: "done", prior: ["a.md#old"], result });
      expect((await c.jobs.events("job_1")).map((e) => [e.seq, e.type])).toEqual([
        [1, "progress"],
        [2, "done"],
      ]);
      expect((await c.jobs.events("job_1", 1)).map((e) => e.seq)).toEqual([2]);
      expect(await c.jobs.active("acme.docs")).toEqual([]);
      expect(await c.jobs.documents("job_1", 0)).toEqual([]);
      await expect(c.jobs.advance("missing", { state: { status: "running", done: 0 } })).rejects.toThrow(
        /does not exist/,
      );
      // Pruning keeps the newest finished jobs and never touches unfinished ones.
      expect(await c.jobs.prune("acme", 0)).toBe(1);
      expect(await c.jobs.get("job_1")).toBeUndefined();
      expect((await c.jobs.list("acme")).map((j) => j.id)).toEqual(["job_2"]);
      expect(await c.jobs.prune("acme", 0)).toBe(0);
    });

    it("keeps conversation memories per session and thread, with a vector per model", async () => {
      const m1 = { provider: "p", model: "m1" };
      const m2 = { provider: "p", model: "m2" };
      const turn = (sessionId: string, threadId: string, user: string) => ({
        sessionId,
        threadId,
        at: "2024-03-01T00:00:00.000Z",
        user,
        assistant: "ok",
        text: `User: ${user}\nAssistant: ok`,
      });
      const a = await c.memories.insert(turn("t:ag1:s", "t1", "one"), Float32Array.from([1, 0]), m1);
      const b = await c.memories.insert(turn("t:ag1:s", "t2", "two"), Float32Array.from([0, 1]), m1);
      await c.memories.insert(turn("t:ag2:s", "t1", "three"), Float32Array.from([1, 1]), m1);
      expect(a).toMatchObject({ sessionId: "t:ag1:s", threadId: "t1", user: "one" });
      expect((await c.memories.list("t:ag1:s")).map((m) => m.id)).toEqual([a.id, b.id]);
      expect((await c.memories.list("t:ag1:s", { threadId: "t2" })).map((m) => m.id)).toEqual([b.id]);
      expect((await c.memories.list("t:ag1:s", { exceptThread: "t2" })).map((m) => m.id)).toEqual([a.id]);
      expect(await c.memories.vectors([a.id, b.id], m1)).toEqual([
        Float32Array.from([1, 0]),
        Float32Array.from([0, 1]),
      ]);
      expect(await c.memories.vectors([a.id], m2)).toEqual([undefined]);
      await c.memories.storeVectors([{ id: a.id, vector: Float32Array.from([0.5, 0.5, 0.5]) }], m2);
      expect(await c.memories.vectors([a.id], m2)).toEqual([Float32Array.from([0.5, 0.5, 0.5])]);
      expect(await c.memories.vectors([a.id], m1)).toEqual([Float32Array.from([1, 0])]);
      expect(await c.memories.forget("t:ag1:s", "t1")).toBe(1);
      // A turn forgotten while it was being embedded gets no vector.
      await c.memories.storeVectors([{ id: a.id, vector: Float32Array.from([1, 1]) }], m1);
      expect(await c.memories.vectors([a.id], m1)).toEqual([undefined]);
      expect(await c.memories.forgetSessionsWithPrefix("t:ag1:")).toBe(1);
      expect(await c.memories.list("t:ag1:s")).toEqual([]);
      expect((await c.memories.list("t:ag2:s")).length).toBe(1);
      expect(await c.memories.forget("t:ag2:s")).toBe(1);
    });
  });
}
