/**
 * Scale benchmark (issue 14): the embedded default store at 10k, 100k and 1M
 * chunks, beside LanceDB embedded on the same chunks and vectors.
 *
 * Usage: npm run bench:scale [-- --sizes 10k,100k,1M] [--queries 200] [--keep]
 *        [--index-timeout 900] [--skip-lance] [--tmp DIR] [--reuse DIR]
 *        [--no-chunk-thread] [--cheap-vectors]
 *
 * `--reuse DIR` (a folder an earlier `--keep` run printed) searches the data
 * directories it holds again instead of ingesting, with the ingest figures that
 * run recorded (`ingest-<size>.json`); sizes it lacks are ingested into it.
 *
 * - Embeddings: a local OpenAI-compatible server started by this script (in this
 *   process, see bench/hash-embedding-server.ts: feature hashing of word unigrams
 *   and bigrams into 512 dimensions with sign hashing, L2-normalised, so similar
 *   texts get similar vectors). The KB uses the `openai-compatible` embedder
 *   pointed at it (batch size 128) and `retrieval.vectorMinScore: 0` (the 0.2
 *   default is calibrated on the bundled model; hashed vectors of related texts
 *   have cosines of 0.1–0.3, so it would drop most vector candidates); every
 *   other KB setting is the default.
 * - Corpus: real English text from ../shared/data (Markdown docs, code, mail, the
 *   Chroma chunking corpora, the SciFact and Cranfield corpora), extracted once
 *   with the library's extractors and interleaved by source. To reach a size the
 *   documents are repeated: copy k (k ≥ 1) has URI `…#copy-k`, and about 35% of
 *   its distinct words (chosen by a hash of word and k) carry the suffix `q<k in
 *   base 26>` ("protein" → "proteinqb"), so copies are related but not identical
 *   text (different vectors and BM25 terms, no exact duplicates). The output
 *   says how many copies each size needed.
 * - Ingest: `KnowledgeLayer.ingestDocuments` with `ExtractedDocument` objects in
 *   groups, in a child process (its own peak RSS). chunks/s = chunks / (ingest
 *   wall time − embedding time), where embedding time is the wall time during
 *   which an HTTP request to the embedding server was in flight (the calling
 *   thread awaits each batch; the chunking worker and the HNSW worker go on
 *   during it, so their work in that time is not counted: the detail line also
 *   gives chunks/s over the whole wall time, embedding included, and
 *   `--no-chunk-thread` runs the ingest without the chunking worker to compare
 *   the two in one window). The base documents are
 *   extracted once, by the main process, into `base-corpus.jsonl` in the run's
 *   folder (reported on its own line); the ingest process reads that file one
 *   document at a time, as a process ingesting files one after another would.
 * - bytes/chunk: every file of the data directory (kl.db, WAL, …) after the
 *   ingest process closed it, divided by the chunk count.
 * - RSS: peak resident set (`process.resourceUsage().maxRSS`) of the ingest
 *   process (taken when `close()` has returned) and of a separate search process,
 *   shown as `ingest/search`. (Before 2026-12-07 the ingest process extracted the
 *   base corpus itself and kept all of it in memory, ~21 M chars, which raised its
 *   peak by the extractors' memory and by the corpus times the heap's growth between
 *   major collections; and it summed the chunk text bytes itself after closing, through
 *   a fresh connection's page cache.)
 * - Search: in a fresh process, result cache off (`cache: none`), each query
 *   searched once per mode (keyword, vector_only, hybrid; topK 10,
 *   keepDuplicates, default candidate counts) after 5 unmeasured warm-up
 *   queries; latency = wall time of `kl.search` minus the time the query's
 *   embedding request was in flight. Queries: BEIR SciFact and Cranfield test
 *   queries, half each.
 * - Recall@10 vs exact: exact = brute-force cosine in JS over every vector stored
 *   in the KB's collection (read from the store's table); a returned id counts as a hit when its
 *   exact cosine is ≥ the exact 10th best (ties count).
 * - Hybrid top-10 agreement: hybrid's vector list searches the HNSW index with a shorter
 *   search list than vector_only's (HYBRID_VECTOR_EFFORT, 0.35 of it); for the first 50 queries, the share
 *   of its top 10 that the same hybrid search over exact vectors (`exactVectors`) returns.
 * - LanceDB 0.31 (in its own process, same chunk ids, texts and vectors): flat
 *   vector search, then an IVF-PQ index (defaults, cosine) and an FTS index on
 *   the text, each build bounded by --index-timeout (on timeout the row says the
 *   peer could not run); the IVF-PQ index is searched with its defaults and
 *   "tuned" (nprobes 64, refineFactor 20: re-ranked on full vectors) since its
 *   default recall on these vectors is low; then, to compare at equal recall, at higher
 *   settings ({@link RECALL_LADDER}: more partitions, more candidates re-ranked) and the
 *   table shows the first setting whose recall@10 reaches ours (or the highest reached, marked
 *   "max"); hybrid = IVF-PQ top 20 + FTS top 20 fused by RRF (k 60),
 *   as our hybrid's default candidate counts. Ratio = ours p50 / LanceDB p50
 *   (keyword vs FTS, vector vs IVF-PQ default and tuned, hybrid vs hybrid, which
 *   uses the default IVF-PQ search); < 1 means we are faster.
 *
 * Progress (with ETA) goes to stderr, the table to stdout. Data directories are
 * created under $TMPDIR (or --tmp) and removed at the end unless --keep.
 */
import { type ChildProcess, fork } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import type { KnowledgeBaseConfig } from "../src/config.js";
import { percentile } from "../src/eval/beir.js";
import { discoverSources, extractFile } from "../src/extract/index.js";
import { collectionOf, KnowledgeLayer } from "../src/knowledge-layer.js";
import { blobToVector, openDatabase } from "../src/store/database.js";
import type { ExtractedDocument } from "../src/types.js";
import {
  cheapEmbed,
  HASH_DIM,
  HASH_MODEL,
  type HashEmbeddingServer,
  hash32,
  hashEmbed,
  startHashEmbeddingServer,
} from "./hash-embedding-server.js";

const SCRIPT = fileURLToPath(import.meta.url);
const SHARED = resolve(import.meta.dirname, "..", "..", "shared", "data");
const KB = "scale";
const TOP_K = 10;
const WARMUP = 5;
/** Our defaults (retrieval.vectorTopK / keywordTopK / rrfK), used for LanceDB's hybrid too. */
const CANDIDATES = 20;
const RRF_K = 60;
const MODES = ["keyword", "vector_only", "hybrid"] as const;
/** LanceDB IVF-PQ searched for recall: more partitions probed, candidates re-ranked on full vectors. */
const TUNED = { nprobes: 64, refineFactor: 20 };
/**
 * LanceDB IVF-PQ settings searched after {@link TUNED}, each probing more partitions and
 * re-ranking more candidates on full vectors, to find its latency at our recall.
 * (LanceDB's default IVF-PQ has √rows partitions: 100 at 10k, ~316 at 100k, 1,000 at 1M.)
 */
const RECALL_LADDER = [
  { nprobes: 128, refineFactor: 50 },
  { nprobes: 256, refineFactor: 100 },
  { nprobes: 512, refineFactor: 200 },
];
interface LanceSetting {
  nprobes: number;
  refineFactor: number;
}
type Mode = (typeof MODES)[number];

