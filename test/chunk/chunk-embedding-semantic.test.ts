/**
 * EMBEDDING_SEMANTIC chunking (src/chunk/embedding-semantic.ts): cuts at meaning
 * changes with deterministic fake embedders written here, size rules, breakpoint
 * modes, batching, the FIXED fallback, chunk-vector reuse through a real ingest
 * into a temporary KnowledgeLayer, and one run with the real bundled model.
 */
import { join } from "node:path";
import { afterEach, describe, expect, test, vi } from "vitest";
import {
  chunkEmbeddingSemantic,
  cosine,
  createChunker,
  percentile,
  semanticBreakpoints,
  strategyFor,
} from "../../src/chunk/index.js";
import { createMeasure } from "../../src/chunk/measure.js";
import { sentenceSpans } from "../../src/chunk/sentences.js";
import { validateChunkingConfig } from "../../src/chunk/spans.js";
import type { ChunkingConfig, EmbeddingSemanticOptions } from "../../src/config.js";
import { BundledEmbedder } from "../../src/embed/bundled.js";
import { CachedEmbedder, textHash } from "../../src/embed/cache.js";
import type { Embedder } from "../../src/embed/contract.js";
import { ConfigError } from "../../src/errors.js";
import { KnowledgeLayer } from "../../src/knowledge-layer.js";
import { blobToVector } from "../../src/store/database.js";
import type { Chunk, ExtractedDocument } from "../../src/types.js";
import { checkInvariants, doc, readShared } from "../helpers/chunk-helpers.js";
import { tempDir } from "../helpers/helpers.js";

// ---------------------------------------------------------------------------
// Fake embedders

/** Unit-length copy of `v`. */
function unit(v: readonly number[]): number[] {
  const n = Math.hypot(...v);
  return v.map((x) => x / n);
}

/** A deterministic embedder computing each vector with `vectorOf`; records every call. */
class FakeEmbedder implements Embedder {
  readonly provider = "fake";
  readonly calls: string[][] = [];
  constructor(
    private readonly vectorOf: (text: string) => number[],
    readonly dimension: number,
    readonly modelId = "fake-v1",
  ) {}
  async embedTexts(texts: string[]): Promise<Float32Array[]> {
    this.calls.push([...texts]);
    return texts.map((t) => Float32Array.from(unit(this.vectorOf(t))));
  }
  async embedQuery(text: string): Promise<Float32Array> {
    return Float32Array.from(unit(this.vectorOf(text)));
  }
  /** Every text embedded so far, in order. */
  get texts(): string[] {
    return this.calls.flat();
  }
}

/** Five-letter words of four topics. */
const TOPICS: Record<string, string[]> = {
  cats: ["kitty", "purrs", "meows", "claws"],
  money: ["stock", "bonds", "yield", "price"],
  space: ["orbit", "comet", "lunar", "probe"],
  food: ["spice", "bread", "flour", "sauce"],
};
const TOPIC_NAMES = Object.keys(TOPICS);

/**
 * Bag-of-topics vector: one dimension per topic counting its words, plus a small
 * constant so no vector is zero. Sentences of one topic have cosine ≈ 1, of
 * different topics ≈ 0.
 */
function topicVector(text: string): number[] {
  const v = [...TOPIC_NAMES.map(() => 0), 0.1];
  for (const word of text.toLowerCase().match(/[a-z]+/g) ?? []) {
    const t = TOPIC_NAMES.findIndex((name) => TOPICS[name]?.includes(word));
    if (t >= 0) v[t] = (v[t] as number) + 1;
  }
  return v;
}

const cap = (w: string): string => w.charAt(0).toUpperCase() + w.slice(1);

/** Sentence `i` of a topic: three of its words, e.g. "Kitty purrs meows." (18 characters). */
function sentence(topic: string, i: number): string {
  const w = TOPICS[topic] as string[];
  return `${cap(w[i % 4] as string)} ${w[(i + 1) % 4]} ${w[(i + 2) % 4]}.`;
}

/** `n` sentences of one topic separated by single spaces (3 sentences: 56 characters). */
function block(topic: string, n = 3): string {
  return Array.from({ length: n }, (_, i) => sentence(topic, i)).join(" ");
}

