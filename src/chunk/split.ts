/**
 * Cutting and packing primitives shared by the strategies:
 * - {@link splitRange}: FIXED-style cutting of one range into spans of at most
 *   `size` characters, at the best boundary available (paragraph break, sentence
 *   end, line break, whitespace, then a grapheme/code-point boundary), with
 *   optional overlap and short-tail rebalancing;
 * - {@link paragraphSpans} / {@link lineSpans}: structural units;
 * - {@link pack}: greedy grouping of consecutive units into spans within a budget.
 *
 * Units: offsets are UTF-16 code units of the document text; sizes are in the
 * unit of the {@link SizeMeasure} passed (characters by default, or tokens).
 */

import type { Chunk } from "../types.js";
import { withContext } from "../types.js";
import { CHAR_MEASURE, type SizeMeasure } from "./measure.js";
import { findBoundaries } from "./sentences.js";
import {
  bodyBudget,
  type ChunkLimits,
  fitPrefix,
  isBlank,
  isCodePointBoundary,
  makeChunk,
  type Span,
  skipBlankBackward,
  skipBlankForward,
  trimSpan,
} from "./spans.js";

/** `prose` prefers sentence ends; `lines` (code, tables, chat) prefers whole lines. */
export type SplitMode = "prose" | "lines";

/** Parameters of {@link splitRange}. Sizes are in `measure` units (characters by default). */
export interface SplitOptions {
  /** Maximum span size (≥ 1). */
  size: number;
  /**
   * Maximum size of the first span (≥ 1), when it differs from `size` (e.g. a
   * first span that starts with its own heading needs no heading prefix). Default `size`.
   */
  firstSize?: number;
  /** Characters the next span starts before the previous one ended (< size). Default 0. */
  overlap?: number;
  /** A final span shorter than this is avoided by cutting the one before it earlier. Default 0. */
  minSize?: number;
  /** Boundary preference. Default `prose`. */
  mode?: SplitMode;
  /** How sizes are measured. Default characters. */
  measure?: SizeMeasure;
  /**
   * Offset the first span must end beyond (default: the range's start). Set it to
   * the end of the previous chunk when the range starts inside that chunk (an
   * overlapping piece carried into the next unit), so that no span lies inside
   * its predecessor.
   */
  after?: number;
}

/**
 * Measures spans starting at one offset. For characters this is arithmetic; for
 * tokens it tokenises the slice (the count is not additive over pieces, so every
 * decision measures the exact span).
 */
class Ruler {
  readonly chars: boolean;
  constructor(
    readonly text: string,
    readonly measure: SizeMeasure,
  ) {
    this.chars = measure.unit === "chars";
  }

  size(start: number, end: number): number {
    if (end <= start) return 0;
    return this.chars ? end - start : this.measure.count(this.text.slice(start, end));
  }

  /**
   * An offset `p` in `[s, hi]` with `size(s, p) ≤ budget`, as large as possible:
   * exact for characters; for tokens, found by interpolation and bisection to
   * within a few characters of the largest such offset (callers look back from it
   * for a boundary and verify the span they cut). Token counts are treated as
   * monotone in the end offset, which holds up to BPE merge effects.
   */
  reach(s: number, budget: number, hi: number): number {
    if (this.chars) return Math.min(hi, s + budget);
    let lo = s; // size(s, lo) ≤ budget
    let nLo = 0;
    let up = -1; // size(s, up) > budget
    let nUp = 0;
    let guess = Math.min(hi, s + Math.max(1, Math.round(budget * this.charsPerUnit)));
    for (;;) {
      const n = this.size(s, guess);
      if (n <= budget) {
        lo = guess;
        nLo = n;
        if (guess >= hi) return hi;
        const grow = Math.max(1.25, budget / Math.max(1, n));
        guess = Math.min(hi, s + Math.ceil((guess - s) * grow) + 1);
      } else {
        up = guess;
        nUp = n;
        break;
      }
    }
    const tolerance = Math.max(1, Math.floor((up - s) / 128));
    while (up - lo > tolerance) {
      // Interpolate on the counts, kept strictly inside (lo, up); bisect when that stalls.
      let mid = lo + Math.round(((budget - nLo + 0.5) * (up - lo)) / Math.max(1, nUp - nLo));
      if (mid <= lo || mid >= up || up - lo < 8) mid = (lo + up) >>> 1;
      const n = this.size(s, mid);
      if (n <= budget) {
        lo = mid;
        nLo = n;
      } else {
        up = mid;
        nUp = n;
      }
    }
    if (lo > s) this.charsPerUnit = (lo - s) / Math.max(1, nLo);
    return lo;
  }

