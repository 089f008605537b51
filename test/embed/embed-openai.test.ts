/**
 * OpenAI embeddings against a local node:http server speaking its wire
 * format: request shape, bearer key, index order, batching by count and by
 * tokens, 429 + Retry-After, 5xx retries, error bodies, over-long inputs
 * (split-and-average and truncate), dimensions, malformed responses.
 */
import { decode, encode } from "gpt-tokenizer/encoding/cl100k_base";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { EmbeddingError } from "../../src/embed/contract.js";
import { OpenAiEmbedder, type OpenAiEmbedderOptions } from "../../src/embed/openai.js";
import { OpenAiCompatibleEmbedder } from "../../src/embed/openai-compatible.js";
import { ConfigError } from "../../src/errors.js";
import { cosine } from "../conformance/embedder.js";
import { cl100kCount, MOCK_KEYS, mockVector, openAiResponder, unit } from "../helpers/embed-fixtures.js";
import { type MockServer, startMockServer } from "../helpers/rerank-fixtures.js";

let server: MockServer;
beforeAll(async () => {
  server = await startMockServer(openAiResponder());
});
afterAll(() => server.close());
beforeEach(() => {
  server.requests.length = 0;
  server.script.length = 0;
});
afterEach(() => {
  vi.unstubAllEnvs();
});

const MODEL = "text-embedding-3-small";

function openai(extra: Partial<OpenAiEmbedderOptions> = {}): OpenAiEmbedder {
  return new OpenAiEmbedder({
    model: MODEL,
    apiKey: MOCK_KEYS.openai,
    baseUrl: `${server.url}/v1`,
    retryBaseDelayMs: 1,
    ...extra,
  });
}

/** What the mock server's "model" gives `text`, normalised. */
const expected = (text: string, dim = 1536, model = MODEL) => unit(mockVector(text, dim, model));

const inputsOf = (i: number): string[] =>
  (server.requests[i]?.body as { input: string[] } | undefined)?.input ?? [];

