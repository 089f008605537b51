/**
 * Every embedding provider runs the shared contract suite
 * (test/conformance/embedder.ts): the bundled USE-lite model and its static
 * table (use-lite-static), the local
 * provider on a tiny real ONNX model built by the test (a plain and a
 * bge-named one, with its query instruction and CLS pooling), and the remote
 * providers against local servers speaking their wire formats (OpenAI,
 * Cohere v2, Text Embeddings Inference, the Hugging Face Inference API,
 * OpenAI-compatible / LiteLLM).
 */
import { HuggingFaceEmbedder } from "../../src/embed/huggingface.js";
import { createEmbedder } from "../../src/embed/index.js";
import { BGE_QUERY_INSTRUCTION } from "../../src/embed/models.js";
import { StaticEmbedder } from "../../src/embed/static.js";
import { embedderConformance } from "../conformance/embedder.js";
import {
  cohereEmbedResponder,
  MOCK_KEYS,
  openAiResponder,
  teiResponder,
  writeEmbeddingModel,
} from "../helpers/embed-fixtures.js";
import { tempDir } from "../helpers/helpers.js";
import { type MockServer, startMockServer } from "../helpers/rerank-fixtures.js";

/** Requests the server answered (for "no call" checks). */
const counted = (server: MockServer) => () => server.requests.length;
/** Fast retries, so failing subjects fail quickly. */
const FAST = { maxRetries: 0 };

embedderConformance(
  "bundled (USE-lite)",
  () => ({ embedder: createEmbedder({ provider: "bundled", model: "use-lite", batchSize: 32 }) }),
  // Texts are grouped by length, which changes vectors at float-rounding level only.
  { provider: "bundled", query: "same", tolerance: 0.9999 },
);

embedderConformance(
  "bundled (use-lite-static: table distilled from USE lite)",
  () => ({
    embedder: createEmbedder({ provider: "bundled", model: "use-lite-static" }),
    broken: new StaticEmbedder({ tablePath: "/nonexistent/use-lite-static.bin" }),
  }),
  { provider: "bundled", query: "same" },
);

embedderConformance(
  "bundled (use-lite-mix: int8 first window + table)",
  () => ({ embedder: createEmbedder({ provider: "bundled", model: "use-lite-mix" }) }),
  // The network part (use-lite-int8) quantises its activations with one scale per onnxruntime
  // call, so a text's vector moves slightly with its batch-mates (cosine > 0.998 on short texts).
  { provider: "bundled", query: "same", tolerance: 0.998 },
);

embedderConformance(
  "local (tiny ONNX model, 2 worker threads)",
  () => {
    const { dir, cleanup } = tempDir("kl-embed-local-");
    writeEmbeddingModel(`${dir}/model`);
    writeEmbeddingModel(`${dir}/broken`, { replace: { "onnx/model.onnx": "not an onnx model" } });
    return {
      embedder: createEmbedder({ provider: "local", model: `${dir}/model`, batchSize: 16, workers: 2 }),
      broken: createEmbedder({ provider: "local", model: `${dir}/broken` }),
      cleanup,
    };
  },
  { provider: "local", query: "same" },
);

embedderConformance(
  "local (bge-named model: query instruction, CLS pooling)",
  () => {
    const { dir, cleanup } = tempDir("kl-embed-local-bge-");
    writeEmbeddingModel(`${dir}/bge-small-en-v1.5`);
    return {
      embedder: createEmbedder({ provider: "local", model: `${dir}/bge-small-en-v1.5`, batchSize: 64 }),
      cleanup,
    };
  },
  {
    provider: "local",
    query: async (e, text) => (await e.embedTexts([BGE_QUERY_INSTRUCTION + text]))[0] as Float32Array,
  },
);

