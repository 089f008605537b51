/**
 * Issue 17: every chunk knows its document. PDF cover facts, page headings, outline
 * sections and running headers; the context prefix each chunk gets (bounded, body
 * span exact); tables cut only between rows with their header repeated.
 */
import { describe, expect, test } from "vitest";
import { documentContext, MAX_CONTEXT_CHARS } from "../../src/chunk/context.js";
import { createChunker } from "../../src/chunk/index.js";
import { splitTableRegion, tableRegions } from "../../src/chunk/tables.js";
import type { ChunkingConfig } from "../../src/config.js";
import { extractBytes, htmlToText } from "../../src/extract/index.js";
import { coverFacts, outlineSections, pageHeadings, runningLines } from "../../src/extract/pdf-context.js";
import { isTableRow, isYearRow, trailingNumbers } from "../../src/text-tables.js";
import { type Chunk, chunkBody } from "../../src/types.js";
import { checkInvariants, doc } from "../helpers/chunk-helpers.js";
import { buildPdf } from "../helpers/pdf-fixtures.js";

const config = (chunkSize = 1500): ChunkingConfig => ({
  strategy: "auto",
  chunkSize,
  chunkOverlap: Math.min(150, Math.floor(chunkSize / 10)),
  minChunkSize: Math.min(500, Math.floor(chunkSize / 3)),
});

const COVER = [
  "UNITED STATES",
  "SECURITIES AND EXCHANGE COMMISSION",
  "Washington, D.C. 20549",
  "FORM 10-K",
  "ANNUAL REPORT PURSUANT TO SECTION 13 OR 15(d) OF THE SECURITIES EXCHANGE ACT OF 1934",
  "For the fiscal year ended December 31, 2017",
  "Commission File Number: 001-35727",
  "Acme Widgets, Inc.",
  "(Exact name of Registrant as specified in its charter)",
  "Delaware",
];

describe("cover facts", () => {
  test("an SEC annual report: registrant, form and fiscal year (also as FY2017)", () => {
    expect(coverFacts(COVER.join("\n"))).toEqual({
      organization: "Acme Widgets, Inc.",
      documentKind: "Form 10-K annual report",
      period: "fiscal year ended December 31, 2017 (FY2017)",
    });
  });

  test("a current report and a quarterly report", () => {
    const eightK = coverFacts(
      "FORM 8-K\nCURRENT REPORT\nDate of Report (Date of earliest event reported): July 1, 2022 (June 30, 2022)\nAMCOR PLC\n(Exact name of registrant as specified in its charter)",
    );
    expect(eightK).toEqual({
      organization: "AMCOR PLC",
      documentKind: "Form 8-K current report",
      period: "report dated July 1, 2022",
    });
    expect(coverFacts("FORM 10-Q\nFor the quarterly period ended June 30, 2023\n").period).toBe(
      "quarter ended June 30, 2023",
    );
  });

  test("an earnings release: listed name with its ticker, the results' period", () => {
    const text =
      "FOR IMMEDIATE RELEASE\nNew Brunswick, N.J. (January 24, 2023) – Johnson & Johnson (NYSE: JNJ) today announced results for fourth-\nquarter and full year 2022. Sales grew.";
    expect(coverFacts(text)).toEqual({
      organization: "Johnson & Johnson (NYSE: JNJ)",
      documentKind: "earnings release",
      period: "fourth-quarter and full year 2022 (FY2022)",
    });
  });

  test("a legal name on a line of its own; nothing is guessed from ordinary text", () => {
    expect(
      coverFacts("FORM 10-K\nCommission file number 1-3285\n3M COMPANY\nState of Incorporation").organization,
    ).toBe("3M COMPANY");
    expect(coverFacts("Dear reader,\nthis is a letter about gardening and the weather.\n")).toEqual({});
  });
});

