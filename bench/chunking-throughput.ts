/**
 * Part 2 of `npm run bench:chunking`: chunking throughput of our FIXED,
 * SEMANTIC, DOCUMENT and CODE chunkers against LangChain.js splitters on the
 * same mixed text, 1,500-character chunks with 150 characters of overlap.
 *
 * The mix is built from real files of `../shared/data/docs`, a quarter (by
 * UTF-8 bytes) per kind, cycling through a kind's files in path order until its
 * quarter is full:
 * - markdown: the Rust book and FastAPI English docs (`.md`);
 * - code: `.ts`, `.js`, `.go`, `.py` files of the code repositories;
 * - text: SpamAssassin easy-ham email bodies (headers dropped) and the
 *   `requests` reStructuredText docs;
 * - chinese: the Debian reference (zh-CN, plain text) and FastAPI's Chinese docs.
 *
 * Each chunker runs three times to warm up, then five times, alternating with its
 * LangChain counterpart and after a garbage collection (with `--expose-gc`); the
 * median time is reported (per kind too). MB are 10^6 UTF-8 bytes of document text.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import {
  MarkdownTextSplitter,
  RecursiveCharacterTextSplitter,
  type SupportedTextSplitterLanguage,
} from "@langchain/textsplitters";
import type { createChunker } from "../src/chunk/index.js";
import type { ChunkingConfig } from "../src/config.js";
import { languageForPath } from "../src/extract/detect.js";
import type { ExtractedDocument } from "../src/types.js";
import { formatTable } from "./chunking-quality.js";

/** The kinds of text in the mix. */
export const KINDS = ["markdown", "code", "text", "chinese"] as const;
export type Kind = (typeof KINDS)[number];

/** One document of the mix. */
export interface MixDoc {
  kind: Kind;
  doc: ExtractedDocument;
  bytes: number;
}

/** All files under `dir` (recursively), sorted by path. */
function walk(dir: string): string[] {
  const out: string[] = [];
  const visit = (d: string): void => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, entry.name);
      if (entry.isDirectory()) {
        if (entry.name !== "node_modules" && entry.name !== ".git") visit(p);
      } else if (entry.isFile()) out.push(p);
    }
  };
  visit(dir);
  return out.sort();
}

/** The body of a raw RFC 822 message: everything after the first blank line. */
function emailBody(raw: string): string {
  const m = /\r?\n\r?\n/.exec(raw);
  return m ? raw.slice(m.index + m[0].length) : raw;
}

/**
 * Builds the mixed corpus from `docsDir` (`../shared/data/docs`): about
 * `totalBytes` UTF-8 bytes, a quarter per kind (see the module header).
 */
export function buildMix(docsDir: string, totalBytes: number): MixDoc[] {
  const sources: Record<Kind, { path: string; text: string; type: "markdown" | "code" | "text" }[]> = {
    markdown: [],
    code: [],
    text: [],
    chinese: [],
  };
  const read = (p: string): string => readFileSync(p, "utf8");
  for (const sub of ["rust_book_src", "fastapi_docs_en"]) {
    for (const p of walk(join(docsDir, "markdown", sub)).filter((f) => f.endsWith(".md"))) {
      sources.markdown.push({ path: p, text: read(p), type: "markdown" });
    }
  }
  for (const p of walk(join(docsDir, "code")).filter((f) => /\.(ts|js|go|py)$/.test(f))) {
    sources.code.push({ path: p, text: read(p), type: "code" });
  }
  for (const p of walk(join(docsDir, "email", "spamassassin_sample", "easy-ham-1"))) {
    sources.text.push({ path: p, text: emailBody(read(p)), type: "text" });
  }
  for (const p of walk(join(docsDir, "code", "psf+requests")).filter((f) => f.endsWith(".rst"))) {
    sources.text.push({ path: p, text: read(p), type: "text" });
  }
  for (const p of walk(join(docsDir, "chinese")).filter((f) => f.endsWith(".txt"))) {
    sources.chinese.push({ path: p, text: read(p), type: "text" });
  }
  for (const p of walk(join(docsDir, "markdown", "fastapi_docs_zh")).filter((f) => f.endsWith(".md"))) {
    sources.chinese.push({ path: p, text: read(p), type: "markdown" });
  }
  const mix: MixDoc[] = [];
  const quota = totalBytes / KINDS.length;
  for (const kind of KINDS) {
    const files = sources[kind].filter((f) => f.text.trim() !== "");
    if (files.length === 0) throw new Error(`no ${kind} files under ${docsDir}`);
    let bytes = 0;
    for (let i = 0; bytes < quota; i++) {
      const f = files[i % files.length] as (typeof files)[number];
      const round = Math.floor(i / files.length);
      const size = Buffer.byteLength(f.text, "utf8");
      const language = f.type === "code" ? languageForPath(f.path) : undefined;
      mix.push({
        kind,
        bytes: size,
        doc: {
          uri: `${f.path}#${round}`,
          text: f.text,
          metadata: {
            path: f.path,
            type: f.type,
            title: relative(docsDir, f.path),
            ...(language ? { language } : {}),
          },
        },
      });
      bytes += size;
    }
  }
  return mix;
}

