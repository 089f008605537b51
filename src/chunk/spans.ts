/**
 * Helpers shared by every chunking strategy: whitespace trimming of spans,
 * building and finalising chunks, context-prefix budgeting, page annotation and
 * configuration validation.
 *
 * Units: every offset and size is in UTF-16 code units ("characters") of the
 * extracted document text.
 */
import type {
  ChunkingConfig,
  EmailChunkingOptions,
  EmbeddingSemanticOptions,
  SlackChunkingOptions,
} from "../config.js";
import { ConfigError } from "../errors.js";
import {
  type Chunk,
  type ChunkType,
  CONTEXT_SEPARATOR,
  type ExtractedDocument,
  withContext,
} from "../types.js";
import { contextReserve, type DocumentContext, documentContext, withoutRepeats } from "./context.js";
import type { Chunker } from "./contract.js";
import { CHAR_MEASURE, createMeasure, type SizeMeasure, spanSize } from "./measure.js";
import { enforceSize, lineTable } from "./split.js";

/** A half-open range `[start, end)` of offsets into a document's text. */
export interface Span {
  start: number;
  end: number;
}

/** Validated chunking limits. Sizes are in `measure.unit` (characters unless configured otherwise). */
export interface ChunkLimits {
  /** Maximum size of a chunk's text, context prefix included (≥ 1). */
  size: number;
  /** Size shared by consecutive FIXED chunks (0 ≤ overlap < size). */
  overlap: number;
  /** Short-tail threshold, clamped to `[0, size - 1]`. */
  minSize: number;
  /** How sizes are measured (characters or tokens). */
  measure: SizeMeasure;
  /** EMAIL options with defaults applied. */
  email: EmailChunkingOptions;
  /** SLACK options with defaults applied. */
  slack: SlackChunkingOptions;
  /** EMBEDDING_SEMANTIC options with defaults applied. */
  embeddingSemantic: EmbeddingSemanticOptions;
}

/** Defaults of the per-strategy options (sizes in the configured unit). */
export const STRATEGY_DEFAULTS: {
  email: EmailChunkingOptions;
  slack: SlackChunkingOptions;
  embeddingSemantic: EmbeddingSemanticOptions;
} = {
  email: { wholeUnder: 2000, quotedReplies: "keep" },
  slack: { wholeThreadUnder: 1500, maxGapSeconds: 30 * 60 },
  embeddingSemantic: {
    breakpoint: "threshold",
    threshold: 0.75,
    percentile: 95,
    minSize: 50,
    maxSize: 600,
    fallbackSize: 350,
    fallbackOverlap: 50,
    reuseSentenceEmbeddings: true,
  },
};

/** Size of `text.slice(start, end)` in the unit of `limits`. */
export function sizeOf(
  limits: Pick<ChunkLimits, "measure">,
  text: string,
  start = 0,
  end = text.length,
): number {
  return spanSize(limits.measure, text, start, end);
}

/**
 * True for the characters that never need to be covered by a chunk and are
 * trimmed from span edges: the Unicode `White_Space` property (Unicode 15.1
 * PropList.txt: U+0009–U+000D, U+0020, U+0085, U+00A0, U+1680, U+2000–U+200A,
 * U+2028, U+2029, U+202F, U+205F, U+3000) plus U+200B ZERO WIDTH SPACE, which
 * carries no content of its own (only a line-break opportunity, UAX #14 class ZW)
 * and which the conformance case B13 requires to count as blank (a text of
 * spaces and U+200B gives no chunk). Every other format character is text and
 * always lies in a chunk: the zero-width joiner and non-joiner (U+200D, U+200C,
 * parts of emoji and Indic sequences), U+2060, U+180E, the BOM U+FEFF (which
 * JavaScript's `\s` and `trim()` do match), variation selectors and tag characters.
 */
export function isBlank(code: number): boolean {
  if (code <= 0x20) return code === 0x20 || (code >= 0x09 && code <= 0x0d);
  if (code < 0x85) return false;
  return (
    code === 0x85 ||
    code === 0xa0 ||
    code === 0x1680 ||
    (code >= 0x2000 && code <= 0x200a) ||
    code === 0x2028 ||
    code === 0x2029 ||
    code === 0x202f ||
    code === 0x205f ||
    code === 0x3000 ||
    code === 0x200b
  );
}