const { values } = parseArgs({
  options: {
    sizes: { type: "string", default: "10k,100k,1M" },
    queries: { type: "string", default: "200" },
    keep: { type: "boolean", default: false },
    reuse: { type: "string" },
    "index-timeout": { type: "string", default: "900" },
    "skip-lance": { type: "boolean", default: false },
    "no-chunk-thread": { type: "boolean", default: false },
    "cheap-vectors": { type: "boolean", default: false },
    tmp: { type: "string" },
    role: { type: "string" },
    job: { type: "string" },
  },
});

/** Start of the run (epoch ms), passed to the child processes so their log lines share the clock. */
const T0 = Number(process.env.KL_BENCH_SCALE_T0) || Date.now();
const log = (message: string): void => {
  process.stderr.write(`[${((Date.now() - T0) / 1000).toFixed(0).padStart(5)} s] ${message}\n`);
};

/** "10k" → 10,000, "1M" → 1,000,000, "2500" → 2,500. */
function parseSize(s: string): number {
  const m = /^(\d+(?:\.\d+)?)([kKmM]?)$/.exec(s.trim());
  if (!m) throw new Error(`bad size "${s}" (use e.g. 10k, 100k, 1M or 25000)`);
  const mult = m[2]?.toLowerCase() === "k" ? 1e3 : m[2]?.toLowerCase() === "m" ? 1e6 : 1;
  const n = Math.round(Number(m[1]) * mult);
  if (n < 100) throw new Error(`size ${s} is too small (at least 100 chunks)`);
  return n;
}

const fmtSize = (n: number): string =>
  n >= 1e6 && n % 1e6 === 0 ? `${n / 1e6}M` : n >= 1e3 && n % 1e3 === 0 ? `${n / 1e3}k` : String(n);

function duration(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s < 90) return `${s} s`;
  if (s < 5400) return `${Math.round(s / 60)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

/** Throttled progress line with rate and ETA. */
function progress(label: string, started: number): (done: number, total: number, force?: boolean) => void {
  let last = 0;
  return (done, total, force = false) => {
    const now = performance.now();
    if (!force && now - last < 5000) return;
    last = now;
    const elapsed = now - started;
    const rate = done / Math.max(elapsed, 1);
    const eta = rate > 0 ? Math.max(0, total - done) / rate : Number.NaN;
    const pct = total > 0 ? ((100 * done) / total).toFixed(1) : "?";
    const memory = process.memoryUsage();
    log(
      `${label}: ${done.toLocaleString("en-US")}/${total.toLocaleString("en-US")} (${pct}%), ` +
        `${(rate * 1000).toFixed(0)}/s, elapsed ${duration(elapsed)}, ETA ${Number.isFinite(eta) ? duration(eta) : "?"}, ` +
        `heap ${Math.round(memory.heapUsed / 2 ** 20)} MB, RSS ${Math.round(memory.rss / 2 ** 20)} MB`,
    );
  };
}

// ---------------------------------------------------------------------------
// Embedding time as the client sees it: wall time with a request in flight.

const embedClock = { inflight: 0, since: 0, total: 0 };
function embedMs(): number {
  return embedClock.total + (embedClock.inflight > 0 ? performance.now() - embedClock.since : 0);
}
function installEmbedClock(baseUrl: string): void {
  const original = globalThis.fetch;
  globalThis.fetch = async (input, init) => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    if (!url.startsWith(baseUrl)) return original(input, init);
    if (embedClock.inflight++ === 0) embedClock.since = performance.now();
    try {
      const res = await original(input, init);
      // Read the body while the clock runs, so the transfer counts as embedding time.
      const body = await res.arrayBuffer();
      return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
    } finally {
      if (--embedClock.inflight === 0) embedClock.total += performance.now() - embedClock.since;
    }
  };
}

// ---------------------------------------------------------------------------
// Corpus.

interface BaseCorpus {
  docs: ExtractedDocument[];
  files: number;
  chars: number;
  extractMs: number;
  failed: number;
}

/** Figures of the base corpus, the first line of its JSONL file (see {@link writeBaseCorpus}). */
type BaseCorpusHeader = Omit<BaseCorpus, "docs"> & { documents: number };

/**
 * Extracts the base corpus (in the calling process) and writes it to `file` as JSONL: a
 * header line with its figures, then one document per line. The ingest process reads it
 * one document at a time ({@link BaseCorpusReader}), so neither the extractors' memory
 * (PDF parsing, HTML conversion) nor the whole corpus is part of its peak RSS: it holds
 * what a process ingesting files one after another holds.
 */
async function writeBaseCorpus(file: string): Promise<BaseCorpusHeader> {
  const base = await loadBase();
  const header: BaseCorpusHeader = {
    documents: base.docs.length,
    files: base.files,
    chars: base.chars,
    extractMs: base.extractMs,
    failed: base.failed,
  };
  const lines = [JSON.stringify(header), ...base.docs.map((d) => JSON.stringify(d))];
  writeFileSync(file, `${lines.join("\n")}\n`);
  return header;
}

/** Reads a {@link writeBaseCorpus} file document by document, starting over at its end. */
class BaseCorpusReader {
  private readonly bytes: Buffer;
  private readonly first: number;
  private at: number;
  readonly header: BaseCorpusHeader;

  constructor(file: string) {
    this.bytes = readFileSync(file);
    this.first = this.bytes.indexOf(10) + 1;
    this.header = JSON.parse(this.bytes.toString("utf8", 0, this.first - 1)) as BaseCorpusHeader;
    this.at = this.first;
  }

  /** The next document, and whether it is the corpus's last one. */
  next(): { doc: ExtractedDocument; last: boolean } {
    const end = this.bytes.indexOf(10, this.at);
    const doc = JSON.parse(this.bytes.toString("utf8", this.at, end)) as ExtractedDocument;
    this.at = end + 1;
    const last = this.at >= this.bytes.length;
    if (last) this.at = this.first;
    return { doc, last };
  }
}

function beirDocs(set: string): ExtractedDocument[] {
  const lines = readFileSync(join(SHARED, "ir", set, "corpus.jsonl"), "utf8").split("\n");
  const out: ExtractedDocument[] = [];
  for (const line of lines) {
    if (!line.trim()) continue;
    const o = JSON.parse(line) as { _id: string; title?: string; text?: string };
    const uri = `beir:${set}/${o._id}`;
    const text = o.title ? `${o.title}\n\n${o.text ?? ""}` : (o.text ?? "");
    if (!text.trim()) continue;
    out.push({ uri, text, metadata: { path: uri, type: "text", title: o.title || o._id } });
  }
  return out;
}

/** Base documents, interleaved round-robin across sources so every prefix mixes them. */
async function loadBase(): Promise<BaseCorpus> {
  const started = performance.now();
  const folders = [
    ["markdown", join(SHARED, "docs", "markdown", "fastapi_docs_en")],
    ["markdown", join(SHARED, "docs", "markdown", "rust_book_src")],
    ["code", join(SHARED, "docs", "code")],
    ["email", join(SHARED, "docs", "email", "spamassassin_sample")],
    ["chroma", join(SHARED, "chunking", "chroma", "corpora")],
  ] as const;
  const groups: ExtractedDocument[][] = [];
  let files = 0;
  let failed = 0;
  for (const [, folder] of folders) {
    const { sources } = await discoverSources([folder]);
    const docs: ExtractedDocument[] = [];
    for (const source of sources) {
      try {
        docs.push(...(await extractFile(source.path, source.type)));
        files++;
      } catch {
        failed++;
      }
    }
    groups.push(docs.filter((d) => d.text.trim().length > 0));
  }
  const extractMs = performance.now() - started;
  groups.push(beirDocs("scifact"), beirDocs("cranfield"));
  const docs: ExtractedDocument[] = [];
  for (let i = 0; groups.some((g) => i < g.length); i++) {
    for (const g of groups) {
      const d = g[i];
      if (d) docs.push(d);
    }
  }
  const chars = docs.reduce((s, d) => s + d.text.length, 0);
  return { docs, files, chars, extractMs, failed };
}

/** `q` + k in base 26 (a…z): the word suffix of copy k. */
function suffixOf(k: number): string {
  let s = "";
  let n = k;
  do {
    s = String.fromCharCode(97 + (n % 26)) + s;
    n = Math.floor(n / 26);
  } while (n > 0);
  return `q${s}`;
}

/** Copy k of a text: ~35% of its distinct words (by a hash of word and k) get the suffix of k. */
function varyText(text: string, k: number): string {
  if (k === 0) return text;
  const suffix = suffixOf(k);
  return text.replace(/\p{L}+/gu, (w) =>
    hash32(`${k}\u0000${w.toLowerCase()}`) % 100 < 35 ? `${w}${suffix}` : w,
  );
}

/** Copy k of a document (k = 0: the document itself); segments are carried over with new offsets. */
function copyDoc(doc: ExtractedDocument, k: number): ExtractedDocument {
  if (k === 0) return doc;
  const uri = `${doc.uri}#copy-${k}`;
  const metadata = {
    ...doc.metadata,
    path: uri,
    copy: k,
    ...(typeof doc.metadata.title === "string" ? { title: varyText(doc.metadata.title, k) } : {}),
  };
  if (!doc.segments || doc.segments.length === 0) return { uri, text: varyText(doc.text, k), metadata };
  let text = "";
  let pos = 0;
  const segments = [];
  for (const s of doc.segments) {
    text += varyText(doc.text.slice(pos, s.start), k);
    const start = text.length;
    text += varyText(doc.text.slice(s.start, s.end), k);
    segments.push({ ...s, start, end: text.length });
    pos = s.end;
  }
  text += varyText(doc.text.slice(pos), k);
  return { uri, text, metadata, segments };
}

