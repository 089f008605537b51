/**
 * DOCUMENT strategy (Markdown structure): one chunk per heading section, long
 * sections split block-aware (paragraphs, fenced code, tables), each chunk
 * prefixed with its heading path.
 */
import type { ChunkingConfig } from "../config.js";
import type { Chunk, ExtractedDocument } from "../types.js";
import type { Chunker } from "./contract.js";
import {
  bodyBudget,
  type ChunkLimits,
  defineChunker,
  fitPrefix,
  makeChunk,
  type Span,
  sizeOf,
  skipBlankBackward,
  skipBlankForward,
} from "./spans.js";
import { type Line, lineSpans, lineTable, type Piece, pack, spanMeasurer, splitRange } from "./split.js";

/** Kinds of Markdown block recognised by {@link parseMarkdownBlocks}. */
export type MarkdownBlockKind = "heading" | "fence" | "table" | "paragraph" | "frontmatter";

/** A top-level Markdown block; `[start, end)` is trimmed of blank edges. */
export interface MarkdownBlock extends Span {
  kind: MarkdownBlockKind;
  /** Heading level 1–6 (`heading` only). */
  level?: number;
  /** Heading text without `#` marks, closing hashes, `{#anchor}` attributes or `\r` (`heading` only). */
  title?: string;
  /** Header row and delimiter row, `\n`-joined and trimmed (`table` only). */
  tableHeader?: string;
  /** End offset of the delimiter row (`table` only). */
  headerEnd?: number;
}