  /** Characters per unit seen in the last {@link reach}: the first guess of the next one. */
  private charsPerUnit = 4;

  /**
   * An offset `p` in `[lo, end]` with `size(p, end) ≤ budget`, as small as
   * possible (exact for characters, within a few characters for tokens).
   */
  reachBack(end: number, budget: number, lo: number): number {
    if (this.chars) return Math.max(lo, end - budget);
    let good = end;
    let bad = Math.max(lo, end - Math.ceil(budget * this.charsPerUnit * 1.5) - 1);
    if (this.size(bad, end) <= budget) {
      if (bad === lo || this.size(lo, end) <= budget) return lo;
      good = bad;
      bad = lo;
    }
    const tolerance = Math.max(1, Math.floor((end - bad) / 128));
    while (good - bad > tolerance) {
      const mid = (good + bad) >>> 1;
      if (this.size(mid, end) <= budget) good = mid;
      else bad = mid;
    }
    return good;
  }
}

// A fixed locale: chunk boundaries never depend on the host's LANG.
const graphemes = new Intl.Segmenter("en", { granularity: "grapheme" });

function isBreak(code: number): boolean {
  return code === 10 || code === 13;
}

/** Largest grapheme-cluster boundary `b` with `lo < b ≤ pos`, or -1. */
function graphemeBoundaryAtOrBefore(text: string, pos: number, lo: number): number {
  if (pos >= text.length) return text.length > lo ? text.length : -1;
  const from = Math.max(lo, pos - 64);
  const slice = text.slice(from, Math.min(text.length, pos + 16));
  let best = -1;
  for (const { index } of graphemes.segment(slice)) {
    const b = from + index;
    if (b > pos) break;
    if (b > lo && b > from && isCodePointBoundary(text, b)) best = b;
  }
  return best;
}

/** Smallest grapheme-cluster boundary `b ≥ pos` (and < `hi`), or `hi`. */
function graphemeBoundaryAtOrAfter(text: string, pos: number, hi: number): number {
  if (pos <= 0) return 0;
  const from = Math.max(0, pos - 64);
  const slice = text.slice(from, Math.min(text.length, hi));
  for (const { index } of graphemes.segment(slice)) {
    const b = from + index;
    if (b >= pos && b > from && isCodePointBoundary(text, b)) return Math.min(b, hi);
  }
  return hi;
}

/**
 * A cut in `(lower, limit]` that splits no surrogate pair and, where possible,
 * no grapheme cluster. Only when `limit` itself sits inside a surrogate pair and
 * `limit - 1 === lower` does it return `limit + 1` (one character over size).
 */
function hardCut(text: string, lower: number, limit: number): number {
  const g = graphemeBoundaryAtOrBefore(text, limit, lower);
  if (g > lower) return g;
  for (let c = limit; c > lower; c--) if (isCodePointBoundary(text, c)) return c;
  return Math.min(text.length, limit + 1);
}

/**
 * A cut in `[lo, hi]` at a paragraph break (a line break followed by a blank
 * line): the offset where the blank run after the paragraph text begins, or -1.
 */
