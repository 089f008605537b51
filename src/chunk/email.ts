/**
 * EMAIL strategy: the extractor puts the message body in `doc.text` and the
 * headers in `doc.metadata`; the first chunk carries the header block as its
 * context, later ones the subject. Quoted reply text is flagged per chunk.
 */
import type { ChunkingConfig } from "../config.js";
import { type Chunk, type DocumentMetadata, type ExtractedDocument, withContext } from "../types.js";
import type { Chunker } from "./contract.js";
import { paragraphGroups } from "./semantic.js";
import {
  bodyBudget,
  type ChunkLimits,
  defineChunker,
  fitPrefix,
  makeChunk,
  type Span,
  sizeOf,
  trimSpan,
} from "./spans.js";
import { lineSpans } from "./split.js";

/** A header value as display text, or undefined when absent/empty ("undefined"/"null" count as absent). */
function headerValue(value: unknown): string | undefined {
  if (Array.isArray(value)) {
    const parts = value.map(headerValue).filter((v): v is string => v !== undefined);
    return parts.length > 0 ? parts.join(", ") : undefined;
  }
  if (typeof value !== "string") return undefined;
  const v = value.replace(/\s+/g, " ").trim();
  return v && v !== "undefined" && v !== "null" ? v : undefined;
}

/**
 * The header block used as the first chunk's context: `From: …`, `To: …`,
 * `Cc: …`, `Subject: …`, `Date: …` lines joined with `\n`, only for fields that
 * are present and non-empty (arrays are joined with `, `). Undefined when no
 * field is present.
 */
export function emailHeaderBlock(meta: Partial<DocumentMetadata>): string | undefined {
  const lines: string[] = [];
  const add = (label: string, value: unknown): void => {
    const v = headerValue(value);
    if (v !== undefined) lines.push(`${label}: ${v}`);
  };
  add("From", meta.from);
  add("To", meta.to);
  add("Cc", meta.cc);
  add("Subject", meta.subject);
  add("Date", meta.date);
  return lines.length > 0 ? lines.join("\n") : undefined;
}

const QUOTE = /^[ \t]*>/;
const ATTRIBUTION = /^[ \t]*On\b.*\bwrote:[ \t]*$/;
const ORIGINAL = /^[ \t]*-{2,}[ \t]*(?:Original Message|Forwarded message)[ \t]*-{2,}/i;

/**
 * Spans of quoted-reply lines in an email body: lines starting with `>`,
 * attribution lines `On … wrote:` (also wrapped over two lines), and everything
 * from an `-----Original Message-----` marker on.
 */
export function quotedSpans(text: string): Span[] {
  const lines = lineSpans(text);
  const out: Span[] = [];
  for (let i = 0; i < lines.length; i++) {
    const l = lines[i] as Span;
    const t = text.slice(l.start, l.end);
    if (ORIGINAL.test(t)) {
      out.push({ start: l.start, end: text.length });
      break;
    }
    const next = lines[i + 1];
    if (QUOTE.test(t) || ATTRIBUTION.test(t)) {
      out.push({ start: l.start, end: l.end });
    } else if (/^[ \t]*On\b/.test(t) && next && /\bwrote:[ \t]*$/.test(text.slice(next.start, next.end))) {
      out.push({ start: l.start, end: next.end });
      i++;
    }
  }
  return out;
}

/** `{ hasQuoted, quotedRatio }` for a span: the share (0–1, 3 decimals) of its characters on quoted lines. */
function quoteStats(span: Span, quoted: Span[]): { hasQuoted: boolean; quotedRatio: number } {
  let chars = 0;
  for (const q of quoted) {
    if (q.start >= span.end) break;
    chars += Math.max(0, Math.min(q.end, span.end) - Math.max(q.start, span.start));
  }
  const ratio = chars / Math.max(1, span.end - span.start);
  return { hasQuoted: chars > 0, quotedRatio: Math.round(ratio * 1000) / 1000 };
}

/**
 * Alternating runs of own text and quoted text covering `[all.start, all.end)`:
 * quoted spans that are only whitespace apart are joined into one run.
 */
function quoteRuns(text: string, all: Span, quoted: Span[]): { span: Span; quoted: boolean }[] {
  const runs: { span: Span; quoted: boolean }[] = [];
  let pos = all.start;
  for (const q of quoted) {
    const own = trimSpan(text, pos, q.start);
    const last = runs[runs.length - 1];
    if (own) runs.push({ span: own, quoted: false });
    else if (last?.quoted) {
      last.span = { start: last.span.start, end: Math.max(last.span.end, q.end) };
      pos = Math.max(pos, q.end);
      continue;
    }
    const t = trimSpan(text, q.start, Math.min(q.end, all.end));
    if (t) runs.push({ span: t, quoted: true });
    pos = Math.max(pos, q.end);
  }
  const tail = trimSpan(text, pos, all.end);
  if (tail) runs.push({ span: tail, quoted: false });
  return runs;
}

