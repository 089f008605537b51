/**
 * Size measures: characters, and tokens of the BPE encodings and the bundled
 * model's tokenizer, including the piecewise count of long texts.
 */
import { createRequire } from "node:module";
import { describe, expect, test } from "vitest";
import { CHAR_MEASURE, createMeasure, spanSize, TOKENIZERS } from "../../src/chunk/measure.js";
import { ConfigError } from "../../src/errors.js";
import { readShared } from "../helpers/chunk-helpers.js";

const require = createRequire(import.meta.url);

describe("size measures", () => {
  test("characters are UTF-16 code units; spans are measured without copying for characters", () => {
    expect(CHAR_MEASURE.count("a😀b")).toBe(4);
    expect(spanSize(CHAR_MEASURE, "hello world", 6, 11)).toBe(5);
    expect(spanSize(createMeasure("tokens"), "hello world", 6, 11)).toBe(1);
    expect(spanSize(CHAR_MEASURE, "abc", 2, 1)).toBe(0);
  });

  test("every tokenizer counts tokens, and special-token text is ordinary text", () => {
    for (const name of TOKENIZERS) {
      const m = createMeasure("tokens", name);
      expect(m.unit).toBe("tokens");
      expect(m.name).toBe(name);
      expect(m.count("")).toBe(0);
      const n = m.count("Hello world, this is a test.");
      expect(n).toBeGreaterThan(3);
      expect(n).toBeLessThan(20);
      expect(m.count("a <|endoftext|> b")).toBeGreaterThan(3);
    }
    expect(() => createMeasure("tokens", "bert")).toThrow(ConfigError);
    expect(() => createMeasure("words" as "chars")).toThrow(ConfigError);
  });

  test("long texts are counted piecewise: at least the exact count, within 0.2% on real documents", () => {
    const exact = require("gpt-tokenizer/cjs/encoding/o200k_base") as {
      countTokens(t: string, o?: { disallowedSpecial?: Set<string> }): number;
    };
    const m = createMeasure("tokens", "o200k_base");
    for (const file of [
      "data/docs/markdown/rust_book_src/ch04-01-what-is-ownership.md",
      "data/docs/markdown/fastapi_docs_zh/index.md",
    ]) {
      const text = readShared(file);
      expect(text.length).toBeGreaterThan(10_000);
      const truth = exact.countTokens(text, { disallowedSpecial: new Set() });
      const counted = m.count(text);
      expect(counted).toBeGreaterThanOrEqual(truth);
      expect(counted).toBeLessThanOrEqual(truth * 1.002);
    }
  });

  test("an unbroken 100k-character CJK run (one BPE pre-token) is counted without quadratic blow-up", () => {
    const run = "中文字符测试没有标点".repeat(10_000);
    const n = createMeasure("tokens", "o200k_base").count(run);
    // About 0.6 tokens per character for this text, counted in 1,024-character pieces.
    expect(n).toBeGreaterThan(run.length / 3);
    expect(n).toBeLessThan(run.length);
  });
});
