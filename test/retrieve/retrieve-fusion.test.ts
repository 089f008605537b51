import { readFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  normalizeScores,
  reciprocalRankFusion,
  type ScoredItem,
  weightedScoreFusion,
} from "../../src/retrieve/fusion.js";
import { SHARED } from "../helpers/helpers.js";

const caseFile = (name: string): string => join(SHARED, "cases", name);
const asMap = (items: readonly { id: string; score: number }[]): Record<string, number> =>
  Object.fromEntries(items.map((i) => [i.id, i.score]));

describe("reciprocalRankFusion", () => {
  it("sums weight / (k + rank) with 1-based ranks and per-list weights", () => {
    // k = 60, weights 2 and 1:
    //   a: 2/(60+1) + 1/(60+2) = 0.0327869 + 0.0161290 = 0.0489159
    //   c: 2/(60+3) + 1/(60+1) = 0.0317460 + 0.0163934 = 0.0481395
    //   b: 2/(60+2)            = 0.0322581
    const fused = reciprocalRankFusion(
      [
        ["a", "b", "c"],
        ["c", "a"],
      ],
      { k: 60, weights: [2, 1] },
    );
    expect(fused.map((f) => f.id)).toEqual(["a", "c", "b"]);
    expect(fused[0]?.score).toBeCloseTo(2 / 61 + 1 / 62, 15);
    expect(fused[1]?.score).toBeCloseTo(2 / 63 + 1 / 61, 15);
    expect(fused[2]?.score).toBeCloseTo(2 / 62, 15);
    expect(fused.map((f) => f.ranks)).toEqual([
      [1, 2],
      [3, 1],
      [2, undefined],
    ]);
  });

  it("defaults to k = 60 and accepts k as a number (the call form of the search pipeline)", () => {
    expect(reciprocalRankFusion([["a"]])[0]?.score).toBe(1 / 61);
    expect(reciprocalRankFusion([{ ids: ["a"], weight: 1 }], 10)[0]?.score).toBe(1 / 11);
    // k = 0 is allowed: ranks start at 1, so 1/rank.
    expect(reciprocalRankFusion([["x", "y"]], { k: 0 }).map((f) => f.score)).toEqual([1, 0.5]);
  });

  it("breaks ties by best rank, then first appearance", () => {
    // k = 0: x = 1/1, y = 1/1, b = 1/1, a = 1/2 + 1/2 = 1 — all tied at exactly 1.
    // Best ranks: x 1, a 2, y 1, b 1; first appearance: x, a, y, b.
    const fused = reciprocalRankFusion([["x", "a"], ["y", "a"], ["b"]], { k: 0 });
    expect(fused.map((f) => f.score)).toEqual([1, 1, 1, 1]);
    expect(fused.map((f) => f.id)).toEqual(["x", "y", "b", "a"]);
    // Mirror-image lists: both tie on score and best rank; x appeared first.
    expect(
      reciprocalRankFusion([
        ["x", "y"],
        ["y", "x"],
      ]).map((f) => f.id),
    ).toEqual(["x", "y"]);
  });

  it("treats a weight of 0 as 0, from the list or from options.weights", () => {
    const own = reciprocalRankFusion([{ ids: ["a"], weight: 0 }, { ids: ["b"] }]);
    expect(own.map((f) => [f.id, f.score])).toEqual([
      ["b", 1 / 61],
      ["a", 0],
    ]);
    const override = reciprocalRankFusion([{ ids: ["a"], weight: 5 }, ["b"]], { weights: [0, 1] });
    expect(asMap(override)).toEqual({ a: 0, b: 1 / 61 });
  });

  it("counts an id once per list, at its first position", () => {
    const fused = reciprocalRankFusion([["a", "a", "b"]], 60);
    expect(fused.map((f) => [f.id, f.score])).toEqual([
      ["a", 1 / 61],
      ["b", 1 / 63],
    ]);
  });

  it("returns [] for no lists or empty lists", () => {
    expect(reciprocalRankFusion([])).toEqual([]);
    expect(reciprocalRankFusion([[], { ids: [] }])).toEqual([]);
  });

  it("rejects a bad k, bad weights and a weights array of the wrong length", () => {
    expect(() => reciprocalRankFusion([["a"]], -1)).toThrow(RangeError);
    expect(() => reciprocalRankFusion([["a"]], Number.NaN)).toThrow(RangeError);
    expect(() => reciprocalRankFusion([{ ids: ["a"], weight: -1 }])).toThrow(/weight of list 0/);
    expect(() => reciprocalRankFusion([["a"]], { weights: [Number.POSITIVE_INFINITY] })).toThrow(RangeError);
    expect(() => reciprocalRankFusion([["a"], ["b"]], { weights: [1] })).toThrow(/expected 2 weights/);
  });
});

