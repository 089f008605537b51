import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Embedder, EmbeddingError } from "../../src/embed/contract.js";

/** What a conformance run needs: the embedder under test and optional probes. */
export interface EmbedderSubject {
  embedder: Embedder;
  /** An embedder of the same provider whose every model/service call fails (missing model file, HTTP error …). */
  broken?: Embedder;
  /** Model or service calls made so far (all of the subject's embedders), when observable. */
  calls?: () => number;
  cleanup?: () => Promise<void> | void;
}

/** What the suite may expect of an implementation beyond the contract. */
export interface EmbedderTraits {
  /** The expected {@link Embedder.provider}. */
  provider: string;
  /**
   * How `embedQuery(t)` relates to `embedTexts([t])[0]`:
   * - `same`: equal (symmetric models);
   * - a function giving the vector `embedQuery(t)` must equal (e.g. the
   *   document vector of the prefixed text);
   * - `different`: not equal (e.g. Cohere's search_query vs search_document).
   */
  query: "same" | "different" | ((embedder: Embedder, text: string) => Promise<Float32Array>);
  /** Minimum cosine between two computations of the same vector. Default 0.99999. */
  tolerance?: number;
}

const TEXTS = [
  "The novel was written by a retired sailor.",
  "Install Rust with rustup, then build with cargo.",
  "A recipe for lentil soup.",
  "emoji 😀 and CJK 日本語 and ligatures ﬁ",
  "a",
  "the cat sat on the mat and the dog sat on the cat and the ship sailed the sea",
];

/** 250 distinct texts of varied length, so order is checked across batches of any size. */
const MANY = Array.from({ length: 250 }, (_, i) => {
  const words = ["cat", "dog", "sea", "ship", "novel", "rust", "cargo", "soup", "mat", "sailor"];
  const parts = [`text ${i}`];
  for (let k = 0; k <= i % 7; k++) parts.push(words[(i * 3 + k * 7) % words.length] as string);
  return parts.join(" ");
});

function dot(a: Float32Array, b: Float32Array): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += (a[i] as number) * (b[i] as number);
  return s;
}

/** Cosine of two vectors (they are unit length, so the dot product). */
export function cosine(a: Float32Array, b: Float32Array): number {
  return dot(a, b) / Math.sqrt(dot(a, a) * dot(b, b));
}

/** Checks length, type and unit norm. */
function expectUnitVector(v: Float32Array | undefined, dimension: number): void {
  expect(v).toBeInstanceOf(Float32Array);
  expect(v).toHaveLength(dimension);
  for (const x of v as Float32Array) expect(Number.isFinite(x)).toBe(true);
  expect(Math.sqrt(dot(v as Float32Array, v as Float32Array))).toBeCloseTo(1, 5);
}

/**
 * The embedder contract (src/embed/contract.ts), run against every provider:
 * dimension, unit vectors, determinism, order across batches, query vs
 * document side, empty input, the empty string and errors naming the
 * provider.
 */
