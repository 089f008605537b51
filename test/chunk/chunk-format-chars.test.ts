/**
 * Lossless chunking down to every code unit (issue 13 item 8): a chunker's
 * "blank" is Unicode White_Space (plus U+200B ZERO WIDTH SPACE, blank per the
 * conformance case B13), so every other code unit — a zero-width joiner inside an
 * emoji sequence longer than the chunk, ZWNJ, a BOM, U+2060, variation selectors,
 * tag characters, combining marks, soft hyphens — lies in some chunk, for every
 * chunker.
 */
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { type ConcreteStrategy, createChunker } from "../../src/chunk/index.js";
import { isBlank } from "../../src/chunk/spans.js";
import type { ChunkingConfig } from "../../src/config.js";
import type { Embedder } from "../../src/embed/contract.js";
import type { Chunk, ExtractedDocument } from "../../src/types.js";
import { checkInvariants, doc, slackDoc } from "../helpers/chunk-helpers.js";

/** Deterministic embedder: a vector from the text's first code units (no model). */
const fakeEmbedder: Embedder = {
  provider: "fake",
  modelId: "fake-format-chars",
  dimension: 4,
  async embedTexts(texts) {
    return texts.map((t) => vectorOf(t));
  },
  async embedQuery(text) {
    return vectorOf(text);
  },
};

function vectorOf(text: string): Float32Array {
  const v = [1, 0, 0, 0].map((x, i) => x + (text.charCodeAt(i) % 7) / 7);
  const n = Math.hypot(...v);
  return Float32Array.from(v.map((x) => x / n));
}

const FAMILY = "👨‍👩‍👧‍👦"; // 4 emoji joined by 3 ZWJs: 11 code units
const PIECES = [
  FAMILY,
  "🏳️‍🌈", // flag + VS16 + ZWJ + rainbow
  "👩🏽‍💻", // skin tone + ZWJ
  "🏴\u{e0067}\u{e0062}\u{e0065}\u{e006e}\u{e0067}\u{e007f}", // tag sequence (England flag)
  "❤️",
  "e\u0301\u0323", // combining marks
  "\u0915\u094d\u200d\u0937", // Devanagari with ZWJ
  "\u0645\u200c\u06cc", // Persian with ZWNJ
  "\ufeff", // BOM / ZWNBSP
  "\u2060", // word joiner
  "\u200d",
  "\u200c",
  "\u200b",
  "\u00ad", // soft hyphen
  "\u180e",
  "\ufe0f",
  "\u061c", // Arabic letter mark
  "\u200e", // LRM
  "word",
  "Satz.",
  " ",
  "\u00a0",
  "\u3000",
  "\n",
  "\n\n",
  "\r\n",
  "\t",
  "\n# Heading\n",
  "\nTitle\n---\n",
];

/** Every code unit of `text` that is not blank and lies in no chunk, with its offset. */
function uncovered(text: string, chunks: Chunk[]): string[] {
  const covered = new Uint8Array(text.length);
  for (const c of chunks) covered.fill(1, c.start, c.end);
  const out: string[] = [];
  for (let i = 0; i < text.length; i++) {
    const ws = /[\p{White_Space}\u200b]/u.test(text.charAt(i));
    if (!covered[i] && !ws) out.push(`${i}:U+${text.charCodeAt(i).toString(16).toUpperCase()}`);
  }
  return out;
}

const STRATEGIES: [ConcreteStrategy, (t: string) => ExtractedDocument][] = [
  ["fixed", (t) => doc(t, "text")],
  ["semantic", (t) => doc(t, "text")],
  ["document", (t) => doc(t, "markdown")],
  ["email", (t) => doc(t, "email", { from: "a@example.com", subject: "s" })],
  ["code", (t) => doc(t, "code", { language: "python" })],
  ["code", (t) => doc(t, "code", { language: "unknown-lang" })],
  ["slack", (t) => slackDoc("c", [{ user: "ana", ts: "1700000000.000100", text: t }])],
  ["embedding_semantic", (t) => doc(t, "text")],
];

async function run(strategy: ConcreteStrategy, d: ExtractedDocument, c: ChunkingConfig): Promise<Chunk[]> {
  return createChunker(c, strategy, { embedder: fakeEmbedder }).chunk(d);
}

describe("isBlank is Unicode White_Space (plus U+200B)", () => {
  test("agrees with \\p{White_Space} on every BMP code unit except U+200B", () => {
    const differ: string[] = [];
    for (let code = 0; code <= 0xffff; code++) {
      const ws = /\p{White_Space}/u.test(String.fromCharCode(code)) || code === 0x200b;
      if (isBlank(code) !== ws) differ.push(code.toString(16));
    }
    expect(differ).toEqual([]);
    for (const c of [0x200d, 0x200c, 0xfeff, 0x2060, 0x180e, 0xfe0f, 0x00ad]) expect(isBlank(c)).toBe(false);
  });
});

describe("every non-whitespace code unit lies in a chunk", () => {
  test.each(STRATEGIES)(
    "%s: a ZWJ emoji sequence longer than the chunk keeps its joiners",
    async (strategy, make) => {
      const text = `${FAMILY}${FAMILY} x${FAMILY}`;
      const d = make(text);
      for (const chunkSize of [2, 3, 5, 8]) {
        const c: ChunkingConfig = {
          strategy: "auto",
          chunkSize,
          chunkOverlap: 0,
          minChunkSize: 0,
          embeddingSemantic: { maxSize: chunkSize, fallbackSize: chunkSize, fallbackOverlap: 0, minSize: 0 },
        };
        const chunks = await run(strategy, d, c);
        expect(uncovered(d.text, chunks), `size ${chunkSize}`).toEqual([]);
        // The joiners are in the chunk bodies themselves, not just in the covered ranges.
        const zwj = [...chunks.map((x) => d.text.slice(x.start, x.end)).join("")].filter(
          (ch) => ch === "\u200d",
        );
        expect(zwj.length, `size ${chunkSize}`).toBeGreaterThanOrEqual(9);
        if (strategy !== "slack" && strategy !== "email") checkInvariants(d, chunks, c);
      }
    },
  );

  test("a BOM, word joiner or ZWNJ at a chunk edge is kept, not trimmed", async () => {
    const text = "\ufeffStart.\n\nword\u2060\n\n\u200cend";
    const chunks = await run("semantic", doc(text), {
      strategy: "auto",
      chunkSize: 8,
      chunkOverlap: 0,
      minChunkSize: 0,
    });
    expect(chunks.map((c) => text.slice(c.start, c.end))).toEqual([
      "\ufeffStart.",
      "word\u2060",
      "\u200cend",
    ]);
  });

  test.each(STRATEGIES)("%s: property over random format-character text", async (strategy, make) => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.constantFrom(...PIECES), { maxLength: 60 }).map((p) => p.join("")),
        fc.integer({ min: 2, max: 120 }),
        fc.double({ min: 0, max: 0.5, noNaN: true }),
        async (text, chunkSize, o) => {
          const d = make(text);
          const c: ChunkingConfig = {
            strategy: "auto",
            chunkSize,
            chunkOverlap: Math.min(chunkSize - 1, Math.floor(chunkSize * o)),
            minChunkSize: 0,
            embeddingSemantic: {
              maxSize: chunkSize,
              fallbackSize: chunkSize,
              fallbackOverlap: 0,
              minSize: Math.floor(chunkSize / 4),
            },
          };
          const chunks = await run(strategy, d, c);
          expect(uncovered(d.text, chunks)).toEqual([]);
        },
      ),
      { numRuns: 120 },
    );
  });
});