describe("OpenAiEmbedder requests", () => {
  it("posts {model, input, encoding_format} with the bearer key and maps data[] by index", async () => {
    const texts = ["alpha", "beta", "gamma"];
    const vectors = await openai().embedTexts(texts);
    expect(server.requests).toHaveLength(1);
    const req = server.requests[0];
    expect(req?.method).toBe("POST");
    expect(req?.path).toBe("/v1/embeddings");
    expect(req?.headers.authorization).toBe(`Bearer ${MOCK_KEYS.openai}`);
    expect(req?.headers["content-type"]).toBe("application/json");
    expect(req?.body).toEqual({ model: MODEL, input: texts, encoding_format: "float" });
    // The mock answers data[] in reverse order; the index field decides.
    texts.forEach((t, i) => {
      expect(cosine(vectors[i] as Float32Array, expected(t))).toBeGreaterThan(0.999999);
    });
  });

  it("with encodingFormat base64, asks for base64 and reads float32 bytes: the same vectors as float", async () => {
    const texts = ["alpha", "beta", "gamma"];
    const asFloat = await openai().embedTexts(texts);
    const asBase64 = await openai({ encodingFormat: "base64" }).embedTexts(texts);
    expect(server.requests[1]?.body).toEqual({ model: MODEL, input: texts, encoding_format: "base64" });
    expect(asBase64.map((v) => [...v])).toEqual(asFloat.map((v) => [...v]));
    expect(() => openai({ encodingFormat: "hex" as "base64" })).toThrow(
      /encodingFormat must be "float" or "base64", got hex/,
    );
  });

  it("knows the dimension of OpenAI models without a call", () => {
    expect(openai().dimension).toBe(1536);
    expect(openai({ model: "text-embedding-3-large" }).dimension).toBe(3072);
    expect(openai({ model: "text-embedding-ada-002" }).dimension).toBe(1536);
    expect(openai({ dimension: 256 }).dimension).toBe(256);
    expect(server.requests).toHaveLength(0);
  });

  it("sends dimensions for text-embedding-3 models and checks the vectors against it", async () => {
    const [v] = await openai({ dimension: 256 }).embedTexts(["short"]);
    expect(server.requests[0]?.body).toMatchObject({ dimensions: 256 });
    expect(v).toHaveLength(256);
  });

  it("rejects vectors of another dimension, naming provider, model, expected and actual", async () => {
    // ada-002 does not take `dimensions`, so the server answers 1536-d vectors.
    const e = openai({ model: "text-embedding-ada-002", dimension: 512 });
    const error = await e.embedTexts(["x"]).catch((err: unknown) => err);
    expect(server.requests[0]?.body).not.toHaveProperty("dimensions");
    expect(error).toBeInstanceOf(EmbeddingError);
    expect((error as Error).message).toBe(
      'openai embedder (model "text-embedding-ada-002"): returned vectors of dimension 1536, expected 512 ' +
        "(the configured dimension); set `dimension` to the model's real output length if this model is meant to be used",
    );
  });

  it("uses https://api.openai.com/v1 and OPENAI_API_KEY by default", async () => {
    vi.stubEnv("OPENAI_API_KEY", "sk-from-env");
    const seen: { url: string; auth: string | null }[] = [];
    const fake: typeof fetch = async (url, init) => {
      seen.push({ url: String(url), auth: new Headers(init?.headers).get("authorization") });
      return new Response(
        JSON.stringify({ object: "list", data: [{ object: "embedding", index: 0, embedding: [3, 4] }] }),
        { status: 200, headers: { "content-type": "application/json" } },
      );
    };
    const e = new OpenAiEmbedder({ model: "my-fine-tune", fetch: fake });
    const [v] = await e.embedTexts(["hi"]);
    expect(seen).toEqual([{ url: "https://api.openai.com/v1/embeddings", auth: "Bearer sk-from-env" }]);
    expect(Array.from(v as Float32Array)).toEqual([0.6000000238418579, 0.800000011920929]);
    expect(e.dimension).toBe(2);
  });

  it("fails before any request without an API key for api.openai.com", async () => {
    vi.stubEnv("OPENAI_API_KEY", "");
    let called = false;
    const e = new OpenAiEmbedder({
      model: MODEL,
      fetch: async () => {
        called = true;
        return new Response("{}");
      },
    });
    await expect(e.embedTexts(["x"])).rejects.toThrow(
      'openai embedder (model "text-embedding-3-small"): no API key: set apiKey or the OPENAI_API_KEY environment variable',
    );
    expect(called).toBe(false);
  });
});

describe("OpenAiEmbedder batching", () => {
  it("sends batchSize inputs per request (default 96), in order", async () => {
    const texts = Array.from({ length: 250 }, (_, i) => `text number ${i}`);
    const vectors = await openai().embedTexts(texts);
    expect(server.requests.map((r) => (r.body as { input: string[] }).input.length)).toEqual([96, 96, 58]);
    expect([...inputsOf(0), ...inputsOf(1), ...inputsOf(2)]).toEqual(texts);
    for (const i of [0, 95, 96, 200, 249]) {
      expect(cosine(vectors[i] as Float32Array, expected(texts[i] as string))).toBeGreaterThan(0.999999);
    }
    server.requests.length = 0;
    await openai({ batchSize: 100 }).embedTexts(texts);
    expect(server.requests.map((r) => inputsOf(server.requests.indexOf(r)).length)).toEqual([100, 100, 50]);
  });

  it("also closes a batch before it would exceed maxBatchTokens", async () => {
    // ~3,000-character texts: about 600 tokens each.
    const texts = Array.from({ length: 6 }, (_, i) => `${i} ${"lorem ipsum dolor sit amet ".repeat(110)}`);
    const tokens = texts.map(cl100kCount);
    await openai({ maxBatchTokens: 1500 }).embedTexts(texts);
    const sizes = server.requests.map((_, i) => inputsOf(i).length);
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(6);
    let k = 0;
    for (const size of sizes) {
      const sum = tokens.slice(k, k + size).reduce((a, b) => a + b, 0);
      expect(sum).toBeLessThanOrEqual(1500);
      k += size;
    }
    expect(sizes).toEqual([2, 2, 2]);
  });

  it("sends the empty string as a single space (the API rejects empty inputs)", async () => {
    const [v] = await openai().embedTexts([""]);
    expect(inputsOf(0)).toEqual([" "]);
    expect(cosine(v as Float32Array, expected(" "))).toBeGreaterThan(0.999999);
  });
});

