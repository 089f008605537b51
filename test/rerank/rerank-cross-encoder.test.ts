/**
 * The cross-encoder on a real (tiny) ONNX model written by the test
 * (test/helpers/rerank-fixtures.ts): loaded through transformers.js and onnxruntime
 * like ms-marco-MiniLM-L-6-v2, with scores computed by hand from its weights.
 *
 * Test model: logit = Σ W[tok]·count_query(tok)·count_passage(tok) − 1.5 with
 * W = 2 for "novel", 1 for other content words and word pieces, 0.5 for
 * [SEP] (+0.5 whenever the passage keeps its closing [SEP]), 0 for stop words.
 *
 * The model runs in worker threads; the Worker class is wrapped (transparently)
 * so the tests can see the threads the reranker starts, stop them from outside
 * as a crash would, and check that close() ends them.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { threadId, type Worker } from "node:worker_threads";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { RerankError } from "../../src/rerank/contract.js";
import { CrossEncoderReranker, resolveModelSource, truncatePair } from "../../src/rerank/cross-encoder.js";
import { WorkerPool } from "../../src/workers/pool.js";
import { tempDir, watchEventLoop } from "../helpers/helpers.js";
import { expectedLogit, sigmoid, writeTestModel } from "../helpers/rerank-fixtures.js";

/** Every worker thread started in this file, in start order. */
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

/** Workers started by `run` (a worker's threadId becomes -1 once it has exited). */
async function workersStartedBy<T>(run: () => Promise<T>): Promise<{ result: T; workers: Worker[] }> {
  const before = started.length;
  const result = await run();
  return { result, workers: started.slice(before) };
}

const { dir, cleanup } = tempDir("kl-rerank-ce-");
afterAll(cleanup);
const MODEL = writeTestModel(join(dir, "ms-marco-test"));
const SHORT = writeTestModel(join(dir, "short"), { modelMaxLength: 16 });

const B30_QUERY = "who wrote the novel";
const B30_DOCS = [
  "A recipe for lentil soup.",
  "The novel was written by a retired sailor.",
  "Reviews of the novel were mixed.",
  "The novel was written by a retired sailor.",
];

describe("CrossEncoderReranker on the test model", () => {
  const reranker = new CrossEncoderReranker({ model: MODEL, batchSize: 3 });
  afterAll(() => reranker.close());

  it("is named after the model folder and reads probabilities", () => {
    expect(reranker.name).toBe("cross-encoder:ms-marco-test");
    expect(reranker.scale).toBe("probability");
    expect(reranker.source).toEqual({ kind: "folder", location: MODEL });
  });

  it("gives the hand-computed sigmoid(logit) scores on B30", async () => {
    // doc 1/3: novel (2) + "wr" piece shared by wrote/written (1) + [SEP] (0.5) − 1.5 = 2
    // doc 2:   novel (2) + [SEP] (0.5) − 1.5 = 1;  doc 0: [SEP] only → −1
    expect(
      expectedLogit(["who", "wr", "##ote", "the", "novel"], ["the", "novel", "was", "wr", "##itten"]),
    ).toBe(2);
    const out = await reranker.rerank(B30_QUERY, B30_DOCS);
    expect(out.map((r) => r.index)).toEqual([1, 3, 2, 0]);
    const scores = Object.fromEntries(out.map((r) => [r.index, r.score]));
    expect(scores[1]).toBeCloseTo(sigmoid(2), 6); // 0.880797
    expect(scores[3]).toBe(scores[1]);
    expect(scores[2]).toBeCloseTo(sigmoid(1), 6); // 0.731059
    expect(scores[0]).toBeCloseTo(sigmoid(-1), 6); // 0.268941
  });

  it("counts repeated words and ignores case, and a non-matching passage gets sigmoid(−1)", async () => {
    const out = await reranker.rerank("Cargo SHIPS", [
      "cargo cargo ships",
      "the cat is on the mat",
      "Ships at sea.",
    ]);
    const s = new Map(out.map((r) => [r.index, r.score]));
    // cargo×2 + ship + ##s + [SEP] − 1.5 = 2 + 1 + 1 + 0.5 − 1.5 = 3
    expect(s.get(0)).toBeCloseTo(sigmoid(3), 6);
    expect(s.get(1)).toBeCloseTo(sigmoid(-1), 6);
    // ship + ##s + [SEP] − 1.5 = 1
    expect(s.get(2)).toBeCloseTo(sigmoid(1), 6);
  });

  it("gives the same scores whatever the batch size (padding is masked)", async () => {
    const docs = [
      ...B30_DOCS,
      "cargo ships at sea",
      "install rust with cargo",
      "the the the the the the the the the the the novel",
    ];
    const expected = await reranker.rerank(B30_QUERY, docs);
    for (const batchSize of [1, 2, 64]) {
      const other = new CrossEncoderReranker({ model: MODEL, batchSize });
      expect(await other.rerank(B30_QUERY, docs)).toEqual(expected);
      await other.close();
    }
  });

  it("is fast once loaded", async () => {
    await reranker.load();
    const t0 = performance.now();
    await reranker.rerank(
      B30_QUERY,
      Array.from({ length: 50 }, (_, i) => `${B30_DOCS[i % 4]} ${i}`),
    );
    expect(performance.now() - t0).toBeLessThan(1000);
  });
});