/** First offset ≥ `pos` (and < `end`) holding a non-blank character, or `end`. */
export function skipBlankForward(text: string, pos: number, end: number = text.length): number {
  let p = pos;
  while (p < end && isBlank(text.charCodeAt(p))) p++;
  return p;
}

/** Smallest offset `p ≤ end` (and ≥ `start`) such that `text.slice(p, end)` is blank. */
export function skipBlankBackward(text: string, end: number, start = 0): number {
  let p = end;
  while (p > start && isBlank(text.charCodeAt(p - 1))) p--;
  return p;
}

/**
 * Shrinks `[start, end)` so it begins and ends on non-blank characters.
 * @returns the trimmed span, or `null` when the range is empty or blank.
 */
export function trimSpan(text: string, start: number, end: number): Span | null {
  const s = skipBlankForward(text, Math.max(0, start), Math.min(text.length, end));
  const e = skipBlankBackward(text, Math.min(text.length, end), s);
  return e > s ? { start: s, end: e } : null;
}

/** True when `pos` does not fall between the two halves of a surrogate pair. */
export function isCodePointBoundary(text: string, pos: number): boolean {
  if (pos <= 0 || pos >= text.length) return true;
  const hi = text.charCodeAt(pos - 1);
  const lo = text.charCodeAt(pos);
  return !(hi >= 0xd800 && hi <= 0xdbff && lo >= 0xdc00 && lo <= 0xdfff);
}

/**
 * Validates chunking parameters before any text is read.
 *
 * `chunkSize` must be an integer ≥ 1, `chunkOverlap` an integer with
 * `0 ≤ overlap < chunkSize`, `minChunkSize` an integer ≥ 0 (absent means 0; it is
 * clamped to `chunkSize - 1`).
 * @throws ConfigError naming the offending parameter.
 */
export function validateChunkingConfig(
  config: Pick<ChunkingConfig, "chunkSize" | "chunkOverlap"> & Partial<Omit<ChunkingConfig, "strategy">>,
): ChunkLimits {
  const { chunkSize, chunkOverlap } = config;
  const minChunkSize = config.minChunkSize ?? 0;
  if (!Number.isInteger(chunkSize) || chunkSize < 1) {
    throw new ConfigError(`chunkSize must be an integer >= 1 (got ${chunkSize})`);
  }
  if (!Number.isInteger(chunkOverlap) || chunkOverlap < 0) {
    throw new ConfigError(`chunkOverlap must be an integer >= 0 (got ${chunkOverlap})`);
  }
  if (chunkOverlap >= chunkSize) {
    throw new ConfigError(`chunkOverlap (${chunkOverlap}) must be smaller than chunkSize (${chunkSize})`);
  }
  if (!Number.isInteger(minChunkSize) || minChunkSize < 0) {
    throw new ConfigError(`minChunkSize must be an integer >= 0 (got ${minChunkSize})`);
  }
  const measure = config.unit === undefined ? CHAR_MEASURE : createMeasure(config.unit, config.tokenizer);
  const email = { ...STRATEGY_DEFAULTS.email, ...defined(config.email) };
  const slack = { ...STRATEGY_DEFAULTS.slack, ...defined(config.slack) };
  const es = { ...STRATEGY_DEFAULTS.embeddingSemantic, ...defined(config.embeddingSemantic) };
  const positiveInt = (value: number, name: string): void => {
    if (!Number.isInteger(value) || value < 1)
      throw new ConfigError(`${name} must be an integer >= 1 (got ${value})`);
  };
  positiveInt(email.wholeUnder, "email.wholeUnder");
  if (email.quotedReplies !== "keep" && email.quotedReplies !== "drop") {
    throw new ConfigError(
      `email.quotedReplies must be "keep" or "drop" (got "${String(email.quotedReplies)}")`,
    );
  }
  positiveInt(slack.wholeThreadUnder, "slack.wholeThreadUnder");
  if (!(slack.maxGapSeconds > 0)) {
    throw new ConfigError(`slack.maxGapSeconds must be > 0 (got ${slack.maxGapSeconds})`);
  }
  if (es.breakpoint !== "threshold" && es.breakpoint !== "percentile") {
    throw new ConfigError(
      `embeddingSemantic.breakpoint must be "threshold" or "percentile" (got "${String(es.breakpoint)}")`,
    );
  }
  if (!(es.threshold >= -1 && es.threshold <= 1)) {
    throw new ConfigError(`embeddingSemantic.threshold must be a cosine in [-1, 1] (got ${es.threshold})`);
  }
  if (!(es.percentile > 0 && es.percentile < 100)) {
    throw new ConfigError(`embeddingSemantic.percentile must be in (0, 100) (got ${es.percentile})`);
  }
  positiveInt(es.maxSize, "embeddingSemantic.maxSize");
  positiveInt(es.fallbackSize, "embeddingSemantic.fallbackSize");
  if (!Number.isInteger(es.minSize) || es.minSize < 0 || es.minSize > es.maxSize) {
    throw new ConfigError(`embeddingSemantic.minSize must be an integer in [0, maxSize] (got ${es.minSize})`);
  }
  if (
    !Number.isInteger(es.fallbackOverlap) ||
    es.fallbackOverlap < 0 ||
    es.fallbackOverlap >= es.fallbackSize
  ) {
    throw new ConfigError(
      `embeddingSemantic.fallbackOverlap must be an integer in [0, fallbackSize) (got ${es.fallbackOverlap})`,
    );
  }
  return {
    size: chunkSize,
    overlap: chunkOverlap,
    minSize: Math.min(minChunkSize, chunkSize - 1),
    measure,
    email,
    slack,
    embeddingSemantic: es,
  };
}

