/**
 * Sentence boundary detection shared by the FIXED and SEMANTIC chunkers (and,
 * through `split.ts`, every strategy that has to cut a long passage) and the
 * sentence units of EMBEDDING_SEMANTIC.
 *
 * Rule based and linear in the length of the scanned range: one regular
 * expression pass over the terminators, and for each candidate a look at the
 * word before it and the word after it. `Intl.Segmenter` is not used (it splits
 * after "Dr. " and is superlinear on very large strings).
 *
 * Offsets are UTF-16 code units into the text (JavaScript string indices).
 */
import { isBlank, type Span, trimSpan } from "./spans.js";

/** What kind of boundary a {@link Boundary} is. */
export type BoundaryKind = "sentence" | "line";

/** A place where a sentence (or a line) ends. */
export interface Boundary {
  /** Offset just after the terminator (and its closing quotes/brackets); for `line`, the offset of the line break. */
  offset: number;
  kind: BoundaryKind;
}

/**
 * Abbreviations after which a period never ends a sentence (lower-cased, with
 * their dots): titles before names ("Dr. Patel") and abbreviations that are
 * always followed by more of the sentence ("e.g.", "Fig. 3").
 */
const NEVER_ENDS = new Set([
  "e.g.",
  "i.e.",
  "cf.",
  "viz.",
  "vs.",
  "dr.",
  "mr.",
  "mrs.",
  "ms.",
  "mx.",
  "prof.",
  "rev.",
  "hon.",
  "fr.",
  "pres.",
  "gen.",
  "gov.",
  "sen.",
  "rep.",
  "capt.",
  "lt.",
  "col.",
  "sgt.",
  "supt.",
  "fig.",
  "figs.",
  "eq.",
  "eqs.",
  "vol.",
  "pp.",
  "approx.",
  "dept.",
  "ca.",
  "ref.",
  "refs.",
]);

/**
 * Abbreviations that usually continue the sentence ("St. Louis", "Smith Jr. was")
 * but also end one before a typical sentence opener ("on Main St. The shop …").
 */
const SOFT_ENDS = new Set(["st.", "mt.", "jr.", "sr.", "al.", "inc.", "ltd.", "co.", "corp.", "bros."]);

/**
 * Words that typically open an English sentence. A capitalised one after an
 * initialism or soft abbreviation ("in the U.S. The …") means the period ends
 * the sentence; any other capitalised word ("the U.S. Army") means it does not.
 */
const OPENERS = new Set(
  (
    "a an the this that these those it its he she we they i you there here then thus hence " +
    "but and so or yet in on at for if when while after before as our his her their my your " +
    "however also some many most all each every both now today what why how who where which " +
    "to from by with one no yes not nor once since although though because until unless during"
  ).split(" "),
);

/** Characters that may follow a terminator and still belong to the sentence (closing quotes, brackets, emphasis). */
const CLOSERS = "\"'”’)]}»›」』）】〕〗〙〛》〉］｝＂＇*_";

/** Full-width terminators: they end a sentence without following whitespace. */
const FULL_WIDTH = "。！？；．｡";

/** ASCII-style terminators (need following whitespace, or a CJK character) and full-width ones (do not). */
const TERMINATOR = /[.!?…]+|[。！？；．｡]+|\r\n|\n|\r/g;

function isUpper(ch: string): boolean {
  return /\p{Lu}/u.test(ch);
}

function isLower(ch: string): boolean {
  return /\p{Ll}/u.test(ch);
}

/** True for Han ideographs, kana and Hangul syllables (scripts written without spaces between sentences). */
function isCjk(code: number): boolean {
  return (
    (code >= 0x3040 && code <= 0x30ff) ||
    (code >= 0x3400 && code <= 0x4dbf) ||
    (code >= 0x4e00 && code <= 0x9fff) ||
    (code >= 0xf900 && code <= 0xfaff) ||
    (code >= 0xac00 && code <= 0xd7af)
  );
}

/** True for CJK symbols and punctuation (U+3000–U+303F) and full-width forms (U+FF00–U+FFEF). */
function isCjkPunctuation(code: number): boolean {
  return (code >= 0x3000 && code <= 0x303f) || (code >= 0xff00 && code <= 0xffef);
}

/** The ASCII word (letters only, at most 16) starting at `pos`, lower-cased. */
function wordAt(text: string, pos: number): string {
  let p = pos;
  const stop = Math.min(text.length, pos + 16);
  while (p < stop) {
    const c = text.charCodeAt(p) | 0x20;
    if (c < 0x61 || c > 0x7a) break;
    p++;
  }
  return text.slice(pos, p).toLowerCase();
}