describe("OpenAiEmbedder long inputs (8,191-token limit, cl100k_base)", () => {
  // ~20,000 tokens of varied text.
  const long = Array.from({ length: 2500 }, (_, i) => `word${i % 97} and more text number ${i}.`).join(" ");

  it("splits an over-long text into near-equal token windows and returns their token-weighted mean", async () => {
    const ids = encode(long);
    expect(ids.length).toBeGreaterThan(2 * 8191);
    const [v] = await openai().embedTexts(["short one", long, "short two"]);
    const sent = inputsOf(0);
    expect(server.requests).toHaveLength(1);
    expect(sent).toHaveLength(2 + Math.ceil(ids.length / 8191));
    const windows = sent.slice(1, -1);
    for (const w of windows) expect(cl100kCount(w)).toBeLessThanOrEqual(8191);
    expect(windows.join("")).toBe(long);
    // Independent expectation: weighted mean of the windows' (normalised) vectors.
    const mean = new Float64Array(1536);
    for (const w of windows) {
      const u = expected(w);
      const n = cl100kCount(w);
      for (let d = 0; d < 1536; d++) mean[d] = (mean[d] as number) + (u[d] as number) * n;
    }
    const [, vLong] = await openai().embedTexts(["short one", long]);
    expect(cosine(vLong as Float32Array, unit(Array.from(mean)))).toBeGreaterThan(0.99999);
    expect(v).toHaveLength(1536);
  });

  it("with longText: truncate, embeds only the first 8,191 tokens", async () => {
    const [v] = await openai({ longText: "truncate" }).embedTexts([long]);
    const sent = inputsOf(0);
    expect(sent).toHaveLength(1);
    expect(cl100kCount(sent[0] as string)).toBe(8191);
    expect(sent[0]).toBe(decode(encode(long).slice(0, 8191)));
    expect(cosine(v as Float32Array, expected(sent[0] as string))).toBeGreaterThan(0.999999);
  });

  it("never sends an input the server would reject for length (multi-byte text)", async () => {
    const emoji = "😀日本語テキスト".repeat(3000);
    const vectors = await openai().embedTexts([emoji]);
    expect(vectors).toHaveLength(1);
    for (const w of inputsOf(0)) expect(cl100kCount(w)).toBeLessThanOrEqual(8191);
  });
});

