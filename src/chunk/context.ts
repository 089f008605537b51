/**
 * Document context for every chunk ("contextual retrieval": Anthropic 2024,
 * https://www.anthropic.com/news/contextual-retrieval): a short line naming the
 * document a chunk comes from — title, organisation, kind, period — and the
 * section it sits in, prepended to the chunk as part of its context prefix, so
 * BM25 and the embedding model see it with the chunk's own words. The body span
 * stays exact (`source.slice(start, end)` is the body).
 *
 * What each source type contributes (facts a document does not have are left out):
 * - PDF: organisation, document kind, period (read from the cover page, see
 *   `extract/pdf-context.ts`), the title when it is not just the file name; then the
 *   section: the outline (bookmark) path in force where the chunk starts and the
 *   heading block at the top of its page (`Consolidated Balance Sheets · (In
 *   millions)`).
 * - Plain text, Markdown, HTML, DOCX: the title when it is a real one (not the file
 *   name) and not already shown by the chunk (its body starts with it, or its
 *   heading path holds it).
 * - Slack: `#channel`, and for a chunk of a thread that does not start with the
 *   thread's first message, that message (`thread: …`).
 * - Code: the file's last three path components and the chunk's symbol.
 * - Email has its own context (the header block, then subject, sender and date),
 *   written by the EMAIL chunker.
 *
 * Size: at most {@link MAX_CONTEXT_CHARS} characters and a quarter of the chunk
 * size; the chunker leaves that room, so a chunk with its context still fits
 * `chunkSize`.
 */
import { basename } from "node:path";
import type { Chunk, ExtractedDocument, Segment } from "../types.js";
import type { ChunkLimits } from "./spans.js";

/** Longest document context, in characters (before the chunk's own prefix). */
export const MAX_CONTEXT_CHARS = 200;

/** Separator between the parts of a context line. */
const SEP = " · ";

/** The context of each chunk of one document (see {@link documentContext}). */
export interface DocumentContext {
  /** The context line for a chunk (before it is fitted to the chunk size), or undefined. */
  at(chunk: Pick<Chunk, "start" | "end" | "text" | "contextPrefix" | "metadata">): string | undefined;
  /** The longest line {@link at} can return, in characters (0: the document has no context). */
  readonly longest: number;
  /**
   * Whether chunkers leave room for the context (see {@link contextReserve}); when
   * false, a chunk gets its context only where it still fits (Slack and code, whose
   * units — messages, functions — should not be cut smaller for it).
   */
  readonly reserve: boolean;
}

/** No document context (email writes its own). */
const NONE: DocumentContext = { longest: 0, reserve: false, at: () => undefined };

/** Collapses white space and cuts `text` to `max` characters at a word end, adding `…`. */
export function shorten(text: string, max: number): string {
  const t = text.replace(/\s+/g, " ").trim();
  if (t.length <= max) return t;
  let cut = t.lastIndexOf(" ", max - 1);
  if (cut < max / 2) cut = max - 1;
  const hi = t.charCodeAt(cut - 1);
  if (hi >= 0xd800 && hi <= 0xdbff) cut--;
  return `${t.slice(0, cut).trimEnd()}…`;
}

/** A string field of metadata, trimmed, or undefined. */
function str(value: unknown): string | undefined {
  return typeof value === "string" && value.trim() !== "" ? value.replace(/\s+/g, " ").trim() : undefined;
}

/**
 * The document's title when it is a real one: not the file name (the extractors'
 * fallback), nor the file name without its extension, nor a URI.
 */
export function realTitle(doc: ExtractedDocument): string | undefined {
  const title = str(doc.metadata.title);
  if (!title) return undefined;
  const file = basename(String(doc.metadata.path ?? doc.uri));
  const stem = file.replace(/\.[^.]+$/, "");
  if (title === file || title === stem || title === doc.uri) return undefined;
  return title;
}

/** Lower-cased words of a text, for "is this already said" checks. */
function words(text: string): string[] {
  return text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
}

/**
 * The lines of a chunk's own prefix (a table header, a heading path) that say
 * something the document context `line` does not: lines whose words all occur in
 * it are left out. `undefined` when none is left.
 */