function lastParagraphBreak(text: string, lo: number, hi: number): number {
  const top = Math.min(hi, text.length - 1);
  // Without `\r` in the window, jump between `\n`s instead of testing every character.
  const lfOnly = !hasCarriageReturn(text, lo, top + 1);
  // `lastIndexOf` on the window slice: on the whole text it would scan back to 0 when there is no `\n`.
  const window = lfOnly && top >= lo ? text.slice(lo, top + 1) : "";
  const prevBreak = (p: number): number => {
    if (!lfOnly) return p - 1;
    const k = p - 1 - lo;
    return k < 0 ? -1 : lo + window.lastIndexOf("\n", k);
  };
  for (let p = prevBreak(top + 1); p >= lo; p = prevBreak(p)) {
    const c = text.charCodeAt(p);
    if (!isBreak(c)) continue;
    let q = c === 13 && text.charCodeAt(p + 1) === 10 ? p + 2 : p + 1;
    while (q < text.length && (text.charCodeAt(q) === 32 || text.charCodeAt(q) === 9)) q++;
    if (q < text.length && !isBreak(text.charCodeAt(q))) continue;
    const r = skipBlankBackward(text, p, lo);
    return r > lo ? r : p;
  }
  return -1;
}

/** Last offset `p` in `[lo, hi]` with a line-break character. */
function lastLineBreak(text: string, lo: number, hi: number): number {
  const top = Math.min(hi, text.length - 1);
  if (!hasCarriageReturn(text, lo, top + 1)) {
    if (top < lo) return -1;
    const k = text.slice(lo, top + 1).lastIndexOf("\n");
    return k >= 0 ? lo + k : -1;
  }
  for (let p = top; p >= lo; p--) if (isBreak(text.charCodeAt(p))) return p;
  return -1;
}

/**
 * A blank character (Unicode White_Space, see {@link isBlank}) that is also a
 * break opportunity: not a no-break space (U+00A0, U+2007 figure space, U+202F),
 * which sits inside words and numbers (UAX #14 class GL).
 */
function isBreakSpace(code: number): boolean {
  return isBlank(code) && code !== 0xa0 && code !== 0x2007 && code !== 0x202f;
}

/** Last offset `p` in `[lo, hi]` holding a blank character that allows a break (see {@link isBreakSpace}). */
function lastBlank(text: string, lo: number, hi: number): number {
  for (let p = Math.min(hi, text.length - 1); p >= lo; p--) if (isBreakSpace(text.charCodeAt(p))) return p;
  return -1;
}

/** Last sentence end in `[lo, hi]`. */
function lastSentenceEnd(text: string, lo: number, hi: number): number {
  // Only the last boundary matters: look at a short tail first and widen it, instead of finding
  // every sentence of the window. A boundary right at a tail's start could be a piece of a longer
  // terminator run, so it only counts once the tail reaches `lo`.
  for (let span = 256; ; span *= 4) {
    const from = Math.max(lo, hi - span);
    let best = -1;
    for (const b of findBoundaries(text, from, hi)) {
      if (b.kind === "sentence" && b.offset >= lo && (from === lo || b.offset > from + 8)) best = b.offset;
    }
    if (best >= 0 || from === lo) return best;
  }
}

type Finder = (text: string, lo: number, hi: number) => number;

const TIERS: Record<SplitMode, Finder[]> = {
  prose: [lastParagraphBreak, lastSentenceEnd, lastLineBreak, lastBlank],
  lines: [lastParagraphBreak, lastLineBreak, lastBlank],
};

/**
 * Chooses a cut `c` with `lower < c ≤ limit` for a span starting at `s`:
 * the strongest boundary in the back half of the window, else the strongest
 * anywhere in it, else a hard cut at a grapheme boundary.
 */
function findCut(
  text: string,
  s: number,
  lower: number,
  limit: number,
  mode: SplitMode,
  strict: boolean,
): number {
  const tiers = TIERS[mode];
  const fill = Math.max(lower + 1, s + Math.ceil((limit - s) / 2));
  for (const find of tiers) {
    const c = find(text, fill, limit);
    if (c > lower) return c;
  }
  if (strict) return -1;
  for (const find of tiers) {
    const c = find(text, lower + 1, limit);
    if (c > lower) return c;
  }
  return hardCut(text, lower, limit);
}

/**
 * The start of the next span when overlapping: about `overlap` characters before
 * `cut`, moved forward to the first sentence start, else word start, else
 * grapheme boundary in that region. Returns `cut` when no overlap is possible.
 */