describe("OpenAiEmbedder errors", () => {
  it("retries a 429 after the Retry-After delay, then succeeds", async () => {
    server.script.push({
      status: 429,
      headers: { "retry-after": "0.2" },
      body: { error: { message: "Rate limit reached", type: "requests", code: "rate_limit_exceeded" } },
    });
    const t0 = performance.now();
    const [v] = await openai({ retryBaseDelayMs: 5000 }).embedTexts(["x"]);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(190);
    expect(server.requests).toHaveLength(2);
    expect(v).toHaveLength(1536);
  });

  it("gives up after maxRetries on 5xx, with the API's error message", async () => {
    for (let i = 0; i < 3; i++) {
      server.script.push({
        status: 503,
        body: { error: { message: "The server is overloaded", type: "server_error" } },
      });
    }
    const error = await openai({ maxRetries: 2 })
      .embedTexts(["x"])
      .catch((err: unknown) => err);
    expect(server.requests).toHaveLength(3);
    expect(error).toBeInstanceOf(EmbeddingError);
    expect((error as EmbeddingError).status).toBe(503);
    expect((error as Error).message).toBe(
      `openai embedder (model "${MODEL}"): HTTP 503 from ${server.url}/v1/embeddings: The server is overloaded (after 3 attempts)`,
    );
  });

  it("reports a 401 at once with error.message, without the key", async () => {
    const error = await openai({ apiKey: "sk-wrong-secret" })
      .embedTexts(["x"])
      .catch((err: unknown) => err);
    expect(server.requests).toHaveLength(1);
    expect((error as EmbeddingError).status).toBe(401);
    expect((error as Error).message).toMatch(/^openai embedder .*HTTP 401 .*Incorrect API key provided/);
    expect((error as Error).message).not.toContain("sk-wrong-secret");
  });

  it("reports a 400 (unknown dimensions for a model) with the API's message", async () => {
    const e = new OpenAiCompatibleEmbedder({
      model: "text-embedding-ada-002",
      baseUrl: `${server.url}/v1`,
      apiKey: MOCK_KEYS.openai,
      dimension: 512,
      sendDimensions: true,
    });
    await expect(e.embedTexts(["x"])).rejects.toThrow(
      /^openai-compatible embedder .*HTTP 400 .*This model does not support specifying dimensions\.$/,
    );
  });

  it.each([
    ["no data array", { object: "list" }, /no data array/],
    ["too few embeddings", { data: [] }, /expected 1 embeddings, got 0/],
    ["index out of range", { data: [{ index: 3, embedding: [1] }] }, /index 3 is out of range/],
    ["base64 of 3 bytes", { data: [{ index: 0, embedding: "AAAA" }] }, /base64 embedding of 3 bytes/],
    ["non-numeric vector", { data: [{ index: 0, embedding: [1, "x"] }] }, /component 1 is "x"/],
    ["not JSON", "<html>oops</html>", /not JSON/],
  ])("rejects a malformed response: %s", async (_label, body, message) => {
    server.script.push({ body });
    const error = await openai({ dimension: 1 })
      .embedTexts(["x"])
      .catch((err: unknown) => err);
    expect(error).toBeInstanceOf(EmbeddingError);
    expect((error as Error).message).toMatch(/^openai embedder \(model "text-embedding-3-small"\): /);
    expect((error as Error).message).toMatch(message);
  });

  it("rejects invalid options with a ConfigError naming the provider", () => {
    expect(() => openai({ batchSize: 0 })).toThrow(ConfigError);
    expect(() => openai({ batchSize: 5000 })).toThrow(/openai embedder: batchSize must be at most 2048/);
    expect(() => openai({ dimension: -1 })).toThrow(/dimension must be a positive integer/);
    expect(() => openai({ longText: "drop" as "mean" })).toThrow(/longText/);
    expect(() => new OpenAiCompatibleEmbedder({ model: "m", baseUrl: "" })).toThrow(/baseUrl is required/);
  });
});

describe("OpenAiCompatibleEmbedder", () => {
  it("sends no key unless given, never reads OPENAI_API_KEY, and discovers the dimension", async () => {
    vi.stubEnv("OPENAI_API_KEY", "sk-must-not-leak");
    const keyless = await startMockServer(openAiResponder({ key: null, otherDim: 7 }));
    try {
      const e = new OpenAiCompatibleEmbedder({ model: "nomic-ai/some-model", baseUrl: `${keyless.url}/v1` });
      expect(e.provider).toBe("openai-compatible");
      expect(e.dimension).toBe(0);
      expect(await e.resolveDimension()).toBe(7);
      expect(keyless.requests).toHaveLength(1);
      expect(keyless.requests[0]?.headers.authorization).toBeUndefined();
      expect(await e.resolveDimension()).toBe(7);
      expect(keyless.requests).toHaveLength(1);
      // A later answer of another length is an error.
      keyless.script.push({ body: { data: [{ index: 0, embedding: [1, 2, 3] }] } });
      await expect(e.embedTexts(["x"])).rejects.toThrow(
        "returned vectors of dimension 3, expected 7 (the length of the model's first vectors)",
      );
    } finally {
      await keyless.close();
    }
  });

  it("leaves long inputs to the server unless the model is an OpenAI one or maxInputTokens is set", async () => {
    const long = "lorem ipsum ".repeat(3000); // ~6,000 tokens
    const free = new OpenAiCompatibleEmbedder({
      model: "gte-large",
      baseUrl: `${server.url}/v1`,
      apiKey: MOCK_KEYS.openai,
      dimension: 8,
    });
    await free.embedTexts([long]);
    expect(inputsOf(0)).toEqual([long]);
    server.requests.length = 0;
    const limited = new OpenAiCompatibleEmbedder({
      model: "gte-large",
      baseUrl: `${server.url}/v1`,
      apiKey: MOCK_KEYS.openai,
      dimension: 8,
      maxInputTokens: 512,
      longText: "truncate",
    });
    await limited.embedTexts([long]);
    expect(cl100kCount(inputsOf(0)[0] as string)).toBe(512);
  });
});
