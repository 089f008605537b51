// @ts-check
/**
 * The timed half of `npm run bench:chunking -- --part throughput`: one comparison pair
 * (one of our chunkers against its LangChain.js counterpart) timed on the mix that the
 * TypeScript driver (`bench/chunking-throughput.ts`) wrote to a JSON file.
 *
 * This file is plain JavaScript on purpose and runs in a plain `node --expose-gc`
 * process with no loader: a loader such as tsx in the timed process transforms and
 * wraps code as it is imported, so it can slow one side and not the other. Both sides
 * are what users run: our compiled `dist/` and LangChain's published package.
 *
 * Usage (the driver spawns it; by hand only for diagnosis):
 *   node --expose-gc bench/chunking-timer.mjs MIX.json PAIR DIST_DIR RUNS WARMUP SIZE OVERLAP MIN_CHUNK_SIZE
 * PAIR is fixed | semantic | document | code. Prints one JSON object on stdout:
 *   { pair, cold: { ours, theirs }, ours: [pass...], theirs: [pass...] }
 * where a pass is { seconds, perKind: { kind: seconds }, chunks }.
 *
 * Timing: the first pass of each side is reported apart ("cold": a fresh process, code
 * not yet optimised — what a one-shot CLI run sees); then WARMUP untimed passes of each,
 * then RUNS rounds, each timing both sides in ABBA order (ours first in even rounds,
 * theirs first in odd ones) after a garbage collection, so slow drifts of a shared,
 * noisy machine fall on both sides alike.
 */

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { MarkdownTextSplitter, RecursiveCharacterTextSplitter } from "@langchain/textsplitters";

const [mixPath, pairName, distDir, runsArg, warmupArg, sizeArg, overlapArg, minArg] = process.argv.slice(2);
if (!mixPath || !pairName || !distDir) {
  process.stderr.write(
    "usage: chunking-timer.mjs MIX.json PAIR DIST_DIR RUNS WARMUP SIZE OVERLAP MIN_CHUNK_SIZE\n",
  );
  process.exit(2);
}
const runs = Number(runsArg ?? 5);
const warmup = Number(warmupArg ?? 3);
const size = Number(sizeArg ?? 1500);
const overlap = Number(overlapArg ?? 150);
const minChunkSize = Number(minArg ?? 500);

/** @typedef {{ uri: string, text: string, metadata: Record<string, unknown> }} Doc */
/** @typedef {{ kind: string, bytes: number, doc: Doc }} MixDoc */
/** @typedef {{ seconds: number, perKind: Record<string, number>, chunks: number }} Pass */
/** @typedef {(doc: Doc) => Promise<number>} ChunkCount */

/** @type {MixDoc[]} */
const mix = JSON.parse(readFileSync(mixPath, "utf8"));
const kinds = [...new Set(mix.map((d) => d.kind))];

const chunkModule = pathToFileURL(join(distDir, "chunk", "index.js")).href;
/** @type {{ createChunker: (config: object, strategy: string) => { chunk: (doc: Doc) => Promise<unknown[]> } }} */
const { createChunker } = await import(chunkModule).catch((/** @type {Error} */ error) => {
  throw new Error(`cannot load ${chunkModule}; run \`npm run build\` first (${error.message})`);
});

/** LangChain's language name for our language names, where it has separators for it. */
/** @type {Record<string, "js" | "python" | "go" | "java" | "rust" | "ruby" | "php" | "cpp" | "scala" | "swift">} */
const LANGCHAIN_LANGUAGE = {
  javascript: "js",
  typescript: "js",
  tsx: "js",
  jsx: "js",
  python: "python",
  go: "go",
  java: "java",
  rust: "rust",
  ruby: "ruby",
  php: "php",
  cpp: "cpp",
  c: "cpp",
  scala: "scala",
  swift: "swift",
};

const params = { chunkSize: size, chunkOverlap: overlap };
const ours = createChunker(
  { strategy: "auto", chunkSize: size, chunkOverlap: overlap, minChunkSize },
  pairName,
);
/** @type {ChunkCount} */
const oursRun = async (doc) => (await ours.chunk(doc)).length;
/** @param {RecursiveCharacterTextSplitter} splitter @returns {ChunkCount} */
const lcRun = (splitter) => async (doc) => (await splitter.splitText(doc.text)).length;
const recursive = new RecursiveCharacterTextSplitter(params);
/** @type {Map<string, RecursiveCharacterTextSplitter>} */
const byLanguage = new Map();
/** @type {ChunkCount} */
const lcCode = async (doc) => {
  const lang = LANGCHAIN_LANGUAGE[String(doc.metadata.language ?? "")];
  let splitter = recursive;
  if (lang) {
    splitter = byLanguage.get(lang) ?? RecursiveCharacterTextSplitter.fromLanguage(lang, params);
    byLanguage.set(lang, splitter);
  }
  return (await splitter.splitText(doc.text)).length;
};
/** @type {Record<string, ChunkCount>} */
const theirsByPair = {
  fixed: lcRun(recursive),
  semantic: lcRun(recursive),
  document: lcRun(new MarkdownTextSplitter(params)),
  code: lcCode,
};
const theirsRun = theirsByPair[pairName];
if (!theirsRun) {
  process.stderr.write(`unknown pair "${pairName}" (fixed | semantic | document | code)\n`);
  process.exit(2);
}

/** Collects garbage (node runs with --expose-gc), so one side's garbage is not collected on the other's clock. */
const collect = () => {
  /** @type {{ gc?: () => void }} */ (globalThis).gc?.();
};

/** One pass over the mix, kind by kind. @param {ChunkCount} run @returns {Promise<Pass>} */
async function pass(run) {
  /** @type {Record<string, number>} */
  const perKind = {};
  let chunks = 0;
  let seconds = 0;
  for (const kind of kinds) {
    const docs = mix.filter((d) => d.kind === kind);
    const started = performance.now();
    for (const d of docs) chunks += await run(d.doc);
    const s = (performance.now() - started) / 1000;
    perKind[kind] = s;
    seconds += s;
  }
  return { seconds, perKind, chunks };
}

collect();
const coldOurs = await pass(oursRun);
collect();
const coldTheirs = await pass(theirsRun);
for (let w = 0; w < warmup; w++) {
  await pass(oursRun);
  await pass(theirsRun);
}
/** @type {Pass[]} */
const a = [];
/** @type {Pass[]} */
const b = [];
for (let r = 0; r < runs; r++) {
  const order = r % 2 === 0 ? [true, false] : [false, true];
  for (const isOurs of order) {
    collect();
    if (isOurs) a.push(await pass(oursRun));
    else b.push(await pass(theirsRun));
  }
}
process.stdout.write(
  `${JSON.stringify({ pair: pairName, cold: { ours: coldOurs, theirs: coldTheirs }, ours: a, theirs: b })}\n`,
);
