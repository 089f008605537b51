/**
 * Strategy-specific behaviour of the chunking stage, including the shared bug-report
 * cases (../shared/cases, read in place) whose operation is a chunker or the sentence splitter.
 */
import { describe, expect, test } from "vitest";
import { type ConcreteStrategy, chunkDocument, createChunker } from "../../src/chunk/index.js";
import { sentenceBoundaries, splitSentences } from "../../src/chunk/sentences.js";
import type { ChunkingConfig } from "../../src/config.js";
import { ConfigError } from "../../src/errors.js";
import { type Chunk, chunkBody, type ExtractedDocument } from "../../src/types.js";
import {
  cfg,
  checkInvariants,
  doc,
  nonBlankCount,
  readShared,
  type SlackMessage,
  slackDoc,
} from "../helpers/chunk-helpers.js";
import { docsPath } from "../helpers/helpers.js";

const ALL: ConcreteStrategy[] = ["fixed", "semantic", "document", "email", "slack", "code"];

/** Runs a strategy (CODE and EMBEDDING_SEMANTIC are asynchronous, the others synchronous). */
async function run(
  strategy: ConcreteStrategy,
  d: ExtractedDocument,
  config: ChunkingConfig,
): Promise<Chunk[]> {
  return createChunker(config, strategy).chunk(d);
}

/**
 * Runs a chunking call that must finish in linear time. The bound catches a hang or catastrophic
 * regex backtracking (seconds to hours on these inputs), not speed: these calls take milliseconds
 * on a quiet machine, and a loaded 2-core CI machine can stretch that many times over.
 */
async function timed<T>(fn: () => Promise<T>): Promise<T> {
  const t0 = performance.now();
  const out = await fn();
  expect(performance.now() - t0).toBeLessThan(15_000);
  return out;
}

const json = (name: string) => JSON.parse(readShared("cases", name)) as Record<string, string>;

describe("sentences", () => {
  test("B12: decimals and abbreviations do not end sentences", async () => {
    const sentences = splitSentences(readShared("cases/B12.txt"));
    expect(sentences).toEqual([
      "Revenue grew 12.5% to $3.2 million in Q3.",
      "Dr. Patel of the U.S. office signed off at 9 a.m. on Friday.",
      "Details are in the annex, e.g. section 4.2.",
      "The vote passed.",
    ]);
    for (const s of sentences.slice(0, -1)) {
      for (const bad of ["12.", "3.", "Dr.", "U.S.", "a.m.", "e.g."])
        expect(s.endsWith(` ${bad}`)).toBe(false);
    }
  });

  test("full-width terminators need no whitespace; newlines are boundaries", async () => {
    expect(sentenceBoundaries("你好。世界！好吗？")).toEqual([3, 6, 9]);
    expect(sentenceBoundaries("一；二")).toEqual([2]);
    expect(sentenceBoundaries("line one\nline two")).toEqual([8]);
    expect(sentenceBoundaries('He said "Stop." Then left.')).toEqual([15, 26]);
    expect(sentenceBoundaries("Wait… what? Yes!")).toEqual([11, 16]);
    expect(sentenceBoundaries("1. Intro and v1.2 now")).toEqual([]);
  });

  test("from/to restrict the scanned range", async () => {
    const t = "One. Two. Three. Four.";
    expect(sentenceBoundaries(t, 5, 16)).toEqual([9, 16]);
  });
});

describe("configuration (B01)", () => {
  const bad: [number, number, number][] = [
    [5, 5, 0],
    [3, 5, 0],
    [0, 0, 0],
    [5, -1, 0],
    [-10, 0, 0],
    [1.5, 0, 0],
    [100, 0, -1],
    [Number.NaN, 0, 0],
  ];
  test.each(ALL)("%s rejects invalid sizes synchronously with ConfigError", async (strategy) => {
    for (const [size, overlap, min] of bad) {
      expect(() => createChunker(cfg(size, overlap, min), strategy)).toThrow(ConfigError);
    }
  });

  test("auto and chunkDocument reject too", async () => {
    expect(() => createChunker(cfg(5, 5))).toThrow(ConfigError);
    await expect(chunkDocument(doc("text"), cfg(5, 5))).rejects.toBeInstanceOf(ConfigError);
    expect(() => createChunker(cfg(100), "nope" as ConcreteStrategy)).toThrow(ConfigError);
  });

  test("valid tiny window: 0123456789 with size 5, overlap 2", async () => {
    const chunks = await timed(async () => await run("fixed", doc("0123456789"), cfg(5, 2)));
    expect(chunks.map((c) => c.text)).toEqual(["01234", "34567", "6789"]);
    const last = chunks[chunks.length - 1] as Chunk;
    const prev = chunks[chunks.length - 2] as Chunk;
    expect(prev.text.includes(last.text)).toBe(false);
  });

  test("minChunkSize ≥ chunkSize is clamped, not rejected", async () => {
    const chunks = await run("fixed", doc("a b c d e f g h i j k l m n o p"), cfg(10, 0, 50));
    checkInvariants(doc("a b c d e f g h i j k l m n o p"), chunks, cfg(10));
  });
});

