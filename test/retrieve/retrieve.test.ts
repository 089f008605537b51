import { describe, expect, it } from "vitest";
import { mrrAtK, ndcgAtK, recallAtK } from "../../src/eval/metrics.js";
import { bm25Idf } from "../../src/retrieve/bm25.js";
import { jaccard, removeNearDuplicates, tokenSet } from "../../src/retrieve/dedupe.js";
import { reciprocalRankFusion } from "../../src/retrieve/fusion.js";
import { tokenize } from "../../src/retrieve/tokenizer.js";

describe("tokenize", () => {
  it("lower-cases, stems and drops English stop words", () => {
    expect(tokenize("The Running Dogs of the city")).toEqual(["run", "dog", "citi"]);
  });
  it("keeps identifiers whole and also emits their parts", () => {
    const t = tokenize("user_id RFC-9110 a6339a53");
    expect(t).toEqual(
      expect.arrayContaining(["user_id", "user", "id", "rfc-9110", "rfc", "9110", "a6339a53"]),
    );
  });
  it("keeps non-ASCII words and segments Chinese", () => {
    expect(tokenize("Überläufe")).toEqual(["überläufe"]);
    const zh = tokenize("机器学习是人工智能的一个分支");
    expect(zh).toContain("学习");
    expect(zh.every((t) => t.length > 0)).toBe(true);
  });
  it("drops the possessive 's and returns nothing for punctuation only", () => {
    expect(tokenize("Alzheimer's")).toEqual(["alzheim"]);
    expect(tokenize("... --- !!!")).toEqual([]);
  });
});

describe("bm25Idf", () => {
  it("is never negative, even for a term in every document", () => {
    expect(bm25Idf(10, 10)).toBeGreaterThan(0);
    expect(bm25Idf(1, 1)).toBeGreaterThan(0);
    expect(bm25Idf(100, 1)).toBeGreaterThan(bm25Idf(100, 50));
  });
});

describe("reciprocalRankFusion", () => {
  it("sums 1/(k+rank) with 1-based ranks", () => {
    const fused = reciprocalRankFusion([{ ids: ["a", "b"] }, { ids: ["b", "c"] }], 60);
    expect(fused.map((f) => f.id)).toEqual(["b", "a", "c"]);
    expect(fused[0]?.score).toBeCloseTo(1 / 62 + 1 / 61, 12);
    expect(fused[1]?.score).toBeCloseTo(1 / 61, 12);
    expect(fused[0]?.ranks).toEqual([2, 1]);
  });
  it("breaks ties deterministically and honours a weight of 0", () => {
    const fused = reciprocalRankFusion([{ ids: ["x", "y"] }, { ids: ["y", "x"] }]);
    expect(fused.map((f) => f.id)).toEqual(["x", "y"]);
    const zero = reciprocalRankFusion([{ ids: ["a"], weight: 0 }, { ids: ["b"] }]);
    expect(zero.find((f) => f.id === "a")?.score).toBe(0);
    expect(zero[0]?.id).toBe("b");
  });
  it("counts an id once per list", () => {
    const fused = reciprocalRankFusion([{ ids: ["a", "a", "b"] }], 60);
    expect(fused[0]?.score).toBeCloseTo(1 / 61, 12);
  });
});

describe("near-duplicate removal", () => {
  it("computes Jaccard on token sets; empty sets are not duplicates", () => {
    expect(jaccard(tokenSet("a b c"), tokenSet("a b d"))).toBeCloseTo(2 / 4);
    expect(jaccard(new Set(), new Set())).toBe(0);
  });
  it("keeps the best-ranked of near-identical texts", () => {
    const items = [
      "Rust ownership rules: each value has an owner.",
      "Rust ownership rules: each value has an owner!",
      "Borrowing lets you refer to a value without taking ownership.",
      "",
      "",
    ];
    // Empty texts are dropped as empty content (case B31), not kept or compared.
    expect(removeNearDuplicates(items, (s) => s)).toEqual([items[0], items[2]]);
  });
  it("treats CJK words as tokens", () => {
    const kept = removeNearDuplicates(["机器学习很有趣", "机器学习很无聊"], (s) => s);
    expect(kept).toHaveLength(2);
  });
});

describe("IR metrics", () => {
  const qrels = new Map([
    ["d1", 1],
    ["d2", 1],
  ]);
  it("nDCG@10 is 1 for a perfect ranking and discounts by log2(rank+1)", () => {
    expect(ndcgAtK(["d1", "d2", "x"], qrels, 10)).toBeCloseTo(1);
    const idcg = 1 + 1 / Math.log2(3);
    expect(ndcgAtK(["x", "d1"], qrels, 10)).toBeCloseTo(1 / Math.log2(3) / idcg);
  });
  it("recall@k and MRR@k", () => {
    expect(recallAtK(["x", "d2"], qrels, 100)).toBe(0.5);
    expect(recallAtK(["x", "d2"], qrels, 1)).toBe(0);
    expect(mrrAtK(["x", "y", "d2"], qrels, 10)).toBeCloseTo(1 / 3);
    expect(mrrAtK(["x"], qrels, 10)).toBe(0);
  });
});
