/**
 * Optional LLM chunk context (issue 17): with `chunking.contextLlm`, each chunk gets one
 * sentence situating it in its document, written by an OpenAI-compatible chat endpoint
 * (a local server speaking the wire format here), cached by the hash of the prompt;
 * off by default; failures leave chunks as they were with a warning.
 */
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "vitest";
import { parseSentence, situateMessages } from "../../src/chunk/llm-context.js";
import { defaultKbConfig } from "../../src/config.js";
import { pipelineHash } from "../../src/ingest/pipeline.js";
import { KnowledgeLayer } from "../../src/knowledge-layer.js";
import { checkTenantSettings } from "../../src/server/app.js";
import { chunkBody, type ExtractedDocument } from "../../src/types.js";
import { tempDir } from "../helpers/helpers.js";
import { chatReply, type MockRequest, type MockServer, startMockServer } from "../helpers/rerank-fixtures.js";

/** The mock model: names the first word of the passage it was asked about. */
function situate(req: MockRequest): ReturnType<typeof chatReply> {
  const body = req.body as { messages: { content: string }[] };
  const passage = /<passage>\n(\S+)/.exec(body.messages[1]?.content ?? "")?.[1] ?? "?";
  return chatReply(`"This part of the field guide describes ${passage}."`);
}

let server: MockServer;
beforeAll(async () => {
  server = await startMockServer(situate);
});
afterAll(() => server.close());
beforeEach(() => {
  server.requests.length = 0;
});

const { dir, cleanup } = tempDir("kl-llm-context-");
afterAll(cleanup);

const birds = ["Owls", "Herons", "Finches", "Swifts", "Wrens", "Kestrels"];
const guide: ExtractedDocument = {
  uri: "mem:guide",
  text: birds
    .map((b) => `${b} ${"live in many places and eat what they find there. ".repeat(6).trim()}`)
    .join("\n\n"),
  metadata: { path: "mem:guide", type: "text" },
};

describe("LLM chunk context", () => {
  test("parseSentence takes the first line without quotes or labels", () => {
    expect(parseSentence('"Context: The passage covers owls."\nmore')).toBe("The passage covers owls.");
    expect(parseSentence("<think>hm</think>\n\nIt is about herons.")).toBe("It is about herons.");
    expect(parseSentence("  \n ")).toBeUndefined();
  });

  test("the prompt shows the document's beginning, the known context and the passage", () => {
    const [system, user] = situateMessages(guide, { start: 0, end: 20, contextPrefix: "Field guide" });
    expect(system?.content).toMatch(/one short sentence/);
    expect(user?.content).toContain("<document>\nOwls live");
    expect(user?.content).toContain("Known context: Field guide");
    expect(user?.content).toContain("<passage>\nOwls live in many");
  });

  test("each chunk gets its sentence in its prefix; a second KB is served from the cache", async () => {
    const kl = KnowledgeLayer.open({ dataDir: join(dir, "a"), cache: { type: "none" } });
    try {
      const chunking = {
        chunkSize: 600,
        chunkOverlap: 0,
        minChunkSize: 0,
        contextLlm: { baseUrl: server.url, model: "mock-model", apiKey: "sk-context-secret" },
      };
      await kl.createKb("guide", { chunking });
      const first = await kl.ingestDocuments([guide], { kb: "guide", embed: false });
      expect(first.errors).toEqual([]);
      expect(first.situated.written).toBeGreaterThan(1);
      expect(server.requests.length).toBe(first.situated.written);
      expect(server.requests[0]?.headers.authorization).toBe("Bearer sk-context-secret");
      const chunks = kl.catalog.loadChunks(
        kl.catalog.chunkIds(kl.catalog.documentsByPath("guide", "mem:guide")[0]?.id ?? -1),
      );
      for (const c of chunks.values()) {
        const word = guide.text.slice(c.start, c.end).split(" ")[0];
        expect(c.contextPrefix).toBe(`This part of the field guide describes ${word}.`);
        expect(chunkBody({ text: c.text, contextPrefix: c.contextPrefix ?? undefined })).toBe(
          guide.text.slice(c.start, c.end),
        );
        expect(c.text.length).toBeLessThanOrEqual(600);
      }
      // The sentences are found by keyword search.
      const hits = await kl.search("field guide describes Kestrels", {
        kbs: ["guide"],
        mode: "keyword",
        topK: 1,
      });
      expect(hits.results[0]?.text).toMatch(/describes Kestrels\.\n\nKestrels live/);
      // Same text and prompts in another KB: nothing is asked again.
      await kl.createKb("guide2", { chunking });
      server.requests.length = 0;
      const second = await kl.ingestDocuments([guide], { kb: "guide2", embed: false });
      expect(second.situated).toEqual({ written: 0, cached: first.situated.written });
      expect(server.requests).toEqual([]);
    } finally {
      await kl.close();
    }
  });

  test("an endpoint that fails leaves the chunks without a sentence and warns, naming no secret", async () => {
    const kl = KnowledgeLayer.open({ dataDir: join(dir, "b"), cache: { type: "none" } });
    try {
      await kl.createKb("broken", {
        chunking: {
          chunkSize: 600,
          chunkOverlap: 0,
          minChunkSize: 0,
          contextLlm: { baseUrl: `${server.url}/broken`, model: "m", apiKey: "sk-never-shown" },
        },
      });
      const summary = await kl.ingestDocuments([guide], { kb: "broken", embed: false });
      expect(summary.errors).toEqual([]);
      expect(summary.chunks).toBeGreaterThan(1);
      expect(summary.warnings).toHaveLength(1);
      expect(summary.warnings[0]?.reason).toMatch(/^LLM context written for 0 of \d+ chunks: .*401/);
      expect(JSON.stringify(summary)).not.toContain("sk-never-shown");
    } finally {
      await kl.close();
    }
  });

  test("off by default; the API key is not part of the pipeline fingerprint; tenants need --allow-tenant-services", () => {
    const base = defaultKbConfig("k");
    expect(base.chunking.contextLlm).toBeUndefined();
    const withLlm = (apiKey: string) => ({
      ...base,
      chunking: { ...base.chunking, contextLlm: { baseUrl: "http://127.0.0.1:9/v1", model: "m", apiKey } },
    });
    expect(pipelineHash(withLlm("one"))).toBe(pipelineHash(withLlm("two")));
    expect(pipelineHash(withLlm("one"))).not.toBe(pipelineHash(base));
    expect(() =>
      checkTenantSettings({ chunking: { contextLlm: { baseUrl: "http://x", model: "m" } } }, false),
    ).toThrow(/chunking\.contextLlm cannot be set/);
    expect(() =>
      checkTenantSettings({ chunking: { contextLlm: { baseUrl: "http://x", model: "m" } } }, true),
    ).not.toThrow();
  });

  test("a bad endpoint is refused when the KB is created", async () => {
    const kl = KnowledgeLayer.open({ dataDir: join(dir, "c"), cache: { type: "none" } });
    try {
      await expect(
        kl.createKb("bad", { chunking: { contextLlm: { baseUrl: "ftp://x", model: "m" } } }),
      ).rejects.toThrow(/chunking\.contextLlm\.baseUrl/);
      await expect(
        kl.createKb("bad2", { chunking: { contextLlm: { baseUrl: "http://x", model: " " } } }),
      ).rejects.toThrow(/chunking\.contextLlm\.model/);
    } finally {
      await kl.close();
    }
  });
});