export function withoutRepeats(line: string, own: string | undefined): string | undefined {
  if (!own) return undefined;
  const seen = new Set(words(line));
  const kept = own.split("\n").filter((l) => !redundant(l, seen));
  return kept.length > 0 ? kept.join("\n") : undefined;
}

/** Words that say nothing new next to a name already given ("Acme, Inc. and Subsidiaries"). */
const FILLER = new Set(["and", "of", "the", "subsidiaries", "subsidiary", "companies", "company"]);

/** True when every word of `part` already occurs in `seen` (or is a {@link FILLER} word). */
function redundant(part: string, seen: Set<string>): boolean {
  const w = words(part);
  return w.length > 0 && w.some((x) => !FILLER.has(x)) && w.every((x) => seen.has(x) || FILLER.has(x));
}

/** Joins parts with ` · `, dropping empty ones and those whose words the earlier parts already hold. */
function joinParts(parts: (string | undefined)[]): string | undefined {
  const seen = new Set<string>();
  const kept: string[] = [];
  for (const p of parts) {
    if (!p || redundant(p, seen)) continue;
    kept.push(p);
    for (const w of words(p)) seen.add(w);
  }
  return kept.length > 0 ? kept.join(SEP) : undefined;
}

/** The page segment holding most of `[start, end)` (the first one on a tie), else the last one before it. */
function pageOf(segments: readonly Segment[], start: number, end: number): Segment | undefined {
  let best: Segment | undefined;
  let most = 0;
  let before: Segment | undefined;
  for (const s of segments) {
    if (typeof s.metadata.page !== "number") continue;
    if (s.start >= Math.max(end, start + 1)) break;
    const overlap = Math.min(end, s.end) - Math.max(start, s.start);
    if (overlap > most) {
      most = overlap;
      best = s;
    }
    if (s.start <= start) before = s;
  }
  return best ?? before;
}

/** PDF: cover facts and title, then the section where the chunk starts. */
function pdfContext(doc: ExtractedDocument): DocumentContext {
  const m = doc.metadata;
  const facts = [str(m.organization), str(m.documentKind), str(m.period)].filter(Boolean);
  // The title only when the cover page said little: it mostly repeats the facts, less tidily.
  const head = [...facts, facts.length < 2 ? realTitle(doc) : undefined];
  const segments = doc.segments ?? [];
  /** The section parts of a chunk: the deepest bookmark in force, then its page's heading lines. */
  const sectionOf = (start: number, end: number): string[] => {
    const page = pageOf(segments, start, end);
    if (!page) return [];
    const at = page.end > page.start ? Math.max(0, (start - page.start) / (page.end - page.start)) : 0;
    const sections = Array.isArray(page.metadata.sections)
      ? (page.metadata.sections as { at: number; path: string[] }[])
      : [];
    let path: string[] | undefined;
    for (const s of sections) if (s.at <= at + 0.02) path = s.path;
    const outline = path && path.length > 0 ? path[path.length - 1] : undefined;
    const heading = str(page.metadata.heading)?.split(" · ") ?? [];
    return [outline, ...heading].filter((p): p is string => p !== undefined);
  };
  let longest = 0;
  const lines = new Map<string, string>();
  // Each part is dropped when the parts before it already hold its words (a heading naming the issuer).
  const line = (section: string[]): string => {
    const key = section.join("\u0000");
    let l = lines.get(key);
    if (l === undefined) {
      l = shorten(joinParts([...head, ...section]) ?? "", MAX_CONTEXT_CHARS);
      lines.set(key, l);
    }
    return l;
  };
  for (const s of segments) {
    if (typeof s.metadata.page !== "number") continue;
    longest = Math.max(longest, line(sectionOf(s.start, s.end)).length);
    for (const sec of Array.isArray(s.metadata.sections) ? s.metadata.sections : []) {
      const from = s.start + Math.ceil((s.end - s.start) * (sec as { at: number }).at);
      longest = Math.max(longest, line(sectionOf(from, s.end)).length);
    }
  }
  if (segments.length === 0) longest = line([]).length;
  return {
    longest,
    reserve: true,
    at: (chunk) => line(sectionOf(chunk.start, chunk.end)) || undefined,
  };
}

