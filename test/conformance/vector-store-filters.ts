import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type Filter, FilterError, matchesFilter, parseFilter } from "../../src/retrieve/filter.js";
import type { Payload, VectorStore } from "../../src/store/contract.js";
import type { StoreFactory } from "./vector-store.js";

/** What a store applies beyond the operators every store supports. */
export interface FilterExtras {
  /** `$exists` (and so a negated range). */
  exists: boolean;
  /** `$prefix`. */
  prefix: boolean;
  /** Range bounds that are ISO dates. */
  dates: boolean;
  /** Fractional numbers in conditions (Chroma refuses them: it truncates them against whole numbers). */
  fractions?: boolean;
}

const v = (...xs: number[]): Float32Array => {
  const a = Float32Array.from(xs);
  const n = Math.hypot(...a);
  return a.map((x) => x / n);
};

const KINDS = ["alpha", "beta", "gamma"] as const;

/**
 * 12 records `r0`…`r11`, each further from the query `v(1, 0)` than the one before;
 * payloads: `kind` cycles alpha/beta/gamma, `n` = i, `half` = i / 2 (a float for odd i),
 * `flag` = i even, `doc` = ⌊i / 4⌋ and `idx` = i mod 4 (documentId/chunkIndex-like),
 * `opt` only on r0…r3, `when` (an ISO date string) only on stores that compare dates.
 */
function records(dates: boolean) {
  return Array.from({ length: 12 }, (_, i) => {
    const payload: Payload = {
      kind: KINDS[i % 3] as string,
      n: i,
      half: i / 2,
      flag: i % 2 === 0,
      doc: Math.floor(i / 4),
      idx: i % 4,
    };
    if (i < 4) payload.opt = `o${i}`;
    if (dates) payload.when = `2024-0${1 + (i % 6)}-15T12:00:00.000Z`;
    return { id: `r${i}`, vector: v(1, i * 0.15), payload };
  });
}

/**
 * The metadata filter language on a vector store: every operator pushed into the store's
 * own filter, applied before top-k, with the same answers as {@link matchesFilter}. Run
 * by every store's test file next to `vectorStoreConformance`.
 */
