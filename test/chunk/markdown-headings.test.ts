/**
 * Markdown heading detection follows CommonMark 0.31.2 (issue 13 item 5): ATX
 * (§4.2) and setext (§4.3) headings, not inside fenced (§4.5) or indented (§4.4)
 * code, `---` after a blank line a thematic break (§4.1). One module
 * (src/chunk/markdown-blocks.ts) serves the DOCUMENT chunker, the Markdown title,
 * and the HTML/DOCX title fallbacks; the chunker never cuts inside a heading
 * that fits the chunk.
 */
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { createChunker } from "../../src/chunk/index.js";
import { firstHeadingTitle, markdownHeadings, parseMarkdownBlocks } from "../../src/chunk/markdown-blocks.js";
import { markdownTitle } from "../../src/extract/markdown.js";
import { chunkBody } from "../../src/types.js";
import { checkInvariants, doc } from "../helpers/chunk-helpers.js";

/** `[level, title]` of every CommonMark heading of `text`. */
const headings = (text: string): [number | undefined, string | undefined][] =>
  markdownHeadings(text).map((h) => [h.level, h.title]);

describe("ATX headings (CommonMark §4.2)", () => {
  test.each<[string, [number, string][]]>([
    [
      "# foo\n## foo\n###### foo",
      [
        [1, "foo"],
        [2, "foo"],
        [6, "foo"],
      ],
    ],
    ["####### foo", []], // seven #s: a paragraph
    ["#5 bolt\n\n#hashtag", []], // a space or the line end must follow the #s
    ["\\## foo", []], // escaped
    [
      "   ### foo\n  ## foo\n # foo",
      [
        [3, "foo"],
        [2, "foo"],
        [1, "foo"],
      ],
    ], // up to 3 spaces
    ["    # foo", []], // 4 spaces: indented code
    ["foo\n    # bar", []], // …or a paragraph continuation line
    [
      "## foo ##\n  ###   bar    ###",
      [
        [2, "foo"],
        [3, "bar"],
      ],
    ], // closing sequence stripped
    [
      "# foo ##################################\n##### foo ##",
      [
        [1, "foo"],
        [5, "foo"],
      ],
    ],
    ["### foo ###     ", [[3, "foo"]]],
    ["### foo ### b", [[3, "foo ### b"]]], // not a closing sequence
    ["# foo#", [[1, "foo#"]]], // the closing #s need a space before them
    [
      "## \n#\n### ###",
      [
        [2, ""],
        [1, ""],
        [3, ""],
      ],
    ], // empty headings
    ["#\tfoo", [[1, "foo"]]], // a tab separates too
    ["# Title {#anchor}", [[1, "Title"]]], // attribute block (Pandoc/kramdown) dropped
    ["Foo bar\n# baz\nBar foo", [[1, "baz"]]], // an ATX heading interrupts a paragraph
  ])("%j", (text, expected) => {
    expect(headings(text)).toEqual(expected);
  });
});

describe("setext headings (CommonMark §4.3)", () => {
  test.each<[string, [number, string][]]>([
    [
      "Foo *bar*\n=========\n\nFoo *bar*\n---------",
      [
        [1, "Foo *bar*"],
        [2, "Foo *bar*"],
      ],
    ],
    ["Foo *bar\nbaz*\n====", [[1, "Foo *bar baz*"]]], // several lines, joined by a space
    ["  Foo *bar\nbaz*\t\n====", [[1, "Foo *bar baz*"]]],
    [
      "Foo\n-------------------------\n\nFoo\n=",
      [
        [2, "Foo"],
        [1, "Foo"],
      ],
    ], // any length, even 1
    [
      "   Foo\n---\n\n  Foo\n-----\n\n  Foo\n  ===",
      [
        [2, "Foo"],
        [2, "Foo"],
        [1, "Foo"],
      ],
    ],
    ["Foo\n   ----      ", [[2, "Foo"]]], // underline: ≤ 3 spaces, trailing spaces
    ["Foo\n    ---", []], // 4 spaces: a continuation line, no heading
    ["Foo\n= =\n\nFoo\n--- -", []], // no inner spaces (`--- -` is a thematic break)
    ["Foo  \n-----", [[2, "Foo"]]],
    ["Foo\\\n----", [[2, "Foo\\"]]],
    ["Foo #\n===", [[1, "Foo #"]]], // no closing sequence in setext headings
    ["    Foo\n    ---\n\nFoo\n---", [[2, "Foo"]]], // indented code is never a heading
    ["> Foo\n---", []], // block quote, then a thematic break
    ["> foo\nbar\n===", []], // lazy continuation of the quote
    ["- Foo\n---", []], // list item, then a thematic break
    ["intro\n- item\n---", []], // a list item interrupts the paragraph and owns what follows
    ["---\nFoo\n---\nBar\n---\nBaz", [[2, "Bar"]]], // `---` on line 1 opens YAML front matter (extension)
    [
      "x\n\n---\nFoo\n---\nBar\n---\nBaz",
      [
        [2, "Foo"],
        [2, "Bar"],
      ],
    ],
    ["\n====", []], // no paragraph above: text
    ["Foo\nBar\n---\nBaz", [[2, "Foo Bar"]]],
    ["```\nFoo\n---\n```\n\n~~~~\n# no\n~~~~", []], // inside fenced code
    ["Title {#top}\n=====", [[1, "Title"]]],
    [
      "Foo\r\n===\r\n\r\nBar\r---\r",
      [
        [1, "Foo"],
        [2, "Bar"],
      ],
    ], // CRLF and CR line ends
  ])("%j", (text, expected) => {
    expect(headings(text)).toEqual(expected);
  });

  test("the heading block spans its text lines and its underline", () => {
    const text = "Intro.\n\nTwo line\ntitle\n-----\n\nBody.";
    const h = parseMarkdownBlocks(text).find((b) => b.kind === "heading");
    expect(h && text.slice(h.start, h.end)).toBe("Two line\ntitle\n-----");
    expect(h?.style).toBe("setext");
  });
});