/** A chunker under test: returns the number of chunks of one document. */
type ChunkCount = (doc: ExtractedDocument) => Promise<number>;

/** One row of the comparison. */
interface Pair {
  label: string;
  ours: { name: string; run: ChunkCount };
  theirs: { name: string; run: ChunkCount };
}

/** LangChain's language name for our language names, where it has separators for it. */
const LANGCHAIN_LANGUAGE: Record<string, SupportedTextSplitterLanguage> = {
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

type CreateChunker = typeof createChunker;

/**
 * Our chunkers as users run them: the compiled JavaScript in `dist/` (`npm run
 * bench:chunking` builds it first). Run from the TypeScript sources through tsx,
 * every closure gets a `__name` wrapper that LangChain's published JavaScript
 * does not pay for, which would skew the comparison.
 * @throws Error when `dist/` is missing (run `npm run build`).
 */
async function compiledCreateChunker(): Promise<CreateChunker> {
  const url = new URL("../dist/chunk/index.js", import.meta.url);
  try {
    const mod = (await import(url.href)) as { createChunker: CreateChunker };
    return mod.createChunker;
  } catch (error) {
    throw new Error(`cannot load ${url.pathname}; run \`npm run build\` first (${(error as Error).message})`);
  }
}

function pairs(size: number, overlap: number, createChunker: CreateChunker): Pair[] {
  const config: ChunkingConfig = {
    strategy: "auto",
    chunkSize: size,
    chunkOverlap: overlap,
    minChunkSize: 500,
  };
  const oursRun = (strategy: "fixed" | "semantic" | "document" | "code"): ChunkCount => {
    const chunker = createChunker(config, strategy);
    return async (doc) => (await chunker.chunk(doc)).length;
  };
  const params = { chunkSize: size, chunkOverlap: overlap };
  const recursive = new RecursiveCharacterTextSplitter(params);
  const markdown = new MarkdownTextSplitter(params);
  const byLanguage = new Map<string, RecursiveCharacterTextSplitter>();
  const lcRun =
    (splitter: RecursiveCharacterTextSplitter): ChunkCount =>
    async (doc) =>
      (await splitter.splitText(doc.text)).length;
  const lcCode: ChunkCount = async (doc) => {
    const lang = LANGCHAIN_LANGUAGE[String(doc.metadata.language ?? "")];
    let splitter = recursive;
    if (lang) {
      splitter = byLanguage.get(lang) ?? RecursiveCharacterTextSplitter.fromLanguage(lang, params);
      byLanguage.set(lang, splitter);
    }
    return (await splitter.splitText(doc.text)).length;
  };
  return [
    {
      label: "FIXED",
      ours: { name: "fixed", run: oursRun("fixed") },
      theirs: { name: "RecursiveCharacterTextSplitter", run: lcRun(recursive) },
    },
    {
      label: "SEMANTIC",
      ours: { name: "semantic", run: oursRun("semantic") },
      theirs: { name: "RecursiveCharacterTextSplitter", run: lcRun(recursive) },
    },
    {
      label: "DOCUMENT",
      ours: { name: "document", run: oursRun("document") },
      theirs: { name: "MarkdownTextSplitter", run: lcRun(markdown) },
    },
    {
      label: "CODE",
      ours: { name: "code", run: oursRun("code") },
      theirs: { name: "Recursive…fromLanguage (code), Recursive (other)", run: lcCode },
    },
  ];
}

/** Untimed passes of each chunker before the timed ones. */
const WARMUP_PASSES = 3;

/** Timing of one chunker over the mix: median total and per-kind seconds, chunk count. */
interface Timing {
  seconds: number;
  perKind: Record<Kind, number>;
  chunks: number;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};

/** One pass over the mix; seconds per kind and chunk count. */
async function pass(
  run: ChunkCount,
  mix: readonly MixDoc[],
): Promise<{ perKind: Record<Kind, number>; chunks: number }> {
  const perKind = { markdown: 0, code: 0, text: 0, chinese: 0 } as Record<Kind, number>;
  let chunks = 0;
  for (const kind of KINDS) {
    const docs = mix.filter((d) => d.kind === kind);
    const started = performance.now();
    for (const d of docs) chunks += await run(d.doc);
    perKind[kind] = (performance.now() - started) / 1000;
  }
  return { perKind, chunks };
}

/** Collects garbage when node runs with `--expose-gc` (the npm script does), so one chunker's garbage is not collected on another's clock. */
const collect = (): void => {
  (globalThis as { gc?: () => void }).gc?.();
};

/** Medians of timed passes (`runs` ≥ 1) as a {@link Timing}. */
function summarise(passes: Awaited<ReturnType<typeof pass>>[]): Timing {
  const perKind = {} as Record<Kind, number>;
  for (const kind of KINDS) perKind[kind] = median(passes.map((p) => p.perKind[kind]));
  const totals = passes.map((p) => KINDS.reduce((s, k) => s + p.perKind[k], 0));
  return { seconds: median(totals), perKind, chunks: passes[0]?.chunks ?? 0 };
}

/**
 * {@link WARMUP_PASSES} warm-up passes of each chunker, then `runs` timed passes of each,
 * alternating ours and theirs (garbage collected before every pass); medians.
 */
async function timePair(
  ours: ChunkCount,
  theirs: ChunkCount,
  mix: readonly MixDoc[],
  runs: number,
): Promise<{ ours: Timing; theirs: Timing }> {
  // Warm-up until both sides are JIT-compiled: a single pass leaves the larger code base
  // (ours) partly interpreted and measures start-up rather than throughput.
  for (let w = 0; w < WARMUP_PASSES; w++) {
    await pass(ours, mix);
    await pass(theirs, mix);
  }
  const a: Awaited<ReturnType<typeof pass>>[] = [];
  const b: Awaited<ReturnType<typeof pass>>[] = [];
  for (let r = 0; r < runs; r++) {
    collect();
    a.push(await pass(ours, mix));
    collect();
    b.push(await pass(theirs, mix));
  }
  return { ours: summarise(a), theirs: summarise(b) };
}

/** Options of {@link runThroughput}. */
export interface ThroughputOptions {
  docsDir: string;
  /** Size of the mix in MB (10^6 UTF-8 bytes). */
  megabytes: number;
  runs: number;
  size: number;
  overlap: number;
  log: (line: string) => void;
}

/** Runs every pair on the same mix and returns the formatted table. */
export async function runThroughput(options: ThroughputOptions): Promise<string[]> {
  const mix = buildMix(options.docsDir, options.megabytes * 1e6);
  const bytesOf = (kind?: Kind): number =>
    mix.filter((d) => !kind || d.kind === kind).reduce((s, d) => s + d.bytes, 0);
  const chars = mix.reduce((s, d) => s + d.doc.text.length, 0);
  const totalMb = bytesOf() / 1e6;
  options.log(
    `[throughput] mix: ${mix.length} documents, ${totalMb.toFixed(2)} MB, ${(chars / 1e6).toFixed(2)} M chars ` +
      `(${KINDS.map((k) => `${k} ${(bytesOf(k) / 1e6).toFixed(2)} MB`).join(", ")})`,
  );
  const rows: string[][] = [];
  for (const pair of pairs(options.size, options.overlap, await compiledCreateChunker())) {
    const { ours, theirs } = await timePair(pair.ours.run, pair.theirs.run, mix, options.runs);
    options.log(
      `[throughput] ${pair.label}: ours ${ours.seconds.toFixed(3)} s, LangChain ${theirs.seconds.toFixed(3)} s (median)`,
    );
    const mbps = (t: Timing): number => totalMb / t.seconds;
    // Same bytes on both sides, so the speed ratio of a kind is the inverse ratio of the times.
    const kindRatio = (k: Kind): string => (theirs.perKind[k] / ours.perKind[k]).toFixed(2);
    rows.push([
      pair.label,
      pair.theirs.name,
      mbps(ours).toFixed(2),
      mbps(theirs).toFixed(2),
      `${(mbps(ours) / mbps(theirs)).toFixed(2)}×`,
      ...KINDS.map(kindRatio),
      `${ours.chunks} / ${theirs.chunks}`,
    ]);
  }
  const out = formatTable(
    [
      "ours",
      "vs LangChain.js",
      "ours MB/s",
      "theirs MB/s",
      "ours/theirs",
      ...KINDS.map((k) => `${k} ×`),
      "chunks ours / theirs",
    ],
    rows,
  );
  out.push(
    "",
    `${mix.length} documents, ${totalMb.toFixed(2)} MB (${KINDS.map((k) => `${k} ${(bytesOf(k) / 1e6).toFixed(2)}`).join(", ")}), ` +
      `chunkSize ${options.size} / overlap ${options.overlap} chars (ours: minChunkSize 500); ` +
      `median of ${options.runs} runs after ${WARMUP_PASSES} warm-up passes; per-kind columns are ours/theirs speed ratios.`,
  );
  return out;
}