function overlapStart(ruler: Ruler, s: number, cut: number, overlap: number): number {
  const text = ruler.text;
  if (overlap <= 0) return cut;
  const from = Math.max(ruler.reachBack(cut, overlap, s + 1), s + 1);
  if (from >= cut) return cut;
  for (const b of findBoundaries(text, from - 1, cut)) {
    if (b.kind !== "sentence" || b.offset < from) continue;
    const p = skipBlankForward(text, b.offset, cut);
    if (p < cut) return p;
  }
  for (let p = from; p < cut; p++) {
    if (!isBlank(text.charCodeAt(p)) && isBreakSpace(text.charCodeAt(p - 1))) return p;
  }
  const g = graphemeBoundaryAtOrAfter(text, from, cut);
  return g < cut ? skipBlankForward(text, g, cut) : cut;
}

/**
 * Cuts `text.slice(start, end)` into spans of at most `size` characters.
 *
 * Each span is as long as possible; its end is moved back to the strongest
 * boundary (paragraph break, then — in `prose` mode — sentence end, then line
 * break, then whitespace; boundaries in the back half of the window win), and
 * only if none exists it is cut at a grapheme-cluster (never inside a surrogate
 * pair) boundary. Spans are trimmed of blank edges; blank ranges yield nothing.
 * With `overlap`, each span starts about `overlap` characters before the
 * previous end, snapped forward to a sentence or word start; every span still
 * ends beyond the previous one, so progress is guaranteed and no span is
 * contained in its predecessor. With `minSize`, the second-to-last cut moves
 * earlier (to a boundary) so that the final span is not shorter than `minSize`.
 *
 * Exception: a span can exceed `size` by one unit only when `size` is 1 and a
 * surrogate pair must be kept whole.
 */
export function splitRange(text: string, start: number, end: number, opts: SplitOptions): Span[] {
  const size = Math.max(1, Math.floor(opts.size));
  // The size of the span being cut: `firstSize` for the first one, then `size`.
  let cap = Math.max(1, Math.floor(opts.firstSize ?? size));
  const overlap = Math.max(0, Math.min(opts.overlap ?? 0, size - 1));
  const minSize = Math.max(0, opts.minSize ?? 0);
  const mode = opts.mode ?? "prose";
  const ruler = new Ruler(text, opts.measure ?? CHAR_MEASURE);
  const out: Span[] = [];
  const range = trimSpan(text, start, end);
  if (!range) return out;
  const e = range.end;
  let s = range.start;
  // Every cut must be > lower; the first one also beyond `after` (the previous chunk's end).
  let lower = Math.max(s, Math.min(opts.after ?? s, e - 1));
  while (s < e) {
    let limit = ruler.reach(s, cap, e);
    if (limit >= e) {
      out.push({ start: s, end: e });
      break;
    }
    let spanEnd = -1;
    let cut = -1;
    // A cut's span can still measure over `size` in tokens (BPE counts are not monotone):
    // pull the limit back until it fits.
    for (;;) {
      cut = -1;
      // Is the rest after this window shorter than minSize? (`reach` stops early on a long rest.)
      if (minSize > 0 && ruler.reach(limit, minSize - 1, e) >= e) {
        const target = tailTarget(ruler, s, e, minSize);
        if (target > lower && target < limit) cut = findCut(text, s, lower, target, mode, true);
      }
      if (cut <= lower) cut = findCut(text, s, lower, Math.max(limit, lower + 1), mode, false);
      spanEnd = skipBlankBackward(text, cut, s);
      if (ruler.chars || limit <= lower + 1 || ruler.size(s, spanEnd) <= cap) break;
      limit = Math.max(lower + 1, Math.min(limit - 1, spanEnd - 1));
    }
    if (spanEnd > s) out.push({ start: s, end: spanEnd });
    cap = size;
    lower = skipBlankForward(text, cut, e);
    if (lower >= e) break;
    let next = overlapStart(ruler, s, cut, overlap);
    if (next >= cut || next <= s) next = cut;
    next = skipBlankForward(text, next, e);
    // The window from `next` must reach past `lower` (room for one code point).
    if (ruler.size(next, Math.min(e, lower + 2)) > size) next = lower;
    s = next;
  }
  return out;
}

