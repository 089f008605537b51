/**
 * Table rows in plain text: a line that ends in two or more figures (`Accounts
 * payable 1,174 1,587`, `(Millions) 2018 2017 2016`, `Net income $ 5,363 $ 4,869`).
 * Shared by the PDF extractor (page headings stop at a table), the chunker (table
 * regions) and BM25 (field lengths), so all three agree on what a table row is.
 */

/** A figure in a table cell: `1,577`, `(370)`, `$5,363`, `12.3%`, `(4.8%)`, or a dash for none. */
const FIGURE = /^(?:\(?[$€£¥]?-?\d[\d,.]*%?\)?%?|[—–-]+)$/;
/** A currency sign standing alone before a figure (`$ 5,363`). */
const CURRENCY = /^[$€£¥]$/;

/** How many figures end the line (currency signs standing alone are skipped). */
export function trailingNumbers(line: string): number {
  const tokens = line.trim().split(/\s+/);
  let n = 0;
  for (let i = tokens.length - 1; i >= 0; i--) {
    const t = tokens[i] as string;
    if (CURRENCY.test(t)) continue;
    if (FIGURE.test(t)) n++;
    else break;
  }
  return n;
}

/** Longest row label (the text before the figures): longer ones are sentences or references, not labels. */
const MAX_LABEL = 100;

/**
 * True for a table row: a line ending in two or more figures (one with a digit) after a
 * label of at most 100 characters — not a paragraph on one line nor a bibliography entry
 * (`… Nature 2002 419 520 526`).
 */
export function isTableRow(line: string): boolean {
  if (!/\d/.test(line)) return false;
  const n = trailingNumbers(line);
  if (n < 2) return false;
  const tokens = line.trim().split(/\s+/);
  let figures = 0;
  let cut = tokens.length;
  while (cut > 0 && figures < n) {
    const t = tokens[cut - 1] as string;
    if (!CURRENCY.test(t)) figures++;
    cut--;
  }
  return tokens.slice(0, cut).join(" ").length <= MAX_LABEL;
}

/** True for a header row of figures that are all years (`2018 2017 2016`, `(Millions) 2018 2017`). */
export function isYearRow(line: string): boolean {
  const tokens = line.trim().split(/\s+/);
  const n = trailingNumbers(line);
  if (n < 2) return false;
  return tokens.slice(-n).every((t) => /^(?:19|20)\d\d$/.test(t));
}
