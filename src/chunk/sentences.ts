/**
 * Sentence boundary detection shared by the FIXED and SEMANTIC chunkers (and,
 * through `split.ts`, every strategy that has to cut a long passage).
 *
 * Offsets are UTF-16 code units into the text (JavaScript string indices).
 */
import { isBlank } from "./spans.js";

/** What kind of boundary a {@link Boundary} is. */
export type BoundaryKind = "sentence" | "line";

/** A place where a sentence (or a line) ends. */
export interface Boundary {
  /** Offset just after the terminator (and its closing quotes/brackets); for `line`, the offset of the line break. */
  offset: number;
  kind: BoundaryKind;
}

/** Abbreviations after which a period never ends a sentence (lower-cased, with their dots). */
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
  "st.",
  "sr.",
  "jr.",
  "mt.",
  "fig.",
  "figs.",
  "eq.",
  "vol.",
  "pp.",
  "approx.",
  "dept.",
  "gen.",
  "gov.",
  "sen.",
  "rep.",
  "capt.",
  "lt.",
  "col.",
  "sgt.",
  "ca.",
]);

/** Characters that may follow a terminator and still belong to the sentence. */
const CLOSERS = "\"'”’)]}»」』）】〕";

/** ASCII-style terminators (need following whitespace) and full-width ones (do not). */
const TERMINATOR = /[.!?…]+|[。！？；．]+|\r\n|\n|\r/g;

function isUpper(ch: string): boolean {
  return /\p{Lu}/u.test(ch);
}

function isLower(ch: string): boolean {
  return /\p{Ll}/u.test(ch);
}

/**
 * Returns true when the period ending at `dot` (index of the `.`) belongs to an
 * abbreviation, an initial, a list marker or a lower-case continuation, i.e. is
 * not a sentence end. `next` is the first non-blank character after it.
 */
function periodContinues(text: string, dot: number, next: string | undefined): boolean {
  let w = dot;
  while (w > 0 && !isBlank(text.charCodeAt(w - 1)) && !"(\"'“‘[".includes(text.charAt(w - 1))) w--;
  const token = text.slice(w, dot + 1);
  const lower = token.toLowerCase();
  if (NEVER_ENDS.has(lower)) return true;
  // "No. 5", "nos. 3-4".
  if ((lower === "no." || lower === "nos.") && next !== undefined && /\d/.test(next)) return true;
  // Single capital initial: "J. Smith".
  if (/^\p{Lu}\.$/u.test(token)) return true;
  // Ordered-list marker at the start of a line: "1. First".
  if (/^\d{1,3}\.$/.test(token)) {
    let p = w;
    while (p > 0 && (text.charAt(p - 1) === " " || text.charAt(p - 1) === "\t")) p--;
    if (p === 0 || text.charAt(p - 1) === "\n" || text.charAt(p - 1) === "\r") return true;
  }
  // A lower-case word after the period (abbreviations such as "a.m.", "U.S.", "etc."), or
  // an initialism followed by anything but a capital.
  if (next !== undefined && isLower(next)) return true;
  if (/^(?:\p{L}\.){2,}$/u.test(token) && (next === undefined || !isUpper(next))) return true;
  return false;
}

/**
 * Finds sentence and line boundaries in `text.slice(from, to)`, in order.
 *
 * A sentence ends after `.`, `!`, `?` or `…` (plus any closing quotes or brackets)
 * when whitespace or the end of the text follows; periods of common abbreviations
 * ("e.g.", "Dr.", "U.S."), single initials, ordered-list markers and periods
 * followed by a lower-case word do not end a sentence; decimals ("12.5") never
 * match because no whitespace follows. Full-width terminators `。！？；．` end a
 * sentence without whitespace. Every line break is a `line` boundary at the
 * offset of the break character.
 *
 * @param text the whole text (characters after `to` are read to decide a boundary)
 * @param from first offset to scan (UTF-16 code units, default 0)
 * @param to end of the scanned range (exclusive, default `text.length`)
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
    const fullWidth = "。！？；．".includes(token.charAt(0));
    if (!fullWidth) {
      if (end < text.length && !isBlank(text.charCodeAt(end))) continue;
      if (token === ".") {
        let n = end;
        while (n < text.length && isBlank(text.charCodeAt(n))) n++;
        const next = n < text.length ? text.charAt(n) : undefined;
        if (periodContinues(text, at, next)) continue;
      } else if (token.endsWith("...") || token.endsWith("…")) {
        let n = end;
        while (n < text.length && isBlank(text.charCodeAt(n))) n++;
        if (n < text.length && isLower(text.charAt(n))) continue;
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

/**
 * Splits `text` into trimmed sentences using terminator boundaries only (line
 * breaks inside a sentence do not split it). Whitespace-only pieces are dropped.
 */
export function splitSentences(text: string): string[] {
  const out: string[] = [];
  let last = 0;
  const push = (end: number): void => {
    const s = text.slice(last, end).trim();
    if (s) out.push(s);
    last = end;
  };
  for (const b of findBoundaries(text)) if (b.kind === "sentence") push(b.offset);
  push(text.length);
  return out;
}