describe("normalizeScores", () => {
  it("min-max maps to [0, 1]", () => {
    // (s − 1) / (5 − 1)
    expect(
      normalizeScores([
        { id: "a", score: 5 },
        { id: "b", score: 2 },
        { id: "c", score: 1 },
      ]),
    ).toEqual([
      { id: "a", score: 1 },
      { id: "b", score: 0.25 },
      { id: "c", score: 0 },
    ]);
  });

  it("gives 1 to a single hit or all-tied scores under min-max, 0 under z-score", () => {
    expect(normalizeScores([{ id: "a", score: 0.83 }], "minmax")).toEqual([{ id: "a", score: 1 }]);
    expect(normalizeScores([{ id: "a", score: 0.83 }], "zscore")).toEqual([{ id: "a", score: 0 }]);
    const tied = [
      { id: "a", score: -3 },
      { id: "b", score: -3 },
    ];
    expect(normalizeScores(tied).map((x) => x.score)).toEqual([1, 1]);
    expect(normalizeScores(tied, "zscore").map((x) => x.score)).toEqual([0, 0]);
  });

  it("z-score uses the population standard deviation", () => {
    // mean 2, σ = sqrt(((1−2)² + 0 + (3−2)²) / 3) = sqrt(2/3) = 0.8164966
    const z = normalizeScores(
      [
        { id: "a", score: 1 },
        { id: "b", score: 2 },
        { id: "c", score: 3 },
      ],
      "zscore",
    );
    expect(z[0]?.score).toBeCloseTo(-1 / Math.sqrt(2 / 3), 12);
    expect(z[1]?.score).toBe(0);
    expect(z[2]?.score).toBeCloseTo(1 / Math.sqrt(2 / 3), 12);
  });

  it("stays finite for extreme scores and rejects NaN and Infinity", () => {
    const wide = normalizeScores([
      { id: "lo", score: -Number.MAX_VALUE },
      { id: "mid", score: 0 },
      { id: "hi", score: Number.MAX_VALUE },
    ]);
    expect(wide.map((x) => x.score)).toEqual([0, 0.5, 1]);
    expect(() => normalizeScores([{ id: "a", score: Number.NaN }])).toThrow(/"a" must be a finite number/);
    expect(() => normalizeScores([{ id: "a", score: Number.POSITIVE_INFINITY }], "zscore")).toThrow(
      RangeError,
    );
    expect(normalizeScores([])).toEqual([]);
    expect(normalizeScores([{ id: "a", score: 7 }], "none")).toEqual([{ id: "a", score: 7 }]);
  });

  it("min-max: finite, within [0, 1], equal raw scores equal, order preserved (property)", () => {
    fc.assert(
      fc.property(
        fc.array(fc.double({ noNaN: true, noDefaultInfinity: true }), { minLength: 1, maxLength: 30 }),
        (scores) => {
          const out = normalizeScores(scores.map((score, i) => ({ id: String(i), score })));
          for (const [i, o] of out.entries()) {
            expect(Number.isFinite(o.score) && o.score >= 0 && o.score <= 1).toBe(true);
            for (const [j, p] of out.entries()) {
              const a = scores[i] as number;
              const b = scores[j] as number;
              if (a === b) expect(o.score).toBe(p.score);
              if (a < b) expect(o.score).toBeLessThanOrEqual(p.score);
            }
          }
        },
      ),
    );
  });
});

