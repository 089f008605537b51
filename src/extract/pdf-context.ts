/**
 * What a PDF says about itself beyond its text: the organisation, kind and period
 * a report's cover page names, the heading block at the top of each page (a
 * financial statement's title, a section heading), lines repeated on many pages
 * (running headers and footers) and the PDF outline (bookmarks). The chunker
 * turns these into each chunk's context prefix (see `chunk/context.ts`).
 *
 * Everything here is a heuristic over extracted text: a fact that is not found is
 * left out, never guessed.
 */

import { trailingNumbers } from "../text-tables.js";

/** Facts a cover page states: who issued the document, what kind it is, which period it covers. */
export interface CoverFacts {
  /** Issuing organisation, e.g. `Netflix, Inc.`, `3M COMPANY`. */
  organization?: string;
  /** Kind of document, e.g. `Form 10-K annual report`, `earnings release`. */
  documentKind?: string;
  /**
   * Period or date the document covers, e.g. `fiscal year ended December 31, 2018 (FY2018)`,
   * `quarter ended June 30, 2023`, `report dated July 1, 2022`.
   */
  period?: string;
}

/** A bookmark of the PDF outline with the page it points at. */
export interface OutlineEntry {
  /** Titles from the outermost bookmark down to this one. */
  path: string[];
  /** 1-based page. */
  page: number;
  /** Vertical position of the target on its page, 0 (top) to 1 (bottom); 0 when unknown. */
  at: number;
}

/** Where an outline section starts on a page (`at`: 0 top to 1 bottom) and its bookmark path. */
export interface PageSection {
  at: number;
  path: string[];
}

const MONTH = "(?:January|February|March|April|May|June|July|August|September|October|November|December)";
const DATE = `${MONTH}\\s+\\d{1,2},?\\s+\\d{4}`;

/** Suffixes that end an organisation's legal name. */
const LEGAL_SUFFIX =
  /\b(?:inc\.?|incorporated|corporation|corp\.?|company|co\.|plc|p\.l\.c\.|ltd\.?|limited|llc|l\.l\.c\.|l\.p\.|lp|n\.v\.|s\.a\.|ag|se|gmbh|holdings|group|international)$/i;

/** Collapses white space and strips list bullets and underscores rules around a line. */
function clean(line: string): string {
  return line
    .replace(/[_]{3,}/g, " ")
    .replace(/\s+/g, " ")
    .trim();
}

/** A short line that can be a name: letters, at most 80 characters, not a sentence. */
function nameLike(line: string): boolean {
  return line.length >= 2 && line.length <= 80 && /\p{L}/u.test(line) && !/[:;]$/.test(line);
}

