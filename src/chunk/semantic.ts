/**
 * SEMANTIC strategy (paragraph-aware): paragraphs separated by blank lines are
 * grouped up to `chunkSize`; oversized paragraphs are cut FIXED-style.
 */
import type { ChunkingConfig } from "../config.js";
import type { Chunk, ExtractedDocument } from "../types.js";
import type { Chunker } from "./contract.js";
import { CHAR_MEASURE, type SizeMeasure } from "./measure.js";
import { type ChunkLimits, defineChunker, makeChunk, type Span } from "./spans.js";
import { type Group, mergeShortTail, pack, paragraphSpans, spanMeasurer, splitRange } from "./split.js";

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
  opts: { overlap?: number; minSize?: number; measure?: SizeMeasure } = {},
): Group<Span>[] {
  const measure = opts.measure ?? CHAR_MEASURE;
  const size = spanMeasurer(text, measure);
  const units = paragraphSpans(text, start, end);
  const groups = pack(units, budget, {
    size,
    split: (u, lead) =>
      splitRange(text, lead, u.end, {
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
 * Splits `doc.text` into SEMANTIC chunks (chunkType `paragraph`, empty metadata):
 * blank-line separated paragraphs (LF or CRLF) grouped up to `limits.size`
 * characters; see {@link paragraphGroups}. Blank documents give no chunks.
 */
export function chunkSemantic(doc: ExtractedDocument, limits: ChunkLimits): Chunk[] {
  return paragraphGroups(doc.text, 0, doc.text.length, limits.size, limits).map((g) =>
    makeChunk(doc.text, g, "paragraph"),
  );
}

/**
 * Creates the SEMANTIC chunker (see {@link chunkSemantic}).
 * @throws ConfigError for invalid chunking parameters.
 */
export function createSemanticChunker(config: ChunkingConfig): Chunker {
  return defineChunker("semantic", config, chunkSemantic);
}
