/**
 * PDF extractor built on unpdf (a serverless build of PDF.js): text per page with
 * a simple layout analysis (lines, word spacing, columns), one segment per page.
 */
import { getDocumentProxy, getMeta } from "unpdf";
import { ExtractionError } from "../errors.js";
import type { ExtractedDocument, Segment } from "../types.js";
import type { ExtractContext, Extractor } from "./contract.js";
import { coverFacts, type OutlineEntry, outlineSections, pageHeadings } from "./pdf-context.js";
import { compact, fileTitle, nonBlank, readSource } from "./util.js";

type PdfDocument = Awaited<ReturnType<typeof getDocumentProxy>>;

/** The part of a PDF.js text item the layout uses. */
interface RawTextItem {
  str: string;
  dir: string;
  transform: number[];
  width: number;
  height: number;
  hasEOL: boolean;
}

/** A horizontal run of text on the page, in viewport coordinates (origin top-left, y down, points). */
interface Run {
  str: string;
  x0: number;
  x1: number;
  /** Baseline. */
  y: number;
  /** Font size (points). */
  size: number;
  rtl: boolean;
}

/** Runs of one line that sit close together (no wide gap between them). */
interface Fragment {
  text: string;
  x0: number;
  x1: number;
  top: number;
  bottom: number;
  size: number;
  line: number;
  /** Mean baseline, for ordering. */
  y: number;
}

/** One output line: fragments of the same page line within one layout block. */
interface Row {
  text: string;
  top: number;
  bottom: number;
  size: number;
}

const LIGATURES: Readonly<Record<string, string>> = {
  "\uFB00": "ff",
  "\uFB01": "fi",
  "\uFB02": "fl",
  "\uFB03": "ffi",
  "\uFB04": "ffl",
  "\uFB05": "st",
  "\uFB06": "st",
};

/**
 * Normalises text extracted from a PDF page:
 * - typographic ligatures U+FB00–U+FB06 become their letters (`ﬁ` → `fi`);
 * - soft hyphens are removed (a soft hyphen at a line end joins the word);
 * - a hyphen at a line end between letters or digits joins the lines; it is
 *   dropped only for typesetting hyphenation, see {@link dehyphenate}
 *   (`infor-\nmation` → `information`, but `R-\nhelp` → `R-help`,
 *   `COVID-\n19` → `COVID-19`, `e-\nmail` → `e-mail`);
 * - control characters other than tab and newline are dropped, runs of spaces and
 *   tabs collapse to one space, lines are trimmed, and at most one blank line is kept;
 * - dot leaders of a table of contents (`Title . . . . . . 94`, `Title........94`:
 *   four or more dots) become ` … `, so they do not flood keyword and vector search.
 */
export function normalizePdfText(text: string): string {
  return dehyphenate(
    text
      .replace(/\r\n?/g, "\n")
      .replace(/[\uFB00-\uFB06]/g, (c) => LIGATURES[c] ?? c)
      // biome-ignore lint/suspicious/noControlCharactersInRegex: stripping control characters is the point.
      .replace(/[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F]/g, "")
      .replace(/[^\S\n]+/g, " ")
      .replace(/ ?(?:\. ?){4,}/g, " … ")
      .replace(/ {2,}/g, " ")
      .replace(/ *\n */g, "\n")
      .replace(/\u00AD\n(?=\p{L})/gu, "")
      .replace(/\u00AD/g, "")
      .replace(/\n{3,}/g, "\n\n"),
  ).trim();
}

/** A word (letters and digits) followed by a hyphen at a line end, and the word starting the next line. */
const LINE_END_HYPHEN = /([\p{L}\p{N}]+)-\n(?=([\p{L}\p{N}]+))/gu;

/** Hyphenated compounds written within a line (`well-known`, `state-of-the-art`). */
const COMPOUND = /[\p{L}\p{N}]+(?:-[\p{L}\p{N}]+)+/gu;

/**
 * Joins the lines of `text` that end with a hyphen between a word and the word
 * starting the next line. The hyphen is a typesetter's and is dropped
 * (`infor-\nmation` → `information`) only when the two characters before it are
 * lower-case letters, the next line starts with a lower-case letter, and the
 * same text does not write that pair hyphenated within a line (`well-known`
 * elsewhere keeps `well-\nknown` → `well-known`). Otherwise the hyphen is part
 * of the word and stays: after a capital or a digit (`R-help`, `COVID-19`,
 * `B-tree`), after a one-letter prefix (`e-mail`, `x-axis`), or before a capital
 * or digit (`pre-COVID`, `mid-1990s`), or ending a compound already hyphenated
 * on its line (`state-of-the-\nart`). A line-final hyphen not between two words
 * (a dash, a bullet) is left alone. Without a dictionary a compound broken at its
 * own hyphen and written nowhere else on the page loses the hyphen.
 */