describe("truncation to the model's maximum length (longest_first, [SEP] kept)", () => {
  // model_max_length 16; the query "who wrote the novel" is [CLS] + 5 pieces + [SEP] = 7 tokens.
  const short = new CrossEncoderReranker({ model: SHORT });
  afterAll(() => short.close());

  it("cuts the end of a long passage but keeps its closing [SEP]", async () => {
    const late = `${"a ".repeat(10)}novel`; // 11 pieces + [SEP] → 19 tokens: "novel" is cut
    const early = `novel ${"a ".repeat(10)}`; // "novel" survives
    const out = await short.rerank(B30_QUERY, [late, early]);
    const s = new Map(out.map((r) => [r.index, r.score]));
    // late: only the passage [SEP] matches → −1 (without [SEP] it would be −1.5; untruncated 1)
    expect(s.get(0)).toBeCloseTo(sigmoid(-1), 6);
    expect(s.get(1)).toBeCloseTo(sigmoid(1), 6);
  });

  it("cuts a long query too (longest first), keeping the passage", async () => {
    const query = `novel ${"a ".repeat(20)}`; // 21 pieces: truncated to 12, the passage "novel" stays
    const out = await short.rerank(query, ["novel"]);
    expect(out[0]?.score).toBeCloseTo(sigmoid(2 + 0.5 - 1.5), 6);
  });

  it("honours a smaller maxLength option", async () => {
    const tight = new CrossEncoderReranker({ model: MODEL, maxLength: 9 });
    // [CLS] who wr ##ote the novel [SEP] | the novel … → query 5, passage 10 pieces; keep 9 tokens:
    // passage cut to 1 piece ("the") + [SEP] → only [SEP] matches.
    const out = await tight.rerank(B30_QUERY, ["The novel was written by a retired sailor."]);
    expect(out[0]?.score).toBeCloseTo(sigmoid(-1), 6);
    await tight.close();
  });

  it("truncatePair removes from the longer side and keeps the special tokens", () => {
    // [CLS]=2 a1 a2 [SEP]=3 b1..b5 [SEP]=3
    const ids = [2, 11, 12, 3, 21, 22, 23, 24, 25, 3];
    const enc = {
      input_ids: ids,
      attention_mask: ids.map(() => 1),
      token_type_ids: [0, 0, 0, 0, 1, 1, 1, 1, 1, 1],
    };
    const cut = truncatePair(enc, [11, 12], [21, 22, 23, 24, 25], 7);
    expect(cut.input_ids).toEqual([2, 11, 12, 3, 21, 22, 3]);
    expect(cut.token_type_ids).toEqual([0, 0, 0, 0, 1, 1, 1]);
    expect(cut.attention_mask).toEqual([1, 1, 1, 1, 1, 1, 1]);
    // Both sides shrink once they are equally long.
    expect(truncatePair(enc, [11, 12], [21, 22, 23, 24, 25], 5).input_ids).toEqual([2, 11, 3, 21, 3]);
    // Unchanged when it fits.
    expect(truncatePair(enc, [11, 12], [21, 22, 23, 24, 25], 10)).toBe(enc);
  });
});