/**
 * Where to cut a range `[s, e)` whose natural last span would be shorter than
 * `minSize`: leave at least `minSize` (and at most half the range) for the tail.
 */
function tailTarget(ruler: Ruler, s: number, e: number, minSize: number): number {
  if (ruler.chars) return s + Math.max(e - s - minSize, Math.ceil((e - s) / 2));
  const total = ruler.size(s, e);
  const keep = Math.max(total - minSize, Math.ceil(total / 2));
  return s + Math.round(((e - s) * keep) / Math.max(1, total));
}

/** The last text checked by {@link hasCarriageReturn} and whether it has any `\r` at all. */
let crText: string | undefined;
let crAny = false;

/** True when `text.slice(start, end)` contains a `\r` (O(1) for a text without any, after the first call). */
function hasCarriageReturn(text: string, start: number, end: number): boolean {
  if (text !== crText) {
    crText = text;
    crAny = text.includes("\r");
  }
  if (!crAny) return false;
  const cr = text.indexOf("\r", start);
  return cr !== -1 && cr < end;
}

/** End of the line starting at `p` (the offset of its break, or `end`); `lfOnly` when the range has no `\r`. */
function lineEnd(text: string, p: number, end: number, lfOnly: boolean): number {
  if (lfOnly) {
    const q = text.indexOf("\n", p);
    return q === -1 || q > end ? end : q;
  }
  let q = p;
  while (q < end && !isBreak(text.charCodeAt(q))) q++;
  return q;
}

/** Maximal runs of non-blank lines in `[start, end)` (separated by blank lines; CRLF aware), trimmed. */
export function paragraphSpans(text: string, start = 0, end: number = text.length): Span[] {
  const out: Span[] = [];
  const lfOnly = !hasCarriageReturn(text, start, end);
  let paraStart = -1;
  let p = start;
  while (p < end) {
    const q = lineEnd(text, p, end, lfOnly);
    const blank = skipBlankForward(text, p, q) >= q;
    if (blank) {
      if (paraStart >= 0) {
        const t = trimSpan(text, paraStart, p);
        if (t) out.push(t);
        paraStart = -1;
      }
    } else if (paraStart < 0) {
      paraStart = p;
    }
    p = q < end && text.charCodeAt(q) === 13 && text.charCodeAt(q + 1) === 10 ? q + 2 : q + 1;
  }
  if (paraStart >= 0) {
    const t = trimSpan(text, paraStart, end);
    if (t) out.push(t);
  }
  return out;
}

/** A line of text: `[start, end)` is its content without the line break; `next` starts the next line. */
export interface Line extends Span {
  next: number;
}

/** Splits `[start, end)` into lines (`\n`, `\r\n` or `\r` breaks). The last line may be empty. */
export function lineSpans(text: string, start = 0, end: number = text.length): Line[] {
  const out: Line[] = [];
  const lfOnly = !hasCarriageReturn(text, start, end);
  let p = start;
  while (p < end) {
    const q = lineEnd(text, p, end, lfOnly);
    const next = q < end && text.charCodeAt(q) === 13 && text.charCodeAt(q + 1) === 10 ? q + 2 : q + 1;
    out.push({ start: p, end: q, next: Math.min(next, end) });
    p = next;
  }
  return out;
}

/** Line offsets of a text in typed arrays: line `k` is `[starts[k], ends[k])`, without its break. */
export interface LineTable {
  count: number;
  starts: Int32Array;
  ends: Int32Array;
}

/**
 * The lines of `text` (`\n`, `\r\n` or `\r` breaks) as a {@link LineTable};
 * the same lines as {@link lineSpans} without an object per line.
 */
export function lineTable(text: string): LineTable {
  const lfOnly = !hasCarriageReturn(text, 0, text.length);
  let starts: Int32Array = new Int32Array(256);
  let ends: Int32Array = new Int32Array(256);
  let count = 0;
  let p = 0;
  while (p < text.length) {
    const q = lineEnd(text, p, text.length, lfOnly);
    if (count === starts.length) {
      const grow = (a: Int32Array): Int32Array => {
        const b = new Int32Array(a.length * 2);
        b.set(a);
        return b;
      };
      starts = grow(starts);
      ends = grow(ends);
    }
    starts[count] = p;
    ends[count] = q;
    count++;
    p = q < text.length && text.charCodeAt(q) === 13 && text.charCodeAt(q + 1) === 10 ? q + 2 : q + 1;
  }
  return { count, starts, ends };
}

