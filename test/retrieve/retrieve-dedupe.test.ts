import { readFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  DEFAULT_DEDUP_THRESHOLD,
  jaccard,
  removeNearDuplicates,
  tokenSet,
} from "../../src/retrieve/dedupe.js";
import { SHARED } from "../helpers/helpers.js";

const sorted = (s: Set<string>): string[] => [...s].sort();

describe("tokenSet", () => {
  it("takes Unicode word runs, lower-cased, punctuation stripped", () => {
    expect(sorted(tokenSet("The build is green."))).toEqual(["build", "green", "is", "the"]);
    expect(sorted(tokenSet("Привет, команда!"))).toEqual(["команда", "привет"]);
    expect(sorted(tokenSet("Überläufe: ÜBERLÄUFE"))).toEqual(["überläufe"]);
    expect(sorted(tokenSet("user_id RFC-9110"))).toEqual(["9110", "id", "rfc", "user"]);
  });
  it("makes every CJK character a token, Latin runs inside CJK text stay words", () => {
    expect(sorted(tokenSet("东京办公室。"))).toEqual(["东", "京", "公", "办", "室"].sort());
    expect(sorted(tokenSet("GPU显存8GB"))).toEqual(["8gb", "gpu", "存", "显"].sort());
  });
  it("is empty for empty, whitespace or punctuation-only text", () => {
    for (const t of ["", "   ", "---", "***", "。！"]) expect(tokenSet(t).size).toBe(0);
  });
});

describe("jaccard", () => {
  it("is |A ∩ B| / |A ∪ B|", () => {
    // {a, b, c} vs {a, b, d}: 2 shared of 4.
    expect(jaccard(tokenSet("a b c"), tokenSet("a b d"))).toBe(0.5);
    expect(jaccard(tokenSet("The build is green."), tokenSet("the build is green"))).toBe(1);
    // 东京办公室下周搬迁 vs 东京办公室下周开会: 7 shared of 11 characters.
    expect(jaccard(tokenSet("东京办公室下周搬迁"), tokenSet("东京办公室下周开会"))).toBe(7 / 11);
  });
  it("is 0 when either set is empty, including two empty sets", () => {
    expect(jaccard(new Set(), new Set())).toBe(0);
    expect(jaccard(new Set(["a"]), new Set())).toBe(0);
  });
  it("is symmetric, in [0, 1], never NaN (property)", () => {
    fc.assert(
      fc.property(fc.array(fc.string({ maxLength: 3 })), fc.array(fc.string({ maxLength: 3 })), (x, y) => {
        const a = new Set(x);
        const b = new Set(y);
        const j = jaccard(a, b);
        expect(j).toBe(jaccard(b, a));
        expect(j >= 0 && j <= 1).toBe(true);
      }),
    );
  });
});

describe("removeNearDuplicates", () => {
  it("keeps the first of near-identical texts at the default threshold 0.9", () => {
    expect(DEFAULT_DEDUP_THRESHOLD).toBe(0.9);
    // 10 distinct tokens vs the same plus one more: 10/11 = 0.909 ≥ 0.9 → duplicate.
    const base = "one two three four five six seven eight nine ten";
    expect(removeNearDuplicates([base, `${base} eleven`], (s) => s)).toEqual([base]);
    // 9 shared of 12: 0.75 < 0.9 → kept; at threshold 0.75 it is a duplicate (≥).
    const other = "one two three four five six seven eight nine eleven twelve";
    expect(removeNearDuplicates([base, other], (s) => s)).toEqual([base, other]);
    expect(removeNearDuplicates([base, other], (s) => s, 0.75)).toEqual([base]);
  });
  it("works on any item type and preserves order", () => {
    const items = [
      { id: 1, text: "alpha beta" },
      { id: 2, text: "gamma" },
      { id: 3, text: "Alpha, beta!" },
    ];
    expect(removeNearDuplicates(items, (i) => i.text).map((i) => i.id)).toEqual([1, 2]);
  });
  it("rejects a threshold outside (0, 1]", () => {
    expect(() => removeNearDuplicates(["a"], (s) => s, 0)).toThrow(RangeError);
    expect(() => removeNearDuplicates(["a"], (s) => s, 1.5)).toThrow(RangeError);
  });
});

describe("case B31: empty token sets are not duplicates of each other", () => {
  const input = JSON.parse(readFileSync(join(SHARED, "cases", "B31.json"), "utf8")) as {
    chunks: string[];
    threshold: number;
  };
  const kept = removeNearDuplicates(
    input.chunks.map((text, index) => ({ text, index })),
    (c) => c.text,
    input.threshold,
  ).map((c) => c.index);

  it("keeps 0, 1, 2, 6, 7, 8 and drops the duplicates 3 and 9", () => {
    expect(kept).toEqual(expect.arrayContaining([0, 1, 2, 6, 7, 8]));
    expect(kept).not.toContain(3);
    expect(kept).not.toContain(9);
  });
  it("drops 4 and 5 (empty / whitespace) as empty content", () => {
    expect(kept).toEqual([0, 1, 2, 6, 7, 8]);
  });
  it("with an empty token set, only equal trimmed texts are duplicates", () => {
    expect(removeNearDuplicates(["---", "***", " --- "], (s) => s, input.threshold)).toEqual(["---", "***"]);
  });
  it("gives no NaN similarity for any pair", () => {
    for (const a of input.chunks) {
      for (const b of input.chunks) expect(Number.isNaN(jaccard(tokenSet(a), tokenSet(b)))).toBe(false);
    }
  });
});

describe("removeNearDuplicates with prefix filtering", () => {
  /** The definition: compare every item with every kept one. */
  const reference = (texts: string[], threshold: number): string[] => {
    const kept: { text: string; tokens: Set<string> }[] = [];
    for (const text of texts) {
      const trimmed = text.trim();
      if (trimmed.length === 0 || kept.some((k) => k.text === trimmed)) continue;
      const tokens = tokenSet(trimmed);
      if (tokens.size > 0 && kept.some((k) => jaccard(k.tokens, tokens) >= threshold)) continue;
      kept.push({ text: trimmed, tokens });
    }
    return kept.map((k) => k.text);
  };
  let seed = 11;
  const rand = () => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed / 2147483648;
  };
  const vocabulary = Array.from({ length: 60 }, (_, i) => `w${i}`);
  it("keeps exactly what comparing with every kept item keeps (random near-duplicate lists)", () => {
    for (let round = 0; round < 40; round++) {
      const bases = Array.from({ length: 8 }, () =>
        Array.from({ length: 3 + Math.floor(rand() * 40) }, () => vocabulary[Math.floor(rand() ** 2 * 60)]),
      );
      const texts: string[] = [];
      for (let i = 0; i < 150; i++) {
        const words = [...(bases[Math.floor(rand() * bases.length)] as string[])];
        // A few edits: near-duplicates at every similarity around the thresholds.
        for (let e = Math.floor(rand() * 6); e > 0; e--) {
          const at = Math.floor(rand() * words.length);
          if (rand() < 0.5) words[at] = vocabulary[Math.floor(rand() * 60)] as string;
          else words.push(vocabulary[Math.floor(rand() * 60)] as string);
        }
        texts.push(rand() < 0.05 ? "  " : rand() < 0.05 ? "---" : words.join(rand() < 0.5 ? " " : ", "));
      }
      for (const threshold of [0.3, 0.5, 0.8, 0.9, 0.95, 1]) {
        expect(
          removeNearDuplicates(texts, (t) => t, threshold).map((t) => t.trim()),
          `round ${round}, threshold ${threshold}`,
        ).toEqual(reference(texts, threshold));
      }
    }
  });
});
