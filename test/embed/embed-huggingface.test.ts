/**
 * Hugging Face embeddings against local servers speaking Text Embeddings
 * Inference's `/embed` and the Inference API's feature-extraction pipeline:
 * payload, optional/required token, `{ error, error_type }` errors, 503
 * "model loading" with estimated_time, token-level answers, prefixes.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { EmbeddingError } from "../../src/embed/contract.js";
import { HuggingFaceEmbedder, loadingDelayMs } from "../../src/embed/huggingface.js";
import { cosine } from "../conformance/embedder.js";
import { MOCK_KEYS, mockVector, teiResponder, unit } from "../helpers/embed-fixtures.js";
import { type MockServer, startMockServer } from "../helpers/rerank-fixtures.js";

let tei: MockServer;
let router: MockServer;
const ROUTED = "sentence-transformers/all-MiniLM-L6-v2";
const ROUTER_PATH = `/hf-inference/models/${ROUTED}/pipeline/feature-extraction`;
/** Sends the router's fixed URL to the local server. */
const redirect: typeof fetch = (url, init) =>
  fetch(String(url).replace("https://router.huggingface.co", router.url), init);

beforeAll(async () => {
  tei = await startMockServer(teiResponder({ dim: 12 }));
  router = await startMockServer(teiResponder({ dim: 384, key: MOCK_KEYS.hf, path: ROUTER_PATH }));
});
afterAll(async () => {
  await tei.close();
  await router.close();
});
beforeEach(() => {
  for (const s of [tei, router]) {
    s.requests.length = 0;
    s.script.length = 0;
  }
});
afterEach(() => {
  vi.unstubAllEnvs();
});

describe("HuggingFaceEmbedder with Text Embeddings Inference", () => {
  it("posts {inputs, normalize, truncate} to {baseUrl}/embed, without a key unless given", async () => {
    vi.stubEnv("HF_TOKEN", "");
    const e = new HuggingFaceEmbedder({ model: "BAAI/bge-m3", baseUrl: `${tei.url}/`, dimension: 12 });
    const vectors = await e.embedTexts(["alpha", "beta"]);
    const req = tei.requests[0];
    expect(req?.path).toBe("/embed");
    expect(req?.headers.authorization).toBeUndefined();
    expect(req?.body).toEqual({ inputs: ["alpha", "beta"], normalize: true, truncate: true });
    expect(cosine(vectors[1] as Float32Array, unit(mockVector("beta", 12, "tei")))).toBeGreaterThan(0.999999);
  });

  it("sends batches of 32 by default (TEI's max_client_batch_size) and reports TEI's 413 otherwise", async () => {
    const texts = Array.from({ length: 70 }, (_, i) => `t${i}`);
    const e = new HuggingFaceEmbedder({ model: "m", baseUrl: tei.url });
    await e.embedTexts(texts);
    expect(tei.requests.map((r) => (r.body as { inputs: string[] }).inputs.length)).toEqual([32, 32, 6]);
    const big = new HuggingFaceEmbedder({ model: "m", baseUrl: tei.url, batchSize: 64 });
    const error = await big.embedTexts(texts).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(EmbeddingError);
    expect((error as EmbeddingError).status).toBe(413);
    expect((error as Error).message).toBe(
      `huggingface embedder (model "m"): HTTP 413 from ${tei.url}/embed: batch size 64 > maximum allowed batch size 32`,
    );
  });

  it("sends the empty string as a space (TEI rejects empty inputs with 422)", async () => {
    const [v] = await new HuggingFaceEmbedder({ model: "m", baseUrl: tei.url }).embedTexts([""]);
    expect((tei.requests[0]?.body as { inputs: string[] } | undefined)?.inputs).toEqual([" "]);
    expect(v).toHaveLength(12);
    tei.script.push({ status: 422, body: { error: "`inputs` cannot be empty", error_type: "Empty" } });
    await expect(new HuggingFaceEmbedder({ model: "m", baseUrl: tei.url }).embedTexts(["x"])).rejects.toThrow(
      /HTTP 422 .*`inputs` cannot be empty$/,
    );
  });

  it("retries TEI's 429 (model overloaded) honouring Retry-After", async () => {
    tei.script.push({
      status: 429,
      headers: { "retry-after": "0.1" },
      body: { error: "Model is overloaded", error_type: "Overloaded" },
    });
    const t0 = performance.now();
    await new HuggingFaceEmbedder({ model: "m", baseUrl: tei.url, retryBaseDelayMs: 5000 }).embedTexts(["x"]);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(90);
    expect(tei.requests).toHaveLength(2);
  });

  it("applies e5 prefixes client-side: passage: for documents, query: for queries", async () => {
    const e = new HuggingFaceEmbedder({
      model: "intfloat/multilingual-e5-small",
      baseUrl: tei.url,
      dimension: 12,
    });
    await e.embedTexts(["doc"]);
    await e.embedQuery("question");
    expect(tei.requests.map((r) => (r.body as { inputs: string[] }).inputs)).toEqual([
      ["passage: doc"],
      ["query: question"],
    ]);
  });

  it("mean-pools a token-level answer ([batch][tokens][hidden])", async () => {
    tei.script.push({
      body: [
        [
          [1, 0],
          [0, 1],
        ],
        [[3, 4]],
      ],
    });
    const [a, b] = await new HuggingFaceEmbedder({ model: "m", baseUrl: tei.url }).embedTexts(["a", "b"]);
    expect(Array.from(a as Float32Array)).toEqual([Math.fround(Math.SQRT1_2), Math.fround(Math.SQRT1_2)]);
    expect(Array.from(b as Float32Array)).toEqual([Math.fround(0.6), Math.fround(0.8)]);
  });

  it("rejects a response that is not an array of vectors, or has the wrong count", async () => {
    tei.script.push({ body: { embeddings: [] } }, { body: [[1, 2]] });
    const e = new HuggingFaceEmbedder({ model: "m", baseUrl: tei.url });
    await expect(e.embedTexts(["x"])).rejects.toThrow(/expected an array of vectors/);
    await expect(e.embedTexts(["x", "y"])).rejects.toThrow(/expected 2 vectors, got 1/);
  });
});

