import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { assembleContext } from "../../src/agent/context.js";
import { ConversationMemory } from "../../src/agent/memory.js";
import { retrieveForTurn } from "../../src/agent/retrieve.js";
import { KnowledgeLayer } from "../../src/knowledge-layer.js";
import { docsPath, tempDir } from "../helpers/helpers.js";

const rust = (f: string): string => docsPath("markdown", "rust_book_src", f);
const BORROWING = rust("ch04-02-references-and-borrowing.md");

/** A promise with its resolver. */
function signal(): { promise: Promise<void>; resolve: () => void } {
  let resolve = (): void => {};
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/** Waits for `p`, failing after `ms` with `message`. */
async function within(p: Promise<void>, ms: number, message: string): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(message)), ms);
  });
  try {
    await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

describe("retrieveForTurn", () => {
  const tmp = tempDir();
  let kl: KnowledgeLayer;
  let memory: ConversationMemory;

  beforeAll(async () => {
    kl = KnowledgeLayer.open({ dataDir: join(tmp.dir, "data"), cache: { type: "none" } });
    await kl.ingest([BORROWING, rust("ch08-02-strings.md")]);
    memory = await ConversationMemory.open(kl);
    await memory.remember({
      sessionId: "s1",
      threadId: "earlier",
      user: "Can a function borrow a String through a reference instead of taking ownership?",
      assistant: "Yes: pass &s; the function borrows the String and the caller keeps ownership.",
      at: "2024-06-01T12:00:00.000Z",
    });
    await memory.remember({
      sessionId: "s1",
      threadId: "current",
      user: "Why can I not have two mutable references to a value at once?",
      assistant: "The borrow checker prevents data races by allowing one mutable reference at a time.",
    });
    await memory.remember({
      sessionId: "s2",
      threadId: "elsewhere",
      user: "How do references and borrowing work in Rust?",
      assistant: "References let you use a value without owning it.",
    });
  });

  afterAll(async () => {
    vi.restoreAllMocks();
    await kl.close();
    tmp.cleanup();
  });

  it("returns attributed chunks and other-thread memories", async () => {
    const turn = await retrieveForTurn(kl, memory, {
      query: "How does borrowing a value through a reference work?",
      sessionId: "s1",
      threadId: "current",
    });
    expect(turn.chunks.length).toBeGreaterThan(0);
    expect(turn.chunks.length).toBeLessThanOrEqual(4);
    expect(turn.chunks[0]?.source.path).toBe(BORROWING);
    for (const c of turn.chunks) {
      expect(c.citation).toContain(c.source.path);
      expect(c.kb).toBe("default");
    }
    expect(turn.memories.map((m) => [m.sessionId, m.threadId])).toEqual([["s1", "earlier"]]);
    expect(turn.memories[0]?.at).toBe("2024-06-01T12:00:00.000Z");
    expect(turn.memories[0]?.score).toBeGreaterThanOrEqual(0.45);
    expect(turn.warnings).toEqual([]);

    // The results go into the context as they are.
    const context = assembleContext({
      system: ["You answer questions about Rust."],
      chunks: turn.chunks,
      memories: turn.memories,
      recent: [{ role: "user", content: "How does borrowing a value through a reference work?" }],
    });
    expect(context.parts.map((p) => p.kind)).toEqual(["system", "chunks", "memories", "recent"]);
    expect(context.messages[1]?.content.startsWith(`[file chunk 1] ${turn.chunks[0]?.citation}\n`)).toBe(
      true,
    );
    expect(context.messages[2]?.content).toMatch(
      /^\[memory 1\] \(2024-06-01T12:00:00\.000Z\)\nUser: Can a function/,
    );
  });

  it("passes topK, kbs, threshold and fallback to the search, and skips a side at topK 0", async () => {
    const search = vi.spyOn(kl, "search");
    const recall = vi.spyOn(memory, "recall");
    try {
      await retrieveForTurn(kl, memory, {
        query: "string slices and UTF-8",
        kbs: ["default"],
        sessionId: "s1",
        threadId: "current",
        chunkTopK: 2,
        memoryTopK: 1,
        threshold: 0.3,
        fallback: false,
      });
      expect(search).toHaveBeenCalledWith("string slices and UTF-8", {
        kbs: ["default"],
        topK: 2,
        minScore: 0.3,
        fallbackBelowThreshold: false,
      });
      expect(recall).toHaveBeenCalledWith({
        sessionId: "s1",
        threadId: "current",
        query: "string slices and UTF-8",
        topK: 1,
        threshold: 0.3,
        fallback: false,
      });
      search.mockClear();
      recall.mockClear();
      const onlyMemories = await retrieveForTurn(kl, memory, {
        query: "borrow a String",
        sessionId: "s1",
        threadId: "current",
        chunkTopK: 0,
      });
      expect(search).not.toHaveBeenCalled();
      expect(onlyMemories.chunks).toEqual([]);
      expect(onlyMemories.memories.length).toBe(1);
      recall.mockClear();
      const onlyChunks = await retrieveForTurn(kl, memory, {
        query: "borrow a String",
        sessionId: "s1",
        threadId: "current",
        memoryTopK: 0,
      });
      expect(recall).not.toHaveBeenCalled();
      expect(onlyChunks.memories).toEqual([]);
      expect(onlyChunks.chunks.length).toBeGreaterThan(0);
    } finally {
      search.mockRestore();
      recall.mockRestore();
    }
  });

  it("applies the threshold, with the below-threshold fallback on by default", async () => {
    const query = "recipe for sourdough bread with a long cold fermentation";
    const strict = await retrieveForTurn(kl, memory, {
      query,
      sessionId: "s1",
      threadId: "current",
      threshold: 0.99,
      fallback: false,
    });
    expect(strict.chunks).toEqual([]);
    expect(strict.memories).toEqual([]);
    const fallback = await retrieveForTurn(kl, memory, {
      query,
      sessionId: "s1",
      threadId: "current",
      threshold: 0.99,
    });
    expect(fallback.chunks.length).toBeGreaterThan(0);
    expect(fallback.chunks.every((c) => c.belowThreshold === true)).toBe(true);
    expect(fallback.memories.map((m) => [m.threadId, m.belowThreshold])).toEqual([["earlier", true]]);
  });

  it("runs the document search and the memory recall at the same time", async () => {
    const searchStarted = signal();
    const recallStarted = signal();
    const events: string[] = [];
    const times: Record<string, number> = {};
    const originalSearch = kl.search.bind(kl);
    const originalRecall = memory.recall.bind(memory);
    // Each side starts, then waits until the other side has started too: run one
    // after the other, the first would wait forever (and fail after 5 s).
    const search = vi.spyOn(kl, "search").mockImplementation(async (query, options) => {
      times.searchStart = performance.now();
      events.push("search:start");
      searchStarted.resolve();
      await within(recallStarted.promise, 5000, "search ran without the recall running alongside");
      const result = await originalSearch(query, options);
      await new Promise((r) => setTimeout(r, 150));
      events.push("search:end");
      times.searchEnd = performance.now();
      return result;
    });
    const recall = vi.spyOn(memory, "recall").mockImplementation(async (options) => {
      times.recallStart = performance.now();
      events.push("recall:start");
      recallStarted.resolve();
      await within(searchStarted.promise, 5000, "recall ran without the search running alongside");
      const result = await originalRecall(options);
      await new Promise((r) => setTimeout(r, 150));
      events.push("recall:end");
      times.recallEnd = performance.now();
      return result;
    });
    try {
      const started = performance.now();
      const turn = await retrieveForTurn(kl, memory, {
        query: "How does borrowing a value through a reference work?",
        sessionId: "s1",
        threadId: "current",
      });
      const elapsed = performance.now() - started;
      expect(search).toHaveBeenCalledTimes(1);
      expect(recall).toHaveBeenCalledTimes(1);
      expect(events.slice(0, 2).sort()).toEqual(["recall:start", "search:start"]);
      // Both were running before either finished: the intervals overlap.
      const t = times as Required<Record<"searchStart" | "searchEnd" | "recallStart" | "recallEnd", number>>;
      expect(Math.max(t.searchStart, t.recallStart)).toBeLessThan(Math.min(t.searchEnd, t.recallEnd));
      // Two 150 ms tails in parallel take well under their 300 ms sum.
      const searchTime = t.searchEnd - t.searchStart;
      const recallTime = t.recallEnd - t.recallStart;
      expect(elapsed).toBeLessThan(searchTime + recallTime);
      expect(turn.chunks.length).toBeGreaterThan(0);
      expect(turn.memories.length).toBe(1);
    } finally {
      search.mockRestore();
      recall.mockRestore();
    }
  });

  it("rejects invalid options", async () => {
    const base = { query: "borrowing", sessionId: "s1", threadId: "current" };
    await expect(retrieveForTurn(kl, memory, { ...base, chunkTopK: -1 })).rejects.toThrow(/chunkTopK/);
    await expect(retrieveForTurn(kl, memory, { ...base, memoryTopK: 1.5 })).rejects.toThrow(/memoryTopK/);
    await expect(retrieveForTurn(kl, memory, { ...base, threshold: -0.1 })).rejects.toThrow(/threshold/);
    await expect(retrieveForTurn(kl, memory, { ...base, query: "" })).rejects.toThrow(/query is empty/);
    await expect(retrieveForTurn(kl, memory, { ...base, kbs: ["missing"] })).rejects.toThrow(
      /unknown knowledge base "missing"/,
    );
  });
});
