/**
 * The retrieval pipeline (src/retrieve/search.ts) through the real catalog, BM25
 * index and vector store: reranking arithmetic, thresholds and the below-threshold
 * fallback, multi-KB fusion by rank with per-KB limits, instruction-type queries,
 * advanced pseudo-relevance-feedback expansion and --explain data.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KnowledgeLayer } from "../../src/knowledge-layer.js";
import {
  feedbackVariants,
  HYBRID_VECTOR_EFFORT,
  isInstructionQuery,
  type PipelineReranker,
  type RetrievalDeps,
  retrieve,
} from "../../src/retrieve/search.js";
import type { ExtractedDocument } from "../../src/types.js";
import { findRedisServer, startRedisServer } from "../helpers/redis-server.js";
import { writeTestModel } from "../helpers/rerank-fixtures.js";
import { skipNotice } from "../helpers/skip.js";

const dir = mkdtempSync(join(tmpdir(), "kl-pipeline-"));
let kl: KnowledgeLayer;

const doc = (uri: string, text: string): ExtractedDocument => ({
  uri,
  text,
  metadata: { path: uri, type: "text", title: uri },
});

const GARDEN = [
  doc("/kb/roses.txt", "Roses need full sun and well drained soil. Prune roses in late winter."),
  doc("/kb/tomatoes.txt", "Tomatoes need full sun, warm soil and regular watering. Stake tomatoes early."),
  doc("/kb/ferns.txt", "Ferns grow in shade and moist soil. Ferns rarely need pruning."),
  doc("/kb/compost.txt", "Compost improves soil structure. Turn the compost heap every two weeks."),
];
const KITCHEN = [
  doc("/kb/soup.txt", "Tomato soup: roast tomatoes, add garlic and blend with stock."),
  doc("/kb/bread.txt", "Bread dough rises in a warm place for two hours before baking."),
];

beforeAll(async () => {
  kl = KnowledgeLayer.open({ dataDir: dir });
  await kl.createKb("garden", { chunking: { strategy: "fixed", chunkSize: 500 } });
  await kl.createKb("kitchen", { chunking: { strategy: "fixed", chunkSize: 500 } });
  await kl.ingestDocuments(GARDEN, { kb: "garden", embed: false });
  await kl.ingestDocuments(KITCHEN, { kb: "kitchen", embed: false });
});
afterAll(() => {
  kl.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Deps over the real stores of `kl`, with a given reranker. */
function deps(reranker?: PipelineReranker): RetrievalDeps {
  return {
    catalog: kl.catalog,
    store: async () => kl.store,
    bm25: kl.bm25,
    collection: (config) => `kb_${config.name}`,
    embedQuery: () => Promise.reject(new Error("no vectors in this test")),
    reranker: () => reranker,
  };
}

/** A reranker that scores a passage 0.9 when it contains `word`, else 0.1 (and records its calls). */
function wordReranker(word: string): PipelineReranker & { calls: string[][] } {
  const calls: string[][] = [];
  return {
    name: `stub:${word}`,
    calls,
    async rerank(_query, docs) {
      calls.push(docs);
      return docs
        .map((d, index) => ({ index, score: d.toLowerCase().includes(word) ? 0.9 : 0.1 }))
        .sort((a, b) => b.score - a.score || a.index - b.index);
    },
  };
}

describe("hybrid_rerank", () => {
  it("mixes 0.7 × rerank + 0.3 × retrieval and reorders; each result names the reranker", async () => {
    const reranker = wordReranker("stake");
    const kb = await kl.getKb("garden");
    const out = await retrieve(deps(reranker), [kb], "full sun soil", { mode: "hybrid_rerank", topK: 4 });
    expect(reranker.calls).toHaveLength(1);
    expect(out.rerankers).toEqual({ garden: "stub:stake" });
    const top = out.results[0];
    expect(top?.chunk.text).toContain("Stake tomatoes");
    for (const r of out.results) {
      expect(r.reranker).toBe("stub:stake");
      expect(r.score).toBeCloseTo(0.7 * (r.scores.rerank ?? 0) + 0.3 * r.explain.retrieval, 12);
      expect(r.explain.retrieval).toBeGreaterThanOrEqual(0);
      expect(r.explain.retrieval).toBeLessThanOrEqual(1);
    }
    // Without a reranker, hybrid_rerank is hybrid: ordered by the fused score, reranker "none".
    const plain = await retrieve(deps(undefined), [kb], "full sun soil", { mode: "hybrid_rerank", topK: 4 });
    expect(plain.rerankers).toEqual({ garden: "none" });
    const hybrid = await retrieve(deps(undefined), [kb], "full sun soil", { mode: "hybrid", topK: 4 });
    expect(plain.results.map((r) => r.chunk.id)).toEqual(hybrid.results.map((r) => r.chunk.id));
    expect(plain.results.every((r) => r.reranker === undefined && r.scores.rerank === undefined)).toBe(true);
  });
});

