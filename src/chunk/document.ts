/**
 * DOCUMENT strategy (Markdown structure): one chunk per heading section, long
 * sections split block-aware (paragraphs, fenced code, tables), each chunk
 * prefixed with its heading path.
 */
import type { ChunkingConfig } from "../config.js";
import { parseFrontMatter } from "../extract/markdown.js";
import type { Chunk, ExtractedDocument } from "../types.js";
import type { Chunker } from "./contract.js";
import { type MarkdownBlock, parseMarkdownBlocks } from "./markdown-blocks.js";
import { findBoundaries } from "./sentences.js";
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
import { type Line, lineSpans, type Piece, pack, spanMeasurer, splitRange } from "./split.js";

export { type MarkdownBlock, type MarkdownBlockKind, parseMarkdownBlocks } from "./markdown-blocks.js";

/** A heading section: its blocks and the heading path above and including it. */
interface Section extends Span {
  blocks: MarkdownBlock[];
  path: string[];
  /** Heading level of the section (0 for text before the first heading). */
  level: number;
  /** Set when small sibling sections were merged: the heading path of each of them, in order. */
  members?: string[][];
  /** Span of the last section merged into this one. */
  lastMember?: Span;
}

/** The heading path above each heading block (its parent headings' titles), set by {@link sectionsOf}. */
type ParentPaths = Map<MarkdownBlock, string[]>;

/** The longest common leading part of heading paths (`[]` when they share none). */
function commonPath(paths: readonly string[][]): string[] {
  const [first, ...rest] = paths;
  if (!first) return [];
  let n = first.length;
  for (const p of rest) {
    let k = 0;
    while (k < n && k < p.length && p[k] === first[k]) k++;
    n = k;
  }
  return first.slice(0, n);
}

/**
 * Groups blocks into sections (heading + content up to the next heading of any
 * level), recording each heading's parent path in `parents`.
 */
function sectionsOf(blocks: MarkdownBlock[], parents: ParentPaths): Section[] {
  const sections: Section[] = [];
  const stack: { level: number; title: string }[] = [];
  let cur: Section | null = null;
  for (const b of blocks) {
    if (b.kind === "heading") {
      const level = b.level ?? 1;
      while (stack.length > 0 && (stack[stack.length - 1]?.level ?? 0) >= level) stack.pop();
      parents.set(b, stack.map((h) => h.title).filter(Boolean));
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
          members: [...(prev.members ?? [prev.path]), s.path],
          lastMember: { start: s.start, end: s.end },
        };
        continue;
      }
    }
    out.push(s);
  }
  return out;
}

/**
 * Pieces of an oversized table: rows are never cut (unless one row alone is too long); continuations
 * repeat the header in their prefix. The first piece ends beyond `after` (see `SplitOptions.after`).
 */
