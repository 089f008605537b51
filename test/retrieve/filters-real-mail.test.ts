/**
 * The "restrict by company and period" check of issue 16 on real mail: two SpamAssassin
 * folders from ../shared ingested keyword-only (no model), then searches restricted by
 * sender (a bare address, as users write it, against `Name <addr>` headers) and by a date
 * range. Every result must match, every chunk that matches and holds the query word must
 * be found, and a filter must never starve the results: a sender whose mails rank far
 * below the unfiltered top-k still fills the filtered top-k.
 */
import { existsSync } from "node:fs";
import { afterAll, beforeAll, expect, it } from "vitest";
import { KnowledgeLayer } from "../../src/knowledge-layer.js";
import { attribute } from "../../src/retrieve/attribution.js";
import { type Filter, parseFilter } from "../../src/retrieve/filter.js";
import type { StoredChunk } from "../../src/store/catalog.js";
import { docsPath, tempDir } from "../helpers/helpers.js";
import { describeUnless } from "../helpers/skip.js";

const folders = ["easy-ham-1", "hard-ham-1"].map((f) => docsPath("email", "spamassassin_sample", f));
const missing = folders.find((f) => !existsSync(f));

describeUnless(
  import.meta.url,
  missing && `${missing} not found (the shared data folder ../shared is not there)`,
  "filters on real mail (two SpamAssassin folders)",
  () => {
    const tmp = tempDir();
    let kl: KnowledgeLayer;
    let all: StoredChunk[];

    beforeAll(async () => {
      kl = KnowledgeLayer.open({ dataDir: tmp.dir });
      await kl.createKb("mail");
      const summary = await kl.ingest(folders, { kb: "mail", embed: false });
      expect(summary).toMatchObject({ added: 300, errors: [] });
      all = [...kl.catalog.loadChunks(kl.catalog.filterChunks("mail", parseFilter({})).ids).values()];
    });
    afterAll(async () => {
      await kl.close();
      tmp.cleanup();
    });

    const search = (query: string, topK: number, filter?: Filter) =>
      kl.search(query, { kbs: ["mail"], mode: "keyword", topK, filter, keepDuplicates: true });
    /** The sender's address as the header shows it, lower-cased, read without the filter code. */
    const sentBy = (c: { source: { from?: string } }, address: string): boolean =>
      (c.source.from ?? "").toLowerCase().includes(`<${address}>`) ||
      (c.source.from ?? "").toLowerCase() === address;
    const dated = (c: { source: { date?: string } }, from: string, to: string): boolean =>
      c.source.date !== undefined &&
      Date.parse(c.source.date) >= Date.parse(from) &&
      Date.parse(c.source.date) < Date.parse(to);

    it("restricts by sender and period: every result matches, every matching chunk with the word is found", async () => {
      const gnome = "subscriptions@lockergnome.com";
      const filter = { from: gnome, date: { $gte: "2002-07-15", $lt: "2002-07-18" } };
      const r = await search("windows", 1000, filter);
      expect(r.results.length).toBeGreaterThan(10);
      for (const x of r.results) {
        expect(sentBy(x, gnome), x.source.from).toBe(true);
        expect(dated(x, "2002-07-15", "2002-07-18"), x.source.date).toBe(true);
      }
      // Every chunk of that sender and period holding the word "windows" (a whole word:
      // "WindowsÆ" is another token) is in the result.
      const found = new Set(r.results.map((x) => x.chunkId));
      const want = all.filter((c) => {
        const a = { source: attribute(c) };
        return (
          sentBy(a, gnome) &&
          dated(a, "2002-07-15", "2002-07-18") &&
          /(?<![\p{L}\p{N}_])windows(?![\p{L}\p{N}_])/iu.test(c.text)
        );
      });
      expect(want.length).toBeGreaterThan(10);
      for (const c of want) expect(found.has(c.id), `chunk ${c.id} of ${c.document.uri}`).toBe(true);
    });

    it("restricts to two senders, one in each folder", async () => {
      const r = await search("email", 1000, {
        from: { $in: ["timc@2ubh.com", "subscriptions@lockergnome.com"] },
      });
      const senders = new Set(
        r.results.map((x) =>
          sentBy(x, "timc@2ubh.com")
            ? "timc"
            : sentBy(x, "subscriptions@lockergnome.com")
              ? "gnome"
              : x.source.from,
        ),
      );
      expect([...senders].sort()).toEqual(["gnome", "timc"]);
      const paths = new Set(r.results.map((x) => x.source.path.split("/").at(-2)));
      expect([...paths].sort()).toEqual(["easy-ham-1", "hard-ham-1"]);
    });

    it("never starves the results: a sender ranked far down still fills the filtered top-k", async () => {
      const unfiltered = await search("free software", 1000);
      const firstTim = unfiltered.results.findIndex((x) => sentBy(x, "timc@2ubh.com"));
      expect(firstTim).toBeGreaterThan(50); // his mails are far below any small top-k
      const r = await search("free software", 3, { from: "timc@2ubh.com" });
      expect(r.results).toHaveLength(3);
      expect(r.results.every((x) => sentBy(x, "timc@2ubh.com"))).toBe(true);
      // A period alone: October's mails only, and a full top-k of them.
      const october = await search("linux", 5, { date: { $gte: "2002-10-01", $lt: "2002-11-01" } });
      expect(october.results).toHaveLength(5);
      expect(october.results.every((x) => dated(x, "2002-10-01", "2002-11-01"))).toBe(true);
    });
  },
);
