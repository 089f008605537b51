/**
 * SEMANTIC strategy (paragraph-aware): paragraphs separated by blank lines are
 * grouped up to `chunkSize`; oversized paragraphs are cut FIXED-style.
 */
import type { ChunkingConfig } from "../config.js";
import type { Chunk, ExtractedDocument } from "../types.js";
import type { Chunker } from "./contract.js";
import { CHAR_MEASURE, type SizeMeasure } from "./measure.js";
import { bodyBudget, type ChunkLimits, defineChunker, makeChunk, type Span, trimSpan } from "./spans.js";
import { type Group, mergeShortTail, pack, paragraphSpans, spanMeasurer, splitRange } from "./split.js";
import { documentTables, splitTableRegion, type TableRegion } from "./tables.js";

/** A unit of SEMANTIC packing: a paragraph, or a whole table region. */
interface Unit extends Span {
  table?: TableRegion;
}

/**
 * Paragraphs of `[start, end)` with each table region as one unit of its own: the
 * parts of paragraphs outside a region stay paragraphs, the region (which may span
 * several paragraphs) replaces the parts inside it.
 */
function unitsWithTables(text: string, start: number, end: number, tables: readonly TableRegion[]): Unit[] {
  const regions = tables.filter((t) => t.end > start && t.start < end);
  if (regions.length === 0) return paragraphSpans(text, start, end);
  const out: Unit[] = [];
  let r = 0;
  for (const p of paragraphSpans(text, start, end)) {
    let pos = p.start;
    while (pos < p.end) {
      while (r < regions.length && (regions[r] as TableRegion).end <= pos) r++;
      const t = regions[r];
      if (!t || t.start >= p.end) {
        const rest = trimSpan(text, pos, p.end);
        if (rest) out.push(rest);
        break;
      }
      const before = trimSpan(text, pos, t.start);
      if (before) out.push(before);
      if (out[out.length - 1]?.table !== t) out.push({ start: t.start, end: t.end, table: t });
      pos = Math.max(pos, t.end);
    }
  }
  return out;
}

/**
 * Groups of consecutive paragraphs of `text.slice(start, end)`, each spanning at
 * most `budget` (in `opts.measure` units, default characters). A paragraph longer than `budget` is cut at sentence
 * ends (then whitespace, then grapheme boundaries), overlapping by `overlap`
 * characters; a small group before it (≤ half the budget) is cut together with
 * it and its last piece can take the following paragraphs; groups never overlap
 * each other. A last
 * group shorter than `minSize` joins the previous one when the result fits.
 */
export function paragraphGroups(
  text: string,
  start: number,
  end: number,
  budget: number,
  opts: {
    overlap?: number;
    minSize?: number;
    measure?: SizeMeasure;
    /** Table regions (see `chunk/tables.ts`): each is one unit, cut only between rows. */
    tables?: readonly TableRegion[];
    /** Body budget of a table continuation that carries `header` as its prefix. Default `budget`. */
    headerBudget?: (header: string) => number;
  } = {},
): Group<Span>[] {
  const measure = opts.measure ?? CHAR_MEASURE;
  const size = spanMeasurer(text, measure);
  const units: Unit[] = opts.tables
    ? unitsWithTables(text, start, end, opts.tables)
    : paragraphSpans(text, start, end);
  const groups = pack(units, budget, {
    size,
    split: (u, lead, after) =>
      u.table
        ? splitTableRegion(
            text,
            u.table,
            lead,
            budget,
            u.table.header ? (opts.headerBudget?.(u.table.header) ?? budget) : budget,
            size,
            measure,
            after,
          )
        : splitRange(text, lead, u.end, {
            after,
            size: budget,
            overlap: opts.overlap ?? 0,
            minSize: opts.minSize ?? 0,
            measure,
          }),
    // Small groups before a long paragraph are cut together with it, and its last piece can take
    // following paragraphs, so a long paragraph does not leave tiny chunks on either side.
    carry: (group) => {
      const first = group[0];
      const last = group[group.length - 1];
      return !!first && !!last && size(first.start, last.end) <= budget / 2;
    },
    resume: true,
  });
  return mergeShortTail(groups, budget, opts.minSize ?? 0, size);
}

/**
 * Splits `doc.text` into SEMANTIC chunks (chunkType `paragraph`): blank-line
 * separated paragraphs (LF or CRLF) grouped up to `limits.size` characters; see
 * {@link paragraphGroups}. Tables (runs of three or more lines ending in two or more
 * figures, per page of a paged document; see `chunk/tables.ts`) are kept whole when
 * they fit, else cut only between rows, and every continuation chunk carries the
 * table's header (caption line, column years) as its context prefix and
 * `metadata.table: true`. Blank documents give no chunks.
 */
export function chunkSemantic(doc: ExtractedDocument, limits: ChunkLimits): Chunk[] {
  const tables = documentTables(doc);
  return paragraphGroups(doc.text, 0, doc.text.length, limits.size, {
    ...limits,
    tables,
    headerBudget: (header) => bodyBudget(limits, header),
  }).map((g) =>
    makeChunk(doc.text, g, "paragraph", g.prefix ? { prefix: g.prefix, metadata: { table: true } } : {}),
  );
}

/**
 * Creates the SEMANTIC chunker (see {@link chunkSemantic}).
 * @throws ConfigError for invalid chunking parameters.
 */
export function createSemanticChunker(config: ChunkingConfig): Chunker {
  return defineChunker("semantic", config, chunkSemantic);
}