export function dehyphenate(text: string): string {
  if (!text.includes("-\n")) return text;
  const compounds = new Set<string>();
  for (const [compound] of text.matchAll(COMPOUND)) {
    const parts = compound.toLowerCase().split("-");
    for (let i = 1; i < parts.length; i++) compounds.add(`${parts[i - 1]}-${parts[i]}`);
  }
  return text.replace(LINE_END_HYPHEN, (_match, before: string, after: string, offset: number) => {
    const typeset =
      text[offset - 1] !== "-" &&
      /\p{Ll}\p{Ll}$/u.test(before) &&
      /^\p{Ll}/u.test(after) &&
      !compounds.has(`${before}-${after}`.toLowerCase());
    return typeset ? before : `${before}-`;
  });
}

/** Multiplies two PDF transformation matrices `[a b c d e f]` (m1 × m2). */
function multiply(m1: number[], m2: number[]): number[] {
  const [a1 = 0, b1 = 0, c1 = 0, d1 = 0, e1 = 0, f1 = 0] = m1;
  const [a2 = 0, b2 = 0, c2 = 0, d2 = 0, e2 = 0, f2 = 0] = m2;
  return [
    a1 * a2 + c1 * b2,
    b1 * a2 + d1 * b2,
    a1 * c2 + c1 * d2,
    b1 * c2 + d1 * d2,
    a1 * e2 + c1 * f2 + e1,
    b1 * e2 + d1 * f2 + f1,
  ];
}

function median(values: number[]): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
}

/** Groups runs into lines (by baseline) and lines into fragments (split at wide gaps). */
function buildFragments(runs: Run[]): Fragment[] {
  const sorted = [...runs].sort((a, b) => a.y - b.y || a.x0 - b.x0);
  const lines: Run[][] = [];
  let current: Run[] = [];
  let lineY = 0;
  let lineSize = 0;
  for (const run of sorted) {
    const tolerance = 0.4 * Math.max(1, Math.min(run.size, lineSize || run.size));
    if (current.length > 0 && Math.abs(run.y - lineY) <= tolerance) {
      current.push(run);
      continue;
    }
    if (current.length > 0) lines.push(current);
    current = [run];
    lineY = run.y;
    lineSize = run.size;
  }
  if (current.length > 0) lines.push(current);

  const fragments: Fragment[] = [];
  lines.forEach((line, lineIndex) => {
    const rtl = line.filter((r) => r.rtl).length * 2 > line.length;
    const ordered = [...line].sort((a, b) => (rtl ? b.x1 - a.x1 : a.x0 - b.x0));
    let frag: { runs: Run[]; text: string } | undefined;
    let prev: Run | undefined;
    const flush = () => {
      if (!frag) return;
      const text = frag.text.trim();
      if (text !== "") {
        const rs = frag.runs;
        const size = Math.max(...rs.map((r) => r.size));
        const y = rs.reduce((s, r) => s + r.y, 0) / rs.length;
        fragments.push({
          text,
          x0: Math.min(...rs.map((r) => r.x0)),
          x1: Math.max(...rs.map((r) => r.x1)),
          top: Math.min(...rs.map((r) => r.y - 0.8 * r.size)),
          bottom: Math.max(...rs.map((r) => r.y + 0.2 * r.size)),
          size,
          line: lineIndex,
          y,
        });
      }
      frag = undefined;
    };
    for (const run of ordered) {
      if (prev) {
        const gap = rtl ? prev.x0 - run.x1 : run.x0 - prev.x1;
        const size = Math.max(run.size, prev.size);
        // The same text drawn twice at (almost) the same place: fake bold, shadows.
        if (
          run.str === prev.str &&
          Math.abs(run.x0 - prev.x0) < 0.3 * size &&
          Math.abs(run.y - prev.y) < 0.3 * size
        ) {
          continue;
        }
        if (gap > 1.0 * size) {
          flush();
        } else if (frag) {
          const needsSpace = gap > 0.15 * size && !/\s$/.test(frag.text) && !/^\s/.test(run.str);
          frag.text += (needsSpace ? " " : "") + run.str;
          frag.runs.push(run);
          prev = run;
          continue;
        }
      }
      frag = { runs: [run], text: run.str };
      prev = run;
    }
    flush();
  });
  return fragments;
}

