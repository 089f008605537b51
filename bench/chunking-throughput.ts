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
 * This module only builds the mix and reports. The timing runs in
 * `bench/chunking-timer.mjs`: plain JavaScript in a plain `node --expose-gc` child
 * process per pair, with no loader (the driver runs under tsx, whose import hooks and
 * `__name` wrappers must not touch either timed side), importing our compiled `dist/`
 * and LangChain's published package. Per pair it reports the first (cold) pass apart,
 * then, after warm-up passes, timed passes of both sides in ABBA order; medians (p50)
 * and the slow tail (p95) of the pass times. MB are 10^6 UTF-8 bytes of document text.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
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

/** Timing of one side, as printed by the timer. */
interface TimedPass {
  seconds: number;
  perKind: Record<string, number>;
  chunks: number;
}

/** What `bench/chunking-timer.mjs` prints for one pair. */
interface PairTiming {
  pair: string;
  cold: { ours: TimedPass; theirs: TimedPass };
  ours: TimedPass[];
  theirs: TimedPass[];
}

/** The pairs: our strategy and the LangChain.js splitter the timer runs against it. */
const PAIRS = [
  { strategy: "fixed", label: "FIXED", theirs: "RecursiveCharacterTextSplitter" },
  { strategy: "semantic", label: "SEMANTIC", theirs: "RecursiveCharacterTextSplitter" },
  { strategy: "document", label: "DOCUMENT", theirs: "MarkdownTextSplitter" },
  { strategy: "code", label: "CODE", theirs: "Recursive…fromLanguage (code), Recursive (other)" },
] as const;

/** Untimed passes of each side before the timed ones. */
export const WARMUP_PASSES = 3;

/** The `q`-quantile (0..1) of `xs` by the nearest-rank method. */
function quantile(xs: readonly number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))] ?? Number.NaN;
}

/** Options of {@link runThroughput}. */
export interface ThroughputOptions {
  docsDir: string;
  /** Size of the mix in MB (10^6 UTF-8 bytes). */
  megabytes: number;
  /** Timed passes of each side (after {@link WARMUP_PASSES} warm-up passes). */
  runs: number;
  size: number;
  overlap: number;
  /** Only these strategies (default: all four pairs). */
  pairs?: readonly string[];
  /**
   * Diagnosis only: a module the timer process is started with (`--import MODULE`, e.g. `tsx`),
   * to show what a loader in the timed process does to the figures.
   */
  loader?: string;
  log: (line: string) => void;
}

/** The compiled chunkers the timer loads. */
const DIST = resolve(import.meta.dirname, "../dist");
const TIMER = resolve(import.meta.dirname, "chunking-timer.mjs");

/**
 * Runs one pair in a plain `node --expose-gc` child process (no loader unless `loader`).
 * @throws Error with the child's stderr when it fails.
 */
function timePair(mixPath: string, strategy: string, options: ThroughputOptions): PairTiming {
  const env = { ...process.env };
  // A NODE_OPTIONS loader would reach the child; the timed process must run plain node.
  delete env.NODE_OPTIONS;
  const args = [
    "--expose-gc",
    ...(options.loader ? ["--import", options.loader] : []),
    TIMER,
    mixPath,
    strategy,
    DIST,
    String(options.runs),
    String(WARMUP_PASSES),
    String(options.size),
    String(options.overlap),
    "500",
  ];
  const child = spawnSync(process.execPath, args, { env, encoding: "utf8", maxBuffer: 64 * 1024 * 1024 });
  if (child.status !== 0) {
    throw new Error(`chunking timer for ${strategy} failed (exit ${child.status}): ${child.stderr.trim()}`);
  }
  return JSON.parse(child.stdout) as PairTiming;
}

/** Runs every pair on the same mix (one timer process per pair) and returns the formatted table. */
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
  const dir = mkdtempSync(join(tmpdir(), "kl-bench-throughput-"));
  const rows: string[][] = [];
  try {
    const mixPath = join(dir, "mix.json");
    writeFileSync(mixPath, JSON.stringify(mix));
    for (const pair of PAIRS) {
      if (options.pairs && !options.pairs.includes(pair.strategy)) continue;
      const t = timePair(mixPath, pair.strategy, options);
      const secs = (side: TimedPass[]): number[] => side.map((p) => p.seconds);
      const [o50, o95, t50, t95] = [
        quantile(secs(t.ours), 0.5),
        quantile(secs(t.ours), 0.95),
        quantile(secs(t.theirs), 0.5),
        quantile(secs(t.theirs), 0.95),
      ] as [number, number, number, number];
      options.log(
        `[throughput] ${pair.label}: ours p50 ${o50.toFixed(3)} s, LangChain p50 ${t50.toFixed(3)} s; ` +
          `cold ours ${t.cold.ours.seconds.toFixed(3)} s, LangChain ${t.cold.theirs.seconds.toFixed(3)} s`,
      );
      // Same bytes on both sides, so a speed ratio is the inverse ratio of the times.
      const kindRatio = (k: Kind): string => {
        const kq = (side: TimedPass[]): number =>
          quantile(
            side.map((p) => p.perKind[k] ?? Number.NaN),
            0.5,
          );
        return (kq(t.theirs) / kq(t.ours)).toFixed(2);
      };
      rows.push([
        pair.label,
        pair.theirs,
        `${(totalMb / o50).toFixed(1)} (${(totalMb / o95).toFixed(1)})`,
        `${(totalMb / t50).toFixed(1)} (${(totalMb / t95).toFixed(1)})`,
        `${(t50 / o50).toFixed(2)}×`,
        `${(t.cold.theirs.seconds / t.cold.ours.seconds).toFixed(2)}×`,
        ...KINDS.map(kindRatio),
        `${t.ours[0]?.chunks ?? 0} / ${t.theirs[0]?.chunks ?? 0}`,
      ]);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const out = formatTable(
    [
      "ours",
      "vs LangChain.js",
      "ours MB/s p50 (p95)",
      "theirs MB/s p50 (p95)",
      "ours/theirs p50",
      "cold pass",
      ...KINDS.map((k) => `${k} ×`),
      "chunks ours / theirs",
    ],
    rows,
  );
  out.push(
    "",
    `${mix.length} documents, ${totalMb.toFixed(2)} MB (${KINDS.map((k) => `${k} ${(bytesOf(k) / 1e6).toFixed(2)}`).join(", ")}), ` +
      `chunkSize ${options.size} / overlap ${options.overlap} chars (ours: minChunkSize 500); ` +
      `one plain \`node\` process per pair${options.loader ? ` started with --import ${options.loader} (diagnosis)` : " (no loader)"}, ` +
      `our dist/ vs LangChain's package; ${options.runs} timed passes per side in ABBA order after ${WARMUP_PASSES} warm-up passes; ` +
      "p95 MB/s is the speed of the slow tail (95th-percentile pass time); cold pass: ratio on each side's first pass " +
      "in a fresh process; per-kind columns are ours/theirs p50 speed ratios.",
  );
  return out;
}
