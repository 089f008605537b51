/**
 * The local provider on tiny real ONNX models built by the test: vectors
 * equal an independent computation (WordPiece ids → token matrix → masked
 * mean or CLS → L2), truncation at the tokenizer's limit, dimension from
 * config.json, prefixes, inference off the main thread, load errors.
 */
import { threadId, type Worker } from "node:worker_threads";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { EmbeddingError } from "../../src/embed/contract.js";
import { createEmbedder } from "../../src/embed/index.js";
import { DEFAULT_LOCAL_MODEL, LocalEmbedder } from "../../src/embed/local.js";
import { ConfigError } from "../../src/errors.js";
import { cosine } from "../conformance/embedder.js";
import { expectedEmbedding, testTokenIds, writeEmbeddingModel } from "../helpers/embed-fixtures.js";
import { tempDir, watchEventLoop } from "../helpers/helpers.js";

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

const TEXTS = [
  "The novel was written by a retired sailor.",
  "cats and dogs on the mat",
  "installing rust with cargo",
  "",
  "zebra",
  "the sea, the ship and the sailor?",
];

let dir: string;
let cleanup: () => void;
const open: LocalEmbedder[] = [];
function local(options: ConstructorParameters<typeof LocalEmbedder>[0]): LocalEmbedder {
  const e = new LocalEmbedder(options);
  open.push(e);
  return e;
}

beforeAll(() => {
  ({ dir, cleanup } = tempDir("kl-embed-local-"));
  writeEmbeddingModel(`${dir}/plain`);
  writeEmbeddingModel(`${dir}/short`, { modelMaxLength: 6 });
  writeEmbeddingModel(`${dir}/wide`, { hidden: 24 });
  writeEmbeddingModel(`${dir}/st-cls`, { stPooling: "cls" });
  writeEmbeddingModel(`${dir}/e5-small-v2`);
});
afterAll(async () => {
  await Promise.all(open.map((e) => e.close()));
  cleanup();
});

function expectClose(actual: Float32Array | undefined, expected: Float32Array, label: string): void {
  expect(actual, label).toHaveLength(expected.length);
  const a = actual as Float32Array;
  for (let i = 0; i < expected.length; i++)
    expect(a[i], `${label}[${i}]`).toBeCloseTo(expected[i] as number, 5);
}