/** Merges fragments into rows (one per page line), ordered top to bottom, left to right. */
function rowsOf(fragments: Fragment[]): Row[] {
  const byLine = new Map<number, Fragment[]>();
  for (const f of fragments) {
    const list = byLine.get(f.line);
    if (list) list.push(f);
    else byLine.set(f.line, [f]);
  }
  const rows: Row[] = [];
  for (const list of byLine.values()) {
    list.sort((a, b) => a.x0 - b.x0);
    rows.push({
      text: list.map((f) => f.text).join(" "),
      top: Math.min(...list.map((f) => f.top)),
      bottom: Math.max(...list.map((f) => f.bottom)),
      size: Math.max(...list.map((f) => f.size)),
    });
  }
  const y = (r: Row) => r.bottom;
  return rows.sort((a, b) => y(a) - y(b));
}

/** Gaps in the union of intervals `[lo, hi]`: `{ start, end }` pairs, widest first. */
function gaps(intervals: [number, number][]): { start: number; end: number }[] {
  const sorted = [...intervals].sort((a, b) => a[0] - b[0]);
  const out: { start: number; end: number }[] = [];
  let reach = Number.NEGATIVE_INFINITY;
  for (const [lo, hi] of sorted) {
    if (reach !== Number.NEGATIVE_INFINITY && lo > reach) out.push({ start: reach, end: lo });
    reach = Math.max(reach, hi);
  }
  return out.sort((a, b) => b.end - b.start - (a.end - a.start));
}

/** Mean number of characters per fragment. */
function meanLength(fragments: Fragment[]): number {
  return fragments.reduce((s, f) => s + f.text.length, 0) / Math.max(1, fragments.length);
}

/**
 * A vertical gutter that splits `fragments` into two text columns: no fragment
 * crosses it, it is at least about one character wide, there are at most three
 * such columns (more look like a table), and both sides hold at least two
 * fragments of prose-like length (so table columns are read row by row).
 */
function findColumnCut(fragments: Fragment[]): [Fragment[], Fragment[]] | undefined {
  const minWidth = Math.max(3, 0.8 * median(fragments.map((f) => f.size)));
  const gutters = gaps(fragments.map((f) => [f.x0, f.x1])).filter((g) => g.end - g.start >= minWidth);
  // Four or more columns side by side: a table, read row by row.
  if (gutters.length >= 3) return undefined;
  for (const gap of gutters) {
    const left = fragments.filter((f) => f.x1 <= gap.start);
    const right = fragments.filter((f) => f.x0 >= gap.end);
    if (left.length >= 2 && right.length >= 2 && meanLength(left) >= 12 && meanLength(right) >= 12) {
      return [left, right];
    }
  }
  return undefined;
}

/** Above this many fragments a block is split at all wide gaps at once (bounds the work). */
const MANY_FRAGMENTS = 1500;

/**
 * Splits `fragments` into horizontal bands at the widest vertical whitespace gap.
 * Splitting at one gap at a time lets the caller retry a column cut on each part
 * (a full-width heading or footer no longer hides the gutter below it). Very
 * large blocks are split at every gap within 90% of the widest, in one pass.
 */
function splitBands(fragments: Fragment[]): Fragment[][] {
  const found = gaps(fragments.map((f) => [f.top, f.bottom]));
  const widest = found[0];
  if (!widest) return [fragments];
  const threshold =
    fragments.length > MANY_FRAGMENTS ? 0.9 * (widest.end - widest.start) : Number.POSITIVE_INFINITY;
  const cuts = [
    widest.start,
    ...found
      .slice(1)
      .filter((g) => g.end - g.start >= threshold)
      .map((g) => g.start),
  ];
  cuts.sort((a, b) => a - b);
  const bands: Fragment[][] = cuts.map(() => []);
  bands.push([]);
  for (const f of fragments) {
    let i = 0;
    while (i < cuts.length && f.top >= (cuts[i] ?? 0)) i++;
    bands[i]?.push(f);
  }
  return bands.filter((b) => b.length > 0);
}

/**
 * Recursive XY-cut: a column gutter is tried first (so two-column text is read
 * column by column), then horizontal bands; a block that cannot be cut is read
 * line by line.
 */
