import { describe, expect, it } from "vitest";
import {
  type AssembledContext,
  assembleContext,
  ContextBudgetError,
  defaultPlaceholder,
  type RecentMessage,
} from "../../src/agent/context.js";
import { KnowledgeLayerError } from "../../src/errors.js";

const sum = (ctx: AssembledContext): number => ctx.messages.reduce((n, m) => n + m.content.length, 0);
/** A text of exactly `n` characters starting with `tag`. */
const text = (tag: string, n: number): string => `${tag} `.padEnd(n, "x");

describe("assembleContext", () => {
  const chunks = [
    {
      text: "Each value in Rust has an owner.",
      citation: "/docs/ownership.md › Ownership Rules (chunk 1/3)",
    },
    { text: "A reference is like a pointer.", citation: "/docs/borrowing.md › References (chunk 2/5)" },
  ];
  const memories = [
    { text: "User: my dog is Biscuit\nAssistant: Nice name!", at: "2024-05-01T10:00:00.000Z" },
    { text: "User: I live in Lyon\nAssistant: Noted." },
  ];

  it("orders system, summaries, anchor, labelled chunks, memories, then recent oldest first", () => {
    const ctx = assembleContext({
      system: ["You are a Rust tutor.", "Answer briefly."],
      summaries: ["Earlier: the user learned about variables."],
      anchor: "Goal: understand ownership.",
      chunks,
      memories,
      recent: [
        { role: "user", content: "What is ownership?", id: "m1" },
        { role: "assistant", content: "A set of rules.", id: "m2" },
        { role: "user", content: "And borrowing?", id: "m3" },
      ],
    });
    expect(ctx.parts.map((p) => p.kind)).toEqual([
      "system",
      "system",
      "summary",
      "anchor",
      "chunks",
      "memories",
      "recent",
      "recent",
      "recent",
    ]);
    expect(ctx.messages.map((m) => m.role)).toEqual([
      "system",
      "system",
      "system",
      "system",
      "system",
      "system",
      "user",
      "assistant",
      "user",
    ]);
    expect(ctx.messages[0]?.content).toBe("You are a Rust tutor.");
    expect(ctx.messages[3]?.content).toBe("Goal: understand ownership.");
    expect(ctx.messages[4]?.content).toBe(
      "[file chunk 1] /docs/ownership.md › Ownership Rules (chunk 1/3)\nEach value in Rust has an owner.\n\n" +
        "[file chunk 2] /docs/borrowing.md › References (chunk 2/5)\nA reference is like a pointer.",
    );
    expect(ctx.messages[5]?.content).toBe(
      "[memory 1] (2024-05-01T10:00:00.000Z)\nUser: my dog is Biscuit\nAssistant: Nice name!\n\n" +
        "[memory 2]\nUser: I live in Lyon\nAssistant: Noted.",
    );
    expect(ctx.messages.slice(6).map((m) => m.content)).toEqual([
      "What is ownership?",
      "A set of rules.",
      "And borrowing?",
    ]);
    expect(ctx.parts.slice(6).map((p) => p.index)).toEqual([0, 1, 2]);
    expect(ctx.dropped).toEqual([]);
    expect(ctx.totalChars).toBe(sum(ctx));
    expect(ctx.budget).toBe(18_000);
  });

  it("adds nothing for empty parts", () => {
    const ctx = assembleContext({ system: [""], summaries: [], anchor: "", chunks: [], memories: [] });
    expect(ctx).toMatchObject({ messages: [], parts: [], dropped: [], totalChars: 0 });
  });

  it("replaces user and assistant messages over the limit with a placeholder naming the message", () => {
    const long = text("pasted log", 8400);
    const ctx = assembleContext({
      messageLimit: 3000,
      recent: [
        { role: "user", content: long, id: "12" },
        { role: "assistant", content: text("reply", 3000), id: "13" },
        { role: "assistant", content: text("long reply", 3001) },
        { role: "system", content: text("tool output", 5000), id: "14" },
        { role: "user", content: "Thanks", id: "15" },
      ],
    });
    expect(ctx.messages.map((m) => m.content.length)).toEqual([
      defaultPlaceholder({ id: "12", index: 0, role: "user", chars: 8400, content: long }).length,
      3000,
      expect.any(Number),
      5000,
      6,
    ]);
    expect(ctx.messages[0]?.content).toBe(
      "[message 12 (8,400 chars) is indexed; its relevant parts appear as file chunks above]",
    );
    expect(ctx.messages[2]?.content).toBe(
      "[message #3 (3,001 chars) is indexed; its relevant parts appear as file chunks above]",
    );
    expect(ctx.dropped).toEqual([
      { kind: "recent", index: 0, id: "12", role: "user", reason: "placeholder", chars: 8400 },
      { kind: "recent", index: 2, role: "assistant", reason: "placeholder", chars: 3001 },
    ]);
    expect(ctx.totalChars).toBe(sum(ctx));
  });

  it("uses a custom placeholder with the message id, index and size", () => {
    const seen: unknown[] = [];
    const ctx = assembleContext({
      messageLimit: 10,
      placeholder: ({ id, index, role, chars }) => {
        seen.push({ id, index, role, chars });
        return `<see indexed message ${id}: ${chars} characters>`;
      },
      recent: [
        { role: "user", content: "0123456789A", id: "msg-7" },
        { role: "user", content: "the question, kept whole however long", id: "msg-8" },
      ],
    });
    expect(seen).toEqual([{ id: "msg-7", index: 0, role: "user", chars: 11 }]);
    expect(ctx.messages).toEqual([
      { role: "user", content: "<see indexed message msg-7: 11 characters>" },
      { role: "user", content: "the question, kept whole however long" },
    ]);
  });

  it("fits exactly at the budget and drops the oldest conversation messages one by one above it", () => {
    const recent: RecentMessage[] = [
      { role: "user", content: text("u1", 1000), id: "u1" },
      { role: "assistant", content: text("a1", 1000), id: "a1" },
      { role: "system", content: text("note", 500), id: "s1" },
      { role: "user", content: text("u2", 1000), id: "u2" },
      { role: "assistant", content: text("a2", 1000), id: "a2" },
      { role: "user", content: text("u3", 1000), id: "u3" },
    ];
    const system = [text("sys", 400)];
    const full = assembleContext({ system, chunks, recent, budget: 1_000_000 });
    const exact = full.totalChars;
    expect(exact).toBe(400 + (full.messages[1]?.content.length ?? 0) + 5500);

    const atBudget = assembleContext({ system, chunks, recent, budget: exact });
    expect(atBudget.totalChars).toBe(exact);
    expect(atBudget.dropped).toEqual([]);

    // One character over: the oldest message goes (1,000 characters).
    const oneOver = assembleContext({ system, chunks, recent, budget: exact - 1 });
    expect(oneOver.dropped).toEqual([
      { kind: "recent", index: 0, id: "u1", role: "user", reason: "budget", chars: 1000 },
    ]);
    expect(oneOver.totalChars).toBe(exact - 1000);

    // 2,500 characters short: u1, a1 and u2 go (the system note in between stays).
    const tight = assembleContext({ system, chunks, recent, budget: exact - 2500 });
    expect(tight.dropped.map((d) => d.id)).toEqual(["u1", "a1", "u2"]);
    expect(tight.dropped.every((d) => d.reason === "budget" && d.kind === "recent")).toBe(true);
    expect(tight.parts.filter((p) => p.kind === "recent").map((p) => recent[p.index]?.id)).toEqual([
      "s1",
      "a2",
      "u3",
    ]);
    expect(tight.totalChars).toBe(exact - 3000);
    expect(tight.totalChars).toBeLessThanOrEqual(exact - 2500);
    expect(tight.totalChars).toBe(sum(tight));
    expect(tight.messages[0]?.content).toBe(system[0]);
  });

  it("never drops system messages or the latest user message, then trims memories, then chunks lowest-ranked first", () => {
    const ranked = [1, 2, 3, 4].map((n) => ({ text: text(`chunk${n}`, 1000), citation: `/docs/f${n}.md` }));
    const recent: RecentMessage[] = [
      { role: "user", content: text("old question", 2000), id: "q1" },
      { role: "assistant", content: text("old answer", 2000), id: "r1" },
      { role: "system", content: text("tool result", 300), id: "t1" },
      { role: "user", content: text("current question", 800), id: "q2" },
      { role: "assistant", content: text("partial answer", 100), id: "r2" },
    ];
    const ctx = assembleContext({
      system: [text("rules", 600)],
      chunks: ranked,
      memories: [{ text: text("memory", 300) }],
      recent,
      budget: 4500,
    });
    // Conversation first (q1, r1, r2: all but the latest user message q2 and the system t1),
    // then the memory, then chunks 4 and 3.
    expect(ctx.dropped.map((d) => [d.kind, d.index, d.reason])).toEqual([
      ["recent", 0, "budget"],
      ["recent", 1, "budget"],
      ["recent", 4, "budget"],
      ["memory", 0, "budget"],
      ["chunk", 3, "budget"],
      ["chunk", 2, "budget"],
    ]);
    // Each chunk removed saves its block and one separator.
    const labelled = (n: number): number => `[file chunk ${n}] /docs/f${n}.md\n`.length + 1000;
    expect(ctx.dropped[3]?.chars).toBe("[memory 1]\n".length + 300);
    expect(ctx.dropped.slice(4).map((d) => d.chars)).toEqual([labelled(4) + 2, labelled(3) + 2]);
    expect(ctx.parts.map((p) => p.kind)).toEqual(["system", "chunks", "recent", "recent"]);
    const chunkMessage = ctx.messages[1]?.content ?? "";
    expect(chunkMessage).toMatch(/^\[file chunk 1\] \/docs\/f1\.md\n/);
    expect(chunkMessage).toContain("[file chunk 2] /docs/f2.md\n");
    expect(chunkMessage).not.toContain("[file chunk 3]");
    expect(ctx.messages.slice(2).map((m) => m.content.slice(0, 16))).toEqual([
      "tool result xxxx",
      "current question",
    ]);
    expect(ctx.totalChars).toBe(sum(ctx));
    expect(ctx.totalChars).toBeLessThanOrEqual(4500);
  });

  it("trims all memories before any chunk, and fails clearly when the kept parts alone exceed the budget", () => {
    const ctx = assembleContext({
      system: [text("rules", 100)],
      chunks: [{ text: text("c", 500), citation: "" }],
      memories: [{ text: text("m1", 200) }, { text: text("m2", 200) }],
      recent: [{ role: "user", content: text("q", 100) }],
      budget: 450,
    });
    expect(ctx.dropped.map((d) => [d.kind, d.index])).toEqual([
      ["memory", 1],
      ["memory", 0],
      ["chunk", 0],
    ]);
    expect(ctx.dropped[2]?.chars).toBe("[file chunk 1]\n".length + 500);
    expect(ctx.parts.map((p) => p.kind)).toEqual(["system", "recent"]);
    expect(ctx.totalChars).toBe(100 + 100);

    // One long remembered turn is cut to messageLimit instead of crowding out the chunks.
    const long = assembleContext({
      chunks: [{ text: text("c", 1000), citation: "" }],
      memories: [{ text: text("long turn", 20_000) }],
      recent: [{ role: "user", content: "q?" }],
      budget: 5000,
      messageLimit: 3000,
    });
    expect(long.dropped).toEqual([{ kind: "memory", index: 0, reason: "truncated", chars: 17_000 }]);
    expect(long.parts.map((p) => p.kind)).toEqual(["chunks", "memories", "recent"]);
    expect(long.messages[1]?.content).toBe(`[memory 1]\n${text("long turn", 20_000).slice(0, 3000)}…`);

    let error: unknown;
    try {
      assembleContext({
        system: [text("rules", 300)],
        anchor: text("anchor", 150),
        chunks,
        recent: [
          { role: "assistant", content: "hello" },
          { role: "user", content: text("q", 100) },
        ],
        budget: 500,
      });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ContextBudgetError);
    expect(error).toBeInstanceOf(KnowledgeLayerError);
    expect((error as ContextBudgetError).required).toBe(550);
    expect((error as ContextBudgetError).budget).toBe(500);
    expect(String(error)).toMatch(
      /the system messages, the anchor, the latest user message need 550 characters, over the budget of 500/,
    );
  });

  it("reports a long message that became a placeholder and was then dropped, twice", () => {
    const ctx = assembleContext({
      messageLimit: 100,
      budget: 60,
      recent: [
        { role: "user", content: text("huge", 5000), id: "9" },
        { role: "user", content: text("now", 50), id: "10" },
      ],
    });
    const placeholderLength = defaultPlaceholder({
      id: "9",
      index: 0,
      role: "user",
      chars: 5000,
      content: "",
    }).length;
    expect(ctx.dropped).toEqual([
      { kind: "recent", index: 0, id: "9", role: "user", reason: "placeholder", chars: 5000 },
      { kind: "recent", index: 0, id: "9", role: "user", reason: "budget", chars: placeholderLength },
    ]);
    expect(ctx.messages).toEqual([{ role: "user", content: text("now", 50) }]);
    expect(ctx.totalChars).toBe(50);
  });

  it("validates its input", () => {
    expect(() => assembleContext({ budget: 0 })).toThrow(/budget must be an integer >= 1/);
    expect(() => assembleContext({ budget: 10.5 })).toThrow(/budget/);
    expect(() => assembleContext({ messageLimit: -1 })).toThrow(/messageLimit/);
    expect(() => assembleContext({ recent: [{ role: "tool" as "user", content: "x" }] })).toThrow(
      /recent\[0\] needs a role/,
    );
    expect(() => assembleContext({ chunks: [{ text: "x" } as never] })).toThrow(/chunks\[0\]/);
    expect(() => assembleContext({ system: [1 as unknown as string] })).toThrow(/system must be a list/);
  });
});