describe("FIXED", () => {
  const prose = Array.from(
    { length: 40 },
    (_, i) => `Sentence number ${i} talks about topic ${i % 7} in some detail.`,
  ).join(" ");

  test("cuts at sentence ends when they exist", async () => {
    const chunks = await run("fixed", doc(prose), cfg(300));
    expect(chunks.length).toBeGreaterThan(5);
    for (const c of chunks) {
      expect(c.text.endsWith("detail.")).toBe(true);
      expect(c.text.startsWith("Sentence number")).toBe(true);
      expect(c.chunkType).toBe("text");
    }
  });

  test("overlap is present, bounded and starts at a word", async () => {
    const d = doc(prose);
    const chunks = await run("fixed", d, cfg(300, 80));
    checkInvariants(d, chunks, cfg(300, 80));
    for (let i = 1; i < chunks.length; i++) {
      const prev = chunks[i - 1] as Chunk;
      const c = chunks[i] as Chunk;
      expect(c.start).toBeLessThan(prev.end);
      expect(prev.end - c.start).toBeLessThanOrEqual(80);
      expect(/\s/.test(prose.charAt(c.start - 1))).toBe(true);
    }
  });

  test("a short tail is rebalanced to at least minChunkSize", async () => {
    const text = Array.from({ length: 7 }, (_, i) => `Short sentence ${i} here.`).join(" "); // ~160 chars
    const without = await run("fixed", doc(text), cfg(140, 0, 0));
    const withMin = await run("fixed", doc(text), cfg(140, 0, 50));
    expect(without).toHaveLength(2);
    expect((without[1] as Chunk).text.length).toBeLessThan(50);
    expect(withMin).toHaveLength(2);
    expect((withMin[1] as Chunk).text.length).toBeGreaterThanOrEqual(50);
    checkInvariants(doc(text), withMin, cfg(140));
  });

  test("a document shorter than minChunkSize is one chunk", async () => {
    const chunks = await run("fixed", doc("  Tiny document.  "), cfg(1500, 150, 500));
    expect(chunks).toHaveLength(1);
    expect(chunks[0]).toMatchObject({
      text: "Tiny document.",
      start: 2,
      end: 16,
      chunkIndex: 0,
      totalChunks: 1,
    });
  });

  test("B14: a 334-character token is hard-split; the last sentence is not", async () => {
    const text = readShared("cases/B14.txt");
    for (const overlap of [0, 20]) {
      const d = doc(text);
      const chunks = await timed(async () => await run("fixed", d, cfg(100, overlap)));
      checkInvariants(d, chunks, cfg(100, overlap));
      const holder = chunks.filter((c) => c.text.includes("Then restart the service."));
      expect(holder.length).toBeGreaterThan(0);
      for (const c of holder) {
        expect(c.text === "Then restart the service." || c.text.includes("verify the checksum.")).toBe(true);
      }
    }
    for (const strategy of ["semantic", "document", "email"] as const) {
      const d = doc(text);
      checkInvariants(d, await timed(async () => await run(strategy, d, cfg(100))), cfg(100));
    }
  });

  test("surrogate pairs and grapheme clusters are never split", async () => {
    const emoji = "😀".repeat(10);
    expect((await run("fixed", doc(emoji), cfg(3))).map((c) => c.text)).toEqual(Array(10).fill("😀"));
    expect((await run("fixed", doc(emoji), cfg(4))).map((c) => c.text)).toEqual(Array(5).fill("😀😀"));
    expect((await run("fixed", doc(`ab${emoji}`), cfg(3))).map((c) => c.text)[0]).toBe("ab");
    const clusters = "👍🏽".repeat(5); // 4 code units per cluster
    const cc = await run("fixed", doc(clusters), cfg(6));
    for (const c of cc) expect(c.text).toBe("👍🏽");
    // Size 1 cannot hold a surrogate pair: the pair stays whole (one unit over size).
    const one = await run("fixed", doc("a😀b"), cfg(1));
    expect(one.map((c) => c.text)).toEqual(["a", "😀", "b"]);
  });

  test("Chinese text is cut after 。", async () => {
    const text = "这是第一句话，内容比较长一些。".repeat(20);
    const chunks = await run("fixed", doc(text), cfg(100));
    for (const c of chunks) expect(c.text.endsWith("。")).toBe(true);
  });
});

describe("B04: no text lost at boundaries", () => {
  const cases = json("B04.json");
  test.each(["fixed", "semantic"] as const)("%s boundary_drop keeps all X, Y, Z", async (strategy) => {
    const text = cases.boundary_drop as string;
    const chunks = await run(strategy, doc(text), cfg(150));
    checkInvariants(doc(text), chunks, cfg(150));
    const count = (ch: string) => chunks.reduce((n, c) => n + [...c.text].filter((x) => x === ch).length, 0);
    expect([count("X"), count("Y"), count("Z")]).toEqual([120, 90, 260]);
    expect(chunks.reduce((n, c) => n + nonBlankCount(c.text), 0)).toBe(nonBlankCount(text));
  });

  test.each(["fixed", "semantic", "code"] as const)(
    "%s code_whitespace reassembles exactly",
    async (strategy) => {
      const text = cases.code_whitespace as string;
      const d = doc(text, "code", { language: "python" });
      const chunks = await run(strategy, d, cfg(20));
      checkInvariants(d, chunks, cfg(20));
      let rebuilt = "";
      let pos = 0;
      for (const c of chunks) {
        const gap = text.slice(pos, c.start);
        expect(gap.trim()).toBe("");
        rebuilt += gap + chunkBody(c);
        pos = c.end;
      }
      rebuilt += text.slice(pos);
      expect(rebuilt).toBe(text);
      expect(rebuilt).toContain("\n        s += i");
    },
  );

  test.each(["fixed", "semantic"] as const)(
    "%s prose_spaces chunks are exact substrings",
    async (strategy) => {
      const text = cases.prose_spaces as string;
      const chunks = await run(strategy, doc(text), cfg(25));
      checkInvariants(doc(text), chunks, cfg(25));
      for (const c of chunks) {
        expect(text.includes(c.text)).toBe(true);
        expect(c.text).not.toContain("invoicesand");
        expect(c.text).not.toContain("receiptsin");
      }
    },
  );
});

describe("B13: empty and whitespace-only input", () => {
  const cases = json("B13.json");
  test.each(ALL)("%s returns [] for blank input and one chunk for leading delimiters", async (strategy) => {
    for (const key of ["empty", "whitespace", "nbsp_zwsp"]) {
      expect(await run(strategy, doc(cases[key] as string, "code", { language: "python" }), cfg(50))).toEqual(
        [],
      );
    }
    const text = cases.leading_delims as string;
    const chunks = await run(strategy, doc(text, "code", { language: "python" }), cfg(50));
    expect(chunks).toHaveLength(1);
    expect(chunks[0]).toMatchObject({ start: 4, end: 15 });
    expect(chunkBody(chunks[0] as Chunk)).toBe("Hello world");
  });
});