describe("loading errors name the folder", () => {
  it("lists missing files", async () => {
    const folder = writeTestModel(join(dir, "incomplete"), { omit: ["tokenizer.json", "onnx/model.onnx"] });
    const r = new CrossEncoderReranker({ model: folder });
    const err = await r.rerank("q", ["d"]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RerankError);
    expect((err as Error).message).toContain(`model folder "${folder}"`);
    expect((err as Error).message).toMatch(/lacks tokenizer\.json, onnx\/model\.onnx/);
    // A missing quantized file is named when that dtype is asked for.
    const q8 = new CrossEncoderReranker({ model: MODEL, dtype: "q8" });
    await expect(q8.load()).rejects.toThrow(/lacks onnx\/model_quantized\.onnx/);
  });

  it("reports a folder that does not exist", async () => {
    const missing = join(dir, "nope", "ms-marco-MiniLM-L-6-v2");
    const r = new CrossEncoderReranker({ model: missing });
    expect(r.name).toBe("cross-encoder:ms-marco-MiniLM-L-6-v2");
    await expect(r.load()).rejects.toThrow(`model folder "${missing}" does not exist`);
  });

  it("reports a model file onnxruntime cannot read, and recovers once the folder is fixed", async () => {
    const folder = writeTestModel(join(dir, "corrupt"), { replace: { "onnx/model.onnx": "not a model" } });
    const r = new CrossEncoderReranker({ model: folder });
    const err = await r.load().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RerankError);
    expect((err as Error).message).toMatch(
      new RegExp(`cannot load the model of model folder "${folder}": .+`),
    );
    writeTestModel(folder);
    await expect(r.rerank(B30_QUERY, B30_DOCS, { topN: 1 })).resolves.toEqual([
      { index: 1, score: expect.closeTo(sigmoid(2), 6) },
    ]);
    await r.close();
  });

  it("reports a JSON file that does not parse, and a tokenizer the library rejects", async () => {
    const folder = writeTestModel(join(dir, "badtok"));
    writeFileSync(join(folder, "tokenizer.json"), "{");
    await expect(new CrossEncoderReranker({ model: folder }).load()).rejects.toThrow(
      /^cross-encoder:badtok: model folder ".*badtok": tokenizer\.json is not valid JSON \(.+\)$/,
    );
    writeFileSync(join(folder, "tokenizer.json"), JSON.stringify({ model: { type: "NoSuchModel" } }));
    await expect(new CrossEncoderReranker({ model: folder }).load()).rejects.toThrow(
      /^cross-encoder:badtok: cannot load the tokenizer of model folder ".*badtok": .+/,
    );
  });

  it("reads a two-label head as softmax of the last label, and rejects three labels", async () => {
    const two = new CrossEncoderReranker({ model: writeTestModel(join(dir, "two"), { labels: 2 }) });
    const out = await two.rerank(B30_QUERY, B30_DOCS);
    expect(out.map((r) => r.index)).toEqual([1, 3, 2, 0]);
    expect(out[0]?.score).toBeCloseTo(sigmoid(2), 6);
    await two.close();
    const three = new CrossEncoderReranker({ model: writeTestModel(join(dir, "three"), { labels: 3 }) });
    await expect(three.rerank(B30_QUERY, B30_DOCS)).rejects.toThrow(
      /^cross-encoder:three: expected a model with 1 or 2 labels, got 3$/,
    );
    await three.close();
  });

  it("validates options", () => {
    expect(() => new CrossEncoderReranker({ model: MODEL, batchSize: 0 })).toThrow(/batchSize/);
    expect(() => new CrossEncoderReranker({ model: MODEL, maxLength: 2 })).toThrow(/maxLength/);
    expect(() => new CrossEncoderReranker({ model: MODEL, dtype: "fp64" as "fp32" })).toThrow(/dtype/);
  });
});