function loadQueries(n: number): { measured: string[]; warmup: string[] } {
  const read = (set: string): string[] =>
    readFileSync(join(SHARED, "ir", set, "queries.jsonl"), "utf8")
      .split("\n")
      .filter((l) => l.trim())
      .map((l) => String((JSON.parse(l) as { text: string }).text).trim())
      .filter((t) => t.length > 0);
  const sci = read("scifact");
  const cran = read("cranfield");
  const half = Math.ceil(n / 2);
  const measured = [...sci.slice(0, half), ...cran.slice(0, n - half)];
  const warmup = sci.slice(half, half + WARMUP);
  return { measured, warmup };
}

// ---------------------------------------------------------------------------
// Child roles.

interface IngestJob {
  dataDir: string;
  /** The base corpus as JSONL ({@link writeBaseCorpus}). */
  corpusFile: string;
  target: number;
  baseUrl: string;
  /** Chunk on the calling thread (`OpenOptions.chunkThread: false`), to compare with the worker. */
  noChunkThread?: boolean;
}
interface IngestResult {
  chunks: number;
  documents: number;
  copies: number;
  baseDocs: number;
  baseFiles: number;
  baseChars: number;
  extractMs: number;
  wallMs: number;
  embedMs: number;
  maxRssKb: number;
  /** CPU time of the ingest process (user + system) during the ingest, ms. */
  cpuMs: number;
  /** Bytes the ingest process wrote through system calls during the ingest (`/proc/self/io` wchar). */
  writtenBytes: number;
  /** UTF-8 bytes of the stored chunk texts (the goal's bound on the data directory is 2 × (text + vectors)). */
  textBytes?: number;
}

