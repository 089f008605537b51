/**
 * Page-level retrieval benchmark over PDFs (the FinanceBench `financebench_dev` layout):
 * ingest a folder of PDFs, ask each question over all of them, and score whether a
 * result comes from the evidence file with a page range covering an evidence page
 * (page level) and from the evidence file at all (document level).
 *
 * Layout of the benchmark folder:
 * - `pdfs/*.pdf`: the documents;
 * - `queries.jsonl`: `{_id, text, metadata: {doc_name, question_type, answer}}`;
 * - `qrels/<split>.tsv`: header line, then `query-id  <file>.pdf#page=N  score`
 *   (N 1-based; several lines per query when several pages hold the evidence).
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import type { RetrievalMode } from "../config.js";
import { KnowledgeLayerError } from "../errors.js";
import type { IngestProgress, IngestSummary } from "../ingest/pipeline.js";
import type { KnowledgeLayer, SearchResult } from "../knowledge-layer.js";
import { percentile } from "./beir.js";

/** One question of a page benchmark with its evidence. */
export interface PageQuery {
  id: string;
  text: string;
  /** `question_type` from the query's metadata (`unknown` when absent). */
  type: string;
  /** Evidence: file name (with `.pdf`) → 1-based pages. A query may have several files. */
  evidence: Map<string, Set<number>>;
}

/** A page benchmark loaded in memory. */
export interface PageDataset {
  name: string;
  /** Absolute folder holding the PDFs. */
  documentsDir: string;
  /** File names of the documents (`3M_2018_10K.pdf`). */
  documents: string[];
  /** Judged queries, in `queries.jsonl` order. */
  queries: PageQuery[];
}

/** Hit rates and MRR of one level (page or document), averaged over queries. */
export interface HitScores {
  hit1: number;
  hit5: number;
  hit10: number;
  /** Mean reciprocal rank of the first hit within the top 10 (0 when none). */
  mrr: number;
}

/** Scores of one group of queries (all, or one question type). */
export interface PageGroupScores {
  group: string;
  queries: number;
  page: HitScores;
  document: HitScores;
}

/** What one query got: ranks (1-based, 0 = not in the top 10) and the top results. */
export interface PageQueryResult {
  id: string;
  type: string;
  pageRank: number;
  documentRank: number;
  /** `file#page` or `file#pages=a-b` of the top results, best first. */
  top: string[];
}

/** Scores of one retrieval mode. */
export interface PageModeResult {
  mode: RetrievalMode;
  /** Overall first, then one row per question type (sorted by name). */
  groups: PageGroupScores[];
  /** Search latency percentiles (ms). */
  latency: { p50: number; p95: number };
  perQuery: PageQueryResult[];
}

/** The report of {@link evaluatePages}. */
export interface PageReport {
  dataset: string;
  kb: string;
  documents: number;
  queries: number;
  ingest: IngestSummary;
  results: PageModeResult[];
}

/** Options for {@link evaluatePages}. */
export interface PageEvalOptions {
  /** Modes to evaluate (default: the KB's default mode). */
  modes?: RetrievalMode[];
  /** Knowledge base to ingest into; created with default settings when missing. Default `pages-<dataset>`. */
  kb?: string;
  /** Ingest without vectors (only `keyword` can then be evaluated). Default: embed unless every mode is keyword. */
  embed?: boolean;
  /** Qrels split (`qrels/<split>.tsv`). Default `test`. */
  split?: string;
  /** Evaluate only the first n queries. */
  limit?: number;
  onProgress?: (
    event: IngestProgress | { phase: "query"; mode: RetrievalMode; done: number; total: number },
  ) => void;
}

/** The cut-offs scored; results beyond the last are not fetched. */
const DEPTH = 10;

/** Parses `<file>#page=N` (the qrels' corpus id): file name and 1-based page, or undefined. */
export function parsePageId(id: string): { file: string; page: number } | undefined {
  const m = /^(.+)#page=(\d+)$/.exec(id.trim());
  if (!m) return undefined;
  const page = Number(m[2]);
  return page >= 1 ? { file: m[1] as string, page } : undefined;
}

/**
 * Loads a page benchmark folder (see the module comment).
 * @throws KnowledgeLayerError naming a missing file, an invalid line or a qrel whose
 *   document is not in `pdfs/`.
 */