describe("LocalEmbedder vectors", () => {
  it("the independent tokenizer agrees with the fixture vocabulary", () => {
    // [CLS] the novel was wr ##itten by a retired sailor . [SEP]
    expect(testTokenIds("The novel was written by a retired sailor.")).toEqual([
      2, 5, 19, 9, 20, 22, 10, 6, 23, 24, 16, 3,
    ]);
    expect(testTokenIds("cats zebra")).toEqual([2, 37, 35, 1, 3]);
  });

  it("mean-pools over the attention mask and L2-normalises (batches with padding)", async () => {
    const e = local({ model: `${dir}/plain`, batchSize: 4 });
    const vectors = await e.embedTexts(TEXTS);
    TEXTS.forEach((t, i) => {
      expectClose(vectors[i], expectedEmbedding(t), JSON.stringify(t));
    });
  });

  it("pools the [CLS] vector with pooling: cls, or as the folder's 1_Pooling/config.json says", async () => {
    const byOption = await local({ model: `${dir}/plain`, pooling: "cls" }).embedTexts(TEXTS);
    const byFolder = await local({ model: `${dir}/st-cls` }).embedTexts(TEXTS);
    TEXTS.forEach((t, i) => {
      const want = expectedEmbedding(t, { pooling: "cls" });
      expectClose(byOption[i], want, `option ${JSON.stringify(t)}`);
      expectClose(byFolder[i], want, `folder ${JSON.stringify(t)}`);
    });
    // An explicit option wins over the folder.
    const [mean] = await local({ model: `${dir}/st-cls`, pooling: "mean" }).embedTexts([TEXTS[0] as string]);
    expectClose(mean, expectedEmbedding(TEXTS[0] as string), "override");
  });

  it("truncates to model_max_length, maxLength or sentence_bert_config's max_seq_length, keeping [SEP]", async () => {
    const long = "the novel was written by a retired sailor and the cat sat on the mat";
    const [short] = await local({ model: `${dir}/short` }).embedTexts([long]);
    expectClose(short, expectedEmbedding(long, { maxLength: 6 }), "model_max_length 6");
    const [capped] = await local({ model: `${dir}/plain`, maxLength: 5 }).embedTexts([long]);
    expectClose(capped, expectedEmbedding(long, { maxLength: 5 }), "maxLength 5");
    expect(cosine(short as Float32Array, capped as Float32Array)).toBeLessThan(0.9999);
    writeEmbeddingModel(`${dir}/sbert`, {
      replace: { "sentence_bert_config.json": JSON.stringify({ max_seq_length: 7, do_lower_case: false }) },
    });
    const [sbert] = await local({ model: `${dir}/sbert` }).embedTexts([long]);
    expectClose(sbert, expectedEmbedding(long, { maxLength: 7 }), "sentence_bert_config max_seq_length 7");
  });

  it("takes the dimension from config.json's hidden_size before loading", async () => {
    const e = local({ model: `${dir}/wide` });
    expect(e.dimension).toBe(24);
    const [v] = await e.embedTexts(["cat"]);
    expectClose(v, expectedEmbedding("cat", { hidden: 24 }), "wide");
  });

  it("rejects output of another dimension than configured, naming provider, model, expected and actual", async () => {
    const e = local({ model: `${dir}/plain`, dimension: 384 });
    expect(e.dimension).toBe(384);
    const error = await e.embedTexts(["cat"]).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(EmbeddingError);
    expect((error as Error).message).toMatch(/^local embedder \(model ".*plain"\): /);
    expect((error as Error).message).toContain("dimension 16, expected 384 (the configured dimension)");
  });

  it("finds the dimension by loading the model when config.json has none", async () => {
    writeEmbeddingModel(`${dir}/no-hidden`, {
      replace: { "config.json": JSON.stringify({ model_type: "bert", architectures: ["BertModel"] }) },
    });
    const e = local({ model: `${dir}/no-hidden` });
    expect(e.dimension).toBe(0);
    expect(await e.resolveDimension()).toBe(16);
    expect(e.dimension).toBe(16);
  });

  it("applies e5's default prefixes: query: for queries, passage: for documents", async () => {
    const e = local({ model: `${dir}/e5-small-v2` });
    const [doc] = await e.embedTexts(["cat on the mat"]);
    expectClose(doc, expectedEmbedding("passage: cat on the mat"), "document");
    expectClose(await e.embedQuery("cat on the mat"), expectedEmbedding("query: cat on the mat"), "query");
    const plain = local({ model: `${dir}/e5-small-v2`, queryPrefix: "", documentPrefix: "" });
    expectClose(await plain.embedQuery("cat"), expectedEmbedding("cat"), "disabled");
  });
});

describe("LocalEmbedder threading", () => {
  it("runs inference in worker threads, not on the calling thread", async () => {
    const e = local({ model: `${dir}/plain`, workers: 2, batchSize: 8 });
    await e.embedTexts(Array.from({ length: 64 }, (_, i) => `cat ${i} on the mat`));
    const ids = e.workerThreadIds;
    expect(ids.length).toBeGreaterThanOrEqual(1);
    expect(ids.length).toBeLessThanOrEqual(2);
    expect(ids).not.toContain(threadId);
  });

  it("keeps the event loop of the calling thread running during a large job", async () => {
    const e = local({ model: `${dir}/plain`, batchSize: 32 });
    await e.embedTexts(["warm up"]);
    const texts = Array.from(
      { length: 4000 },
      (_, i) => `${i} the novel was written by a retired sailor on the sea with cargo ships and cats`,
    );
    const { result: vectors, ticks, longestGap, elapsed } = await watchEventLoop(() => e.embedTexts(texts));
    expect(vectors).toHaveLength(texts.length);
    // Tokenising and running 4,000 texts takes a while; the main thread stayed free meanwhile.
    expect(ticks).toBeGreaterThan(Math.min(10, elapsed / 20));
    expect(longestGap).toBeLessThan(Math.max(100, elapsed / 2));
  });
});