describe("HuggingFaceEmbedder with the hosted Inference API", () => {
  it("posts to the router's feature-extraction pipeline with HF_TOKEN", async () => {
    vi.stubEnv("HF_TOKEN", MOCK_KEYS.hf);
    const e = new HuggingFaceEmbedder({ model: ROUTED, fetch: redirect });
    expect(e.dimension).toBe(384);
    await e.embedTexts(["x"]);
    expect(router.requests[0]?.path).toBe(ROUTER_PATH);
    expect(router.requests[0]?.headers.authorization).toBe(`Bearer ${MOCK_KEYS.hf}`);
  });

  it("waits for a loading model (503 with estimated_time), then succeeds", async () => {
    router.script.push({
      status: 503,
      body: { error: `Model ${ROUTED} is currently loading`, estimated_time: 0.25 },
    });
    const e = new HuggingFaceEmbedder({
      model: ROUTED,
      apiKey: MOCK_KEYS.hf,
      fetch: redirect,
      retryBaseDelayMs: 1,
    });
    const t0 = performance.now();
    const [v] = await e.embedTexts(["x"]);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(240);
    expect(router.requests).toHaveLength(2);
    expect(v).toHaveLength(384);
  });

  it("caps the loading wait at retryMaxDelayMs and reports the loading message when retries run out", async () => {
    for (let i = 0; i < 2; i++) {
      router.script.push({
        status: 503,
        body: { error: `Model ${ROUTED} is currently loading`, estimated_time: 600 },
      });
    }
    const e = new HuggingFaceEmbedder({
      model: ROUTED,
      apiKey: MOCK_KEYS.hf,
      fetch: redirect,
      maxRetries: 1,
      retryMaxDelayMs: 50,
    });
    const t0 = performance.now();
    await expect(e.embedTexts(["x"])).rejects.toThrow(
      /^huggingface embedder .*HTTP 503 .*is currently loading \(after 2 attempts\)$/,
    );
    expect(performance.now() - t0).toBeLessThan(2000);
  });

  it("reads estimated_time only from 503 JSON bodies", () => {
    expect(loadingDelayMs(503, '{"error":"loading","estimated_time":20.5}')).toBe(20500);
    expect(loadingDelayMs(503, "Service Unavailable")).toBeUndefined();
    expect(loadingDelayMs(500, '{"estimated_time":1}')).toBeUndefined();
  });

  it("needs a token for the hosted API", async () => {
    vi.stubEnv("HF_TOKEN", "");
    await expect(
      new HuggingFaceEmbedder({ model: ROUTED, fetch: redirect }).embedTexts(["x"]),
    ).rejects.toThrow(
      `huggingface embedder (model "${ROUTED}"): no API key: the hosted Inference API needs a token: set apiKey or the HF_TOKEN environment variable`,
    );
    expect(router.requests).toHaveLength(0);
  });
});