function splitTable(
  text: string,
  table: MarkdownBlock,
  lead: number,
  budget: number,
  firstBudget: number,
  prefix: string,
  limits: ChunkLimits,
  after = lead,
): Piece[] {
  const { measure } = limits;
  const size = (start: number, end: number): number => sizeOf(limits, text, start, end);
  const rows = lineSpans(text, table.start, table.end).filter((r) => r.end > r.start);
  const headerEnd = table.headerEnd ?? rows[1]?.end ?? table.end;
  const pieces: Piece[] = [];
  let idx = rows.findIndex((r) => r.start >= headerEnd);
  if (idx < 0) idx = rows.length;
  let end = headerEnd;
  if (size(lead, headerEnd) > firstBudget) {
    pieces.push(
      ...splitRange(text, lead, headerEnd, {
        size: budget,
        firstSize: firstBudget,
        mode: "lines",
        measure,
        after,
      }),
    );
  } else {
    while (idx < rows.length && size(lead, (rows[idx] as Line).end) <= firstBudget)
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
 * `headingPath` of the chunks of a section: its own path, or for a merged group
 * of sibling sections the path they share (their parent's; `[]` for top-level
 * siblings, which `metadata.headings` then names).
 */
function headingPathOf(sec: Section): string[] {
  return sec.members ? commonPath(sec.members) : sec.path;
}

/** Chunks one section (or merged sibling group). */
function chunkSection(text: string, sec: Section, parents: ParentPaths, limits: ChunkLimits): Chunk[] {
  const headingPath = headingPathOf(sec);
  const prefix = pathPrefix(headingPath, limits);
  const budget = bodyBudget(limits, prefix);
  const size = spanMeasurer(text, limits.measure);
  const metadata = (): Record<string, unknown> => {
    const m: Record<string, unknown> = { headingPath: [...headingPath] };
    if (sec.members) m.headings = sec.members.map((p) => [...p]);
    return m;
  };
  // A chunk that starts with a heading line already shows that heading and the ones after it
  // (carried parents, merged siblings): its prefix keeps only the part of the path above that
  // first heading, so no heading — the document title included — is embedded twice.
  const headingAt = new Map<number, MarkdownBlock>();
  for (const b of sec.blocks) if (b.kind === "heading") headingAt.set(b.start, b);
  /** The prefix of a chunk starting at `start` with the default prefix. */
  const prefixAt = (start: number): string => {
    const lead = headingAt.get(start);
    return lead ? pathPrefix(commonPath([headingPath, parents.get(lead) ?? []]), limits) : prefix;
  };
  // …and so its body has the room that heading would take in the prefix: the budget is measured
  // with the prefix the chunk will really get (else a heading that fits is cut from its underline
  // or left alone in a chunk of its own).
  const budgets = new Map<number, number>();
  const budgetAt = (start: number): number => {
    if (!headingAt.has(start)) return budget;
    let b = budgets.get(start);
    if (b === undefined) {
      b = Math.max(budget, bodyBudget(limits, prefixAt(start)));
      budgets.set(start, b);
    }
    return b;
  };
  const make = (span: Span, p: string): Chunk => {
    const own = p === prefix ? prefixAt(span.start) : p;
    return makeChunk(text, span, "section", {
      prefix: fitPrefix(limits, own, text.slice(span.start, span.end)),
      metadata: metadata(),
    });
  };
  if (size(sec.start, sec.end) <= budgetAt(sec.start)) return [make(sec, prefix)];
  /** A group of headings only, taking at most half of its chunk (so text can follow it there). */
  const headingsOnly = (group: readonly MarkdownBlock[]): boolean => {
    const first = group[0];
    const last = group[group.length - 1];
    if (!first || !last || !group.every((b) => b.kind === "heading")) return false;
    return size(first.start, last.end) <= budgetAt(first.start) / 2;
  };
  /**
   * The last sentence end or line break inside paragraph `u` such that `[lead, it)` fits the
   * budget of a chunk starting at `lead`, or -1: where a heading carried into `u` is cut off
   * from the rest of `u` (never inside a sentence, so a paragraph that fits whole is not torn).
   */
  const leadCut = (lead: number, u: MarkdownBlock): number => {
    const room = budgetAt(lead);
    let best = -1;
    for (const b of findBoundaries(text, u.start, u.end)) {
      if (b.offset >= u.end) break;
      const end = skipBlankBackward(text, b.offset, u.start);
      if (end <= u.start || skipBlankForward(text, b.offset, u.end) >= u.end) continue;
      if (size(lead, end) > room) break;
      best = b.offset;
    }
    return best;
  };
  const groups = pack(sec.blocks, budget, {
    size,
    resume: true,
    budgetAt,
    carry: (group, next) => {
      const first = group[0];
      if (!first || !group.every((b) => b.kind === "heading" || b.kind === "paragraph")) return false;
      const last = group[group.length - 1] as MarkdownBlock;
      const room = budgetAt(first.start);
      if (size(first.start, last.end) > room / 2) return false;
      return next.kind !== "table" || size(first.start, next.headerEnd ?? next.end) <= room;
    },
    // A heading is not a chunk of its own while text of its section follows: when it does not fit
    // together with the next paragraph, it takes that paragraph's first sentences (or lines) along;
    // with a table, its header and first rows. Unless the heading takes over half of the chunk, or
    // not even the first sentence fits with it; fenced and indented code that fits whole stays whole.
    keepWithNext: (b) => b.kind === "heading",
    lead: (group, next) => {
      const first = group[0];
      if (!first || !headingsOnly(group)) return false;
      if (next.kind === "paragraph") return leadCut(first.start, next) > 0;
      return next.kind === "table" && size(first.start, next.headerEnd ?? next.end) <= budgetAt(first.start);
    },
    split: (u, lead, after) => {
      const firstSize = budgetAt(lead);
      if (u.kind === "table") return splitTable(text, u, lead, budget, firstSize, prefix, limits, after);
      const cut = u.kind === "paragraph" && lead < u.start ? leadCut(lead, u) : -1;
      if (cut > 0) {
        // A paragraph led by its heading: the heading takes the first sentences (or lines) that fit.
        const head: Piece = { start: lead, end: skipBlankBackward(text, cut, lead) };
        let rest = skipBlankForward(text, cut, u.end);
        if (rest >= u.end) return [head];
        const overlap = Math.min(limits.overlap, Math.floor(budget / 2));
        // Pieces of an oversized paragraph overlap: the next one starts at the earliest sentence
        // start (of this paragraph) within `overlap` before the cut.
        if (overlap > 0 && size(u.start, u.end) > budget) {
          const starts = [u.start, ...findBoundaries(text, u.start, cut).map((b) => b.offset)];
          for (const b of starts) {
            const p = skipBlankForward(text, b, cut);
            if (p < head.end && size(p, head.end) <= overlap && size(p, u.end) > 0) {
              rest = p;
              break;
            }
          }
        }
        const opts = { size: budget, measure: limits.measure, overlap };
        let tail = splitRange(text, rest, u.end, opts);
        // The next piece must reach past the head (else it lies inside it): then no overlap.
        if ((tail[0]?.end ?? u.end) <= head.end)
          tail = splitRange(text, skipBlankForward(text, cut, u.end), u.end, opts);
        return [head, ...tail];
      }
      // Only a heading longer than the budget is ever cut, between its lines where it has several.
      const lines = u.kind === "fence" || u.kind === "code" || u.kind === "heading";
      const mode = lines ? "lines" : "prose";
      // Pieces of an oversized paragraph overlap like FIXED windows; code and headings are cut without overlap.
      const overlap = lines ? 0 : Math.min(limits.overlap, Math.floor(budget / 2));
      const pieces = splitRange(text, lead, u.end, {
        after,
        size: budget,
        firstSize,
        mode,
        measure: limits.measure,
        overlap,
      });
      // An overlap never reaches back into the carried blocks (a piece starting on a setext underline).
      let prevEnd = lead;
      return pieces.flatMap((p) => {
        const start = skipBlankForward(text, Math.max(p.start, Math.min(u.start, prevEnd)), p.end);
        prevEnd = p.end;
        return p.end > start ? [{ start, end: p.end }] : [];
      });
    },
  });
  return groups.map((g) => make(g, g.prefix ?? prefix));
}

/**
 * Splits Markdown `doc.text` into DOCUMENT chunks (chunkType `section`).
 *
 * Sections are a heading plus its content up to the next heading: ATX and setext
 * headings as CommonMark 0.31.2 §4.2/§4.3 define them (see {@link parseMarkdownBlocks};
 * nothing inside fenced or indented code; `---` after a blank line is a thematic
 * break), or a plain-text title line in capitals ending with a colon such as
 * `TERMS AND CONDITIONS:`, nested one level under the current Markdown heading. A heading with no content
 * of its own joins the following subsection; with `minSize` > 0, consecutive
 * sibling sections shorter than `minSize` merge while they fit: `headingPath` is
 * then the path they share (their parent's, `[]` for top-level siblings) and
 * `metadata.headings` the path of each merged section, so a citation names them
 * all. A section longer than the budget is split block-aware: whole
 * paragraphs/fences/indented code/tables are grouped; an oversized paragraph is cut at
 * sentence ends, an oversized fence at line boundaries, an oversized table between
 * rows with the header row repeated in the continuation chunks' prefix; a heading
 * (a setext heading's text lines and underline are one block) is never cut unless
 * it alone exceeds the budget. A chunk starting with a heading is budgeted with the
 * prefix it really gets (without that heading), and a heading is not a chunk of its
 * own while its section has text: it takes the first sentences (or lines) of the
 * next paragraph that fit with it, or a table's header and first rows, unless it
 * takes over half the chunk or not one sentence fits after it (code that fits
 * whole is not cut for it); headings that would end a group move on to the next.
 * Front matter (YAML `---` or TOML `+++`, as `parseFrontMatter` reads it) is not
 * chunked, unless the file has nothing else: it is document metadata, and its
 * raw `title:` would repeat the H1.
 *
 * Every chunk's `contextPrefix` is its heading path (`Guide > Install > Linux`,
 * leading headings elided as `… >` when it would exceed half of `limits.size`),
 * without the headings whose lines the chunk itself starts with — carried parent
 * headings and the document title included — so a heading is never embedded
 * twice; `metadata.headingPath` is the full path as a `string[]`; text before the
 * first heading has no prefix and `headingPath: []`. The body budget leaves room
 * for the prefix, so `text.length ≤ limits.size` as long as `limits.size` ≥ about 10.
 */
export function chunkMarkdown(doc: ExtractedDocument, limits: ChunkLimits): Chunk[] {
  const parents: ParentPaths = new Map();
  // Front matter is document metadata (the extractor lifts it into `frontMatter`, `title`, …), not
  // chunk text: its raw block would repeat the title beside the H1 in the first chunk.
  const frontMatterEnd = parseFrontMatter(doc.text)?.end ?? 0;
  const all = parseMarkdownBlocks(doc.text, { frontMatterEnd });
  const body = frontMatterEnd === 0 ? all : all.filter((b) => b.kind !== "frontmatter");
  // A file that is only front matter (a site's section index) keeps it: it is all there is to find.
  const blocks = body.length > 0 ? body : all;
  const sections = mergeSiblings(doc.text, carryEmptyHeadings(sectionsOf(blocks, parents)), limits);
  return sections.flatMap((s) => chunkSection(doc.text, s, parents, limits));
}

/**
 * Creates the DOCUMENT (Markdown) chunker (see {@link chunkMarkdown}).
 * @throws ConfigError for invalid chunking parameters.
 */
export function createDocumentChunker(config: ChunkingConfig): Chunker {
  return defineChunker("document", config, chunkMarkdown);
}
