/**
 * Issue 15's goal in one run: the bundled default embedder's speed through the
 * `kl ingest` path and its retrieval quality, beside the TF.js path it replaced
 * and the previous default, each measured in the same run.
 *
 * Usage: npm run bench:embed-goal [-- --routes reference,use-lite,mix]
 *          [--sets scifact,cranfield,xquad_en] [--queries 100] [--reference-quality]
 *          [--skip-quality] [--json]
 *
 * Routes (bundled provider configs):
 * - `reference`: `use-lite` on the TF.js wasm runtime, every 128-token window
 *   averaged, 2 worker threads — the path before issue 15 ("today's throughput").
 * - `use-lite`: the same vectors on onnxruntime-node (the default until `use-lite-mix`).
 * - `mix`: `use-lite-mix`, the default now (`use-lite-int8` on the first window
 *   joined with the table distilled from USE lite).
 * - `int8`, `static`: `use-lite-int8` (all windows) and `use-lite-static`, for context.
 *
 * For each route, in a child process of its own (cold model load and worker
 * start, its own peak RSS):
 * 1. **Speed**: the whole SciFact corpus (5,183 documents, `title + "\n\n" +
 *    text`) through `KnowledgeLayer.ingestDocuments` into a fresh data directory
 *    (empty embedding cache) with the default KB settings but the route's
 *    embedding: wall seconds, documents/s, chunks/s, and chunks/s of
 *    1,500-character chunks (characters/s ÷ 1,500; SciFact's default chunks
 *    average ~1,000 characters). Peak RSS is the child's maximum resident set
 *    after the ingest.
 * 2. **Query embedding**: `--queries` distinct SciFact queries embedded one at a
 *    time through the KB's query embedder (the cached path a search takes, each
 *    a cache miss); the first (which loads the calling thread's model) is
 *    reported apart, p50/p95 over the rest.
 * 3. **Quality**: `evaluateBeir` (whole documents as one chunk, as
 *    `bench:retrieval` and `bench:embed-quality` do) on each set of `--sets`,
 *    nDCG@10 of keyword, vector_only and hybrid (the default fusion), in a
 *    second fresh data directory. The `reference` route gives the same vectors
 *    as `use-lite` (cosine 1.000000, `npm run bench:embed`), so its quality is
 *    only measured with `--reference-quality`.
 *
 * The goal lines compare the default (`mix`) with the issue's targets: SciFact
 * cold ingest ≤ 60 s, ≥ 8× the reference's throughput, ≥ 100 chunks/s of
 * 1,500-character chunks, query p50 ≤ 5 ms, ingest RSS ≤ 1.5 GB, hybrid nDCG@10
 * on each set ≥ the previous default's in this run.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import type { BundledConfig } from "../src/embed/config.js";

const { values: args } = parseArgs({
  options: {
    routes: { type: "string", default: "reference,use-lite,mix" },
    sets: { type: "string", default: "scifact,cranfield,xquad_en" },
    queries: { type: "string", default: "100" },
    "reference-quality": { type: "boolean", default: false },
    "skip-quality": { type: "boolean", default: false },
    json: { type: "boolean", default: false },
    child: { type: "string" },
  },
});

const IR = resolve(import.meta.dirname, "..", "..", "shared", "data", "ir");
const ROUTES: Record<string, BundledConfig & { model: string }> = {
  reference: { provider: "bundled", model: "use-lite", runtime: "tfjs" },
  "use-lite": { provider: "bundled", model: "use-lite" },
  mix: { provider: "bundled", model: "use-lite-mix" },
  int8: { provider: "bundled", model: "use-lite-int8" },
  static: { provider: "bundled", model: "use-lite-static" },
};
const QUALITY_MODES = ["keyword", "vector_only", "hybrid"] as const;

/** What a child reports for its route. */
interface RouteResult {
  route: string;
  model: string;
  docs: number;
  chunks: number;
  chars: number;
  seconds: number;
  peakRssMb: number;
  firstQueryMs: number;
  queryP50Ms: number;
  queryP95Ms: number;
  /** set → mode → nDCG@10. */
  quality: Record<string, Record<string, number>>;
  /** set → cold ingest seconds of the quality KB. */
  qualityIngestSeconds: Record<string, number>;
}

function readJsonl(file: string): Record<string, unknown>[] {
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? Number.NaN;
}

