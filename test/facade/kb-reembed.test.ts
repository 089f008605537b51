/**
 * `reembedKb` / `kl kb reembed`: a KB moves from the bundled model to another
 * provider (an OpenAI-compatible server, local, speaking the documented wire
 * format) in a new collection, resumably and verified, without re-ingesting.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { KnowledgeLayer } from "../../src/knowledge-layer.js";
import { collectionOf } from "../../src/store/index.js";
import type { ExtractedDocument } from "../../src/types.js";
import { openAiResponder } from "../helpers/embed-fixtures.js";
import { tempDir } from "../helpers/helpers.js";
import { type MockServer, startMockServer } from "../helpers/rerank-fixtures.js";

const docs: ExtractedDocument[] = Array.from({ length: 260 }, (_, i) => ({
  uri: `mem:note-${i}`,
  text: `Note ${i}: the ${["heron", "bridge", "violin", "glacier"][i % 4]} of aisle ${i}.`,
  metadata: { path: `mem:note-${i}`, type: "text" },
}));

describe("re-embedding a knowledge base with another model", () => {
  let tmp: ReturnType<typeof tempDir>;
  let kl: KnowledgeLayer;
  let server: MockServer;
  /** Requests whose body contains this text fail with a 400 (undefined: none fail). */
  let failOn: string | undefined;

  beforeEach(async () => {
    tmp = tempDir();
    kl = KnowledgeLayer.open({ dataDir: tmp.dir, cache: { type: "none" } });
    const respond = openAiResponder({ key: null, otherDim: 24 });
    failOn = undefined;
    server = await startMockServer((req) => {
      if (failOn && JSON.stringify(req.body).includes(failOn)) {
        return { status: 400, body: { error: { message: "quota exceeded", type: "x" } } };
      }
      return respond(req);
    });
  });
  afterEach(async () => {
    await kl.close();
    await server.close();
    tmp.cleanup();
  });

  const target = () => ({
    provider: "openai-compatible" as const,
    model: "mini-embed",
    baseUrl: `${server.url}/v1`,
    maxRetries: 0,
  });

  it("embeds every chunk into a new collection, switches the KB, keeps ingest incremental", async () => {
    await kl.createKb("notes");
    await kl.ingestDocuments(docs, { kb: "notes" });
    const oldCollection = collectionOf((await kl.getKb("notes")).config);
    // The default bundled model, use-lite-mix, is 1024-d.
    expect((await kl.store.info(oldCollection))?.dimension).toBe(1024);

    const result = await kl.reembedKb("notes", target());
    expect(result).toMatchObject({ done: docs.length, written: docs.length, skipped: 0, dimension: 24 });
    const config = (await kl.getKb("notes")).config;
    expect(config.embedding).toMatchObject({ provider: "openai-compatible", model: "mini-embed" });
    expect(collectionOf(config)).toBe(result.collection);
    expect(result.collection).toMatch(/^kb_notes@openai-compatible-mini-embed-[0-9a-f]{8}$/);
    expect(await kl.store.info(result.collection)).toMatchObject({ dimension: 24, count: docs.length });
    expect(await kl.store.info(oldCollection)).toBeUndefined();

    // The new model answers: a note's own text finds it first.
    const hit = await kl.search(docs[7]?.text as string, { kbs: ["notes"], mode: "vector_only", topK: 1 });
    expect(hit.results[0]?.source.uri).toBe("mem:note-7");
    expect(hit.results[0]?.score).toBeCloseTo(1, 4);

    // The KB's documents count as processed with the new model: nothing is ingested again.
    const again = await kl.ingestDocuments(docs, { kb: "notes" });
    expect(again.unchanged).toBe(docs.length);
    await expect(kl.reembedKb("notes", target())).rejects.toThrow(
      /already embedded with openai-compatible:mini-embed/,
    );
  });

  it("keeps the old model when embedding fails, and resumes on the next run", async () => {
    await kl.createKb("notes");
    await kl.ingestDocuments(docs, { kb: "notes" });
    const before = (await kl.getKb("notes")).config;
    // The second round (chunks 201…) fails; the first is stored.
    failOn = "aisle 230.";
    await expect(kl.reembedKb("notes", target())).rejects.toThrow(/quota exceeded/);
    expect((await kl.getKb("notes")).config).toEqual(before);
    expect(await kl.store.info(collectionOf(before))).toMatchObject({ count: docs.length });

    failOn = undefined;
    const resumed = await kl.reembedKb("notes", target());
    expect(resumed.skipped).toBeGreaterThan(0);
    expect(resumed.written + resumed.skipped).toBe(docs.length);
    expect((await kl.getKb("notes")).config.embedding.provider).toBe("openai-compatible");
  });

  it("refuses an ingest whose model makes vectors of another dimension than the collection's", async () => {
    await kl.createKb("fixed", {
      embedding: { provider: "openai-compatible", model: "mini-embed", baseUrl: `${server.url}/v1` },
      vectorStore: { type: "sqlite", collection: "shared_vectors" },
    });
    await kl.store.createCollection("shared_vectors", 512, "cosine");
    await expect(kl.ingestDocuments(docs.slice(0, 2), { kb: "fixed" })).rejects.toThrow(
      /collection "shared_vectors" holds 512-d vectors, but openai-compatible:mini-embed makes 24-d ones; use kl kb reembed fixed/,
    );
  });

  it("never serves one endpoint's cached vectors for another endpoint with the same model name", async () => {
    const respond = openAiResponder({ key: null, otherDim: 24 });
    const flipped = await startMockServer((req) => {
      const reply = respond(req);
      const body = reply.body as { data?: { embedding: number[] }[] };
      for (const d of body.data ?? []) d.embedding = d.embedding.map((x) => -x);
      return reply;
    });
    try {
      const at = (url: string) => ({
        provider: "openai-compatible" as const,
        model: "mini-embed",
        baseUrl: `${url}/v1`,
      });
      await kl.createKb("first", { embedding: at(server.url) });
      await kl.createKb("second", { embedding: at(flipped.url) });
      const one = await kl.ingestDocuments(docs.slice(0, 5), { kb: "first" });
      const two = await kl.ingestDocuments(docs.slice(0, 5), { kb: "second" });
      expect(one.embedded.computed).toBe(5);
      expect(two.embedded).toMatchObject({ computed: 5, cached: 0 });
      const q = docs[2]?.text as string;
      const a = await kl.search(q, { kbs: ["first"], mode: "vector_only", topK: 1 });
      const b = await kl.search(q, { kbs: ["second"], mode: "vector_only", topK: 1 });
      expect(a.results[0]?.score).toBeCloseTo(1, 4);
      expect(b.results[0]?.score).toBeCloseTo(1, 4);
    } finally {
      await flipped.close();
    }
  });

  it("checks the embedding settings when the KB is created", async () => {
    await expect(
      kl.createKb("bad", { embedding: { provider: "openai-compatible", model: "m" } }),
    ).rejects.toThrow(/knowledge base "bad": embedding: .*baseUrl/);
    await expect(kl.createKb("bad2", { embedding: { provider: "nope" as never } })).rejects.toThrow(
      /embedding provider "nope" needs a model|is not an embedding provider/,
    );
  });
});