embedderConformance(
  "openai (local server, /v1/embeddings)",
  async () => {
    const server = await startMockServer(openAiResponder());
    const base = { provider: "openai", model: "text-embedding-3-small", apiKey: MOCK_KEYS.openai } as const;
    return {
      embedder: createEmbedder({ ...base, baseUrl: `${server.url}/v1`, batchSize: 40 }),
      broken: createEmbedder({ ...base, baseUrl: `${server.url}/broken/v1`, ...FAST }),
      calls: counted(server),
      cleanup: () => server.close(),
    };
  },
  { provider: "openai", query: "same" },
);

embedderConformance(
  "cohere (local server, /v2/embed)",
  async () => {
    const server = await startMockServer(cohereEmbedResponder);
    const base = { provider: "cohere", model: "embed-english-v3.0", apiKey: MOCK_KEYS.cohere } as const;
    return {
      embedder: createEmbedder({ ...base, baseUrl: server.url }),
      broken: createEmbedder({ ...base, baseUrl: `${server.url}/broken`, ...FAST }),
      calls: counted(server),
      cleanup: () => server.close(),
    };
  },
  { provider: "cohere", query: "different" },
);

embedderConformance(
  "huggingface (local Text Embeddings Inference server)",
  async () => {
    const server = await startMockServer(teiResponder({ dim: 24, key: MOCK_KEYS.hf }));
    const base = { provider: "huggingface", model: "my-org/my-embedder", apiKey: MOCK_KEYS.hf } as const;
    return {
      embedder: createEmbedder({ ...base, baseUrl: server.url }),
      broken: createEmbedder({ ...base, baseUrl: `${server.url}/broken`, ...FAST }),
      calls: counted(server),
      cleanup: () => server.close(),
    };
  },
  { provider: "huggingface", query: "same" },
);

embedderConformance(
  "huggingface (Inference API router, e5 prefixes, through a local server)",
  async () => {
    const model = "intfloat/e5-small-v2";
    const server = await startMockServer(
      teiResponder({
        dim: 384,
        key: MOCK_KEYS.hf,
        path: `/hf-inference/models/${model}/pipeline/feature-extraction`,
      }),
    );
    // The router's fixed URL is redirected to the local server.
    const redirect: typeof fetch = (url, init) =>
      fetch(String(url).replace("https://router.huggingface.co", server.url), init);
    return {
      embedder: new HuggingFaceEmbedder({ model, apiKey: MOCK_KEYS.hf, fetch: redirect }),
      broken: new HuggingFaceEmbedder({ model, apiKey: "wrong", fetch: redirect, ...FAST }),
      calls: counted(server),
      cleanup: () => server.close(),
    };
  },
  { provider: "huggingface", query: "different" },
);

embedderConformance(
  "openai-compatible (keyless local server, bge model name)",
  async () => {
    const server = await startMockServer(openAiResponder({ key: null, otherDim: 32 }));
    const base = { provider: "openai-compatible", model: "BAAI/bge-base-en-v1.5", dimension: 32 } as const;
    return {
      embedder: createEmbedder({ ...base, baseUrl: `${server.url}/v1`, batchSize: 100 }),
      broken: createEmbedder({ ...base, baseUrl: `${server.url}/broken/v1`, ...FAST }),
      calls: counted(server),
      cleanup: () => server.close(),
    };
  },
  {
    provider: "openai-compatible",
    query: async (e, text) => (await e.embedTexts([BGE_QUERY_INSTRUCTION + text]))[0] as Float32Array,
  },
);

embedderConformance(
  "litellm alias (OpenAI model name behind a gateway)",
  async () => {
    const server = await startMockServer(openAiResponder({ key: "sk-litellm", prefix: "" }));
    const base = { provider: "litellm", model: "text-embedding-3-small", apiKey: "sk-litellm" } as const;
    return {
      embedder: createEmbedder({ ...base, baseUrl: server.url }),
      broken: createEmbedder({ ...base, baseUrl: `${server.url}/broken`, ...FAST }),
      calls: counted(server),
      cleanup: () => server.close(),
    };
  },
  { provider: "openai-compatible", query: "same" },
);
