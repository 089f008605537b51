/**
 * DOCUMENT context prefixes and heading paths (issue 13 items 6 and 7):
 * - a chunk's prefix leaves out every heading the chunk itself starts with — the
 *   document title included, also when the title was carried into a subsection
 *   or a group of merged sibling sections — so no text is embedded twice;
 * - a chunk that merges several sibling sections has `headingPath` = the path they
 *   share and `metadata.headings` = the path of each, and its citation names them all.
 */
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { createChunker } from "../../src/chunk/index.js";
import { markdownHeadings } from "../../src/chunk/markdown-blocks.js";
import type { ChunkingConfig } from "../../src/config.js";
import { attribute, formatCitation, headingsLabel } from "../../src/retrieve/attribution.js";
import type { StoredChunk } from "../../src/store/catalog.js";
import { type Chunk, chunkBody } from "../../src/types.js";
import { checkInvariants, doc } from "../helpers/chunk-helpers.js";

const config = (chunkSize: number, minChunkSize = 0): ChunkingConfig => ({
  strategy: "document",
  chunkSize,
  chunkOverlap: 0,
  minChunkSize,
});

async function chunk(text: string, c: ChunkingConfig): Promise<Chunk[]> {
  const d = doc(text, "markdown");
  const chunks = await createChunker(c).chunk(d);
  checkInvariants(d, chunks, c);
  return chunks;
}

const view = (c: Chunk) => [chunkBody(c), c.contextPrefix, c.metadata.headingPath, c.metadata.headings];

describe("the title is not embedded twice (item 6)", () => {
  test("a setext title carried into merged subsections is not also the prefix", async () => {
    const text = "Field Guide\n===========\n\n## Birds\n\nOwls.\n\n## Trees\n\nOaks.\n";
    expect((await chunk(text, config(400, 100))).map(view)).toEqual([
      [
        "Field Guide\n===========\n\n## Birds\n\nOwls.\n\n## Trees\n\nOaks.",
        undefined,
        ["Field Guide"],
        [
          ["Field Guide", "Birds"],
          ["Field Guide", "Trees"],
        ],
      ],
    ]);
  });

  test("an ATX title with a subsection: prefix only for chunks that do not show it", async () => {
    const body = "Sentence number one is here. ".repeat(8).trim();
    const text = `# Manual\n\n## Setup\n\n${body}\n\n## Use\n\nShort.\n`;
    const chunks = await chunk(text, config(160));
    const first = chunks[0] as Chunk;
    expect(chunkBody(first).startsWith("# Manual\n\n## Setup")).toBe(true);
    expect(first.contextPrefix).toBeUndefined();
    expect(first.text.match(/Manual/g)).toHaveLength(1);
    // Continuations do not start with a heading: they carry the whole path.
    expect(chunks.slice(1, -1).every((c) => c.contextPrefix === "Manual > Setup")).toBe(true);
    const last = chunks[chunks.length - 1] as Chunk;
    expect([chunkBody(last), last.contextPrefix]).toEqual(["## Use\n\nShort.", "Manual"]);
  });

  test("property: no chunk's prefix ends with a heading its body starts with", async () => {
    const piece = fc.constantFrom(
      "# Title\n\n",
      "Guide\n=====\n\n",
      "## Part\n\n",
      "Sub part\n--------\n\n",
      "### Deep\n\n",
      "Short text.\n\n",
      "A longer paragraph that needs some room to fit in a chunk. ",
      "\n\n",
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(piece, { minLength: 1, maxLength: 25 }).map((p) => p.join("")),
        fc.integer({ min: 40, max: 400 }),
        fc.integer({ min: 0, max: 2 }),
        async (text, size, m) => {
          // Headings of the document (a `### x` inside a paragraph line is none, even at a chunk start).
          const heads = markdownHeadings(text);
          for (const c of await chunk(text, config(size, Math.floor((size * m) / 4)))) {
            const lead = heads.find((h) => h.start === c.start);
            if (!lead || !c.contextPrefix) continue;
            const parts = c.contextPrefix.split(" > ");
            expect(parts[parts.length - 1], JSON.stringify(chunkBody(c))).not.toBe(lead.title);
          }
        },
      ),
      { numRuns: 150 },
    );
  });
});

