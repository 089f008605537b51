/**
 * Metadata filters: the language (parse errors naming the position, semantics), the
 * catalog's SQL (exactly the matching chunks, injection attempts inert) and the search
 * pipeline (applied before top-k in keyword and vector retrieval, no starvation, cache
 * keys, fixed per-KB filters that cannot be lifted, user metadata at ingest).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KnowledgeLayer } from "../../src/knowledge-layer.js";
import { attribute } from "../../src/retrieve/attribution.js";
import { type Filter, FilterError, matchesFilter, parseFilter } from "../../src/retrieve/filter.js";
import type { ExtractedDocument } from "../../src/types.js";

describe("filter language", () => {
  const error = (filter: unknown): string => {
    try {
      parseFilter(filter);
    } catch (e) {
      expect(e).toBeInstanceOf(FilterError);
      return (e as Error).message;
    }
    throw new Error("no error");
  };

  it("names the position of every problem", () => {
    expect(error({ date: { $gte: "March" } })).toBe(
      'filter.date.$gte: expected an ISO date or number, got the string "March"',
    );
    expect(error({ date: { $gte: "2024-02-30" } })).toMatch(
      /^filter\.date\.\$gte: expected an ISO date or number/,
    );
    expect(error({ $and: [{ type: "pdf" }, { from: { $in: [] } }] })).toBe(
      "filter.$and[1].from.$in: expected a non-empty list of values",
    );
    expect(error({ from: { $in: ["a", { x: 1 }] } })).toBe(
      "filter.from.$in[1]: expected a string, number or boolean, got an object",
    );
    expect(error({ type: { $regex: "x" } })).toMatch(
      /^filter\.type\.\$regex: unknown operator "\$regex"; use one of \$eq/,
    );
    expect(error({ $nor: [] })).toMatch(/^filter\.\$nor: unknown operator/);
    expect(error({ "a b": 1 })).toMatch(/^filter\["a b"\]: invalid field name/);
    expect(error({ author: null })).toMatch(/^filter\.author: .*use \{"\$exists": false\}/);
    expect(error({ tags: { $exists: "yes" } })).toBe(
      'filter.tags.$exists: expected true or false, got the string "yes"',
    );
    expect(error({ path: { $prefix: 3 } })).toBe(
      "filter.path.$prefix: expected a non-empty string, got number 3",
    );
    expect(error([{ type: "pdf" }])).toBe("filter: expected an object, got an array");
    expect(error({ $or: { type: "pdf" } })).toBe("filter.$or: expected a list of filters, got an object");
    expect(error({ $not: { page: { $not: { $lt: "x" } } } })).toMatch(/^filter\.\$not\.page\.\$not\.\$lt: /);
  });

  it("normalises dates and evaluates with some-value semantics", () => {
    const node = parseFilter({ date: { $gte: "2024-03-01", $lt: "2024-03-01T10:00:00+02:00" } });
    expect(node).toMatchObject({
      kind: "and",
      children: [
        { kind: "range", op: "$gte", bound: { date: "2024-03-01T00:00:00.000Z" } },
        { kind: "range", op: "$lt", bound: { date: "2024-03-01T08:00:00.000Z" } },
      ],
    });
    expect(matchesFilter(node, { date: "2024-03-01T07:59:59.000Z" })).toBe(true);
    expect(matchesFilter(node, { date: "2024-03-01T08:00:00.000Z" })).toBe(false);
    expect(matchesFilter(node, { date: 20240301 })).toBe(false);
    const to = parseFilter({ to: "b@x.com" });
    expect(matchesFilter(to, { to: ["a@x.com", "b@x.com"] })).toBe(true);
    expect(matchesFilter(parseFilter({ to: { $ne: "b@x.com" } }), { to: ["a@x.com", "b@x.com"] })).toBe(
      false,
    );
    expect(matchesFilter(parseFilter({ to: { $ne: "b@x.com" } }), {})).toBe(true);
    expect(matchesFilter(parseFilter({ tags: { $contains: "q1" } }), { tags: ["q1", "q2"] })).toBe(true);
    expect(matchesFilter(parseFilter({ n: "3" }), { n: 3 })).toBe(false);
    expect(matchesFilter(parseFilter({}), {})).toBe(true);
  });
});

const dir = mkdtempSync(join(tmpdir(), "kl-filter-"));
let kl: KnowledgeLayer;

/** An email document. */
const mail = (
  i: number,
  from: string,
  date: string,
  body: string,
  to: string[] = ["team@acme.com"],
): ExtractedDocument => ({
  uri: `/mail/${i}.eml`,
  text: body,
  metadata: {
    path: `/mail/${i}.eml`,
    type: "email",
    title: `message ${i}`,
    from,
    to,
    subject: `message ${i}`,
    date,
  },
});