describe("SEMANTIC", () => {
  test("B06: CRLF blank lines separate paragraphs like LF", async () => {
    const crlf = json("B06.json").paragraphs as string;
    const a = await run("semantic", doc(crlf), cfg(15));
    expect(a.map((c) => c.text.trim())).toEqual(["First point.", "Second point.", "Third point."]);
    const b = await run("semantic", doc(crlf.replace(/\r\n/g, "\n")), cfg(15));
    expect(b.map((c) => c.text)).toEqual(a.map((c) => c.text));
    expect(a.every((c) => c.chunkType === "paragraph")).toBe(true);
  });

  test("groups consecutive paragraphs up to chunkSize", async () => {
    const paras = Array.from({ length: 6 }, (_, i) => `Paragraph ${i} has exactly this text.`);
    const text = paras.join("\n\n");
    const chunks = await run("semantic", doc(text), cfg(90));
    expect(chunks.map((c) => c.text)).toEqual([0, 2, 4].map((i) => `${paras[i]}\n\n${paras[i + 1]}`));
  });

  test("an oversized paragraph is cut at sentence ends without overlap between groups", async () => {
    const long = Array.from({ length: 12 }, (_, i) => `Long paragraph sentence ${i}.`).join(" ");
    const text = `Intro.\n\n${long}\n\nOutro paragraph.`;
    const d = doc(text);
    const chunks = await run("semantic", d, cfg(120));
    checkInvariants(d, chunks, cfg(120));
    expect((chunks[0] as Chunk).text.startsWith("Intro.\n\nLong paragraph sentence 0.")).toBe(true);
    for (const c of chunks) expect(/[.]$/.test(c.text)).toBe(true);
  });
});