export function loadPageDataset(dir: string, split = "test"): PageDataset {
  const root = resolve(dir);
  const need = (file: string): string => {
    const p = join(root, file);
    if (!existsSync(p))
      throw new KnowledgeLayerError(
        `${p}: not found (expected layout: pdfs/*.pdf, queries.jsonl, qrels/${split}.tsv with <file>.pdf#page=N ids)`,
      );
    return p;
  };
  const documentsDir = need("pdfs");
  const documents = readdirSync(documentsDir)
    .filter((f) => f.toLowerCase().endsWith(".pdf"))
    .sort();
  const known = new Set(documents);
  const raw = new Map<string, { text: string; type: string }>();
  readFileSync(need("queries.jsonl"), "utf8")
    .split("\n")
    .forEach((line, i) => {
      if (!line.trim()) return;
      let o: { _id?: unknown; text?: unknown; metadata?: { question_type?: unknown } };
      try {
        o = JSON.parse(line);
      } catch {
        throw new KnowledgeLayerError(`${join(root, "queries.jsonl")}:${i + 1}: invalid JSON`);
      }
      if (typeof o._id !== "string" || typeof o.text !== "string" || o.text.trim() === "")
        throw new KnowledgeLayerError(
          `${join(root, "queries.jsonl")}:${i + 1}: expected string _id and text`,
        );
      const type = typeof o.metadata?.question_type === "string" ? o.metadata.question_type : "unknown";
      raw.set(o._id, { text: o.text, type });
    });
  const evidence = new Map<string, Map<string, Set<number>>>();
  const qrelsPath = need(`qrels/${split}.tsv`);
  readFileSync(qrelsPath, "utf8")
    .split("\n")
    .slice(1)
    .forEach((line, i) => {
      const [q, d, s] = line.trim().split("\t");
      if (!q || !d) return;
      if (s !== undefined && Number(s) <= 0) return;
      const ref = parsePageId(d);
      if (!ref)
        throw new KnowledgeLayerError(`${qrelsPath}:${i + 2}: "${d}" is not <file>#page=N (1-based page)`);
      if (!known.has(ref.file))
        throw new KnowledgeLayerError(`${qrelsPath}:${i + 2}: ${ref.file} is not in ${documentsDir}`);
      const files = evidence.get(q) ?? new Map<string, Set<number>>();
      const pages = files.get(ref.file) ?? new Set<number>();
      pages.add(ref.page);
      files.set(ref.file, pages);
      evidence.set(q, files);
    });
  const queries: PageQuery[] = [];
  for (const [id, q] of raw) {
    const ev = evidence.get(id);
    if (ev) queries.push({ id, text: q.text, type: q.type, evidence: ev });
  }
  return { name: basename(root), documentsDir, documents, queries };
}

/** File name and page range of a result (`page`/`pageEnd` from its attribution). */
function resultPages(r: SearchResult): { file: string; first?: number; last?: number } {
  const file = basename(String(r.source.path ?? r.source.uri));
  const first = typeof r.source.page === "number" ? r.source.page : undefined;
  const last = typeof r.source.pageEnd === "number" ? r.source.pageEnd : first;
  return { file, first, last };
}

/**
 * 1-based ranks of the first page hit (a result from an evidence file whose page
 * range covers one of its evidence pages) and the first document hit (a result
 * from an evidence file) among `results`; 0 when there is none.
 */
export function hitRanks(
  results: readonly SearchResult[],
  evidence: ReadonlyMap<string, ReadonlySet<number>>,
): { pageRank: number; documentRank: number } {
  let pageRank = 0;
  let documentRank = 0;
  results.forEach((r, i) => {
    const { file, first, last } = resultPages(r);
    const pages = evidence.get(file);
    if (!pages) return;
    if (documentRank === 0) documentRank = i + 1;
    if (pageRank === 0 && first !== undefined && last !== undefined) {
      for (const p of pages) if (p >= first && p <= last) pageRank = i + 1;
    }
  });
  return { pageRank, documentRank };
}

/** Hit@1/5/10 and MRR@10 of a list of 1-based first-hit ranks (0 = miss). */
export function hitScores(ranks: readonly number[]): HitScores {
  const n = ranks.length || 1;
  const within = (k: number): number => ranks.filter((r) => r > 0 && r <= k).length / n;
  return {
    hit1: within(1),
    hit5: within(5),
    hit10: within(10),
    mrr: ranks.reduce((s, r) => s + (r > 0 && r <= DEPTH ? 1 / r : 0), 0) / n,
  };
}

