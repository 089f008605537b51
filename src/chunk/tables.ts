/**
 * Tables in plain text (PDF pages above all, where a table's row is one line of
 * label and figures): regions of rows of numbers, their header rows, and how to cut
 * one into chunks without cutting a row, each continuation repeating the header.
 *
 * Units: offsets are UTF-16 code units of the document text.
 */
import { isTableRow, isYearRow, trailingNumbers } from "../text-tables.js";
import type { ExtractedDocument } from "../types.js";
import type { SizeMeasure } from "./measure.js";
import type { Span } from "./spans.js";
import { type Line, lineSpans, type Piece, splitRange } from "./split.js";

/** A table found in the text: `[start, end)` from its header to its last row. */
export interface TableRegion extends Span {
  /** End of the header (caption line and column headings) at the top of the region; `start` when none. */
  headerEnd: number;
  /** The header's lines joined by `\n`, repeated before each continuation chunk; `""` when none. */
  header: string;
}

/** Fewest rows of figures that make a table. */
const MIN_ROWS = 3;
/** Most label lines (`Current assets:`) in a row between two rows of figures. */
const MAX_LABEL_RUN = 3;
/** Most lines above the first row taken as its header. */
const MAX_HEADER_LINES = 3;
/** Longest header repeated in continuations, in characters; a longer one is not repeated. */
const MAX_HEADER = 200;

/** A short line that can sit inside or above a table: a row label, a caption, a column heading. */
function labelLike(line: string): boolean {
  return (
    line.length <= 90 &&
    /\p{L}|\d/u.test(line) &&
    trailingNumbers(line) <= 1 &&
    !(line.length > 60 && /[.!?]$/.test(line))
  );
}

/**
 * Table regions of `text.slice(start, end)`: runs of at least three table rows
 * (lines ending in two or more figures, see `isTableRow`), with up to three label
 * lines and any blank lines between rows. A region's header is the run of up to
 * three short label lines right above its first row (a blank line between them
 * allowed once), plus its first rows when their figures are all years
 * (`(Millions) 2018 2017 2016`); it is part of the region.
 */
export function tableRegions(text: string, start = 0, end: number = text.length): TableRegion[] {
  const lines = lineSpans(text, start, end).map((l) => ({ ...l, text: text.slice(l.start, l.end).trim() }));
  const out: TableRegion[] = [];
  let i = 0;
  while (i < lines.length) {
    if (!isTableRow(lines[i]?.text ?? "")) {
      i++;
      continue;
    }
    let last = i;
    let rows = 1;
    let labels = 0;
    let k = i + 1;
    for (; k < lines.length; k++) {
      const t = (lines[k] as Line & { text: string }).text;
      if (t === "") continue;
      if (isTableRow(t)) {
        rows++;
        last = k;
        labels = 0;
      } else if (labelLike(t) && labels < MAX_LABEL_RUN) labels++;
      else break;
    }
    if (rows < MIN_ROWS) {
      i++;
      continue;
    }
    // Header: short label lines right above the first row (no blank line between, no sentence).
    let top = i;
    for (let h = i - 1, taken = 0; h >= 0 && taken < MAX_HEADER_LINES; h--) {
      const t = (lines[h] as Line & { text: string }).text;
      if (t === "" || !labelLike(t) || /[.!?]$/.test(t)) break;
      if (out.length > 0 && (lines[h] as Line).start < (out[out.length - 1] as Span).end) break;
      top = h;
      taken++;
    }
    // …and the first rows when they are column headings of years.
    let headerLast = top < i ? i - 1 : -1;
    for (let r = i; r <= last && isYearRow((lines[r] as Line & { text: string }).text); r++) headerLast = r;
    const regionStart = (lines[top] as Line).start;
    const headerEnd = headerLast >= 0 ? (lines[headerLast] as Line).end : regionStart;
    const header = lines
      .slice(top, headerLast + 1)
      .map((l) => l.text)
      .filter((t) => t !== "")
      .join("\n");
    out.push({
      start: regionStart,
      end: (lines[last] as Line).end,
      headerEnd,
      header: header.length <= MAX_HEADER ? header : "",
    });
    i = last + 1;
  }
  return out;
}