describe("thresholds", () => {
  it("drops results below minScore; with the fallback the best come back flagged belowThreshold", async () => {
    const kb = await kl.getKb("garden");
    const strict = await retrieve(deps(), [kb], "compost heap", { mode: "hybrid", minScore: 1.5 });
    expect(strict.results).toEqual([]);
    const fallback = await retrieve(deps(), [kb], "compost soil", {
      mode: "hybrid",
      minScore: 1.5,
      fallbackBelowThreshold: true,
      topK: 2,
    });
    expect(fallback.results.length).toBe(2);
    expect(fallback.results.every((r) => r.belowThreshold === true)).toBe(true);
    expect(fallback.results[0]?.chunk.text).toContain("Compost improves");
    // minScore 0 means no threshold, not "default".
    const none = await retrieve(deps(), [kb], "compost heap", { mode: "hybrid", minScore: 0, topK: 10 });
    expect(none.results.some((r) => r.belowThreshold)).toBe(false);
    expect(none.results.length).toBeGreaterThan(0);
  });
});

describe("several knowledge bases", () => {
  it("falls back below the threshold only when no KB has a passing result", async () => {
    const kbs = [await kl.getKb("garden"), await kl.getKb("kitchen")];
    // BM25 scores: a high threshold that some garden chunks pass and no kitchen chunk does.
    const all = await retrieve(deps(), kbs, "soil", { mode: "keyword", topK: 10 });
    const best = Math.max(...all.results.map((r) => r.score));
    const mixed = await retrieve(deps(), kbs, "soil", {
      mode: "keyword",
      topK: 10,
      minScore: best,
      fallbackBelowThreshold: true,
    });
    expect(mixed.results.length).toBeGreaterThan(0);
    expect(mixed.results.every((r) => r.belowThreshold !== true && r.score >= best)).toBe(true);
  });

  it("fuses by rank, names each result's KB and applies per-KB limits", async () => {
    const kbs = [await kl.getKb("garden"), await kl.getKb("kitchen")];
    const out = await retrieve(deps(), kbs, "tomatoes", { mode: "keyword", topK: 5 });
    expect(new Set(out.results.map((r) => r.kb))).toEqual(new Set(["garden", "kitchen"]));
    // The best of each KB comes first (RRF of two lists: both rank-1 items tie, then rank 2…).
    expect(out.results.slice(0, 2).map((r) => r.explain.kbRank)).toEqual([1, 1]);
    const limited = await retrieve(deps(), kbs, "tomatoes soil warm", {
      mode: "keyword",
      topK: 5,
      perKb: { garden: { maxResults: 1 } },
    });
    expect(limited.results.filter((r) => r.kb === "garden")).toHaveLength(1);
  });
});

describe("instruction-type queries", () => {
  it("are recognised in English and Chinese, not for ordinary questions", () => {
    for (const q of [
      "summarise this file",
      "Summarize the attachment",
      "what does the attachment say",
      "总结一下这个文件",
      "附件里说了什么",
    ]) {
      expect(isInstructionQuery(q), q).toBe(true);
    }
    for (const q of [
      "how do I prune roses",
      "what is compost",
      "file permissions on linux",
      "What is the file size limit?",
      "summarize how ownership and borrowing work",
      "附件大小限制是多少",
      "摘要算法有哪些",
      "describe the document format used by DOCX",
    ]) {
      expect(isInstructionQuery(q), q).toBe(false);
    }
  });

  it("skip the threshold and put the most recently ingested document first", async () => {
    const kb = await kl.getKb("kitchen");
    await kl.ingestDocuments([doc("/kb/latest.txt", "Meeting notes: the oven is broken until Friday.")], {
      kb: "kitchen",
      embed: false,
    });
    const out = await retrieve(deps(), [await kl.getKb("kitchen")], "summarise this file", {
      mode: "keyword",
      minScore: 99,
      topK: 3,
    });
    expect(out.results[0]?.chunk.document.uri).toBe("/kb/latest.txt");
    expect(kb.name).toBe("kitchen");
  });
});