describe("thematic breaks and code (CommonMark §4.1, §4.4)", () => {
  test("`---` after a blank line is a thematic break, and text after it is a new paragraph", () => {
    const text = "para\n\n---\n\nnext\n===\n";
    expect(parseMarkdownBlocks(text).map((b) => [b.kind, text.slice(b.start, b.end)])).toEqual([
      ["paragraph", "para"],
      ["break", "---"],
      ["heading", "next\n==="],
    ]);
    // Before the fix `---⏎Foo⏎===` was read as one heading titled "--- Foo".
    expect(headings("x\n\n---\nFoo\n===")).toEqual([[1, "Foo"]]);
    expect(headings("* * *\nFoo\n---")).toEqual([[2, "Foo"]]);
  });

  test("indented code runs across blank lines and never holds a heading", () => {
    const text = "Text.\n\n    # comment\n\n    ---\n    x = 1\nAfter\n---";
    const blocks = parseMarkdownBlocks(text);
    expect(blocks.map((b) => [b.kind, text.slice(b.start, b.end)])).toEqual([
      ["paragraph", "Text."],
      ["code", "# comment\n\n    ---\n    x = 1"],
      ["heading", "After\n---"],
    ]);
  });

  test("capitals-only TITLE: lines are headings for the chunker, not for CommonMark", () => {
    expect(parseMarkdownBlocks("TERMS AND CONDITIONS:\ntext").map((b) => b.kind)).toEqual([
      "heading",
      "paragraph",
    ]);
    expect(headings("TERMS AND CONDITIONS:\ntext")).toEqual([]);
  });
});

describe("one detector for every title", () => {
  test("markdownTitle reads setext titles, skips fences, indented code and front matter", () => {
    expect(markdownTitle("Release notes\n=============\n\nText")).toBe("Release notes");
    expect(markdownTitle("Long title\nover two lines\n===\n")).toBe("Long title over two lines");
    expect(markdownTitle("---\ntitle_like: x\n---\n    # code\n```\n# fenced\n```\n# Real **one** #")).toBe(
      "Real one",
    );
    expect(markdownTitle("Sub\n---\n\n#hashtag\n\n## Two")).toBeUndefined();
  });

  test("firstHeadingTitle (HTML/DOCX title fallbacks) honours levels and skips code", () => {
    const text = "```\n# not a title\n```\n\n## Section\n\nMain\n====\n";
    expect(firstHeadingTitle(text)).toBe("Section");
    expect(firstHeadingTitle(text, 1)).toBe("Main");
    expect(firstHeadingTitle("#no\n\n    # code")).toBeUndefined();
  });
});

