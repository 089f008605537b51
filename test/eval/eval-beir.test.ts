/**
 * `evaluateBeir` on a BEIR folder built here: exact metrics for a tiny judged
 * corpus through the real ingest and search path, the split fallback, and the
 * latency fields.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { defaultSplit, evaluateBeir, percentile } from "../../src/eval/beir.js";
import { KnowledgeLayer } from "../../src/knowledge-layer.js";

const dir = mkdtempSync(join(tmpdir(), "kl-beir-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function writeSet(name: string, split: string): string {
  const root = join(dir, name);
  mkdirSync(join(root, "qrels"), { recursive: true });
  const corpus = [
    { _id: "d1", title: "Roses", text: "Prune roses in late winter." },
    { _id: "d2", title: "Tomatoes", text: "Stake tomatoes and water them often." },
    { _id: "d3", title: "Ferns", text: "Ferns like shade and moist soil." },
  ];
  writeFileSync(join(root, "corpus.jsonl"), corpus.map((d) => JSON.stringify(d)).join("\n"));
  const queries = [
    { _id: "q1", text: "when to prune roses" },
    { _id: "q2", text: "shade plants moist soil" },
    { _id: "q3", text: "unjudged query" },
  ];
  writeFileSync(join(root, "queries.jsonl"), queries.map((q) => JSON.stringify(q)).join("\n"));
  writeFileSync(
    join(root, "qrels", `${split}.tsv`),
    "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td3\t1\nq2\td2\t1\n",
  );
  return root;
}

describe("evaluateBeir", () => {
  it("scores a tiny judged corpus exactly (keyword) and reports latency percentiles", async () => {
    const set = writeSet("garden", "test");
    const kl = KnowledgeLayer.open({ dataDir: join(dir, "data") });
    try {
      const report = await evaluateBeir(kl, set, { modes: ["keyword"] });
      expect(report.documents).toBe(3);
      const [r] = report.results;
      expect(r?.queries).toBe(2);
      // q1: d1 first → nDCG 1, MRR 1. q2: d3 first (shade, moist, soil), d2 not retrieved
      // → DCG 1, IDCG 1 + 1/log2(3) → nDCG 1/1.6309; recall 1/2.
      expect(r?.ndcg10).toBeCloseTo((1 + 1 / (1 + 1 / Math.log2(3))) / 2, 6);
      expect(r?.recall100).toBeCloseTo((1 + 0.5) / 2, 6);
      expect(r?.mrr10).toBeCloseTo(1, 6);
      expect(r?.latency.p95).toBeGreaterThanOrEqual(r?.latency.p50 ?? Number.NaN);
      expect(r?.latency.warmP50).toBeGreaterThan(0);
    } finally {
      kl.close();
    }
  });

  it("falls back to the dev split when there is no test split", () => {
    const set = writeSet("devonly", "dev");
    expect(defaultSplit(set)).toBe("dev");
    expect(percentile([5, 1, 3, 2, 4], 0.5)).toBe(3);
    expect(percentile([5, 1, 3, 2, 4], 0.95)).toBe(5);
    expect(percentile([], 0.5)).toBe(0);
  });
});
