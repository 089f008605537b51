import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConversationMemory, cosineSimilarity, memoryText } from "../../src/agent/memory.js";
import type { Embedder } from "../../src/embed/contract.js";
import { KnowledgeLayerError } from "../../src/errors.js";
import { KnowledgeLayer } from "../../src/knowledge-layer.js";
import { tempDir } from "../helpers/helpers.js";

/** The bundled embedder under another name: same vectors, another provider/model identity. */
function renamed(inner: Embedder, provider: string, modelId: string): Embedder & { calls: string[][] } {
  const calls: string[][] = [];
  return {
    provider,
    modelId,
    get dimension() {
      return inner.dimension;
    },
    calls,
    embedTexts: async (texts) => {
      calls.push(texts);
      return inner.embedTexts(texts);
    },
    embedQuery: (text) => inner.embedQuery(text),
  };
}

/** A deterministic 8-d embedder of another model (letter-frequency vectors). */
const letters: Embedder = {
  provider: "test",
  modelId: "letters-8",
  dimension: 8,
  embedTexts: async (texts) => texts.map(letterVector),
  embedQuery: async (text) => letterVector(text),
};
function letterVector(text: string): Float32Array {
  const v = new Float32Array(8);
  for (const ch of text.toLowerCase()) {
    const c = ch.charCodeAt(0) - 97;
    if (c >= 0 && c < 26) v[c % 8] = (v[c % 8] as number) + 1;
  }
  const norm = Math.hypot(...v) || 1;
  return v.map((x) => x / norm);
}

