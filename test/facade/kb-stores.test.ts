/**
 * Knowledge bases on server vector stores, through the real ingest and search path:
 * PostgreSQL + pgvector (a real server), Chroma (a real server) and Qdrant (a local
 * server speaking its REST API). Also `migrateKb` between stores (verified,
 * resumable) and ingest when the store fails. Embeddings come from the bundled model.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { VectorStoreConfig } from "../../src/config.js";
import { KnowledgeLayer } from "../../src/knowledge-layer.js";
import { collectionOf } from "../../src/store/index.js";
import type { ExtractedDocument } from "../../src/types.js";
import { type ChromaServer, startChromaServer } from "../helpers/chroma-server.js";
import { type FakePinecone, startFakePinecone } from "../helpers/fakes/pinecone-server.js";
import { type FakeQdrant, startFakeQdrant } from "../helpers/fakes/qdrant-server.js";
import { tempDir } from "../helpers/helpers.js";
import {
  findPostgres,
  type PostgresServer,
  postgresMissingReason,
  startPostgresServer,
} from "../helpers/postgres-server.js";
import { skipNotice } from "../helpers/skip.js";

const TOPICS = [
  "The heron waits motionless in shallow water before striking at a fish.",
  "Sourdough bread rises slowly because wild yeast ferments the dough overnight.",
  "A suspension bridge hangs its deck from cables draped over tall towers.",
  "Photosynthesis turns sunlight, water and carbon dioxide into sugar and oxygen.",
  "The violin has four strings tuned in fifths and is played with a bow.",
  "Glaciers carve U-shaped valleys as they grind slowly downhill.",
  "Compound interest grows savings because interest is earned on interest.",
  "A lighthouse warns ships of rocks with a rotating beam of light.",
];

/** 8 topical documents plus `fillers` short distinct ones (to make several write rounds). */
function corpus(fillers = 0): ExtractedDocument[] {
  const docs: ExtractedDocument[] = TOPICS.map((text, i) => ({
    uri: `mem:topic-${i}`,
    text,
    metadata: { path: `mem:topic-${i}`, type: "text", title: `topic ${i}` },
  }));
  for (let i = 0; i < fillers; i++) {
    docs.push({
      uri: `mem:filler-${i}`,
      text: `Filler note number ${i} about item ${i * 7} in drawer ${i % 13}.`,
      metadata: { path: `mem:filler-${i}`, type: "text" },
    });
  }
  return docs;
}

const QUERIES = [
  "bird standing in water",
  "bread dough yeast",
  "how do bridges hold their deck",
  "music strings",
];

async function topUris(kl: KnowledgeLayer, kb: string): Promise<string[][]> {
  const out: string[][] = [];
  for (const q of QUERIES) {
    const r = await kl.search(q, { kbs: [kb], mode: "vector_only", topK: 3 });
    out.push(r.results.map((x) => x.source.uri));
  }
  return out;
}

const pgInstall = findPostgres();
if (!pgInstall && process.env.CI) {
  describe("knowledge bases on PostgreSQL", () => {
    it("needs PostgreSQL and pgvector under CI", () => {
      throw new Error(`PostgreSQL + pgvector are required under CI: ${postgresMissingReason()}`);
    });
  });
}

if (!pgInstall && !process.env.CI) {
  skipNotice(
    import.meta.url,
    "knowledge bases on server vector stores",
    postgresMissingReason() ?? "PostgreSQL not found",
  );
}