/**
 * Splits an email body into EMAIL chunks.
 *
 * The first chunk (`email_start`) has `contextPrefix` = {@link emailHeaderBlock}
 * (From, To, Cc, Subject, Date); later chunks are `email_body` with prefix
 * `Subject: …` when there is a subject. A body of at most
 * `limits.email.wholeUnder` units stays one chunk as long as it fits
 * `limits.size` together with its header block (chunkSize is the hard cap; raise
 * it above wholeUnder to keep such messages whole). A longer body is cut into runs
 * of own text and quoted reply text ({@link quotedSpans}), each run split
 * paragraph-aware (see `paragraphGroups`) with budgets that leave room for the
 * prefix, so a chunk is either own text or quoted text.
 *
 * Metadata: `hasQuoted` (boolean), `quotedRatio` (0–1, share of the body on
 * quoted lines) and, for split bodies, `quoted` (true for a quoted-reply chunk).
 * With `limits.email.quotedReplies === "drop"` quoted runs give no chunks (the
 * header block then travels with the first own-text chunk); a message that is
 * entirely quoted keeps its text rather than vanish.
 *
 * An empty or blank body yields zero chunks even when headers are present (the
 * ingest reports such a document as empty). The email extractor gives a message
 * without body text the header block as its text; that chunk has no prefix (the
 * header block is not repeated).
 */
export function chunkEmail(doc: ExtractedDocument, limits: ChunkLimits): Chunk[] {
  const text = doc.text;
  const all = trimSpan(text, 0, text.length);
  if (!all) return [];
  // A header-only message (no body) has the header block as its text: no prefix to repeat it.
  const headerBlock = emailHeaderBlock(doc.metadata);
  const header = headerBlock !== undefined && text.trim() === headerBlock ? undefined : headerBlock;
  const subject = headerValue(doc.metadata.subject);
  const later = subject ? `Subject: ${subject}` : undefined;
  const quoted = quotedSpans(text);
  const drop = limits.email.quotedReplies === "drop";
  const size = (span: Span): number => sizeOf(limits, text, span.start, span.end);
  let runs = quoteRuns(text, all, quoted);
  if (drop && runs.some((r) => !r.quoted)) runs = runs.filter((r) => !r.quoted);
  // Kept whole: the entire body, or with dropped quotes the one remaining run.
  const whole = !drop ? all : runs.length === 1 ? (runs[0]?.span ?? null) : null;
  if (
    whole &&
    size(whole) <= limits.email.wholeUnder &&
    limits.measure.count(withContext(header, text.slice(whole.start, whole.end))) <= limits.size
  ) {
    // A message that fits is never split; its header context is kept in full.
    return [makeChunk(text, whole, "email_start", { prefix: header, metadata: quoteStats(whole, quoted) })];
  }
  const chunks: Chunk[] = [];
  for (const run of runs) {
    let from = run.span.start;
    if (chunks.length === 0) {
      const first = paragraphGroups(text, from, run.span.end, bodyBudget(limits, header), {
        measure: limits.measure,
      })[0];
      if (!first) continue;
      chunks.push(makeEmailChunk(text, first, "email_start", header, quoted, run.quoted, limits));
      from = first.end;
    }
    const groups = paragraphGroups(text, from, run.span.end, bodyBudget(limits, later), {
      minSize: limits.minSize,
      measure: limits.measure,
    });
    for (const g of groups)
      chunks.push(makeEmailChunk(text, g, "email_body", later, quoted, run.quoted, limits));
  }
  return chunks;
}

function makeEmailChunk(
  text: string,
  span: Span,
  type: "email_start" | "email_body",
  prefix: string | undefined,
  quoted: Span[],
  isQuoted: boolean,
  limits: ChunkLimits,
): Chunk {
  return makeChunk(text, span, type, {
    prefix: fitPrefix(limits, prefix, text.slice(span.start, span.end)),
    metadata: { ...quoteStats(span, quoted), quoted: isQuoted },
  });
}

/**
 * Creates the EMAIL chunker (see {@link chunkEmail}).
 * @throws ConfigError for invalid chunking parameters.
 */
export function createEmailChunker(config: ChunkingConfig): Chunker {
  return defineChunker("email", config, chunkEmail);
}