/** Chunking config for the strategy with `options` over the defaults. */
function config(options: Partial<EmbeddingSemanticOptions> = {}, chunkSize = 1500): ChunkingConfig {
  return {
    strategy: "embedding_semantic",
    chunkSize,
    chunkOverlap: 0,
    minChunkSize: 0,
    embeddingSemantic: options,
  };
}

async function run(
  text: string,
  embedder: Embedder,
  options: Partial<EmbeddingSemanticOptions> = {},
  batchSize?: number,
): Promise<Chunk[]> {
  const chunker = createChunker(config(options), undefined, { embedder, batchSize });
  return chunker.chunk(doc(text));
}

const bodies = (text: string, chunks: Chunk[]): string[] => chunks.map((c) => text.slice(c.start, c.end));

// ---------------------------------------------------------------------------

describe("cuts at meaning changes", () => {
  test("a cut exactly at each topic change, none inside a topic", async () => {
    const blocks = ["cats", "money", "space"].map((t) => block(t));
    const text = blocks.join(" ");
    const fake = new FakeEmbedder(topicVector, 5);
    const chunks = await run(text, fake, { minSize: 0 });
    expect(bodies(text, chunks)).toEqual(blocks);
    expect(chunks.map((c) => c.metadata)).toEqual([
      { chunker: "embedding_semantic", sentences: 3, endedBy: "similarity" },
      { chunker: "embedding_semantic", sentences: 3, endedBy: "similarity" },
      { chunker: "embedding_semantic", sentences: 3, endedBy: "end" },
    ]);
    expect(chunks.every((c) => c.chunkType === "semantic")).toBe(true);
    checkInvariants(doc(text), chunks, config());
    // Nine sentences embedded in one call.
    expect(fake.calls).toHaveLength(1);
    expect(fake.texts).toEqual(
      blocks.flatMap((_, b) => [0, 1, 2].map((i) => sentence(TOPIC_NAMES[b] ?? "", i))),
    );
  });

  test("no cut before a chunk reaches minSize", async () => {
    const blocks = ["cats", "money", "space", "food"].map((t) => block(t));
    const text = blocks.join(" ");
    // Each block is 56 characters: a cut after "cats" (56 < 100) is not allowed, after "money" (113) it is.
    const chunks = await run(text, new FakeEmbedder(topicVector, 5), { minSize: 100 });
    expect(bodies(text, chunks)).toEqual([`${blocks[0]} ${blocks[1]}`, `${blocks[2]} ${blocks[3]}`]);
    expect(chunks.map((c) => c.end - c.start)).toEqual([113, 113]);
  });

  test("no chunk exceeds maxSize: a topic longer than maxSize is cut between sentences", async () => {
    const text = block("cats", 7); // 7 × 18 + 6 = 132 characters, one topic
    const chunks = await run(text, new FakeEmbedder(topicVector, 5), { minSize: 10, maxSize: 60 });
    expect(bodies(text, chunks)).toEqual([
      [0, 1, 2].map((i) => sentence("cats", i)).join(" "),
      [3, 4, 5].map((i) => sentence("cats", i)).join(" "),
      sentence("cats", 6),
    ]);
    expect(chunks.map((c) => c.metadata.endedBy)).toEqual(["size", "size", "end"]);
    for (const c of chunks) expect(c.end - c.start).toBeLessThanOrEqual(60);
  });

  test("a short tail joins the previous chunk when the result fits maxSize, else stays", async () => {
    const text = `${block("cats")} ${sentence("money", 0)}`; // 56 + 1 + 18 = 75 characters
    const fake = new FakeEmbedder(topicVector, 5);
    const merged = await run(text, fake, { minSize: 30 });
    expect(bodies(text, merged)).toEqual([text]);
    expect(merged[0]?.metadata).toEqual({ chunker: "embedding_semantic", sentences: 4, endedBy: "end" });
    const kept = await run(text, fake, { minSize: 30, maxSize: 70 });
    expect(bodies(text, kept)).toEqual([block("cats"), sentence("money", 0)]);
  });

  test("a sentence longer than maxSize is cut with splitRange into pieces within maxSize", async () => {
    // "Orbit comet lunar probe orbit …": 299 characters without a terminator.
    const long = cap(Array.from({ length: 50 }, (_, i) => TOPICS.space?.[i % 4]).join(" "));
    const text = `${sentence("cats", 0)} ${long}. ${sentence("cats", 1)}`;
    const chunks = await run(text, new FakeEmbedder(topicVector, 5), { minSize: 0, maxSize: 100 });
    checkInvariants(doc(text), chunks, { ...config(), chunkSize: 100 });
    for (const c of chunks) expect(c.end - c.start).toBeLessThanOrEqual(100);
    expect(bodies(text, chunks)[0]).toBe(sentence("cats", 0));
    expect(bodies(text, chunks).at(-1)).toBe(sentence("cats", 1));
    expect(chunks.length).toBeGreaterThanOrEqual(5);
  });

  test("paragraph breaks end sentences: a heading is its own sentence unit", async () => {
    const text = `Kitty claws\n\n${block("money")}`;
    const chunks = await run(text, new FakeEmbedder(topicVector, 5), { minSize: 0 });
    expect(bodies(text, chunks)).toEqual(["Kitty claws", block("money")]);
  });
});

