/**
 * Sentence splitting (src/chunk/sentences.ts): English, Chinese and mixed text,
 * the exact spans of `sentenceSpans`, and linear behaviour on a 1 MB text
 * (checked by comparing results, not by timing).
 */
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import {
  findBoundaries,
  sentenceBoundaries,
  sentenceSpans,
  splitSentences,
} from "../../src/chunk/sentences.js";
import { isBlankChar, readShared } from "../helpers/chunk-helpers.js";

/** Sentences of `text` by `splitSentences`. */
const split = (text: string): string[] => splitSentences(text);

describe("English", () => {
  test.each<[string, string[]]>([
    [
      "Revenue grew 12.5% to $3.2 million in Q3. Pi is 3.14159. The vote passed.",
      ["Revenue grew 12.5% to $3.2 million in Q3.", "Pi is 3.14159.", "The vote passed."],
    ],
    [
      "Version v1.2.3 fixed it. Use 2.0.1-beta.4 now. Node.js 20.11 is required.",
      ["Version v1.2.3 fixed it.", "Use 2.0.1-beta.4 now.", "Node.js 20.11 is required."],
    ],
    [
      "See https://example.com/a/b.html?x=1.5&y=2 for details. Mail ops@example.co.uk today! Done.",
      ["See https://example.com/a/b.html?x=1.5&y=2 for details.", "Mail ops@example.co.uk today!", "Done."],
    ],
    ["Visit www.example.com. It has docs.", ["Visit www.example.com.", "It has docs."]],
    [
      "Use a digest, i.e. a hash. Some tools, e.g. sha256sum, help. Compare A vs. B first.",
      ["Use a digest, i.e. a hash.", "Some tools, e.g. sha256sum, help.", "Compare A vs. B first."],
    ],
    [
      "Dr. Patel of the U.S. office signed off at 9 a.m. on Friday. Mr. Smith agreed.",
      ["Dr. Patel of the U.S. office signed off at 9 a.m. on Friday.", "Mr. Smith agreed."],
    ],
    [
      "Mrs. Jones met Prof. Lee at St. Mary's church. Ms. Kay was late.",
      ["Mrs. Jones met Prof. Lee at St. Mary's church.", "Ms. Kay was late."],
    ],
    ["The U.S. Army is large. It has many units.", ["The U.S. Army is large.", "It has many units."]],
    ["He moved to the U.S. The weather was better.", ["He moved to the U.S.", "The weather was better."]],
    ["We met at 9 a.m. Friday. It rained.", ["We met at 9 a.m. Friday.", "It rained."]],
    ["We met at 9 a.m. It rained.", ["We met at 9 a.m.", "It rained."]],
    ["The shop is on Main St. The owner is nice.", ["The shop is on Main St.", "The owner is nice."]],
    [
      "J. R. R. Tolkien wrote it. George W. Bush read it.",
      ["J. R. R. Tolkien wrote it.", "George W. Bush read it."],
    ],
    ["Take vitamin C. It helps.", ["Take vitamin C.", "It helps."]],
    ["See Fig. 3 and No. 5 below. Then stop.", ["See Fig. 3 and No. 5 below.", "Then stop."]],
    [
      "Smith et al. showed it. Apples, pears, etc. are fruit.",
      ["Smith et al. showed it.", "Apples, pears, etc. are fruit."],
    ],
    ["As Smith et al. The results hold.", ["As Smith et al.", "The results hold."]],
    ["Bring apples, pears, etc. The rest is here.", ["Bring apples, pears, etc.", "The rest is here."]],
    ['He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]],
    ['"Why?" she asked. "Because!" he said.', ['"Why?" she asked.', '"Because!" he said.']],
    ["(See the appendix.) Next comes the proof.", ["(See the appendix.)", "Next comes the proof."]],
    ["**Note.** Read this first.", ["**Note.**", "Read this first."]],
    ["Wait... What? Really?! Yes.", ["Wait...", "What?", "Really?!", "Yes."]],
    ["He paused... then spoke. Then nothing.", ["He paused... then spoke.", "Then nothing."]],
    ["He paused . . . then spoke. End.", ["He paused . . . then spoke.", "End."]],
    ["It ended… The next day came.", ["It ended…", "The next day came."]],
    ["Ends with an abbreviation, e.g.", ["Ends with an abbreviation, e.g."]],
  ])("%s", (text, expected) => {
    expect(split(text)).toEqual(expected);
  });

  test("B12 (shared case): decimals and abbreviations do not end sentences", () => {
    const text = readShared("cases/B12.txt");
    const expected = (JSON.parse(readShared("cases/B12.expect.json")) as { expect_sentences: string[] })
      .expect_sentences;
    expect(split(text)).toEqual(expected);
  });
});

describe("Chinese, Japanese and mixed text", () => {
  test.each<[string, string[]]>([
    ["你好。世界！好吗？", ["你好。", "世界！", "好吗？"]],
    ["他说：“好。”然后走了。", ["他说：“好。”", "然后走了。"]],
    ["（这是注释。）下一句。", ["（这是注释。）", "下一句。"]],
    ["「行こう！」と彼は言った。", ["「行こう！」", "と彼は言った。"]],
    ["真的吗？！是的。", ["真的吗？！", "是的。"]],
    ["增长了3.5%。价格是12.8元。", ["增长了3.5%。", "价格是12.8元。"]],
    [
      "版本v1.2.3已发布。详见https://example.com/a.html。",
      ["版本v1.2.3已发布。", "详见https://example.com/a.html。"],
    ],
    ["他想了想……然后说好。", ["他想了想……然后说好。"]],
    ["美国（U.S.）的经济很好。", ["美国（U.S.）的经济很好。"]],
    ["一；二", ["一；", "二"]],
    ["今日は晴れです。明日は雨？", ["今日は晴れです。", "明日は雨？"]],
    ["我用Node.js写代码。It is great. 你呢？OK.", ["我用Node.js写代码。", "It is great.", "你呢？", "OK."]],
    ["This is good.我同意。Dr. Wang说：“对！”", ["This is good.", "我同意。", "Dr. Wang说：“对！”"]],
    ["半角句点｡次の文。", ["半角句点｡", "次の文。"]],
  ])("%s", (text, expected) => {
    expect(split(text)).toEqual(expected);
  });

  test("full-width boundaries are offsets after the terminator and its closers", () => {
    expect(sentenceBoundaries("你好。世界！好吗？")).toEqual([3, 6, 9]);
    expect(sentenceBoundaries("他说：“好。”然后")).toEqual([7]);
  });
});

describe("newlines", () => {
  test("every line break is a line boundary; splitSentences does not split on them", () => {
    const text = "A hard-wrapped\nsentence here. Next\none.";
    expect(findBoundaries(text)).toEqual([
      { offset: 14, kind: "line" },
      { offset: 29, kind: "sentence" },
      { offset: 34, kind: "line" },
      { offset: 39, kind: "sentence" },
    ]);
    expect(split(text)).toEqual(["A hard-wrapped\nsentence here.", "Next\none."]);
    expect(sentenceBoundaries("line one\r\nline two")).toEqual([8]);
  });

  test("ordered-list markers at line starts are not sentence ends", () => {
    expect(split("1. First item\n2. Second item")).toEqual(["1. First item\n2. Second item"]);
    expect(sentenceBoundaries("1. Intro and v1.2 now")).toEqual([]);
  });

  test("sentenceSpans: paragraph breaks (default), never, always", () => {
    const text = "# Title\n\nBody text here. More\ntext.\n \r\n- item one\n- item two";
    const slices = (lineBreaks: "never" | "paragraph" | "always") =>
      sentenceSpans(text, 0, text.length, { lineBreaks }).map((s) => text.slice(s.start, s.end));
    expect(slices("paragraph")).toEqual([
      "# Title",
      "Body text here.",
      "More\ntext.",
      "- item one\n- item two",
    ]);
    expect(slices("never")).toEqual(["# Title\n\nBody text here.", "More\ntext.", "- item one\n- item two"]);
    expect(slices("always")).toEqual([
      "# Title",
      "Body text here.",
      "More",
      "text.",
      "- item one",
      "- item two",
    ]);
  });

  test("from/to restrict the scanned range", () => {
    const t = "One. Two. Three. Four.";
    expect(sentenceBoundaries(t, 5, 16)).toEqual([9, 16]);
    expect(sentenceSpans(t, 5, 16)).toEqual([
      { start: 5, end: 9 },
      { start: 10, end: 16 },
    ]);
  });

  test("blank input gives nothing", () => {
    for (const t of ["", "   \n\t  \r\n", " \u200b "]) {
      expect(split(t)).toEqual([]);
      expect(sentenceSpans(t)).toEqual([]);
    }
  });
});

describe("sentenceSpans invariants (property)", () => {
  const alphabet = fc.constantFrom(
    ...'ab Z.。！？…!?\n\r \u3000"”）e.g.U.S.'.split(""),
    "Dr. ",
    "e.g. ",
    "U.S. ",
    "The ",
    "3.5",
    "你",
    "😀",
  );
  test("ordered, disjoint, trimmed, covering every non-blank character", () => {
    fc.assert(
      fc.property(fc.array(alphabet, { maxLength: 60 }), (parts) => {
        const text = parts.join("");
        const spans = sentenceSpans(text);
        const covered = new Uint8Array(text.length);
        let prevEnd = 0;
        for (const s of spans) {
          expect(s.start).toBeGreaterThanOrEqual(prevEnd);
          expect(s.end).toBeGreaterThan(s.start);
          expect(isBlankChar(text, s.start)).toBe(false);
          expect(isBlankChar(text, s.end - 1)).toBe(false);
          covered.fill(1, s.start, s.end);
          prevEnd = s.end;
        }
        for (let i = 0; i < text.length; i++) if (!isBlankChar(text, i)) expect(covered[i]).toBe(1);
        for (const b of findBoundaries(text)) {
          expect(b.offset).toBeGreaterThanOrEqual(b.kind === "line" ? 0 : 1);
          expect(b.offset).toBeLessThanOrEqual(text.length);
        }
      }),
      { numRuns: 500, seed: 7 },
    );
  });
});

describe("1 MB text: linear behaviour by construction", () => {
  const pool = [
    "Revenue grew 12.5% to $3.2 million in Q3.",
    "Dr. Patel of the U.S. office signed off at 9 a.m. on Friday.",
    "Details are in the annex, e.g. section 4.2.",
    "Version v1.2.3 is at https://example.com/a?b=1.2 now!",
    "我爱北京。",
    "他说：“好。”",
    "真的吗？",
    "Wait... what happened?",
    'He said "Stop." Then he left.',
    "The vote passed.",
  ];
  /** Deterministic paragraphs of 1-8 sentences from the pool (mulberry32 generator). */
  function paragraphs(count: number): string[] {
    let seed = 12345;
    const next = (n: number): number => {
      seed = (seed + 0x6d2b79f5) | 0;
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) % n;
    };
    return Array.from({ length: count }, () =>
      Array.from({ length: 1 + next(8) }, () => pool[next(pool.length)]).join(next(5) === 0 ? "\n" : " "),
    );
  }
  const paras = paragraphs(8000);
  const big = paras.join("\n\n");

  test("the result for the whole text is the concatenation of the results for its paragraphs", () => {
    expect(big.length).toBeGreaterThan(1_000_000);
    const whole = sentenceSpans(big);
    const pieces: { start: number; end: number }[] = [];
    let sentenceEnds = 0;
    let offset = 0;
    for (const p of paras) {
      for (const s of sentenceSpans(p)) pieces.push({ start: s.start + offset, end: s.end + offset });
      sentenceEnds += findBoundaries(p).filter((b) => b.kind === "sentence").length;
      offset += p.length + 2;
    }
    expect(whole.length).toBe(pieces.length);
    expect(whole).toEqual(pieces);
    expect(findBoundaries(big).filter((b) => b.kind === "sentence").length).toBe(sentenceEnds);
    // Doubling the text doubles the output exactly.
    expect(sentenceSpans(`${big}\n\n${big}`).length).toBe(2 * whole.length);
    expect(splitSentences(big).length).toBeGreaterThan(30_000);
  });
});
