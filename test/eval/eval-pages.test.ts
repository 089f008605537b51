/**
 * `kl eval pages`: the page-level benchmark (FinanceBench layout) — dataset loading,
 * hit ranks at page and document level, scores per question type, and a real run
 * over two small filings through ingest and keyword search (with the document
 * profile lifting the filing a question names).
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, test } from "vitest";
import {
  evaluatePages,
  groupScores,
  hitRanks,
  hitScores,
  loadPageDataset,
  parsePageId,
} from "../../src/eval/pages.js";
import { KnowledgeLayer, type SearchResult } from "../../src/knowledge-layer.js";
import { cliRunner, tempDir } from "../helpers/helpers.js";
import { buildPdf } from "../helpers/pdf-fixtures.js";

const result = (path: string, page?: number, pageEnd?: number): SearchResult =>
  ({ source: { uri: path, path, type: "pdf", page, pageEnd } }) as unknown as SearchResult;

describe("scoring", () => {
  test("parsePageId reads <file>#page=N (1-based)", () => {
    expect(parsePageId("3M_2018_10K.pdf#page=60")).toEqual({ file: "3M_2018_10K.pdf", page: 60 });
    expect(parsePageId("x.pdf#page=0")).toBeUndefined();
    expect(parsePageId("x.pdf")).toBeUndefined();
  });

  test("hitRanks: first result covering an evidence page, first result from the evidence file", () => {
    const evidence = new Map([["a.pdf", new Set([5])]]);
    const results = [result("/d/b.pdf", 5), result("/d/a.pdf", 1, 2), result("/d/a.pdf", 4, 6)];
    expect(hitRanks(results, evidence)).toEqual({ pageRank: 3, documentRank: 2 });
    expect(hitRanks([result("/d/b.pdf", 5)], evidence)).toEqual({ pageRank: 0, documentRank: 0 });
  });

  test("hitScores and groupScores: hit@1/5/10 and MRR@10, overall and per type", () => {
    expect(hitScores([1, 3, 0, 7])).toEqual({
      hit1: 0.25,
      hit5: 0.5,
      hit10: 0.75,
      mrr: (1 + 1 / 3 + 1 / 7) / 4,
    });
    const groups = groupScores([
      { id: "q1", type: "b", pageRank: 1, documentRank: 1, top: [] },
      { id: "q2", type: "a", pageRank: 0, documentRank: 2, top: [] },
    ]);
    expect(groups.map((g) => [g.group, g.queries, g.page.hit1, g.document.hit5])).toEqual([
      ["all", 2, 0.5, 1],
      ["a", 1, 0, 1],
      ["b", 1, 1, 1],
    ]);
  });
});

/** Two filings of two companies, each with a balance sheet on page 2. */
function makeDataset(root: string): void {
  mkdirSync(join(root, "pdfs"), { recursive: true });
  mkdirSync(join(root, "qrels"), { recursive: true });
  const filing = (company: string, year: number, cash: number): Buffer =>
    buildPdf([
      [
        "FORM 10-K",
        `For the fiscal year ended December 31, ${year}`,
        company,
        "(Exact name of registrant as specified in its charter)",
        `${company} makes garden tools and sells them in many markets. Its liabilities and assets are discussed below.`,
      ],
      [
        company,
        "CONSOLIDATED BALANCE SHEETS",
        "(in thousands)",
        "",
        `${year} ${year - 1}`,
        `Cash and cash equivalents $ ${cash} $ ${cash - 100}`,
        `Accounts receivable ${cash + 10} ${cash + 20}`,
        "Total current assets 9,000 8,000",
        "Total current liabilities 5,000 4,000",
      ],
      [
        "Risk factors",
        "Current liabilities and current assets are risks when markets change, and so are other current matters.",
      ],
    ]);
  writeFileSync(join(root, "pdfs", "ACME_2017_10K.pdf"), filing("Acme Tools, Inc.", 2017, 1200));
  writeFileSync(join(root, "pdfs", "BOLT_2019_10K.pdf"), filing("Bolt Gardening Corporation", 2019, 3400));
  writeFileSync(
    join(root, "queries.jsonl"),
    [
      {
        _id: "q1",
        text: "What were Acme's total current liabilities at the end of FY2017 per the balance sheet?",
        metadata: { question_type: "metrics" },
      },
      {
        _id: "q2",
        text: "What were Bolt's total current liabilities in FY2019 according to the balance sheet?",
        metadata: { question_type: "metrics" },
      },
      { _id: "q3", text: "What does Acme make?", metadata: { question_type: "novel" } },
    ]
      .map((q) => JSON.stringify(q))
      .join("\n"),
  );
  writeFileSync(
    join(root, "qrels", "test.tsv"),
    "query-id\tcorpus-id\tscore\nq1\tACME_2017_10K.pdf#page=2\t1\nq2\tBOLT_2019_10K.pdf#page=2\t1\nq3\tACME_2017_10K.pdf#page=1\t1\n",
  );
}