describe("breakpoint modes", () => {
  // Sentence k is "Sk is here." with a 2-d vector at angle θk; neighbour cosines are SIMS.
  const SIMS = [0.99, 0.9, 0.8, 0.99, 0.6];
  const angles = [0];
  for (const s of SIMS) angles.push((angles.at(-1) as number) + Math.acos(s));
  const angleVector = (text: string): number[] => {
    const k = Number(/S(\d+)/.exec(text)?.[1]);
    return [Math.cos(angles[k] as number), Math.sin(angles[k] as number)];
  };
  const sentences = angles.map((_, k) => `S${k} is here.`);
  const text = sentences.join(" ");
  const groups = async (options: Partial<EmbeddingSemanticOptions>): Promise<string[]> =>
    bodies(text, await run(text, new FakeEmbedder(angleVector, 2), { minSize: 0, ...options }));
  const join = (from: number, to: number): string => sentences.slice(from, to).join(" ");

  test("percentile follows NumPy's linear interpolation", () => {
    expect(percentile([1, 2, 3, 4], 50)).toBeCloseTo(2.5, 12);
    expect(percentile([0.01, 0.1, 0.2, 0.01, 0.4], 95)).toBeCloseTo(0.36, 12);
    expect(percentile([0.01, 0.1, 0.2, 0.01, 0.4], 50)).toBeCloseTo(0.1, 12);
    expect(percentile([7], 95)).toBe(7);
    expect(percentile([], 50)).toBeNaN();
  });

  test("semanticBreakpoints: threshold on cosine, percentile on distance", () => {
    const base = { breakpoint: "threshold" as const, threshold: 0.75, percentile: 95 };
    expect(semanticBreakpoints(SIMS, base)).toEqual([false, false, false, false, true]);
    expect(semanticBreakpoints(SIMS, { ...base, threshold: 0.85 })).toEqual([
      false,
      false,
      true,
      false,
      true,
    ]);
    expect(semanticBreakpoints(SIMS, { ...base, breakpoint: "percentile" })).toEqual([
      false,
      false,
      false,
      false,
      true,
    ]);
    expect(semanticBreakpoints(SIMS, { ...base, breakpoint: "percentile", percentile: 10 })).toEqual([
      false,
      true,
      true,
      false,
      true,
    ]);
    // Equal neighbours: nothing is above its own percentile.
    expect(semanticBreakpoints([0.5, 0.5, 0.5], { ...base, breakpoint: "percentile" })).toEqual([
      false,
      false,
      false,
    ]);
    expect(cosine([1, 0], [0, 2])).toBe(0);
    expect(cosine([3, 4], [6, 8])).toBeCloseTo(1, 12);
    expect(cosine([0, 0], [1, 0])).toBe(0);
  });

  test("threshold mode (default 0.75) cuts only below the threshold", async () => {
    expect(await groups({})).toEqual([join(0, 5), join(5, 6)]);
    expect(await groups({ threshold: 0.85 })).toEqual([join(0, 3), join(3, 5), join(5, 6)]);
    expect(await groups({ threshold: 0.5 })).toEqual([text]);
  });

  test("percentile mode cuts where the distance is above the N-th percentile (default 95)", async () => {
    expect(await groups({ breakpoint: "percentile" })).toEqual([join(0, 5), join(5, 6)]);
    expect(await groups({ breakpoint: "percentile", percentile: 50 })).toEqual([
      join(0, 3),
      join(3, 5),
      join(5, 6),
    ]);
    // 30th percentile of [0.01, 0.01, 0.1, 0.2, 0.4] is 0.028.
    expect(await groups({ breakpoint: "percentile", percentile: 30 })).toEqual([
      join(0, 2),
      join(2, 3),
      join(3, 5),
      join(5, 6),
    ]);
  });
});