/** The organisation a cover page names (see {@link coverFacts}). */
function organizationOf(lines: string[], text: string): string | undefined {
  // SEC forms: the registrant's name is the line above "(Exact name of registrant as specified in its charter)".
  for (let i = 1; i < lines.length; i++) {
    if (/^\(?exact name of (?:the )?registrant/i.test(lines[i] as string)) {
      for (let j = i - 1; j >= Math.max(0, i - 3); j--) {
        const l = lines[j] as string;
        if (nameLike(l) && !/^\(/.test(l) && !/commission file/i.test(l)) return l;
      }
    }
  }
  // Press releases: "Johnson & Johnson (NYSE: JNJ)", "PepsiCo, Inc. (NASDAQ: PEP)".
  const listed =
    /(?:^|[–—-]\s|\)\s|\n)\s*([A-Z][\p{L}\d&.,'’ -]{1,60}?)\s*\((NYSE|NASDAQ|Nasdaq|NYSE American|ASX|LSE|TSX|Euronext)\s*:\s*([A-Z][A-Z.]{0,6})\b/u.exec(
      text,
    );
  if (listed?.[1]) {
    // "PURCHASE, N.Y. - April 25, 2023 - PepsiCo, Inc.": the name is the last dash-separated part.
    const name = listed[1]
      .split(/\s[-–—]\s/)
      .pop()
      ?.replace(/^(?:the|today,?)\s+/i, "")
      .trim();
    // The ticker is part of the name questions use ("JNJ").
    if (name && nameLike(name)) return listed[3] ? `${name} (${listed[2]}: ${listed[3]})` : name;
  }
  // A line that is a legal name: "3M COMPANY", "Corning Incorporated".
  for (const l of lines.slice(0, 40)) {
    if (nameLike(l) && l.split(" ").length <= 6 && LEGAL_SUFFIX.test(l) && /^[\p{Lu}\d]/u.test(l)) return l;
  }
  return undefined;
}

/** The kind of document a cover page announces (see {@link coverFacts}). */
function kindOf(lines: string[], text: string): string | undefined {
  for (const l of lines.slice(0, 40)) {
    const form =
      /^form\s+(10-K|10-Q|8-K|20-F|40-F|6-K|10-K\/A|10-Q\/A|8-K\/A|S-1|S-4|F-1|DEF 14A|11-K)$/i.exec(l);
    if (form?.[1]) {
      const code = form[1].toUpperCase();
      const what = code.startsWith("10-K")
        ? " annual report"
        : code.startsWith("10-Q")
          ? " quarterly report"
          : code.startsWith("8-K")
            ? " current report"
            : "";
      return `Form ${code}${what}`;
    }
  }
  const head = text.slice(0, 3000);
  if (/\b(?:reports?|announces?|reported|announced)\b[^.\n]{0,80}\bresults\b/i.test(head))
    return "earnings release";
  if (/\bfor immediate release\b|\bpress release\b/i.test(head)) return "press release";
  if (/^\s*annual report\b/im.test(head)) return "annual report";
  return undefined;
}

/** The period or date a cover page names (see {@link coverFacts}). */
function periodOf(text: string): string | undefined {
  // Words broken at a line-end hyphen ("fourth-\nquarter") are joined again.
  const head = text
    .slice(0, 6000)
    .replace(/\s+/g, " ")
    .replace(/(\p{L})- (\p{L})/gu, "$1-$2");
  const fy = new RegExp(`for the fiscal year ended:?\\s*(${DATE})`, "i").exec(head);
  if (fy?.[1]) {
    const year = /(\d{4})$/.exec(fy[1])?.[1];
    return `fiscal year ended ${fy[1]}${year ? ` (FY${year})` : ""}`;
  }
  const quarter = new RegExp(`for the quarterly period ended:?\\s*(${DATE})`, "i").exec(head);
  if (quarter?.[1]) return `quarter ended ${quarter[1]}`;
  const report = new RegExp(`date of report[^:]{0,60}:\\s*(${DATE})`, "i").exec(head);
  if (report?.[1]) return `report dated ${report[1]}`;
  // Earnings releases: "today reported results for the fourth quarter and full year 2022".
  const results =
    /\b(?:reported|announced|reports|announces)\s+(?:its\s+)?(?:financial\s+)?results\s+for\s+(?:the\s+)?([^.;“"(]{4,90}?)(?:[.;“"(]|,(?!\s*\d{4})| compared| and provided| and raised|$)/i.exec(
      head,
    );
  const title =
    /\b((?:first|second|third|fourth)[- ]quarter(?: and (?:full[- ]year|fiscal(?: year)?))?(?: fiscal)? \d{4}|fiscal(?: year)? \d{4}|full[- ]year \d{4})\b/i.exec(
      head,
    );
  // A results phrase without a year ("the thirteen-week period") says less than the title's.
  const phrase = (
    results?.[1] && /\d{4}/.test(results[1]) ? results[1] : (title?.[1] ?? results?.[1])
  )?.trim();
  if (phrase) {
    const fyYear =
      /\b(?:fiscal(?: year)?|full[- ]year)\s+(\d{4})\b/i.exec(phrase)?.[1] ??
      /\byears? ended [^,]*,?\s*(\d{4})\b/i.exec(phrase)?.[1];
    return `${phrase}${fyYear ? ` (FY${fyYear})` : ""}`;
  }
  const dated = new RegExp(`\\b(${DATE})\\b`).exec(head);
  return dated?.[1] ? `dated ${dated[1]}` : undefined;
}

/**
 * Reads the organisation, kind and period from the text of a document's first
 * pages: SEC cover pages (`FORM 10-K`, `For the fiscal year ended December 31,
 * 2018`, the line above `(Exact name of registrant as specified in its charter)`,
 * `Date of report … : July 1, 2022`), press releases (`Company, Inc. (NYSE: X)`,
 * `today reported results for …`, the first date), and legal names on a line of
 * their own (`3M COMPANY`). A fiscal year is also written `FY2018`, the way
 * questions name it. Facts not found are absent.
 */
export function coverFacts(text: string): CoverFacts {
  const lines = text
    .split("\n")
    .map(clean)
    .filter((l) => l !== "");
  const out: CoverFacts = {};
  const organization = organizationOf(lines, text);
  if (organization) out.organization = organization;
  const kind = kindOf(lines, text);
  if (kind) out.documentKind = kind;
  const period = periodOf(text);
  if (period) out.period = period;
  return out;
}

/** A line with digits replaced by `#`, lower-cased, white space collapsed: repeated lines compare equal. */
export function normalizeLine(line: string): string {
  return clean(line).toLowerCase().replace(/\d+/g, "#");
}

/**
 * Lines that repeat at the top or bottom (first or last three lines) of at least
 * half of the pages, four pages or more: running headers and footers such as
 * `Table of Contents`, `Page 3 of 15` or a bare page number, normalised with
 * {@link normalizeLine}.
 */
export function runningLines(pages: readonly string[]): Set<string> {
  const out = new Set<string>();
  if (pages.length < 4) return out;
  const count = new Map<string, number>();
  for (const page of pages) {
    const lines = page
      .split("\n")
      .map(clean)
      .filter((l) => l !== "");
    for (const l of new Set([...lines.slice(0, 3), ...lines.slice(-3)].map(normalizeLine)))
      count.set(l, (count.get(l) ?? 0) + 1);
  }
  for (const [line, n] of count) if (n >= Math.max(4, Math.ceil(pages.length / 2))) out.add(line);
  return out;
}

/** Words a heading line does not end with (it would continue on the next line). */
const CONTINUES = /\b(?:and|or|of|the|to|in|for|with|a|an|by|on|at|from|as|that|which)$/i;

/** A line that can belong to a page's heading block (see {@link pageHeadings}). */
function headingLike(line: string): boolean {
  return (
    line.length <= 110 &&
    /^[\p{Lu}\d(]/u.test(line) &&
    /\p{L}/u.test(line) &&
    !/^[•·▪●○◦*-]/.test(line) &&
    (!/[.;,]$/.test(line) || LEGAL_SUFFIX.test(line)) &&
    !CONTINUES.test(line) &&
    trailingNumbers(line) < 2
  );
}

/** Navigation lines that head pages without naming anything: `Table of Contents`, `Page 3 of 15`. */
const NAVIGATION = /^(?:page \d+(?: of \d+)?|(?:back to )?(?:table of )?contents|index)$/i;

/** Most characters of a page heading block. */
const MAX_HEADING = 160;

/** Pages after a page with a heading block that inherit it when they have none of their own. */
const INHERIT_PAGES = 2;

/**
 * The heading block at the top of each page: after running headers and footers
 * ({@link runningLines}), navigation lines (`Table of Contents`, `Page 3 of 15`)
 * and lines without letters, up to four consecutive short
 * lines that start with a capital, a digit or `(`, do not end a sentence or run
 * on (`… of`), and are not table rows (two or more numbers at the end) — e.g.
 * `3M Company and Subsidiaries · Consolidated Statement of Cash Flows · Years
 * ended December 31`. Joined with ` · `, at most {@link MAX_HEADING} characters.
 * A page without one continues the previous page's (for up to two pages).
 */
export function pageHeadings(pages: readonly string[]): (string | undefined)[] {
  const running = runningLines(pages);
  const out: (string | undefined)[] = [];
  let last: { heading: string; page: number } | undefined;
  pages.forEach((page, p) => {
    const lines = page
      .split("\n")
      .map(clean)
      .filter((l) => l !== "");
    let i = 0;
    while (
      i < lines.length &&
      (running.has(normalizeLine(lines[i] as string)) ||
        !/\p{L}/u.test(lines[i] as string) ||
        NAVIGATION.test(lines[i] as string))
    )
      i++;
    const block: string[] = [];
    let size = 0;
    for (; i < lines.length - 1 && block.length < 4; i++) {
      const l = lines[i] as string;
      if (!headingLike(l) || size + l.length > MAX_HEADING) break;
      block.push(l);
      size += l.length + 3;
    }
    if (block.length > 0) {
      last = { heading: block.join(" · "), page: p };
      out.push(last.heading);
    } else if (last && p - last.page <= INHERIT_PAGES) {
      out.push(last.heading);
    } else {
      out.push(undefined);
    }
  });
  return out;
}

/**
 * Outline sections of each page (1-based `pageCount` pages): the bookmark path in
 * force at the top of the page (`at: 0`), then each bookmark that starts lower on
 * it, in reading order. Pages before the first bookmark get none.
 */
export function outlineSections(entries: readonly OutlineEntry[], pageCount: number): PageSection[][] {
  const sorted = entries
    .map((e, i) => ({ e, i }))
    .sort((a, b) => a.e.page - b.e.page || a.e.at - b.e.at || a.i - b.i)
    .map((x) => x.e);
  const out: PageSection[][] = [];
  let current: string[] | undefined;
  let k = 0;
  for (let page = 1; page <= pageCount; page++) {
    const sections: PageSection[] = [];
    // Bookmarks pointing at the very top of the page are in force from its start.
    while (k < sorted.length && (sorted[k] as OutlineEntry).page < page)
      current = (sorted[k++] as OutlineEntry).path;
    while (
      k < sorted.length &&
      (sorted[k] as OutlineEntry).page === page &&
      (sorted[k] as OutlineEntry).at <= 0.05
    )
      current = (sorted[k++] as OutlineEntry).path;
    if (current) sections.push({ at: 0, path: current });
    for (let j = k; j < sorted.length && (sorted[j] as OutlineEntry).page === page; j++) {
      const e = sorted[j] as OutlineEntry;
      sections.push({ at: e.at, path: e.path });
    }
    out.push(sections);
  }
  return out;
}
