import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  type ChunkingQuestion,
  intersectRanges,
  loadChromaChunkingDataset,
  locateChunks,
  meanStd,
  parseCsv,
  scoreRetrieval,
  spanScores,
  subtractRange,
  sumOfRanges,
  topKByCosine,
  unionRanges,
} from "../../src/eval/chunking.js";
import { tempDir } from "../helpers/helpers.js";

const r = (start: number, end: number) => ({ start, end });

describe("range helpers", () => {
  it("sums lengths without merging overlaps", () => {
    expect(sumOfRanges([r(0, 10), r(5, 15)])).toBe(20);
    expect(sumOfRanges([])).toBe(0);
  });
  it("merges overlapping and touching ranges", () => {
    expect(unionRanges([r(5, 15), r(0, 10), r(15, 20), r(30, 40)])).toEqual([r(0, 20), r(30, 40)]);
  });
  it("intersects, with an empty range for touching ranges and null for disjoint ones", () => {
    expect(intersectRanges(r(0, 10), r(5, 20))).toEqual(r(5, 10));
    expect(intersectRanges(r(0, 10), r(10, 20))).toEqual(r(10, 10));
    expect(intersectRanges(r(0, 10), r(11, 20))).toBeNull();
  });
  it("subtracts a range, splitting a range that contains it", () => {
    expect(subtractRange([r(0, 100)], r(40, 60))).toEqual([r(0, 40), r(60, 100)]);
    expect(subtractRange([r(0, 10), r(20, 30)], r(5, 25))).toEqual([r(0, 5), r(25, 30)]);
    expect(subtractRange([r(0, 10)], r(0, 10))).toEqual([]);
    expect(subtractRange([r(0, 10)], r(10, 10))).toEqual([r(0, 10)]);
  });
});

describe("spanScores (Chroma's definitions)", () => {
  it("gives 1 for a retrieved chunk that is exactly the reference", () => {
    expect(spanScores([r(100, 200)], [r(100, 200)])).toEqual({ recall: 1, precision: 1, iou: 1 });
  });

  it("gives 0 everywhere for an empty retrieval", () => {
    expect(spanScores([], [r(0, 50)])).toEqual({ recall: 0, precision: 0, iou: 0 });
  });

  it("scores a partial hit by hand", () => {
    // Reference [50, 150) (100 chars); chunk [0, 100) covers [50, 100): 50 chars.
    // recall 50/100; precision 50/100; IoU 50 / (100 retrieved + 50 uncovered reference) = 1/3.
    const s = spanScores([r(0, 100)], [r(50, 150)]);
    expect(s.recall).toBeCloseTo(0.5);
    expect(s.precision).toBeCloseTo(0.5);
    expect(s.iou).toBeCloseTo(1 / 3);
  });

  it("counts reference characters once but overlapping retrieved chunks once per chunk", () => {
    // Chunks [0, 100) and [50, 150) overlap on [50, 100); reference [40, 120) (80 chars).
    // Intersection: [40, 100) ∪ [50, 120) = [40, 120) → 80 chars, recall 1.
    // Precision denominator: 100 + 100 = 200 (not the 150 of the union) → 0.4.
    // IoU denominator: 200 + 0 uncovered → 0.4 (the true |R ∪ H| would be 150).
    const s = spanScores([r(0, 100), r(50, 150)], [r(40, 120)]);
    expect(s.recall).toBeCloseTo(1);
    expect(s.precision).toBeCloseTo(0.4);
    expect(s.iou).toBeCloseTo(0.4);
  });

  it("handles several references, a miss and uncovered reference parts", () => {
    // References [10, 20) and [100, 140) (10 + 40 = 50 chars).
    // Chunks [0, 30) (hits all of the first) and [120, 130) (hits 10 of the second), and [300, 310) (miss).
    // hit 20; recall 20/50; retrieved 30 + 10 + 10 = 50 → precision 20/50;
    // uncovered reference [100, 120) ∪ [130, 140) = 30 → IoU 20 / (50 + 30) = 0.25.
    const s = spanScores([r(0, 30), r(120, 130), r(300, 310)], [r(10, 20), r(100, 140)]);
    expect(s.recall).toBeCloseTo(0.4);
    expect(s.precision).toBeCloseTo(0.4);
    expect(s.iou).toBeCloseTo(0.25);
  });

  it("counts chunks of another corpus only in the denominators", () => {
    // The foreign chunk has the same offsets as the reference but is another corpus's text.
    const s = spanScores([r(0, 10), { ...r(0, 10), foreign: true }], [r(0, 10)]);
    expect(s).toEqual({ recall: 1, precision: 0.5, iou: 0.5 });
  });

  it("ignores chunks that only touch a reference", () => {
    expect(spanScores([r(0, 10)], [r(10, 20)])).toEqual({ recall: 0, precision: 0, iou: 0 });
  });

  it("returns 0 instead of dividing by zero when there are no references", () => {
    expect(spanScores([r(0, 10)], [])).toEqual({ recall: 0, precision: 0, iou: 0 });
  });
});

