import cliProgress from "cli-progress";
import type { SizeMeasure } from "../chunk/measure.js";
import { validateChunkingConfig } from "../chunk/spans.js";
import type { ChunkingConfig } from "../config.js";
import { countOf, displayName } from "../display.js";
import { type ExtractOptions, resolveExtractOptions } from "../extract/contract.js";
import { formatBytes } from "../extract/util.js";
import type { IngestProgress, IngestSummary } from "../ingest/pipeline.js";
import {
  collectionOf,
  describeStore,
  type KbCounts,
  type KbRecord,
  type SearchResponse,
} from "../knowledge-layer.js";
import { formatCitation } from "../retrieve/attribution.js";
import { redactSecrets } from "../secrets.js";
import type { Chunk, ExtractedDocument } from "../types.js";

/** What an ingest progress display knows: sources chunked, chunks made and embedded, time spent. */
export interface IngestState {
  /** Sources read and chunked, of `total`. */
  done: number;
  total: number;
  /** Chunks made so far. */
  chunked: number;
  /** Chunks embedded so far; undefined while no embedding has been reported (e.g. `--no-embed`). */
  embedded: number | undefined;
  elapsedMs: number;
  /**
   * Where the rate is measured from: the time (ms since the start) and fraction of the first
   * progress counted the current way (in sources, or in chunks once embedding is reported).
   * Without it the rate runs from the start, start-up included.
   */
  since?: { elapsedMs: number; fraction: number };
}

/** Measured progress an ETA needs past its {@link IngestState.since} point: 1 s and 1% of the work. */
const ETA_MIN_MS = 1000;
const ETA_MIN_FRACTION = 0.01;

/**
 * How far an ingest is, in [0, 1], and the seconds left (undefined before
 * there is anything to extrapolate from). While chunks are being embedded, the
 * work is counted in chunks: the total is estimated from the chunks per source
 * so far, since embedding is most of the time; otherwise in sources. With
 * `since`, the rate is the progress since that point over the time since it (at
 * least 1 s and 1% of the work, else no ETA yet), so start-up (loading the model,
 * starting workers) does not inflate the first estimates.
 */
export function ingestEstimate(s: IngestState): { fraction: number; etaSeconds: number | undefined } {
  let fraction = s.total > 0 ? s.done / s.total : 1;
  if (s.embedded !== undefined && s.done > 0 && s.chunked > 0) {
    const estimatedChunks = Math.max(s.chunked, (s.chunked / s.done) * s.total);
    fraction = Math.min(fraction, s.embedded / estimatedChunks);
  }
  if (fraction <= 0) return { fraction: 0, etaSeconds: undefined };
  if (s.since) {
    const ms = s.elapsedMs - s.since.elapsedMs;
    const gained = fraction - s.since.fraction;
    if (ms < ETA_MIN_MS || gained < ETA_MIN_FRACTION) return { fraction, etaSeconds: undefined };
    return { fraction, etaSeconds: ((ms / 1000) * (1 - fraction)) / gained };
  }
  return { fraction, etaSeconds: ((s.elapsedMs / 1000) * (1 - fraction)) / fraction };
}

/**
 * One line of ingest progress: sources read and chunked, chunks embedded,
 * chunks per second since the run started, and the time left (see
 * {@link ingestEstimate}; left out when `eta` is false), e.g. `120/5183 sources · 180 chunks, 160 embedded · 95.0 chunks/s · eta 53s`.
 */
export function ingestStatus(s: IngestState, eta = true): string {
  const parts = [`${s.done}/${s.total} sources`];
  if (s.embedded === undefined) parts.push(countOf(s.chunked, "chunk"));
  else parts.push(`${countOf(s.chunked, "chunk")}, ${s.embedded} embedded`);
  if (s.embedded && s.elapsedMs > 0) parts.push(`${(s.embedded / (s.elapsedMs / 1000)).toFixed(1)} chunks/s`);
  const { fraction, etaSeconds } = ingestEstimate(s);
  if (eta && etaSeconds !== undefined && fraction < 1) parts.push(`eta ${formatSeconds(etaSeconds)}`);
  return parts.join(" · ");
}

