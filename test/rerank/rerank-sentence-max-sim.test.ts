/**
 * sentence-max-sim with a bag-of-words embedder whose cosines are computed by
 * hand (the real bundled model runs in the conformance suite).
 */
import { describe, expect, it } from "vitest";
import type { Embedder } from "../../src/embed/contract.js";
import { RerankError } from "../../src/rerank/contract.js";
import { SentenceMaxSimReranker } from "../../src/rerank/sentence-max-sim.js";

const WORDS = ["cat", "sat", "install", "rust", "now", "the", "dr", "smith", "wrote", "it"];

/** Unit-length word-count vectors over {@link WORDS}; records what it embedded. */
function bagOfWords(): Embedder & { seen: string[][] } {
  const embed = (t: string): Float32Array => {
    const v = new Float32Array(WORDS.length);
    for (const w of t.toLowerCase().match(/[a-z]+/g) ?? []) {
      const k = WORDS.indexOf(w);
      if (k >= 0) v[k] = (v[k] as number) + 1;
    }
    const n = Math.hypot(...v) || 1;
    return v.map((x) => x / n);
  };
  const e = {
    provider: "test",
    modelId: "bag-of-words",
    dimension: WORDS.length,
    seen: [] as string[][],
    embedTexts: async (texts: string[]) => {
      e.seen.push(texts);
      return texts.map(embed);
    },
    embedQuery: async (text: string) => embed(text),
  };
  return e;
}

describe("SentenceMaxSimReranker", () => {
  it("scores by the best sentence: (cos + 1) / 2", async () => {
    const e = bagOfWords();
    const r = new SentenceMaxSimReranker(e, { passageWeight: 0 });
    expect(r.name).toBe("sentence-max-sim:bag-of-words");
    expect(r.scale).toBe("similarity");
    const out = await r.rerank("install rust", ["The cat sat. Install rust now.", "The cat sat.", "Rust."]);
    expect(e.seen).toEqual([["The cat sat.", "Install rust now.", "The cat sat.", "Rust."]]);
    const s = new Map(out.map((x) => [x.index, x.score]));
    // "Install rust now." vs "install rust": 2 / (√3·√2)
    expect(s.get(0)).toBeCloseTo((2 / Math.sqrt(6) + 1) / 2, 6);
    expect(s.get(1)).toBeCloseTo(0.5, 6); // orthogonal
    expect(s.get(2)).toBeCloseTo((1 / Math.SQRT2 + 1) / 2, 6);
    expect(out.map((x) => x.index)).toEqual([0, 2, 1]);
  });

  it("mixes in the whole-passage cosine with passageWeight (default 0.5)", async () => {
    const e = bagOfWords();
    const r = new SentenceMaxSimReranker(e);
    const [top] = await r.rerank("install rust", ["The cat sat. Install rust now."]);
    // best sentence 2/√6; whole passage (6 distinct words) 2/(√2·√6)
    const mixed = 0.5 * (2 / Math.sqrt(6)) + 0.5 * (2 / (Math.SQRT2 * Math.sqrt(6)));
    expect(top?.score).toBeCloseTo((mixed + 1) / 2, 6);
    // Sentences and whole passages go to the embedder in one call.
    expect(e.seen).toEqual([["The cat sat.", "Install rust now.", "The cat sat. Install rust now."]]);
  });

  it("splits with the chunker's sentence splitter (abbreviations stay inside a sentence)", async () => {
    const e = bagOfWords();
    await new SentenceMaxSimReranker(e, { passageWeight: 0 }).rerank("who wrote it", [
      "Dr. Smith wrote it. The cat sat.",
    ]);
    expect(e.seen[0]).toEqual(["Dr. Smith wrote it.", "The cat sat."]);
  });

  it("gives a blank passage 0 without embedding it, and caps sentences per passage", async () => {
    const e = bagOfWords();
    const out = await new SentenceMaxSimReranker(e, { maxSentences: 2, passageWeight: 0.3 }).rerank("rust", [
      "  \n ",
      "Cat. Sat. Rust.",
    ]);
    expect(e.seen).toEqual([["Cat.", "Sat.", "Cat. Sat. Rust."]]);
    expect(out.find((x) => x.index === 0)?.score).toBe(0);
    expect(await new SentenceMaxSimReranker(e).rerank("rust", [" "])).toEqual([{ index: 0, score: 0 }]);
  });

  it("wraps embedder failures and validates options", async () => {
    const failing: Embedder = {
      ...bagOfWords(),
      embedTexts: async () => {
        throw new Error("model file missing");
      },
    };
    await expect(new SentenceMaxSimReranker(failing).rerank("q", ["a."])).rejects.toThrow(
      new RerankError("sentence-max-sim:bag-of-words", "model file missing"),
    );
    expect(() => new SentenceMaxSimReranker(bagOfWords(), { passageWeight: 1.5 })).toThrow(/passageWeight/);
    expect(() => new SentenceMaxSimReranker(bagOfWords(), { maxSentences: 0 })).toThrow(/maxSentences/);
  });
});