function layout(fragments: Fragment[], depth = 0): Row[] {
  if (fragments.length <= 1 || depth > 2000) return rowsOf(fragments);
  const columns = findColumnCut(fragments);
  if (columns) return [...layout(columns[0], depth + 1), ...layout(columns[1], depth + 1)];
  const bands = splitBands(fragments);
  if (bands.length > 1) return bands.flatMap((b) => layout(b, depth + 1));
  return rowsOf(fragments);
}

/** Joins rows: a blank line where the vertical gap suggests a paragraph break. */
function joinRows(rows: Row[]): string {
  let out = "";
  let prev: Row | undefined;
  for (const row of rows) {
    if (prev) {
      const gap = row.top - prev.bottom;
      out += gap > 0.7 * Math.max(row.size, prev.size) ? "\n\n" : "\n";
    }
    out += row.text;
    prev = row;
  }
  return out;
}

/** Lays out the text items of one page and returns its raw text (before normalisation). */
function pageText(items: RawTextItem[], viewportTransform: number[]): string {
  const runs: Run[] = [];
  const other: string[] = [];
  for (const item of items) {
    if (item.str === "") continue;
    const m = multiply(viewportTransform, item.transform);
    const [a = 0, b = 0, c = 0, d = 0, e = 0, f = 0] = m;
    const size = Math.hypot(c, d) || item.height || 10;
    const horizontal = a > 0 && Math.abs(b) <= 0.05 * Math.abs(a) && Math.abs(c) <= 0.05 * Math.abs(d || 1);
    if (!horizontal) {
      other.push(item.str + (item.hasEOL ? "\n" : " "));
      continue;
    }
    if (item.str.trim() === "") continue;
    // Viewport scale is 1, so the advance width is already in viewport units.
    runs.push({ str: item.str, x0: e, x1: e + item.width, y: f, size, rtl: item.dir === "rtl" });
  }
  const main = runs.length > 0 ? joinRows(layout(buildFragments(runs))) : "";
  const rest = other.join("").trim();
  return rest === "" ? main : main === "" ? rest : `${main}\n\n${rest}`;
}

/** Maps a PDF.js exception to the reason reported to the user. */
function pdfFailure(path: string, err: unknown): ExtractionError {
  const e = err as { name?: string; message?: string };
  const message = e?.message ?? String(err);
  if (e?.name === "PasswordException") return new ExtractionError(path, "password-protected", { cause: err });
  if (e?.name === "InvalidPDFException" || e?.name === "FormatError" || e?.name === "UnknownErrorException") {
    return new ExtractionError(path, `not a valid PDF: ${message}`, { cause: err });
  }
  return new ExtractionError(path, `cannot read PDF: ${message}`, { cause: err });
}

/** A document info or XMP string value, trimmed; a list (XMP `dc:creator`) is joined with ", ". */
function infoString(value: unknown): string | undefined {
  if (Array.isArray(value)) {
    const parts = value.map(infoString).filter((v): v is string => v !== undefined);
    return parts.length > 0 ? parts.join(", ") : undefined;
  }
  if (typeof value !== "string") return undefined;
  return nonBlank(value.replace(/\s+/g, " "));
}

/** Extensions of authoring files whose names producers put in the Title field. */
const SOURCE_FILE_EXTENSION =
  /\.(?:docx?|rtf|odt|txt|pdf|e?ps|dvi|tex|indd|qxd|qxp|pm\d|fm|wpd|xlsx?|pptx?|exe|tmp)$/i;

/**
 * A usable document title from the Title field: without the `Microsoft Word - `
 * prefix and a trailing authoring-file extension (`AGENDA 040616.doc` →
 * `AGENDA 040616`); `undefined` for placeholders (`Untitled`) and for values
 * without a single letter (`10811.exe`, `88300 162..177`), which are file or
 * job names rather than titles.
 */
function titleString(value: unknown): string | undefined {
  const raw = infoString(value);
  if (raw === undefined) return undefined;
  const title = nonBlank(
    raw.replace(/^Microsoft (?:Word|PowerPoint|Excel) - /, "").replace(SOURCE_FILE_EXTENSION, ""),
  );
  if (title === undefined || !/\p{L}/u.test(title) || /^(?:untitled|title|document\d*)$/i.test(title)) {
    return undefined;
  }
  return title;
}

/** The XMP metadata packet's reader, when the PDF has one. */
interface XmpReader {
  get(name: string): unknown;
}