describe("DOCUMENT", () => {
  const install = readShared("data/docs/markdown/rust_book_src/ch01-01-installation.md");

  test("heading path of a known rust book section", async () => {
    const chunks = await run("document", doc(install, "markdown"), cfg(1500, 0, 500));
    const c = chunks.find((x) => x.text.includes("rustc --version")) as Chunk;
    expect(c.metadata.headingPath).toEqual(["Installation", "Troubleshooting"]);
    // The chunk starts with its own "## Troubleshooting" line, so the prefix is the parent path only.
    expect(chunkBody(c).startsWith("### Troubleshooting")).toBe(true);
    expect(c.contextPrefix).toBe("Installation");
    expect(c.chunkType).toBe("section");
    // The blockquote "> ### Command Line Notation" is not a heading.
    const all = chunks.flatMap((x) => x.metadata.headingPath as string[]);
    expect(all).not.toContain("Command Line Notation");
  });

  test("Chinese headings lose their { #anchor } attributes", async () => {
    const text = readShared("data/docs/markdown/fastapi_docs_zh/tutorial/body.md");
    const chunks = await run("document", doc(text, "markdown"), cfg(1500, 0, 0));
    const paths = chunks.map((c) => c.metadata.headingPath as string[]);
    expect(paths[0]?.[0]).toBe("请求体");
    expect(paths.some((p) => p[1] === "导入 Pydantic 的 `BaseModel`")).toBe(true);
    expect(chunks.every((c) => !(c.contextPrefix ?? "").includes("{"))).toBe(true);
  });

  test("fences: # lines inside are not headings, a fence that fits is not cut", async () => {
    const fence = ["```python", "# not a heading", "", "x = 1", "", "# still code", "y = 2", "```"].join(
      "\n",
    );
    const text = `# Top\n\n${"Intro sentence here. ".repeat(8)}\n\n${fence}\n\n## Next\n\nDone.`;
    const chunks = await run("document", doc(text, "markdown"), cfg(220));
    const holder = chunks.filter((c) => c.text.includes("x = 1"));
    expect(holder).toHaveLength(1);
    expect(chunkBody(holder[0] as Chunk)).toContain(fence);
    const paths = chunks.map((c) => (c.metadata.headingPath as string[]).join("/"));
    expect(paths.every((p) => !p.includes("heading") && !p.includes("code"))).toBe(true);
    expect(paths).toContain("Top/Next");
  });

  test("~~~ and longer fences close only with the same character and length", async () => {
    const text = "# A\n\n````\n```\n# inner\n```\n````\n\n~~~\n# tilde\n```\n~~~\n\n# B\n\nend";
    const chunks = await run("document", doc(text, "markdown"), cfg(1500));
    expect(chunks.map((c) => c.metadata.headingPath)).toEqual([["A"], ["B"]]);
  });

  test("a fence longer than the chunk is split at line boundaries", async () => {
    const lines = Array.from({ length: 60 }, (_, i) => `let value_${i} = compute(${i});`);
    const text = `# Code\n\n\`\`\`rust\n${lines.join("\n")}\n\`\`\``;
    const d = doc(text, "markdown");
    const chunks = await run("document", d, cfg(300));
    checkInvariants(d, chunks, cfg(300));
    expect(chunks.length).toBeGreaterThan(3);
    for (const c of chunks) {
      expect(c.end === text.length || text.charAt(c.end) === "\n").toBe(true);
      expect(text.charAt(c.start - 1) === "\n" || c.start === 0).toBe(true);
    }
  });

  test("B06: CRLF headings give the same two sections as LF", async () => {
    const md = json("B06.json").markdown as string;
    const a = await run("document", doc(md, "markdown"), cfg(500));
    expect(a).toHaveLength(2);
    expect(a[0]?.metadata.headingPath).toEqual(["Install"]);
    expect(a[0]?.text).toContain("Run the setup script.");
    expect(a[1]?.metadata.headingPath).toEqual(["Install", "Linux"]);
    expect(a[1]?.text).toContain("Use the package manager.");
    for (const c of a) expect((c.metadata.headingPath as string[]).join("")).not.toContain("\r");
    const b = await run("document", doc(md.replace(/\r\n/g, "\n"), "markdown"), cfg(500));
    expect(b.map((c) => c.text)).toEqual(a.map((c) => c.text.replace(/\r/g, "")));
    // Same with the default minChunkSize: Install and Linux are not siblings, so they stay apart.
    expect(await run("document", doc(md, "markdown"), cfg(500, 0, 500))).toHaveLength(2);
  });

  test("B08: tables are cut between rows and continuation chunks repeat the header", async () => {
    const text = readShared("cases/B08.md");
    const d = doc(text, "markdown");
    const chunks = await run("document", d, cfg(220));
    checkInvariants(d, chunks, cfg(220));
    const header = "| Param | Type | Default | Meaning |\n|---|---|---|---|";
    const rows = text.split("\n").filter((l) => l.startsWith("| ") && !l.startsWith("| Param"));
    expect(rows).toHaveLength(12);
    for (const row of rows) expect(chunks.filter((c) => c.text.includes(row))).toHaveLength(1);
    let tableChunks = 0;
    for (const c of chunks) {
      for (const line of c.text.split("\n")) if (line.startsWith("|")) expect(line.endsWith("|")).toBe(true);
      const firstRow = rows.map((r) => c.text.indexOf(r)).filter((i) => i >= 0);
      if (firstRow.length === 0) continue;
      tableChunks++;
      const h = c.text.indexOf(header);
      expect(h).toBeGreaterThanOrEqual(0);
      expect(h).toBeLessThan(Math.min(...firstRow));
      expect(c.text.length).toBeLessThanOrEqual(220);
    }
    expect(tableChunks).toBeGreaterThanOrEqual(3);
  });

  test("B09: continuation chunks keep their own heading path", async () => {
    const text = readShared("cases/B09.md");
    const chunks = await run("document", doc(text, "markdown"), cfg(200));
    const first = chunks.filter((c) => c.start < text.indexOf("# Library Newsletter - Spring 2024"));
    const second = chunks.filter((c) => c.start >= text.indexOf("# Library Newsletter - Spring 2024"));
    expect(first.length).toBeGreaterThanOrEqual(2);
    expect(second.length).toBeGreaterThanOrEqual(2);
    for (const c of first) {
      expect(c.text).toContain("Library Newsletter - Spring 2023");
      expect(c.text).toContain("Opening hours");
      expect(c.metadata.headingPath).toEqual(["Library Newsletter - Spring 2023", "Opening hours"]);
    }
    for (const c of second) {
      expect(c.text).toContain("Spring 2024");
      expect(c.text).not.toContain("Spring 2023");
    }
    for (const c of chunks) expect(c.text.length).toBeLessThanOrEqual(200);
  });

  test("Setext headings, preamble and small sibling merging", async () => {
    const text = [
      "Preamble line before any heading.",
      "",
      "Guide",
      "=====",
      "",
      "Intro to the guide.",
      "",
      "Alpha",
      "-----",
      "",
      "Alpha text.",
      "",
      "Beta",
      "----",
      "",
      "Beta text.",
    ].join("\n");
    const separate = await run("document", doc(text, "markdown"), cfg(500, 0, 0));
    expect(separate.map((c) => c.metadata.headingPath)).toEqual([
      [],
      ["Guide"],
      ["Guide", "Alpha"],
      ["Guide", "Beta"],
    ]);
    expect(separate[0]?.contextPrefix).toBeUndefined();
    expect(separate[2]?.contextPrefix).toBe("Guide");
    const merged = await run("document", doc(text, "markdown"), cfg(500, 0, 100));
    // Small siblings merge under their parent, the parent's short intro joins them (same
    // heading path), and the short preamble joins the first section: one "Guide" chunk.
    expect(merged.map((c) => c.metadata.headingPath)).toEqual([["Guide"]]);
    expect(merged[0]?.start).toBe(0);
    // The "Guide" heading is in the body, so no prefix repeats it.
    expect(merged[0]?.text).toBe(text);
  });

  test("a chunk that starts with two sibling headings cites both (issue 13 item 7)", async () => {
    // A DOCX with a Title style gives this shape: `# Title`, then `# First heading`.
    // The merged chunk covers two top-level sections: it shares no heading path with them
    // (headingPath []), and metadata.headings names both; text before them adds no heading.
    const text = "# Title\n\n# Intro\n\nx\n\n## Details\n\ny\n";
    for (const lead of ["", "Preamble.\n\n"]) {
      const d = doc(lead + text, "markdown");
      const chunks = await run("document", d, cfg(1500, 150, 500));
      checkInvariants(d, chunks, cfg(1500, 150, 500));
      expect(
        chunks.map((c) => [chunkBody(c), c.contextPrefix, c.metadata.headingPath, c.metadata.headings]),
      ).toEqual([
        [`${lead}# Title\n\n# Intro\n\nx`, undefined, [], [["Title"], ["Intro"]]],
        ["## Details\n\ny", "Intro", ["Intro", "Details"], undefined],
      ]);
    }
    // Small top-level siblings still merge into one chunk, which names each of them.
    const siblings = await run("document", doc("# A\n\na\n\n# B\n\nb\n", "markdown"), cfg(1500, 150, 500));
    expect(siblings.map((c) => [c.contextPrefix, c.metadata.headingPath, c.metadata.headings])).toEqual([
      [undefined, [], [["A"], ["B"]]],
    ]);
  });

  test("a heading without content joins its first subsection", async () => {
    const text = "# Book\n\n## Chapter\n\nBody text.";
    const chunks = await run("document", doc(text, "markdown"), cfg(500));
    expect(chunks).toHaveLength(1);
    expect(chunks[0]?.metadata.headingPath).toEqual(["Book", "Chapter"]);
    // Both headings are in the body: no prefix repeats them.
    expect(chunks[0]?.text).toBe(text);
    expect(chunks[0]?.contextPrefix).toBeUndefined();
  });
});