describe("meanStd", () => {
  it("uses the population standard deviation", () => {
    expect(meanStd([1, 3])).toEqual({ mean: 2, std: 1 });
    expect(meanStd([])).toEqual({ mean: 0, std: 0 });
  });
});

describe("locateChunks", () => {
  it("maps repeated and overlapping chunks to successive occurrences", () => {
    const text = "ab ab ab";
    const found = locateChunks(text, ["ab", "ab ab", "ab"]);
    expect(found.spans).toEqual([r(0, 2), r(3, 8), r(6, 8)]);
    expect(found.notFound).toBe(0);
    expect(found.outOfOrder).toBe(0);
  });
  it("reports chunks found only before the cursor and chunks not found", () => {
    const found = locateChunks("one two three", ["three", "one", "four"]);
    expect(found.spans).toEqual([r(8, 13), r(0, 3), null]);
    expect(found.outOfOrder).toBe(1);
    expect(found.notFound).toBe(1);
  });
});

describe("topKByCosine and scoreRetrieval", () => {
  const v = (...xs: number[]) => Float32Array.from(xs);
  it("ranks by dot product, ties by index, within the candidates", () => {
    const vectors = [v(1, 0), v(0, 1), v(0.6, 0.8), v(1, 0)];
    expect(topKByCosine(v(1, 0), vectors, 2)).toEqual([0, 3]);
    expect(topKByCosine(v(1, 0), vectors, 2, [1, 2])).toEqual([2, 1]);
    expect(topKByCosine(v(1, 0), vectors, 0)).toEqual([]);
  });
  it("retrieves within the question's corpus unless the scope is all", () => {
    const questions: ChunkingQuestion[] = [{ question: "q", corpusId: "a", references: [r(0, 10)] }];
    const chunks = [
      { corpusId: "b", start: 0, end: 10, vector: v(1, 0) },
      { corpusId: "a", start: 0, end: 10, vector: v(0.8, 0.6) },
      { corpusId: "a", start: 10, end: 30, vector: v(0, 1) },
    ];
    const [k1, k2] = scoreRetrieval(questions, [v(1, 0)], chunks, [1, 2]);
    expect(k1?.recall.mean).toBe(1);
    expect(k1?.iou.mean).toBe(1);
    expect(k2?.precision.mean).toBeCloseTo(10 / 30);
    const [all] = scoreRetrieval(questions, [v(1, 0)], chunks, [1], "all");
    expect(all?.recall.mean).toBe(0);
  });
});

describe("Chroma dataset loading", () => {
  it("parses quoted CSV fields with commas, quotes and line breaks", () => {
    expect(parseCsv('a,b\n"x, ""y""","line1\nline2"\r\n')).toEqual([
      ["a", "b"],
      ['x, "y"', "line1\nline2"],
    ]);
  });
  it("loads questions and checks references against the corpus", () => {
    const { dir, cleanup } = tempDir();
    try {
      mkdirSync(join(dir, "corpora"));
      writeFileSync(join(dir, "corpora", "c.md"), "Hello world. Bye.");
      const refs = JSON.stringify([{ content: "world", start_index: 6, end_index: 11 }]).replaceAll(
        '"',
        '""',
      );
      writeFileSync(join(dir, "questions_df.csv"), `question,references,corpus_id\n"Who?","${refs}",c\n`);
      const data = loadChromaChunkingDataset(dir);
      expect(data.questions).toEqual([{ question: "Who?", corpusId: "c", references: [r(6, 11)] }]);
      writeFileSync(
        join(dir, "questions_df.csv"),
        `question,references,corpus_id\n"Who?","${refs.replace("11", "12")}",c\n`,
      );
      expect(() => loadChromaChunkingDataset(dir)).toThrow(/does not match/);
    } finally {
      cleanup();
    }
  });
});