async function runChild(route: string): Promise<void> {
  const embedding = ROUTES[route];
  if (!embedding) throw new Error(`unknown route ${route}; use ${Object.keys(ROUTES).join(", ")}`);
  const { KnowledgeLayer } = await import("../src/knowledge-layer.js");
  const { evaluateBeir } = await import("../src/eval/beir.js");
  const corpus = readJsonl(join(IR, "scifact", "corpus.jsonl")).map((d) => {
    const title = String(d.title ?? "");
    const text = String(d.text ?? "");
    return { id: String(d._id), text: title ? `${title}\n\n${text}` : text, title };
  });
  const queries = readJsonl(join(IR, "scifact", "queries.jsonl"))
    .slice(0, Number(args.queries) + 1)
    .map((q) => String(q.text ?? ""));

  // 1. Speed: the whole corpus, default settings, cold cache.
  const speedDir = mkdtempSync(join(tmpdir(), "kl-bench-embed-goal-"));
  const kl = KnowledgeLayer.open({ dataDir: speedDir });
  let result: RouteResult;
  try {
    const kb = await kl.createKb("scifact", { embedding });
    const start = performance.now();
    let lastLog = start;
    const summary = await kl.ingestDocuments(
      corpus.map((d) => ({
        uri: `beir:scifact/${d.id}`,
        text: d.text,
        metadata: { path: `beir:scifact/${d.id}`, type: "text", title: d.title || d.id },
      })),
      {
        kb: "scifact",
        onProgress: (event) => {
          const now = performance.now();
          if (now - lastLog > 10_000) {
            lastLog = now;
            process.stderr.write(
              `  ${route}: ${((now - start) / 1000).toFixed(0)} s ${JSON.stringify(event)}\n`,
            );
          }
        },
      },
    );
    const seconds = (performance.now() - start) / 1000;
    if (summary.errors.length > 0) throw new Error(`ingest errors: ${JSON.stringify(summary.errors[0])}`);
    const peakRssMb = process.resourceUsage().maxRSS / 1024;
    const chars = corpus.reduce((n, d) => n + d.text.length, 0);

    // 2. Query embedding through the KB's cached query embedder (each query a cache miss).
    const embedder = kl.embedder(kb.config, "query");
    const latencies: number[] = [];
    for (const q of queries) {
      const t = performance.now();
      await embedder.embedQuery(q);
      latencies.push(performance.now() - t);
    }
    const warm = latencies.slice(1);
    result = {
      route,
      model: embedding.model,
      docs: corpus.length,
      chunks: summary.chunks,
      chars,
      seconds,
      peakRssMb,
      firstQueryMs: latencies[0] ?? Number.NaN,
      queryP50Ms: percentile(warm, 0.5),
      queryP95Ms: percentile(warm, 0.95),
      quality: {},
      qualityIngestSeconds: {},
    };
  } finally {
    await kl.close();
    rmSync(speedDir, { recursive: true, force: true });
  }

  // 3. Quality: whole documents as one chunk, a fresh data directory (cold cache).
  const measureQuality = !args["skip-quality"] && (route !== "reference" || args["reference-quality"]);
  if (measureQuality) {
    const qualityDir = mkdtempSync(join(tmpdir(), "kl-bench-embed-goal-q-"));
    const kq = KnowledgeLayer.open({ dataDir: qualityDir });
    try {
      for (const set of args.sets.split(",")) {
        const kb = `q-${set}`;
        await kq.createKb(kb, { chunking: { strategy: "semantic", chunkSize: 10_000 }, embedding });
        process.stderr.write(`  ${route}: quality ${set}…\n`);
        const report = await evaluateBeir(kq, join(IR, set), { kb, modes: [...QUALITY_MODES] });
        result.qualityIngestSeconds[set] = (report.ingest[0]?.durationMs ?? 0) / 1000;
        result.quality[set] = Object.fromEntries(report.results.map((r) => [r.mode, r.ndcg10]));
      }
    } finally {
      await kq.close();
      rmSync(qualityDir, { recursive: true, force: true });
    }
  }
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

async function runParent(): Promise<void> {
  const results: RouteResult[] = [];
  const t0 = performance.now();
  for (const route of args.routes.split(",")) {
    process.stderr.write(`[${((performance.now() - t0) / 1000).toFixed(0)} s] route ${route}\n`);
    const childArgs = ["--import", "tsx", fileURLToPath(import.meta.url), "--child", route];
    childArgs.push("--sets", args.sets, "--queries", args.queries);
    if (args["reference-quality"]) childArgs.push("--reference-quality");
    if (args["skip-quality"]) childArgs.push("--skip-quality");
    const child = spawnSync(process.execPath, childArgs, {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "inherit"],
      maxBuffer: 1 << 26,
    });
    const line = child.stdout.trim().split("\n").pop() ?? "";
    if (child.status !== 0 || !line.startsWith("{")) {
      console.log(`${route}: failed (exit ${child.status})`);
      continue;
    }
    results.push(JSON.parse(line) as RouteResult);
  }
  const out: string[] = [];
  const say = (s: string): void => {
    out.push(s);
  };
  const ref = results.find((r) => r.route === "reference");
  const rate = (r: RouteResult): number => r.chunks / r.seconds;
  say(
    `SciFact cold ingest through the kl ingest path (${results[0]?.docs ?? 0} documents, default KB settings, empty embedding cache), ${new Date().toISOString().slice(0, 10)}:`,
  );
  say("");
  say(
    "| route | model | seconds | docs/s | chunks/s | 1,500-char chunks/s | × reference | query p50 / p95 ms (first) | peak RSS MB |",
  );
  say("|---|---|---|---|---|---|---|---|---|");
  for (const r of results) {
    say(
      `| ${r.route} | ${r.model} | ${r.seconds.toFixed(1)} | ${(r.docs / r.seconds).toFixed(1)} | ${rate(r).toFixed(1)} (${r.chunks} chunks) | ${(r.chars / 1500 / r.seconds).toFixed(1)} | ${ref ? (rate(r) / rate(ref)).toFixed(2) : "-"} | ${r.queryP50Ms.toFixed(2)} / ${r.queryP95Ms.toFixed(2)} (${r.firstQueryMs.toFixed(0)}) | ${r.peakRssMb.toFixed(0)} |`,
    );
  }
  const sets = args.sets.split(",");
  const withQuality = results.filter((r) => Object.keys(r.quality).length > 0);
  if (withQuality.length > 0) {
    say("");
    say("Quality, nDCG@10 keyword / vector_only / hybrid (whole documents, same run):");
    say("");
    say(`| route | ${sets.join(" | ")} |`);
    say(`|---|${sets.map(() => "---|").join("")}`);
    for (const r of withQuality) {
      const cells = sets.map((s) => {
        const q = r.quality[s];
        return q
          ? `${QUALITY_MODES.map((m) => (q[m] ?? Number.NaN).toFixed(4)).join(" / ")} (ingest ${(r.qualityIngestSeconds[s] ?? 0).toFixed(0)} s)`
          : "-";
      });
      say(`| ${r.route} | ${cells.join(" | ")} |`);
    }
  }
  const mix = results.find((r) => r.route === "mix");
  const previous = results.find((r) => r.route === "use-lite");
  if (mix) {
    say("");
    say("Goal (issue 15), the default `use-lite-mix`:");
    const check = (ok: boolean, text: string): void => say(`- ${ok ? "met" : "NOT met"}: ${text}`);
    check(mix.seconds <= 60, `SciFact cold ingest ${mix.seconds.toFixed(1)} s (≤ 60 s)`);
    if (ref) check(rate(mix) / rate(ref) >= 8, `${(rate(mix) / rate(ref)).toFixed(1)}× the reference (≥ 8×)`);
    check(
      mix.chars / 1500 / mix.seconds >= 100,
      `${(mix.chars / 1500 / mix.seconds).toFixed(0)} chunks/s of 1,500 characters (≥ 100)`,
    );
    check(mix.queryP50Ms <= 5, `query embedding p50 ${mix.queryP50Ms.toFixed(2)} ms (≤ 5 ms)`);
    check(mix.peakRssMb <= 1536, `ingest peak RSS ${mix.peakRssMb.toFixed(0)} MB (≤ 1,536 MB)`);
    if (previous) {
      for (const s of sets) {
        const a = mix.quality[s]?.hybrid;
        const b = previous.quality[s]?.hybrid;
        if (a !== undefined && b !== undefined) {
          check(a >= b, `${s} hybrid nDCG@10 ${a.toFixed(4)} vs ${b.toFixed(4)} (use-lite, same run)`);
        }
      }
    }
  }
  say("");
  say(`whole run ${((performance.now() - t0) / 1000 / 60).toFixed(1)} min`);
  if (args.json) console.log(JSON.stringify({ results }, null, 2));
  else console.log(out.join("\n"));
}

if (args.child) await runChild(args.child);
else await runParent();