describe("EMAIL", () => {
  const headers = {
    from: "Ops Desk <ops@example.com>",
    to: ["team@example.com"],
    subject: "Maintenance window",
    date: "2024-07-02T09:00:00.000Z",
  };

  test("B17: the first chunk carries the header block", async () => {
    const body = "The database will be offline from 22:00 to 23:00 UTC.\n\nPlan accordingly.";
    const chunks = await run("email", doc(body, "email", headers), cfg(1500));
    expect(chunks).toHaveLength(1);
    expect(chunks[0]?.chunkType).toBe("email_start");
    expect(chunks[0]?.contextPrefix).toBe(
      "From: Ops Desk <ops@example.com>\nTo: team@example.com\nSubject: Maintenance window\nDate: 2024-07-02T09:00:00.000Z",
    );
    expect(chunks[0]?.text).toContain("Subject: Maintenance window");
    expect(chunkBody(chunks[0] as Chunk)).toBe(body);
  });

  test("B20: a missing subject leaves no Subject line", async () => {
    const body = "Reminder: the office is closed on Monday.\nThe café reopens Tuesday at 08:00.";
    for (const subject of [undefined, "", "undefined"]) {
      const meta = { from: "Facilities <facilities@example.com>", to: ["all@example.com"], subject };
      const chunks = await run("email", doc(body, "email", meta), cfg(1500));
      expect(chunks).toHaveLength(1);
      expect(chunks[0]?.contextPrefix).toBe("From: Facilities <facilities@example.com>\nTo: all@example.com");
      expect(chunks[0]?.text).not.toMatch(/undefined|null|Subject/);
    }
  });

  test("long bodies: email_start then email_body with the subject; quoted text flagged", async () => {
    const para = (i: number) => `Paragraph ${i} of the reply explains the plan in some detail for everyone.`;
    const body = [
      ...Array.from({ length: 6 }, (_, i) => para(i)),
      "On Tue, 2 Jul 2024 at 09:00, Ops Desk <ops@example.com> wrote:\n> The database will be offline.\n> Plan accordingly.",
    ].join("\n\n");
    const d = doc(body, "email", headers);
    const chunks = await run("email", d, cfg(250));
    checkInvariants(d, chunks, cfg(250));
    expect(chunks[0]?.chunkType).toBe("email_start");
    expect(chunks[0]?.contextPrefix).toContain("From: Ops Desk");
    expect(chunks[0]?.text.length).toBeLessThanOrEqual(250);
    for (const c of chunks.slice(1)) {
      expect(c.chunkType).toBe("email_body");
      // Later chunks carry subject, sender and day.
      expect(c.contextPrefix).toBe(
        "Subject: Maintenance window · From: Ops Desk <ops@example.com> · Date: 2024-07-02",
      );
      expect(c.text.length).toBeLessThanOrEqual(250);
    }
    const last = chunks[chunks.length - 1] as Chunk;
    // Quoted replies are chunked apart from own text and marked.
    expect(last.metadata).toMatchObject({ hasQuoted: true, quoted: true });
    expect(last.metadata.quotedRatio as number).toBeGreaterThan(0.9);
    expect(last.text).toContain("wrote:");
    expect(chunks[0]?.metadata).toEqual({ hasQuoted: false, quotedRatio: 0, quoted: false });
    for (const c of chunks.slice(0, -1)) expect(chunkBody(c)).not.toContain("> ");
    // quotedReplies "drop": the quoted reply leaves no chunk, own text is all kept.
    const dropped = await run("email", d, { ...cfg(250), email: { quotedReplies: "drop" } });
    expect(dropped.some((c) => c.text.includes("wrote:") || c.text.includes("> Plan"))).toBe(false);
    for (let i = 0; i < 6; i++) expect(dropped.some((c) => c.text.includes(`Paragraph ${i} `))).toBe(true);
    expect(dropped[0]?.chunkType).toBe("email_start");
  });

  test("messages under wholeUnder stay whole when they fit chunkSize with their header; longer ones split", async () => {
    const body = Array.from({ length: 8 }, (_, i) => `Line ${i} of a medium-sized message body.`).join(
      "\n\n",
    );
    const d = doc(body, "email", headers);
    const whole = await run("email", d, cfg(2000));
    expect(whole).toHaveLength(1);
    expect(whole[0]?.text.startsWith("From: Ops Desk")).toBe(true);
    // chunkSize is the hard cap: a body over it (with its header) is split even under wholeUnder.
    const capped = await run("email", d, cfg(300));
    expect(capped.length).toBeGreaterThan(1);
    checkInvariants(d, capped, cfg(300));
    // wholeUnder below the body length: split paragraph-aware within chunkSize.
    expect(await run("email", d, { ...cfg(2000), email: { wholeUnder: 100 } })).toHaveLength(1);
  });

  test("an empty body yields no chunks even with headers", async () => {
    expect(await run("email", doc("", "email", headers), cfg(1500))).toEqual([]);
    expect(await run("email", doc(" \r\n ", "email", headers), cfg(1500))).toEqual([]);
  });
});