/** A duration as `42s`, `3m05s` or `2h07m`. */
export function formatSeconds(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

/** Steps of the ingest bar (its value is a fraction of the work, see {@link ingestEstimate}). */
const INGEST_STEPS = 1000;

/**
 * Renders progress on stderr: a bar on a terminal; otherwise (logs, CI) one
 * plain line at most every 10 seconds; nothing when `mode` is `off`. During
 * an ingest both show the chunks embedded so far, chunks/s and an ETA.
 */
export class ProgressReporter {
  private bar: cliProgress.SingleBar | undefined;
  private label = "";
  private lastLine = Number.NEGATIVE_INFINITY;
  /** When the ingest started (its first event), for chunks/s. */
  private startedAt = 0;
  private ingest: Omit<IngestState, "elapsedMs"> = { done: 0, total: 0, chunked: 0, embedded: undefined };
  /**
   * The furthest the ingest bar has shown, in [0, 1]: it never moves back (sources are
   * chunked ahead of embedding, so the estimate drops when the first chunks are embedded).
   */
  private ingestShown = 0;
  /** The ETA's starting point ({@link IngestState.since}): reset when the ingest starts being counted in chunks. */
  private since: IngestState["since"];

  /** @param now clock in ms (tests pass their own). */
  constructor(
    private readonly mode: "bar" | "lines" | "off",
    private readonly now: () => number = Date.now,
    private readonly write: (line: string) => void = (line) => process.stderr.write(line),
  ) {}

  /** Picks `bar` on a TTY, `lines` otherwise, `off` when `quiet`. */
  static forStderr(quiet: boolean): ProgressReporter {
    return new ProgressReporter(quiet ? "off" : process.stderr.isTTY ? "bar" : "lines");
  }

  /** Handles a progress event from ingest or evaluation. */
  update(
    event:
      | IngestProgress
      | { phase: "query"; mode: string; done: number; total: number }
      | { phase: "vectors"; label: string; done: number; total: number },
  ): void {
    if (this.mode === "off") return;
    if (event.phase === "discovered" || event.phase === "source" || event.phase === "embedded") {
      if (this.startedAt === 0) this.startedAt = this.now();
      if (event.phase === "discovered") {
        this.ingest = { done: 0, total: event.total, chunked: 0, embedded: undefined };
        this.ingestShown = 0;
        this.since = undefined;
      }
      if (event.phase === "source") {
        this.ingest = { ...this.ingest, done: event.done, total: event.total, chunked: event.chunks ?? 0 };
      }
      if (event.phase === "embedded") {
        // The first embedded chunks switch the count from sources to chunks: the ETA starts over.
        if (this.ingest.embedded === undefined) this.since = undefined;
        this.ingest = { ...this.ingest, embedded: event.chunks };
      }
      if (!this.since) {
        const { fraction } = ingestEstimate(this.state());
        if (fraction > 0) this.since = { elapsedMs: this.now() - this.startedAt, fraction };
      }
    }
    if (this.mode === "lines") {
      if (event.phase === "discovered") return;
      const now = this.now();
      const last =
        event.phase === "source" || event.phase === "embedded" ? this.finished() : event.done === event.total;
      if (now - this.lastLine < 10_000 && !last) return;
      this.lastLine = now;
      if (event.phase === "source" || event.phase === "embedded") {
        this.write(`ingest: ${ingestStatus(this.state())}\n`);
        return;
      }
      const what = event.phase === "query" ? `eval ${event.mode}` : event.label;
      this.write(`${what}: ${event.done}/${event.total}\n`);
      return;
    }
    if (event.phase === "discovered") {
      this.start("ingest", INGEST_STEPS);
    } else if (event.phase === "source" || event.phase === "embedded") {
      if (!this.bar) this.start("ingest", INGEST_STEPS);
      const item = event.phase === "source" ? { item: shorten(displayName(event.path)) } : {};
      const state = this.state();
      const { fraction, etaSeconds } = ingestEstimate(state);
      this.ingestShown = Math.max(this.ingestShown, fraction);
      this.bar?.update(Math.round(this.ingestShown * INGEST_STEPS), {
        ...item,
        status: ingestStatus(state, false),
        left: etaSeconds === undefined ? "-" : formatSeconds(etaSeconds),
      });
    } else if (event.phase === "vectors") {
      if (this.label !== event.label) this.start(event.label, event.total);
      this.bar?.update(event.done, { item: "" });
    } else if (event.phase === "query") {
      const label = `eval ${event.mode}`;
      if (this.label !== label) this.start(label, event.total);
      this.bar?.update(event.done, { item: "" });
    }
  }

  /** Stops and clears the bar. Safe to call twice. */
  stop(): void {
    this.bar?.stop();
    this.bar = undefined;
    this.label = "";
  }

  /** The ingest so far. */
  private state(): IngestState {
    return { ...this.ingest, elapsedMs: this.now() - this.startedAt, since: this.since };
  }

  /** Every source chunked and every chunk made embedded (or nothing to embed). */
  private finished(): boolean {
    const s = this.ingest;
    return s.done === s.total && (s.embedded === undefined || s.embedded >= s.chunked);
  }

  private start(label: string, total: number): void {
    this.stop();
    this.label = label;
    this.bar = new cliProgress.SingleBar(
      {
        // The ingest bar counts its own progress (chunks while embedding) and ETA; see ingestEstimate.
        format:
          label === "ingest"
            ? `${label} [{bar}] {percentage}% | {status} | eta {left} {item}`
            : `${label} [{bar}] {value}/{total} {percentage}% | eta {eta_formatted} {item}`,
        stream: process.stderr,
        clearOnComplete: true,
        hideCursor: true,
      },
      cliProgress.Presets.shades_classic,
    );
    this.bar.start(total, 0, { item: "", status: "", left: "-" });
  }
}

function shorten(path: string, max = 40): string {
  return path.length <= max ? path : `…${path.slice(-(max - 1))}`;
}

/**
 * Makes text safe to print on a terminal: control characters other than newline
 * and tab (ESC sequences that retitle the window or move the cursor, C1 controls,
 * DEL) are shown as `\xHH` instead of being sent raw. Used on every human-readable
 * output, which prints text taken from documents; `--json` output is escaped by JSON.
 */
export function terminalSafe(text: string): string {
  return text.replace(
    // biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
    /[\u0000-\u0008\u000B-\u001F\u007F-\u009F]/g,
    (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`,
  );
}

/** Human-readable ingest summary. */
export function formatIngestSummary(s: IngestSummary): string {
  const lines = [
    `kb "${s.kb}": ${countOf(s.files, "source")} — ${s.added} added, ${s.updated} updated, ${s.unchanged} unchanged, ${s.removed.length} removed, ` +
      `${countOf(s.errors.length, "error")}, ${s.skipped.length} skipped`,
    `${countOf(s.documents, "document")}, ${countOf(s.chunks, "chunk")} written; embeddings: ${s.embedded.computed} computed, ${s.embedded.cached} cached${s.embedded.reused ? `, ${s.embedded.reused} reused from sentence vectors` : ""}${s.situated && s.situated.written + s.situated.cached > 0 ? `; LLM context: ${s.situated.written} written, ${s.situated.cached} cached` : ""}; ${(s.durationMs / 1000).toFixed(1)} s`,
  ];
  if (s.stopped)
    lines.push(
      "stopped before the end: the counts above were committed; run the same command again to finish",
    );
  for (const w of s.warnings) lines.push(`  warning ${displayName(w.path)}: ${w.reason}`);
  for (const e of s.errors) lines.push(`  error   ${displayName(e.path)}: ${e.reason}`);
  for (const p of s.removed) lines.push(`  removed ${displayName(p)}`);
  for (const e of s.skipped.slice(0, 20)) lines.push(`  skipped ${displayName(e.path)}: ${e.reason}`);
  if (s.skipped.length > 20) lines.push(`  … and ${s.skipped.length - 20} more skipped`);
  return terminalSafe(lines.join("\n"));
}

/** Human-readable search results with attribution. */
export function formatSearchResults(r: SearchResponse): string {
  const notes = r.warnings.map((w) => `warning: ${w}`);
  if (r.results.length === 0) {
    return terminalSafe(
      [...notes, `no results for "${r.query}" in ${r.kbs.join(", ")} (${r.mode})`].join("\n"),
    );
  }
  const out: string[] = [...notes];
  for (const x of r.results) {
    const parts = Object.entries(x.scores).map(([k, v]) => `${k} ${v.toFixed(k === "fused" ? 4 : 3)}`);
    const citation = formatCitation(x.source, {
      chunkIndex: x.chunk.index,
      totalChunks: x.chunk.total,
      start: x.chunk.start,
      end: x.chunk.end,
    });
    out.push(`${x.rank}. [${x.score.toFixed(4)}] ${citation}${r.kbs.length > 1 ? `  (kb ${x.kb})` : ""}`);
    out.push(
      `   ${x.source.title ? `${displayName(x.source.title)} · ` : ""}${x.source.type} · ${parts.join(", ")}`,
    );
    if (x.source.link) out.push(`   ${x.source.link}`);
    if (x.belowThreshold) out.push("   (below the score threshold: returned as a fallback)");
    if (x.explain) out.push(`   explain: ${explainLine(x.explain)}`);
    if (x.explain?.context) out.push(`   context: ${x.explain.context.replace(/\s*\n\s*/g, " ¶ ")}`);
    const snippet = x.text.replace(/\s+/g, " ").trim();
    out.push(`   ${snippet.length > 300 ? `${snippet.slice(0, 300)}…` : snippet}`);
    out.push("");
  }
  const rerankers = [...new Set(Object.values(r.rerankers ?? {}))].filter((n) => !n.startsWith("none"));
  const reranks = r.mode === "hybrid_rerank" || r.mode === "advanced";
  const how =
    rerankers.length > 0
      ? ` (reranker ${rerankers.join(", ")})`
      : reranks
        ? " (no reranker available: ranked as hybrid)"
        : "";
  out.push(
    `${countOf(r.results.length, "result")}, ${r.mode}${how}, ${r.cached ? "cached, " : ""}${r.tookMs} ms`,
  );
  return terminalSafe(out.join("\n"));
}

/** One line of `--explain`: each stage's rank and score. */
function explainLine(e: NonNullable<SearchResponse["results"][number]["explain"]>): string {
  const parts: string[] = [];
  parts.push(
    e.vectorRank !== undefined ? `vector #${e.vectorRank} ${(e.vectorScore ?? 0).toFixed(3)}` : "vector –",
  );
  parts.push(
    e.keywordRank !== undefined ? `bm25 #${e.keywordRank} ${(e.keywordScore ?? 0).toFixed(2)}` : "bm25 –",
  );
  if (e.fused !== undefined) parts.push(`fused ${e.fused.toFixed(4)} (${e.retrieval.toFixed(3)})`);
  if (e.rerank !== undefined) parts.push(`rerank ${e.rerank.toFixed(3)}`);
  parts.push(`final ${e.final.toFixed(4)}`, `kb rank ${e.kbRank}`);
  return parts.join(" · ");
}

/** Human-readable knowledge base description. */
export function formatKb(kb: KbRecord, counts: KbCounts): string {
  const c = redactSecrets(kb.config);
  return [
    `name:       ${kb.name}`,
    `created:    ${kb.createdAt}`,
    `documents:  ${counts.documents} (${counts.embeddedDocuments} with vectors), chunks: ${counts.chunks}`,
    ...(counts.documents > 0
      ? [
          `by type:    ${Object.entries(counts.documentsByType)
            .map(([type, n]) => `${type} ${n}`)
            .join(", ")}`,
        ]
      : []),
    `chunking:   ${c.chunking.strategy}, size ${c.chunking.chunkSize}, overlap ${c.chunking.chunkOverlap}, min ${c.chunking.minChunkSize} (${c.chunking.unit === "tokens" ? `${c.chunking.tokenizer ?? "o200k_base"} tokens` : "characters"})`,
    extractionLine(c.extraction),
    ...strategyOptions(c.chunking),
    `embedding:  ${c.embedding.provider}:${c.embedding.model}, batch ${c.embedding.batchSize}`,
    `store:      ${describeStore(c.vectorStore)}, collection ${collectionOf(c)}`,
    `retrieval:  ${c.retrieval.mode}, top-k ${c.retrieval.topK}, vector top-k ${c.retrieval.vectorTopK} (cosine ≥ ${c.retrieval.vectorMinScore}), keyword top-k ${c.retrieval.keywordTopK}, fusion ${c.retrieval.fusion === "rrf" ? `rrf k ${c.retrieval.rrfK}` : "weighted"}, weights ${c.retrieval.vectorWeight}:${c.retrieval.keywordWeight}, min score ${c.retrieval.minScore}${c.retrieval.fallbackBelowThreshold ? " (fallback)" : ""}, dedup ≥ ${c.retrieval.dedupThreshold}`,
    `reranker:   ${c.retrieval.reranker.type}${"model" in c.retrieval.reranker ? ` ${c.retrieval.reranker.model}` : ""}, ${c.retrieval.rerankCandidates} candidates, weight ${c.retrieval.rerankWeight}; advanced: ${c.retrieval.expansionVariants} variants`,
  ].join("\n");
}

/** Lines for the strategy options that apply to a KB's strategy (with defaults filled in). */
/** The `extraction:` line of {@link formatKb}: limits and per-format options with defaults filled in. */
function extractionLine(extraction: ExtractOptions | undefined): string {
  const o = resolveExtractOptions(extraction);
  const parts = [
    `max file ${formatBytes(o.limits.maxFileBytes)}`,
    `archives ${formatBytes(o.limits.maxUnpackedBytes)}`,
    `max pages ${o.limits.maxPages}`,
    o.email.attachments ? "email attachments extracted" : "email attachments listed only",
    o.slack.keepSystemMessages ? "Slack system messages kept" : "Slack system messages dropped",
  ];
  if (o.slack.workspaceUrl) parts.push(`Slack workspace ${o.slack.workspaceUrl}`);
  return `extraction: ${parts.join(", ")}`;
}

function strategyOptions(chunking: ChunkingConfig): string[] {
  const limits = validateChunkingConfig(chunking);
  const s = chunking.strategy;
  const lines: string[] = [];
  if (s === "embedding_semantic") {
    const e = limits.embeddingSemantic;
    const cut = e.breakpoint === "threshold" ? `cosine < ${e.threshold}` : `distance > p${e.percentile}`;
    lines.push(
      `            cut where ${cut}, chunks ${e.minSize}–${e.maxSize}, fallback FIXED ${e.fallbackSize}/${e.fallbackOverlap}`,
    );
  }
  if (s === "email" || s === "auto") {
    lines.push(
      `            email: whole under ${limits.email.wholeUnder}, quoted replies ${limits.email.quotedReplies}`,
    );
  }
  if (s === "slack" || s === "auto") {
    lines.push(
      `            slack: whole threads under ${limits.slack.wholeThreadUnder}, gap ${limits.slack.maxGapSeconds} s`,
    );
  }
  return lines;
}

/** One extracted document and its chunks, for {@link formatChunks}. */
export interface ChunkedDocument {
  doc: ExtractedDocument;
  chunks: Chunk[];
}

/**
 * Human-readable chunk listing for `kl chunk`: per chunk a header line (index,
 * type, character span, size in the measure's unit, heading path or other
 * context) followed by the chunk text as it is embedded.
 */
export function formatChunks(docs: ChunkedDocument[], measure: SizeMeasure): string {
  const lines: string[] = [];
  for (const { doc, chunks } of docs) {
    lines.push(
      `${displayName(doc.uri)} (${doc.metadata.type}, ${doc.text.length} chars): ${chunks.length} chunks`,
    );
    for (const c of chunks) {
      const unit = measure.unit === "chars" ? "chars" : `${measure.name} tokens`;
      const info = [
        `chunk ${c.chunkIndex + 1}/${c.totalChunks}`,
        c.chunkType,
        `[${c.start}, ${c.end})`,
        `${measure.count(c.text)} ${unit}`,
      ];
      const symbol = c.metadata.symbol;
      if (typeof symbol === "string") info.push(symbol);
      if (c.metadata.pageStart !== undefined) info.push(`page ${String(c.metadata.pageStart)}`);
      lines.push("", `── ${info.join(" · ")} ──`, c.text);
    }
    lines.push("");
  }
  return terminalSafe(lines.join("\n"));
}

/**
 * Human-readable extraction output for `kl extract`: per document its URI,
 * metadata (one `key: value` line each, arrays joined), segment count, warnings
 * and the extracted text.
 */
export function formatExtracted(docs: ExtractedDocument[]): string {
  const lines: string[] = [];
  for (const doc of docs) {
    lines.push(
      `── ${displayName(doc.uri)} (${doc.text.length} chars${doc.segments ? `, ${doc.segments.length} segments` : ""}) ──`,
    );
    for (const [key, value] of Object.entries(doc.metadata)) {
      if (value === undefined) continue;
      const shown = Array.isArray(value)
        ? value.map((v) => (typeof v === "string" ? v : JSON.stringify(v))).join(", ")
        : typeof value === "string"
          ? value
          : JSON.stringify(value);
      lines.push(`${key}: ${shown}`);
    }
    for (const warning of doc.warnings ?? []) lines.push(`warning: ${warning}`);
    lines.push("", doc.text, "");
  }
  return terminalSafe(lines.join("\n"));
}
