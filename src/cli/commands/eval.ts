/**
 * `kl eval`: retrieval quality on a BEIR dataset (`beir`) or on a folder of PDFs with
 * page-level qrels (`pages`).
 */

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Command, Option } from "commander";
import type { RetrievalMode } from "../../config.js";
import { evaluateBeir } from "../../eval/beir.js";
import { evaluatePages, formatPageReport } from "../../eval/pages.js";
import { KnowledgeLayer } from "../../knowledge-layer.js";
import { ANALYZERS, type Analyzer } from "../../retrieve/tokenizer.js";
import { withKl } from "../data-dir.js";
import { ProgressReporter } from "../format.js";
import { int, parseModes } from "../options.js";

/** Registers `kl eval beir|pages`. */
export function registerEvalCommands(program: Command): void {
  const evalCmd = program.command("eval").description("evaluate retrieval quality");
  evalCmd
    .command("beir")
    .argument("<dir>", "BEIR-layout folder: corpus.jsonl, queries.jsonl, qrels/test.tsv")
    .description("run a BEIR benchmark through ingest and search; print nDCG@10, Recall@100, MRR@10 per mode")
    .option("--mode <modes>", "comma-separated modes", parseModes, [
      "keyword",
      "vector_only",
      "hybrid",
      "hybrid_rerank",
    ] as RetrievalMode[])
    .option("--kb <name>", "knowledge base to use (default beir-<dataset>)")
    .option("--chunk-size <chars>", "chunk size of a newly created KB (default 10000)", int("--chunk-size"))
    .addOption(
      new Option("--analyzer <name>", "BM25 analyzer of a newly created KB (default english)").choices([
        ...ANALYZERS,
      ]),
    )
    .option("--limit <n>", "evaluate only the first n queries", int("--limit"))
    .option("--split <name>", "qrels split (default test, else dev)")
    .option("--json", "print JSON")
    .action(async (dir: string, o, command: Command) => {
      await withKl(
        command,
        async (kl) => {
          const progress = ProgressReporter.forStderr(Boolean(o.json));
          const report = await evaluateBeir(kl, dir, {
            split: o.split,
            modes: o.mode,
            kb: o.kb,
            chunkSize: o.chunkSize,
            limit: o.limit,
            analyzer: o.analyzer as Analyzer | undefined,
            onProgress: (e) => progress.update(e),
          });
          progress.stop();
          if (o.json) {
            console.log(JSON.stringify(report, null, 2));
            return;
          }
          const ing = report.ingest[0];
          if (ing) {
            console.log(
              `ingest: ${report.documents} documents, ${ing.added + ing.updated} (re)indexed, ${ing.unchanged} unchanged, ` +
                `${ing.embedded.computed} embedded, ${ing.embedded.cached} from cache, ${(ing.durationMs / 1000).toFixed(1)} s`,
            );
          }
          console.log(`dataset ${report.dataset} (kb ${report.kb})`);
          console.log(
            "mode          queries  nDCG@10  Recall@100  MRR@10  ms/query  p50 ms  p95 ms  cached p50/p95 ms",
          );
          for (const r of report.results) {
            console.log(
              `${r.mode.padEnd(13)} ${String(r.queries).padStart(7)}  ${r.ndcg10.toFixed(4)}  ${r.recall100.toFixed(4).padStart(10)}  ${r.mrr10.toFixed(4)}  ${r.msPerQuery.toFixed(1).padStart(8)}  ${r.latency.p50.toFixed(1).padStart(6)}  ${r.latency.p95.toFixed(1).padStart(6)}  ${r.latency.warmP50.toFixed(2)}/${r.latency.warmP95.toFixed(2)}`,
            );
          }
        },
        { create: true },
      );
    });

  evalCmd
    .command("pages")
    .argument("<dir>", "page benchmark folder: pdfs/*.pdf, queries.jsonl, qrels/test.tsv (<file>.pdf#page=N)")
    .description(
      "ingest a folder of PDFs and score page- and document-level hit@1/5/10 and MRR per question type",
    )
    .option("--mode <modes>", "comma-separated modes (default: the KB's, hybrid_rerank)", parseModes)
    .option("--keyword-only", "ingest without vectors and evaluate keyword search only")
    .option("--kb <name>", "knowledge base to use (default pages-<dataset>)")
    .option("--limit <n>", "evaluate only the first n questions", int("--limit"))
    .option("--split <name>", "qrels split (default test)")
    .option("--json", "print JSON (with each question's ranks and top results)")
    .action(async (dir: string, o, command: Command) => {
      const modes = o.keywordOnly ? ["keyword" as RetrievalMode] : (o.mode as RetrievalMode[] | undefined);
      if (o.keywordOnly && o.mode && (o.mode as RetrievalMode[]).some((m) => m !== "keyword"))
        command.error("kl eval pages: --keyword-only evaluates keyword search only; drop --mode", {
          exitCode: 2,
        });
      // Without --data-dir the filings go to a temporary data directory, removed afterwards.
      const given = (command.optsWithGlobals() as { dataDir?: string }).dataDir;
      const dataDir = given ?? mkdtempSync(join(tmpdir(), "kl-eval-pages-"));
      const kl = KnowledgeLayer.open({ dataDir, create: true });
      try {
        const progress = ProgressReporter.forStderr(Boolean(o.json));
        const report = await evaluatePages(kl, dir, {
          modes,
          embed: o.keywordOnly ? false : undefined,
          kb: o.kb,
          limit: o.limit,
          split: o.split,
          onProgress: (e) => progress.update(e),
        });
        progress.stop();
        if (o.json) {
          console.log(JSON.stringify(report, null, 2));
          return;
        }
        const ing = report.ingest;
        console.log(
          `ingest: ${ing.files} files, ${ing.added + ing.updated} (re)indexed, ${ing.unchanged} unchanged, ${ing.chunks} chunks, ` +
            `${ing.embedded.computed} embedded, ${ing.embedded.cached} from cache, ${(ing.durationMs / 1000).toFixed(1)} s`,
        );
        console.log(formatPageReport(report));
      } finally {
        await kl.close();
        if (given === undefined) rmSync(dataDir, { recursive: true, force: true });
      }
    });
}