describe("edge cases and embedding calls", () => {
  test("B13 (shared case): blank text gives [] with zero embedding calls; one sentence is one chunk, no call", async () => {
    const cases = JSON.parse(readShared("cases", "B13.json")) as Record<string, string>;
    const fake = new FakeEmbedder(topicVector, 5);
    for (const key of ["empty", "whitespace", "nbsp_zwsp"]) {
      expect(await run(cases[key] as string, fake)).toEqual([]);
    }
    const chunks = await run(cases.leading_delims as string, fake);
    expect(chunks).toHaveLength(1);
    expect(chunks[0]).toMatchObject({
      start: 4,
      end: 15,
      text: "Hello world",
      chunkIndex: 0,
      totalChunks: 1,
    });
    const one = await run("  Just one sentence here.  ", fake);
    expect(one.map((c) => [c.start, c.end, c.text])).toEqual([[2, 25, "Just one sentence here."]]);
    expect(fake.calls).toEqual([]);
  });

  test("sentences are embedded in calls of at most the batch size", async () => {
    const text = ["cats", "money", "space", "food"]
      .flatMap((t) => [0, 1, 2].map((i) => sentence(t, i)))
      .join(" ");
    const fake = new FakeEmbedder(topicVector, 5);
    await run(text, fake, {}, 5);
    expect(fake.calls.map((c) => c.length)).toEqual([5, 5, 2]);
    const byDefault = new FakeEmbedder(topicVector, 5);
    await run(text, byDefault);
    expect(byDefault.calls.map((c) => c.length)).toEqual([12]);
  });

  test("each chunk carries the normalised mean of its sentence vectors, unless reuse is off", async () => {
    const text = `${block("cats")} ${block("money")}`;
    const chunks = await run(text, new FakeEmbedder(topicVector, 5), { minSize: 0 });
    expect(chunks).toHaveLength(2);
    chunks.forEach((c, b) => {
      const vs = [0, 1, 2].map((i) => unit(topicVector(sentence(TOPIC_NAMES[b] ?? "", i))));
      const mean = unit(vs.reduce((acc, v) => acc.map((x, d) => x + (v[d] as number))));
      expect(c.embedding?.provider).toBe("fake");
      expect(c.embedding?.modelId).toBe("fake-v1");
      expect(c.embedding?.text).toBe(c.text);
      expect([...(c.embedding?.vector ?? [])].map((x) => Number(x.toFixed(6)))).toEqual(
        mean.map((x) => Number(x.toFixed(6))),
      );
    });
    const off = await run(text, new FakeEmbedder(topicVector, 5), {
      minSize: 0,
      reuseSentenceEmbeddings: false,
    });
    expect(off.map((c) => c.embedding)).toEqual([undefined, undefined]);
    expect(bodies(text, off)).toEqual(bodies(text, chunks));
  });

  test("sizes in tokens: every chunk fits maxSize tokens", async () => {
    const text = ["cats", "money", "space", "food"].map((t) => block(t, 5)).join(" ");
    const cfgTokens: ChunkingConfig = {
      ...config({ minSize: 5, maxSize: 20 }, 200),
      unit: "tokens",
      tokenizer: "o200k_base",
    };
    const chunker = createChunker(cfgTokens, undefined, { embedder: new FakeEmbedder(topicVector, 5) });
    const chunks = await chunker.chunk(doc(text));
    const measure = createMeasure("tokens", "o200k_base");
    expect(chunks.length).toBeGreaterThanOrEqual(4);
    for (const c of chunks) expect(measure.count(c.text)).toBeLessThanOrEqual(20);
    checkInvariants(doc(text), chunks, { ...cfgTokens, chunkSize: text.length });
  });

  test("pages are annotated like every strategy's", async () => {
    const a = block("cats");
    const b = block("money");
    const text = `${a}\n\n${b}`;
    const d = doc(text, "pdf", {}, [
      { start: 0, end: a.length, metadata: { page: 1 } },
      { start: a.length + 2, end: text.length, metadata: { page: 2 } },
    ]);
    const chunker = createChunker(config({ minSize: 0 }), undefined, {
      embedder: new FakeEmbedder(topicVector, 5),
    });
    const chunks = await chunker.chunk(d);
    expect(chunks.map((c) => [c.metadata.pageStart, c.metadata.pageEnd])).toEqual([
      [1, 1],
      [2, 2],
    ]);
  });
});