/** True when the word at `pos` is a capitalised sentence opener ("The", "It", "However"). */
function opensSentence(text: string, pos: number): boolean {
  const word = wordAt(text, pos);
  if (word.length === 0 || !isUpper(text.charAt(pos))) return false;
  // The opener must be a whole word ("The", not "Theory").
  const after = text.charAt(pos + word.length);
  return OPENERS.has(word) && !/[\p{L}\p{N}]/u.test(after);
}

/**
 * Returns true when the period at `dot` belongs to an abbreviation, an initial,
 * a list marker, a spaced ellipsis or a lower-case continuation, i.e. is not a
 * sentence end. `n` is the offset of the first non-blank character after the
 * period and its closers (`text.length` when none).
 */
function periodContinues(text: string, dot: number, n: number): boolean {
  const next = n < text.length ? text.charAt(n) : undefined;
  let w = dot;
  while (w > 0 && dot - w < 256) {
    const code = text.charCodeAt(w - 1);
    // The word starts after a blank, an opening quote or bracket, or CJK text ("我同意。Dr. Wang").
    if (isBlank(code) || isCjk(code) || isCjkPunctuation(code) || "(\"'“‘[«".includes(text.charAt(w - 1)))
      break;
    w--;
  }
  const token = text.slice(w, dot + 1);
  const lower = token.toLowerCase();
  if (NEVER_ENDS.has(lower)) return true;
  // "No. 5", "nos. 3-4".
  if ((lower === "no." || lower === "nos.") && next !== undefined && /\d/.test(next)) return true;
  // A lower-case word after the period: "a.m. on Friday", "etc. and", "U.S. office".
  if (next !== undefined && isLower(next)) return true;
  // Spaced ellipsis ". . ." (the last dot decides).
  if (next === "." && token === ".") return true;
  if (SOFT_ENDS.has(lower)) return next === undefined || !opensSentence(text, n);
  // Ordered-list marker at the start of a line: "1. First".
  if (/^\d{1,3}\.$/.test(token)) {
    let p = w;
    while (p > 0 && (text.charAt(p - 1) === " " || text.charAt(p - 1) === "\t")) p--;
    if (p === 0 || text.charAt(p - 1) === "\n" || text.charAt(p - 1) === "\r") return true;
  }
  // Single capital initial ("J. Smith") or initialism ("U.S.", "a.m.", "J.R.R."): the
  // sentence goes on unless a typical sentence opener follows ("… in the U.S. The …").
  if (/^\p{Lu}\.$/u.test(token) || /^(?:\p{L}\.){2,}$/u.test(token)) {
    if (next === undefined || !isUpper(next)) return true;
    return !opensSentence(text, n);
  }
  return false;
}

/**
 * Finds sentence and line boundaries in `text.slice(from, to)`, in order.
 *
 * A sentence ends after `.`, `!`, `?` or `…` (plus any closing quotes, brackets
 * or emphasis marks) when whitespace, a CJK character or the end of the text
 * follows. It does not end at:
 * - decimals, version numbers, URLs, e-mail addresses and file names ("12.5",
 *   "v1.2.3", "example.com/a?b=1", "a@b.org", "Node.js"): no whitespace follows;
 * - titles and fixed abbreviations ("Dr. Patel", "Mrs.", "Prof.", "e.g.", "i.e.",
 *   "Fig. 3", "vs.");
 * - initials and initialisms ("J. Smith", "U.S. Army", "9 a.m. Friday") unless a
 *   typical sentence opener follows ("in the U.S. The …", "at 9 a.m. It …");
 * - "St.", "Jr.", "Inc." and similar, on the same condition ("St. Louis");
 * - a period followed by a lower-case word ("a.m. on Friday", "etc. and");
 * - an ellipsis ("...", "…", ". . .") followed by a lower-case word, or a
 *   quoted question or exclamation followed by one ('"Why?" she asked');
 * - an ordered-list marker at the start of a line ("1. Intro"), "No. 5".
 *
 * Full-width terminators `。！？；．｡` (Chinese, Japanese) end a sentence without
 * whitespace, together with their closing quotes/brackets ("他说：“好。”然后").
 * Every line break (`\n`, `\r\n`, `\r`) is a `line` boundary at the offset of the
 * break character.
 *
 * Linear in `to - from` (each candidate looks at most 256 characters back).
 *
 * @param text the whole text (characters after `to` are read to decide a boundary)
 * @param from first offset to scan (UTF-16 code units, default 0)
 * @param to end of the scanned range (exclusive, default `text.length`); a
 *   sentence boundary whose closers reach past `to` is not reported
 */
