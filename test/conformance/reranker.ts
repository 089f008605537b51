import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RerankError, type Reranker, type RerankScale, type RerankScore } from "../../src/rerank/contract.js";
import { SHARED } from "../helpers/helpers.js";

/** What a conformance run needs: the reranker under test and optional probes. */
export interface RerankerSubject {
  reranker: Reranker;
  /** A reranker of the same kind whose every model/service call fails (missing model file, HTTP error …). */
  broken?: Reranker;
  /** Model or service calls made so far (all subjects' rerankers included), when observable. */
  calls?: () => number;
  cleanup?: () => Promise<void> | void;
}

/** What the suite may expect of an implementation beyond the contract. */
export interface RerankerTraits {
  /** The expected {@link Reranker.scale}. */
  scale: RerankScale;
  /**
   * Ranks by relevance: the B30 documents come out in the case's expected
   * order (the stub gets there through its stub scores).
   */
  relevance: boolean;
  /** A document's score depends on its text only, not on its position or neighbours. */
  positionIndependent: boolean;
  /** Identical texts get identical scores (so they tie and come out by index). */
  duplicatesTie: boolean;
}

/** Shared bug-report case B30 (../shared/cases), read in place. */
export interface B30Case {
  query: string;
  docs: string[];
  stub_scores: number[];
}
interface B30Call {
  docs?: string[];
  topN: number | null;
  expect?: RerankScore[];
  expect_indices?: number[];
}

/** The B30 input. */
export function readB30(): B30Case {
  return JSON.parse(readFileSync(join(SHARED, "cases", "B30.json"), "utf8")) as B30Case;
}

function readB30Calls(): B30Call[] {
  return (JSON.parse(readFileSync(join(SHARED, "cases", "B30.expect.json"), "utf8")) as { calls: B30Call[] })
    .calls;
}

const indices = (xs: RerankScore[]): number[] => xs.map((x) => x.index);

/** Checks the shape every result list must have. */
function expectWellFormed(out: RerankScore[], n: number, expectedLength = n): void {
  expect(out).toHaveLength(expectedLength);
  expect(new Set(indices(out)).size).toBe(out.length);
  for (const r of out) {
    expect(Number.isInteger(r.index)).toBe(true);
    expect(r.index).toBeGreaterThanOrEqual(0);
    expect(r.index).toBeLessThan(n);
    expect(Number.isFinite(r.score)).toBe(true);
    expect(r.score).toBeGreaterThanOrEqual(0);
    expect(r.score).toBeLessThanOrEqual(1);
  }
  for (let i = 1; i < out.length; i++) {
    const a = out[i - 1] as RerankScore;
    const b = out[i] as RerankScore;
    expect(a.score > b.score || (a.score === b.score && a.index < b.index)).toBe(true);
  }
}

const QUERY = "how do I install rust";
const DOCS = [
  "The cat sat on the mat.",
  "Install Rust with rustup, then build with cargo.",
  "Cargo ships were loaded at the port.",
  "The cat sat on the mat.",
  "Rust is a systems programming language.",
  "A recipe for lentil soup.",
];

/**
 * The reranker contract (src/rerank/contract.ts), run against every
 * implementation: B30 (ordering, ties, topN, empty input, index mapping),
 * result shape, invalid topN, duplicates, permutation, abort, error naming.
 */