describe("fallback to FIXED windows when the embedder fails", () => {
  const text = ["cats", "money", "space", "food"].map((t) => block(t, 6)).join("\n\n"); // 4 × 113 + 6 = 458
  const expectFallback = (chunks: Chunk[], reason: RegExp): void => {
    expect(chunks.length).toBe(2);
    for (const c of chunks) {
      expect(c.chunkType).toBe("text");
      expect(c.metadata.chunker).toBe("fixed_fallback");
      expect(String(c.metadata.fallbackReason)).toMatch(reason);
      expect(c.end - c.start).toBeLessThanOrEqual(350);
      expect(c.text).toBe(text.slice(c.start, c.end));
      expect(c.embedding).toBeUndefined();
    }
    // fallbackOverlap 50: the second window starts inside the first.
    const [first, second] = chunks as [Chunk, Chunk];
    expect(second.start).toBeLessThan(first.end);
    expect(first.end - second.start).toBeLessThanOrEqual(50);
    expect(first.start).toBe(0);
    expect(second.end).toBe(text.length);
  };

  test("the embedder throws", async () => {
    const failing: Embedder = {
      provider: "fake",
      modelId: "down",
      dimension: 5,
      embedTexts: vi.fn(async () => {
        throw new Error("model offline");
      }),
      embedQuery: async () => new Float32Array(5),
    };
    expectFallback(await run(text, failing), /^embedder failed: model offline$/);
    expect(failing.embedTexts).toHaveBeenCalledTimes(1);
  });

  test("the embedder returns too few vectors", async () => {
    const short: Embedder = {
      ...new FakeEmbedder(topicVector, 5),
      provider: "fake",
      modelId: "short",
      dimension: 5,
      embedTexts: async (texts) => texts.slice(1).map(() => Float32Array.from([1, 0, 0, 0, 0])),
      embedQuery: async () => new Float32Array(5),
    };
    expectFallback(await run(text, short), /returned 23 vectors for 24 texts/);
  });

  test("the embedder returns NaN or wrong-length vectors", async () => {
    const nan = new FakeEmbedder(() => [Number.NaN, 1, 0, 0, 0], 5);
    expectFallback(await run(text, nan), /NaN/);
    const wrong = new FakeEmbedder(() => [1, 0, 0], 5);
    expectFallback(await run(text, wrong), /length 3, expected 5/);
  });
});

