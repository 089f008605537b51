import { join } from "node:path";
import { afterEach, describe, expect, test, vi } from "vitest";
import { CachedEmbedder } from "../../src/embed/cache.js";
import type { Embedder } from "../../src/embed/contract.js";
import { KnowledgeLayer } from "../../src/knowledge-layer.js";
import type { ExtractedDocument } from "../../src/types.js";
import { tempDir } from "../helpers/helpers.js";

/** A deterministic 8-d embedder that records every text it embeds. */
class CountingEmbedder implements Embedder {
  readonly provider = "counting";
  readonly modelId = "counting-v1";
  readonly dimension = 8;
  readonly texts: string[] = [];
  async embedTexts(texts: string[]): Promise<Float32Array[]> {
    this.texts.push(...texts);
    return texts.map((t) => vectorOf(t));
  }
  async embedQuery(text: string): Promise<Float32Array> {
    return vectorOf(text);
  }
}

function vectorOf(text: string): Float32Array {
  const v = new Float32Array(8);
  for (let i = 0; i < text.length; i++) v[i % 8] = (v[i % 8] as number) + text.charCodeAt(i);
  const norm = Math.hypot(...v);
  return v.map((x) => x / norm);
}

const doc = (uri: string, text: string): ExtractedDocument => ({
  uri,
  text,
  metadata: { type: "text", title: uri, path: uri },
});

const PARAGRAPHS = [
  "Pumps move water uphill with impellers.",
  "Valves hold pressure in the main line.",
  "Filters catch sand before the meter.",
];

describe("embedding cache entries point at the embedded store's vectors (each vector kept once)", () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0)) await c();
  });

  function open(): { kl: KnowledgeLayer; inner: CountingEmbedder } {
    const tmp = tempDir();
    const kl = KnowledgeLayer.open({ dataDir: join(tmp.dir, "data") });
    const inner = new CountingEmbedder();
    const cached = new CachedEmbedder(inner, kl.db);
    vi.spyOn(kl, "embedder").mockReturnValue(cached);
    cleanups.push(async () => {
      await kl.close();
      tmp.cleanup();
    });
    return { kl, inner };
  }

  const rows = (kl: KnowledgeLayer) =>
    kl.db
      .prepare(
        "SELECT length(vector) AS bytes, ref_collection AS collection, ref_id AS id FROM embedding_cache WHERE provider = 'counting'",
      )
      .all() as { bytes: number; collection: string | null; id: string | null }[];

  test("ingest writes references, not vectors; another KB and a re-ingest reuse them; deletes drop them", async () => {
    const { kl, inner } = open();
    await kl.createKb("a", { chunking: { strategy: "fixed", chunkSize: 60, chunkOverlap: 0 } });
    await kl.createKb("b", { chunking: { strategy: "fixed", chunkSize: 60, chunkOverlap: 0 } });
    const first = await kl.ingestDocuments(
      PARAGRAPHS.map((p, i) => doc(`mem://a/${i}`, p)),
      { kb: "a" },
    );
    expect(first.embedded).toEqual({ computed: 3, cached: 0, reused: 0 });
    const stored = kl.db
      .prepare("SELECT id FROM vec_records WHERE collection = 'kb_a' ORDER BY id")
      .pluck()
      .all();
    // One entry per text, each a reference to a stored record, none holding bytes of its own.
    expect(rows(kl).map((r) => r.bytes)).toEqual([0, 0, 0]);
    expect(rows(kl).map((r) => r.collection)).toEqual(["kb_a", "kb_a", "kb_a"]);
    expect(new Set(rows(kl).map((r) => r.id))).toEqual(new Set(stored));

    // Another KB with the same texts: served from the references, the model is not called.
    const before = inner.texts.length;
    const second = await kl.ingestDocuments(
      PARAGRAPHS.map((p, i) => doc(`mem://b/${i}`, p)),
      { kb: "b" },
    );
    expect(second.embedded).toEqual({ computed: 0, cached: 3, reused: 0 });
    expect(inner.texts.length).toBe(before);
    // The vectors stored for b equal a's (the cache handed out the stored copies).
    const vectors = (collection: string) =>
      (
        kl.db
          .prepare(
            "SELECT r.vector FROM vec_records r JOIN chunks c ON c.id = CAST(r.id AS INTEGER) WHERE r.collection = ? ORDER BY c.text",
          )
          .pluck()
          .all(collection) as Buffer[]
      ).map((b) => b.toString("hex"));
    expect(vectors("kb_b")).toEqual(vectors("kb_a"));

    // A changed document: only its new text is embedded; its unchanged neighbours are not touched.
    const changed = await kl.ingestDocuments([doc("mem://a/1", "Valves hold pressure in the spare line.")], {
      kb: "a",
    });
    expect(changed.embedded).toEqual({ computed: 1, cached: 0, reused: 0 });
    expect(inner.texts.at(-1)).toBe("Valves hold pressure in the spare line.");

    // Deleting KB a and b removes their records; the references go with them and the
    // next ingest embeds again instead of reading a vector that is gone.
    await kl.deleteKb("a");
    await kl.deleteKb("b");
    expect(rows(kl).filter((r) => r.bytes === 0 && r.id !== null)).toEqual([]);
    await kl.createKb("c");
    const again = await kl.ingestDocuments([doc("mem://c/0", PARAGRAPHS[0] as string)], { kb: "c" });
    expect(again.embedded.computed).toBe(1);
  });

  test("a vector replaced in the store invalidates the reference to it", async () => {
    const { kl } = open();
    await kl.createKb("a");
    await kl.ingestDocuments([doc("mem://a/0", PARAGRAPHS[0] as string)], { kb: "a" });
    const [ref] = rows(kl);
    expect(ref?.id).toBeTruthy();
    kl.db.prepare("UPDATE vec_records SET vector = vector WHERE collection = 'kb_a' AND id = ?").run(ref?.id);
    expect(rows(kl)).toEqual([]);
  });
});
