/**
 * Markdown block structure, the one place headings are detected (the DOCUMENT
 * chunker, the Markdown extractor's title, the HTML and DOCX title fallbacks).
 *
 * Headings follow CommonMark 0.31.2:
 * - ATX (§4.2): up to 3 spaces of indentation, 1–6 `#`, then a space, a tab or
 *   the end of the line (`#5` and `#hashtag` are not headings); an optional
 *   closing sequence of `#`s preceded by a space or tab is stripped.
 * - Setext (§4.3): one or more paragraph lines followed by an underline of `=`
 *   (level 1) or `-` (level 2) with at most 3 spaces of indentation and only
 *   trailing spaces/tabs; the heading is the text lines *and* the underline. A
 *   paragraph that begins (or is interrupted by) a block quote or list item does
 *   not become a heading; an underline with no paragraph above it is not one either
 *   (`---` after a blank line is a thematic break, §4.1).
 * - Never inside fenced code (§4.5, ``` or ~~~, closed by the same character at
 *   least as long) or indented code (§4.4, 4+ columns of indentation after a
 *   blank line or another block), nor in YAML front matter.
 */
import { type Span, skipBlankBackward, skipBlankForward } from "./spans.js";
import { lineTable } from "./split.js";

/**
 * Kinds of Markdown block recognised by {@link parseMarkdownBlocks}: `code` is an
 * indented code block (CommonMark §4.4), `break` a thematic break (§4.1).
 */
export type MarkdownBlockKind =
  | "heading"
  | "fence"
  | "code"
  | "table"
  | "paragraph"
  | "break"
  | "frontmatter";

/** A top-level Markdown block; `[start, end)` is trimmed of blank edges. */
export interface MarkdownBlock extends Span {
  kind: MarkdownBlockKind;
  /** Heading level 1–6 (`heading` only). */
  level?: number;
  /** Heading text without `#` marks, closing hashes, `{#anchor}` attributes or `\r` (`heading` only). */
  title?: string;
  /** Heading syntax: `atx`, `setext`, or `caps` for a capitals-only `TITLE:` line (`heading` only). */
  style?: "atx" | "setext" | "caps";
  /** Header row and delimiter row, `\n`-joined and trimmed (`table` only). */
  tableHeader?: string;
  /** End offset of the delimiter row (`table` only). */
  headerEnd?: number;
}

/** Options of {@link parseMarkdownBlocks}. */
export interface MarkdownBlockOptions {
  /**
   * Also read a whole line in capitals ending with a colon (`TERMS AND
   * CONDITIONS:`) as a heading one level below the last Markdown heading. Not
   * CommonMark; the DOCUMENT chunker uses it for plain-text section titles. Default true.
   */
  capsTitles?: boolean;
  /**
   * End offset of front matter found by the Markdown extractor's rules
   * (`parseFrontMatter`: YAML `---` or TOML `+++`): `[0, frontMatterEnd)` is one
   * `frontmatter` block and parsing starts after it. Default: a `---` line first
   * and the next `---`/`...` line close a `frontmatter` block.
   */
  frontMatterEnd?: number;
}