describe("the DOCUMENT chunker never cuts inside a heading that fits", () => {
  test("a setext heading is one section start, never split between text and underline", async () => {
    const para = "Words of a paragraph go on here. ".repeat(6).trim();
    const text = `${para}\n\nInstallation on\nLinux systems\n---------------\n\n${para}`;
    // The heading is 45 characters: every size from 90 leaves it at most half the chunk.
    for (const size of [90, 100, 120, 200, 400]) {
      const d = doc(text, "markdown");
      const config = { strategy: "document" as const, chunkSize: size, chunkOverlap: 0, minChunkSize: 0 };
      const chunks = await createChunker(config).chunk(d);
      checkInvariants(d, chunks, config);
      const h0 = text.indexOf("Installation");
      const h1 = text.indexOf("-\n\n") + 1;
      for (const c of chunks) expect(c.start <= h0 || c.start >= h1, `size ${size}`).toBe(true);
      const withHeading = chunks.find((c) => c.start <= h0 && c.end >= h1);
      expect(withHeading, `size ${size}`).toBeDefined();
      expect(withHeading?.metadata.headingPath).toEqual(["Installation on Linux systems"]);
    }
  });

  test("property: every heading of at most half the chunk size lies whole in one chunk", async () => {
    const piece = fc.constantFrom(
      "Some words here. ",
      "More text, longer text and more words. ",
      "\n\n",
      "\n",
      "\n\nTitle line\n=====\n\n",
      "\n\nTwo line\nheading\n---\n\n",
      "\n\n## ATX heading ##\n\n",
      "\n\n---\n\n",
      "\n\n```\ncode\n---\n```\n\n",
      "\n\n    indented\n",
      "\n- item\n",
      "x".repeat(60),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(piece, { maxLength: 40 }).map((p) => p.join("")),
        fc.integer({ min: 20, max: 300 }),
        fc.integer({ min: 0, max: 1 }),
        async (text, size, merge) => {
          const d = doc(text, "markdown");
          const config = {
            strategy: "document" as const,
            chunkSize: size,
            chunkOverlap: 0,
            minChunkSize: merge ? Math.floor(size / 3) : 0,
          };
          const chunks = await createChunker(config).chunk(d);
          checkInvariants(d, chunks, config);
          for (const h of parseMarkdownBlocks(text)) {
            if (h.kind !== "heading" || h.end - h.start > Math.floor(size / 2)) continue;
            const holder = chunks.find((c) => c.start <= h.start && c.end >= h.end);
            expect(holder, `heading ${JSON.stringify(text.slice(h.start, h.end))}`).toBeDefined();
            expect(chunkBody(holder as (typeof chunks)[number]).length).toBeGreaterThan(0);
          }
        },
      ),
      { numRuns: 150 },
    );
  });
});