describe("SLACK", () => {
  const base = 1463079762;
  const ts = (s: number) => `${base + s}.000200`;

  test("a thread that fits is one complete_thread chunk", async () => {
    const msgs: SlackMessage[] = [
      { user: "alice", ts: ts(0), text: "Who owns the deploy?" },
      { user: "carol", ts: ts(100), text: "Checklist draft:", threadTs: ts(100) },
      { user: "alice", ts: ts(130), text: "Step 1 done.", threadTs: ts(100) },
      { user: "bob", ts: ts(160), text: "Step 2 done.", threadTs: ts(100) },
      { user: "dave", ts: ts(200), text: "Lunch?" },
    ];
    const d = slackDoc("deploys", msgs);
    const chunks = await run("slack", d, cfg(500));
    checkInvariants(d, chunks, cfg(500));
    const thread = chunks.find((c) => c.chunkType === "complete_thread") as Chunk;
    expect(chunkBody(thread)).toBe("carol: Checklist draft:\nalice: Step 1 done.\nbob: Step 2 done.");
    // The channel is the chunk's context; the thread starts in it, so no thread context.
    expect(thread.contextPrefix).toBe("#deploys");
    expect(thread.metadata).toMatchObject({
      channel: "deploys",
      participants: ["carol", "alice", "bob"],
      users: ["U_carol", "U_alice", "U_bob"],
      threadTs: ts(100),
      tsStart: ts(100),
      tsEnd: ts(160),
      messageCount: 3,
    });
    expect(chunks.map((c) => c.chunkType)).toEqual(["message_cluster", "complete_thread", "message_cluster"]);
  });

  test("a long thread becomes clusters of whole messages", async () => {
    const msgs: SlackMessage[] = [{ user: "root", ts: ts(0), text: "Incident thread.", threadTs: ts(0) }];
    for (let i = 1; i <= 20; i++) {
      msgs.push({
        user: `u${i % 3}`,
        ts: ts(i * 10),
        text: `Update ${i}: still investigating the issue.`,
        threadTs: ts(0),
      });
    }
    const d = slackDoc("ops", msgs);
    const chunks = await run("slack", d, cfg(200));
    checkInvariants(d, chunks, cfg(200));
    expect(chunks.length).toBeGreaterThan(3);
    const starts = new Set((d.segments ?? []).map((s) => s.start));
    const ends = new Set((d.segments ?? []).map((s) => s.end));
    for (const c of chunks) {
      expect(c.chunkType).toBe("message_cluster");
      expect(c.metadata.threadTs).toBe(ts(0));
      expect(starts.has(c.start)).toBe(true);
      expect(ends.has(c.end)).toBe(true);
    }
  });

  test("unthreaded messages split on a gap over 30 minutes", async () => {
    const msgs: SlackMessage[] = [
      { user: "a", ts: ts(0), text: "one" },
      { user: "b", ts: ts(600), text: "two" },
      { user: "a", ts: ts(600 + 1801), text: "three" },
      { user: "c", ts: ts(600 + 1801 + 1800), text: "four" },
    ];
    const chunks = await run("slack", slackDoc("c", msgs), cfg(1500));
    expect(chunks.map(chunkBody)).toEqual(["a: one\nb: two", "a: three\nc: four"]);
    expect(chunks[1]?.metadata).toMatchObject({
      participants: ["a", "c"],
      tsStart: ts(2401),
      tsEnd: ts(4201),
    });
  });

  test("a single message longer than chunkSize is split as a last resort", async () => {
    const msgs: SlackMessage[] = [
      { user: "a", ts: ts(0), text: "Long message sentence. ".repeat(30).trim() },
      { user: "b", ts: ts(10), text: "ok" },
    ];
    const d = slackDoc("c", msgs);
    const chunks = await run("slack", d, cfg(100));
    checkInvariants(d, chunks, cfg(100));
    expect(chunks.length).toBeGreaterThan(5);
  });

  test("without segments it falls back to SEMANTIC", async () => {
    const chunks = await run("slack", doc("alice: hi\n\nbob: hello", "slack", { channel: "x" }), cfg(10));
    expect(chunks.map((c) => [c.chunkType, c.text])).toEqual([
      ["paragraph", "alice: hi"],
      ["paragraph", "bob: hello"],
    ]);
  });
});

describe("CODE", () => {
  // B15 (comments and decorators stay with their definition) runs in test/chunk/chunk-code.test.ts.

  test("an oversized class is split at its methods", async () => {
    const method = (n: string) =>
      `    def ${n}(self, value):\n        """Handle ${n}."""\n        result = value * 2\n        return result\n`;
    const text = `class Handler:\n    """Handles things."""\n\n${["alpha", "beta", "gamma", "delta"].map(method).join("\n")}`;
    const d = doc(text, "code", { language: "python" });
    const chunks = await run("code", d, cfg(150));
    checkInvariants(d, chunks, cfg(150));
    const gamma = chunks.find((c) => c.text.includes("def gamma")) as Chunk;
    expect(chunkBody(gamma).startsWith("def gamma")).toBe(true);
    expect(gamma).toMatchObject({
      chunkType: "code_function",
      metadata: { symbol: "gamma", parentSymbol: "Handler" },
    });
  });

  test("JavaScript (express) and Go (gin) definitions are found", async () => {
    const js = readShared("data/docs/code/expressjs+express/lib/response.js");
    const jsChunks = await run("code", doc(js, "code", { language: "javascript" }), cfg(1500, 0, 0));
    const send = jsChunks.find((c) => c.text.includes("res.send = function send(body)")) as Chunk;
    expect(send.metadata).toMatchObject({ symbol: "res.send", language: "javascript" });
    expect(chunkBody(send).startsWith("/**")).toBe(true);

    const go = readShared("data/docs/code/gin-gonic+gin/context.go");
    const goChunks = await run("code", doc(go, "code", { language: "go" }), cfg(1500, 0, 0));
    const copy = goChunks.find((c) => c.text.includes("func (c *Context) Copy() *Context {")) as Chunk;
    expect(copy).toMatchObject({ chunkType: "code_function", metadata: { symbol: "Copy" } });
    expect(chunkBody(copy).startsWith("// Copy returns a copy")).toBe(true);
  });

  test("TypeScript types and small neighbours are grouped below minChunkSize", async () => {
    const ts = readShared("data/docs/code/colinhacks+zod/packages/zod/src/v4/core/util.ts");
    const d = doc(ts, "code", { path: "/x/util.ts" });
    const chunks = await run("code", d, cfg(1500, 0, 500));
    checkInvariants(d, chunks, cfg(1500, 0, 500));
    expect(chunks.some((c) => c.metadata.language === "typescript")).toBe(true);
    expect(
      chunks.some((c) => ((c.metadata.symbols as string[] | undefined) ?? []).includes("JSONType")),
    ).toBe(true);
  });

  test("definitions in Java, Rust, C, Ruby and TypeScript", async () => {
    const samples: [string, string, [string, string | undefined][]][] = [
      [
        "java",
        "import java.util.List;\n\n/** Docs. */\n@Service\npublic class Foo {\n    int a;\n}\n",
        [
          ["code_block", undefined],
          ["code_class", "Foo"],
        ],
      ],
      [
        "rust",
        "use std::fmt;\n\n/// A point.\n#[derive(Debug)]\npub struct Point { x: i32 }\n\nimpl fmt::Display for Point {\n    fn fmt(&self) {}\n}\n\npub(crate) async fn run() {}\n",
        [
          ["code_block", undefined],
          ["code_class", "Point"],
          ["code_class", "fmt::Display for Point"],
          ["code_function", "run"],
        ],
      ],
      [
        "c",
        "#include <stdio.h>\n\n/* add */\nstatic int add(int a, int b) {\n    return a + b;\n}\n\nint main(int argc, char **argv) {\n    return add(1, 2);\n}\n",
        [
          ["code_block", undefined],
          ["code_function", "add"],
          ["code_function", "main"],
        ],
      ],
      [
        "ruby",
        "module Foo\n  # bar\n  def self.bar\n    1\n  end\nend\n\nclass Baz < Foo\nend\n",
        // A module is a namespace: its methods are chunked like top-level definitions.
        [
          ["code_block", undefined],
          ["code_function", "bar"],
          ["code_class", "Baz"],
        ],
      ],
      [
        "typescript",
        'import { z } from "zod";\n\nexport interface Props {\n  a: string;\n}\n\nexport const handler = async (req: Request): Promise<Response> => {\n  return new Response("ok");\n};\n',
        [
          ["code_block", undefined],
          ["code_class", "Props"],
          ["code_function", "handler"],
        ],
      ],
    ];
    for (const [language, text, expected] of samples) {
      const chunks = await run("code", doc(text, "code", { language }), cfg(1500));
      expect(chunks.map((c) => [c.chunkType, c.metadata.symbol])).toEqual(expected);
      if (language === "java")
        expect(chunkBody(chunks[1] as Chunk).startsWith("/** Docs. */\n@Service")).toBe(true);
    }
  });

  test("pathological lines do not make the definition regexes backtrack", async () => {
    const text = `${"a*&".repeat(130)}\n`.repeat(200);
    for (const language of ["c", "java", "javascript", "kotlin"]) {
      const d = doc(text, "code", { language });
      checkInvariants(d, await timed(async () => await run("code", d, cfg(500))), cfg(500));
    }
  });

  test("unknown languages split at blank lines", async () => {
    const text = "block one line\nmore one\n\nblock two line\nmore two\n\nblock three";
    const chunks = await run("code", doc(text, "code", { language: "cobol" }), cfg(30));
    expect(chunks.map(chunkBody)).toEqual([
      "block one line\nmore one",
      "block two line\nmore two",
      "block three",
    ]);
    expect(chunks.every((c) => c.chunkType === "code_block")).toBe(true);
  });
});

