/**
 * Paging through a long text by UTF-16 offsets (the offsets chunks carry) without
 * ever cutting a surrogate pair: used by the MCP `get_document` tool, whose clients
 * follow `nextOffset` until the text ends.
 */
import { KnowledgeLayerError } from "./errors.js";

/** One page of a text: `text.slice(start, end)`. */
export interface TextPage {
  /** First UTF-16 offset of the page (the requested offset, moved back one unit when it fell inside a surrogate pair). */
  start: number;
  /** Offset just after the page; greater than `start` whenever `start` is before the end of the text. */
  end: number;
  /** The page's text: never starts or ends with half of a surrogate pair. */
  text: string;
  /** True when the page stops before the end of the text. */
  truncated: boolean;
  /** Where the next page starts (`end`), present only when `truncated`. */
  nextOffset?: number;
}

const isHigh = (code: number): boolean => code >= 0xd800 && code <= 0xdbff;
const isLow = (code: number): boolean => code >= 0xdc00 && code <= 0xdfff;

/** True when `text[i - 1]` and `text[i]` are the two halves of one surrogate pair (a cut at `i` would split it). */
function insidePair(text: string, i: number): boolean {
  return i > 0 && i < text.length && isHigh(text.charCodeAt(i - 1)) && isLow(text.charCodeAt(i));
}

/**
 * The page of `text` starting at UTF-16 `offset` with at most `limit` code units,
 * except that a surrogate pair is never split: an offset inside a pair starts the
 * page at the pair, and a limit that would end inside a pair ends before it — or,
 * when the pair is the page's first character, after it (so the page holds
 * `limit + 1` units). Every page before the end of the text therefore holds at
 * least one whole code point, and following `nextOffset` from 0 visits the whole
 * text, page after page, with no gap, overlap or empty page. An offset past the
 * end gives an empty, final page at `text.length`. Lone surrogates (malformed
 * text) count as one character each.
 * @throws KnowledgeLayerError naming `offset` or `limit` when offset is not an
 *   integer ≥ 0 or limit not an integer ≥ 1.
 */
export function textPage(text: string, offset: number, limit: number): TextPage {
  if (!Number.isInteger(offset) || offset < 0)
    throw new KnowledgeLayerError(`offset must be an integer of at least 0 (got ${offset})`);
  if (!Number.isInteger(limit) || limit < 1)
    throw new KnowledgeLayerError(`limit must be an integer of at least 1 (got ${limit})`);
  let start = Math.min(offset, text.length);
  if (insidePair(text, start)) start -= 1;
  let end = Math.min(text.length, start + limit);
  if (insidePair(text, end)) end = end - 1 > start ? end - 1 : end + 1;
  const truncated = end < text.length;
  return {
    start,
    end,
    text: text.slice(start, end),
    truncated,
    ...(truncated ? { nextOffset: end } : {}),
  };
}