/** A piece of an oversized unit, optionally with its own context prefix. */
export interface Piece extends Span {
  /** Context prefix for this piece (e.g. a repeated table header), overriding the default. */
  prefix?: string;
}

/** A group made by {@link pack}: its span and the units it covers. */
export interface Group<U> extends Piece {
  units: U[];
  /** True when this span is a piece of a unit too large for the budget. */
  piece?: boolean;
}

/** Callbacks for {@link pack}. */
export interface PackOptions<U extends Span> {
  /**
   * Cuts an oversized unit; `leadStart` (≤ `unit.start`) is where the first piece
   * should begin when the preceding group was carried into it; `after` (≥
   * `leadStart`) is the end of the last group made so far when the carried group
   * starts inside it (the overlapping last piece of a split unit, see `resume`):
   * the first piece must end beyond it (pass it on as {@link SplitOptions.after}).
   */
  split: (unit: U, leadStart: number, after: number) => Piece[];
  /** Extra condition to add `next` to the current group (size is checked already). Default: always. */
  join?: (group: readonly U[], next: U) => boolean;
  /** Whether the current group should be carried into the split of an oversized `next`. Default: never. */
  carry?: (group: readonly U[], next: U) => boolean;
  /**
   * Whether the current group, when `next` fits the budget on its own but not
   * together with the group, should be carried into a split of `next` (as for an
   * oversized unit, see `carry`) instead of becoming a group of its own: e.g. a
   * heading that should not be a chunk without its section's text. Default: never.
   */
  lead?: (group: readonly U[], next: U) => boolean;
  /**
   * Units (e.g. headings) that stay with what follows them: when `next` does not
   * fit with the current group (or is oversized and the group is not carried),
   * the group's trailing run of such units leaves it and starts the next group
   * instead of ending this one. Default: none.
   */
  keepWithNext?: (unit: U) => boolean;
  /**
   * Budget of a group (or piece) starting at `start`, when it differs from the
   * `budget` argument (e.g. a group starting with its own heading has no heading
   * prefix to leave room for). Default: `budget` everywhere.
   */
  budgetAt?: (start: number) => number;
  /**
   * Let the last piece of a split unit (when it has no prefix of its own) start
   * the next group, so following small units can join it. Default false.
   */
  resume?: boolean;
  /** Size of the span `[start, end)` in the budget's unit. Default `end - start` (characters). */
  size?: (start: number, end: number) => number;
}

/** A span-size function for {@link PackOptions.size} measuring `text` with `measure`. */
export function spanMeasurer(text: string, measure: SizeMeasure): (start: number, end: number) => number {
  const ruler = new Ruler(text, measure);
  return (start, end) => ruler.size(start, end);
}

/**
 * Greedily groups consecutive units while the group's span (first start to last
 * end) stays within `budget` (measured by `opts.size`) and `join` allows it. A unit larger than
 * the budget is cut by `split`; its pieces become groups of their own (with
 * `carry`, the preceding group is cut together with it; with `resume`, its last
 * piece may absorb following units).
 */