describe.skipIf(!pgInstall)("knowledge bases on server vector stores", () => {
  let pgServer: PostgresServer;
  let chroma: ChromaServer;
  let qdrant: FakeQdrant;
  let pinecone: FakePinecone;
  let kl: KnowledgeLayer;
  let tmp: ReturnType<typeof tempDir>;
  let baseline: string[][];
  const stores: Record<string, () => VectorStoreConfig> = {};

  beforeAll(async () => {
    [pgServer, chroma, qdrant, pinecone] = await Promise.all([
      startPostgresServer({ install: pgInstall }),
      startChromaServer(),
      startFakeQdrant(),
      startFakePinecone({ apiKey: "pc-test", indexes: [{ name: "kl", dimension: 1024, metric: "cosine" }] }), // the default bundled model is 1024-d
    ]);
    stores.pinecone = () => ({
      type: "pinecone",
      index: "kl",
      apiKey: "pc-test",
      url: pinecone.controllerUrl,
    });
    stores.pgvector = () => ({ type: "pgvector", url: pgServer.url, schema: "kl_test" });
    stores.chroma = () => ({ type: "chroma", url: chroma.url });
    stores.qdrant = () => ({ type: "qdrant", url: qdrant.url });
    tmp = tempDir();
    kl = KnowledgeLayer.open({ dataDir: tmp.dir, cache: { type: "none" } });
    await kl.createKb("embedded");
    await kl.ingestDocuments(corpus(), { kb: "embedded" });
    baseline = await topUris(kl, "embedded");
  }, 120_000);

  afterAll(async () => {
    await kl?.close();
    await Promise.allSettled([pgServer?.stop(), chroma?.stop(), qdrant?.close(), pinecone?.close()]);
    tmp?.cleanup();
  });

  for (const name of ["pgvector", "chroma", "qdrant", "pinecone"]) {
    it(`${name}: ingest, search like the embedded store, re-ingest without stale vectors, delete`, async () => {
      const config = (stores[name] as () => VectorStoreConfig)();
      const kb = `on-${name}`;
      await kl.createKb(kb, { vectorStore: config });
      const summary = await kl.ingestDocuments(corpus(), { kb });
      expect(summary.errors).toEqual([]);
      const store = await kl.vectorStore((await kl.getKb(kb)).config);
      expect(store.kind).toBe(name);
      const collection = collectionOf((await kl.getKb(kb)).config);
      expect((await store.info(collection))?.count).toBe((await kl.counts(kb)).chunks);
      expect((await kl.counts(kb)).embeddedDocuments).toBe(TOPICS.length);
      expect(await topUris(kl, kb)).toEqual(baseline);

      // A changed document replaces its vector; the old one leaves the store.
      const changed = corpus();
      (changed[0] as ExtractedDocument).text = "Kingfishers dive from a perch to catch small fish in rivers.";
      const again = await kl.ingestDocuments(changed, { kb });
      expect(again.updated).toBe(1);
      expect((await store.info(collection))?.count).toBe((await kl.counts(kb)).chunks);
      const hit = await kl.search("kingfisher diving for fish", { kbs: [kb], mode: "vector_only", topK: 1 });
      expect(hit.results[0]?.text).toContain("Kingfishers");

      await kl.deleteKb(kb);
      expect(await store.info(collection)).toBeUndefined();
    }, 60_000);
  }

  it("migrates a KB between stores without re-embedding, verified, and resumes after an interruption", async () => {
    await kl.createKb("moving");
    const docs = corpus(400);
    await kl.ingestDocuments(docs, { kb: "moving" });
    const before = await topUris(kl, "moving");
    const embedSpy = vi.spyOn(kl.embedder((await kl.getKb("moving")).config), "embedTexts");

    const toPg = await kl.migrateKb("moving", {
      ...(stores.pgvector as () => VectorStoreConfig)(),
      collection: "moving_vectors",
    });
    expect(toPg).toMatchObject({ done: docs.length, total: docs.length, written: docs.length, skipped: 0 });
    expect((await kl.getKb("moving")).config.vectorStore).toMatchObject({
      type: "pgvector",
      collection: "moving_vectors",
    });
    expect(await topUris(kl, "moving")).toEqual(before);

    // Qdrant fails on the second write: the KB stays on PostgreSQL; a rerun resumes.
    const qdrantConfig = (stores.qdrant as () => VectorStoreConfig)();
    const target = await kl.vectorStore({ ...(await kl.getKb("moving")).config, vectorStore: qdrantConfig });
    const add = target.addBatch.bind(target);
    let calls = 0;
    const spy = vi.spyOn(target, "addBatch").mockImplementation(async (c, records) => {
      if (++calls === 2) throw new Error("connection reset");
      return add(c, records);
    });
    await expect(kl.migrateKb("moving", qdrantConfig)).rejects.toThrow(/connection reset/);
    expect((await kl.getKb("moving")).config.vectorStore.type).toBe("pgvector");
    const resumed = await kl.migrateKb("moving", qdrantConfig, { dropSource: true });
    spy.mockRestore();
    expect(resumed.skipped).toBeGreaterThan(0);
    expect(resumed.written + resumed.skipped).toBe(docs.length);
    expect((await kl.getKb("moving")).config.vectorStore.type).toBe("qdrant");
    expect(await topUris(kl, "moving")).toEqual(before);
    // The source collection was dropped; nothing was embedded again.
    const pg = await kl.vectorStore({
      ...(await kl.getKb("moving")).config,
      vectorStore: { ...(stores.pgvector as () => VectorStoreConfig)() },
    });
    expect(await pg.info("moving_vectors")).toBeUndefined();
    expect(embedSpy).not.toHaveBeenCalled();
    await expect(kl.migrateKb("moving", qdrantConfig)).rejects.toThrow(/already uses qdrant/);
  }, 120_000);

  it("keeps a source searchable by keyword when the store fails, and embeds it on the next ingest", async () => {
    await kl.createKb("flaky", { vectorStore: (stores.qdrant as () => VectorStoreConfig)() });
    const store = await kl.vectorStore((await kl.getKb("flaky")).config);
    const spy = vi.spyOn(store, "addBatch").mockRejectedValueOnce(new Error("503 Service Unavailable"));
    const first = await kl.ingestDocuments(corpus().slice(0, 1), { kb: "flaky" });
    spy.mockRestore();
    expect(first.errors).toHaveLength(1);
    expect(first.errors[0]?.reason).toMatch(
      /^vectors not stored in qdrant: 503 Service Unavailable; .*embedded again/,
    );
    expect(await kl.counts("flaky")).toMatchObject({ documents: 1, embeddedDocuments: 0 });
    const keyword = await kl.search("heron", { kbs: ["flaky"], mode: "keyword" });
    expect(keyword.results[0]?.source.uri).toBe("mem:topic-0");
    const second = await kl.ingestDocuments(corpus().slice(0, 1), { kb: "flaky" });
    expect(second.errors).toEqual([]);
    expect(second.updated).toBe(1);
    expect((await kl.counts("flaky")).embeddedDocuments).toBe(1);
    const vector = await kl.search("bird standing in water", { kbs: ["flaky"], mode: "vector_only" });
    expect(vector.results[0]?.source.uri).toBe("mem:topic-0");
    expect(vector.warnings).toEqual([]);

    // A store failing in the middle of a longer run: one error, the rest stored without vectors (no retries).
    const many = corpus(300).slice(1);
    const calls = vi.spyOn(store, "addBatch").mockRejectedValueOnce(new Error("connection reset"));
    const run = await kl.ingestDocuments(many, { kb: "flaky" });
    expect(calls).toHaveBeenCalledTimes(1);
    calls.mockRestore();
    expect(run.errors).toHaveLength(1);
    expect(run.warnings.filter((w) => w.reason.startsWith("stored without vectors"))).toHaveLength(
      many.length - 1,
    );
    expect(await kl.counts("flaky")).toMatchObject({ documents: many.length + 1, embeddedDocuments: 1 });
    const healed = await kl.ingestDocuments(many, { kb: "flaky" });
    expect(healed.errors).toEqual([]);
    expect((await kl.counts("flaky")).embeddedDocuments).toBe(many.length + 1);
  }, 60_000);

  it("gives each server-store KB its own collection and refuses sharing one", async () => {
    const pg = (stores.pgvector as () => VectorStoreConfig)();
    const a = await kl.createKb("own-a", { vectorStore: pg });
    expect(a.config.vectorStore.collection).toMatch(/^kb_own-a_[0-9a-f]{6}$/);
    await kl.createKb("own-b", { vectorStore: { ...pg, collection: "team_vectors" } });
    // The same server written differently (trailing slash, the default schema spelled out) is the same store.
    await expect(
      kl.createKb("own-c", {
        vectorStore: {
          ...pg,
          url: `${pg.url ?? ""}/`,
          schema: "kl_test",
          collection: "team_vectors",
        },
      }),
    ).rejects.toThrow(/collection "team_vectors" of pgvector .* belongs to knowledge base "own-b"/);
    await kl.ingestDocuments(corpus().slice(0, 2), { kb: "own-b" });
    await expect(
      kl.migrateKb("own-b", {
        ...pg,
        url: `${pg.url ?? ""}/`,
        collection: "team_vectors",
      }),
    ).rejects.toThrow(/already uses pgvector/);
    await kl.deleteKb("own-a");
    await kl.deleteKb("own-b");
  }, 60_000);

  it("refuses to migrate a KB whose vectors are missing, and restarts a copy the KB changed under", async () => {
    await kl.createKb("lost", { vectorStore: (stores.chroma as () => VectorStoreConfig)() });
    await kl.ingestDocuments(corpus().slice(0, 3), { kb: "lost" });
    const store = await kl.vectorStore((await kl.getKb("lost")).config);
    await store.dropCollection(collectionOf((await kl.getKb("lost")).config));
    await expect(kl.migrateKb("lost", { type: "sqlite", collection: "lost_copy" })).rejects.toThrow(
      /has no collection .* but 3 chunks should have vectors there/,
    );
    expect((await kl.getKb("lost")).config.vectorStore.type).toBe("chroma");

    await kl.createKb("busy");
    await kl.ingestDocuments(corpus(300), { kb: "busy" });
    const target = { type: "sqlite" as const, collection: "busy_copy" };
    const dest = await kl.vectorStore({ ...(await kl.getKb("busy")).config, vectorStore: target });
    const add = dest.addBatch.bind(dest);
    let once = false;
    const spy = vi.spyOn(dest, "addBatch").mockImplementation(async (c, records) => {
      await add(c, records);
      if (!once) {
        once = true; // an ingest lands between two rounds of the copy
        await kl.ingestDocuments(
          [
            {
              uri: "mem:late",
              text: "A late note about herons.",
              metadata: { path: "mem:late", type: "text" },
            },
          ],
          { kb: "busy" },
        );
      }
    });
    await expect(kl.migrateKb("busy", target)).rejects.toThrow(
      /changed during the copy .* partial copy was removed/,
    );
    spy.mockRestore();
    expect((await kl.getKb("busy")).config.vectorStore.collection).toBeUndefined();
    expect(await kl.store.info("busy_copy")).toBeUndefined();
    const done = await kl.migrateKb("busy", target);
    expect(done.done).toBe((await kl.counts("busy")).chunks);
  }, 120_000);

  it("degrades hybrid search to keyword when the store is down, and deletes such a KB only with force", async () => {
    await kl.createKb("down", { vectorStore: { type: "chroma", url: "http://127.0.0.1:9" } });
    await kl.ingestDocuments(corpus().slice(0, 2), { kb: "down", embed: false });
    const hybrid = await kl.search("heron", { kbs: ["down"], mode: "hybrid" });
    expect(hybrid.results[0]?.source.uri).toBe("mem:topic-0");
    expect(hybrid.warnings.join("\n")).toMatch(
      /knowledge base "down": vector search failed, results are keyword-only/,
    );
    await expect(kl.search("heron", { kbs: ["down"], mode: "vector_only" })).rejects.toThrow(
      /cannot connect/,
    );
    await expect(kl.deleteKb("down")).rejects.toThrow(/was not deleted \(use --force/);
    expect(kl.catalog.getKb("down")).toBeDefined();
    const forced = await kl.deleteKb("down", { force: true });
    expect(forced.warning).toMatch(/was left on chroma/);
    expect(kl.catalog.getKb("down")).toBeUndefined();
  }, 60_000);

  it("names the store when it cannot be reached", async () => {
    await kl.createKb("unreachable", { vectorStore: { type: "chroma", url: "http://127.0.0.1:9" } });
    await expect(kl.ingestDocuments(corpus().slice(0, 1), { kb: "unreachable" })).rejects.toThrow(
      /knowledge base "unreachable": cannot connect to vector store chroma http:\/\/127\.0\.0\.1:9/,
    );
  });
});
