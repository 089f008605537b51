/**
 * The embedded store's approximate index stays consistent with the catalog through
 * KB operations: ingest, a crash before the index is saved, re-ingest of a changed
 * document, deletion, and a KB dropped and re-created. The size threshold is
 * lowered so a small KB is searched through the index.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { KnowledgeLayer } from "../../src/knowledge-layer.js";
import { AnnWorkerIndexes } from "../../src/store/ann-client.js";
import { AnnIndexes } from "../../src/store/ann-index.js";
import { collectionOf } from "../../src/store/index.js";
import type { ExtractedDocument } from "../../src/types.js";
import { tempDir, useEnv } from "../helpers/helpers.js";

const WORDS = [
  "heron",
  "bridge",
  "violin",
  "glacier",
  "lantern",
  "orchard",
  "comet",
  "harbour",
  "quartz",
  "meadow",
];
const doc = (i: number, text?: string): ExtractedDocument => ({
  uri: `mem:note-${i}`,
  text:
    text ??
    `Note ${i}: the ${WORDS[i % 10]} beside the ${WORDS[Math.floor(i / 10) % 10]} at mile ${i}, ${WORDS[(i * 7) % 10]} again.`,
  metadata: { path: `mem:note-${i}`, type: "text" },
});
const docs = Array.from({ length: 120 }, (_, i) => doc(i));

// Small KBs are searched through the HNSW index.
useEnv("KL_ANN_MIN_RECORDS", "50");

// The indexes run on a worker thread by default; `KL_ANN_WORKER=0` keeps them in process.
describe.each([
  ["on a worker thread", "1"],
  ["in process", "0"],
])("knowledge base with the approximate vector index %s", (_, worker) => {
  let tmp: ReturnType<typeof tempDir>;
  let kl: KnowledgeLayer;
  let previousWorker: string | undefined;
  beforeEach(() => {
    previousWorker = process.env.KL_ANN_WORKER;
    process.env.KL_ANN_WORKER = worker;
    tmp = tempDir();
    kl = KnowledgeLayer.open({ dataDir: tmp.dir, cache: { type: "none" } });
    expect(kl.store.ann).toBeInstanceOf(worker === "1" ? AnnWorkerIndexes : AnnIndexes);
  });
  afterEach(async () => {
    await kl.close().catch(() => {});
    tmp.cleanup();
    if (previousWorker === undefined) delete process.env.KL_ANN_WORKER;
    else process.env.KL_ANN_WORKER = previousWorker;
  });

  const vectorSearch = async (k: KnowledgeLayer, query: string, exact = false) => {
    const kb = await k.getKb("notes");
    const vector = await k.embedder(kb.config, "query").embedQuery(query);
    return k.store.search(collectionOf(kb.config), vector, { topK: 5, exact });
  };

  it("indexes at ingest, survives a crash before the index save, re-ingest, delete and re-creation", async () => {
    await kl.createKb("notes");
    await kl.ingestDocuments(docs, { kb: "notes" });
    const collection = collectionOf((await kl.getKb("notes")).config);
    expect(await kl.store.ann?.isLoaded(collection)).toBe(true);
    const query = "the violin beside the glacier";
    expect((await vectorSearch(kl, query)).map((h) => h.id)).toEqual(
      (await vectorSearch(kl, query, true)).map((h) => h.id),
    );

    // Changed document (same URI, new text) and new documents, then a crash: the
    // catalog committed, the index file was not saved.
    const changed = "Completely different: a submarine made of marmalade sails to Jupiter.";
    await kl.ingestDocuments([doc(7, changed), doc(500), doc(501)], { kb: "notes" });
    kl.db.close();
    kl = KnowledgeLayer.open({ dataDir: tmp.dir, cache: { type: "none" } });
    const hits = await vectorSearch(kl, changed);
    expect(hits[0]?.payload.documentId).toBeDefined();
    const top = kl.db
      .prepare("SELECT c.text FROM chunks c WHERE c.id = ?")
      .pluck()
      .get(Number(hits[0]?.id)) as string;
    expect(top).toContain("marmalade");
    expect(await kl.store.ann?.isLoaded(collection)).toBe(true);
    const response = await kl.search(changed, { kbs: ["notes"], mode: "vector" });
    expect(response.results[0]?.text).toContain("marmalade");
    // No hit points at a chunk the catalog no longer has (the old version of note 7).
    const chunkIds = new Set(
      (kl.db.prepare("SELECT id FROM chunks WHERE kb = 'notes'").pluck().all() as number[]).map(String),
    );
    for (const q of ["heron", "marmalade", "comet harbour", "note 7"]) {
      for (const h of await vectorSearch(kl, q)) expect(chunkIds.has(h.id)).toBe(true);
    }

    // Dropped and re-created: nothing of the old KB comes back.
    await kl.deleteKb("notes");
    await kl.createKb("notes");
    await kl.ingestDocuments(
      Array.from({ length: 60 }, (_, i) =>
        doc(1000 + i, `Fresh ${i}: ${WORDS[i % 10]} under a ${WORDS[(i + 3) % 10]}.`),
      ),
      { kb: "notes" },
    );
    const fresh = new Set(
      (kl.db.prepare("SELECT id FROM chunks WHERE kb = 'notes'").pluck().all() as number[]).map(String),
    );
    const after = await vectorSearch(kl, "the violin beside the glacier");
    expect(after.length).toBe(5);
    for (const h of after) expect(fresh.has(h.id)).toBe(true);
    expect(await kl.store.ann?.isLoaded(collection)).toBe(true);
  });

  it("warm() loads the index of a reopened KB before its first search, and only of KBs large enough", async () => {
    await kl.createKb("notes");
    await kl.ingestDocuments(docs, { kb: "notes" });
    await kl.createKb("few");
    await kl.ingestDocuments(docs.slice(0, 10), { kb: "few" });
    await kl.close();
    kl = KnowledgeLayer.open({ dataDir: tmp.dir, cache: { type: "none" } });
    const collection = collectionOf((await kl.getKb("notes")).config);
    expect(await kl.store.ann?.isLoaded(collection)).toBe(false);
    const report = await kl.warm();
    expect(report).toEqual({ vectorIndexes: ["notes"], keywordThreads: [] });
    expect(await kl.store.ann?.isLoaded(collection)).toBe(true);
    expect(await kl.store.ann?.indexedCount(collection)).toBe(120);
    // The warmed index answers as an exact scan would at the top.
    const query = "the violin beside the glacier";
    expect((await vectorSearch(kl, query))[0]?.id).toBe((await vectorSearch(kl, query, true))[0]?.id);
  });
});