/** Text, Markdown, HTML, DOCX: the real title, unless the chunk already shows it. */
function titleContext(doc: ExtractedDocument): DocumentContext {
  const title = realTitle(doc);
  if (!title) return NONE;
  const line = shorten(title, MAX_CONTEXT_CHARS);
  const key = words(title).join(" ");
  return {
    longest: line.length,
    reserve: true,
    at: (chunk) => {
      const body = doc.text.slice(chunk.start, chunk.end);
      const shown = `${chunk.contextPrefix ?? ""} ${body.slice(0, title.length + 40)}`;
      // The chunk starts with the title (a BEIR abstract, an H1) or its heading path names it.
      if (words(shown).join(" ").includes(key)) return undefined;
      const path = chunk.metadata.headingPath;
      if (Array.isArray(path) && path.some((h) => words(String(h)).join(" ") === key)) return undefined;
      return line;
    },
  };
}

/** Slack: the channel, and the thread's first message for chunks of a thread that start later. */
function slackContext(doc: ExtractedDocument): DocumentContext {
  const channel = str(doc.metadata.channel);
  const segments = doc.segments ?? [];
  const roots = new Map<string, Segment>();
  for (const s of segments) {
    const ts = str(s.metadata.ts);
    if (ts && !roots.has(ts)) roots.set(ts, s);
  }
  const head = channel ? `#${channel}` : undefined;
  const threaded = segments.some((s) => str(s.metadata.threadTs) !== undefined);
  return {
    // "#channel · thread: <up to 120 characters>".
    longest: Math.min(MAX_CONTEXT_CHARS, (head?.length ?? 0) + (threaded ? 3 + 8 + 121 : 0)),
    reserve: false,
    at: (chunk) => {
      const thread = str(chunk.metadata.threadTs);
      const root = thread ? roots.get(thread) : undefined;
      const rootText =
        root && root.start < chunk.start
          ? `thread: ${shorten(doc.text.slice(root.start, root.end), 120)}`
          : undefined;
      const line = joinParts([head, rootText]);
      return line ? shorten(line, MAX_CONTEXT_CHARS) : undefined;
    },
  };
}

/** Code: the file's last path components and the chunk's symbol. */
function codeContext(doc: ExtractedDocument): DocumentContext {
  const parts = String(doc.metadata.path ?? doc.uri)
    .split(/[\\/]/)
    .filter((p) => p !== "");
  const file = parts.slice(-3).join("/");
  return {
    // The path, then " › " and a symbol (code-tree caps symbols near 80 characters).
    longest: Math.min(MAX_CONTEXT_CHARS, file.length + 3 + 80),
    reserve: false,
    at: (chunk) => {
      // The enclosing symbol, when the chunk does not open with its definition (a piece of a split one).
      let symbol = str(chunk.metadata.symbol);
      const name = symbol
        ?.split(/[.:#\s,]+/)
        .filter(Boolean)
        .pop();
      if (name && doc.text.slice(chunk.start, Math.min(chunk.end, chunk.start + 300)).includes(name))
        symbol = undefined;
      const line = [file, symbol].filter(Boolean).join(" › ");
      return line ? shorten(line, MAX_CONTEXT_CHARS) : undefined;
    },
  };
}

/** The document context of `doc` by source type (see the module comment). */
export function documentContext(doc: ExtractedDocument): DocumentContext {
  switch (doc.metadata.type) {
    case "pdf":
      return pdfContext(doc);
    case "text":
    case "markdown":
    case "html":
    case "docx":
      return titleContext(doc);
    case "slack":
      return slackContext(doc);
    case "code":
      return codeContext(doc);
    default:
      return NONE;
  }
}

/**
 * Room (in `limits.measure` units) a chunker leaves for document context: the
 * longest context line plus its separator, at most a quarter of the chunk size;
 * 0 when the document has no context or a quarter of the chunk size is too small
 * to hold a useful one (under 12 units).
 */
export function contextReserve(context: DocumentContext, limits: ChunkLimits): number {
  if (context.longest === 0 || !context.reserve) return 0;
  const quarter = Math.floor(limits.size / 4);
  if (quarter < 12) return 0;
  const sample = "x".repeat(context.longest);
  return Math.min(quarter, limits.measure.count(`${sample}\n`) + 1);
}