/** Overall and per-type scores of per-query results. */
export function groupScores(perQuery: readonly PageQueryResult[]): PageGroupScores[] {
  const group = (name: string, rows: readonly PageQueryResult[]): PageGroupScores => ({
    group: name,
    queries: rows.length,
    page: hitScores(rows.map((r) => r.pageRank)),
    document: hitScores(rows.map((r) => r.documentRank)),
  });
  const types = [...new Set(perQuery.map((q) => q.type))].sort();
  return [
    group("all", perQuery),
    ...types.map((t) =>
      group(
        t,
        perQuery.filter((q) => q.type === t),
      ),
    ),
  ];
}

/** `file#page=N` or `file#pages=a-b` of a result, for reports. */
function label(r: SearchResult): string {
  const { file, first, last } = resultPages(r);
  if (first === undefined) return file;
  return first === last ? `${file}#page=${first}` : `${file}#pages=${first}-${last}`;
}

/**
 * Runs a page benchmark through the real ingest and search path: the PDFs are
 * ingested into a knowledge base (created with default settings when missing;
 * unchanged files are skipped, and the embedding cache serves texts embedded
 * before), then every judged question is searched over all of them with each mode
 * (top 10, otherwise the KB's settings), and page- and document-level hit@1/5/10
 * and MRR@10 are reported overall and per question type.
 * @throws KnowledgeLayerError for a malformed benchmark folder (see {@link loadPageDataset}),
 *   or when a mode needs vectors and `embed` is false.
 */
export async function evaluatePages(
  kl: KnowledgeLayer,
  dir: string,
  options: PageEvalOptions = {},
): Promise<PageReport> {
  const data = loadPageDataset(dir, options.split ?? "test");
  const kbName = options.kb ?? `pages-${data.name}`.replace(/[^A-Za-z0-9_.-]/g, "-").slice(0, 64);
  const kb = (await kl.findKb(kbName)) ?? (await kl.createKb(kbName));
  const modes = options.modes && options.modes.length > 0 ? options.modes : [kb.config.retrieval.mode];
  const embed = options.embed ?? modes.some((m) => m !== "keyword");
  if (!embed && modes.some((m) => m !== "keyword"))
    throw new KnowledgeLayerError(
      `mode ${modes.find((m) => m !== "keyword")} needs vectors; ingest with embeddings or evaluate keyword only`,
    );
  const ingest = await kl.ingest([data.documentsDir], { kb: kbName, embed, onProgress: options.onProgress });
  if (ingest.errors.length > 0)
    throw new KnowledgeLayerError(
      `ingest failed for ${ingest.errors.map((e) => `${basename(e.path)} (${e.reason})`).join(", ")}`,
    );
  const queries = options.limit ? data.queries.slice(0, options.limit) : data.queries;
  const results: PageModeResult[] = [];
  for (const mode of modes) {
    const perQuery: PageQueryResult[] = [];
    const times: number[] = [];
    for (const [i, q] of queries.entries()) {
      const t0 = performance.now();
      const response = await kl.search(q.text, { kbs: [kbName], mode, topK: DEPTH });
      times.push(performance.now() - t0);
      const top = response.results.slice(0, DEPTH);
      perQuery.push({ id: q.id, type: q.type, ...hitRanks(top, q.evidence), top: top.map(label) });
      options.onProgress?.({ phase: "query", mode, done: i + 1, total: queries.length });
    }
    results.push({
      mode,
      groups: groupScores(perQuery),
      latency: { p50: percentile(times, 0.5), p95: percentile(times, 0.95) },
      perQuery,
    });
  }
  return {
    dataset: data.name,
    kb: kbName,
    documents: data.documents.length,
    queries: queries.length,
    ingest,
    results,
  };
}

/** The report as a plain-text table: one row per mode and group. */
export function formatPageReport(report: PageReport): string {
  const f = (x: number): string => x.toFixed(3);
  const lines = [
    `dataset ${report.dataset} (kb ${report.kb}): ${report.documents} documents, ${report.queries} questions`,
    "mode           group               n | page hit@1  hit@5  hit@10  MRR | doc hit@1  hit@5  hit@10  MRR | p50 ms",
  ];
  for (const r of report.results) {
    for (const g of r.groups) {
      const p = g.page;
      const d = g.document;
      lines.push(
        `${r.mode.padEnd(14)} ${g.group.padEnd(18)} ${String(g.queries).padStart(2)} |      ${f(p.hit1)}  ${f(p.hit5)}  ${f(p.hit10)}  ${f(p.mrr)} |     ${f(d.hit1)}  ${f(d.hit5)}  ${f(d.hit10)}  ${f(d.mrr)} | ${g.group === "all" ? r.latency.p50.toFixed(0) : ""}`,
      );
    }
  }
  return lines.join("\n");
}