describe("auto strategy and pages", () => {
  test("picks a strategy per source type", async () => {
    const config = cfg(1500, 0, 0);
    const md = await chunkDocument(doc("# T\n\ntext", "markdown"), config);
    expect(md[0]?.chunkType).toBe("section");
    const html = await chunkDocument(doc("# T\n\ntext", "html"), config);
    expect(html[0]?.chunkType).toBe("section");
    const mail = await chunkDocument(doc("hello", "email", { subject: "s" }), config);
    expect(mail[0]?.chunkType).toBe("email_start");
    const code = await chunkDocument(doc("def f():\n    return 1\n", "code", { language: "python" }), config);
    expect(code[0]?.chunkType).toBe("code_function");
    const slack = await chunkDocument(slackDoc("c", [{ user: "a", ts: "1.0", text: "hi" }]), config);
    expect(slack[0]?.chunkType).toBe("message_cluster");
    const text = await chunkDocument(doc("plain\n\ntext"), config);
    expect(text[0]?.chunkType).toBe("paragraph");
  });

  test("pageStart/pageEnd come from page segments", async () => {
    const pages = ["Page one text. ".repeat(10).trim(), "Page two text. ".repeat(10).trim(), "Page three."];
    let text = "";
    const segments = pages.map((p, i) => {
      const start = text.length;
      text += p;
      const seg = { start, end: text.length, metadata: { page: i + 1 } };
      text += "\n\n";
      return seg;
    });
    const d = doc(text, "pdf", { pageCount: 3 }, segments);
    const chunks = await chunkDocument(d, cfg(305, 0, 0));
    expect(chunks.map((c) => [c.metadata.pageStart, c.metadata.pageEnd])).toEqual([
      [1, 2],
      [3, 3],
    ]);
    const fixed = await run("fixed", d, cfg(100));
    const pageAt = (pos: number) => segments.find((s) => s.start <= pos && pos < s.end)?.metadata.page;
    expect(fixed.length).toBeGreaterThan(3);
    for (const c of fixed) {
      expect(c.metadata).toEqual({ pageStart: pageAt(c.start), pageEnd: pageAt(c.end - 1) });
    }
    expect(fixed[0]?.metadata).toEqual({ pageStart: 1, pageEnd: 1 });
    expect(fixed[fixed.length - 1]?.metadata.pageEnd).toBe(3);
  });
});

describe("the invariant checker itself", () => {
  test("detects lost text, wrong offsets and oversize", async () => {
    const d = doc("alpha beta gamma");
    const good = await run("fixed", d, cfg(6));
    checkInvariants(d, good, cfg(6));
    expect(() => checkInvariants(d, good.slice(1), cfg(6))).toThrow();
    expect(() =>
      checkInvariants(d, [{ ...(good[0] as Chunk), start: 1 }, ...good.slice(1)], cfg(6)),
    ).toThrow();
    expect(() => checkInvariants(d, good, cfg(4))).toThrow();
  });
});