describe("LocalEmbedder worker lifecycle", () => {
  it("close() ends the worker threads", async () => {
    const e = new LocalEmbedder({ model: `${dir}/plain`, workers: 2 });
    const before = started.length;
    await e.embedTexts(["cat", "dog", "sea"]);
    const workers = started.slice(before);
    expect(workers).toHaveLength(2);
    await e.close();
    expect(workers.map((w) => w.threadId)).toEqual([-1, -1]);
  });

  it("a dead worker is replaced by the next call", async () => {
    const e = local({ model: `${dir}/plain` });
    const before = started.length;
    await e.embedTexts(["cat"]);
    await started[before]?.terminate(); // from outside the pool, as a crash would (while idle)
    const [v] = await e.embedTexts(["cat"]);
    expectClose(v, expectedEmbedding("cat"), "after the crash");
    expect(started.length - before).toBe(2);
  });
});

describe("LocalEmbedder errors and configuration", () => {
  it("names the missing files of a model folder, before starting workers", async () => {
    writeEmbeddingModel(`${dir}/partial`, { omit: ["onnx/model.onnx", "tokenizer.json"] });
    const error = await local({ model: `${dir}/partial` })
      .embedTexts(["cat"])
      .catch((err: unknown) => err);
    expect(error).toBeInstanceOf(EmbeddingError);
    expect((error as Error).message).toContain("lacks tokenizer.json, onnx/model.onnx");
    const missing = await local({ model: `${dir}/nowhere` })
      .embedQuery("cat")
      .catch((err: unknown) => err);
    expect((missing as Error).message).toMatch(/model folder ".*nowhere" does not exist/);
  });

  it("reports a model that fails to load, and loads it on a later call once fixed", async () => {
    writeEmbeddingModel(`${dir}/fixable`, { replace: { "onnx/model.onnx": "garbage" } });
    const e = local({ model: `${dir}/fixable`, workers: 2 });
    const error = await e.embedTexts(["cat", "dog"]).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(EmbeddingError);
    expect((error as Error).message).toMatch(/^local embedder .*cannot load the model of model folder/);
    writeEmbeddingModel(`${dir}/fixable`);
    const [v] = await e.embedTexts(["cat"]);
    expectClose(v, expectedEmbedding("cat"), "after fix");
  });

  it("does not download a Hugging Face id when downloads are disabled", async () => {
    const e = local({ model: "kl-test-org/surely-not-cached-model", allowDownload: false });
    const error = await e.embedTexts(["cat"]).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(EmbeddingError);
    expect((error as Error).message).toContain('Hugging Face model "kl-test-org/surely-not-cached-model"');
    expect((error as Error).message).toContain("downloads are disabled");
  });

  it("defaults to Xenova/all-MiniLM-L6-v2 (384-d) without loading anything", () => {
    const e = createEmbedder({ provider: "local" });
    expect(e.provider).toBe("local");
    expect(e.modelId).toBe(DEFAULT_LOCAL_MODEL);
    expect(e.dimension).toBe(384);
  });

  it("rejects invalid options with a ConfigError", () => {
    expect(() => new LocalEmbedder({ model: `${dir}/plain`, batchSize: 0 })).toThrow(ConfigError);
    expect(() => new LocalEmbedder({ model: `${dir}/plain`, workers: 1.5 })).toThrow(
      /workers must be an integer/,
    );
    expect(() => new LocalEmbedder({ model: `${dir}/plain`, pooling: "max" as "mean" })).toThrow(/pooling/);
    expect(() => new LocalEmbedder({ model: `${dir}/plain`, dtype: "fp8" as "fp32" })).toThrow(/dtype/);
  });
});