export function rerankerConformance(
  label: string,
  factory: () => Promise<RerankerSubject> | RerankerSubject,
  traits: RerankerTraits,
): void {
  describe(`reranker contract: ${label}`, () => {
    let subject: RerankerSubject;
    let r: Reranker;
    const calls = (): number | undefined => subject.calls?.();
    beforeAll(async () => {
      subject = await factory();
      r = subject.reranker;
    });
    afterAll(async () => {
      await subject?.reranker.close?.();
      await subject?.broken?.close?.();
      await subject?.cleanup?.();
    });

    it("has a method:model name and the expected scale", () => {
      expect(r.name).toMatch(/^[a-z][a-z-]*(:\S.*)?$/);
      expect(r.scale).toBe(traits.scale);
    });

    it("B30: empty list, default/large/small/zero topN, duplicate indices (shared case)", async () => {
      const b30 = readB30();
      for (const call of readB30Calls()) {
        const docs = call.docs ?? b30.docs;
        const topN = call.topN ?? undefined;
        const before = calls();
        const out = await r.rerank(b30.query, docs, { topN });
        const want = call.expect ? indices(call.expect) : (call.expect_indices as number[]);
        expectWellFormed(out, docs.length, want.length);
        if (traits.relevance) expect(indices(out), `topN ${String(call.topN)}`).toEqual(want);
        if (docs.length === 0) {
          expect(calls()).toBe(before);
          if (subject.broken) expect(await subject.broken.rerank(b30.query, docs, { topN })).toEqual([]);
        }
      }
      // Both copies of the duplicated document are returned, each once.
      const all = indices(await r.rerank(b30.query, b30.docs));
      expect(all).toContain(1);
      expect(all).toContain(3);
    });

    it("returns every index once, sorted by score with ties by index", async () => {
      const out = await r.rerank(QUERY, DOCS);
      expectWellFormed(out, DOCS.length);
      expect(indices(out).sort()).toEqual([0, 1, 2, 3, 4, 5]);
    });

    it("topN: undefined and > n give all, k gives the first k, 0 gives none (no model call)", async () => {
      const all = await r.rerank(QUERY, DOCS);
      expect(await r.rerank(QUERY, DOCS, { topN: DOCS.length + 5 })).toEqual(all);
      expect(await r.rerank(QUERY, DOCS, { topN: DOCS.length })).toEqual(all);
      expect(await r.rerank(QUERY, DOCS, { topN: 2 })).toEqual(all.slice(0, 2));
      expect(await r.rerank(QUERY, DOCS, { topN: 1 })).toEqual(all.slice(0, 1));
      const before = calls();
      expect(await r.rerank(QUERY, DOCS, { topN: 0 })).toEqual([]);
      expect(calls()).toBe(before);
      expect(await r.rerank(QUERY, [DOCS[1] as string])).toEqual([{ index: 0, score: expect.any(Number) }]);
    });

    it("rejects a negative or fractional topN with a RerankError naming topN", async () => {
      for (const topN of [-1, 1.5, Number.NaN]) {
        await expect(r.rerank(QUERY, DOCS, { topN })).rejects.toThrow(RerankError);
        await expect(r.rerank(QUERY, DOCS, { topN })).rejects.toThrow(/topN/);
      }
    });

    it("duplicate texts keep their own indices", async () => {
      const twice = "Rust is a systems programming language.";
      const docs = [twice, "A recipe for lentil soup.", twice];
      const out = await r.rerank(QUERY, docs);
      expectWellFormed(out, 3);
      const first = out.find((x) => x.index === 0) as RerankScore;
      const last = out.find((x) => x.index === 2) as RerankScore;
      if (traits.duplicatesTie) {
        expect(last.score).toBe(first.score);
        expect(indices(out).indexOf(2)).toBe(indices(out).indexOf(0) + 1);
      }
    });

    it.runIf(traits.positionIndependent)(
      "scores follow their documents when the input is permuted",
      async () => {
        const forward = await r.rerank(QUERY, DOCS);
        const reversed = [...DOCS].reverse();
        const backward = await r.rerank(QUERY, reversed);
        const byText = (out: RerankScore[], docs: string[]) =>
          new Map(out.map((x) => [docs[x.index] as string, x.score]));
        const f = byText(forward, DOCS);
        const b = byText(backward, reversed);
        for (const d of DOCS) expect(b.get(d)).toBeCloseTo(f.get(d) as number, 6);
      },
    );

    it("an aborted signal rejects with its reason, before or during the call", async () => {
      const before = calls();
      await expect(r.rerank(QUERY, DOCS, { signal: AbortSignal.abort() })).rejects.toMatchObject({
        name: "AbortError",
      });
      expect(calls()).toBe(before);
      const reason = new Error("user went away");
      await expect(r.rerank(QUERY, DOCS, { signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
      const controller = new AbortController();
      const pending = r.rerank(QUERY, DOCS, { signal: controller.signal });
      controller.abort();
      await expect(pending).rejects.toMatchObject({ name: "AbortError" });
      // Still usable afterwards.
      expectWellFormed(await r.rerank(QUERY, DOCS), DOCS.length);
    });

    it("failures are RerankErrors that name the reranker", async (ctx) => {
      if (!subject.broken) ctx.skip();
      const broken = subject.broken as Reranker;
      const error = await broken.rerank(QUERY, DOCS).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(RerankError);
      expect((error as RerankError).name).toBe("RerankError");
      expect((error as RerankError).reranker).toBe(broken.name);
      expect((error as Error).message.startsWith(`${broken.name}: `)).toBe(true);
    });
  });
}