/** Bytes this process has written through system calls (Linux `/proc/self/io` wchar), else 0. */
function bytesWritten(): number {
  try {
    const m = /^wchar:\s*(\d+)/m.exec(readFileSync("/proc/self/io", "utf8"));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

async function roleIngest(job: IngestJob): Promise<IngestResult> {
  const corpus = new BaseCorpusReader(job.corpusFile);
  const base = corpus.header;
  installEmbedClock(job.baseUrl);
  const kl = KnowledgeLayer.open({
    dataDir: job.dataDir,
    cache: { type: "none" },
    chunkThread: job.noChunkThread !== true,
  });
  let closed = false;
  try {
    await kl.createKb(KB, {
      embedding: {
        provider: "openai-compatible",
        model: HASH_MODEL,
        baseUrl: job.baseUrl,
        dimension: HASH_DIM,
        batchSize: 128,
        // Vectors as base64 float32 bytes: a quarter of the JSON, no number arrays to collect.
        encodingFormat: "base64",
      },
      // The 0.2 default is calibrated on the bundled model's cosines; hashed vectors of
      // related texts score 0.1–0.3, so it would drop most candidates. LanceDB has none either.
      retrieval: { vectorMinScore: 0 },
    });
    const started = performance.now();
    const cpu0 = process.cpuUsage();
    const written0 = bytesWritten();
    const report = progress(`ingest ${fmtSize(job.target)}`, started);
    let chunks = 0;
    let documents = 0;
    let copy = 0;
    let index = 0;
    let perDoc = 3;
    while (chunks < job.target) {
      const remaining = job.target - chunks;
      const want = Math.max(1, Math.min(200, Math.ceil(remaining / perDoc)));
      const group: ExtractedDocument[] = [];
      while (group.length < want) {
        const { doc, last } = corpus.next();
        group.push(copyDoc(doc, copy));
        index++;
        if (last) {
          index = 0;
          copy++;
        }
      }
      const summary = await kl.ingestDocuments(group, { kb: KB });
      if (summary.errors.length > 0 && documents === 0) {
        log(`ingest errors, e.g. ${summary.errors[0]?.path}: ${summary.errors[0]?.reason}`);
      }
      chunks += summary.chunks;
      documents += group.length;
      perDoc = Math.max(0.5, chunks / documents);
      report(chunks, job.target);
    }
    report(chunks, job.target, true);
    // Closing saves the approximate vector index: part of the ingest's work.
    await kl.close();
    closed = true;
    const wallMs = performance.now() - started;
    const cpu = process.cpuUsage(cpu0);
    const writtenBytes = bytesWritten() - written0;
    // The peak so far; the chunk text bytes are summed by the main process afterwards (that
    // query's page cache is the benchmark's, not the ingest's).
    const maxRssKb = process.resourceUsage().maxRSS;
    return {
      chunks,
      documents,
      copies: copy + (index > 0 ? 1 : 0),
      baseDocs: base.documents,
      baseFiles: base.files,
      baseChars: base.chars,
      extractMs: base.extractMs,
      wallMs,
      embedMs: embedMs(),
      maxRssKb,
      cpuMs: (cpu.user + cpu.system) / 1000,
      writtenBytes,
    };
  } finally {
    if (!closed) await kl.close();
  }
}

interface SearchJob {
  dataDir: string;
  baseUrl: string;
  queries: string[];
  warmup: string[];
}
interface SearchResult {
  latency: Record<Mode, { p50: number; p95: number }>;
  /** Chunk ids returned by vector_only, per query. */
  vectorIds: number[][];
  /**
   * Share of the hybrid top 10 (vector list searched with HYBRID_VECTOR_EFFORT) that the
   * same hybrid search over exact vectors also returns, over the first AGREEMENT_QUERIES.
   */
  hybridAgreement?: number;
  maxRssKb: number;
}

/** Queries whose hybrid top 10 is compared with a hybrid search over exact vectors (a scan each). */
const AGREEMENT_QUERIES = 50;

async function roleSearch(job: SearchJob): Promise<SearchResult> {
  installEmbedClock(job.baseUrl);
  const kl = KnowledgeLayer.open({ dataDir: job.dataDir, cache: { type: "none" }, create: false });
  try {
    const latency = {} as SearchResult["latency"];
    let vectorIds: number[][] = [];
    let hybridIds: number[][] = [];
    for (const mode of MODES) {
      const options = { kbs: [KB], mode, topK: TOP_K, keepDuplicates: true, minScore: 0 };
      for (const q of job.warmup) await kl.search(q, options);
      const times: number[] = [];
      const ids: number[][] = [];
      const report = progress(`search ${mode}`, performance.now());
      for (const [i, q] of job.queries.entries()) {
        const e0 = embedMs();
        const t0 = performance.now();
        const response = await kl.search(q, options);
        times.push(performance.now() - t0 - (embedMs() - e0));
        ids.push(response.results.map((r) => r.chunkId));
        report(i + 1, job.queries.length);
      }
      latency[mode] = { p50: percentile(times, 0.5), p95: percentile(times, 0.95) };
      log(`search ${mode}: p50 ${latency[mode].p50.toFixed(1)} ms, p95 ${latency[mode].p95.toFixed(1)} ms`);
      if (mode === "vector_only") vectorIds = ids;
      if (mode === "hybrid") hybridIds = ids;
    }
    const maxRssKb = process.resourceUsage().maxRSS;
    // The hybrid list's vector search is approximate and shorter than vector_only's: how much
    // of its top 10 would change with exact vectors (untimed; each query scans every vector).
    let agree = 0;
    let total = 0;
    const agreementQueries = job.queries.slice(0, AGREEMENT_QUERIES);
    const report = progress("hybrid over exact vectors", performance.now());
    for (const [i, q] of agreementQueries.entries()) {
      const exact = await kl.search(q, {
        kbs: [KB],
        mode: "hybrid",
        topK: TOP_K,
        keepDuplicates: true,
        minScore: 0,
        exactVectors: true,
      });
      const want = new Set(exact.results.map((r) => r.chunkId));
      total += want.size;
      agree += (hybridIds[i] ?? []).filter((id) => want.has(id)).length;
      report(i + 1, agreementQueries.length);
    }
    const hybridAgreement = total > 0 ? agree / total : undefined;
    if (hybridAgreement !== undefined)
      log(`hybrid top ${TOP_K} = hybrid over exact vectors: ${(hybridAgreement * 100).toFixed(1)}%`);
    return { latency, vectorIds, hybridAgreement, maxRssKb };
  } finally {
    await kl.close();
  }
}

interface LanceJob {
  dataDir: string;
  lanceDir: string;
  queries: string[];
  warmup: string[];
  indexTimeoutMs: number;
}
interface LanceLatency {
  p50: number;
  p95: number;
}
interface LanceResult {
  rows: number;
  addMs: number;
  bytes: number;
  flat?: LanceLatency & { ids: number[][] };
  ivfpq?: LanceLatency & { ids: number[][]; buildMs: number };
  /** The IVF-PQ index searched with more partitions and exact re-ranking ({@link TUNED}). */
  tuned?: LanceLatency & { ids: number[][] };
  /** The IVF-PQ index searched at each {@link RECALL_LADDER} setting, in order. */
  ladder?: (LanceLatency & LanceSetting & { ids: number[][] })[];
  fts?: LanceLatency & { buildMs: number; failed: number };
  hybrid?: LanceLatency;
  /** Why a part could not run. */
  notes: string[];
  maxRssKb: number;
}

/** Streams the KB's chunks (id, text) from the data directory, `page` at a time. */
function* storedChunks(dataDir: string, page = 5000): Generator<{ id: number; text: string }[]> {
  const kl = KnowledgeLayer.open({ dataDir, cache: { type: "none" }, create: false });
  try {
    let after = 0;
    for (;;) {
      const rows = kl.catalog.embeddedChunks(KB, after, page);
      if (rows.length === 0) return;
      after = rows[rows.length - 1]?.id ?? after;
      yield rows.map((r) => ({ id: r.id, text: r.text }));
    }
  } finally {
    void kl.close();
  }
}

/**
 * Streams the KB's stored vectors (chunk id, vector) from the data directory, `page` at a
 * time, straight from the embedded store's table: the exact-recall reference is computed on
 * the vectors search uses, not on recomputed ones.
 */
function* storedVectors(dataDir: string, page = 5000): Generator<{ id: number; vector: Float32Array }[]> {
  const db = openDatabase(dataDir);
  try {
    const config = db.prepare("SELECT config FROM kbs WHERE name = ?").pluck().get(KB) as string | undefined;
    if (config === undefined) throw new Error(`no KB "${KB}" in ${dataDir}`);
    const collection = collectionOf(JSON.parse(config) as KnowledgeBaseConfig);
    const read = db
      .prepare(
        "SELECT rowid, id, vector FROM vec_records WHERE collection = ? AND rowid > ? ORDER BY rowid LIMIT ?",
      )
      .raw();
    let after = 0;
    for (;;) {
      const rows = read.all(collection, after, page) as [number, string, Buffer][];
      if (rows.length === 0) return;
      after = (rows[rows.length - 1] as [number, string, Buffer])[0];
      yield rows.map(([, id, blob]) => ({ id: Number(id), vector: blobToVector(blob) }));
    }
  } finally {
    db.close();
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T | "timeout"> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<"timeout">((resolve) => {
    timer = setTimeout(() => resolve("timeout"), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function dirBytes(dir: string): number {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name);
    if (entry.isDirectory()) total += dirBytes(p);
    else if (entry.isFile()) total += statSync(p).size;
  }
  return total;
}

async function roleLance(job: LanceJob): Promise<LanceResult> {
  const lancedb = await import("@lancedb/lancedb");
  const db = await lancedb.connect(job.lanceDir);
  const notes: string[] = [];
  const total = (() => {
    const kl = KnowledgeLayer.open({ dataDir: job.dataDir, cache: { type: "none" }, create: false });
    try {
      return kl.catalog.embeddedChunkCount(KB);
    } finally {
      void kl.close();
    }
  })();
  let table: Awaited<ReturnType<typeof db.createTable>> | undefined;
  let rows = 0;
  let addMs = 0;
  const report = progress("LanceDB add", performance.now());
  for (const page of storedChunks(job.dataDir, 10_000)) {
    const data = page.map((c) => ({ id: c.id, text: c.text, vector: Array.from(hashEmbed(c.text)) }));
    const t0 = performance.now();
    if (!table) table = await db.createTable("chunks", data);
    else await table.add(data);
    addMs += performance.now() - t0;
    rows += page.length;
    report(rows, total);
  }
  if (!table) throw new Error("no chunks to load into LanceDB");
  const t = table;
  const vectors = job.queries.map((q) => Array.from(hashEmbed(q)));
  const warmVectors = job.warmup.map((q) => Array.from(hashEmbed(q)));
  const result: LanceResult = { rows, addMs, bytes: 0, notes, maxRssKb: 0 };

  const timeVector = async (
    how: "flat" | "index" | LanceSetting,
  ): Promise<LanceLatency & { ids: number[][] }> => {
    const run = async (v: number[]): Promise<number[]> => {
      let q = t.vectorSearch(v).distanceType("cosine").limit(TOP_K).select(["id"]);
      if (how === "flat") q = q.bypassVectorIndex();
      else if (how !== "index") q = q.nprobes(how.nprobes).refineFactor(how.refineFactor);
      return (await q.toArray()).map((r) => Number((r as { id: number }).id));
    };
    for (const v of warmVectors) await run(v);
    const times: number[] = [];
    const ids: number[][] = [];
    for (const v of vectors) {
      const t0 = performance.now();
      ids.push(await run(v));
      times.push(performance.now() - t0);
    }
    const label = typeof how === "string" ? how : `nprobes ${how.nprobes}, refineFactor ${how.refineFactor}`;
    log(
      `LanceDB vector (${label}): p50 ${percentile(times, 0.5).toFixed(1)} ms, p95 ${percentile(times, 0.95).toFixed(1)} ms`,
    );
    return { p50: percentile(times, 0.5), p95: percentile(times, 0.95), ids };
  };

  log("LanceDB: flat vector search…");
  result.flat = await timeVector("flat");

  log(`LanceDB: building the IVF-PQ index (timeout ${duration(job.indexTimeoutMs)})…`);
  let b0 = performance.now();
  const ivf = await withTimeout(
    t
      .createIndex("vector", { config: lancedb.Index.ivfPq({ distanceType: "cosine" }) })
      .then(() => "ok" as const)
      .catch((e: unknown) => `failed: ${(e as Error).message}`),
    job.indexTimeoutMs,
  );
  if (ivf === "ok") {
    const buildMs = performance.now() - b0;
    result.ivfpq = { ...(await timeVector("index")), buildMs };
    log(`LanceDB: IVF-PQ with nprobes ${TUNED.nprobes}, refineFactor ${TUNED.refineFactor}…`);
    result.tuned = await timeVector(TUNED);
    result.ladder = [];
    for (const setting of RECALL_LADDER) result.ladder.push({ ...setting, ...(await timeVector(setting)) });
  } else {
    notes.push(
      `IVF-PQ index ${ivf === "timeout" ? `did not finish within ${duration(job.indexTimeoutMs)}` : ivf}`,
    );
  }

  const runFts = async (q: string): Promise<number[]> =>
    (await t.query().fullTextSearch(q).limit(CANDIDATES).select(["id"]).toArray()).map((r) =>
      Number((r as { id: number }).id),
    );
  if (ivf !== "timeout") {
    log(`LanceDB: building the FTS index (timeout ${duration(job.indexTimeoutMs)})…`);
    b0 = performance.now();
    const fts = await withTimeout(
      t
        .createIndex("text", { config: lancedb.Index.fts() })
        .then(() => "ok" as const)
        .catch((e: unknown) => `failed: ${(e as Error).message}`),
      job.indexTimeoutMs,
    );
    if (fts === "ok") {
      const buildMs = performance.now() - b0;
      let failed = 0;
      const safeFts = async (q: string): Promise<number[]> => {
        try {
          return await runFts(q);
        } catch {
          failed++;
          return [];
        }
      };
      for (const q of job.warmup) await safeFts(q);
      const times: number[] = [];
      for (const q of job.queries) {
        const t0 = performance.now();
        await safeFts(q);
        times.push(performance.now() - t0);
      }
      result.fts = { p50: percentile(times, 0.5), p95: percentile(times, 0.95), buildMs, failed };
      if (result.ivfpq) {
        const hybrid = async (q: string, v: number[]): Promise<number[]> => {
          const vec = (
            await t.vectorSearch(v).distanceType("cosine").limit(CANDIDATES).select(["id"]).toArray()
          ).map((r) => Number((r as { id: number }).id));
          const kw = await safeFts(q);
          const fused = new Map<number, number>();
          for (const list of [vec, kw]) {
            for (const [rank, id] of list.entries())
              fused.set(id, (fused.get(id) ?? 0) + 1 / (RRF_K + rank + 1));
          }
          return [...fused.entries()]
            .sort((a, b) => b[1] - a[1])
            .slice(0, TOP_K)
            .map(([id]) => id);
        };
        for (const [i, q] of job.warmup.entries()) await hybrid(q, warmVectors[i] as number[]);
        const htimes: number[] = [];
        for (const [i, q] of job.queries.entries()) {
          const t0 = performance.now();
          await hybrid(q, vectors[i] as number[]);
          htimes.push(performance.now() - t0);
        }
        result.hybrid = { p50: percentile(htimes, 0.5), p95: percentile(htimes, 0.95) };
      }
    } else {
      notes.push(
        `FTS index ${fts === "timeout" ? `did not finish within ${duration(job.indexTimeoutMs)}` : fts}`,
      );
    }
  } else {
    notes.push("FTS index not tried (the IVF-PQ build timed out)");
  }
  result.bytes = dirBytes(job.lanceDir);
  result.maxRssKb = process.resourceUsage().maxRSS;
  return result;
}

// ---------------------------------------------------------------------------
// Parent: orchestration, exact search, table.

function runChild<T>(role: string, job: unknown, killAfterMs?: number): Promise<T> {
  return new Promise((resolvePromise, reject) => {
    const child: ChildProcess = fork(SCRIPT, ["--role", role, "--job", JSON.stringify(job)], {
      execArgv: process.execArgv,
      stdio: ["ignore", "inherit", "inherit", "ipc"],
      // LanceDB logs a deprecation warning per query at the default level.
      env: { ...process.env, LANCEDB_LOG: process.env.LANCEDB_LOG ?? "error", KL_BENCH_SCALE_T0: String(T0) },
    });
    let result: T | undefined;
    let timer: NodeJS.Timeout | undefined;
    if (killAfterMs !== undefined) {
      timer = setTimeout(() => {
        log(`${role} process: no result after ${duration(killAfterMs)}, stopping it`);
        child.kill("SIGKILL");
      }, killAfterMs);
    }
    child.on("message", (m) => {
      result = m as T;
    });
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      if (result !== undefined) resolvePromise(result);
      else reject(new Error(`${role} process ended (${signal ?? `exit ${code}`}) without a result`));
    });
  });
}

/** Per-query exact top 10 and the exact scores of the ids some engine returned. */
function exactSearch(
  dataDir: string,
  queries: string[],
  returned: number[][][],
  total: number,
): { kth: number[]; scoreOf: Map<number, number>[] } {
  const qv = queries.map((q) => hashEmbed(q));
  const nq = qv.length;
  const best = qv.map(() => ({ ids: [] as number[], scores: [] as number[] }));
  const want = qv.map((_, i) => new Set(returned.flatMap((lists) => lists[i] ?? [])));
  const scoreOf = qv.map(() => new Map<number, number>());
  const report = progress("exact search", performance.now());
  let done = 0;
  for (const page of storedVectors(dataDir)) {
    for (const c of page) {
      const v = c.vector;
      for (let qi = 0; qi < nq; qi++) {
        const q = qv[qi] as Float32Array;
        let s = 0;
        for (let d = 0; d < HASH_DIM; d++) s += (q[d] as number) * (v[d] as number);
        if (want[qi]?.has(c.id)) scoreOf[qi]?.set(c.id, s);
        const b = best[qi] as { ids: number[]; scores: number[] };
        if (b.scores.length < TOP_K) {
          b.scores.push(s);
          b.ids.push(c.id);
        } else {
          let min = 0;
          for (let j = 1; j < TOP_K; j++) if ((b.scores[j] as number) < (b.scores[min] as number)) min = j;
          if (s > (b.scores[min] as number)) {
            b.scores[min] = s;
            b.ids[min] = c.id;
          }
        }
      }
    }
    done += page.length;
    report(done, total);
  }
  return { kth: best.map((b) => Math.min(...b.scores)), scoreOf };
}

/** Exact scores of the ids some engine returned, per query, from their stored vectors. */
function exactScoresOf(dataDir: string, queries: string[], returned: number[][][]): Map<number, number>[] {
  const db = openDatabase(dataDir);
  try {
    const config = db.prepare("SELECT config FROM kbs WHERE name = ?").pluck().get(KB) as string;
    const collection = collectionOf(JSON.parse(config) as KnowledgeBaseConfig);
    const one = db.prepare("SELECT vector FROM vec_records WHERE collection = ? AND id = ?").pluck();
    return queries.map((text, qi) => {
      const q = hashEmbed(text);
      const out = new Map<number, number>();
      for (const lists of returned) {
        for (const id of lists[qi] ?? []) {
          if (out.has(id)) continue;
          const blob = one.get(collection, String(id)) as Buffer | undefined;
          if (!blob) continue;
          const v = blobToVector(blob);
          let dot = 0;
          for (let d = 0; d < HASH_DIM; d++) dot += (q[d] as number) * (v[d] as number);
          out.set(id, dot);
        }
      }
      return out;
    });
  } finally {
    db.close();
  }
}

function recallAt10(ids: number[][], kth: number[], scoreOf: Map<number, number>[]): number {
  let sum = 0;
  for (let qi = 0; qi < kth.length; qi++) {
    const hits = (ids[qi] ?? [])
      .slice(0, TOP_K)
      .filter(
        (id) => (scoreOf[qi]?.get(id) ?? Number.NEGATIVE_INFINITY) >= (kth[qi] as number) - 1e-6,
      ).length;
    sum += hits / TOP_K;
  }
  return sum / Math.max(1, kth.length);
}

interface Row {
  size: number;
  ingest: IngestResult;
  bytes: number;
  search: SearchResult;
  recall: number;
  lance?: LanceResult;
  lanceRecall: { flat?: number; ivfpq?: number; tuned?: number; ladder?: number[] };
  lanceError?: string;
  seconds: number;
}

const ms = (x: number | undefined): string => (x === undefined ? "–" : x < 10 ? x.toFixed(2) : x.toFixed(1));
const mb = (kb: number): string => `${Math.round(kb / 1024)}`;

/**
 * LanceDB's IVF-PQ at our recall: the first of its searched settings (tuned, then the
 * {@link RECALL_LADDER}) whose recall@10 reaches `ours`; when none does, the one with the
 * highest recall (`reached: false`).
 */
function atRecall(
  lance: LanceResult,
  recall: Row["lanceRecall"],
  ours: number,
): (LanceLatency & LanceSetting & { recall: number; reached: boolean }) | undefined {
  const steps: (LanceLatency & LanceSetting & { recall: number })[] = [];
  if (lance.tuned && recall.tuned !== undefined)
    steps.push({ ...TUNED, ...lance.tuned, recall: recall.tuned });
  for (const [i, step] of (lance.ladder ?? []).entries()) {
    const r = recall.ladder?.[i];
    if (r !== undefined) steps.push({ ...step, recall: r });
  }
  const reached = steps.find((step) => step.recall >= ours);
  if (reached) return { ...reached, reached: true };
  const best = steps.reduce<(typeof steps)[number] | undefined>(
    (b, s) => (!b || s.recall > b.recall ? s : b),
    undefined,
  );
  return best ? { ...best, reached: false } : undefined;
}

function printTable(rows: Row[]): void {
  const out: string[] = [];
  out.push(
    "| size | ingest chunks/s | bytes/chunk | RSS MB ingest/search | keyword p50/p95 ms | vector p50/p95 ms | hybrid p50/p95 ms | vector recall@10 | hybrid top-10 = exact-vector hybrid | " +
      "LanceDB FTS p50/p95 | LanceDB flat p50 (recall) | LanceDB IVF-PQ p50/p95 (recall) | LanceDB IVF-PQ tuned p50/p95 (recall) | " +
      "LanceDB IVF-PQ at our recall p50/p95 (recall; nprobes/refineFactor) | LanceDB hybrid p50/p95 | " +
      "ratio ours/LanceDB p50: kw / vec (IVF-PQ, tuned, at our recall) / hybrid |",
  );
  out.push("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
  // LanceDB's setting at our recall, per row: shown in the table and in the goal lines.
  const equals = new Map(
    rows.map((r) => [r, r.lance ? atRecall(r.lance, r.lanceRecall, r.recall) : undefined]),
  );
  for (const r of rows) {
    const l = r.search.latency;
    const ingestRate = r.ingest.chunks / Math.max(1e-9, (r.ingest.wallMs - r.ingest.embedMs) / 1000);
    const lance = r.lance;
    const ratio = (ours: number, theirs: number | undefined): string =>
      theirs === undefined || theirs <= 0 ? "–" : `${(ours / theirs).toFixed(1)}×`;
    const equal = equals.get(r);
    const lanceCells = lance
      ? [
          lance.fts ? `${ms(lance.fts.p50)} / ${ms(lance.fts.p95)}` : "could not run",
          lance.flat ? `${ms(lance.flat.p50)} (${r.lanceRecall.flat?.toFixed(3)})` : "–",
          lance.ivfpq
            ? `${ms(lance.ivfpq.p50)} / ${ms(lance.ivfpq.p95)} (${r.lanceRecall.ivfpq?.toFixed(3)})`
            : "could not run",
          lance.tuned
            ? `${ms(lance.tuned.p50)} / ${ms(lance.tuned.p95)} (${r.lanceRecall.tuned?.toFixed(3)})`
            : "could not run",
          equal
            ? `${ms(equal.p50)} / ${ms(equal.p95)} (${equal.recall.toFixed(3)}${equal.reached ? "" : ", max"}; ` +
              `${equal.nprobes}/${equal.refineFactor})`
            : "could not run",
          lance.hybrid ? `${ms(lance.hybrid.p50)} / ${ms(lance.hybrid.p95)}` : "could not run",
          `${ratio(l.keyword.p50, lance.fts?.p50)} / ${ratio(l.vector_only.p50, lance.ivfpq?.p50)}, ` +
            `${ratio(l.vector_only.p50, lance.tuned?.p50)}, ${ratio(l.vector_only.p50, equal?.p50)} / ` +
            `${ratio(l.hybrid.p50, lance.hybrid?.p50)}`,
        ]
      : [r.lanceError ? "could not run" : "skipped", "–", "–", "–", "–", "–", "–"];
    out.push(
      `| ${fmtSize(r.size)} (${r.ingest.chunks.toLocaleString("en-US")}) | ${ingestRate.toFixed(0)} | ${Math.round(r.bytes / r.ingest.chunks).toLocaleString("en-US")} | ` +
        `${mb(r.ingest.maxRssKb)} / ${mb(r.search.maxRssKb)} | ${ms(l.keyword.p50)} / ${ms(l.keyword.p95)} | ` +
        `${ms(l.vector_only.p50)} / ${ms(l.vector_only.p95)} | ${ms(l.hybrid.p50)} / ${ms(l.hybrid.p95)} | ${r.recall.toFixed(3)} | ` +
        `${r.search.hybridAgreement === undefined ? "–" : r.search.hybridAgreement.toFixed(3)} | ${lanceCells.join(" | ")} |`,
    );
  }
  console.log(out.join("\n"));
  console.log("");
  console.log("Goal (issue 14), per size:");
  for (const r of rows) {
    const l = r.search.latency;
    const rate = r.ingest.chunks / Math.max(1e-9, (r.ingest.wallMs - r.ingest.embedMs) / 1000);
    const perChunk = r.bytes / r.ingest.chunks;
    const bound =
      r.ingest.textBytes === undefined
        ? undefined
        : (2 * (r.ingest.textBytes + r.ingest.chunks * HASH_DIM * 4)) / r.ingest.chunks;
    const mark = (ok: boolean): string => (ok ? "met" : "NOT met");
    const checks = [
      `keyword p50 ${ms(l.keyword.p50)} ms ≤ 20: ${mark(l.keyword.p50 <= 20)}`,
      `vector p50 ${ms(l.vector_only.p50)} ms ≤ 20: ${mark(l.vector_only.p50 <= 20)}`,
      `hybrid p50/p95 ${ms(l.hybrid.p50)}/${ms(l.hybrid.p95)} ms ≤ 30/80: ${mark(l.hybrid.p50 <= 30 && l.hybrid.p95 <= 80)}`,
      `recall@10 ${r.recall.toFixed(3)} ≥ 0.95: ${mark(r.recall >= 0.95)}`,
      `ingest ${rate.toFixed(0)} chunks/s ≥ 1,000: ${mark(rate >= 1000)}`,
      bound === undefined
        ? `data dir ${Math.round(perChunk)} B/chunk (text bytes not recorded)`
        : `data dir ${Math.round(perChunk)} ≤ ${Math.round(bound)} B/chunk (2 × (text + vector)): ${mark(perChunk <= bound)}`,
      `peak RSS ${mb(r.ingest.maxRssKb)} / ${mb(r.search.maxRssKb)} MB ≤ 2,048: ${mark(Math.max(r.ingest.maxRssKb, r.search.maxRssKb) <= 2048 * 1024)}`,
    ];
    if (r.lance?.hybrid)
      checks.push(`hybrid vs LanceDB hybrid ${(l.hybrid.p50 / r.lance.hybrid.p50).toFixed(2)}×`);
    const equal = equals.get(r);
    if (equal)
      checks.push(
        `vector vs LanceDB IVF-PQ at ${equal.reached ? "our" : "its highest"} recall (${equal.recall.toFixed(3)}) ` +
          `${(l.vector_only.p50 / equal.p50).toFixed(2)}×`,
      );
    console.log(`- ${fmtSize(r.size)}: ${checks.join("; ")}`);
  }
  console.log("");
  for (const r of rows) {
    const i = r.ingest;
    console.log(
      `${fmtSize(r.size)}: ${i.chunks.toLocaleString("en-US")} chunks from ${i.documents.toLocaleString("en-US")} documents ` +
        `(the corpus has ${i.baseDocs.toLocaleString("en-US")} real documents; passes over it: ${i.copies}, ` +
        `${i.copies > 1 ? `passes 2–${i.copies} are copies whose words carry suffixes, see bench/scale.ts` : "no copies needed"}); ` +
        `ingest wall ${duration(i.wallMs)}, of which embedding requests ${duration(i.embedMs)} ` +
        `(${Math.round(i.chunks / (i.wallMs / 1000)).toLocaleString("en-US")} chunks/s over the whole wall time); ` +
        `ingest process CPU ${(i.cpuMs / i.chunks).toFixed(2)} ms/chunk (user + system, embedding client included; ` +
        `independent of other load), ${Math.round(i.writtenBytes / i.chunks / 1024).toLocaleString("en-US")} KB written/chunk; ` +
        `extraction of the ${i.baseFiles} base files ${duration(i.extractMs)} (${(i.baseChars / 1e6).toFixed(1)} M chars incl. JSONL corpora), not in chunks/s; ` +
        `data dir ${(r.bytes / 1e6).toFixed(0)} MB; run ${duration(r.seconds * 1000)}.`,
    );
    const l = r.lance;
    if (l) {
      console.log(
        `  LanceDB: ${l.rows.toLocaleString("en-US")} rows added in ${duration(l.addMs)} (${Math.round(l.rows / (l.addMs / 1000))} rows/s), ` +
          `${Math.round(l.bytes / Math.max(1, l.rows)).toLocaleString("en-US")} bytes/row, peak RSS ${mb(l.maxRssKb)} MB` +
          `${l.ivfpq ? `, IVF-PQ build ${duration(l.ivfpq.buildMs)}` : ""}${l.fts ? `, FTS build ${duration(l.fts.buildMs)}${l.fts.failed ? ` (${l.fts.failed} FTS queries failed)` : ""}` : ""}` +
          `${l.flat ? `, flat p95 ${ms(l.flat.p95)} ms` : ""}` +
          `${l.notes.length ? `; could not run: ${l.notes.join("; ")}` : ""}.`,
      );
    } else if (r.lanceError) {
      console.log(`  LanceDB could not run: ${r.lanceError}`);
    }
  }
}

async function main(): Promise<void> {
  const sizes = String(values.sizes).split(",").map(parseSize);
  const nQueries = Number(values.queries);
  if (!Number.isInteger(nQueries) || nQueries < 1) throw new Error(`bad --queries "${values.queries}"`);
  const indexTimeoutMs = Number(values["index-timeout"]) * 1000;
  const reuse = values.reuse === undefined ? undefined : resolve(values.reuse);
  const keep = values.keep || reuse !== undefined;
  const root = reuse ?? mkdtempSync(join(values.tmp ?? tmpdir(), "kl-bench-scale-"));
  const { measured, warmup } = loadQueries(nQueries);
  let server: HashEmbeddingServer | undefined;
  const cleanup = (): void => {
    if (!keep) rmSync(root, { recursive: true, force: true });
  };
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.once(signal, () => {
      cleanup();
      process.exit(130);
    });
  }
  const rows: Row[] = [];
  // Extracted once, by this process, for every size's ingest (see writeBaseCorpus).
  const corpusFile = join(root, "base-corpus.jsonl");
  try {
    // --cheap-vectors: a model that costs almost no CPU here (ingest timing only: its
    // vectors are not similar for similar texts, so recall and search figures mean nothing).
    server = await startHashEmbeddingServer(0, values["cheap-vectors"] ? cheapEmbed : hashEmbed);
    if (values["cheap-vectors"])
      log("--cheap-vectors: time ingest only; search figures of this run mean nothing");
    log(`embedding server at ${server.baseUrl}; data under ${root}; ${measured.length} queries`);
    for (const size of sizes) {
      const started = performance.now();
      const dataDir = join(root, `kl-${fmtSize(size)}`);
      // The ingest's figures are kept beside its data directory, for --reuse.
      const ingestFile = join(root, `ingest-${fmtSize(size)}.json`);
      let ingest: IngestResult;
      if (reuse !== undefined && existsSync(ingestFile) && existsSync(dataDir)) {
        ingest = JSON.parse(readFileSync(ingestFile, "utf8")) as IngestResult;
        // The KB points at the embedding server of the run that ingested it; this run's
        // server listens on another port (the stored vectors stay valid: same model).
        {
          const db = openDatabase(dataDir);
          db.prepare("UPDATE kbs SET config = json_set(config, '$.embedding.baseUrl', ?) WHERE name = ?").run(
            server.baseUrl,
            KB,
          );
          db.close();
        }
        log(`=== ${fmtSize(size)} chunks: reusing ${dataDir} (ingest figures from ${ingestFile}) ===`);
      } else {
        log(`=== ${fmtSize(size)} chunks: ingest ===`);
        if (!existsSync(corpusFile)) {
          const header = await writeBaseCorpus(corpusFile);
          log(
            `base corpus: ${header.documents} documents (${header.files} files extracted in ${duration(header.extractMs)}, ` +
              `${header.failed} failed; SciFact and Cranfield from JSONL), ${(header.chars / 1e6).toFixed(1)} M chars, in ${corpusFile}`,
          );
        }
        ingest = await runChild<IngestResult>("ingest", {
          dataDir,
          corpusFile,
          target: size,
          baseUrl: server.baseUrl,
          noChunkThread: values["no-chunk-thread"],
        } satisfies IngestJob);
      }
      if (ingest.textBytes === undefined) {
        // Summed here, not in the ingest process: this query's page cache is not the ingest's.
        const db = openDatabase(dataDir);
        ingest.textBytes = Number(
          db
            .prepare("SELECT coalesce(sum(length(CAST(text AS BLOB))), 0) FROM chunks WHERE kb = ?")
            .pluck()
            .get(KB),
        );
        db.close();
        writeFileSync(ingestFile, JSON.stringify(ingest));
      }
      const bytes = dirBytes(dataDir);
      log(
        `ingested ${ingest.chunks} chunks: ${(ingest.chunks / ((ingest.wallMs - ingest.embedMs) / 1000)).toFixed(0)} chunks/s without embedding ` +
          `(${(ingest.chunks / (ingest.wallMs / 1000)).toFixed(0)} with it), ` +
          `${Math.round(bytes / ingest.chunks)} bytes/chunk`,
      );
      log(`=== ${fmtSize(size)}: search ===`);
      const search = await runChild<SearchResult>("search", {
        dataDir,
        baseUrl: server.baseUrl,
        queries: measured,
        warmup,
      } satisfies SearchJob);
      let lance: LanceResult | undefined;
      let lanceError: string | undefined;
      if (!values["skip-lance"]) {
        log(`=== ${fmtSize(size)}: LanceDB ===`);
        try {
          lance = await runChild<LanceResult>(
            "lance",
            {
              dataDir,
              lanceDir: join(root, `lance-${fmtSize(size)}`),
              queries: measured,
              warmup,
              indexTimeoutMs,
            } satisfies LanceJob,
            // Adding rows and searching are bounded by size; the two builds by the timeout.
            2 * indexTimeoutMs + 3_600_000,
          );
        } catch (error) {
          lanceError = (error as Error).message;
          log(`LanceDB could not run: ${lanceError}`);
        }
        rmSync(join(root, `lance-${fmtSize(size)}`), { recursive: true, force: true });
      }
      log(`=== ${fmtSize(size)}: exact search for recall ===`);
      const returned = [
        search.vectorIds,
        lance?.flat?.ids ?? [],
        lance?.ivfpq?.ids ?? [],
        lance?.tuned?.ids ?? [],
        ...(lance?.ladder ?? []).map((step) => step.ids),
      ];
      // The exact 10th score per query is kept beside the data directory: a --reuse run
      // only looks up the scores of the ids the engines returned.
      const kthFile = join(root, `exact-${fmtSize(size)}.json`);
      const queriesKey = hash32(measured.join("\u0000"));
      const cached = existsSync(kthFile)
        ? (JSON.parse(readFileSync(kthFile, "utf8")) as { queries: number; chunks: number; kth: number[] })
        : undefined;
      let exact: { kth: number[]; scoreOf: Map<number, number>[] };
      if (cached && cached.queries === queriesKey && cached.chunks === ingest.chunks) {
        log(`exact 10th scores from ${kthFile}`);
        exact = { kth: cached.kth, scoreOf: exactScoresOf(dataDir, measured, returned) };
      } else {
        exact = exactSearch(dataDir, measured, returned, ingest.chunks);
        writeFileSync(
          kthFile,
          JSON.stringify({ queries: queriesKey, chunks: ingest.chunks, kth: exact.kth }),
        );
      }
      const row: Row = {
        size,
        ingest,
        bytes,
        search,
        recall: recallAt10(search.vectorIds, exact.kth, exact.scoreOf),
        lanceRecall: {
          flat: lance?.flat ? recallAt10(lance.flat.ids, exact.kth, exact.scoreOf) : undefined,
          ivfpq: lance?.ivfpq ? recallAt10(lance.ivfpq.ids, exact.kth, exact.scoreOf) : undefined,
          tuned: lance?.tuned ? recallAt10(lance.tuned.ids, exact.kth, exact.scoreOf) : undefined,
          ladder: lance?.ladder?.map((step) => recallAt10(step.ids, exact.kth, exact.scoreOf)),
        },
        seconds: (performance.now() - started) / 1000,
      };
      if (lance) row.lance = lance;
      if (lanceError) row.lanceError = lanceError;
      rows.push(row);
      if (!keep) rmSync(dataDir, { recursive: true, force: true });
      log(`=== ${fmtSize(size)} done in ${duration(row.seconds * 1000)} ===`);
    }
    log(
      `embedding server: ${server.stats.requests} requests, ${server.stats.texts} texts, ${duration(server.stats.ms)} computing`,
    );
    printTable(rows);
    if (keep) console.log(`\ndata kept under ${root}`);
  } finally {
    await server?.close();
    cleanup();
  }
}

async function child(role: string, job: string): Promise<void> {
  const parsed = JSON.parse(job) as unknown;
  const result =
    role === "ingest"
      ? await roleIngest(parsed as IngestJob)
      : role === "search"
        ? await roleSearch(parsed as SearchJob)
        : role === "lance"
          ? await roleLance(parsed as LanceJob)
          : undefined;
  if (result === undefined) throw new Error(`unknown role "${role}"`);
  await new Promise<void>((resolveSend, reject) =>
    process.send?.(result, (error: Error | null) => (error ? reject(error) : resolveSend())),
  );
  // LanceDB keeps native threads alive; the result is sent, so leave now.
  process.exit(0);
}

if (values.role) {
  await child(values.role, String(values.job ?? "{}"));
} else {
  await main();
}
