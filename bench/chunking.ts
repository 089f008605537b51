/**
 * Chunking benchmark: quality on Chroma's chunking evaluation and throughput
 * against LangChain.js, one table per part, from one run.
 *
 * Usage: npm run bench:chunking [-- --quick] [--corpus NAME]... [--part quality|throughput|all]
 *          [--scope corpus|all] [--cache-dir DIR] [--mb N] [--runs N] [--pairs fixed,semantic,document,code]
 *          [--loader MODULE]
 *
 * - Part 1 (bench/chunking-quality.ts): every Chroma corpus chunked by our FIXED,
 *   SEMANTIC, DOCUMENT (and EMBEDDING_SEMANTIC when available) strategies at 200 and
 *   400 cl100k_base tokens with 0 and 50 % overlap, by LangChain.js'
 *   RecursiveCharacterTextSplitter at the same sizes, and by our default
 *   configuration; top k = 5 and 10 chunks per question by cosine similarity
 *   (bundled USE-lite model); Chroma's recall / precision / IoU. `--scope all`
 *   retrieves among the chunks of every loaded corpus, as Chroma's code does;
 *   the default `corpus` retrieves only among the question's corpus.
 * - Part 2 (bench/chunking-throughput.ts, timed by bench/chunking-timer.mjs in a plain
 *   `node` child process per pair): MB/s of our compiled FIXED / SEMANTIC / DOCUMENT /
 *   CODE chunkers and LangChain.js' splitters on the same ~10 MB of mixed real text,
 *   `--runs` timed passes per side (default 9). `--loader tsx` starts the timer with
 *   that loader, only to show what a loader in the timed process does to the figures.
 *
 * `--quick`: one corpus (state_of_the_union unless --corpus), 400-token
 * configurations without overlap, a 2 MB mix. `--corpus NAME` (repeatable or
 * comma-separated) limits part 1 to those corpora.
 *
 * Embeddings are cached in `DIR/kl.db` (default `$TMPDIR/kl-bench-chunking`,
 * outside the repository), so a re-run embeds nothing; the first full run
 * embeds ~30k chunk texts (tens of minutes on 2 cores).
 */
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { defaultKbConfig } from "../src/config.js";
import { CachedEmbedder } from "../src/embed/cache.js";
import { createEmbedder } from "../src/embed/index.js";
import { loadChromaChunkingDataset, type RetrievalScope } from "../src/eval/chunking.js";
import { openDatabase } from "../src/store/database.js";
import { formatQuality, runQuality } from "./chunking-quality.js";
import { runThroughput } from "./chunking-throughput.js";

const shared = resolve(import.meta.dirname, "../../shared/data");
const { values } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    corpus: { type: "string", multiple: true },
    part: { type: "string", default: "all" },
    scope: { type: "string", default: "corpus" },
    "cache-dir": { type: "string", default: join(tmpdir(), "kl-bench-chunking") },
    data: { type: "string", default: join(shared, "chunking", "chroma") },
    docs: { type: "string", default: join(shared, "docs") },
    mb: { type: "string" },
    runs: { type: "string", default: "9" },
    pairs: { type: "string" },
    loader: { type: "string" },
  },
});
const part = values.part;
if (part !== "all" && part !== "quality" && part !== "throughput") {
  console.error(`--part must be quality, throughput or all (got "${part}")`);
  process.exit(2);
}
if (values.scope !== "corpus" && values.scope !== "all") {
  console.error(`--scope must be corpus or all (got "${values.scope}")`);
  process.exit(2);
}
const scope = values.scope as RetrievalScope;
const quick = values.quick;
const line = (s = ""): void => {
  process.stdout.write(`${s}\n`);
};
const log = (s: string): void => {
  process.stderr.write(`${s}\n`);
};
const started = performance.now();

if (part === "all" || part === "quality") {
  const requested = (values.corpus ?? []).flatMap((c) => c.split(",")).filter((c) => c !== "");
  const corpora = requested.length > 0 ? requested : quick ? ["state_of_the_union"] : undefined;
  const dataset = loadChromaChunkingDataset(values.data, corpora ? { corpora } : {});
  const db = openDatabase(values["cache-dir"]);
  try {
    const embedder = new CachedEmbedder(createEmbedder(defaultKbConfig().embedding), db);
    const report = await runQuality({ dataset, embedder, quick, ks: [5, 10], scope, log });
    line(
      `## Chunking quality — Chroma chunking evaluation (${report.corpora.join(", ")}; ${report.questions} questions; ` +
        `USE-lite embeddings; retrieval scope: ${scope === "corpus" ? "question's corpus" : "all loaded corpora"})`,
    );
    line();
    for (const l of formatQuality(report)) line(l);
    line();
    line(
      `embedding: ${report.embedded.texts} texts (${report.embedded.unique} distinct), ` +
        `${embedder.stats.hits} cache hits, ${embedder.stats.misses} computed, ${(report.embedMs / 1000).toFixed(0)} s; ` +
        `cache ${join(values["cache-dir"], "kl.db")}`,
    );
    line();
  } finally {
    db.close();
  }
}

if (part === "all" || part === "throughput") {
  const megabytes = values.mb ? Number(values.mb) : quick ? 2 : 10;
  const runs = Math.max(1, Number(values.runs));
  const pairs = values.pairs?.split(",").filter((p) => p !== "");
  const table = await runThroughput({
    docsDir: values.docs,
    megabytes,
    runs,
    size: 1500,
    overlap: 150,
    log,
    ...(pairs ? { pairs } : {}),
    ...(values.loader ? { loader: values.loader } : {}),
  });
  line("## Chunking throughput — ours vs LangChain.js on the same mixed text (1500/150 chars)");
  line();
  for (const l of table) line(l);
  line();
}

line(`total run time: ${((performance.now() - started) / 1000).toFixed(0)} s`);