// 40 mails about quarterly revenue; only two are from the CFO, and they say it once.
const NOISE = Array.from({ length: 38 }, (_, i) =>
  mail(
    i,
    `sales${i % 4}@acme.com`,
    `2024-0${1 + (i % 6)}-1${i % 10}T09:00:00.000Z`,
    `Quarterly revenue quarterly revenue report ${i}: quarterly revenue grew in region ${i % 5}, revenue revenue.`,
    i % 2 === 0 ? ["team@acme.com"] : ["team@acme.com", "board@acme.com"],
  ),
);
const CFO = [
  mail(
    100,
    "cfo@acme.com",
    "2024-03-05T10:00:00.000Z",
    "Revenue for the quarter is attached; details follow next week.",
  ),
  mail(
    101,
    "cfo@acme.com",
    "2023-11-20T10:00:00.000Z",
    "Quarterly results meeting moved; revenue review on Friday.",
  ),
];
const NOTES: ExtractedDocument[] = [
  {
    uri: "/notes/plan.md",
    text: "# Plan\n\nRevenue plan for next quarter.",
    metadata: {
      path: "/notes/plan.md",
      type: "markdown",
      title: "Plan",
      frontMatter: { customer: "globex" },
    },
  },
];

beforeAll(async () => {
  kl = KnowledgeLayer.open({
    dataDir: dir,
    cache: { type: "memory", maxEntries: 100, maxBytes: 1 << 20, ttlSeconds: 60 },
  });
  await kl.createKb("mail", { chunking: { strategy: "fixed", chunkSize: 2000 } });
  await kl.createKb("notes", { chunking: { strategy: "fixed", chunkSize: 2000 } });
  await kl.ingestDocuments([...NOISE, ...CFO], { kb: "mail" });
  await kl.ingestDocuments(NOTES, { kb: "notes", metadata: { region: "emea", year: 2024 }, tags: ["board"] });
}, 300_000);
afterAll(() => {
  kl.close();
  rmSync(dir, { recursive: true, force: true });
});

const uris = (r: { results: { source: { uri: string } }[] }): string[] => r.results.map((x) => x.source.uri);