describe("page headings and running lines", () => {
  const pages = [
    "Table of Contents\nACME WIDGETS, INC.\nCONSOLIDATED BALANCE SHEETS\n(in thousands)\n2017 2016\nCash $ 1,200 $ 900\nTotal assets 5,000 4,000\n45",
    "Table of Contents\nwhich continued from the page before and ends here.\nMore text follows in this paragraph of the notes.\n46",
    "Table of Contents\nNote 6 - Restructuring\nThe Company restructured its plants in 2017, which cost $ 5 million.\n47",
    "Table of Contents\n(Millions) 2018 2017 2016\nNet income 5 6 7\n48",
  ];

  test("lines repeated at the top or bottom of most pages are running lines", () => {
    const running = runningLines(pages);
    expect(running.has("table of contents")).toBe(true);
    expect(running.has("#")).toBe(true);
    expect(running.has("acme widgets, inc.")).toBe(false);
  });

  test("the heading block at the top of a page; a continuation page inherits it; a table row ends it", () => {
    expect(pageHeadings(pages)).toEqual([
      "ACME WIDGETS, INC. · CONSOLIDATED BALANCE SHEETS · (in thousands)",
      "ACME WIDGETS, INC. · CONSOLIDATED BALANCE SHEETS · (in thousands)",
      "Note 6 - Restructuring",
      "Note 6 - Restructuring",
    ]);
  });

  test("outline sections: the path in force at the top of each page, then bookmarks lower on it", () => {
    const sections = outlineSections(
      [
        { path: ["Part II"], page: 2, at: 0 },
        { path: ["Part II", "Item 8"], page: 2, at: 0.5 },
        { path: ["Part II", "Item 8", "Balance Sheets"], page: 3, at: 0 },
      ],
      4,
    );
    expect(sections).toEqual([
      [],
      [
        { at: 0, path: ["Part II"] },
        { at: 0.5, path: ["Part II", "Item 8"] },
      ],
      [{ at: 0, path: ["Part II", "Item 8", "Balance Sheets"] }],
      [{ at: 0, path: ["Part II", "Item 8", "Balance Sheets"] }],
    ]);
  });

  test("table rows: figures at the end of a line, years as column headings", () => {
    expect(trailingNumbers("Net income including noncontrolling interest $ 5,363 $ 4,869 $ 5,058")).toBe(3);
    expect(isTableRow("Purchases of PP&E (1,577) (1,373) (1,420)")).toBe(true);
    expect(isTableRow("Short-term investments — 266,206")).toBe(true);
    expect(isTableRow("Years ended December 31")).toBe(false);
    expect(isTableRow("In 2018 we spent 12 million on 3 plants.")).toBe(false);
    expect(isYearRow("(Millions) 2018 2017 2016")).toBe(true);
    expect(isYearRow("Cash 2,853 3,053")).toBe(false);
  });
});

/** A two-page statement: cover page, then a long cash-flow table. */
function filing(rows = 90): Buffer {
  const table = Array.from(
    { length: rows },
    (_, i) => `Line item number ${i + 1} of the cash flows ${1000 + i} ${900 + i} ${800 + i}`,
  );
  return buildPdf(
    [
      COVER,
      [
        "Acme Widgets, Inc. and Subsidiaries",
        "Consolidated Statements of Cash Flows",
        "Years ended December 31",
        "",
        "(Millions) 2017 2016 2015",
        ...table.slice(0, 45),
      ],
      ["Table of Contents", ...table.slice(45)],
    ],
    {
      info: { Title: "acme-10k-2017.pdf" },
      outline: [
        { title: "Part II", page: 2, children: [{ title: "Item 8. Financial Statements", page: 2 }] },
      ],
    },
  );
}

describe("PDF chunks carry their document's context", () => {
  test("extraction: cover facts in metadata, page headings and outline sections on the page segments", async () => {
    const [d] = await extractBytes("acme-10k-2017.pdf", filing());
    expect(d?.metadata).toMatchObject({
      organization: "Acme Widgets, Inc.",
      documentKind: "Form 10-K annual report",
      period: "fiscal year ended December 31, 2017 (FY2017)",
    });
    const page2 = d?.segments?.find((s) => s.metadata.page === 2);
    expect(page2?.metadata.heading).toBe(
      "Acme Widgets, Inc. and Subsidiaries · Consolidated Statements of Cash Flows · Years ended December 31",
    );
    expect(page2?.metadata.sections).toEqual([{ at: 0, path: ["Part II", "Item 8. Financial Statements"] }]);
  });

  test("every chunk's prefix names the issuer, form and period, then its section; bodies stay exact", async () => {
    const [d] = await extractBytes("acme-10k-2017.pdf", filing());
    if (!d) throw new Error("no document");
    const chunks = await createChunker(config()).chunk(d);
    checkInvariants(d, chunks, config());
    expect(chunks.length).toBeGreaterThan(3);
    for (const c of chunks) {
      const line = (c.contextPrefix ?? "").split("\n")[0] as string;
      expect(line.startsWith("Acme Widgets, Inc. · Form 10-K annual report · fiscal year ended")).toBe(true);
      expect(line.length).toBeLessThanOrEqual(MAX_CONTEXT_CHARS);
      expect(c.text.length).toBeLessThanOrEqual(1500);
    }
    const onPage2 = chunks.filter((c) => c.metadata.pageStart === 2);
    expect(onPage2.every((c) => c.contextPrefix?.includes("Item 8. Financial Statements"))).toBe(true);
    expect(onPage2.every((c) => c.contextPrefix?.includes("Consolidated Statements of Cash Flows"))).toBe(
      true,
    );
  });

  test("a table is cut only between rows, and every continuation repeats its header", async () => {
    const [d] = await extractBytes("acme-10k-2017.pdf", filing());
    if (!d) throw new Error("no document");
    const chunks = await createChunker(config()).chunk(d);
    const rowChunks = chunks.filter((c) => chunkBody(c).includes("Line item number"));
    expect(rowChunks.length).toBeGreaterThan(2);
    for (const c of rowChunks) {
      for (const line of chunkBody(c)
        .split("\n")
        .filter((l) => l.startsWith("Line item")))
        expect(line).toMatch(/^Line item number \d+ of the cash flows \d+ \d+ \d+$/);
    }
    const continuations = rowChunks.filter((c) => c.metadata.table === true);
    expect(continuations.length).toBeGreaterThan(0);
    for (const c of continuations) expect(c.contextPrefix).toContain("(Millions) 2017 2016 2015");
  });

  test("tableRegions and splitTableRegion: header found, pieces of whole rows", () => {
    const rows = Array.from({ length: 30 }, (_, i) => `Item ${i} ${i + 10} ${i + 20}`);
    const text = `Some prose before.\n\nBalance Sheets\n(Millions) 2018 2017\n${rows.join("\n")}\n\nAfter.`;
    const [region] = tableRegions(text);
    expect(region).toBeDefined();
    if (!region) return;
    expect(region.header).toBe("Balance Sheets\n(Millions) 2018 2017");
    expect(text.slice(region.start, region.headerEnd)).toBe("Balance Sheets\n(Millions) 2018 2017");
    const pieces = splitTableRegion(text, region, region.start, 120, 80, (a, b) => b - a, {
      unit: "chars",
      name: "chars",
      count: (t) => t.length,
    });
    expect(pieces.length).toBeGreaterThan(3);
    expect(pieces[0]?.prefix).toBeUndefined();
    for (const p of pieces.slice(1)) expect(p.prefix).toBe(region.header);
    for (const p of pieces) {
      const body = text.slice(p.start, p.end);
      for (const line of body.split("\n")) expect(text.split("\n")).toContain(line);
    }
    expect(pieces.map((p) => text.slice(p.start, p.end)).join("\n")).toBe(
      text.slice(region.start, region.end),
    );
  });
});

