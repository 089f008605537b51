/**
 * Page-level retrieval on real SEC filings (`../shared/data/ir/financebench_dev`: 24 PDFs,
 * 41 questions with their evidence pages), through `evaluatePages` (the code behind
 * `kl eval pages`): default KB settings and bundled model, every question searched over
 * all filings; prints page- and document-level hit@1/5/10 and MRR@10 per question type
 * for each mode.
 *
 * Usage: npm run bench:pdf [-- --modes hybrid_rerank,keyword] [--data-dir DIR] [--kb NAME] [--json]
 *
 * The data directory (default `$TMPDIR/kl-bench-pdf`, outside the repository) is kept,
 * so a re-run skips unchanged filings and takes embeddings of unchanged chunk texts from
 * the cache; the first run embeds ~4,000 chunks (about 10 minutes on 2 cores).
 */
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { parseRetrievalMode, type RetrievalMode } from "../src/config.js";
import { evaluatePages, formatPageReport } from "../src/eval/pages.js";
import { KnowledgeLayer } from "../src/knowledge-layer.js";

const { values } = parseArgs({
  options: {
    modes: { type: "string", default: "hybrid_rerank,keyword" },
    "data-dir": { type: "string", default: join(tmpdir(), "kl-bench-pdf") },
    kb: { type: "string" },
    json: { type: "boolean", default: false },
  },
});
const modes = values.modes.split(",").map((m) => {
  const mode = parseRetrievalMode(m.trim());
  if (!mode) throw new Error(`unknown mode ${m}`);
  return mode;
}) as RetrievalMode[];
const dir = resolve(import.meta.dirname, "..", "..", "shared", "data", "ir", "financebench_dev");
const kl = KnowledgeLayer.open({ dataDir: values["data-dir"], cache: { type: "none" } });
try {
  const report = await evaluatePages(kl, dir, { modes, kb: values.kb });
  if (values.json) console.log(JSON.stringify(report, null, 2));
  else {
    const ing = report.ingest;
    console.log(
      `ingest: ${ing.added + ing.updated} filings (re)indexed, ${ing.unchanged} unchanged, ${ing.chunks} chunks, ` +
        `${ing.embedded.computed} embedded, ${ing.embedded.cached} from cache, ${(ing.durationMs / 1000).toFixed(0)} s`,
    );
    console.log(formatPageReport(report));
  }
} finally {
  await kl.close();
}