/**
 * Reads title and author from the document info dictionary, else from the XMP
 * metadata (`dc:title`, `dc:creator`); failures are ignored (metadata is optional).
 */
async function readInfo(pdf: PdfDocument): Promise<{ title?: string; author?: string }> {
  try {
    const { info, metadata } = await getMeta(pdf);
    const xmp = metadata as unknown as Partial<XmpReader> | null | undefined;
    const fromXmp = (name: string): unknown => (typeof xmp?.get === "function" ? xmp.get(name) : undefined);
    return compact({
      title: titleString(info?.Title) ?? titleString(fromXmp("dc:title")),
      author: infoString(info?.Author) ?? infoString(fromXmp("dc:creator")),
    });
  } catch {
    return {};
  }
}

/** At most this many outline entries (bookmarks) are read. */
const MAX_OUTLINE_ENTRIES = 2000;

/**
 * The PDF outline (bookmarks) with the page and vertical position each entry points
 * at; entries whose destination cannot be resolved are skipped, and a failure gives
 * none (the outline is optional).
 */
async function readOutline(pdf: PdfDocument): Promise<OutlineEntry[]> {
  const out: OutlineEntry[] = [];
  try {
    const outline = await pdf.getOutline();
    const pageHeight = new Map<number, number>();
    const walk = async (items: typeof outline, parents: string[]): Promise<void> => {
      for (const item of items ?? []) {
        if (out.length >= MAX_OUTLINE_ENTRIES) return;
        const title = infoString(item.title);
        const path = title ? [...parents, title] : parents;
        try {
          const dest = typeof item.dest === "string" ? await pdf.getDestination(item.dest) : item.dest;
          const target = Array.isArray(dest) ? dest[0] : undefined;
          if (title && target !== undefined && target !== null) {
            const index =
              typeof target === "number"
                ? target
                : await pdf.getPageIndex(target as Parameters<PdfDocument["getPageIndex"]>[0]);
            const page = index + 1;
            // XYZ destinations give the top of the target in PDF units (origin bottom-left).
            const kind = (dest?.[1] as { name?: string } | undefined)?.name;
            const top =
              kind === "XYZ" || kind === "FitH" || kind === "FitBH" ? dest?.[kind === "XYZ" ? 3 : 2] : null;
            let at = 0;
            if (typeof top === "number") {
              let height = pageHeight.get(page);
              if (height === undefined) {
                const p = await pdf.getPage(page);
                height = p.getViewport({ scale: 1 }).height;
                pageHeight.set(page, height);
              }
              at = height > 0 ? Math.min(1, Math.max(0, 1 - top / height)) : 0;
            }
            out.push({ path, page, at });
          }
        } catch {
          // An unresolvable destination: the entry is skipped, its children still read.
        }
        if (item.items?.length) await walk(item.items, path);
      }
    };
    await walk(outline, []);
  } catch {
    return out;
  }
  return out;
}

/** At most this many page ranges are listed in a warning. */
const MAX_LISTED_RANGES = 20;

/**
 * Page numbers as compact ranges: `[3, 4, 5, 9]` → `pages 3–5, 9`; `[7]` → `page 7`.
 * After {@link MAX_LISTED_RANGES} ranges the list ends with `…` and the count.
 */
function pageList(pages: number[]): string {
  const ranges: string[] = [];
  for (let i = 0; i < pages.length; ) {
    let j = i;
    while (j + 1 < pages.length && pages[j + 1] === (pages[j] ?? 0) + 1) j++;
    ranges.push(i === j ? `${pages[i]}` : `${pages[i]}–${pages[j]}`);
    i = j + 1;
  }
  const listed =
    ranges.length > MAX_LISTED_RANGES
      ? `${ranges.slice(0, MAX_LISTED_RANGES).join(", ")}, … (${pages.length} in all)`
      : ranges.join(", ");
  return `${pages.length === 1 ? "page" : "pages"} ${listed}`;
}

/** Text of one page, laid out and normalised (`""` for a page without text). */
async function readPage(pdf: PdfDocument, n: number): Promise<string> {
  const page = await pdf.getPage(n);
  try {
    const viewport = page.getViewport({ scale: 1 });
    const content = await page.getTextContent();
    const items = content.items.filter((i): i is typeof i & RawTextItem => "str" in i);
    return normalizePdfText(pageText(items as RawTextItem[], viewport.transform));
  } finally {
    page.cleanup();
  }
}

