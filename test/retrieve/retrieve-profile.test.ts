/**
 * Issue 17 BM25 changes: numbers of table rows do not count toward a chunk's length,
 * and a document's profile (organisation, kind, period) lifts its chunks, scored with
 * document-level frequencies.
 */
import { join } from "node:path";
import { afterAll, describe, expect, test } from "vitest";
import { KnowledgeLayer } from "../../src/knowledge-layer.js";
import { fieldLength, PROFILE_FIELDS, profileText } from "../../src/retrieve/bm25.js";
import type { Filter } from "../../src/retrieve/filter.js";
import { tokenize } from "../../src/retrieve/tokenizer.js";
import { openDatabase, PROFILED_DOCUMENTS } from "../../src/store/database.js";
import type { ExtractedDocument } from "../../src/types.js";
import { tempDir } from "../helpers/helpers.js";

describe("field length", () => {
  const length = (text: string): [number, number] => {
    const tokens = tokenize(text);
    return [tokens.length, fieldLength(text, tokens, (l) => tokenize(l))];
  };

  test("figures of table rows do not count; numbers in sentences do", () => {
    expect(length("Accounts payable 1,174 1,587\nTotal current liabilities 5,466 4,587")).toEqual([13, 5]);
    expect(length("In 2018 we spent $1,577 million on 3 plants.")).toEqual([8, 8]);
    // A whole paragraph on one line that happens to end in two numbers is not a table row.
    const paragraph = `${"word ".repeat(90)}ends with 12 34`;
    expect(length(paragraph)[1]).toBe(length(paragraph)[0]);
  });
});

describe("profiled documents index", () => {
  test("names every profile field, and SQLite answers the profile query from the partial index", () => {
    for (const field of PROFILE_FIELDS) expect(PROFILED_DOCUMENTS).toContain(`'$.${field}'`);
    const tmp = tempDir();
    try {
      const db = openDatabase(tmp.dir);
      const plan = db
        .prepare(
          `EXPLAIN QUERY PLAN SELECT id, metadata FROM documents WHERE kb = ? AND ${PROFILED_DOCUMENTS}`,
        )
        .all("default") as { detail: string }[];
      expect(plan.map((p) => p.detail).join("; ")).toMatch(/USING INDEX documents_profiled/);
      db.close();
    } finally {
      tmp.cleanup();
    }
  });
});

describe("document profile", () => {
  test("profileText: organisation, form code (also without its hyphen) and period", () => {
    expect(
      profileText({
        organization: "AMCOR PLC",
        documentKind: "Form 8-K current report",
        period: "report dated July 1, 2022",
        title: "ignored",
      }),
    ).toBe("AMCOR PLC Form 8-K report dated July 1, 2022 8K");
    expect(profileText({ title: "x" })).toBe("");
  });

  const { dir, cleanup } = tempDir("kl-profile-");
  afterAll(cleanup);

  const doc = (uri: string, text: string, metadata: Record<string, unknown> = {}): ExtractedDocument => ({
    uri,
    text,
    // Plain text: no context prefix, so only the profile can name the company.
    metadata: { path: uri, type: "text", ...metadata },
  });

  test("a question naming a company and year lifts that filing's chunks above wordier ones", async () => {
    const kl = KnowledgeLayer.open({ dataDir: join(dir, "a"), cache: { type: "none" } });
    try {
      await kl.createKb("filings");
      await kl.createKb("plain", { retrieval: { bm25DocumentWeight: 0 } });
      const docs = [
        doc("/f/acme-2021.pdf", "Revenue grew in the year. Revenue growth came from tools.", {
          organization: "Acme Tools, Inc.",
          documentKind: "Form 10-K annual report",
          period: "fiscal year ended December 31, 2021 (FY2021)",
        }),
        doc(
          "/f/bolt-2020.pdf",
          "Revenue growth, revenue growth, revenue growth: growth of revenue everywhere.",
          {
            organization: "Bolt Corporation",
            documentKind: "Form 10-K annual report",
            period: "fiscal year ended December 31, 2020 (FY2020)",
          },
        ),
        doc("/f/notes.pdf", "Notes on revenue growth."),
      ];
      for (const kb of ["filings", "plain"]) await kl.ingestDocuments(docs, { kb, embed: false });
      const top = async (kb: string, q: string, filter?: Filter): Promise<string[]> =>
        (await kl.search(q, { kbs: [kb], mode: "keyword", topK: 3, filter })).results.map(
          (r) => r.source.uri,
        );
      expect((await top("plain", "What was Acme's revenue growth in FY2021?"))[0]).toBe("/f/bolt-2020.pdf");
      expect((await top("filings", "What was Acme's revenue growth in FY2021?"))[0]).toBe("/f/acme-2021.pdf");
      // No profile word in the query: the ranking is plain BM25.
      expect(await top("filings", "revenue growth")).toEqual(await top("plain", "revenue growth"));
      // A filter still applies before top-k.
      expect(await top("filings", "Acme revenue growth FY2021", { uri: { $prefix: "/f/bolt" } })).toEqual([
        "/f/bolt-2020.pdf",
      ]);
    } finally {
      await kl.close();
    }
  });

  test("bm25DocumentWeight must be a finite number >= 0", async () => {
    const kl = KnowledgeLayer.open({ dataDir: join(dir, "b"), cache: { type: "none" } });
    try {
      await expect(kl.createKb("bad", { retrieval: { bm25DocumentWeight: -1 } })).rejects.toThrow(
        /retrieval\.bm25DocumentWeight/,
      );
    } finally {
      await kl.close();
    }
  });
});