describe("advanced (offline: pseudo-relevance feedback)", () => {
  it("expands the query from the top feedback chunks and records the variants", async () => {
    const variants = feedbackVariants(
      "tomato",
      ["Tomatoes need sun and stakes.", "Tomato soup needs garlic and stock."],
      2,
      "english",
    );
    // One variant: the query and its expansion terms (the terms alone drift off topic).
    expect(variants).toHaveLength(1);
    expect(variants[0]?.startsWith("tomato ")).toBe(true);
    expect(variants[0]).toContain("sun");
    expect(feedbackVariants("x", [], 2, "english")).toEqual([]);
    const reranker = wordReranker("soup");
    const out = await retrieve(deps(reranker), [await kl.getKb("kitchen")], "tomatoes", {
      mode: "advanced",
      topK: 3,
    });
    expect(out.variants.kitchen?.[0]).toBe("tomatoes");
    expect(out.variants.kitchen?.length).toBeGreaterThan(1);
    expect(out.rerankers.kitchen).toBe("stub:soup");
    expect(out.results[0]?.chunk.text).toContain("Tomato soup");
  });
});

describe("KnowledgeLayer.search", () => {
  it("reports the strategy, the rerankers and, with explain, each stage", async () => {
    const r = await kl.search("prune roses", { kbs: ["garden"], mode: "keyword", explain: true });
    expect(r.mode).toBe("keyword");
    expect(r.rerankers).toEqual({ garden: "none" });
    expect(r.results[0]?.explain).toMatchObject({ keywordRank: 1, kbRank: 1 });
    expect(r.results[0]?.source.uri).toBe("/kb/roses.txt");
    const legacy = await kl.search("prune roses", { kbs: ["garden"], mode: "vector" });
    expect(legacy.mode).toBe("vector_only");
    await expect(kl.search("x", { mode: "fuzzy" as never })).rejects.toThrow(/unknown search mode "fuzzy"/);
    await expect(kl.search(undefined as never)).rejects.toThrow("the query must be a string");
    await expect(kl.search("x", { minScore: Number.NaN })).rejects.toThrow(
      "minScore must be a finite number >= 0",
    );
    await expect(kl.search("x", { vectorWeight: -1 })).rejects.toThrow(
      "vectorWeight must be a finite number >= 0",
    );
    await expect(
      kl.search("x", { kbs: ["garden"], perKb: { garden: { mode: "nope" as never } } }),
    ).rejects.toThrow('perKb.garden.mode: unknown mode "nope"');
    await expect(kl.createKb("zero", { retrieval: { vectorWeight: 0, keywordWeight: 0 } })).rejects.toThrow(
      /both 0/,
    );
  });
});

describe("search-result cache", () => {
  it("serves a repeated search from the cache, as a copy; an ingest or a parameter change misses", async () => {
    const first = await kl.search("prune roses", { kbs: ["garden"], mode: "keyword" });
    expect(first.cached).toBeUndefined();
    const again = await kl.search("prune roses", { kbs: ["garden"], mode: "keyword" });
    expect(again.cached).toBe(true);
    expect(again.results).toEqual(first.results);
    // A copy: mutating what the cache returned does not change the next answer.
    (again.results[0] as { text: string }).text = "mutated";
    const third = await kl.search("prune roses", { kbs: ["garden"], mode: "keyword" });
    expect(third.results[0]?.text).toBe(first.results[0]?.text);
    // Another parameter: a different key.
    expect(
      (await kl.search("prune roses", { kbs: ["garden"], mode: "keyword", topK: 2 })).cached,
    ).toBeUndefined();
    // An ingest changes the KB's data version: the cached answer is not served.
    await kl.ingestDocuments([doc("/kb/pruning.txt", "Prune roses hard: prune roses to three buds.")], {
      kb: "garden",
      embed: false,
    });
    const after = await kl.search("prune roses", { kbs: ["garden"], mode: "keyword" });
    expect(after.cached).toBeUndefined();
    expect(after.results[0]?.source.uri).toBe("/kb/pruning.txt");
  });
});

