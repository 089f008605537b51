/**
 * Throughput of the bundled embedder (Universal Sentence Encoder lite on the
 * TF.js wasm backend of `@energetic-ai/core`).
 *
 * Usage: node --import tsx bench/embed-throughput.ts [--data DIR] [--docs N] [--queries N] [--batch 8,32,64] [--reps R]
 *
 * DIR is a BEIR folder with corpus.jsonl and queries.jsonl (default
 * ../shared/data/ir/scifact next to the repository). Documents are
 * `title + " " + text` of the first N corpus rows (default 256), queries the
 * first N query texts (default 256). For each batch size it prints texts per
 * second (best of R runs, default 1) after one warm-up batch. Model load time
 * is measured from importing the module to the end of the first one-text
 * call, so it includes wasm start-up and the first inference.
 */
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const { values: args } = parseArgs({
  options: {
    data: {
      type: "string",
      default: resolve(fileURLToPath(import.meta.url), "../../../shared/data/ir/scifact"),
    },
    docs: { type: "string", default: "256" },
    queries: { type: "string", default: "256" },
    batch: { type: "string", default: "32" },
    reps: { type: "string", default: "1" },
  },
});

/** Reads the `limit` first JSON lines of `file`. */
function readJsonl(file: string, limit: number): Record<string, unknown>[] {
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((line) => line.trim() !== "")
    .slice(0, limit)
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

const corpusFile = join(args.data, "corpus.jsonl");
const queriesFile = join(args.data, "queries.jsonl");
if (!existsSync(corpusFile) || !existsSync(queriesFile)) {
  console.error(`no corpus.jsonl/queries.jsonl in ${args.data}; pass --data DIR`);
  process.exit(1);
}
const docs = readJsonl(corpusFile, Number(args.docs)).map(
  (d) => `${String(d.title ?? "")} ${String(d.text ?? "")}`,
);
const queries = readJsonl(queriesFile, Number(args.queries)).map((q) => String(q.text ?? ""));
const batchSizes = args.batch.split(",").map(Number);
const reps = Math.max(1, Number(args.reps));
const meanChars = (texts: string[]): number =>
  Math.round(texts.reduce((n, t) => n + t.length, 0) / texts.length);

const loadStart = performance.now();
const { BundledEmbedder } = await import("../src/embed/bundled.js");
await new BundledEmbedder().embedTexts(["warm up"]);
const loadMs = performance.now() - loadStart;

console.log("runtime: @energetic-ai/core (TF.js wasm backend, 1 thread), model: USE lite (512-d)");
console.log(`model load + first call: ${loadMs.toFixed(0)} ms`);
console.log(
  `docs: ${docs.length} (mean ${meanChars(docs)} chars), queries: ${queries.length} (mean ${meanChars(queries)} chars)`,
);

for (const batchSize of batchSizes) {
  const embedder = new BundledEmbedder({ batchSize });
  for (const [name, texts] of [
    ["docs", docs],
    ["queries", queries],
  ] as const) {
    await embedder.embedTexts(texts.slice(0, batchSize));
    let best = 0;
    for (let r = 0; r < reps; r++) {
      const start = performance.now();
      await embedder.embedTexts(texts);
      best = Math.max(best, texts.length / ((performance.now() - start) / 1000));
    }
    console.log(`batch ${batchSize}\t${name}\t${best.toFixed(1)} texts/s`);
  }
}