describe("worker threads", () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it("scores in a worker thread, never on the calling thread", async () => {
    const r = new CrossEncoderReranker({ model: MODEL });
    const { result, workers } = await workersStartedBy(() => r.rerank(B30_QUERY, B30_DOCS));
    expect(result.map((x) => x.index)).toEqual([1, 3, 2, 0]);
    expect(workers).toHaveLength(1);
    expect(r.workerThreadIds).toEqual([workers[0]?.threadId]);
    expect(r.workerThreadIds).not.toContain(threadId);
    await r.close();
  });

  it("starts no thread before the first call, nor for an empty list", async () => {
    const { workers } = await workersStartedBy(async () => {
      const r = new CrossEncoderReranker({ model: MODEL });
      await expect(r.rerank(B30_QUERY, [])).resolves.toEqual([]);
      await r.close();
    });
    expect(workers).toHaveLength(0);
  });

  it("keeps the event loop of the calling thread running during a large call", async () => {
    const r = new CrossEncoderReranker({ model: MODEL, batchSize: 32 });
    await r.load();
    const docs = Array.from(
      { length: 6000 },
      (_, i) => `${i} the novel was written by a retired sailor on the sea with cargo ships and cats`,
    );
    const { result, ticks, longestGap, elapsed } = await watchEventLoop(() => r.rerank(B30_QUERY, docs));
    expect(result).toHaveLength(docs.length);
    // Tokenising and scoring 6,000 pairs takes a while; the calling thread stayed free meanwhile.
    expect(ticks).toBeGreaterThan(Math.min(10, elapsed / 20));
    expect(longestGap).toBeLessThan(Math.max(100, elapsed / 2));
    await r.close();
  });

  it("never loads transformers.js on the calling thread", async () => {
    vi.resetModules();
    vi.doMock("@huggingface/transformers", () => {
      throw new Error("transformers.js was imported on the calling thread");
    });
    try {
      const { CrossEncoderReranker: Fresh } = await import("../../src/rerank/cross-encoder.js");
      const r = new Fresh({ model: MODEL });
      const out = await r.rerank(B30_QUERY, B30_DOCS, { topN: 1 });
      expect(out[0]?.score).toBeCloseTo(sigmoid(2), 6);
      await r.close();
    } finally {
      vi.doUnmock("@huggingface/transformers");
      vi.resetModules();
    }
  });

  it("loads once for concurrent first calls", async () => {
    const warm = vi.spyOn(WorkerPool.prototype, "warm");
    const r = new CrossEncoderReranker({ model: MODEL, workers: 2 });
    const { result, workers } = await workersStartedBy(() =>
      Promise.all(Array.from({ length: 8 }, () => r.rerank(B30_QUERY, B30_DOCS))),
    );
    expect(warm).toHaveBeenCalledTimes(1);
    expect(workers).toHaveLength(2);
    for (const out of result) expect(out).toEqual(result[0]);
    expect(result[0]?.[0]?.score).toBeCloseTo(sigmoid(2), 6);
    await r.close();
  });

  it("spreads batches over several workers with the same scores", async () => {
    const docs = Array.from({ length: 40 }, (_, i) => `${B30_DOCS[i % 4]} ${"cargo ".repeat(i % 5)}${i}`);
    const one = new CrossEncoderReranker({ model: MODEL, batchSize: 4 });
    const two = new CrossEncoderReranker({ model: MODEL, batchSize: 4, workers: 2 });
    const expected = await one.rerank(B30_QUERY, docs);
    expect(await two.rerank(B30_QUERY, docs)).toEqual(expected);
    expect(two.workerThreadIds).toHaveLength(2);
    await Promise.all([one.close(), two.close()]);
  });

  it("close() rejects a call in flight and ends the workers; a later call starts again", async () => {
    const r = new CrossEncoderReranker({ model: MODEL, batchSize: 8 });
    const { workers } = await workersStartedBy(() => r.load());
    expect(workers).toHaveLength(1);
    const pending = r
      .rerank(
        B30_QUERY,
        Array.from({ length: 3000 }, (_, i) => `${i} cargo ships at sea`),
      )
      .catch((e: unknown) => e);
    await new Promise((resolve) => setTimeout(resolve, 20));
    await r.close();
    const error = await pending;
    expect(error).toBeInstanceOf(RerankError);
    expect((error as Error).message).toBe(
      `cross-encoder:ms-marco-test: model folder "${MODEL}": the cross-encoder workers were closed`,
    );
    expect(workers[0]?.threadId).toBe(-1); // the thread has exited
    const again = await r.rerank(B30_QUERY, B30_DOCS, { topN: 1 });
    expect(again[0]?.score).toBeCloseTo(sigmoid(2), 6);
    await r.close();
  });

  it("a dead worker is replaced by the next call", async () => {
    const r = new CrossEncoderReranker({ model: MODEL });
    const { workers } = await workersStartedBy(() => r.load());
    // Killed from outside the pool, as a crash would (while idle: a thread ended
    // inside a native onnxruntime call takes the process down with it).
    await workers[0]?.terminate();
    const { result, workers: replacements } = await workersStartedBy(() => r.rerank(B30_QUERY, B30_DOCS));
    expect(replacements).toHaveLength(1);
    expect(result.map((x) => x.index)).toEqual([1, 3, 2, 0]);
    expect(result[0]?.score).toBeCloseTo(sigmoid(2), 6);
    await r.close();
  });

  it("validates the workers option", () => {
    expect(() => new CrossEncoderReranker({ model: MODEL, workers: 0 })).toThrow(/workers/);
    expect(() => new CrossEncoderReranker({ model: MODEL, workers: 1.5 })).toThrow(/workers/);
  });
});

describe("resolveModelSource", () => {
  it("tells folders from Hugging Face ids", () => {
    expect(resolveModelSource(MODEL)).toEqual({ kind: "folder", location: MODEL });
    expect(resolveModelSource("cross-encoder/ms-marco-MiniLM-L-6-v2")).toEqual({
      kind: "hub",
      location: "cross-encoder/ms-marco-MiniLM-L-6-v2",
    });
    expect(resolveModelSource("./models/x").kind).toBe("folder");
    expect(resolveModelSource("./models/x").location).toBe(join(process.cwd(), "models/x"));
    expect(resolveModelSource("/opt/models/x")).toEqual({ kind: "folder", location: "/opt/models/x" });
    expect(resolveModelSource("~/models/x").kind).toBe("folder");
  });
});