describe("search-result cache shared through Redis", () => {
  const bin = findRedisServer();
  if (!bin && !process.env.CI) {
    skipNotice(import.meta.url, "search-result cache shared through Redis", "redis-server is not installed");
  }
  it.skipIf(!bin && !process.env.CI)(
    "two knowledge-layer instances (two processes' worth) share cached results",
    async () => {
      const server = await startRedisServer();
      const a = KnowledgeLayer.open({ dataDir: dir, cache: { type: "redis", url: server.url } });
      const b = KnowledgeLayer.open({ dataDir: dir, cache: { type: "redis", url: server.url } });
      try {
        const fresh = await a.search("compost heap", { kbs: ["garden"], mode: "keyword" });
        expect(fresh.cached).toBeUndefined();
        const shared = await b.search("compost heap", { kbs: ["garden"], mode: "keyword" });
        expect(shared.cached).toBe(true);
        expect(shared.results.map((r) => r.chunkId)).toEqual(fresh.results.map((r) => r.chunkId));
        // Another data directory with a KB of the same name and the same data version shares nothing.
        const otherDir = mkdtempSync(join(tmpdir(), "kl-pipeline-other-"));
        const other = KnowledgeLayer.open({ dataDir: otherDir, cache: { type: "redis", url: server.url } });
        try {
          await other.createKb("garden", { chunking: { strategy: "fixed", chunkSize: 500 } });
          await other.ingestDocuments([doc("/other/compost.txt", "Compost heap notes from another store.")], {
            kb: "garden",
            embed: false,
          });
          const elsewhere = await other.search("compost heap", { kbs: ["garden"], mode: "keyword" });
          expect(elsewhere.cached).toBeUndefined();
          expect(elsewhere.results.map((r) => r.source.uri)).toEqual(["/other/compost.txt"]);
        } finally {
          other.close();
          rmSync(otherDir, { recursive: true, force: true });
        }
      } finally {
        a.close();
        b.close();
        await server.stop();
      }
    },
  );
});

describe("hybrid_rerank with a cross-encoder loaded from a model folder", () => {
  it("reranks through the KB's configured reranker and names it on every result", async () => {
    const folder = writeTestModel(join(dir, "cross-encoder-model"));
    await kl.createKb("books", {
      chunking: { strategy: "fixed", chunkSize: 500 },
      retrieval: { mode: "hybrid_rerank", reranker: { type: "cross-encoder", model: folder } },
    });
    await kl.ingestDocuments(
      [
        doc("/kb/b1.txt", "The sailor retired to the sea. The ship was a cargo ship."),
        doc("/kb/b2.txt", "A novel written by a retired sailor got mixed reviews."),
        doc("/kb/b3.txt", "The cat sat on the mat by the dog."),
      ],
      { kb: "books", embed: false },
    );
    const r = await kl.search("who wrote the novel", { kbs: ["books"], explain: true });
    expect(r.mode).toBe("hybrid_rerank");
    expect(r.rerankers.books).toMatch(/^cross-encoder:/);
    expect(r.results[0]?.source.uri).toBe("/kb/b2.txt");
    for (const x of r.results) {
      expect(x.reranker).toBe(r.rerankers.books);
      // The mix: 0.7 × sigmoid(logit) + 0.3 × normalised retrieval score.
      expect(x.score).toBeCloseTo(
        0.7 * (x.scores.rerank ?? Number.NaN) + 0.3 * (x.explain?.retrieval ?? Number.NaN),
        10,
      );
    }
    // A KB whose reranker folder is missing still answers, not reranked, with a warning naming it.
    await kl.createKb("broken", {
      retrieval: { mode: "hybrid_rerank", reranker: { type: "cross-encoder", model: join(dir, "nope") } },
    });
    await kl.ingestDocuments([doc("/kb/x.txt", "novel text")], { kb: "broken", embed: false });
    const degraded = await kl.search("novel", { kbs: ["broken"] });
    expect(degraded.results[0]?.source.uri).toBe("/kb/x.txt");
    expect(degraded.rerankers.broken).toMatch(/^none \(cross-encoder:.* failed\)$/);
    expect(degraded.warnings.join("\n")).toMatch(
      /reranker cross-encoder:.* failed, results are not reranked: .*nope/,
    );
    // Settings a reranker cannot work with are refused when the KB is created.
    await expect(
      kl.createKb("badllm", { retrieval: { reranker: { type: "llm", model: "m", baseUrl: "ftp://x" } } }),
    ).rejects.toThrow(/knowledge base "badllm": retrieval\.reranker\.baseUrl/);
  }, 60_000);
});

