/**
 * EMAIL strategy: the extractor puts the message body in `doc.text` and the
 * headers in `doc.metadata`; the first chunk carries the header block as its
 * context, later ones the subject. Quoted reply text is flagged per chunk.
 */
import type { ChunkingConfig } from "../config.js";
import type { Chunk, DocumentMetadata, ExtractedDocument } from "../types.js";
import type { Chunker } from "./contract.js";
import { paragraphGroups } from "./semantic.js";
import {
  bodyBudget,
  type ChunkLimits,
  defineChunker,
  fitPrefix,
  makeChunk,
  type Span,
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
 * Splits an email body into EMAIL chunks.
 *
 * The first chunk (`email_start`) has `contextPrefix` = {@link emailHeaderBlock}.
 * A body of at most `limits.size` characters stays one chunk (its text may then
 * exceed `limits.size` by the header block). A longer body is split
 * paragraph-aware (see `paragraphGroups`) with body budgets that leave room for
 * the prefix; later chunks are `email_body` with prefix `Subject: …` when there
 * is a subject. Chunk metadata: `hasQuoted`
 * (boolean) and `quotedRatio` (0–1) from {@link quotedSpans}.
 *
 * An empty or blank body yields zero chunks even when headers are present (the
 * ingest reports such a document as empty).
 */
export function chunkEmail(doc: ExtractedDocument, limits: ChunkLimits): Chunk[] {
  const text = doc.text;
  const all = trimSpan(text, 0, text.length);
  if (!all) return [];
  const header = emailHeaderBlock(doc.metadata);
  const subject = headerValue(doc.metadata.subject);
  const later = subject ? `Subject: ${subject}` : undefined;
  const quoted = quotedSpans(text);
  const make = (span: Span, type: "email_start" | "email_body", prefix: string | undefined): Chunk =>
    makeChunk(text, span, type, {
      prefix: fitPrefix(prefix, span.end - span.start, limits.size),
      metadata: quoteStats(span, quoted),
    });
  if (all.end - all.start <= limits.size) {
    // A body that fits is never split; its header context is kept in full.
    return [makeChunk(text, all, "email_start", { prefix: header, metadata: quoteStats(all, quoted) })];
  }
  const firstBudget = bodyBudget(limits.size, header);
  const first = paragraphGroups(text, all.start, all.end, firstBudget)[0];
  if (!first) return [];
  const rest = paragraphGroups(text, first.end, all.end, bodyBudget(limits.size, later), {
    minSize: limits.minSize,
  });
  return [make(first, "email_start", header), ...rest.map((g) => make(g, "email_body", later))];
}

/**
 * Creates the EMAIL chunker (see {@link chunkEmail}).
 * @throws ConfigError for invalid chunking parameters.
 */
export function createEmailChunker(config: ChunkingConfig): Chunker {
  return defineChunker("email", config, chunkEmail);
}