const FENCE_OPEN = /^ {0,3}(`{3,}|~{3,})(.*)$/;
const FENCE_CLOSE = /^ {0,3}(`{3,}|~{3,})[ \t]*$/;
const ATX = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$/;
const SETEXT = /^ {0,3}(=+|-{2,})[ \t]*$/;
const NOT_SETEXT_PARA = /^(?: {4,}|\t| {0,3}(?:>|[-+*][ \t]|\d{1,9}[.)][ \t]|<))/;
/** A whole line in capitals ending with a colon (`TERMS AND CONDITIONS:`), at least 3 letters, no lower case. */
const CAPS_TITLE =
  /^ {0,3}(?=(?:[^\p{Ll}\n]*?\p{Lu}){3})([\p{Lu}\p{N}][\p{Lu}\p{N} &/,'().-]{1,78}):[ \t]*$/u;
/** The first character of the line `[start, end)` after up to 3 leading spaces (a tab or 4th space counts). */
function firstNonSpace(text: string, start: number, end: number): string {
  let i = start;
  while (i < start + 3 && i < end && text.charCodeAt(i) === 32) i++;
  return i < end ? text.charAt(i) : "";
}

/** True when the line `[start, end)` has only table-delimiter characters (`|`, `:`, `-`, spaces, tabs). */
function onlyDelimiterChars(text: string, start: number, end: number): boolean {
  for (let i = start; i < end; i++) {
    const c = text.charCodeAt(i);
    if (c !== 124 && c !== 58 && c !== 45 && c !== 32 && c !== 9) return false;
  }
  return end > start;
}

/** True when the line `[start, end)` ends with `:` before optional trailing spaces/tabs. */
function endsWithColon(text: string, start: number, end: number): boolean {
  let i = end - 1;
  while (i >= start && (text.charCodeAt(i) === 32 || text.charCodeAt(i) === 9)) i--;
  return i >= start && text.charCodeAt(i) === 58;
}

const TABLE_DELIMITER = /^\s*\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)*\|?\s*$/;

/** Cleans a raw heading text: closing `#`s, `{ #anchor }` attributes, surrounding blanks. */
function headingTitle(raw: string): string {
  return raw
    .replace(/(?:^|[ \t]+)#+[ \t]*$/, "")
    .replace(/\s*\{\s*[#.][^{}]*\}\s*$/, "")
    .trim();
}

/**
 * Splits Markdown into top-level blocks: ATX and Setext headings, capitals-only
 * `TITLE:` lines (as headings one level below the last Markdown heading), fenced code
 * (``` or ~~~, length ≥ 3, closed by the same character with at least the same
 * length, or running to the end), GFM tables (header + delimiter row, then rows
 * containing `|`), YAML front matter, and paragraphs (everything else, up to a
 * blank line). `#` lines inside fences and front matter are not headings. CRLF
 * and CR line endings are handled; titles never contain `\r`.
 */
export function parseMarkdownBlocks(text: string): MarkdownBlock[] {
  // Line offsets in typed arrays: no object per line (this parser runs on every Markdown/HTML document).
  const { count: n, starts: S, ends: E } = lineTable(text);
  const blocks: MarkdownBlock[] = [];
  const lt = (k: number): string => text.slice(S[k] as number, E[k] as number);
  const push = (
    kind: MarkdownBlockKind,
    start: number,
    end: number,
    extra?: Partial<MarkdownBlock>,
  ): void => {
    const s = skipBlankForward(text, start, end);
    const e = skipBlankBackward(text, end, s);
    if (e <= s) return;
    const block: MarkdownBlock = { start: s, end: e, kind };
    if (extra) Object.assign(block, extra);
    blocks.push(block);
  };
  let para: { start: number; end: number; firstEnd: number } | null = null;
  // First `|` at or after the current line (lines are visited in order, so the search is linear overall).
  let nextPipe = -2;
  const lineHasPipe = (start: number, end: number): boolean => {
    if (nextPipe !== -1 && nextPipe < start) nextPipe = text.indexOf("|", start);
    return nextPipe !== -1 && nextPipe < end;
  };
  let table: MarkdownBlock | null = null;
  const closePara = (): void => {
    if (para) push("paragraph", para.start, para.end);
    para = null;
  };
  const closeTable = (): void => {
    if (table)
      push("table", table.start, table.end, { tableHeader: table.tableHeader, headerEnd: table.headerEnd });
    table = null;
  };
  let i = 0;
  /** Level of the last ATX/Setext heading (0 before any). */
  let markdownLevel = 0;
  if (n > 0 && lt(0).trimEnd() === "---") {
    for (let j = 1; j < n; j++) {
      const t = lt(j).trimEnd();
      if (t === "---" || t === "...") {
        push("frontmatter", S[0] as number, E[j] as number);
        i = j + 1;
        break;
      }
    }
  }
  for (; i < n; i++) {
    const ls = S[i] as number;
    const le = E[i] as number;
    if (skipBlankForward(text, ls, le) >= le) {
      closePara();
      closeTable();
      continue;
    }
    // Cheap guards on the first non-space character keep the per-line regexes off most lines.
    const lead = firstNonSpace(text, ls, le);
    const fence = lead === "`" || lead === "~" ? FENCE_OPEN.exec(lt(i)) : null;
    const marker = fence?.[1];
    if (fence && marker && !(marker.startsWith("`") && (fence[2] ?? "").includes("`"))) {
      closePara();
      closeTable();
      let end = E[n - 1] as number;
      let j = i + 1;
      for (; j < n; j++) {
        const c = FENCE_CLOSE.exec(lt(j));
        const close = c?.[1];
        if (close && close[0] === marker[0] && close.length >= marker.length) {
          end = E[j] as number;
          break;
        }
      }
      push("fence", ls, end);
      i = j;
      continue;
    }
    const atx = lead === "#" ? ATX.exec(lt(i)) : null;
    if (atx) {
      closePara();
      closeTable();
      markdownLevel = atx[1]?.length ?? 1;
      push("heading", ls, le, { level: markdownLevel, title: headingTitle(atx[2] ?? "") });
      continue;
    }
    const caps = table || !endsWithColon(text, ls, le) ? null : CAPS_TITLE.exec(lt(i));
    if (caps) {
      // Plain-text section titles nest under the current Markdown heading.
      closePara();
      const level = Math.min(6, markdownLevel + 1);
      push("heading", ls, le, { level, title: (caps[1] ?? "").trim() });
      continue;
    }
    const setext = lead === "=" || lead === "-" ? SETEXT.exec(lt(i)) : null;
    const p = para as { start: number; end: number; firstEnd: number } | null;
    if (setext && p && !NOT_SETEXT_PARA.test(text.slice(p.start, p.firstEnd))) {
      const level = setext[1]?.startsWith("=") ? 1 : 2;
      markdownLevel = level;
      const title = headingTitle(
        text
          .slice(p.start, p.end)
          .split(/\r\n|\r|\n/)
          .map((s) => s.trim())
          .join(" "),
      );
      push("heading", p.start, le, { level, title });
      para = null;
      continue;
    }
    const pipe = lineHasPipe(ls, le);
    if (table) {
      const tb = table as MarkdownBlock;
      if (pipe) {
        tb.end = le;
        continue;
      }
      closeTable();
    }
    const hasNext = i + 1 < n;
    if (
      pipe &&
      hasNext &&
      onlyDelimiterChars(text, S[i + 1] as number, E[i + 1] as number) &&
      TABLE_DELIMITER.test(lt(i + 1)) &&
      lt(i + 1).includes("-")
    ) {
      const nt = lt(i + 1);
      const t = lt(i);
      const nextEnd = E[i + 1] as number;
      if (nt.includes("|") || t.trim().startsWith("|")) {
        closePara();
        table = {
          kind: "table",
          start: ls,
          end: nextEnd,
          headerEnd: nextEnd,
          tableHeader: `${t.trim()}\n${nt.trim()}`,
        };
        i++;
        continue;
      }
    }
    if (p) {
      p.end = le;
    } else {
      para = { start: ls, end: le, firstEnd: le };
    }
  }
  closePara();
  closeTable();
  return blocks;
}

/** A heading section: its blocks and the heading path above and including it. */
interface Section extends Span {
  blocks: MarkdownBlock[];
  path: string[];
  /** Heading level of the section (0 for text before the first heading). */
  level: number;
  /** Set when small sibling sections were merged: their common parent path. */
  merged?: string[];
  /** Heading path of the first section of a merged group. */
  firstPath?: string[];
  /** Span of the last section merged into this one. */
  lastMember?: Span;
}

/** Groups blocks into sections (heading + content up to the next heading of any level). */
function sectionsOf(blocks: MarkdownBlock[]): Section[] {
  const sections: Section[] = [];
  const stack: { level: number; title: string }[] = [];
  let cur: Section | null = null;
  for (const b of blocks) {
    if (b.kind === "heading") {
      const level = b.level ?? 1;
      while (stack.length > 0 && (stack[stack.length - 1]?.level ?? 0) >= level) stack.pop();
      stack.push({ level, title: b.title ?? "" });
      cur = {
        start: b.start,
        end: b.end,
        blocks: [b],
        level,
        path: stack.map((h) => h.title).filter(Boolean),
      };
      sections.push(cur);
      continue;
    }
    if (!cur) {
      cur = { start: b.start, end: b.end, blocks: [], level: 0, path: [] };
      sections.push(cur);
    }
    cur.blocks.push(b);
    cur.end = b.end;
  }
  return sections;
}

/** Heading-only sections are carried into the following deeper section. */
function carryEmptyHeadings(sections: Section[]): Section[] {
  const out: Section[] = [];
  let carry: Section | null = null;
  sections.forEach((s, i) => {
    let sec = s;
    if (carry) sec = { ...s, start: carry.start, blocks: [...carry.blocks, ...s.blocks] };
    carry = null;
    const next = sections[i + 1];
    if (sec.blocks.every((b) => b.kind === "heading") && next && next.level > s.level) carry = sec;
    else out.push(sec);
  });
  return out;
}

/**
 * Joins a heading path as `A > B > C`, dropping leading headings (`… > C`) to
 * stay within half of `limits.size` (in `limits.measure` units).
 */
function pathPrefix(path: string[], limits: ChunkLimits): string {
  const max = Math.floor(limits.size / 2) - 2;
  let parts = path;
  let text = parts.join(" > ");
  while (parts.length > 1 && limits.measure.count(text) > max) {
    parts = parts.slice(1);
    text = `… > ${parts.join(" > ")}`;
  }
  return text;
}

/** Merges consecutive small sibling sections (same parent path) while the result fits. */
function mergeSiblings(text: string, sections: Section[], limits: ChunkLimits): Section[] {
  if (limits.minSize <= 0) return sections;
  const out: Section[] = [];
  const parentKey = (s: Section): string => s.path.slice(0, -1).join("\u0000");
  for (const s of sections) {
    const prev = out[out.length - 1];
    const small = (x: Span): boolean => sizeOf(limits, text, x.start, x.end) < limits.minSize;
    if (
      prev &&
      prev.level > 0 &&
      s.level > 0 &&
      small(s) &&
      prev.blocks.length > 0 &&
      parentKey(prev) === parentKey(s) &&
      small(prev.lastMember ?? prev)
    ) {
      const parent = s.path.slice(0, -1);
      const budget = bodyBudget(limits, pathPrefix(parent, limits));
      if (sizeOf(limits, text, prev.start, s.end) <= budget) {
        out[out.length - 1] = {
          start: prev.start,
          end: s.end,
          blocks: [...prev.blocks, ...s.blocks],
          level: s.level,
          path: s.path,
          merged: parent,
          firstPath: prev.firstPath ?? prev.path,
          lastMember: { start: s.start, end: s.end },
        };
        continue;
      }
    }
    out.push(s);
  }
  return out;
}

/** Pieces of an oversized table: rows are never cut (unless one row alone is too long); continuations repeat the header in their prefix. */
function splitTable(
  text: string,
  table: MarkdownBlock,
  lead: number,
  budget: number,
  prefix: string,
  limits: ChunkLimits,
): Piece[] {
  const { measure } = limits;
  const size = (start: number, end: number): number => sizeOf(limits, text, start, end);
  const rows = lineSpans(text, table.start, table.end).filter((r) => r.end > r.start);
  const headerEnd = table.headerEnd ?? rows[1]?.end ?? table.end;
  const pieces: Piece[] = [];
  let idx = rows.findIndex((r) => r.start >= headerEnd);
  if (idx < 0) idx = rows.length;
  let end = headerEnd;
  if (size(lead, headerEnd) > budget) {
    pieces.push(...splitRange(text, lead, headerEnd, { size: budget, mode: "lines", measure }));
  } else {
    while (idx < rows.length && size(lead, (rows[idx] as Line).end) <= budget)
      end = (rows[idx++] as Line).end;
    pieces.push({ start: lead, end });
  }
  const contPrefix = `${prefix ? `${prefix}\n\n` : ""}${table.tableHeader ?? ""}`;
  const contBudget = bodyBudget(limits, contPrefix);
  while (idx < rows.length) {
    const first = rows[idx] as Line;
    if (size(first.start, first.end) > contBudget) {
      for (const p of splitRange(text, first.start, first.end, {
        size: contBudget,
        mode: "lines",
        measure,
      })) {
        pieces.push({ ...p, prefix: contPrefix });
      }
      idx++;
      continue;
    }
    let last = first.end;
    idx++;
    while (idx < rows.length && size(first.start, (rows[idx] as Line).end) <= contBudget)
      last = (rows[idx++] as Line).end;
    pieces.push({ start: first.start, end: last, prefix: contPrefix });
  }
  return pieces;
}

/**
 * `headingPath` of the chunks of a section. A merged sibling group takes its
 * parent's path; top-level siblings have no parent heading, and an empty path would
 * describe text before the first heading (a preamble, which joins the following
 * section), so they take the path of the first sibling: where the chunk starts.
 */
function headingPathOf(sec: Section): string[] {
  if (!sec.merged) return sec.path;
  return sec.merged.length > 0 ? sec.merged : (sec.firstPath ?? sec.path);
}

/** Chunks one section (or merged sibling group). */
function chunkSection(text: string, sec: Section, limits: ChunkLimits): Chunk[] {
  // The prefix path: a merged group begins with its first sibling's heading line, so
  // its prefix is the parent path (never a heading the body itself starts with).
  const path = sec.merged ?? sec.path;
  const prefix = pathPrefix(path, limits);
  const budget = bodyBudget(limits, prefix);
  const size = spanMeasurer(text, limits.measure);
  const headingPath = headingPathOf(sec);
  const metadata = (): Record<string, unknown> => ({ headingPath: [...headingPath] });
  // A chunk that starts with the section's own heading line already shows that heading: its
  // prefix is the parent path only, so the heading is not embedded twice.
  const heading = !sec.merged && sec.blocks[0]?.kind === "heading" ? sec.blocks[0] : undefined;
  let leading = 0;
  while (sec.blocks[leading]?.kind === "heading") leading++;
  const parentPrefix = heading
    ? pathPrefix(path.slice(0, Math.max(0, path.length - leading)), limits)
    : prefix;
  const make = (span: Span, p: string): Chunk =>
    makeChunk(text, span, "section", {
      prefix: fitPrefix(
        limits,
        heading && span.start === heading.start && p === prefix ? parentPrefix : p,
        text.slice(span.start, span.end),
      ),
      metadata: metadata(),
    });
  if (size(sec.start, sec.end) <= budget) return [make(sec, prefix)];
  const groups = pack(sec.blocks, budget, {
    size,
    resume: true,
    carry: (group, next) => {
      const first = group[0];
      if (!first || !group.every((b) => b.kind === "heading" || b.kind === "paragraph")) return false;
      const last = group[group.length - 1] as MarkdownBlock;
      if (size(first.start, last.end) > budget / 2) return false;
      return next.kind !== "table" || size(first.start, next.headerEnd ?? next.end) <= budget;
    },
    split: (u, lead) => {
      if (u.kind === "table") return splitTable(text, u, lead, budget, prefix, limits);
      const mode = u.kind === "fence" ? "lines" : "prose";
      // Pieces of an oversized paragraph overlap like FIXED windows; fences are cut at lines without overlap.
      const overlap = u.kind === "fence" ? 0 : Math.min(limits.overlap, Math.floor(budget / 2));
      return splitRange(text, lead, u.end, { size: budget, mode, measure: limits.measure, overlap });
    },
  });
  return groups.map((g) => make(g, g.prefix ?? prefix));
}

/**
 * Splits Markdown `doc.text` into DOCUMENT chunks (chunkType `section`).
 *
 * Sections are a heading plus its content up to the next heading (ATX `#`..`######`,
 * Setext, or a plain-text title line in capitals ending with a colon such as
 * `TERMS AND CONDITIONS:`, nested one level under the current Markdown heading;
 * heading-like lines inside fenced code — ``` or ~~~, any fence length — are ignored). A heading with no content
 * of its own joins the following subsection; with `minSize` > 0, consecutive
 * sibling sections shorter than `minSize` merge while they fit (headingPath then is
 * their parent's path, or for top-level siblings the first sibling's path, since
 * an empty path means text before the first heading; the prefix is the parent
 * path). A section longer than the budget is split block-aware:
 * whole paragraphs/fences/tables are grouped; an oversized paragraph is cut at
 * sentence ends, an oversized fence at line boundaries, an oversized table between
 * rows with the header row repeated in the continuation chunks' prefix.
 *
 * Every chunk's `contextPrefix` is its heading path (`Guide > Install > Linux`,
 * leading headings elided as `… >` when it would exceed half of `limits.size`),
 * without the trailing headings whose lines the chunk itself starts with (so a
 * heading is never embedded twice); `metadata.headingPath` is the full path as a
 * `string[]`; text before the first heading has
 * no prefix and `headingPath: []`. The body budget leaves room for the prefix, so
 * `text.length ≤ limits.size` as long as `limits.size` ≥ about 10.
 */
export function chunkMarkdown(doc: ExtractedDocument, limits: ChunkLimits): Chunk[] {
  const sections = mergeSiblings(
    doc.text,
    carryEmptyHeadings(sectionsOf(parseMarkdownBlocks(doc.text))),
    limits,
  );
  return sections.flatMap((s) => chunkSection(doc.text, s, limits));
}

/**
 * Creates the DOCUMENT (Markdown) chunker (see {@link chunkMarkdown}).
 * @throws ConfigError for invalid chunking parameters.
 */
export function createDocumentChunker(config: ChunkingConfig): Chunker {
  return defineChunker("document", config, chunkMarkdown);
}