describe("a heading is measured with the prefix its chunk really gets, and goes with its text", () => {
  const run = async (text: string, chunkSize: number, minChunkSize = 0) => {
    const d = doc(text, "markdown");
    const config = { strategy: "document" as const, chunkSize, chunkOverlap: 0, minChunkSize };
    const chunks = await createChunker(config).chunk(d);
    checkInvariants(d, chunks, config);
    return chunks.map((c) => ({ body: chunkBody(c), prefix: c.contextPrefix, text: c.text }));
  };

  test("a one-line setext heading that fits is never cut from its underline", async () => {
    const text =
      "Opening words.\n\nRelease notes\n=============\n\nFixed the login bug.\n\nAdded dark mode.\n";
    // The heading is 27 characters: with its title also counted in the prefix it looked like 42 > 36.
    for (const size of [36, 40, 48]) {
      const chunks = await run(text, size, 5);
      expect(
        chunks.some(
          (c) => c.body === "Release notes\n=============" || c.body.startsWith("Release notes\n="),
        ),
        `${size}`,
      ).toBe(true);
      expect(
        chunks.some((c) => /^=+/.test(c.body)),
        `${size}`,
      ).toBe(false);
      expect(
        chunks.some((c) => c.body === "Release notes"),
        `${size}`,
      ).toBe(false);
      // The chunk starting with the heading does not repeat it in its prefix.
      for (const c of chunks.filter((c) => c.body.startsWith("Release notes")))
        expect(c.prefix).toBeUndefined();
    }
  });

  test("a two-line setext heading that fits stays whole", async () => {
    const text =
      "Installing the agent\non Windows hosts\n-----------------\n\nRun the MSI as administrator.\n";
    const chunks = await run(text, 60);
    const holder = chunks.find((c) => c.body.startsWith("Installing the agent\non Windows hosts\n---"));
    expect(holder).toBeDefined();
    expect(chunks.some((c) => c.body.startsWith("on Windows") || c.body.startsWith("---"))).toBe(false);
  });

  test("a section that fits once its heading is not repeated as prefix is one chunk", async () => {
    const text = "Quick Start\n===========\n\nClone it, then run make.\n"; // 50 characters
    for (const size of [50, 55, 60]) {
      const chunks = await run(text, size);
      expect(chunks, `${size}`).toHaveLength(1);
      expect(chunks[0]?.text).toBe(text.trim());
    }
    // ATX behaves the same.
    expect(await run("# Quick Start\n\nClone it, then run make.\n", 40)).toHaveLength(1);
  });

  test("a heading that does not fit with the whole next paragraph takes its first sentence along", async () => {
    const text = "Backups\n=======\n\nSnapshots run nightly. They are kept for thirty days on the NAS.\n";
    const chunks = await run(text, 60);
    expect(chunks[0]?.body).toBe("Backups\n=======\n\nSnapshots run nightly.");
    expect(chunks[1]?.body).toBe("They are kept for thirty days on the NAS.");
    expect(chunks[1]?.prefix).toBe("Backups");
    // No sentence end fits with it: the heading alone is forced (the paragraph is not torn mid-sentence).
    const one = await run("Backups\n=======\n\nSnapshots run nightly and are kept for thirty days.\n", 60);
    expect(one.map((c) => c.body)).toEqual([
      "Backups\n=======",
      "Snapshots run nightly and are kept for thirty days.",
    ]);
  });

  test("a heading at the end of a merged group moves on to its own text", async () => {
    const text =
      "## Alpha\n\nShort a.\n\n## Beta\n\nBeta body sentence one is here. Beta body sentence two is longer.\n";
    const chunks = await run(text, 60, 40);
    for (const c of chunks) expect(c.body.endsWith("## Beta"), c.body).toBe(false);
    expect(chunks.some((c) => c.body.startsWith("## Beta\n\nBeta body"))).toBe(true);
  });

  test("property: setext text and underline never part across chunks; no heading-only chunk unless sizes force it", async () => {
    const word = fc.constantFrom("alpha", "beta", "gamma", "delta", "omega", "kappa", "sigma");
    const words = (min: number, max: number) =>
      fc.array(word, { minLength: min, maxLength: max }).map((w) => w.join(" "));
    const sentence = words(1, 7).map((s) => `${s.charAt(0).toUpperCase()}${s.slice(1)}.`);
    const paragraph = fc.array(sentence, { minLength: 1, maxLength: 5 }).map((s) => s.join(" "));
    const heading = fc
      .tuple(fc.array(words(1, 4), { minLength: 1, maxLength: 2 }), fc.integer({ min: 3, max: 30 }))
      .map(([lines, n]) => `${lines.join("\n")}\n${"=".repeat(n)}`);
    const section = fc
      .tuple(heading, fc.array(paragraph, { minLength: 1, maxLength: 3 }))
      .map(([h, ps]) => ({ h, ps }));
    await fc.assert(
      fc.asyncProperty(
        fc.option(paragraph, { nil: undefined }),
        fc.array(section, { minLength: 1, maxLength: 4 }),
        fc.integer({ min: 24, max: 160 }),
        fc.integer({ min: 0, max: 1 }),
        async (intro, sections, size, merge) => {
          const text = [intro, ...sections.map((s) => [s.h, ...s.ps].join("\n\n"))]
            .filter((x) => x !== undefined)
            .join("\n\n");
          const d = doc(text, "markdown");
          const config = {
            strategy: "document" as const,
            chunkSize: size,
            chunkOverlap: 0,
            minChunkSize: merge ? Math.floor(size / 3) : 0,
          };
          const chunks = await createChunker(config).chunk(d);
          checkInvariants(d, chunks, config);
          const blocks = parseMarkdownBlocks(text);
          blocks.forEach((h, i) => {
            if (h.kind !== "heading" || h.style !== "setext") return;
            const underline = text.lastIndexOf("\n", h.end - 1) + 1;
            const label = `${JSON.stringify(text)} at ${size}`;
            // Text lines and underline: never one chunk ending before the underline and the next starting on it.
            if (h.end - h.start <= size) {
              for (const c of chunks) expect(c.start > h.start && c.start <= underline, label).toBe(false);
              expect(
                chunks.some((c) => c.start <= h.start && c.end >= h.end),
                label,
              ).toBe(true);
            }
            // Heading-only chunk: only when the heading takes over half the chunk, or its body's
            // first sentence does not fit with it (all headings are level 1: no parent prefix).
            const only = chunks.find((c) => c.start === h.start && c.end === h.end);
            const body = blocks[i + 1];
            if (!only || body?.kind !== "paragraph") return;
            const dot = text.indexOf(". ", body.start);
            const firstEnd = dot === -1 || dot >= body.end ? body.end : dot + 1;
            const forced = h.end - h.start > size / 2 || firstEnd - h.start > size || firstEnd === body.end;
            expect(forced, `heading-only chunk: ${label}`).toBe(true);
          });
        },
      ),
      { numRuns: 300 },
    );
  });
});