describe("ConversationMemory with the bundled embedder", () => {
  const tmp = tempDir();
  let kl: KnowledgeLayer;
  let memory: ConversationMemory;
  const rows = (sql: string, ...args: unknown[]): number =>
    (kl.db.prepare(sql).get(...args) as { n: number }).n;

  beforeAll(async () => {
    kl = KnowledgeLayer.open({ dataDir: join(tmp.dir, "data"), cache: { type: "none" } });
    memory = await ConversationMemory.open(kl);
    const turns: [string, string, string, string, string][] = [
      [
        "s1",
        "pets",
        "My dog Biscuit is a golden retriever who loves swimming in the lake.",
        "Golden retrievers are natural swimmers; rinse Biscuit's coat after lake swims.",
        "2024-05-01T10:00:00.000Z",
      ],
      [
        "s1",
        "pets",
        "What is the capital of Australia?",
        "The capital of Australia is Canberra.",
        "2024-05-01T10:05:00.000Z",
      ],
      [
        "s1",
        "rust",
        "How do I borrow a value in Rust without taking ownership?",
        "Use a reference: &value lets a function read it without owning it.",
        "2024-05-02T09:00:00.000Z",
      ],
      [
        "s1",
        "cooking",
        "Recommend a vegetarian pasta recipe.",
        "Try pasta with roasted tomatoes, garlic and basil.",
        "2024-05-03T18:00:00.000Z",
      ],
      // The current thread of the recalls below: it must never be recalled from.
      [
        "s1",
        "now",
        "Should my golden retriever dog go swimming in the lake?",
        "Yes, golden retriever dogs love swimming in lakes.",
        "2024-05-04T08:00:00.000Z",
      ],
      // Another session with a closely matching turn: never seen from s1.
      [
        "s2",
        "pets",
        "My dog is a golden retriever named Rex who loves swimming in the lake.",
        "Golden retrievers were bred to retrieve from water.",
        "2024-05-01T11:00:00.000Z",
      ],
    ];
    for (const [sessionId, threadId, user, assistant, at] of turns) {
      await memory.remember({ sessionId, threadId, user, assistant, at });
    }
  });

  afterAll(async () => {
    await kl.close();
    tmp.cleanup();
  });

  it("stores each turn once with one vector of the whole turn, tagged with the model", async () => {
    expect(memory.embedder.provider).toBe("bundled");
    expect(memory.embedder.modelId).toBe("use-lite");
    expect(rows("SELECT COUNT(*) AS n FROM agent_memories")).toBe(6);
    expect(rows("SELECT COUNT(*) AS n FROM agent_memory_vectors")).toBe(6);
    const stored = await memory.list({ sessionId: "s1", threadId: "rust" });
    expect(stored).toHaveLength(1);
    const turn = stored[0];
    expect(turn?.text).toBe(
      "User: How do I borrow a value in Rust without taking ownership?\n" +
        "Assistant: Use a reference: &value lets a function read it without owning it.",
    );
    expect(turn?.text).toBe(memoryText(turn?.user ?? "", turn?.assistant ?? ""));
    expect(turn?.at).toBe("2024-05-02T09:00:00.000Z");
    const row = kl.db
      .prepare("SELECT provider, model, dimension, vector FROM agent_memory_vectors WHERE memory_id = ?")
      .get(turn?.id) as { provider: string; model: string; dimension: number; vector: Buffer };
    expect(row).toMatchObject({ provider: "bundled", model: "use-lite", dimension: 512 });
    expect(row.vector.byteLength).toBe(512 * 4);
    // The vector is the embedding of the whole turn's text.
    const [expected] = await memory.embedder.embedTexts([turn?.text ?? ""]);
    const actual = new Float32Array(row.vector.buffer, row.vector.byteOffset, 512);
    expect(cosineSimilarity(actual, expected as Float32Array)).toBeCloseTo(1, 6);
  });

  it("recalls from other threads of the session, best first, excluding the current thread", async () => {
    const hits = await memory.recall({ sessionId: "s1", threadId: "now", query: "Tell me about my dog" });
    expect(hits.map((h) => h.threadId)).toEqual(["pets"]);
    const [best] = hits;
    expect(best?.user).toMatch(/Biscuit/);
    expect(best?.sessionId).toBe("s1");
    expect(best?.at).toBe("2024-05-01T10:00:00.000Z");
    expect(best?.score).toBeGreaterThanOrEqual(0.45);
    expect(best?.belowThreshold).toBeUndefined();

    const rustHits = await memory.recall({
      sessionId: "s1",
      threadId: "now",
      query: "references and borrowing in Rust",
    });
    expect(rustHits.map((h) => h.threadId)).toEqual(["rust"]);

    // Everything the session's other threads hold, with no threshold: four turns, never "now" or s2.
    const all = await memory.recall({
      sessionId: "s1",
      threadId: "now",
      query: "golden retriever swimming in the lake",
      topK: 10,
      threshold: -1,
    });
    expect(all).toHaveLength(4);
    expect(all.map((h) => h.threadId)).not.toContain("now");
    expect(all.every((h) => h.sessionId === "s1")).toBe(true);
    expect(all.map((h) => h.score)).toEqual([...all.map((h) => h.score)].sort((a, b) => b - a));
    expect(all[0]?.user).toMatch(/Biscuit/);

    // From the "pets" thread the "now" thread is another thread, so its dog turn is found.
    const fromPets = await memory.recall({
      sessionId: "s1",
      threadId: "pets",
      query: "golden retriever swimming in the lake",
    });
    expect(fromPets[0]?.threadId).toBe("now");
    expect(fromPets.map((h) => h.threadId)).not.toContain("pets");
  });

  it("respects the threshold and topK", async () => {
    const query = "golden retriever swimming in the lake";
    const scored = await memory.recall({ sessionId: "s1", threadId: "now", query, topK: 10, threshold: -1 });
    const cut = ((scored[0]?.score ?? 0) + (scored[1]?.score ?? 0)) / 2;
    const above = await memory.recall({ sessionId: "s1", threadId: "now", query, topK: 10, threshold: cut });
    expect(above).toHaveLength(1);
    expect(above.every((h) => h.score >= cut)).toBe(true);
    const two = await memory.recall({ sessionId: "s1", threadId: "now", query, topK: 2, threshold: -1 });
    expect(two.map((h) => h.id)).toEqual(scored.slice(0, 2).map((h) => h.id));
  });

  it("falls back to the best below-threshold memories, flagged, only when asked", async () => {
    const query = "quantum chromodynamics lattice gauge theory";
    const none = await memory.recall({ sessionId: "s1", threadId: "now", query, threshold: 0.9 });
    expect(none).toEqual([]);
    const fallback = await memory.recall({
      sessionId: "s1",
      threadId: "now",
      query,
      threshold: 0.9,
      topK: 2,
      fallback: true,
    });
    expect(fallback).toHaveLength(2);
    expect(fallback.every((h) => h.belowThreshold === true && h.score < 0.9)).toBe(true);
    expect(fallback.every((h) => h.threadId !== "now" && h.sessionId === "s1")).toBe(true);
    expect(fallback[0]?.score).toBeGreaterThanOrEqual(fallback[1]?.score ?? 1);
    // With something above the threshold, the fallback changes nothing.
    const found = await memory.recall({
      sessionId: "s1",
      threadId: "now",
      query: "Tell me about my dog",
      fallback: true,
    });
    expect(found.map((h) => h.belowThreshold)).toEqual([undefined]);
  });

  it("never sees another session", async () => {
    const s2 = await memory.recall({
      sessionId: "s2",
      threadId: "other",
      query: "golden retriever swimming",
      topK: 10,
      threshold: -1,
      fallback: true,
    });
    expect(s2.map((h) => h.user)).toEqual([
      "My dog is a golden retriever named Rex who loves swimming in the lake.",
    ]);
    expect(
      await memory.recall({ sessionId: "s3", threadId: "t", query: "dog", threshold: -1, fallback: true }),
    ).toEqual([]);
  });

  it("compares only vectors of the current model, re-embedding turns stored by another", async () => {
    // Same vectors under another model name: every turn is re-embedded once, then reused.
    const copy = renamed(memory.embedder, "test", "use-lite-copy");
    const other = new ConversationMemory(kl, { embedder: copy });
    const query = "Tell me about my dog";
    const viaCopy = await other.recall({ sessionId: "s1", threadId: "now", query });
    const viaBundled = await memory.recall({ sessionId: "s1", threadId: "now", query });
    expect(viaCopy.map((h) => [h.id, h.score.toFixed(6)])).toEqual(
      viaBundled.map((h) => [h.id, h.score.toFixed(6)]),
    );
    expect(copy.calls).toHaveLength(1);
    expect(copy.calls[0]).toHaveLength(4); // the four turns of s1's other threads
    expect(rows("SELECT COUNT(*) AS n FROM agent_memory_vectors WHERE model = 'use-lite-copy'")).toBe(4);
    expect(rows("SELECT COUNT(*) AS n FROM agent_memory_vectors WHERE model = 'use-lite'")).toBe(6);
    await other.recall({ sessionId: "s1", threadId: "now", query });
    expect(copy.calls).toHaveLength(1);

    // A model of another dimension is never compared with 512-d vectors.
    const small = new ConversationMemory(kl, { embedder: letters });
    const hits = await small.recall({ sessionId: "s1", threadId: "now", query, threshold: -1, topK: 10 });
    expect(hits).toHaveLength(4);
    expect(rows("SELECT COUNT(*) AS n FROM agent_memory_vectors WHERE dimension = 8")).toBe(4);
  });

  it("forgets a thread or a whole session, with its vectors", async () => {
    const extra = await ConversationMemory.open(kl);
    await extra.remember({ sessionId: "s9", threadId: "a", user: "Hello there", assistant: "Hi!" });
    await extra.remember({ sessionId: "s9", threadId: "b", user: "Bye now", assistant: "Goodbye!" });
    expect(await extra.forget({ sessionId: "s9", threadId: "a" })).toBe(1);
    expect((await extra.list({ sessionId: "s9" })).map((m) => m.threadId)).toEqual(["b"]);
    expect(await extra.forget({ sessionId: "s9" })).toBe(1);
    expect(await extra.list({ sessionId: "s9" })).toEqual([]);
    expect(
      rows(
        "SELECT COUNT(*) AS n FROM agent_memory_vectors v LEFT JOIN agent_memories m ON m.id = v.memory_id WHERE m.id IS NULL",
      ),
    ).toBe(0);
    expect(await memory.list({ sessionId: "s1" })).toHaveLength(5);
  });

  it("validates its input", async () => {
    const base = { sessionId: "s1", threadId: "now", query: "dog" };
    await expect(memory.recall({ ...base, topK: 0 })).rejects.toThrow(/topK must be an integer >= 1/);
    await expect(memory.recall({ ...base, threshold: 1.5 })).rejects.toThrow(/threshold must be a number/);
    await expect(memory.recall({ ...base, query: "  " })).rejects.toThrow(/query is empty/);
    await expect(memory.recall({ ...base, threadId: "" })).rejects.toThrow(KnowledgeLayerError);
    await expect(
      memory.remember({ sessionId: "s1", threadId: "t", user: " ", assistant: "" }),
    ).rejects.toThrow(/turn is empty/);
    await expect(
      memory.remember({ sessionId: "s1", threadId: "t", user: "a", assistant: "b", at: "not a date" }),
    ).rejects.toThrow(/invalid time/);
    await expect(ConversationMemory.open(kl, { kb: "nope" })).rejects.toThrow(
      /unknown knowledge base "nope"/,
    );
  });
});