/**
 * Extracts a PDF file.
 *
 * `text` is the text of each page joined with `"\n\n"` (pages without text are
 * left out). Page text comes from a layout pass over PDF.js text items: runs on
 * one baseline form a line, a space is inserted where the glyph gap is wider than
 * ~0.15 em, two-column text is read column by column, a blank line marks a wide
 * vertical gap (paragraph break); then {@link normalizePdfText} (ligatures,
 * hyphenation). `segments`: one per page with text, `{ start, end, metadata: { page } }`
 * (1-based page number), covering exactly that page's text.
 * Metadata: `path`, `type: "pdf"`, `title` (document info Title, else XMP
 * `dc:title`, else the file name; file-name-like values such as `10811.exe` are
 * skipped), `author` (Author, else XMP `dc:creator`, when present), `pageCount`
 * (all pages, with or without text).
 * `warnings`: the pages without text when others have text
 * (`pages 3–5, 9 have no text layer (scanned images?)`), and the pages whose text
 * could not be read when others could.
 *
 * @throws ExtractionError "file is empty", "not a valid PDF: …" (corrupt/not a PDF),
 *   "password-protected", "too many pages: N (limit maxPages = M)" (checked before
 *   any page is read), "no text layer (image-only PDF?)" (no page has text), or the
 *   reason of the first page failure when no page could be read.
 */
export const pdfExtractor: Extractor = {
  type: "pdf",
  async extract(path: string, ctx: ExtractContext): Promise<ExtractedDocument[]> {
    const bytes = await readSource(path, ctx);
    if (bytes.length === 0 || bytes.toString("latin1").trim() === "") {
      throw new ExtractionError(path, "file is empty");
    }
    let pdf: PdfDocument;
    try {
      pdf = await getDocumentProxy(new Uint8Array(bytes), { verbosity: 0 });
    } catch (err) {
      throw pdfFailure(path, err);
    }
    try {
      const pageCount = pdf.numPages;
      const maxPages = ctx.options.limits.maxPages;
      if (pageCount > maxPages) {
        throw new ExtractionError(path, `too many pages: ${pageCount} (limit maxPages = ${maxPages})`);
      }
      const segments: Segment[] = [];
      const empty: number[] = [];
      const failed: number[] = [];
      let firstFailure: unknown;
      let text = "";
      for (let n = 1; n <= pageCount; n++) {
        let pageString: string;
        try {
          pageString = await readPage(pdf, n);
        } catch (err) {
          failed.push(n);
          firstFailure ??= err;
          continue;
        }
        if (pageString === "") {
          empty.push(n);
          continue;
        }
        if (text !== "") text += "\n\n";
        const start = text.length;
        text += pageString;
        segments.push({ start, end: text.length, metadata: { page: n } });
      }
      if (text === "") {
        if (failed.length > 0) throw pdfFailure(path, firstFailure);
        throw new ExtractionError(path, "no text layer (image-only PDF?)");
      }
      const warnings: string[] = [];
      if (empty.length > 0) {
        const verb = empty.length === 1 ? "has" : "have";
        warnings.push(`${pageList(empty)} ${verb} no text layer (scanned images?)`);
      }
      if (failed.length > 0) {
        const reason = firstFailure instanceof Error ? firstFailure.message : String(firstFailure);
        warnings.push(`text of ${pageList(failed)} could not be extracted: ${reason}`);
      }
      const info = await readInfo(pdf);
      const pages = segments.map((seg) => text.slice(seg.start, seg.end));
      const headings = pageHeadings(pages);
      const outline = outlineSections(await readOutline(pdf), pageCount);
      segments.forEach((seg, i) => {
        const heading = headings[i];
        if (heading) seg.metadata.heading = heading;
        const sections = outline[(seg.metadata.page as number) - 1];
        if (sections && sections.length > 0) seg.metadata.sections = sections;
      });
      const cover = coverFacts(pages.slice(0, 2).join("\n\n"));
      const metadata = compact({
        path,
        type: "pdf" as const,
        title: info.title ?? fileTitle(path),
        author: info.author,
        pageCount,
        organization: cover.organization,
        documentKind: cover.documentKind,
        period: cover.period,
      });
      const doc: ExtractedDocument = { uri: path, text, metadata, segments };
      if (warnings.length > 0) doc.warnings = warnings;
      return [doc];
    } finally {
      await pdf.destroy().catch(() => undefined);
    }
  },
};
