/**
 * FIXED strategy: windows of at most `chunkSize` characters cut at the best
 * nearby boundary (sentence end, else whitespace, else a grapheme boundary),
 * with `chunkOverlap` characters of overlap and short-tail rebalancing.
 */
import type { ChunkingConfig } from "../config.js";
import type { Chunk, ExtractedDocument } from "../types.js";
import type { Chunker } from "./contract.js";
import { type ChunkLimits, defineChunker, makeChunk } from "./spans.js";
import { splitRange } from "./split.js";

/**
 * Splits `doc.text` into FIXED chunks (chunkType `text`, empty metadata).
 *
 * Each chunk is at most `limits.size` (characters, or tokens when configured), cut at a paragraph break or
 * sentence end in the back half of the window, else the last line break or
 * whitespace, else at a grapheme (never surrogate-pair) boundary. Consecutive
 * chunks share up to `limits.overlap` characters, the overlap starting at a
 * sentence or word start. A final chunk shorter than `limits.minSize` is avoided
 * by cutting the previous chunk earlier. Blank documents give no chunks.
 */
export function chunkFixed(doc: ExtractedDocument, limits: ChunkLimits): Chunk[] {
  return splitRange(doc.text, 0, doc.text.length, {
    size: limits.size,
    overlap: limits.overlap,
    minSize: limits.minSize,
    mode: "prose",
    measure: limits.measure,
  }).map((span) => makeChunk(doc.text, span, "text"));
}

/**
 * Creates the FIXED chunker (see {@link chunkFixed}).
 * @throws ConfigError when chunkSize ≤ 0, chunkOverlap < 0, chunkOverlap ≥ chunkSize
 *   or minChunkSize < 0 (checked here, before any text is read).
 */
export function createFixedChunker(config: ChunkingConfig): Chunker {
  return defineChunker("fixed", config, chunkFixed);
}