describe("configuration", () => {
  test("embedding_semantic needs an embedder; auto never picks it", () => {
    expect(() => createChunker(config())).toThrow(ConfigError);
    expect(() => createChunker(config())).toThrow(/needs an embedder/);
    expect(() => createChunker(config(), undefined, {})).toThrow(ConfigError);
    const fake = new FakeEmbedder(topicVector, 5);
    expect(() => createChunker(config(), undefined, { embedder: fake, batchSize: 0 })).toThrow(ConfigError);
    expect(() =>
      createChunker(config({ reuseSentenceEmbeddings: "yes" as unknown as boolean }), "embedding_semantic", {
        embedder: fake,
      }),
    ).toThrow(/reuseSentenceEmbeddings/);
    expect(() => createChunker(config({ minSize: 700 }), undefined, { embedder: fake })).toThrow(ConfigError);
    expect(createChunker(config(), undefined, { embedder: fake }).name).toBe("embedding_semantic");
    for (const type of ["markdown", "html", "email", "slack", "code", "pdf", "text"] as const) {
      expect(strategyFor(doc("x", type))).not.toBe("embedding_semantic");
    }
  });

  test("defaults: threshold 0.75, percentile 95, min 50, max 600, fallback 350/50, reuse on", () => {
    expect(validateChunkingConfig(config()).embeddingSemantic).toEqual({
      breakpoint: "threshold",
      threshold: 0.75,
      percentile: 95,
      minSize: 50,
      maxSize: 600,
      fallbackSize: 350,
      fallbackOverlap: 50,
      reuseSentenceEmbeddings: true,
    });
  });

  test("maxSize is capped by chunkSize", async () => {
    const text = block("cats", 7);
    const limits = validateChunkingConfig(config({ minSize: 0 }, 40));
    const chunks = await chunkEmbeddingSemantic(doc(text), limits, {
      embedder: new FakeEmbedder(topicVector, 5),
    });
    expect(bodies(text, chunks)).toEqual(
      [0, 2, 4, 6].map((i) =>
        [i, i + 1]
          .filter((k) => k < 7)
          .map((k) => sentence("cats", k))
          .join(" "),
      ),
    );
  });
});

// ---------------------------------------------------------------------------
// Through the ingest pipeline