export function pack<U extends Span>(units: readonly U[], budget: number, opts: PackOptions<U>): Group<U>[] {
  const groups: Group<U>[] = [];
  const sizeOf = opts.size ?? ((start: number, end: number) => end - start);
  const budgetAt = opts.budgetAt ?? (() => budget);
  let cur: U[] = [];
  const flush = (): void => {
    const first = cur[0];
    const last = cur[cur.length - 1];
    if (first && last) groups.push({ start: first.start, end: last.end, units: cur });
    cur = [];
  };
  const fitsWith = (group: readonly U[], u: U): boolean => {
    const first = group[0];
    return (
      !first || (sizeOf(first.start, u.end) <= budgetAt(first.start) && (!opts.join || opts.join(group, u)))
    );
  };
  for (const u of units) {
    const oversized = sizeOf(u.start, u.end) > budgetAt(u.start);
    let fits = fitsWith(cur, u);
    const keep = opts.keepWithNext;
    if (keep && cur.length > 1 && (oversized ? !opts.carry?.(cur, u) : !fits)) {
      let k = cur.length;
      while (k > 0 && keep(cur[k - 1] as U)) k--;
      if (k > 0 && k < cur.length) {
        const moved = cur.slice(k);
        cur = cur.slice(0, k);
        flush();
        cur = moved;
        fits = fitsWith(cur, u);
      }
    }
    const first = cur[0];
    if (oversized || (!fits && first && opts.lead?.(cur, u))) {
      let lead = u.start;
      let carried: U[] = [];
      if (first && (!oversized || opts.carry?.(cur, u))) {
        lead = first.start;
        carried = cur;
        cur = [];
      } else {
        flush();
      }
      const pieces = opts.split(u, lead, Math.max(lead, groups[groups.length - 1]?.end ?? lead));
      const tail = pieces[pieces.length - 1];
      const resume =
        opts.resume && tail && tail.prefix === undefined && tail.start >= u.start ? tail : undefined;
      for (const piece of resume ? pieces.slice(0, -1) : pieces) {
        const units = piece.start < u.start ? [...carried, u] : [u];
        groups.push({ ...piece, units, piece: true });
      }
      if (resume) cur = [{ ...u, start: resume.start, end: resume.end }];
      continue;
    }
    if (!fits) flush();
    cur.push(u);
  }
  flush();
  return groups;
}

/**
 * Merges the last group into the one before it when it is shorter than
 * `minSize` and the merged span fits `budget` (both measured by `size`, default
 * characters). Never drops text.
 */
export function mergeShortTail<U>(
  groups: Group<U>[],
  budget: number,
  minSize: number,
  size: (start: number, end: number) => number = (start, end) => end - start,
): Group<U>[] {
  const last = groups[groups.length - 1];
  const prev = groups[groups.length - 2];
  if (!last || !prev || minSize <= 0) return groups;
  if (size(last.start, last.end) >= minSize || size(prev.start, last.end) > budget) return groups;
  const merged: Group<U> = { start: prev.start, end: last.end, units: [...prev.units, ...last.units] };
  return [...groups.slice(0, -2), merged];
}

const LINE_TYPES = new Set(["code_function", "code_class", "code_block", "message_group", "complete_thread"]);

/**
 * Guarantees INV-SIZE after a strategy ran: a chunk whose text (context prefix
 * included) measures over `limits.size` first gets its prefix shortened (see
 * {@link fitPrefix}); if the body alone is still too large it is re-cut with
 * {@link splitRange} (line boundaries for code and chat, prose boundaries
 * otherwise), each piece keeping the chunk's type, metadata and (fitted)
 * prefix. Chunks that fit are returned unchanged. Needed because token counts
 * are not additive: `prefix + "\n\n" + body` can measure more than its parts.
 */
export function enforceSize(text: string, chunks: Chunk[], limits: ChunkLimits): Chunk[] {
  const { measure, size } = limits;
  const out: Chunk[] = [];
  for (const c of chunks) {
    if (measure.count(c.text) <= size) {
      out.push(c);
      continue;
    }
    const body = text.slice(c.start, c.end);
    const prefix = fitPrefix(limits, c.contextPrefix, body);
    if (measure.count(withContext(prefix, body)) <= size) {
      out.push(rebuild(text, c, c, prefix));
      continue;
    }
    const budget = bodyBudget(limits, c.contextPrefix);
    const mode: SplitMode = LINE_TYPES.has(c.chunkType) ? "lines" : "prose";
    for (const span of splitRange(text, c.start, c.end, { size: budget, mode, measure })) {
      const piece = text.slice(span.start, span.end);
      out.push(rebuild(text, c, span, fitPrefix(limits, c.contextPrefix, piece)));
    }
  }
  return out;
}

function rebuild(text: string, c: Chunk, span: Span, prefix: string | undefined): Chunk {
  const chunk = makeChunk(text, span, c.chunkType, { prefix, metadata: { ...c.metadata } });
  return chunk;
}
