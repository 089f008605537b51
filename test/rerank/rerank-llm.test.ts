/**
 * Listwise LLM reranking against a local server speaking the OpenAI
 * chat-completions format; robust parsing of the model's ranking; sliding
 * windows over long lists.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { RerankError } from "../../src/rerank/contract.js";
import { buildMessages, LlmReranker, type LlmRerankerOptions, parseRanking } from "../../src/rerank/llm.js";
import {
  chatReply,
  chatResponder,
  type MockServer,
  mockRanking,
  parsePrompt,
  startMockServer,
} from "../helpers/rerank-fixtures.js";

let server: MockServer;
beforeAll(async () => {
  server = await startMockServer(chatResponder);
});
afterAll(() => server.close());
beforeEach(() => {
  server.requests.length = 0;
  server.script.length = 0;
});

const llm = (extra: Partial<LlmRerankerOptions> = {}) =>
  new LlmReranker({ model: "gpt-4o-mini", baseUrl: server.url, retryBaseDelayMs: 1, ...extra });

const QUERY = "who wrote the novel";
const DOCS = [
  "A recipe for lentil soup.",
  "The novel was written by a retired sailor.",
  "Reviews of the novel were mixed.",
  "The novel was written by a retired sailor.",
];

describe("parseRanking", () => {
  it.each([
    ["a JSON array", "[3, 1, 2]", [2, 0, 1]],
    ["numeric strings", '["3", "1", "2"]', [2, 0, 1]],
    ["bracketed strings", '["[3]", "[1]", "[2]"]', [2, 0, 1]],
    ["an object holding the array", '{"ranking": [2, 3, 1]}', [1, 2, 0]],
    ["a fenced block with prose", "Here you go:\n```json\n[2, 3, 1]\n```\nHope it helps.", [1, 2, 0]],
    ["RankGPT arrows", "[2] > [3] > [1]", [1, 2, 0]],
    ["a think block first", "<think>maybe [1, 2, 3]? no</think>[3, 2, 1]", [2, 1, 0]],
    ["plain numbers", "Passage 2, then 1, then 3", [1, 0, 2]],
  ])("reads %s", (_label, content, expected) => {
    expect(parseRanking(content, 3)).toEqual(expected);
  });

  it("drops out-of-range, repeated and fractional numbers; unranked passages follow in input order", () => {
    expect(parseRanking("[4, 0, 9, 4, 2.5, -1, 4]", 5)).toEqual([3, 0, 1, 2, 4]);
    expect(parseRanking("[3]", 5)).toEqual([2, 0, 1, 3, 4]);
    expect(parseRanking("I cannot help with that.", 3)).toEqual([0, 1, 2]);
    expect(parseRanking("", 2)).toEqual([0, 1]);
    expect(parseRanking("[5, 4, 3, 2, 1]", 5)).toEqual([4, 3, 2, 1, 0]);
  });
});

describe("LlmReranker", () => {
  it("prompts with numbered passages and turns the ranking into rank scores", async () => {
    const out = await llm({ apiKey: "sk-test" }).rerank(QUERY, DOCS);
    expect(server.requests).toHaveLength(1);
    const req = server.requests[0];
    expect(req?.path).toBe("/v1/chat/completions");
    expect(req?.headers.authorization).toBe("Bearer sk-test");
    const body = req?.body as {
      model: string;
      temperature: number;
      messages: { role: string; content: string }[];
    };
    expect(body.model).toBe("gpt-4o-mini");
    expect(body.temperature).toBe(0);
    // Duplicates are shown once: 3 passages.
    const prompt = parsePrompt(req as never);
    expect(prompt).toEqual({ query: QUERY, passages: DOCS.slice(0, 3) });
    expect(body.messages[1]?.content).toMatch(/JSON array of passage numbers/);
    // Mock ranking [2, 3, 1] over 3 distinct passages → scores 1, 2/3, 1/3.
    expect(out).toEqual([
      { index: 1, score: 1 },
      { index: 3, score: 1 },
      { index: 2, score: 1 - 1 / 3 },
      { index: 0, score: 1 - 2 / 3 },
    ]);
  });

  it("keeps the input order after a partial or invalid ranking", async () => {
    server.script.push(chatReply("```\n[3, 17, 3]\n```"));
    const out = await llm().rerank(QUERY, ["a", "b", "c", "d"]);
    expect(out.map((r) => r.index)).toEqual([2, 0, 1, 3]);
    expect(out.map((r) => r.score)).toEqual([1, 0.75, 0.5, 0.25]);
    server.script.push(chatReply(null));
    expect((await llm().rerank(QUERY, ["a", "b"])).map((r) => r.index)).toEqual([0, 1]);
  });

  it("reads content given as text parts", async () => {
    server.script.push({
      body: { choices: [{ message: { role: "assistant", content: [{ type: "text", text: "[2, 1]" }] } }] },
    });
    expect((await llm().rerank(QUERY, ["a", "b"])).map((r) => r.index)).toEqual([1, 0]);
  });

  it("slides a window from the end of the list to its start", async () => {
    // 10 passages, window 4, step 2: windows [6,10), [4,8), [2,6), [0,4) → 4 calls.
    const docs = Array.from({ length: 10 }, (_, i) =>
      i === 8 ? "the novel was written at sea" : `filler ${i}`,
    );
    const out = await llm({ windowSize: 4, step: 2 }).rerank(QUERY, docs);
    expect(server.requests).toHaveLength(4);
    const windows = server.requests.map((r) => parsePrompt(r).passages);
    expect(windows[0]).toEqual(docs.slice(6, 10));
    // The relevant passage (index 8) bubbles to the front through every window.
    expect(windows.every((w) => w[0] === docs[8] || w.includes(docs[8] as string))).toBe(true);
    expect(out[0]).toEqual({ index: 8, score: 1 });
    // The rest keep their first-stage order.
    expect(out.slice(1).map((r) => r.index)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 9]);
    expect(out.map((r) => r.score)).toEqual(Array.from({ length: 10 }, (_, i) => 1 - i / 10));
  });

  it("does not call the model for a single passage", async () => {
    expect(await llm().rerank(QUERY, ["only one"])).toEqual([{ index: 0, score: 1 }]);
    expect(server.requests).toHaveLength(0);
  });

  it("uses {baseUrl}/v1/chat/completions without doubling /v1, and omits temperature on request", async () => {
    await llm({ baseUrl: `${server.url}/v1/`, temperature: null, maxTokens: 50 }).rerank(QUERY, DOCS);
    expect(server.requests[0]?.path).toBe("/v1/chat/completions");
    const body = server.requests[0]?.body as Record<string, unknown>;
    expect(body).not.toHaveProperty("temperature");
    expect(body.max_tokens).toBe(50);
  });

  it("reports HTTP errors with the error body's message, and retries 5xx", async () => {
    server.script.push({
      status: 400,
      body: { error: { message: "The model `gpt-9` does not exist", type: "invalid_request_error" } },
    });
    await expect(llm({ model: "gpt-9" }).rerank(QUERY, DOCS)).rejects.toThrow(
      `llm:gpt-9: HTTP 400 from ${server.url}/v1/chat/completions: The model \`gpt-9\` does not exist`,
    );
    server.script.push(
      { status: 502, body: "bad gateway" },
      { status: 429, headers: { "retry-after": "0" } },
    );
    const out = await llm().rerank(QUERY, DOCS);
    expect(server.requests).toHaveLength(4);
    expect(out.map((r) => r.index)).toEqual([1, 3, 2, 0]);
  });

  it("rejects a response without choices", async () => {
    server.script.push({ body: { id: "x", object: "chat.completion" } });
    const err = await llm()
      .rerank(QUERY, DOCS)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RerankError);
    expect((err as Error).message).toMatch(
      /^llm:gpt-4o-mini: malformed response from .*: no choices\[0\]\.message\.content$/,
    );
  });

  it("validates the window", () => {
    expect(() => llm({ windowSize: 1 })).toThrow(/windowSize/);
    expect(() => llm({ windowSize: 4, step: 5 })).toThrow(/step/);
  });

  it("mock ranking is what the prompt asks for (sanity of the test server)", () => {
    const messages = buildMessages("cargo ships", ["cat", "cargo ships at sea", "ships"], 100);
    const req = { method: "POST", path: "/v1/chat/completions", headers: {}, body: { messages } };
    expect(mockRanking(req)).toEqual([2, 3, 1]);
  });

  it("cuts long passages in the prompt", () => {
    const [, user] = buildMessages("q", [`${"word ".repeat(100)}end`], 50);
    expect(user?.content).toContain(`[1] ${"word ".repeat(10).slice(0, 50)}…`);
    expect(user?.content).not.toContain("end");
  });
});
