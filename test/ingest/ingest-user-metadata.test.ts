/**
 * Metadata at ingest and the fields filters read (keyword-only, no model): user metadata
 * that sticks across re-ingests until changed, the typing of `--meta` values, document ids
 * that stay the same while a document stays in its KB, email address fields matched by
 * address or display name, nested front matter and front matter dates.
 */
import { appendFileSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  applyUserMetadata,
  storedUserMetadata,
  typedMetaValue,
  withUserMetadata,
} from "../../src/ingest/pipeline.js";
import { KnowledgeLayer } from "../../src/knowledge-layer.js";
import { checkStoreFilter, type Filter, FilterError, parseFilter } from "../../src/retrieve/filter.js";
import { tempDir } from "../helpers/helpers.js";

const tmp = tempDir();
const docs = join(tmp.dir, "docs");
const mail = join(tmp.dir, "mail");
let kl: KnowledgeLayer;

beforeAll(() => {
  mkdirSync(docs);
  mkdirSync(mail);
  writeFileSync(join(docs, "terms.md"), "---\ntags: [legal]\n---\n# Terms\n\nPayment terms are net 30.\n");
  writeFileSync(join(docs, "notes.txt"), "Payment reminders go out weekly.\n");
  kl = KnowledgeLayer.open({ dataDir: join(tmp.dir, "home") });
});
afterAll(async () => {
  await kl.close();
  tmp.cleanup();
});

/** The document of `name` under `docs`, with its metadata. */
const doc = async (name: string) => {
  const found = (await kl.listDocuments({ metadata: true })).find((d) => d.uri === join(docs, name));
  if (!found) throw new Error(`${name} is not in the KB`);
  return found;
};

describe("--meta values", () => {
  it("become numbers only when the number reads back exactly", () => {
    const cases: [string, unknown][] = [
      ["42", 42],
      ["-3", -3],
      ["0.25", 0.25],
      ["1.50", 1.5],
      ["9007199254740991", 9007199254740991],
      ["true", true],
      ["false", false],
      ["12345678901234567890", "12345678901234567890"],
      ["9007199254740993", "9007199254740993"],
      ["1.0000000000000001", "1.0000000000000001"],
      ["007", "007"],
      ["1e3", "1e3"],
      ["+5", "+5"],
      [" 5", " 5"],
      ["-0", "-0"],
      ["True", "True"],
      ["", ""],
    ];
    for (const [raw, want] of cases) expect(typedMetaValue(raw), raw).toBe(want);
  });
});

