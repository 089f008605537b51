/**
 * Retrieval quality of the bundled embedder's variants, in one run: nDCG@10
 * (and Recall@100) of keyword, vector_only and hybrid search on SciFact,
 * Cranfield and XQuAD-en through the real ingest and search path
 * (`evaluateBeir`, whole documents as one chunk each, as bench:retrieval does).
 *
 * Usage: npm run bench:embed-quality [-- --sets scifact,cranfield,xquad_en]
 *          [--variants mean,truncate] [--limit N] [--data-dir DIR]
 *
 * A variant is a bundled embedding config: `mean` (the default: 128-token
 * windows averaged), `truncate` (first 128-token window only), `tfjs` (the
 * TF.js reference runtime, same vectors as `mean`), `int8` and `int8-truncate`
 * (model `use-lite-int8`), `static` (model `use-lite-static`, the distilled
 * table) and `mix` (model `use-lite-mix`: int8 first window + table). Each variant gets its own
 * data directory under DIR (default a fresh temporary folder, removed at the
 * end), since the embedding cache is keyed by model id and the variants share one.
 * Ingest seconds are printed too (cold embedding cache).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import type { BundledConfig } from "../src/embed/config.js";
import { evaluateBeir } from "../src/eval/beir.js";
import { KnowledgeLayer } from "../src/knowledge-layer.js";

const { values } = parseArgs({
  options: {
    sets: { type: "string", default: "scifact,cranfield,xquad_en" },
    variants: { type: "string", default: "mean,truncate" },
    limit: { type: "string" },
    "data-dir": { type: "string" },
  },
});
const VARIANTS: Record<string, BundledConfig> = {
  mean: { provider: "bundled", model: "use-lite" },
  truncate: { provider: "bundled", model: "use-lite", longText: "truncate" },
  tfjs: { provider: "bundled", model: "use-lite", runtime: "tfjs" },
  int8: { provider: "bundled", model: "use-lite-int8" },
  "int8-truncate": { provider: "bundled", model: "use-lite-int8", longText: "truncate" },
  static: { provider: "bundled", model: "use-lite-static" },
  mix: { provider: "bundled", model: "use-lite-mix" },
};
const IR = resolve(import.meta.dirname, "..", "..", "shared", "data", "ir");
const root = values["data-dir"] ?? mkdtempSync(join(tmpdir(), "kl-bench-embed-quality-"));
const rows: string[] = [];
try {
  for (const variant of String(values.variants).split(",")) {
    const embedding = VARIANTS[variant];
    if (!embedding) throw new Error(`unknown variant ${variant}; use ${Object.keys(VARIANTS).join(", ")}`);
    const kl = KnowledgeLayer.open({ dataDir: join(root, variant) });
    try {
      for (const set of String(values.sets).split(",")) {
        const kb = `q-${set}`;
        if (!kl.catalog.getKb(kb)) {
          await kl.createKb(kb, { chunking: { strategy: "semantic", chunkSize: 10_000 }, embedding });
        }
        process.stderr.write(`${variant} ${set}…\n`);
        const report = await evaluateBeir(kl, join(IR, set), {
          kb,
          modes: ["keyword", "vector_only", "hybrid"],
          limit: values.limit ? Number(values.limit) : undefined,
        });
        const seconds = (report.ingest[0]?.durationMs ?? 0) / 1000;
        for (const r of report.results) {
          rows.push(
            `| ${set} | ${variant} | ${r.mode} | ${r.ndcg10.toFixed(4)} | ${r.recall100.toFixed(4)} | ${r.queries} | ${seconds.toFixed(1)} |`,
          );
        }
      }
    } finally {
      kl.close();
    }
  }
} finally {
  if (values["data-dir"] === undefined) rmSync(root, { recursive: true, force: true });
}
console.log("| set | variant | mode | nDCG@10 | Recall@100 | queries | ingest s (cold) |");
console.log("|---|---|---|---|---|---|---|");
for (const row of rows) console.log(row);