const FENCE_OPEN = /^ {0,3}(`{3,}|~{3,})(.*)$/;
const FENCE_CLOSE = /^ {0,3}(`{3,}|~{3,})[ \t]*$/;
/** CommonMark §4.2: the opening `#`s must be followed by a space, a tab or the end of the line. */
const ATX = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$/;
/** CommonMark §4.3: a setext heading underline (any number of `=` or `-`, trailing spaces/tabs only). */
const SETEXT = /^ {0,3}(=+|-+)[ \t]*$/;
/** CommonMark §4.1: three or more `*`, `-` or `_`, each followed by any spaces or tabs. */
const THEMATIC_BREAK = /^ {0,3}(?:(?:\*[ \t]*){3,}|(?:-[ \t]*){3,}|(?:_[ \t]*){3,})$/;
/** A first line that starts a block quote, a list item or an HTML block: its paragraph is not a setext heading. */
const NOT_SETEXT_START = /^ {0,3}(?:>|[-+*](?:[ \t]|$)|\d{1,9}[.)](?:[ \t]|$)|<[A-Za-z/!?])/;
/** A line that interrupts a paragraph with a block quote or a non-empty list item (CommonMark §5.1–5.2). */
const CONTAINER_INTERRUPT = /^ {0,3}(?:>|[-+*][ \t]+\S|1[.)][ \t]+\S)/;
/** A whole line in capitals ending with a colon (`TERMS AND CONDITIONS:`), at least 3 letters, no lower case. */
const CAPS_TITLE =
  /^ {0,3}(?=(?:[^\p{Ll}\n]*?\p{Lu}){3})([\p{Lu}\p{N}][\p{Lu}\p{N} &/,'().-]{1,78}):[ \t]*$/u;
const TABLE_DELIMITER = /^\s*\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)*\|?\s*$/;

/** The first character of the line `[start, end)` after up to 3 leading spaces (a tab or 4th space counts). */
function firstNonSpace(text: string, start: number, end: number): string {
  let i = start;
  while (i < start + 3 && i < end && text.charCodeAt(i) === 32) i++;
  return i < end ? text.charAt(i) : "";
}

/** True when the line `[start, end)` is indented by 4 or more columns (tabs to the next multiple of 4). */
function indentedCode(text: string, start: number, end: number): boolean {
  let col = 0;
  for (let i = start; i < end && col < 4; i++) {
    const c = text.charCodeAt(i);
    if (c === 32) col++;
    else if (c === 9) col += 4 - (col % 4);
    else return false;
  }
  return col >= 4;
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

/** Drops a trailing `{#anchor}` / `{.class}` attribute block (Pandoc, kramdown) and surrounding blanks. */
function withoutAttributes(raw: string): string {
  return raw.replace(/[ \t]*\{[ \t]*[#.][^{}]*\}[ \t]*$/, "").trim();
}

/**
 * The text of an ATX heading's content (CommonMark §4.2): the optional closing
 * sequence of `#`s is removed when a space or tab precedes it (or it is the whole
 * content: `### ###` is an empty heading); `# foo#` keeps its `#`.
 */
export function atxHeadingText(raw: string): string {
  return withoutAttributes(raw.replace(/(?:^|[ \t]+)#+[ \t]*$/, ""));
}

/** The text of a setext heading (CommonMark §4.3): its lines trimmed and joined by a space. */
function setextHeadingText(raw: string): string {
  return withoutAttributes(
    raw
      .split(/\r\n|\r|\n/)
      .map((s) => s.trim())
      .join(" "),
  );
}

/**
 * Splits Markdown into top-level blocks: ATX and setext headings (CommonMark
 * 0.31.2 §4.2, §4.3, see the module comment), capitals-only `TITLE:` lines (as
 * headings one level below the last Markdown heading; `options.capsTitles`),
 * fenced code (§4.5: ``` or ~~~, length ≥ 3, closed by the same character with at
 * least the same length, or running to the end), indented code (§4.4), thematic
 * breaks (§4.1), GFM tables (header + delimiter row, then rows containing `|`),
 * YAML front matter (`---` on the first line to `---` or `...`), and paragraphs
 * (everything else, up to a blank line or an interrupting block). A setext
 * heading block spans its text lines and its underline, so a splitter that keeps
 * blocks whole never separates them. Heading-like lines inside code, front
 * matter or a block quote / list paragraph are not headings. CRLF and CR line
 * endings are handled; titles never contain `\r`.
 */
export function parseMarkdownBlocks(text: string, options: MarkdownBlockOptions = {}): MarkdownBlock[] {
  const capsTitles = options.capsTitles ?? true;
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
  /** The open paragraph; `setext` is false once a line shows it is a block quote or list item. */
  let para: { start: number; end: number; setext: boolean } | null = null;
  /** The open indented code block (its end is the last indented line's end). */
  let code: Span | null = null;
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
  const closeCode = (): void => {
    if (code) push("code", code.start, code.end);
    code = null;
  };
  let i = 0;
  /** Level of the last ATX/setext heading (0 before any). */
  let markdownLevel = 0;
  const fmEnd = options.frontMatterEnd ?? 0;
  if (fmEnd > 0) {
    push("frontmatter", 0, fmEnd);
    while (i < n && (S[i] as number) < fmEnd) i++;
  } else if (n > 0 && lt(0).trimEnd() === "---") {
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
      // A blank line ends a paragraph or table; an indented code block may continue after it.
      closePara();
      closeTable();
      continue;
    }
    const indented = indentedCode(text, ls, le);
    if (code) {
      const c = code as Span;
      if (indented) {
        c.end = le;
        continue;
      }
      closeCode();
    }
    // CommonMark §4.4: indented code cannot interrupt a paragraph (the line continues it).
    if (indented && !para && !table) {
      code = { start: ls, end: le };
      continue;
    }
    // Cheap guards on the first non-space character keep the per-line regexes off most lines.
    const lead = indented ? "" : firstNonSpace(text, ls, le);
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
      push("heading", ls, le, { level: markdownLevel, title: atxHeadingText(atx[2] ?? ""), style: "atx" });
      continue;
    }
    const p = para as { start: number; end: number; setext: boolean } | null;
    // Setext underline before thematic break: `Foo⏎---` is a heading, `⏎---` (no paragraph) a break.
    const setext = p?.setext && (lead === "=" || lead === "-") ? SETEXT.exec(lt(i)) : null;
    if (setext && p) {
      const level = setext[1]?.startsWith("=") ? 1 : 2;
      markdownLevel = level;
      const title = setextHeadingText(text.slice(p.start, p.end));
      push("heading", p.start, le, { level, title, style: "setext" });
      para = null;
      continue;
    }
    if ((lead === "*" || lead === "-" || lead === "_") && THEMATIC_BREAK.test(lt(i))) {
      closePara();
      closeTable();
      push("break", ls, le);
      continue;
    }
    const caps = !capsTitles || table || !endsWithColon(text, ls, le) ? null : CAPS_TITLE.exec(lt(i));
    if (caps) {
      // Plain-text section titles nest under the current Markdown heading.
      closePara();
      const level = Math.min(6, markdownLevel + 1);
      push("heading", ls, le, { level, title: (caps[1] ?? "").trim(), style: "caps" });
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
      // A block quote or list item interrupting the paragraph owns any underline that follows.
      if (p.setext && !indented && CONTAINER_INTERRUPT.test(lt(i))) p.setext = false;
    } else {
      para = { start: ls, end: le, setext: !NOT_SETEXT_START.test(lt(i)) };
    }
  }
  closePara();
  closeTable();
  closeCode();
  return blocks;
}

/**
 * The CommonMark headings of a Markdown text (ATX §4.2 and setext §4.3, not
 * capitals-only `TITLE:` lines), in document order, each with `level` and `title`.
 */
export function markdownHeadings(text: string): MarkdownBlock[] {
  return parseMarkdownBlocks(text, { capsTitles: false }).filter((b) => b.kind === "heading");
}

/**
 * The title of the first CommonMark heading (§4.2 / §4.3) of `text` whose level is
 * at most `maxLevel` and whose title is not blank, or `undefined`.
 */
export function firstHeadingTitle(text: string, maxLevel = 6): string | undefined {
  for (const h of markdownHeadings(text)) {
    if ((h.level ?? 1) <= maxLevel && h.title) return h.title;
  }
  return undefined;
}