describe("merged sections cite what they cover (item 7)", () => {
  const text =
    "# Handbook\n\nIntro text of the handbook.\n\n## Leave\n\nAsk early.\n\n## Travel\n\nBook trains.\n\n## Expenses\n\nKeep receipts.\n";

  test("headingPath is the common path; metadata.headings lists every section", async () => {
    const chunks = await chunk(text, config(300, 200));
    expect(chunks.map(view)).toEqual([
      [
        text.trim(),
        undefined,
        ["Handbook"],
        [["Handbook"], ["Handbook", "Leave"], ["Handbook", "Travel"], ["Handbook", "Expenses"]],
      ],
    ]);
    // Without the intro merged in (a smaller minimum), the sibling group alone.
    const two = await chunk(text, config(300, 30));
    expect(two.map(view)).toEqual([
      ["# Handbook\n\nIntro text of the handbook.", undefined, ["Handbook"], undefined],
      [
        "## Leave\n\nAsk early.\n\n## Travel\n\nBook trains.\n\n## Expenses\n\nKeep receipts.",
        "Handbook",
        ["Handbook"],
        [
          ["Handbook", "Leave"],
          ["Handbook", "Travel"],
          ["Handbook", "Expenses"],
        ],
      ],
    ]);
  });

  test("a single section has no metadata.headings", async () => {
    const chunks = await chunk("# Only\n\nOne section of text.\n", config(300, 200));
    expect(chunks.map(view)).toEqual([["# Only\n\nOne section of text.", undefined, ["Only"], undefined]]);
  });

  test("attribution and citation name every covered section", async () => {
    const [, group] = await chunk(text, config(300, 30));
    const stored = {
      chunkIndex: 1,
      totalChunks: 2,
      start: group?.start ?? 0,
      end: group?.end ?? 0,
      metadata: group?.metadata ?? {},
      document: {
        uri: "/kb/handbook.md",
        path: "/kb/handbook.md",
        type: "markdown",
        title: "Handbook",
        metadata: {},
      },
    } as unknown as StoredChunk;
    const a = attribute(stored);
    expect(a.headingPath).toEqual(["Handbook"]);
    expect(a.headings).toEqual([
      ["Handbook", "Leave"],
      ["Handbook", "Travel"],
      ["Handbook", "Expenses"],
    ]);
    expect(formatCitation(a, stored, null)).toBe(
      `/kb/handbook.md › Handbook › Leave | Travel | Expenses (chunk 2/2, chars ${stored.start}–${stored.end})`,
    );
  });

  test("headingsLabel: common path, then each section's own part", () => {
    expect(headingsLabel([["A"], ["B"]])).toBe("A | B");
    expect(
      headingsLabel([
        ["G", "A", "x"],
        ["G", "B"],
      ]),
    ).toBe("G › A › x | B");
    expect(headingsLabel([["G"], ["G", "A"]])).toBe("G | G › A");
    expect(headingsLabel([["N"], ["N"]])).toBe("N | N");
  });
});

describe("front matter is metadata, not chunk text", () => {
  const mdDoc = async (name: string, content: string) => {
    const { extractBytes } = await import("../../src/extract/index.js");
    const [d] = await extractBytes(name, Buffer.from(content));
    return d as NonNullable<typeof d>;
  };

  test("the YAML block is left out of the chunks; its keys stay in the document metadata", async () => {
    const content =
      "---\ntitle: Release Runbook\ntags: [ops, release]\n---\n\n# Release Runbook\n\nTag the commit, then push the tag.\n\n## Hotfix\n\nBranch from the tag.\n";
    const d = await mdDoc("runbook.md", content);
    expect(d.metadata).toMatchObject({ title: "Release Runbook", tags: ["ops", "release"] });
    for (const size of [60, 400]) {
      const chunks = await createChunker(config(size)).chunk(d);
      // Every character but the front matter block's is in a chunk.
      const fmEnd = d.text.indexOf("\n---\n") + 5;
      checkInvariants({ ...d, text: " ".repeat(fmEnd) + d.text.slice(fmEnd) }, chunks, config(size));
      const first = chunks[0] as Chunk;
      expect(chunkBody(first).startsWith("# Release Runbook")).toBe(true);
      expect(first.text.match(/Release Runbook/g)).toHaveLength(1);
      for (const c of chunks) expect(c.text).not.toMatch(/^---$|title:|tags:/m);
    }
  });

  test("TOML front matter too; a leading rule around prose, or a file of front matter only, is kept", async () => {
    const toml = await mdDoc("t.md", '+++\ntitle = "Notes"\n# a TOML comment\n+++\n\nPlain notes here.\n');
    const tc = await createChunker(config(400)).chunk(toml);
    expect(tc.map(chunkBody)).toEqual(["Plain notes here."]);
    const rule = "---\n\nJust prose between rules.\n\n---\n\nMore prose.\n";
    const rc = await createChunker(config(400)).chunk(doc(rule, "markdown"));
    expect(rc.map(chunkBody).join("\n\n")).toBe(rule.trim());
    const only = "---\ntitle: Section index\n---\n";
    const oc = await createChunker(config(400)).chunk(doc(only, "markdown"));
    expect(oc.map(chunkBody)).toEqual([only.trim()]);
  });
});