describe("weightedScoreFusion", () => {
  it("sums weight × normalised score; a list missing a document gives it 0", () => {
    const dense = [
      { id: "a", score: 0.9 },
      { id: "b", score: 0.5 },
      { id: "c", score: 0.1 },
    ];
    const bm25 = [
      { id: "c", score: 12 },
      { id: "d", score: 4 },
    ];
    // dense min-max: a 1, b 0.5, c 0; bm25 min-max: c 1, d 0.
    // weights 0.7 / 0.3: a 0.7, b 0.35, c 0 + 0.3 = 0.3, d 0.
    const fused = weightedScoreFusion([dense, bm25], [0.7, 0.3]);
    expect(fused.map((f) => f.id)).toEqual(["a", "b", "c", "d"]);
    expect(fused.map((f) => f.score)).toEqual([0.7, 0.35, 0.3, 0]);
    expect(fused[2]?.normalized).toEqual([0, 1]);
    expect(fused[2]?.ranks).toEqual([3, 1]);
    expect(fused[3]?.normalized).toEqual([undefined, 0]);
  });

  it("a weight of 0 means 0, not the default", () => {
    const fused = weightedScoreFusion([
      { items: [{ id: "a", score: 3 }], weight: 0 },
      { items: [{ id: "b", score: 1 }] },
    ]);
    expect(fused.map((f) => [f.id, f.score])).toEqual([
      ["b", 1],
      ["a", 0],
    ]);
  });

  it("supports z-scores and leaves unnormalised scores alone with 'none'", () => {
    const list: ScoredItem[] = [
      { id: "a", score: 1 },
      { id: "b", score: 3 },
    ];
    // mean 2, σ 1: a −1, b +1.
    expect(asMap(weightedScoreFusion([list], { normalization: "zscore" }))).toEqual({ a: -1, b: 1 });
    expect(asMap(weightedScoreFusion([list], { normalization: "none", weights: [2] }))).toEqual({
      a: 2,
      b: 6,
    });
  });

  it("rejects negative weights and non-finite scores", () => {
    expect(() => weightedScoreFusion([[{ id: "a", score: 1 }]], [-0.5])).toThrow(RangeError);
    expect(() => weightedScoreFusion([[{ id: "a", score: Number.NaN }]])).toThrow(RangeError);
    expect(() => weightedScoreFusion([[], []], [1])).toThrow(/expected 2 weights/);
  });

  describe("case B29: min-max with a single hit or tied scores", () => {
    const input = JSON.parse(readFileSync(caseFile("B29.json"), "utf8")) as Record<string, unknown>;
    const expectation = JSON.parse(readFileSync(caseFile("B29.expect.json"), "utf8")) as {
      calls: {
        normalize?: string;
        combine?: string[];
        expect?: Record<string, number>;
        expect_order?: string[];
        expect_scores?: Record<string, number>;
      }[];
    };
    const list = (name: string): ScoredItem[] => input[name] as ScoredItem[];
    const weights = input.weights as Record<string, number>;

    for (const call of expectation.calls) {
      if (call.normalize) {
        const name = call.normalize;
        it(`normalize(${name}, "minmax")`, () => {
          const out = normalizeScores(list(name), "minmax");
          expect(asMap(out)).toEqual(call.expect);
          for (const o of out) expect(Number.isFinite(o.score) && o.score >= 0 && o.score <= 1).toBe(true);
          // Equal raw scores map to equal normalised scores.
          for (const [i, a] of list(name).entries()) {
            for (const [j, b] of list(name).entries()) {
              if (a.score === b.score) expect(out[i]?.score).toBe(out[j]?.score);
            }
          }
        });
      }
      if (call.combine) {
        const names = call.combine;
        it(`weightedSum(${names.join(", ")})`, () => {
          const fused = weightedScoreFusion(
            names.map((n) => list(n)),
            names.map((n) => weights[n] as number),
          );
          expect(fused.map((f) => f.id)).toEqual(call.expect_order);
          expect(asMap(fused)).toEqual(call.expect_scores);
          for (const f of fused) expect(Number.isFinite(f.score)).toBe(true);
        });
      }
    }

    it("covers every call of the case", () => {
      expect(expectation.calls).toHaveLength(4);
    });
  });
});