describe("tiny fragments merge into their neighbours (fresh-user report)", () => {
  const config = { strategy: "auto" as const, chunkSize: 1500, chunkOverlap: 150, minChunkSize: 500 };
  const absorbable = (chunks: Chunk[], docText: string): Chunk[] =>
    chunks.filter((c, i) => {
      const prev = chunks[i - 1];
      if (!prev || c.end - c.start >= 500) return false;
      const same =
        JSON.stringify(prev.metadata.headingPath ?? []) === JSON.stringify(c.metadata.headingPath ?? []);
      const merged =
        (prev.contextPrefix ? prev.contextPrefix.length + 2 : 0) + docText.slice(prev.start, c.end).length;
      return same && merged <= 1500 && prev.chunkType !== "email_start";
    });

  test("no short piece of a Rust book section or of requests' code stays alone when it fits its neighbour", async () => {
    const { readdirSync } = await import("node:fs");
    const { extractFile } = await import("../../src/extract/index.js");
    const dir = docsPath("markdown", "rust_book_src");
    const files = [
      ...readdirSync(dir)
        .filter((f) => f.endsWith(".md"))
        .map((f) => `${dir}/${f}`),
      ...["auth.py", "sessions.py", "models.py", "utils.py"].map((f) =>
        docsPath("code", "psf+requests", "src", "requests", f),
      ),
    ];
    let total = 0;
    for (const file of files) {
      for (const d of await extractFile(file)) {
        const chunks = await chunkDocument(d, config);
        total += chunks.length;
        expect(absorbable(chunks, d.text).map((c) => `${file}#${c.chunkIndex}`)).toEqual([]);
        // A markup-only piece (HTML comment, anchor) joins the next section whenever that still fits.
        const markupOnly = /^(\s*(<!--[\s\S]*?-->|<a id="[^"]*"><\/a>))+\s*$/;
        const stranded = chunks.filter((c, i) => {
          const next = chunks[i + 1];
          if (!next || !markupOnly.test(chunkBody(c))) return false;
          const merged = (next.contextPrefix ? next.contextPrefix.length + 2 : 0) + next.end - c.start;
          return merged <= 1500;
        });
        expect(stranded.map((c) => `${file}#${c.chunkIndex}`)).toEqual([]);
      }
    }
    expect(total).toBeGreaterThan(1000);
  });
});

describe("DOCUMENT title lines", () => {
  test("capitals-only TITLE: lines are headings nested under the Markdown heading; text before is kept", async () => {
    const text = [
      "Preamble line before any heading.",
      "",
      "# Contract",
      "",
      "TERMS AND CONDITIONS:",
      "The supplier delivers within 30 days.",
      "",
      "PAYMENT:",
      "Invoices are due in 14 days.",
      "",
      "Not a title: mixed case stays text.",
      "",
      "```",
      "NOT A TITLE:",
      "```",
    ].join("\n");
    const d = doc(text, "markdown");
    const chunks = await run("document", d, cfg(200));
    checkInvariants(d, chunks, cfg(200));
    const paths = chunks.map((c) => (c.metadata.headingPath as string[]).join(" > "));
    expect(paths).toEqual(["", "Contract > TERMS AND CONDITIONS", "Contract > PAYMENT"]);
    expect(chunks[2]?.text).toContain("Not a title: mixed case stays text.");
    expect(chunks[2]?.text).toContain("NOT A TITLE:");
    // "# Contract" has no content of its own and starts this chunk together with the title line.
    expect(chunks[1]?.contextPrefix).toBeUndefined();
    expect(chunks[1]?.text.startsWith("# Contract\n\nTERMS AND CONDITIONS:")).toBe(true);
    // A title on the very first line of a plain text document.
    const plain = doc("SUMMARY:\nAll systems nominal.\n\nDETAILS:\nNothing else.", "text");
    const p = await run("document", plain, cfg(100));
    expect(p.map((c) => c.metadata.headingPath)).toEqual([["SUMMARY"], ["DETAILS"]]);
  });
});

describe("DOCUMENT overlap", () => {
  test("pieces of an oversized paragraph overlap by chunkOverlap; separate blocks do not", async () => {
    const sentence = (i: number) => `Sentence number ${i} explains one more detail of the installation.`;
    const para = Array.from({ length: 12 }, (_, i) => sentence(i)).join(" ");
    const text = `# Install\n\n${para}\n\nA short closing paragraph.`;
    const d = doc(text, "markdown");
    const config = cfg(300, 80);
    const chunks = await run("document", d, config);
    checkInvariants(d, chunks, config);
    const pieces = chunks.filter((c) => c.start < text.indexOf("A short"));
    expect(pieces.length).toBeGreaterThan(2);
    for (let i = 1; i < pieces.length; i++) {
      const prev = pieces[i - 1] as Chunk;
      const cur = pieces[i] as Chunk;
      // Overlap starts at a sentence start, within chunkOverlap characters of the previous end.
      expect(cur.start).toBeLessThan(prev.end);
      expect(prev.end - cur.start).toBeLessThanOrEqual(80);
      expect(text.slice(cur.start, cur.start + 9)).toBe("Sentence ");
    }
    const none = await run("document", d, cfg(300, 0));
    for (let i = 1; i < none.length; i++)
      expect(none[i]?.start).toBeGreaterThanOrEqual(none[i - 1]?.end as number);
  });
});

describe("no quadratic paths", () => {
  test("an unbroken 2 MB line is chunked in characters and tokens (a quadratic search would time out)", async () => {
    const text = "abcdefghij".repeat(200_000);
    const d = doc(text);
    const chars = await run("fixed", d, cfg(1500, 150, 500));
    expect(chars.length).toBeGreaterThan(1300);
    const tokensCfg: ChunkingConfig = { ...cfg(256, 0, 64), unit: "tokens" };
    const tokens = await run("semantic", doc(text.slice(0, 500_000)), tokensCfg);
    checkInvariants(doc(text.slice(0, 500_000)), tokens, tokensCfg);
  }, 60_000);
});

describe("joiners are not break opportunities", () => {
  test.each(["fixed", "semantic", "document", "code"] as ConcreteStrategy[])(
    "%s never cuts a ZWJ emoji sequence or a no-break space",
    async (strategy) => {
      const emoji = "👩🏻‍🏭"; // 7 UTF-16 units: woman, skin tone, ZWJ, factory
      const d = doc(emoji.repeat(300), "text");
      const chunks = await run(strategy, d, cfg(100));
      checkInvariants(d, chunks, cfg(100));
      for (const c of chunks) {
        expect(c.start % 7, `start ${c.start}`).toBe(0);
        expect(c.end % 7, `end ${c.end}`).toBe(0);
      }
      expect(chunks.reduce((n, c) => n + c.end - c.start, 0)).toBe(d.text.length);
      const nbsp = doc("alpha beta\u00a0gamma ".repeat(20), "text");
      for (const c of await run(strategy, nbsp, cfg(50))) expect(nbsp.text.charAt(c.end)).not.toBe("\u00a0");
    },
  );
});
