/**
 * Every reranker runs the shared contract suite (test/conformance/reranker.ts),
 * including shared case B30: a stub scoring B30's stub_scores, the identity
 * reranker, the cross-encoder on a tiny real ONNX model built by the test,
 * Cohere and the LLM reranker against local servers speaking their wire
 * formats, and sentence-max-sim with the real bundled USE-lite model.
 */

import type { Embedder } from "../../src/embed/contract.js";
import { createEmbedder } from "../../src/embed/index.js";
import { CohereReranker } from "../../src/rerank/cohere.js";
import type { Reranker, RerankOptions, RerankScore } from "../../src/rerank/contract.js";
import { CrossEncoderReranker } from "../../src/rerank/cross-encoder.js";
import { LlmReranker } from "../../src/rerank/llm.js";
import { NoneReranker } from "../../src/rerank/none.js";
import { SentenceMaxSimReranker } from "../../src/rerank/sentence-max-sim.js";
import { rerankDistinct } from "../../src/rerank/shared.js";
import { readB30, rerankerConformance } from "../conformance/reranker.js";
import { tempDir } from "../helpers/helpers.js";
import {
  chatResponder,
  cohereResponder,
  MOCK_COHERE_KEY,
  type MockServer,
  startMockServer,
  writeTestModel,
} from "../helpers/rerank-fixtures.js";

/**
 * B30's stub cross-encoder: returns stub_scores[i] for B30's docs[i] (and a
 * fixed score derived from the text for other documents), counting model calls.
 */
class StubReranker implements Reranker {
  readonly name = "stub:b30";
  readonly scale = "probability" as const;
  calls = 0;
  private readonly table = new Map<string, number>();

  constructor(private readonly failing = false) {
    const b30 = readB30();
    b30.docs.forEach((d, i) => {
      this.table.set(d, b30.stub_scores[i] as number);
    });
  }

  rerank(_query: string, docs: string[], options?: RerankOptions): Promise<RerankScore[]> {
    return rerankDistinct(this.name, docs, options, async (texts) => {
      this.calls++;
      if (this.failing) throw new Error("stub model exploded");
      return texts.map((t) => this.table.get(t) ?? (t.length % 10) / 10);
    });
  }
}

rerankerConformance(
  "stub (B30 stub_scores)",
  () => {
    const reranker = new StubReranker();
    return { reranker, broken: new StubReranker(true), calls: () => reranker.calls };
  },
  { scale: "probability", relevance: true, positionIndependent: true, duplicatesTie: true },
);

rerankerConformance("none", () => ({ reranker: new NoneReranker() }), {
  scale: "rank",
  relevance: false,
  positionIndependent: false,
  duplicatesTie: false,
});

rerankerConformance(
  "cross-encoder (tiny ONNX model built by the test)",
  () => {
    const { dir, cleanup } = tempDir("kl-rerank-ce-");
    writeTestModel(`${dir}/model`);
    writeTestModel(`${dir}/broken`, { omit: ["onnx/model.onnx"] });
    return {
      reranker: new CrossEncoderReranker({ model: `${dir}/model`, batchSize: 2 }),
      broken: new CrossEncoderReranker({ model: `${dir}/broken` }),
      cleanup,
    };
  },
  { scale: "probability", relevance: true, positionIndependent: true, duplicatesTie: true },
);

/** Requests the servers answered, across a subject's rerankers (for "no model call" checks). */
function counted(server: MockServer) {
  return () => server.requests.length;
}

rerankerConformance(
  "cohere (local server, v2 wire format)",
  async () => {
    const server = await startMockServer(cohereResponder);
    return {
      reranker: new CohereReranker({ model: "rerank-v3.5", apiKey: MOCK_COHERE_KEY, baseUrl: server.url }),
      broken: new CohereReranker({
        model: "rerank-v3.5",
        apiKey: MOCK_COHERE_KEY,
        baseUrl: `${server.url}/broken`,
        maxRetries: 0,
      }),
      calls: counted(server),
      cleanup: () => server.close(),
    };
  },
  { scale: "probability", relevance: true, positionIndependent: true, duplicatesTie: true },
);

rerankerConformance(
  "llm listwise (local chat-completions server)",
  async () => {
    const server = await startMockServer(chatResponder);
    return {
      reranker: new LlmReranker({ model: "gpt-4o-mini", baseUrl: server.url, windowSize: 4, step: 2 }),
      broken: new LlmReranker({ model: "gpt-4o-mini", baseUrl: `${server.url}/broken`, maxRetries: 0 }),
      calls: counted(server),
      cleanup: () => server.close(),
    };
  },
  { scale: "rank", relevance: true, positionIndependent: false, duplicatesTie: true },
);

/** Counts embedding calls; optionally fails them all. */
function countingEmbedder(inner: Embedder, failing = false): Embedder & { calls: number } {
  const e = {
    provider: inner.provider,
    modelId: inner.modelId,
    dimension: inner.dimension,
    calls: 0,
    embedTexts: async (texts: string[]) => {
      e.calls++;
      if (failing) throw new Error("embedding backend unavailable");
      return inner.embedTexts(texts);
    },
    embedQuery: async (text: string) => {
      e.calls++;
      if (failing) throw new Error("embedding backend unavailable");
      return inner.embedQuery(text);
    },
  };
  return e;
}

rerankerConformance(
  "sentence-max-sim (bundled USE-lite)",
  () => {
    const bundled = createEmbedder({ provider: "bundled", model: "use-lite", batchSize: 32 });
    const embedder = countingEmbedder(bundled);
    return {
      reranker: new SentenceMaxSimReranker(embedder),
      broken: new SentenceMaxSimReranker(countingEmbedder(bundled, true)),
      calls: () => embedder.calls,
    };
  },
  { scale: "similarity", relevance: true, positionIndependent: true, duplicatesTie: true },
);