describe("advanced with an LLM query expander (OpenAI-compatible chat, local server)", () => {
  it("retrieves the variants the LLM writes; a failing LLM falls back to feedback with a warning", async () => {
    const requests: { model: string; messages: { role: string; content: string }[] }[] = [];
    let fail = false;
    const server = createServer((req, res) => {
      let body = "";
      req.on("data", (c) => {
        body += c;
      });
      req.on("end", () => {
        if (req.url !== "/v1/chat/completions" || req.method !== "POST") {
          res.writeHead(404).end();
          return;
        }
        requests.push(JSON.parse(body));
        if (fail) {
          res.writeHead(400, { "content-type": "application/json" });
          res.end(JSON.stringify({ error: { message: "model not found", type: "invalid_request_error" } }));
          return;
        }
        res.writeHead(200, { "content-type": "application/json" });
        res.end(
          JSON.stringify({
            id: "chatcmpl-1",
            object: "chat.completion",
            choices: [
              {
                index: 0,
                message: {
                  role: "assistant",
                  content: '1. bread dough rising\n- "oven baking time"\nwarm place',
                },
                finish_reason: "stop",
              },
            ],
          }),
        );
      });
    });
    await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
    const { port } = server.address() as AddressInfo;
    try {
      await kl.createKb("bakery", {
        chunking: { strategy: "fixed", chunkSize: 500 },
        retrieval: {
          mode: "advanced",
          expansionLlm: { baseUrl: `http://127.0.0.1:${port}`, model: "gpt-test" },
        },
      });
      await kl.ingestDocuments(KITCHEN, { kb: "bakery", embed: false });
      const r = await kl.search("how long does dough rest", { kbs: ["bakery"] });
      expect(requests[0]?.model).toBe("gpt-test");
      expect(requests[0]?.messages.at(-1)?.content).toContain("how long does dough rest");
      expect(r.variants?.bakery).toEqual([
        "how long does dough rest",
        "bread dough rising",
        "oven baking time",
      ]);
      expect(r.results[0]?.source.uri).toBe("/kb/bread.txt");
      fail = true;
      const degraded = await kl.search("how long does bread rise", { kbs: ["bakery"] });
      expect(degraded.warnings.join("\n")).toMatch(
        /LLM query expansion failed, pseudo-relevance feedback used instead: .*model not found/,
      );
      expect(degraded.results[0]?.source.uri).toBe("/kb/bread.txt");
      await expect(
        kl.createKb("badexp", { retrieval: { expansionLlm: { baseUrl: "localhost:1", model: "m" } } }),
      ).rejects.toThrow(/retrieval\.expansionLlm\.baseUrl must be an http\(s\) URL/);
    } finally {
      server.close();
    }
  });
});

describe("vector search effort", () => {
  it("hybrid modes search vectors with HYBRID_VECTOR_EFFORT, vector_only with 1; options override both", async () => {
    const kb = await kl.getKb("garden");
    const seen: { effort?: number; exact?: boolean }[] = [];
    const store = {
      hasCollection: async () => true,
      search: async (_c: string, _v: Float32Array, o: { effort?: number; exact?: boolean }) => {
        seen.push({ effort: o.effort, exact: o.exact });
        return [];
      },
    };
    const withStore: RetrievalDeps = {
      ...deps(),
      store: async () => store as unknown as Awaited<ReturnType<RetrievalDeps["store"]>>,
      embedQuery: async () => Float32Array.of(1, 0, 0),
    };
    await retrieve(withStore, [kb], "full sun", { mode: "hybrid", topK: 3 });
    await retrieve(withStore, [kb], "full sun", { mode: "hybrid_rerank", topK: 3 });
    await retrieve(withStore, [kb], "full sun", { mode: "vector_only", topK: 3 });
    await retrieve(withStore, [kb], "full sun", { mode: "hybrid", topK: 3, vectorEffort: 2 });
    await retrieve(withStore, [kb], "full sun", { mode: "vector_only", topK: 3, exactVectors: true });
    expect(seen).toEqual([
      { effort: HYBRID_VECTOR_EFFORT, exact: undefined },
      { effort: HYBRID_VECTOR_EFFORT, exact: undefined },
      { effort: 1, exact: undefined },
      { effort: 2, exact: undefined },
      { effort: 1, exact: true },
    ]);
    expect(HYBRID_VECTOR_EFFORT).toBe(0.35);
    // Through the facade, a vectorEffort that is not a positive number is refused by name.
    for (const bad of [0, -1, Number.NaN, Number.POSITIVE_INFINITY, "2"]) {
      await expect(kl.search("full sun", { kbs: ["garden"], vectorEffort: bad as number })).rejects.toThrow(
        /vectorEffort must be a positive number/,
      );
    }
  });
});