describe("ingest: chunk vectors reuse sentence vectors", () => {
  const cleanups: (() => void)[] = [];
  afterEach(() => {
    for (const c of cleanups.splice(0)) c();
  });

  /** A KnowledgeLayer on a temp dir whose KBs all use `inner` (wrapped in the real embedding cache). */
  function open(inner: Embedder): { kl: KnowledgeLayer; cached: CachedEmbedder } {
    const tmp = tempDir();
    const kl = KnowledgeLayer.open({ dataDir: join(tmp.dir, "data") });
    cleanups.push(() => {
      kl.close();
      tmp.cleanup();
    });
    const cached = new CachedEmbedder(inner, kl.db);
    vi.spyOn(kl, "embedder").mockReturnValue(cached);
    return { kl, cached };
  }

  /** Stored vectors of a KB, by chunk start offset. */
  function storedVectors(kl: KnowledgeLayer, kb: string): Map<number, Float32Array> {
    const rows = kl.db
      .prepare(
        `SELECT c.start AS start, r.vector AS vector FROM vec_records r
         JOIN chunks c ON c.id = CAST(r.id AS INTEGER) WHERE r.collection = ?`,
      )
      .all(`kb_${kb}`) as { start: number; vector: Buffer }[];
    return new Map(rows.map((r) => [r.start, blobToVector(r.vector)]));
  }

  const cachedHashes = (kl: KnowledgeLayer): Set<string> =>
    new Set(
      (
        kl.db.prepare("SELECT text_hash FROM embedding_cache WHERE provider = 'fake'").all() as {
          text_hash: string;
        }[]
      ).map((r) => r.text_hash),
    );

  const blocks = ["cats", "money", "space", "food"].map((t) => block(t));
  const text = blocks.join(" ");
  const sentences = ["cats", "money", "space", "food"].flatMap((t) => [0, 1, 2].map((i) => sentence(t, i)));
  const semantic = { strategy: "embedding_semantic" as const, embeddingSemantic: { minSize: 0 } };
  const inMemory = (uri: string): ExtractedDocument => ({ ...doc(text), uri });

  test("stored vectors are the normalised sentence means; chunks are not embedded again; the cache holds sentences only", async () => {
    const fake = new FakeEmbedder(topicVector, 5);
    const { kl } = open(fake);
    await kl.createKb("sem", { chunking: semantic });
    const summary = await kl.ingestDocuments([inMemory("mem://topics")], { kb: "sem" });
    expect(summary.chunks).toBe(4);
    expect(summary.warnings).toEqual([]);
    expect(summary.embedded).toEqual({ computed: 12, cached: 0, reused: 4 });
    // The model saw each sentence once and no chunk text.
    expect(fake.texts).toEqual(sentences);
    for (const b of blocks) expect(fake.texts).not.toContain(b);

    const stored = storedVectors(kl, "sem");
    expect(stored.size).toBe(4);
    let start = 0;
    blocks.forEach((b, k) => {
      const vs = [0, 1, 2].map((i) => unit(topicVector(sentence(TOPIC_NAMES[k] ?? "", i))));
      const mean = unit(vs.reduce((acc, v) => acc.map((x, d) => x + (v[d] as number))));
      const v = stored.get(start);
      expect(v && [...v].map((x) => Number(x.toFixed(6)))).toEqual(mean.map((x) => Number(x.toFixed(6))));
      start += b.length + 1;
    });

    // The embedding cache keeps true model embeddings only: sentences, never the derived chunk vectors.
    const hashes = cachedHashes(kl);
    expect(hashes.size).toBe(12);
    // Entries are keyed by the first 16 bytes of the SHA-256 (32 hex digits in the view).
    for (const s of sentences) expect(hashes.has(textHash(s).slice(0, 32))).toBe(true);
    for (const b of blocks) expect(hashes.has(textHash(b).slice(0, 32))).toBe(false);

    // A search finds the topic chunk by vector.
    const { results } = await kl.search("orbit comet lunar probe", { kbs: ["sem"], mode: "vector", topK: 1 });
    expect(results[0]?.text).toBe(blocks[2]);
  });

  test("a second KB with the same text is served from the cache with no model call", async () => {
    const fake = new FakeEmbedder(topicVector, 5);
    const { kl } = open(fake);
    await kl.createKb("a", { chunking: semantic });
    await kl.createKb("b", { chunking: semantic });
    await kl.ingestDocuments([inMemory("mem://a")], { kb: "a" });
    const calls = fake.calls.length;
    const again = await kl.ingestDocuments([inMemory("mem://b")], { kb: "b" });
    expect(fake.calls.length).toBe(calls);
    expect(again.embedded).toEqual({ computed: 0, cached: 12, reused: 4 });
    expect([...storedVectors(kl, "b").entries()]).toEqual([...storedVectors(kl, "a").entries()]);
  });

  test("with reuseSentenceEmbeddings off, chunk texts are embedded by the model", async () => {
    const fake = new FakeEmbedder(topicVector, 5);
    const { kl } = open(fake);
    await kl.createKb("off", {
      chunking: {
        strategy: "embedding_semantic",
        embeddingSemantic: { minSize: 0, reuseSentenceEmbeddings: false },
      },
    });
    const summary = await kl.ingestDocuments([inMemory("mem://off")], { kb: "off" });
    expect(summary.embedded).toEqual({ computed: 16, cached: 0, reused: 0 });
    expect(fake.texts).toEqual([...sentences, ...blocks]);
    const stored = storedVectors(kl, "off");
    expect([...(stored.get(0) ?? [])].map((x) => Number(x.toFixed(6)))).toEqual(
      unit(topicVector(blocks[0] as string)).map((x) => Number(x.toFixed(6))),
    );
  });

  test("--no-embed still embeds sentences (cached) so chunks are the same, and stores no vectors", async () => {
    const fake = new FakeEmbedder(topicVector, 5);
    const { kl } = open(fake);
    await kl.createKb("kw", { chunking: semantic });
    const summary = await kl.ingestDocuments([inMemory("mem://kw")], { kb: "kw", embed: false });
    expect(summary.chunks).toBe(4);
    expect(summary.embedded).toEqual({ computed: 12, cached: 0, reused: 0 });
    expect(fake.texts).toEqual(sentences);
    expect(storedVectors(kl, "kw").size).toBe(0);
    const { results } = await kl.search("kitty purrs", { kbs: ["kw"], mode: "keyword", topK: 4 });
    expect(results.map((r) => r.text).sort()).toEqual(
      [...blocks].sort().filter((b) => /kitty|purrs/i.test(b)),
    );
    // A later embedding ingest stores the vectors without any model call.
    const later = await kl.ingestDocuments([inMemory("mem://kw")], { kb: "kw" });
    expect(later.embedded).toEqual({ computed: 0, cached: 12, reused: 4 });
    expect(fake.calls).toHaveLength(1);
    expect(storedVectors(kl, "kw").size).toBe(4);
  });

  test("an embedder failure during chunking is reported as a warning and fixed windows are stored", async () => {
    const failing: Embedder = {
      provider: "fake",
      modelId: "down",
      dimension: 5,
      embedTexts: async () => {
        throw new Error("model offline");
      },
      embedQuery: async () => new Float32Array(5),
    };
    const { kl } = open(failing);
    await kl.createKb("down", { chunking: semantic });
    const summary = await kl.ingestDocuments([inMemory("mem://down")], { kb: "down", embed: false });
    expect(summary.errors).toEqual([]);
    expect(summary.warnings).toEqual([
      {
        path: "mem://down",
        reason: "embedding_semantic chunking fell back to fixed windows: embedder failed: model offline",
      },
    ]);
    expect(summary.chunks).toBe(1); // 227 characters fit one 350-character window
    const { results } = await kl.search("kitty", { kbs: ["down"], mode: "keyword" });
    expect(results[0]?.chunk.type).toBe("text");
    expect(results[0]?.text).toBe(text);
  });
});

