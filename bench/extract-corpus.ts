/**
 * Extraction corpus run: ingests every file under `../shared/data/docs` (or the
 * given folders) through the real ingest path — discover, extract, chunk, store,
 * BM25 — without embedding, into a throwaway data directory, and prints what
 * happened: files, documents per type, warnings, errors by reason, time.
 *
 * Usage: npm run bench:extract [-- DIR...] [--json]
 *
 * The test suite (test/extract/extract-corpus.test.ts) makes the same run and asserts on
 * it; this script is for reading the figures.
 */
import { mkdtempSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import { parseArgs } from "node:util";
import { KnowledgeLayer } from "../src/knowledge-layer.js";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { json: { type: "boolean", default: false } },
});
const root = realpathSync(resolve(import.meta.dirname, "..", "..", "shared", "data", "docs"));
const paths = positionals.length > 0 ? positionals.map((p) => resolve(p)) : [root];

/** The reason without file-specific detail (numbers, quoted names), to group errors. */
function reasonClass(reason: string): string {
  return reason
    .replace(/\d+(\.\d+)?( ?[KMG]i?B)?/g, "N")
    .replace(/"[^"]*"/g, '"…"')
    .slice(0, 90);
}

const dataDir = mkdtempSync(join(tmpdir(), "kl-extract-corpus-"));
const kl = KnowledgeLayer.open({ dataDir });
try {
  const rss0 = process.memoryUsage().rss;
  const started = performance.now();
  const summary = await kl.ingest(paths, { embed: false });
  const seconds = (performance.now() - started) / 1000;
  const counts = await kl.counts("default");
  const errorsByReason: Record<string, number> = {};
  for (const e of summary.errors)
    errorsByReason[reasonClass(e.reason)] = (errorsByReason[reasonClass(e.reason)] ?? 0) + 1;
  const warningsByReason: Record<string, number> = {};
  for (const w of summary.warnings)
    warningsByReason[reasonClass(w.reason)] = (warningsByReason[reasonClass(w.reason)] ?? 0) + 1;
  const skippedByReason: Record<string, number> = {};
  for (const s of summary.skipped) skippedByReason[s.reason] = (skippedByReason[s.reason] ?? 0) + 1;
  const report = {
    paths,
    sources: summary.files,
    ok: summary.added + summary.updated + summary.unchanged,
    failed: summary.errors.length,
    skipped: summary.skipped.length,
    documents: counts.documents,
    documentsByType: counts.documentsByType,
    chunks: counts.chunks,
    warnings: summary.warnings.length,
    warningsByReason,
    errorsByReason,
    skippedByReason,
    seconds: Number(seconds.toFixed(1)),
    peakRssMiB: Math.round(Math.max(rss0, process.memoryUsage().rss) / 1024 / 1024),
  };
  if (values.json) {
    console.log(
      JSON.stringify({ ...report, errors: summary.errors, warningList: summary.warnings }, null, 2),
    );
  } else {
    const rel = (p: string): string => relative(root, p) || p;
    console.log(
      `sources ${report.sources}: ${report.ok} ok, ${report.failed} failed; ${report.skipped} files skipped`,
    );
    console.log(
      `documents ${report.documents} (${Object.entries(report.documentsByType)
        .map(([t, n]) => `${t} ${n}`)
        .join(", ")}), chunks ${report.chunks}`,
    );
    console.log(`time ${report.seconds} s, rss ${report.peakRssMiB} MiB`);
    console.log(`\nerrors by reason (${report.failed}):`);
    for (const [r, n] of Object.entries(errorsByReason).sort((a, b) => b[1] - a[1]))
      console.log(`  ${String(n).padStart(4)}  ${r}`);
    for (const e of summary.errors) console.log(`        ${rel(e.path)}: ${e.reason}`);
    console.log(`\nwarnings by reason (${report.warnings}):`);
    for (const [r, n] of Object.entries(warningsByReason).sort((a, b) => b[1] - a[1]))
      console.log(`  ${String(n).padStart(4)}  ${r}`);
    console.log(`\nskipped by reason (${report.skipped}):`);
    for (const [r, n] of Object.entries(skippedByReason).sort((a, b) => b[1] - a[1]))
      console.log(`  ${String(n).padStart(4)}  ${r}`);
  }
} finally {
  kl.close();
  rmSync(dataDir, { recursive: true, force: true });
}