export function findBoundaries(text: string, from = 0, to: number = text.length): Boundary[] {
  const out: Boundary[] = [];
  const start = Math.max(0, from);
  const stop = Math.min(text.length, to);
  if (stop <= start) return out;
  const re = new RegExp(TERMINATOR.source, "g");
  const slice = text.slice(start, stop);
  for (let m = re.exec(slice); m !== null; m = re.exec(slice)) {
    const at = start + m.index;
    const token = m[0];
    const c0 = token.charCodeAt(0);
    if (c0 === 10 || c0 === 13) {
      out.push({ offset: at, kind: "line" });
      continue;
    }
    let end = at + token.length;
    while (end < text.length && CLOSERS.includes(text.charAt(end))) end++;
    if (!FULL_WIDTH.includes(token.charAt(0))) {
      // ASCII terminators need whitespace (or, in mixed text, a CJK character) after them.
      const after = end < text.length ? text.charCodeAt(end) : -1;
      const ellipsis = token.endsWith("...") || token.endsWith("…");
      // An ellipsis inside CJK text ("他想了想……然后") does not end the sentence.
      if (after !== -1 && !isBlank(after) && (ellipsis || !isCjk(after))) continue;
      let n = end;
      while (n < text.length && isBlank(text.charCodeAt(n))) n++;
      if (token === ".") {
        if (periodContinues(text, at, n)) continue;
      } else if (n < text.length && isLower(text.charAt(n))) {
        // "Wait… what?" and '"Why?" she asked.' go on; a bare "Really? no" does not.
        if (ellipsis || end > at + token.length) continue;
      }
    }
    if (end <= stop) out.push({ offset: end, kind: "sentence" });
  }
  return out;
}

/**
 * Offsets where sentences end in `text.slice(from, to)`: after sentence
 * terminators (see {@link findBoundaries}) and at every line break. Sorted,
 * without duplicates. Offsets are UTF-16 code units into `text`.
 */
export function sentenceBoundaries(text: string, from = 0, to: number = text.length): number[] {
  const out: number[] = [];
  for (const b of findBoundaries(text, from, to)) {
    if (out.length === 0 || out[out.length - 1] !== b.offset) out.push(b.offset);
  }
  return out;
}

/** Options for {@link sentenceSpans}. */
export interface SentenceSpanOptions {
  /**
   * How line breaks split sentences: `never` (a sentence runs across line
   * breaks, as in hard-wrapped text), `paragraph` (a blank line — a line break
   * followed by a whitespace-only line — also ends a sentence, so headings and
   * list blocks are not glued to the next paragraph) or `always` (every line
   * break ends a sentence). Default `paragraph`.
   */
  lineBreaks?: "never" | "paragraph" | "always";
}

/** True when the line break at `p` is followed by a whitespace-only line (a paragraph break). */
function isParagraphBreak(text: string, p: number, stop: number): boolean {
  let q = text.charCodeAt(p) === 13 && text.charCodeAt(p + 1) === 10 ? p + 2 : p + 1;
  while (q < stop) {
    const c = text.charCodeAt(q);
    if (c === 10 || c === 13) return true;
    if (!isBlank(c)) return false;
    q++;
  }
  return false;
}

/**
 * Sentences of `text.slice(from, to)` as spans: cut at the sentence boundaries
 * of {@link findBoundaries} (and at line breaks as `options.lineBreaks` says),
 * each trimmed of blank edges (see `isBlank` in spans.ts); blank pieces are
 * dropped. Spans are in order, disjoint, and cover every non-blank character of
 * the range. Offsets are UTF-16 code units into `text`. Linear in `to - from`.
 */
export function sentenceSpans(
  text: string,
  from = 0,
  to: number = text.length,
  options: SentenceSpanOptions = {},
): Span[] {
  const lineBreaks = options.lineBreaks ?? "paragraph";
  const start = Math.max(0, from);
  const stop = Math.min(text.length, to);
  const out: Span[] = [];
  let last = start;
  const cut = (end: number): void => {
    if (end <= last) return;
    const span = trimSpan(text, last, end);
    if (span) out.push(span);
    last = end;
  };
  for (const b of findBoundaries(text, start, stop)) {
    if (b.kind === "sentence") cut(b.offset);
    else if (
      lineBreaks === "always" ||
      (lineBreaks === "paragraph" && isParagraphBreak(text, b.offset, stop))
    )
      cut(b.offset);
  }
  cut(stop);
  return out;
}

/**
 * Splits `text` into trimmed sentences using terminator boundaries only (line
 * breaks inside a sentence do not split it). Whitespace-only pieces are dropped.
 */
export function splitSentences(text: string): string[] {
  return sentenceSpans(text, 0, text.length, { lineBreaks: "never" }).map((s) => text.slice(s.start, s.end));
}