describe("a run over two filings", () => {
  const { dir, cleanup } = tempDir("kl-eval-pages-");
  afterAll(cleanup);
  const data = join(dir, "financebench_tiny");
  makeDataset(data);

  test("loadPageDataset reads the layout and names what is wrong", () => {
    const loaded = loadPageDataset(data);
    expect(loaded.documents).toEqual(["ACME_2017_10K.pdf", "BOLT_2019_10K.pdf"]);
    expect(
      loaded.queries.map((q) => [q.id, q.type, [...(q.evidence.get("ACME_2017_10K.pdf") ?? [])]]),
    ).toEqual([
      ["q1", "metrics", [2]],
      ["q2", "metrics", []],
      ["q3", "novel", [1]],
    ]);
    expect(() => loadPageDataset(join(dir, "missing"))).toThrow(/pdfs: not found/);
    const bad = join(dir, "bad");
    makeDataset(bad);
    writeFileSync(join(bad, "qrels", "test.tsv"), "query-id\tcorpus-id\tscore\nq1\tOTHER.pdf#page=2\t1\n");
    expect(() => loadPageDataset(bad)).toThrow(/OTHER\.pdf is not in/);
  });

  test("keyword search finds each question's page; the named company's filing comes first", async () => {
    const kl = KnowledgeLayer.open({ dataDir: join(dir, "kl"), cache: { type: "none" } });
    try {
      const report = await evaluatePages(kl, data, { modes: ["keyword"] });
      expect(report).toMatchObject({ dataset: "financebench_tiny", documents: 2, queries: 3 });
      expect(report.ingest.chunks).toBeGreaterThan(0);
      const [mode] = report.results;
      expect(mode?.perQuery.map((q) => [q.id, q.pageRank, q.documentRank])).toEqual([
        ["q1", 1, 1],
        ["q2", 1, 1],
        ["q3", 1, 1],
      ]);
      expect(mode?.groups[0]).toMatchObject({
        group: "all",
        queries: 3,
        page: { hit1: 1 },
        document: { hit5: 1 },
      });
      // Vector modes need vectors.
      await expect(evaluatePages(kl, data, { modes: ["hybrid"], embed: false })).rejects.toThrow(
        /needs vectors/,
      );
    } finally {
      await kl.close();
    }
  });

  test("kl eval pages --keyword-only --json prints the report; --keyword-only with --mode hybrid is a usage error", () => {
    const kl = cliRunner(dir, { ...process.env, KL_HOME: join(dir, "unused") });
    const run = kl("--data-dir", join(dir, "cli"), "eval", "pages", data, "--keyword-only", "--json");
    expect(run.code).toBe(0);
    const report = JSON.parse(run.stdout);
    expect(report.results[0].mode).toBe("keyword");
    expect(report.results[0].groups[0].page.hit10).toBe(1);
    const bad = kl("eval", "pages", data, "--keyword-only", "--mode", "hybrid");
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--keyword-only/);
  });
});