// ---------------------------------------------------------------------------

describe("with the real bundled embedder (USE lite)", () => {
  test("a real document: invariants, sizes, cuts at low similarity, chunk vectors close to the model's", async () => {
    const text = readShared("data/docs/markdown/rust_book_src/foreword.md");
    const d = doc(text, "markdown");
    const embedder = new BundledEmbedder({ workers: 0 });
    const chunker = createChunker(config(), undefined, { embedder });
    const chunks = await chunker.chunk(d);
    checkInvariants(d, chunks, { ...config(), chunkSize: 600 });
    expect(chunks.length).toBeGreaterThanOrEqual(3);
    for (const c of chunks) {
      expect(c.chunkType).toBe("semantic");
      expect(c.metadata.chunker).toBe("embedding_semantic");
      expect(c.end - c.start).toBeLessThanOrEqual(600);
    }
    // Chunks ended at a meaning change: the sentences on either side of the cut are below the threshold.
    const units = sentenceSpans(text).map((s) => text.slice(s.start, s.end));
    const checks: [string, string][] = [];
    for (let i = 0; i + 1 < chunks.length; i++) {
      const c = chunks[i] as Chunk;
      if (c.metadata.endedBy !== "similarity") continue;
      const inside = sentenceSpans(text, c.start, c.end);
      const next = chunks[i + 1] as Chunk;
      const after = sentenceSpans(text, next.start, next.end);
      checks.push([
        text.slice(inside.at(-1)?.start, inside.at(-1)?.end),
        text.slice(after[0]?.start, after[0]?.end),
      ]);
    }
    expect(units.length).toBeGreaterThanOrEqual(chunks.length);
    expect(checks.length).toBeGreaterThan(0);
    const vectors = await embedder.embedTexts(checks.flat());
    for (let k = 0; k < checks.length; k++) {
      expect(cosine(vectors[2 * k] as Float32Array, vectors[2 * k + 1] as Float32Array)).toBeLessThan(
        0.75 + 1e-3,
      );
    }
    // Each chunk vector (mean of its sentences) points where the model's own embedding of the chunk does.
    const direct = await embedder.embedTexts(chunks.map((c) => c.text));
    chunks.forEach((c, i) => {
      const v = c.embedding?.vector as Float32Array;
      expect(Math.hypot(...v)).toBeCloseTo(1, 5);
      expect(cosine(v, direct[i] as Float32Array)).toBeGreaterThan(0.8);
    });
    // USE lite's neighbour cosines are mostly below 0.75 (median ≈ 0.5 here), so the threshold
    // mode cuts at nearly every sentence; percentile mode adapts to the document and groups more.
    const byPercentile = await createChunker(config({ breakpoint: "percentile" }), undefined, {
      embedder,
    }).chunk(d);
    checkInvariants(d, byPercentile, { ...config(), chunkSize: 600 });
    expect(byPercentile.length).toBeLessThan(chunks.length);
  });
});