describe("user metadata sticks to a document until changed", () => {
  it("is kept by a plain re-ingest, changed file or not, and the document keeps its id", async () => {
    const first = await kl.ingest([docs], {
      embed: false,
      metadata: { customer: "acme", year: 2024 },
      tags: ["signed"],
    });
    expect(first).toMatchObject({ added: 2, updated: 0 });
    const id = (await doc("terms.md")).id;
    expect((await doc("terms.md")).metadata).toMatchObject({
      meta: { customer: "acme", year: 2024 },
      tags: ["legal", "signed"],
      userTags: ["signed"],
    });
    // Nothing given: nothing changes, nothing is re-ingested.
    expect(await kl.ingest([docs], { embed: false })).toMatchObject({ unchanged: 2, updated: 0 });
    // The file changes: it is re-ingested with its metadata, under the same id.
    appendFileSync(join(docs, "terms.md"), "\nLate fees apply after 30 days.\n");
    expect(await kl.ingest([docs], { embed: false })).toMatchObject({ unchanged: 1, updated: 1 });
    expect(await doc("terms.md")).toMatchObject({
      id,
      metadata: { meta: { customer: "acme", year: 2024 }, tags: ["legal", "signed"] },
    });
    const hits = await kl.search("late fees", { mode: "keyword", filter: { customer: "acme" } });
    expect(hits.results.map((r) => r.source.uri)).toEqual([join(docs, "terms.md")]);
  });

  it("changes key by key: a key given again is replaced, null removes it, the others stay", async () => {
    expect(await kl.ingest([docs], { embed: false, metadata: { year: 2025, region: "emea" } })).toMatchObject(
      { updated: 2 },
    );
    expect((await doc("notes.txt")).metadata.meta).toEqual({ customer: "acme", year: 2025, region: "emea" });
    await kl.ingest([docs], { embed: false, metadata: { region: null }, removeTags: ["signed"] });
    expect((await doc("notes.txt")).metadata.meta).toEqual({ customer: "acme", year: 2025 });
    expect((await doc("terms.md")).metadata).toMatchObject({ tags: ["legal"], userTags: [] });
    // A front matter tag the file drops is gone; the user's tags stay.
    await kl.ingest([docs], { embed: false, tags: ["archived"] });
    writeFileSync(
      join(docs, "terms.md"),
      "---\ntags: [contract]\n---\n# Terms\n\nPayment terms are net 45.\n",
    );
    await kl.ingest([docs], { embed: false });
    expect((await doc("terms.md")).metadata).toMatchObject({
      tags: ["contract", "archived"],
      userTags: ["archived"],
    });
    // replaceMetadata forgets everything given before.
    await kl.ingest([docs], { embed: false, replaceMetadata: true, metadata: { owner: "legal" } });
    expect((await doc("terms.md")).metadata).toMatchObject({ meta: { owner: "legal" }, tags: ["contract"] });
    expect(await kl.ingest([docs], { embed: false, replaceMetadata: true })).toMatchObject({ updated: 2 });
    expect((await doc("notes.txt")).metadata.meta).toBeUndefined();
    expect(await kl.ingest([docs], { embed: false })).toMatchObject({ unchanged: 2 });
  });

  it("a removed document that comes back gets a new id", async () => {
    const id = (await doc("notes.txt")).id;
    rmSync(join(docs, "notes.txt"));
    expect((await kl.ingest([docs], { embed: false })).removed).toEqual([join(docs, "notes.txt")]);
    writeFileSync(join(docs, "notes.txt"), "Payment reminders go out weekly.\n");
    await kl.ingest([docs], { embed: false });
    expect((await doc("notes.txt")).id).toBeGreaterThan(id);
  });

  it("applies changes over what is stored; documents from before user tags were kept apart infer them", () => {
    const stored = { meta: { a: 1, b: "x" }, tags: ["t1", "t2"] };
    expect(
      applyUserMetadata(stored, { meta: { a: 2, b: null, c: true }, tags: ["t3"], untag: ["t1"] }),
    ).toEqual({
      meta: { a: 2, c: true },
      tags: ["t2", "t3"],
    });
    expect(applyUserMetadata(stored, undefined)).toEqual(stored);
    expect(applyUserMetadata(stored, { replace: true, tags: ["n"] })).toEqual({ meta: {}, tags: ["n"] });
    // Written by an older version: tags holds front matter tags and the user's together.
    const legacy = {
      path: "/x.md",
      type: "markdown" as const,
      tags: ["legal", "signed", "own"],
      frontMatter: { keywords: "legal" },
      meta: { customer: "acme" },
    };
    expect(storedUserMetadata(legacy, ["own"])).toEqual({ meta: { customer: "acme" }, tags: ["signed"] });
    const merged = withUserMetadata(
      { uri: "/x.md", text: "x", metadata: { path: "/x.md", type: "markdown", tags: ["legal"] } },
      { meta: { customer: "acme" }, tags: ["signed"] },
    );
    expect(merged.metadata).toMatchObject({ tags: ["legal", "signed"], userTags: ["signed"] });
    expect(storedUserMetadata(merged.metadata)).toEqual({ meta: { customer: "acme" }, tags: ["signed"] });
  });
});

