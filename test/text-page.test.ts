import { describe, expect, it } from "vitest";
import { KnowledgeLayerError } from "../src/errors.js";
import { textPage } from "../src/text-page.js";

/** True when `s` holds a high surrogate not followed by a low one, or a low one not preceded by a high one. */
function hasLoneSurrogate(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const next = s.charCodeAt(i + 1);
      if (!(next >= 0xdc00 && next <= 0xdfff)) return true;
      i++;
    } else if (c >= 0xdc00 && c <= 0xdfff) return true;
  }
  return false;
}

/** Texts with astral characters at the start, the end, side by side and between BMP text. */
const TEXTS = [
  "😀",
  "a😀",
  "😀b",
  "😀😀😀",
  "x😀y𝄞z",
  "𝕳𝖊𝖑𝖑𝖔, world 🌍!",
  "👩‍👩‍👧‍👦 family", // ZWJ sequence: four astral characters joined by U+200D
  "é🇫🇷ü🇩🇪", // flags: pairs of regional indicators
  "plain ascii text",
  "",
];

describe("textPage", () => {
  it("pages every text from every offset with every limit: the pages rebuild the text, each advances, none splits a pair", () => {
    let walks = 0;
    for (const text of TEXTS) {
      for (let limit = 1; limit <= text.length + 1; limit++) {
        for (let first = 0; first <= text.length; first++) {
          // Start anywhere (inside a pair too), then follow nextOffset to the end.
          let offset = first;
          let joined = "";
          let start: number | undefined;
          for (let pages = 0; ; pages++) {
            expect(pages).toBeLessThanOrEqual(text.length + 1);
            const page = textPage(text, offset, limit);
            start ??= page.start;
            expect(page.text).toBe(text.slice(page.start, page.end));
            expect(hasLoneSurrogate(page.text)).toBe(false);
            expect(page.end - page.start).toBeLessThanOrEqual(Math.max(limit, 2));
            joined += page.text;
            if (!page.truncated) {
              expect(page.end).toBe(text.length);
              expect(page.nextOffset).toBeUndefined();
              break;
            }
            expect(page.nextOffset).toBe(page.end);
            expect(page.end).toBeGreaterThan(offset);
            expect(page.text.length).toBeGreaterThan(0);
            offset = page.nextOffset as number;
          }
          // The start moves back one unit only from inside a pair.
          const inside =
            first > 0 &&
            first < text.length &&
            /[\uD800-\uDBFF][\uDC00-\uDFFF]/.test(text.slice(first - 1, first + 1));
          expect(start).toBe(inside ? first - 1 : first);
          expect(joined).toBe(text.slice(start));
          walks++;
        }
      }
    }
    expect(walks).toBeGreaterThan(500);
  });

  it("gives one whole astral character for limit 1 where a pair starts, and stops before a pair a longer limit would cut", () => {
    expect(textPage("😀b", 0, 1)).toEqual({ start: 0, end: 2, text: "😀", truncated: true, nextOffset: 2 });
    expect(textPage("a😀b", 0, 2)).toEqual({ start: 0, end: 1, text: "a", truncated: true, nextOffset: 1 });
    expect(textPage("a😀b", 1, 1)).toEqual({ start: 1, end: 3, text: "😀", truncated: true, nextOffset: 3 });
    // From inside the pair: the page starts at the pair.
    expect(textPage("a😀b", 2, 1)).toEqual({ start: 1, end: 3, text: "😀", truncated: true, nextOffset: 3 });
    expect(textPage("a😀b", 3, 5)).toEqual({ start: 3, end: 4, text: "b", truncated: false });
  });

  it("answers an empty final page for an offset at or past the end", () => {
    expect(textPage("abc", 3, 10)).toEqual({ start: 3, end: 3, text: "", truncated: false });
    expect(textPage("a😀", 99, 1)).toEqual({ start: 3, end: 3, text: "", truncated: false });
  });

  it("keeps lone surrogates of malformed text as one character each", () => {
    const text = "a\uD83Db\uDE00c";
    let offset = 0;
    const pages: string[] = [];
    for (;;) {
      const page = textPage(text, offset, 1);
      pages.push(page.text);
      if (page.nextOffset === undefined) break;
      offset = page.nextOffset;
    }
    expect(pages).toEqual(["a", "\uD83D", "b", "\uDE00", "c"]);
  });

  it("refuses a negative or fractional offset and a limit below 1, naming the argument", () => {
    expect(() => textPage("abc", -1, 1)).toThrow(KnowledgeLayerError);
    expect(() => textPage("abc", -1, 1)).toThrow("offset must be an integer of at least 0 (got -1)");
    expect(() => textPage("abc", 1.5, 1)).toThrow("offset must be an integer of at least 0 (got 1.5)");
    expect(() => textPage("abc", 0, 0)).toThrow("limit must be an integer of at least 1 (got 0)");
    expect(() => textPage("abc", 0, Number.NaN)).toThrow("limit must be an integer of at least 1 (got NaN)");
  });
});
