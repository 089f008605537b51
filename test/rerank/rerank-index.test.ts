/** createReranker: configuration union, validation errors naming the field. */
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Embedder } from "../../src/embed/contract.js";
import { ConfigError } from "../../src/errors.js";
import {
  CohereReranker,
  CrossEncoderReranker,
  createReranker,
  LlmReranker,
  NoneReranker,
  type RerankerConfig,
  SentenceMaxSimReranker,
} from "../../src/rerank/index.js";

const embedder: Embedder = {
  provider: "test",
  modelId: "fake",
  dimension: 1,
  embedTexts: async (texts) => texts.map(() => Float32Array.of(1)),
  embedQuery: async () => Float32Array.of(1),
};

afterEach(() => {
  vi.unstubAllEnvs();
});

describe("createReranker", () => {
  it("builds each implementation with its name and scale", () => {
    const ce = createReranker({
      type: "cross-encoder",
      model: "/models/ms-marco-MiniLM-L-6-v2",
      batchSize: 8,
    });
    expect(ce).toBeInstanceOf(CrossEncoderReranker);
    expect([ce.name, ce.scale]).toEqual(["cross-encoder:ms-marco-MiniLM-L-6-v2", "probability"]);
    const hub = createReranker({ type: "cross-encoder", model: "cross-encoder/ms-marco-MiniLM-L-6-v2" });
    expect(hub.name).toBe("cross-encoder:ms-marco-MiniLM-L-6-v2");
    const co = createReranker({ type: "cohere", model: "rerank-v3.5", apiKey: "k" });
    expect(co).toBeInstanceOf(CohereReranker);
    expect([co.name, co.scale]).toEqual(["cohere:rerank-v3.5", "probability"]);
    const llm = createReranker({ type: "llm", model: "gpt-4o-mini", baseUrl: "http://localhost:11434" });
    expect(llm).toBeInstanceOf(LlmReranker);
    expect([llm.name, llm.scale]).toEqual(["llm:gpt-4o-mini", "rank"]);
    const sms = createReranker({ type: "sentence-max-sim" });
    expect(sms).toBeInstanceOf(SentenceMaxSimReranker);
    expect([sms.name, sms.scale]).toEqual(["sentence-max-sim:use-lite", "similarity"]);
    expect(createReranker({ type: "sentence-max-sim" }, { embedder }).name).toBe("sentence-max-sim:fake");
    for (const type of ["none", "auto"] as const) {
      const none = createReranker({ type });
      expect(none).toBeInstanceOf(NoneReranker);
      expect([none.name, none.scale]).toEqual(["none", "rank"]);
    }
  });

  it("the none reranker keeps the input order", async () => {
    const none = createReranker({ type: "none" });
    expect(await none.rerank("q", ["a", "b", "a"], { topN: 2 })).toEqual([
      { index: 0, score: 1 },
      { index: 1, score: 1 - 1 / 3 },
    ]);
  });

  it("takes the Cohere key from CO_API_KEY, and requires one for api.cohere.com", () => {
    vi.stubEnv("CO_API_KEY", "");
    expect(() => createReranker({ type: "cohere", model: "rerank-v3.5" })).toThrow(
      new ConfigError(
        "reranker.apiKey is required for the Cohere API (or set the CO_API_KEY environment variable)",
      ),
    );
    expect(() =>
      createReranker({ type: "cohere", model: "rerank-v3.5", baseUrl: "https://api.cohere.ai" }),
    ).toThrow(/reranker\.apiKey/);
    // A self-hosted compatible server may be keyless.
    expect(createReranker({ type: "cohere", model: "m", baseUrl: "http://10.0.0.5:8080" }).name).toBe(
      "cohere:m",
    );
    vi.stubEnv("CO_API_KEY", "from-env");
    expect(createReranker({ type: "cohere", model: "rerank-v3.5" }).name).toBe("cohere:rerank-v3.5");
  });

  it.each([
    [{ type: "cross-encoder" }, "reranker.model must be a non-empty string, got undefined"],
    [{ type: "cross-encoder", model: " " }, 'reranker.model must be a non-empty string, got " "'],
    [{ type: "cross-encoder", model: "m", batchSize: 0 }, "reranker.batchSize must be an integer ≥ 1, got 0"],
    [
      { type: "cross-encoder", model: "m", batchSize: 2.5 },
      "reranker.batchSize must be an integer ≥ 1, got 2.5",
    ],
    [{ type: "cross-encoder", model: "m", maxLength: 3 }, "reranker.maxLength must be an integer ≥ 4, got 3"],
    [{ type: "cross-encoder", model: "m", threads: 0 }, "reranker.threads must be an integer ≥ 1, got 0"],
    [
      { type: "cross-encoder", model: "m", dtype: "fp64" },
      /^reranker\.dtype must be one of fp32, fp16, q8, /,
    ],
    [{ type: "cohere", model: 3, apiKey: "k" }, "reranker.model must be a non-empty string, got 3"],
    [{ type: "cohere", model: "m", apiKey: 7 }, "reranker.apiKey must be a string, got 7"],
    [
      { type: "cohere", model: "m", apiKey: "k", baseUrl: "api.cohere.com" },
      'reranker.baseUrl must be an http(s) URL, got "api.cohere.com"',
    ],
    [
      { type: "cohere", model: "m", apiKey: "k", baseUrl: "ftp://x" },
      'reranker.baseUrl must be an http(s) URL, got "ftp://x"',
    ],
    [
      { type: "cohere", model: "m", apiKey: "k", timeoutMs: 0 },
      "reranker.timeoutMs must be an integer ≥ 1, got 0",
    ],
    [
      { type: "cohere", model: "m", apiKey: "k", maxRetries: -1 },
      "reranker.maxRetries must be an integer ≥ 0, got -1",
    ],
    [{ type: "llm", model: "m" }, "reranker.baseUrl is required (an OpenAI-compatible server root)"],
    [{ type: "llm", baseUrl: "http://x" }, "reranker.model must be a non-empty string, got undefined"],
    [
      { type: "llm", model: "m", baseUrl: "http://x", windowSize: 1 },
      "reranker.windowSize must be an integer ≥ 2, got 1",
    ],
    [
      { type: "sentence-max-sim", passageWeight: 2 },
      "reranker.passageWeight must be a number in [0, 1], got 2",
    ],
    [{ type: "sentence-max-sim", maxSentences: 0 }, "reranker.maxSentences must be an integer ≥ 1, got 0"],
    [
      { type: "bm25" },
      'reranker.type must be one of auto, none, sentence-max-sim, cross-encoder, cohere, llm, got "bm25"',
    ],
    [
      {},
      "reranker.type must be one of auto, none, sentence-max-sim, cross-encoder, cohere, llm, got undefined",
    ],
  ])("rejects %j", (config, message) => {
    const run = () => createReranker(config as unknown as RerankerConfig, { embedder });
    expect(run).toThrow(ConfigError);
    expect(run).toThrow(message);
  });

  it("rejects a non-object", () => {
    expect(() => createReranker(null as unknown as RerankerConfig)).toThrow(/reranker must be an object/);
  });
});