export function vectorStoreFilterConformance(
  name: string,
  factory: StoreFactory,
  extras: FilterExtras,
): void {
  describe(`vector store filters: ${name}`, () => {
    let store: VectorStore;
    let cleanup: () => Promise<void> | void;
    const data = records(extras.dates);
    beforeEach(async () => {
      ({ store, cleanup } = await factory());
      await store.connect();
      await store.createCollection("kb_filters", 2, "cosine");
      await store.addBatch("kb_filters", data);
    });
    afterEach(async () => {
      await store.close();
      await cleanup();
    });
    /** Ids the store returns for a filter (all 12 asked for), in score order. */
    const ids = async (filter: Filter, topK = 12): Promise<string[]> =>
      (await store.search("kb_filters", v(1, 0), { topK, filter })).map((h) => h.id);
    /** Ids the reference evaluator matches, in score order (r0 is closest). */
    const expected = (filter: Filter, topK = 12): string[] =>
      data
        .filter((r) => matchesFilter(parseFilter(filter), r.payload))
        .slice(0, topK)
        .map((r) => r.id);
    const check = async (filter: Filter, want: string[], topK = 12): Promise<void> => {
      expect(expected(filter, topK)).toEqual(want); // the reference agrees with the hand-written answer
      expect(await ids(filter, topK)).toEqual(want);
    };

    it("equality on strings, integers, floats and booleans (shorthand and $eq), type-strict", async () => {
      await check({ kind: "beta" }, ["r1", "r4", "r7", "r10"]);
      await check({ n: { $eq: 7 } }, ["r7"]);
      if (extras.fractions !== false) await check({ half: 2.5 }, ["r5"]);
      else
        await expect(ids({ half: 2.5 })).rejects.toThrow(
          "filter.half: the chroma store compares whole numbers only",
        );
      await check({ flag: false }, ["r1", "r3", "r5", "r7", "r9", "r11"]);
      await check({ n: "7" }, []);
      await check({ kind: "beta", flag: true }, ["r4", "r10"]);
    });

    it("$ne and $nin hold for records without the field", async () => {
      await check({ kind: { $ne: "alpha" }, n: { $lt: 5 } }, ["r1", "r2", "r4"]);
      await check({ opt: { $ne: "o1" } }, [
        "r0",
        "r2",
        "r3",
        "r4",
        "r5",
        "r6",
        "r7",
        "r8",
        "r9",
        "r10",
        "r11",
      ]);
      await check({ kind: { $nin: ["alpha", "gamma"] } }, ["r1", "r4", "r7", "r10"]);
      await check({ opt: { $nin: ["o0", "o2"] }, n: { $lte: 5 } }, ["r1", "r3", "r4", "r5"]);
    });

    it("$in on strings, integers and mixed lists", async () => {
      await check({ kind: { $in: ["gamma", "nope"] } }, ["r2", "r5", "r8", "r11"]);
      await check({ n: { $in: [11, 3, 0] } }, ["r0", "r3", "r11"]);
      await check({ n: { $in: [1, "r2", 2] } }, ["r1", "r2"]);
    });

    it("range operators on integers and floats, several on one field", async () => {
      await check({ n: { $gt: 9 } }, ["r10", "r11"]);
      await check({ n: { $gte: 9 } }, ["r9", "r10", "r11"]);
      await check({ n: { $lt: 2 } }, ["r0", "r1"]);
      if (extras.fractions !== false) await check({ half: { $gt: 1.25, $lte: 2.5 } }, ["r3", "r4", "r5"]);
      await check({ half: { $gt: 1, $lte: 3 } }, ["r3", "r4", "r5", "r6"]);
      await check({ kind: { $gt: 3 } }, []);
    });

    it("$and, $or and $not, nested; the search pipeline's documentId/chunkIndex shape", async () => {
      await check({ $or: [{ kind: "alpha" }, { n: { $gte: 10 } }] }, ["r0", "r3", "r6", "r9", "r10", "r11"]);
      await check({ $and: [{ flag: true }, { $or: [{ n: 2 }, { n: 8 }] }] }, ["r2", "r8"]);
      await check({ $not: { kind: { $in: ["alpha", "beta"] } } }, ["r2", "r5", "r8", "r11"]);
      await check({ $not: { $or: [{ flag: true }, { n: { $in: [1, 3] } }] } }, ["r5", "r7", "r9", "r11"]);
      await check({ n: { $not: { $eq: 0 } }, doc: 0 }, ["r1", "r2", "r3"]);
      await check({ $or: [{ doc: { $in: [2] } }, { $and: [{ doc: 0 }, { idx: { $in: [1, 3] } }] }] }, [
        "r1",
        "r3",
        "r8",
        "r9",
        "r10",
        "r11",
      ]);
    });

    it("applies the filter before top-k: a rare match far from the query is found", async () => {
      await check({ n: 11 }, ["r11"], 1);
      await check({ kind: "gamma" }, ["r2", "r5"], 2);
      await check({ flag: false, n: { $gt: 6 } }, ["r7", "r9"], 2);
      expect(await ids({ kind: "delta" }, 3)).toEqual([]);
    });

    it("treats injection attempts as plain values and rejects bad filters naming the position", async () => {
      await check({ kind: "alpha' OR '1'='1" }, []);
      await check({ kind: { $in: ['beta"); DROP TABLE x; --', "x' || '"] } }, []);
      await expect(ids({ "kind') OR 1=1 --": "a" })).rejects.toThrow(FilterError);
      await expect(ids({ n: { $gte: "soon" } })).rejects.toThrow(
        "filter.n.$gte: expected an ISO date or number",
      );
      await expect(ids({ n: { $between: [1, 2] } } as unknown as Filter)).rejects.toThrow(
        /filter\.n\.\$between: unknown operator/,
      );
      expect(await ids({ kind: "alpha" })).toEqual(["r0", "r3", "r6", "r9"]); // the store still answers
    });

    if (extras.exists) {
      it("$exists, and a negated range (absent or the complement)", async () => {
        await check({ opt: { $exists: true } }, ["r0", "r1", "r2", "r3"]);
        await check({ opt: { $exists: false }, n: { $lt: 6 } }, ["r4", "r5"]);
        await check({ $not: { half: { $lt: 5 } } }, ["r10", "r11"]);
        await check({ $not: { opt: { $exists: true } }, n: 4 }, ["r4"]);
      });
    } else {
      it("rejects $exists, naming the position", async () => {
        await expect(ids({ opt: { $exists: true } })).rejects.toThrow(/filter\.opt\.\$exists: not supported/);
      });
    }

    if (extras.prefix) {
      it("$prefix", async () => {
        await check({ kind: { $prefix: "ga" } }, ["r2", "r5", "r8", "r11"]);
        await check({ kind: { $prefix: "%" } }, []);
      });
    } else {
      it("rejects $prefix, naming the position", async () => {
        await expect(ids({ kind: { $prefix: "ga" } })).rejects.toThrow(
          /filter\.kind\.\$prefix: not supported/,
        );
      });
    }

    if (extras.dates) {
      it("date bounds compare ISO dates", async () => {
        await check({ when: { $gte: "2024-05-01", $lt: "2024-06-15T12:00:00Z" } }, ["r4", "r10"]);
      });
    } else {
      it("rejects date bounds, naming the position", async () => {
        await expect(ids({ n: { $gte: "2024-05-01" } })).rejects.toThrow(/filter\.n\.\$gte: .*numbers only/);
      });
    }
  });
}