describe("other formats", () => {
  test("HTML and DOCX tables: the first row is the header, repeated by every chunk of the table", async () => {
    const rows = Array.from({ length: 40 }, (_, i) => `<tr><td>Region ${i}</td><td>${1000 + i}</td></tr>`);
    const html = `<html><body><h1>Sales</h1><table><tr><th>Region</th><th>Amount</th></tr>${rows.join("")}</table></body></html>`;
    const text = htmlToText(html).text;
    expect(text).toContain("Region | Amount\n--- | ---\nRegion 0 | 1000");
    const d = doc(text, "html");
    const chunks = await createChunker({ ...config(300), strategy: "document" }).chunk(d);
    checkInvariants(d, chunks, { ...config(300), strategy: "document" });
    const later = chunks.filter((c) => !chunkBody(c).includes("--- | ---"));
    expect(later.length).toBeGreaterThan(1);
    for (const c of later) expect(c.contextPrefix).toContain("Region | Amount\n--- | ---");
    // A one-column table gets no delimiter row (it would make a setext heading).
    expect(htmlToText("<table><tr><td>Only</td></tr><tr><td>Column</td></tr></table>").text).toBe(
      "Only\nColumn",
    );
  });

  test("plain text: a real title prefixes chunks that do not start with it; a file-name title none", async () => {
    const para = "Sentence about soil and water in the garden. ".repeat(12).trim();
    const text = `Growing Tomatoes\n\n${[para, para, para, para].join("\n\n")}`;
    const titled = doc(text, "text", { title: "Growing Tomatoes" });
    const chunks = await createChunker(config(800)).chunk(titled);
    checkInvariants(titled, chunks, config(800));
    expect(chunks[0]?.contextPrefix).toBeUndefined();
    expect(chunks.slice(1).every((c) => c.contextPrefix === "Growing Tomatoes")).toBe(true);
    const untitled = doc(text, "text", { title: "doc.text" });
    expect((await createChunker(config(800)).chunk(untitled)).every((c) => !c.contextPrefix)).toBe(true);
  });

  test("a text that fits one chunk is not split for its context", async () => {
    const text = "Short note about tomatoes.";
    const chunks = await createChunker(config(30)).chunk(doc(text, "text", { title: "Tomato notes" }));
    expect(chunks.map(chunkBody)).toEqual([text]);
  });

  test("code: the file path where it fits, and the enclosing symbol of a piece that does not show it", async () => {
    const text = "def small(x):\n    return x + 1\n";
    const d = doc(text, "code", { language: "python", path: "/repo/src/calc/sums.py" });
    const chunks: Chunk[] = await createChunker(config(300)).chunk(d);
    checkInvariants(d, chunks, config(300));
    expect(chunks.map((c) => c.contextPrefix)).toEqual(["src/calc/sums.py"]);
    const context = documentContext(d);
    const piece = { start: 0, end: 5, text: "", metadata: { symbol: "Totals.accumulate" } };
    expect(context.at(piece)).toBe("src/calc/sums.py › Totals.accumulate");
  });
});
