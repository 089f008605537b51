/**
 * createEmbedder: one provider per config, the litellm alias, the bundled
 * path as before (lazy, 512-d), known and unknown dimensions, config errors.
 */
import { describe, expect, it } from "vitest";
import { CohereEmbedder } from "../../src/embed/cohere.js";
import type { EmbeddingProviderConfig } from "../../src/embed/config.js";
import { HuggingFaceEmbedder } from "../../src/embed/huggingface.js";
import { BUNDLED_DIMENSION, createEmbedder } from "../../src/embed/index.js";
import { LocalEmbedder } from "../../src/embed/local.js";
import { defaultPooling, defaultPrefixes, knownDimension } from "../../src/embed/models.js";
import { OpenAiEmbedder } from "../../src/embed/openai.js";
import { OpenAiCompatibleEmbedder } from "../../src/embed/openai-compatible.js";
import { ConfigError } from "../../src/errors.js";

describe("createEmbedder", () => {
  it("keeps the bundled path: use-lite, 512-d, nothing loaded until the first call", async () => {
    const e = createEmbedder({ provider: "bundled", model: "use-lite", batchSize: 32 });
    expect([e.provider, e.modelId, e.dimension]).toEqual(["bundled", "use-lite", BUNDLED_DIMENSION]);
    expect(await e.resolveDimension?.()).toBe(512);
    expect(await e.embedTexts([])).toEqual([]);
    expect(() => createEmbedder({ provider: "bundled", model: "other" })).toThrow(
      'embedding model "other" is not available for provider "bundled"; use "use-lite" or "use-lite-int8"',
    );
    expect(() => createEmbedder({ provider: "bundled", model: "use-lite", dimension: 384 })).toThrow(
      ConfigError,
    );
  });

  it("builds one class per provider, litellm being openai-compatible", () => {
    const cases: [EmbeddingProviderConfig, unknown, string, number][] = [
      [{ provider: "local", model: "Xenova/bge-small-en-v1.5" }, LocalEmbedder, "local", 384],
      [{ provider: "openai", model: "text-embedding-3-large", apiKey: "k" }, OpenAiEmbedder, "openai", 3072],
      [{ provider: "cohere", model: "embed-multilingual-v3.0", apiKey: "k" }, CohereEmbedder, "cohere", 1024],
      [
        { provider: "huggingface", model: "BAAI/bge-m3", baseUrl: "http://tei" },
        HuggingFaceEmbedder,
        "huggingface",
        1024,
      ],
      [
        { provider: "openai-compatible", model: "my-model", baseUrl: "http://gw/v1" },
        OpenAiCompatibleEmbedder,
        "openai-compatible",
        0,
      ],
      [
        { provider: "litellm", model: "openai/text-embedding-3-small", baseUrl: "http://gw/v1" },
        OpenAiCompatibleEmbedder,
        "openai-compatible",
        1536,
      ],
      [{ provider: "openai", model: "text-embedding-3-small", dimension: 64 }, OpenAiEmbedder, "openai", 64],
    ];
    for (const [config, cls, provider, dimension] of cases) {
      const e = createEmbedder(config);
      expect(e, config.provider).toBeInstanceOf(cls);
      expect(e.provider).toBe(provider);
      expect(e.modelId).toBe(config.model);
      expect(e.dimension, config.model).toBe(dimension);
    }
  });

  it("rejects an unknown provider, a missing baseUrl and invalid values with ConfigErrors", () => {
    expect(() =>
      createEmbedder({ provider: "word2vec", model: "x" } as unknown as EmbeddingProviderConfig),
    ).toThrow(
      /unknown embedding provider "word2vec"; use bundled, local, openai, cohere, huggingface or openai-compatible/,
    );
    expect(() =>
      createEmbedder({ provider: "openai-compatible", model: "m" } as unknown as EmbeddingProviderConfig),
    ).toThrow(ConfigError);
    expect(() => createEmbedder({ provider: "cohere", model: "embed-v4.0", batchSize: 200 })).toThrow(
      ConfigError,
    );
    expect(() => createEmbedder({ provider: "openai", model: "" })).toThrow(
      /model must be a non-empty string/,
    );
    expect(() => createEmbedder({ provider: "huggingface", model: "m", dimension: 0 })).toThrow(ConfigError);
  });
});

describe("model knowledge", () => {
  it("knows the dimensions of common models", () => {
    expect(knownDimension("openai", "text-embedding-3-small")).toBe(1536);
    expect(knownDimension("openai", "text-embedding-ada-002")).toBe(1536);
    expect(knownDimension("cohere", "embed-english-v3.0")).toBe(1024);
    expect(knownDimension("cohere", "embed-english-light-v3.0")).toBe(384);
    expect(knownDimension("local", "Xenova/all-MiniLM-L6-v2")).toBe(384);
    expect(knownDimension("huggingface", "intfloat/e5-large-v2")).toBe(1024);
    expect(knownDimension("huggingface", "acme/unknown")).toBeUndefined();
  });

  it("derives prefixes and pooling from model names", () => {
    expect(defaultPrefixes("intfloat/e5-base-v2")).toEqual({ query: "query: ", document: "passage: " });
    expect(defaultPrefixes("intfloat/multilingual-e5-large")).toEqual({
      query: "query: ",
      document: "passage: ",
    });
    expect(defaultPrefixes("BAAI/bge-small-en-v1.5")).toEqual({
      query: "Represent this sentence for searching relevant passages: ",
      document: "",
    });
    expect(defaultPrefixes("BAAI/bge-m3")).toEqual({ query: "", document: "" });
    expect(defaultPrefixes("nomic-ai/nomic-embed-text-v1.5").document).toBe("search_document: ");
    expect(defaultPrefixes("sentence-transformers/all-MiniLM-L6-v2")).toEqual({ query: "", document: "" });
    expect(defaultPrefixes("/models/see5-thing")).toEqual({ query: "", document: "" });
    expect(defaultPooling("BAAI/bge-base-en-v1.5")).toBe("cls");
    expect(defaultPooling("intfloat/e5-small-v2")).toBe("mean");
  });
});