describe("fields filters read", () => {
  beforeAll(async () => {
    const eml = (name: string, headers: string[], body: string) =>
      writeFileSync(join(mail, name), `${headers.join("\r\n")}\r\n\r\n${body}\r\n`);
    eml(
      "1.eml",
      [
        'From: "Tim Chapman" <TimC@2ubh.com>',
        "To: Alice Smith <alice@example.com>, bob@example.com",
        "Cc: Board: carol@example.com, Dan <dan@example.com>;",
        "Subject: budget",
        "Date: Thu, 22 Aug 2002 13:38:22 +0000",
      ],
      "The budget review is on Friday.",
    );
    eml(
      "2.eml",
      [
        "From: bob@example.com",
        "To: Tim Chapman <timc@2ubh.com>",
        "Subject: re: budget",
        "Date: Fri, 23 Aug 2002 09:00:00 +0000",
      ],
      "Friday works for the budget review.",
    );
    mkdirSync(join(tmp.dir, "site"));
    writeFileSync(
      join(tmp.dir, "site", "post.md"),
      [
        "---",
        "title: Launch",
        "date: 2024-03-01",
        "updated: 2024-03-05T10:30:00+02:00",
        "seo: {title: Big launch, noindex: false}",
        "owner: {name: Ann}",
        "og.image: /img/launch.png",
        "---",
        "# Launch",
        "",
        "The budget for the launch is set.",
      ].join("\n"),
    );
    await kl.createKb("mail");
    await kl.ingest([mail, join(tmp.dir, "site")], { kb: "mail", embed: false });
  });

  const names = async (filter: Filter): Promise<string[]> => {
    const r = await kl.search("budget", { kbs: ["mail"], mode: "keyword", topK: 10, filter });
    return r.results.map((x) => x.source.uri.split("/").pop() as string).sort();
  };

  it("matches from/to/cc on the full mailbox, the address (any case) or the display name", async () => {
    expect(await names({ from: "timc@2ubh.com" })).toEqual(["1.eml"]);
    expect(await names({ from: "TimC@2UBH.com" })).toEqual(["1.eml"]);
    expect(await names({ from: "Tim Chapman" })).toEqual(["1.eml"]);
    expect(await names({ from: "Tim Chapman <TimC@2ubh.com>" })).toEqual(["1.eml"]);
    expect(await names({ from: { $in: ["bob@example.com", "nobody@x.org"] } })).toEqual(["2.eml"]);
    expect(await names({ from: { $prefix: "Tim" } })).toEqual(["1.eml"]);
    expect(await names({ to: "timc@2ubh.com" })).toEqual(["2.eml"]);
    expect(await names({ to: { $contains: "Alice Smith" } })).toEqual(["1.eml"]);
    expect(await names({ cc: "carol@example.com" })).toEqual(["1.eml"]);
    expect(await names({ from: { $ne: "timc@2ubh.com" }, type: "email" })).toEqual(["2.eml"]);
    expect(await names({ cc: { $exists: false }, type: "email" })).toEqual(["2.eml"]);
    const r = await kl.search("budget", {
      kbs: ["mail"],
      mode: "keyword",
      filter: { from: "timc@2ubh.com" },
    });
    expect(r.results[0]?.source).toMatchObject({
      from: "Tim Chapman <TimC@2ubh.com>",
      to: ["Alice Smith <alice@example.com>", "bob@example.com"],
      cc: ["carol@example.com", "Dan <dan@example.com>"],
    });
  });

  it("reads nested front matter by dotted names; an object value matches nothing", async () => {
    expect(await names({ "seo.title": "Big launch" })).toEqual(["post.md"]);
    expect(await names({ "seo.noindex": false })).toEqual(["post.md"]);
    expect(await names({ "og.image": { $prefix: "/img/" } })).toEqual(["post.md"]);
    expect(await names({ "owner.name": "Ann" })).toEqual(["post.md"]);
    // Before: {"seo": "Big launch"} matched through the object's values.
    expect(await names({ seo: "Big launch" })).toEqual([]);
    expect(await names({ owner: "Ann" })).toEqual([]);
    expect(await names({ seo: { $exists: true } })).toEqual([]);
  });

  it("takes dotted names only as whole paths; vector-store payload filters refuse them", () => {
    expect(() => parseFilter({ "seo.title": "x", "a.0.b": 1 })).not.toThrow();
    for (const bad of ["a..b", ".a", "a.", "1a.b", "a b"])
      expect(() => parseFilter({ [bad]: 1 }), bad).toThrow(/invalid field name/);
    const support = { kinds: new Set(["eq"] as const) };
    expect(() => checkStoreFilter(parseFilter({ "seo.title": "x" }), "qdrant", support)).toThrow(
      new FilterError('filter["seo.title"]: nested field names are not supported by the qdrant store'),
    );
    expect(() => checkStoreFilter(parseFilter({ title: "x" }), "qdrant", support)).not.toThrow();
  });

  it("keeps a front matter date alone as YYYY-MM-DD, equal to what was written and in range", async () => {
    expect(await names({ date: "2024-03-01" })).toEqual(["post.md"]);
    expect(await names({ date: { $gte: "2024-03-01", $lt: "2024-03-02" } })).toEqual(["post.md"]);
    expect(await names({ updated: { $gt: "2024-03-05T08:00:00Z" } })).toEqual(["post.md"]);
    expect(await names({ updated: { $gt: "2024-03-05T09:00:00Z" } })).toEqual([]);
    // Email dates are date-times: a day is a range.
    expect(await names({ date: { $gte: "2002-08-22", $lt: "2002-08-23" } })).toEqual(["1.eml"]);
  });
});
