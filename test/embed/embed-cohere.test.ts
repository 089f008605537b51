/**
 * Cohere embed v2 against a local node:http server speaking its wire format:
 * request shape and input types, bearer key, the 96-text batch limit,
 * 429 + Retry-After, `{ message }` errors, known and requested dimensions.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { CohereEmbedder, type CohereEmbedderOptions } from "../../src/embed/cohere.js";
import { EmbeddingError } from "../../src/embed/contract.js";
import { ConfigError } from "../../src/errors.js";
import { cosine } from "../conformance/embedder.js";
import { cohereEmbedResponder, MOCK_KEYS, mockVector, unit } from "../helpers/embed-fixtures.js";
import { type MockServer, startMockServer } from "../helpers/rerank-fixtures.js";

let server: MockServer;
beforeAll(async () => {
  server = await startMockServer(cohereEmbedResponder);
});
afterAll(() => server.close());
beforeEach(() => {
  server.requests.length = 0;
  server.script.length = 0;
});
afterEach(() => {
  vi.unstubAllEnvs();
});

const MODEL = "embed-english-v3.0";

function cohere(extra: Partial<CohereEmbedderOptions> = {}): CohereEmbedder {
  return new CohereEmbedder({
    model: MODEL,
    apiKey: MOCK_KEYS.cohere,
    baseUrl: server.url,
    retryBaseDelayMs: 1,
    ...extra,
  });
}

const bodyOf = (i: number) =>
  server.requests[i]?.body as { texts: string[]; input_type: string; [k: string]: unknown };

describe("CohereEmbedder", () => {
  it("posts {model, texts, input_type, embedding_types, truncate} and reads embeddings.float", async () => {
    const texts = ["alpha", "beta"];
    const e = cohere();
    expect(e.dimension).toBe(1024);
    const vectors = await e.embedTexts(texts);
    const req = server.requests[0];
    expect(req?.path).toBe("/v2/embed");
    expect(req?.headers.authorization).toBe(`Bearer ${MOCK_KEYS.cohere}`);
    expect(req?.body).toEqual({
      model: MODEL,
      texts,
      input_type: "search_document",
      embedding_types: ["float"],
      truncate: "END",
    });
    texts.forEach((t, i) => {
      const want = unit(mockVector(t, 1024, `${MODEL}:search_document`));
      expect(cosine(vectors[i] as Float32Array, want)).toBeGreaterThan(0.999999);
    });
  });

  it("embeds queries with input_type search_query", async () => {
    const q = await cohere().embedQuery("who wrote it?");
    expect(bodyOf(0).input_type).toBe("search_query");
    expect(bodyOf(0).texts).toEqual(["who wrote it?"]);
    expect(cosine(q, unit(mockVector("who wrote it?", 1024, `${MODEL}:search_query`)))).toBeGreaterThan(
      0.999999,
    );
  });

  it("sends at most 96 texts per request, in order, and refuses a larger batchSize", async () => {
    const texts = Array.from({ length: 250 }, (_, i) => `t${i}`);
    const vectors = await cohere().embedTexts(texts);
    expect(server.requests.map((_, i) => bodyOf(i).texts.length)).toEqual([96, 96, 58]);
    expect(server.requests.flatMap((_, i) => bodyOf(i).texts)).toEqual(texts);
    expect(vectors).toHaveLength(250);
    expect(() => cohere({ batchSize: 97 })).toThrow(ConfigError);
    expect(() => cohere({ batchSize: 97 })).toThrow("cohere embedder: batchSize must be at most 96");
  });

  it("asks embed-v4.0 for output_dimension and checks it", async () => {
    const [v] = await cohere({ model: "embed-v4.0", dimension: 512 }).embedTexts(["x"]);
    expect(bodyOf(0).output_dimension).toBe(512);
    expect(v).toHaveLength(512);
    expect(cohere({ model: "embed-v4.0" }).dimension).toBe(1536);
  });

  it("rejects vectors of an unexpected dimension with a clear error", async () => {
    const error = await cohere({ model: "embed-english-light-v3.0", dimension: 1024 })
      .embedTexts(["x"])
      .catch((err: unknown) => err);
    expect(error).toBeInstanceOf(EmbeddingError);
    expect((error as Error).message).toContain(
      'cohere embedder (model "embed-english-light-v3.0"): returned vectors of dimension 384, expected 1024',
    );
  });

  it("retries a 429 after Retry-After", async () => {
    server.script.push({
      status: 429,
      headers: { "retry-after": "0.1" },
      body: { message: "too many requests" },
    });
    const t0 = performance.now();
    await cohere({ retryBaseDelayMs: 5000 }).embedTexts(["x"]);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(90);
    expect(server.requests).toHaveLength(2);
  });

  it("reports Cohere's {message} for 4xx answers", async () => {
    const error = await cohere({ model: "embed-unknown-v9" })
      .embedTexts(["x"])
      .catch((err: unknown) => err);
    expect((error as EmbeddingError).status).toBe(404);
    expect((error as Error).message).toBe(
      `cohere embedder (model "embed-unknown-v9"): HTTP 404 from ${server.url}/v2/embed: model 'embed-unknown-v9' not found, make sure the correct model ID was used`,
    );
    const unauthorised = await cohere({ apiKey: "nope" })
      .embedTexts(["x"])
      .catch((err: unknown) => err);
    expect((unauthorised as Error).message).toMatch(/HTTP 401 .*invalid api token$/);
  });

  it("rejects a response without embeddings.float", async () => {
    server.script.push({ body: { id: "x", embeddings: { int8: [[1]] } } });
    await expect(cohere().embedTexts(["x"])).rejects.toThrow(/no embeddings\.float array/);
  });

  it("needs COHERE_API_KEY (or apiKey) for the hosted API", async () => {
    vi.stubEnv("COHERE_API_KEY", "");
    await expect(new CohereEmbedder({ model: MODEL }).embedTexts(["x"])).rejects.toThrow(
      "no API key: set apiKey or the COHERE_API_KEY environment variable",
    );
    vi.stubEnv("COHERE_API_KEY", "from-env");
    const seen: string[] = [];
    const e = new CohereEmbedder({
      model: MODEL,
      fetch: async (url, init) => {
        seen.push(`${String(url)} ${new Headers(init?.headers).get("authorization")}`);
        return new Response(JSON.stringify({ embeddings: { float: [Array(1024).fill(1)] } }));
      },
    });
    await e.embedTexts(["x"]);
    expect(seen).toEqual(["https://api.cohere.com/v2/embed Bearer from-env"]);
  });
});