describe("search with a filter", () => {
  it("returns only matching chunks, and the rare matches at a small top-k, in every mode", async () => {
    const unfiltered = await kl.search("quarterly revenue", { kbs: ["mail"], topK: 2, mode: "keyword" });
    expect(uris(unfiltered).filter((u) => u === "/mail/100.eml" || u === "/mail/101.eml")).toEqual([]); // the CFO's mails are not on top
    for (const mode of ["keyword", "vector_only", "hybrid"] as const) {
      const r = await kl.search("quarterly revenue", {
        kbs: ["mail"],
        topK: 2,
        mode,
        filter: { from: "cfo@acme.com" },
      });
      expect(uris(r).sort(), mode).toEqual(["/mail/100.eml", "/mail/101.eml"]);
      expect(r.results.every((x) => x.source.from === "cfo@acme.com")).toBe(true);
    }
  });

  it("restricts by sender and period together (the 'company and period' check)", async () => {
    const r = await kl.search("revenue", {
      kbs: ["mail"],
      topK: 5,
      mode: "hybrid",
      filter: { from: "cfo@acme.com", date: { $gte: "2024-01-01", $lt: "2024-04-01" } },
    });
    expect(uris(r)).toEqual(["/mail/100.eml"]);
  });

  it("gives exactly the chunks the reference evaluator matches, for many filters", async () => {
    const filters: Filter[] = [
      { from: { $in: ["sales1@acme.com", "sales3@acme.com"] } },
      { to: "board@acme.com", from: { $ne: "sales1@acme.com" } },
      { date: { $gte: "2024-04-01" } },
      { $or: [{ from: { $prefix: "cfo" } }, { date: { $lt: "2024-02-01" } }] },
      { $not: { to: { $contains: "board@acme.com" } } },
      { subject: { $nin: ["message 1", "message 2"] }, type: "email", kb: "mail" },
      { kb: "notes" },
      { author: { $exists: true } },
    ];
    const all = [...kl.catalog.loadChunks(kl.catalog.filterChunks("mail", parseFilter({})).ids).values()];
    expect(all).toHaveLength(40);
    for (const filter of filters) {
      const node = parseFilter(filter);
      const want = all
        .filter((c) => matchesFilter(node, { ...attribute(c), kb: c.kb, to: c.document.metadata.to }))
        .map((c) => c.document.uri)
        .sort();
      const r = await kl.search("revenue quarterly results", {
        kbs: ["mail"],
        topK: 100,
        mode: "keyword",
        filter,
        keepDuplicates: true,
      });
      expect(uris(r).sort(), JSON.stringify(filter)).toEqual(want);
    }
  });

  it("reads user metadata, front matter keys and tags; filters by kb across KBs", async () => {
    const both = { kbs: ["mail", "notes"], topK: 10, mode: "keyword" as const };
    expect(uris(await kl.search("revenue", { ...both, filter: { region: "emea" } }))).toEqual([
      "/notes/plan.md",
    ]);
    expect(uris(await kl.search("revenue", { ...both, filter: { year: { $gte: 2024 } } }))).toEqual([
      "/notes/plan.md",
    ]);
    expect(uris(await kl.search("revenue", { ...both, filter: { year: "2024" } }))).toEqual([]);
    expect(uris(await kl.search("revenue", { ...both, filter: { customer: "globex" } }))).toEqual([
      "/notes/plan.md",
    ]);
    expect(uris(await kl.search("revenue", { ...both, filter: { tags: { $contains: "board" } } }))).toEqual([
      "/notes/plan.md",
    ]);
    const r = await kl.search("revenue", { ...both, filter: { kb: "notes" } });
    expect(r.results.map((x) => x.kb)).toEqual(["notes"]);
    expect(r.results[0]?.source).toMatchObject({ tags: ["board"], metadata: { region: "emea", year: 2024 } });
  });

  it("keeps the filter in the cache key", async () => {
    const a = await kl.search("revenue", {
      kbs: ["mail"],
      topK: 3,
      mode: "keyword",
      filter: { from: "cfo@acme.com" },
    });
    const b = await kl.search("revenue", {
      kbs: ["mail"],
      topK: 3,
      mode: "keyword",
      filter: { from: "sales0@acme.com" },
    });
    expect(b.cached).toBeUndefined();
    expect(uris(a).every((u) => u === "/mail/100.eml" || u === "/mail/101.eml")).toBe(true);
    expect(b.results.every((x) => x.source.from === "sales0@acme.com")).toBe(true);
    const again = await kl.search("revenue", {
      kbs: ["mail"],
      topK: 3,
      mode: "keyword",
      filter: { from: "cfo@acme.com" },
    });
    expect(again.cached).toBe(true);
    expect(uris(again)).toEqual(uris(a));
  });

  it("ANDs a KB's fixed filter with the search's, which cannot lift it", async () => {
    const perKb = { mail: { filter: { from: "cfo@acme.com" } as Filter } };
    const r = await kl.search("quarterly revenue", {
      kbs: ["mail"],
      topK: 10,
      mode: "keyword",
      perKb,
      filter: { $or: [{ from: { $exists: true } }, { from: { $exists: false } }] },
    });
    expect(uris(r).sort()).toEqual(["/mail/100.eml", "/mail/101.eml"]);
    const narrower = await kl.search("quarterly revenue", {
      kbs: ["mail"],
      topK: 10,
      mode: "keyword",
      perKb,
      filter: { date: { $lt: "2024-01-01" } },
    });
    expect(uris(narrower)).toEqual(["/mail/101.eml"]);
  });

  it("treats injection attempts as values and rejects bad filters before searching", async () => {
    for (const value of ["x' OR '1'='1", "cfo@acme.com'); DROP TABLE chunks; --", '") OR 1=1 --']) {
      const r = await kl.search("revenue", {
        kbs: ["mail"],
        topK: 5,
        mode: "keyword",
        filter: { from: value },
      });
      expect(r.results).toEqual([]);
      const p = await kl.search("revenue", {
        kbs: ["mail"],
        topK: 5,
        mode: "keyword",
        filter: { from: { $prefix: value } },
      });
      expect(p.results).toEqual([]);
    }
    await expect(
      kl.search("revenue", { kbs: ["mail"], filter: { "from') OR 1=1 --": "x" } as Filter }),
    ).rejects.toThrow(FilterError);
    await expect(kl.search("revenue", { kbs: ["mail"], filter: { date: { $gte: "soon" } } })).rejects.toThrow(
      'filter.date.$gte: expected an ISO date or number, got the string "soon"',
    );
    expect((await kl.counts("mail")).chunks).toBe(40); // nothing was dropped
  });

  it("returns nothing when no chunk matches, and lists documents by filter", async () => {
    const r = await kl.search("revenue", { kbs: ["mail"], topK: 5, filter: { from: "nobody@acme.com" } });
    expect(r.results).toEqual([]);
    expect(
      (await kl.listDocuments({ kb: "mail", filter: { from: "cfo@acme.com" } })).map((d) => d.uri),
    ).toEqual(["/mail/100.eml", "/mail/101.eml"]);
  });

  it("refuses user metadata keys that are source attributes", async () => {
    await expect(kl.ingestDocuments(NOTES, { kb: "notes", metadata: { type: "x" } })).rejects.toThrow(
      /^metadata\.type: "type" is a source attribute/,
    );
  });
});