/** Lines of a page before a table's first row, or after its last, that still count as "at the page edge". */
const EDGE_LINES = 4;

/** Non-blank lines of `text.slice(start, end)`. */
function countLines(text: string, start: number, end: number): number {
  return text
    .slice(start, end)
    .split("\n")
    .filter((l) => l.trim() !== "").length;
}

/**
 * Table regions of a document: per page when it has page segments, else of the
 * whole text. A table that goes on over a page break is two regions; the one at
 * the top of the next page takes the header of the one that ended the page before
 * when it has no column headings of its own (its header is then only a prefix: its
 * body starts with its rows).
 */
export function documentTables(doc: ExtractedDocument): TableRegion[] {
  const pages = (doc.segments ?? []).filter((s) => typeof s.metadata.page === "number");
  if (pages.length === 0) return tableRegions(doc.text);
  const out: TableRegion[] = [];
  let previous: { region: TableRegion; atEnd: boolean } | undefined;
  for (const p of pages) {
    const regions = tableRegions(doc.text, p.start, p.end);
    regions.forEach((r, i) => {
      const ownYears = r.header.split("\n").some(isYearRow);
      if (
        i === 0 &&
        previous?.atEnd &&
        previous.region.header &&
        !ownYears &&
        countLines(doc.text, p.start, r.start) + countLines(doc.text, r.start, r.headerEnd) <= EDGE_LINES
      ) {
        out.push({ ...r, header: previous.region.header });
      } else out.push(r);
    });
    const last = out[out.length - 1];
    previous =
      last && last.start >= p.start
        ? { region: last, atEnd: countLines(doc.text, last.end, p.end) <= EDGE_LINES }
        : undefined;
  }
  return out;
}

/**
 * Cuts table `region` (starting at `lead`, which may be before it when small
 * paragraphs are carried along) into pieces of whole rows: the first piece holds
 * the header in its body and takes rows while it fits `firstBudget`; each later
 * piece carries the header as its prefix and fits `continuationBudget`. A single
 * row longer than its budget is cut at word boundaries (the only way a row is cut).
 * Sizes in `measure` units via `size`. The first piece ends beyond `after`
 * (default `lead`; see `SplitOptions.after`).
 */
export function splitTableRegion(
  text: string,
  region: TableRegion,
  lead: number,
  firstBudget: number,
  continuationBudget: number,
  size: (start: number, end: number) => number,
  measure: SizeMeasure,
  after = lead,
): Piece[] {
  const rows = lineSpans(text, region.start, region.end).filter(
    (l) => text.slice(l.start, l.end).trim() !== "",
  );
  const pieces: Piece[] = [];
  const prefix = region.header || undefined;
  const push = (span: Span): void => {
    pieces.push(pieces.length === 0 ? { start: span.start, end: span.end } : { ...span, prefix });
  };
  let cur: Span | undefined;
  for (const row of rows) {
    const from = cur ? cur.start : pieces.length === 0 ? lead : row.start;
    if (size(from, row.end) <= (pieces.length === 0 ? firstBudget : continuationBudget)) {
      cur = { start: from, end: row.end };
      continue;
    }
    if (cur) push(cur);
    cur = undefined;
    const start = pieces.length === 0 ? lead : row.start;
    const budget = pieces.length === 0 ? firstBudget : continuationBudget;
    if (size(start, row.end) <= budget) {
      cur = { start, end: row.end };
      continue;
    }
    // One row alone is over the budget: cut it at word boundaries (the only cut inside a row).
    const opts = {
      size: budget,
      mode: "lines" as const,
      measure,
      after: pieces.length === 0 ? after : start,
    };
    for (const p of splitRange(text, start, row.end, opts)) push(p);
  }
  if (cur) push(cur);
  return pieces;
}