export function embedderConformance(
  label: string,
  factory: () => Promise<EmbedderSubject> | EmbedderSubject,
  traits: EmbedderTraits,
): void {
  describe(`embedder contract: ${label}`, () => {
    let subject: EmbedderSubject;
    let e: Embedder;
    const tolerance = traits.tolerance ?? 0.99999;
    const calls = (): number | undefined => subject.calls?.();
    beforeAll(async () => {
      subject = await factory();
      e = subject.embedder;
    });
    afterAll(async () => {
      await subject?.embedder.close?.();
      await subject?.broken?.close?.();
      await subject?.cleanup?.();
    });

    it("embeds [] as [] without a model or service call (also when the backend is broken)", async () => {
      const before = calls();
      expect(await e.embedTexts([])).toEqual([]);
      expect(calls()).toBe(before);
      if (subject.broken) expect(await subject.broken.embedTexts([])).toEqual([]);
    });

    it("names its provider and model; dimension matches the vectors (after resolveDimension)", async () => {
      expect(e.provider).toBe(traits.provider);
      expect(e.modelId.length).toBeGreaterThan(0);
      const resolved = e.resolveDimension ? await e.resolveDimension() : e.dimension;
      expect(resolved).toBe(e.dimension);
      expect(e.dimension).toBeGreaterThan(0);
      const vectors = await e.embedTexts(TEXTS);
      expect(vectors).toHaveLength(TEXTS.length);
      for (const v of vectors) expect(v).toHaveLength(e.dimension);
      expect(await e.embedQuery(TEXTS[0] as string)).toHaveLength(e.dimension);
    });

    it("returns unit-length Float32Arrays", async () => {
      for (const v of await e.embedTexts(TEXTS)) expectUnitVector(v, e.dimension);
      expectUnitVector(await e.embedQuery("who wrote the novel?"), e.dimension);
    });

    it("maps the same text to the same vector (within a call, across calls, alone or in a batch)", async () => {
      const [a, b, c] = await e.embedTexts([TEXTS[0] as string, TEXTS[1] as string, TEXTS[0] as string]);
      expect(cosine(a as Float32Array, c as Float32Array)).toBeGreaterThan(tolerance);
      const [alone] = await e.embedTexts([TEXTS[0] as string]);
      expect(cosine(a as Float32Array, alone as Float32Array)).toBeGreaterThan(tolerance);
      const [again] = await e.embedTexts([TEXTS[1] as string]);
      expect(cosine(b as Float32Array, again as Float32Array)).toBeGreaterThan(tolerance);
      expect(cosine(a as Float32Array, b as Float32Array)).toBeLessThan(tolerance);
    });

    it("keeps input order across batches (250 texts, forwards and reversed)", async () => {
      const forward = await e.embedTexts(MANY);
      const backward = await e.embedTexts([...MANY].reverse());
      expect(forward).toHaveLength(MANY.length);
      expect(backward).toHaveLength(MANY.length);
      forward.forEach((v, i) => {
        const w = backward[MANY.length - 1 - i] as Float32Array;
        expect(cosine(v, w), `text ${i}`).toBeGreaterThan(tolerance);
      });
      for (const i of [0, 1, 99, 131, 249]) {
        const [alone] = await e.embedTexts([MANY[i] as string]);
        expect(cosine(forward[i] as Float32Array, alone as Float32Array), `text ${i}`).toBeGreaterThan(
          tolerance,
        );
      }
      // Distinct texts got distinct vectors, so a mix-up would have shown above.
      expect(cosine(forward[0] as Float32Array, forward[1] as Float32Array)).toBeLessThan(tolerance);
    });

    it("embeds a query consistently with documents (same vector, the prefixed text, or the query side)", async () => {
      const text = "who wrote the novel?";
      const q = await e.embedQuery(text);
      expect(cosine(q, await e.embedQuery(text))).toBeGreaterThan(tolerance);
      const [d] = await e.embedTexts([text]);
      if (traits.query === "same") expect(cosine(q, d as Float32Array)).toBeGreaterThan(tolerance);
      else if (traits.query === "different") expect(cosine(q, d as Float32Array)).toBeLessThan(tolerance);
      else expect(cosine(q, await traits.query(e, text))).toBeGreaterThan(tolerance);
    });

    it("handles the empty string (a valid unit vector, no crash)", async () => {
      const [empty, other] = await e.embedTexts(["", "a"]);
      expectUnitVector(empty, e.dimension);
      expectUnitVector(other, e.dimension);
      expectUnitVector(await e.embedQuery(""), e.dimension);
    });

    it("rejects with an error naming the provider when the backend fails", async (ctx) => {
      if (!subject.broken) ctx.skip();
      const broken = subject.broken as Embedder;
      for (const call of [() => broken.embedTexts(TEXTS), () => broken.embedQuery("who?")]) {
        const error = await call().then(
          () => undefined,
          (err: unknown) => err,
        );
        expect(error).toBeInstanceOf(EmbeddingError);
        expect((error as EmbeddingError).provider).toBe(traits.provider);
        expect((error as Error).message).toContain(traits.provider);
        expect((error as Error).message).toContain(broken.modelId);
      }
    });
  });
}