/** `value` without its `undefined` properties, so they do not override defaults. */
function defined<T extends object>(value: T | undefined): Partial<T> {
  if (!value) return {};
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** Options for {@link makeChunk}. */
export interface ChunkParts {
  /** Context prepended to the body (heading path, email header). Empty means none. */
  prefix?: string | undefined;
  metadata?: Record<string, unknown>;
}

/**
 * Builds a chunk whose body is `text.slice(span.start, span.end)`. `chunkIndex`
 * and `totalChunks` are placeholders until {@link finalizeChunks} runs.
 */
export function makeChunk(text: string, span: Span, chunkType: ChunkType, parts: ChunkParts = {}): Chunk {
  const body = text.slice(span.start, span.end);
  const prefix = parts.prefix ? parts.prefix : undefined;
  const chunk: Chunk = {
    text: withContext(prefix, body),
    start: span.start,
    end: span.end,
    chunkIndex: 0,
    totalChunks: 0,
    chunkType,
    metadata: parts.metadata ?? {},
  };
  if (prefix) chunk.contextPrefix = prefix;
  return chunk;
}

/** True when chunks are already ordered by `start`, then `end` (the common case: no sort needed). */
function inOrder(chunks: readonly Chunk[]): boolean {
  for (let i = 1; i < chunks.length; i++) {
    const a = chunks[i - 1] as Chunk;
    const b = chunks[i] as Chunk;
    if (b.start < a.start || (b.start === a.start && b.end < a.end)) return false;
  }
  return true;
}

/** Orders chunks by `start` (then `end`) and fills in `chunkIndex` and `totalChunks`. */
export function finalizeChunks(chunks: Chunk[]): Chunk[] {
  const sorted = inOrder(chunks)
    ? chunks
    : chunks
        .map((c, i) => ({ c, i }))
        .sort((a, b) => a.c.start - b.c.start || a.c.end - b.c.end || a.i - b.i)
        .map((x) => x.c);
  sorted.forEach((c, i) => {
    c.chunkIndex = i;
    c.totalChunks = sorted.length;
  });
  return sorted;
}

/**
 * Body budget for a chunk that carries `prefix`: the whole chunk text
 * (`prefix + "\n\n" + body`) should fit `limits.size`, but the body always keeps
 * at least half of it (the prefix is shortened instead, see {@link fitPrefix}).
 * In `limits.measure` units.
 */
export function bodyBudget(
  limits: Pick<ChunkLimits, "size" | "measure">,
  prefix: string | undefined,
): number {
  const { size, measure } = limits;
  if (!prefix) return size;
  return Math.max(size - measure.count(prefix + CONTEXT_SEPARATOR), Math.ceil(size / 2));
}

/**
 * Shortens `prefix` so that `prefix + "\n\n" + body` fits `limits.size` (in
 * `limits.measure` units): cut at a code point boundary and ending in `…`.
 * Returns `undefined` when no useful prefix (at least 3 characters) fits.
 */
export function fitPrefix(
  limits: Pick<ChunkLimits, "size" | "measure">,
  prefix: string | undefined,
  body: string,
): string | undefined {
  if (!prefix) return undefined;
  const { size, measure } = limits;
  const fits = (p: string): boolean => measure.count(withContext(p, body)) <= size;
  if (fits(prefix)) return prefix;
  // Longest code-point-aligned cut that fits: binary search on the prefix length.
  let lo = 0;
  let hi = prefix.length;
  const candidate = (n: number): string => {
    let cut = n;
    if (!isCodePointBoundary(prefix, cut)) cut--;
    return `${prefix.slice(0, cut).trimEnd()}…`;
  };
  while (hi - lo > 1) {
    const mid = (lo + hi) >>> 1;
    if (fits(candidate(mid))) lo = mid;
    else hi = mid;
  }
  if (lo < 3) return undefined;
  const best = candidate(lo);
  return fits(best) ? best : undefined;
}

/** Source types whose extracted text is the file itself, so line numbers point into the file. */
const LINE_NUMBERED = new Set(["code", "markdown", "text"]);

/**
 * Sets `lineStart`/`lineEnd` (1-based, inclusive; `\n`, `\r\n` or `\r` breaks) on
 * each chunk of a code, Markdown or plain-text document, whose extracted text is
 * the file content, so a citation can name the lines. Other types are untouched.
 */
export function annotateLines(doc: ExtractedDocument, chunks: Chunk[]): Chunk[] {
  if (!LINE_NUMBERED.has(doc.metadata.type) || chunks.length === 0) return chunks;
  const lines = lineTable(doc.text);
  // Index of the last line starting at or before `offset` (binary search over line starts).
  const lineAt = (offset: number): number => {
    let lo = 0;
    let hi = lines.count - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if ((lines.starts[mid] as number) <= offset) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  };
  for (const c of chunks) {
    c.metadata.lineStart = lineAt(c.start) + 1;
    c.metadata.lineEnd = lineAt(Math.max(c.start, c.end - 1)) + 1;
  }
  return chunks;
}

/**
 * Sets `pageStart`/`pageEnd` on each chunk from the document segments that carry
 * a numeric `page` and overlap the chunk's span (a chunk lying in a gap between
 * segments takes the page of the nearest segment before it). Documents without
 * paged segments are left untouched.
 */
export function annotatePages(doc: ExtractedDocument, chunks: Chunk[]): Chunk[] {
  const pages = (doc.segments ?? [])
    .filter((s) => typeof s.metadata.page === "number")
    .map((s) => ({ start: s.start, end: s.end, page: s.metadata.page as number }))
    .sort((a, b) => a.start - b.start);
  if (pages.length === 0) return chunks;
  for (const c of chunks) {
    let lo = Number.POSITIVE_INFINITY;
    let hi = Number.NEGATIVE_INFINITY;
    let before: number | undefined;
    for (const p of pages) {
      if (p.start >= c.end) break;
      if (p.end > c.start) {
        lo = Math.min(lo, p.page);
        hi = Math.max(hi, p.page);
      } else {
        before = p.page;
      }
    }
    if (lo === Number.POSITIVE_INFINITY) {
      const page = before ?? pages[0]?.page;
      if (page === undefined) continue;
      lo = page;
      hi = page;
    }
    c.metadata.pageStart = lo;
    c.metadata.pageEnd = hi;
  }
  return chunks;
}

/**
 * A strategy's core: chunks for one document, in any order, indices not yet set.
 * Strategies that need asynchronous setup (a parser, an embedder) return a promise.
 */
export type ChunkFn = (doc: ExtractedDocument, limits: ChunkLimits) => Chunk[] | Promise<Chunk[]>;

/**
 * Prepends each chunk's document context (see `chunk/context.ts`) to its context
 * prefix (`context\nown prefix`, or the context alone), shortened with
 * {@link fitPrefix} so the chunk text stays within `limits.size`; a context that
 * does not fit at all is left out. The body span is unchanged.
 */
export function applyDocumentContext(
  doc: ExtractedDocument,
  chunks: Chunk[],
  context: DocumentContext,
  limits: ChunkLimits,
): Chunk[] {
  if (context.longest === 0) return chunks;
  for (const c of chunks) {
    const line = context.at(c);
    if (!line) continue;
    const body = doc.text.slice(c.start, c.end);
    // Lines of the chunk's own prefix that the context already says are not repeated.
    const own = withoutRepeats(line, c.contextPrefix);
    const fitted = fitPrefix(limits, line, own ? `${own}\n\n${body}` : body);
    // A context cut to a stub ("src…") says nothing: leave it out.
    if (!fitted || (fitted !== line && fitted.length < Math.min(24, line.length))) continue;
    const prefix = own ? `${fitted}\n${own}` : fitted;
    c.contextPrefix = prefix;
    c.text = withContext(prefix, body);
  }
  return chunks;
}

/** Characters left in each chunk for an LLM-written context sentence. */
export const LLM_CONTEXT_CHARS = 200;

/** Room (in `limits.measure` units) for an LLM context sentence and its line break; 0 when the chunk is too small. */
function llmReserve(limits: ChunkLimits): number {
  if (Math.floor(limits.size / 3) < 24) return 0;
  return limits.measure.count(`${"x".repeat(LLM_CONTEXT_CHARS)}\n`);
}

/**
 * Limits for a strategy that leaves `reserve` units of each chunk for the document
 * context: a smaller size (overlap and minimum clamped below it), the rest the same.
 */
function reservedLimits(limits: ChunkLimits, reserve: number): ChunkLimits {
  if (reserve <= 0) return limits;
  const size = limits.size - reserve;
  return {
    ...limits,
    size,
    overlap: Math.min(limits.overlap, Math.max(0, size - 1)),
    minSize: Math.min(limits.minSize, Math.max(0, size - 1)),
  };
}

/**
 * Wraps a strategy function as a {@link Chunker}: validates `config` now
 * (so a bad configuration fails before any text is read), and on every call
 * merges tiny fragments, annotates pages, adds each chunk's document context
 * (title, organisation, period, section…; see `chunk/context.ts`) to its prefix
 * and finalises indices. A document that does not fit one chunk is split with
 * room left for its context (at most a quarter of the chunk); one that fits is
 * not split for it (its context is shortened instead, or left out). The
 * chunker is synchronous when `fn` is.
 * @throws ConfigError for invalid chunking parameters.
 */
export function defineChunker(
  name: string,
  config: Pick<ChunkingConfig, "chunkSize" | "chunkOverlap"> & Partial<Omit<ChunkingConfig, "strategy">>,
  fn: ChunkFn,
): Chunker {
  const limits = validateChunkingConfig(config);
  return {
    name,
    limits,
    chunk(doc: ExtractedDocument): Chunk[] | Promise<Chunk[]> {
      const context = documentContext(doc);
      const split = sizeOf(limits, doc.text) > limits.size;
      // With a context LLM (see `llm-context.ts`), its sentence needs room too.
      const llm = config.contextLlm && split ? llmReserve(limits) : 0;
      const reserve =
        split && (context.longest > 0 || llm > 0)
          ? Math.min(Math.floor(limits.size / 3), contextReserve(context, limits) + llm)
          : 0;
      const inner = reservedLimits(limits, reserve);
      const finish = (chunks: Chunk[]): Chunk[] =>
        finalizeChunks(
          annotateLines(
            doc,
            applyDocumentContext(
              doc,
              annotatePages(doc, mergeTinyChunks(doc, enforceSize(doc.text, chunks, inner), inner)),
              context,
              limits,
            ),
          ),
        );
      const result = fn(doc, inner);
      return Array.isArray(result) ? finish(result) : result.then(finish);
    },
  };
}

/** Text made only of HTML comments and empty anchors (`<a id="…"></a>`), e.g. link targets above a heading. */
const MARKUP_ONLY = /^(\s*(<!--[\s\S]*?-->|<a\s+(id|name)="[^"]*"\s*>\s*<\/a>))+\s*$/;

/** Chunk types whose tiny pieces are merged by {@link mergeTinyChunks} (email and Slack keep their own units). */
const MERGEABLE = new Set(["text", "paragraph", "section", "code_function", "code_class", "code_block"]);

/**
 * Merges a chunk whose body is shorter than `limits.minSize` into its previous
 * neighbour (else its next one) when the merged chunk (context prefix + body)
 * still fits `limits.size`. The merged body is the exact source span from the
 * first chunk's start to the last one's end, so no text is lost and offsets stay
 * exact; the earlier chunk's prefix, type and metadata are kept. Stops stray
 * fragments (a lone `/**`, a link definition, an HTML comment) from becoming
 * chunks of their own. Applies to text, paragraph and code chunks, to section
 * chunks of the same heading path (pieces of one split section), and to a short
 * preamble before the first heading or a markup-only piece (anchor, comment),
 * which joins the following section.
 */
export function mergeTinyChunks(doc: ExtractedDocument, chunks: Chunk[], limits: ChunkLimits): Chunk[] {
  if (limits.minSize <= 0 || chunks.length < 2) return chunks;
  const out = inOrder(chunks) ? [...chunks] : [...chunks].sort((a, b) => a.start - b.start || a.end - b.end);
  const merge = (a: Chunk, b: Chunk): Chunk | undefined => {
    if (!MERGEABLE.has(a.chunkType) || !MERGEABLE.has(b.chunkType)) return undefined;
    // Sections merge only with pieces of the same section: separate headings stay separate chunks.
    if ((a.chunkType === "section" || b.chunkType === "section") && !sameHeadingPath(a, b)) return undefined;
    const end = Math.max(a.end, b.end);
    const body = doc.text.slice(a.start, end);
    const text = withContext(a.contextPrefix, body);
    if (limits.measure.count(text) > limits.size) return undefined;
    return { ...a, end, text, metadata: mergedMetadata(a, b) };
  };
  // A short preamble before the first heading, or a markup-only tail (an HTML anchor or comment
  // placed just above the next heading), joins the following section under its heading path.
  const mergePreamble = (a: Chunk, b: Chunk): Chunk | undefined => {
    if (a.chunkType !== "section" || b.chunkType !== "section") return undefined;
    const preamble =
      ((a.metadata.headingPath as string[] | undefined) ?? []).length === 0 &&
      a.metadata.headings === undefined;
    if (!preamble && !MARKUP_ONLY.test(doc.text.slice(a.start, a.end))) return undefined;
    const body = doc.text.slice(a.start, b.end);
    const text = withContext(b.contextPrefix, body);
    return limits.measure.count(text) > limits.size ? undefined : { ...b, start: a.start, text };
  };
  const tiny = (c: Chunk): boolean => sizeOf(limits, doc.text, c.start, c.end) < limits.minSize;
  let i = 0;
  while (i < out.length) {
    const c = out[i] as Chunk;
    if (tiny(c) && out.length > 1) {
      const prev = i > 0 ? merge(out[i - 1] as Chunk, c) : undefined;
      if (prev) {
        out.splice(i - 1, 2, prev);
        i = Math.max(0, i - 1);
        continue;
      }
      const next =
        i + 1 < out.length
          ? (merge(c, out[i + 1] as Chunk) ?? mergePreamble(c, out[i + 1] as Chunk))
          : undefined;
      if (next) {
        out.splice(i, 2, next);
        continue;
      }
    }
    i++;
  }
  return out;
}

/**
 * Metadata of chunk `a` merged with its neighbour `b`: `a`'s, and when either
 * covers several sections (`metadata.headings`), the headings of both in order
 * (a chunk without `headings` covers its own `headingPath`), without repeats
 * and without the empty path of text before the first heading.
 */
function mergedMetadata(a: Chunk, b: Chunk): Record<string, unknown> {
  const covered = (c: Chunk): string[][] | undefined => c.metadata.headings as string[][] | undefined;
  if (covered(a) === undefined && covered(b) === undefined) return a.metadata;
  const all = [a, b].flatMap((c) => covered(c) ?? [(c.metadata.headingPath as string[] | undefined) ?? []]);
  const seen = new Set<string>();
  // Text before the first heading (path `[]`) is under no heading: it names none.
  const headings = all.filter((p) => {
    if (p.length === 0) return false;
    const key = p.join("\u0000");
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
  return { ...a.metadata, headings };
}

function sameHeadingPath(a: Chunk, b: Chunk): boolean {
  const x = (a.metadata.headingPath as unknown[] | undefined) ?? [];
  const y = (b.metadata.headingPath as unknown[] | undefined) ?? [];
  return x.length === y.length && x.every((v, i) => v === y[i]);
}
