/**
 * CJK segmentation for BM25, measured: builds an in-memory BM25 (k1 1.2, b 0.75,
 * the `english` analyzer, i.e. the production scoring of `Bm25Index`) over a
 * BEIR-layout corpus once per CJK segmentation (`Intl.Segmenter` words,
 * character bigrams, unigrams + bigrams) and prints nDCG@10, Recall@100, MRR@10,
 * indexing time (best of --repeat builds), query time and index size per variant,
 * then a paired per-query comparison of each variant with the best one.
 *
 * Usage: node --import tsx bench/bm25-cjk.ts [--dataset DIR] [--split dev] [--limit N] [--repeat 3]
 * The dataset defaults to ../shared/data/ir/cmrc2018_zh (split `dev`). Documents
 * are indexed as `title + blank line + text`, as `kl eval beir` ingests them.
 * On an English set (e.g. --dataset ../shared/data/ir/scifact --split test) all
 * variants score the same: they differ only on CJK characters.
 */
import { resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { loadBeir } from "../src/eval/beir.js";
import { mrrAtK, ndcgAtK, type Qrels, recallAtK } from "../src/eval/metrics.js";
import { MemoryBm25Index } from "../src/retrieve/bm25.js";
import {
  CJK_SEGMENTATIONS,
  type CjkSegmentation,
  DEFAULT_CJK_SEGMENTATION,
} from "../src/retrieve/tokenizer.js";

const { values } = parseArgs({
  options: {
    dataset: { type: "string", default: resolve(import.meta.dirname, "../../shared/data/ir/cmrc2018_zh") },
    split: { type: "string", default: "dev" },
    limit: { type: "string" },
    repeat: { type: "string", default: "3" },
  },
});
const line = (s: string): void => {
  process.stdout.write(`${s}\n`);
};

const data = loadBeir(values.dataset as string, values.split);
const judged = [...data.qrels.keys()].filter((q) => data.queries.has(q));
const queryIds = values.limit ? judged.slice(0, Number(values.limit)) : judged;
const texts = data.corpus.map((d) => (d.title ? `${d.title}\n\n${d.text}` : d.text));
const repeat = Math.max(1, Number(values.repeat));

interface Row {
  cjk: CjkSegmentation;
  ndcg: number[];
  recall: number;
  mrr: number;
  indexMs: number;
  queryMs: number;
  terms: number;
  tokens: number;
}

const mean = (xs: readonly number[]): number => xs.reduce((s, x) => s + x, 0) / (xs.length || 1);

const rows: Row[] = [];
for (const cjk of CJK_SEGMENTATIONS) {
  let index = new MemoryBm25Index({ analyzer: "english", tokenizeOptions: { cjk } });
  let indexMs = Number.POSITIVE_INFINITY;
  for (let r = 0; r < repeat; r++) {
    index = new MemoryBm25Index({ analyzer: "english", tokenizeOptions: { cjk } });
    const t0 = performance.now();
    for (const text of texts) index.add(text);
    indexMs = Math.min(indexMs, performance.now() - t0);
  }
  const ndcg: number[] = [];
  let recall = 0;
  let mrr = 0;
  const t1 = performance.now();
  for (const qid of queryIds) {
    const ranked = index
      .search(data.queries.get(qid) as string, 100)
      .map((h) => data.corpus[h.doc]?.id ?? "");
    const qrels = data.qrels.get(qid) as Qrels;
    ndcg.push(ndcgAtK(ranked, qrels, 10));
    recall += recallAtK(ranked, qrels, 100);
    mrr += mrrAtK(ranked, qrels, 10);
  }
  const queryMs = (performance.now() - t1) / (queryIds.length || 1);
  const n = queryIds.length || 1;
  const { terms, tokens } = index.stats();
  rows.push({ cjk, ndcg, recall: recall / n, mrr: mrr / n, indexMs, queryMs, terms, tokens });
}

line(
  `dataset ${data.name} (${values.split}): ${data.corpus.length} documents, ${queryIds.length} judged queries`,
);
line(`BM25 k1 1.2, b 0.75, english analyzer; default CJK segmentation: ${DEFAULT_CJK_SEGMENTATION}`);
line("variant           nDCG@10  Recall@100  MRR@10  index ms  ms/query  terms    tokens/doc");
for (const r of rows) {
  line(
    `${r.cjk.padEnd(16)}  ${mean(r.ndcg).toFixed(4)}  ${r.recall.toFixed(4).padStart(10)}  ${r.mrr.toFixed(4)}  ` +
      `${r.indexMs.toFixed(0).padStart(8)}  ${r.queryMs.toFixed(2).padStart(8)}  ${String(r.terms).padEnd(7)}  ` +
      `${(r.tokens / (data.corpus.length || 1)).toFixed(1)}`,
  );
}

// Paired comparison with the best variant: per-query nDCG@10 wins/losses and a paired t statistic.
const best = rows.reduce((a, b) => (mean(b.ndcg) > mean(a.ndcg) ? b : a));
for (const r of rows) {
  if (r === best) continue;
  const diffs = best.ndcg.map((x, i) => x - (r.ndcg[i] as number));
  const d = mean(diffs);
  const sd = Math.sqrt(diffs.reduce((s, x) => s + (x - d) ** 2, 0) / Math.max(1, diffs.length - 1));
  const t = sd > 0 ? d / (sd / Math.sqrt(diffs.length)) : 0;
  if (diffs.every((x) => x === 0)) {
    line(`${best.cjk} vs ${r.cjk}: identical per-query nDCG@10`);
    continue;
  }
  const wins = diffs.filter((x) => x > 1e-12).length;
  const losses = diffs.filter((x) => x < -1e-12).length;
  line(
    `${best.cjk} vs ${r.cjk}: ΔnDCG@10 ${d >= 0 ? "+" : ""}${d.toFixed(4)}, better on ${wins} queries, ` +
      `worse on ${losses}, paired t = ${t.toFixed(2)}`,
  );
}
line("reference BM25 run (../shared/README.md): cmrc2018_zh 0.983, xquad_zh 0.967, scifact 0.659 nDCG@10");
