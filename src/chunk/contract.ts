import type { ChunkingConfig } from "../config.js";
import type { Chunk, ExtractedDocument } from "../types.js";
import type { ChunkLimits } from "./spans.js";

/**
 * The chunker seam: splits one extracted document into chunks.
 *
 * Every implementation must keep the invariants documented on {@link Chunk}
 * (exact body spans, no empty chunks, well-formed UTF-16) and cover every
 * non-whitespace character of the document; `test/chunk/chunk-conformance.test.ts`
 * runs the same checks against every strategy.
 */
export interface Chunker {
  /** Strategy name, e.g. `fixed`, `document`. */
  readonly name: string;
  /** The validated limits (sizes, unit, strategy options) this chunker applies. */
  readonly limits: ChunkLimits;
  /** Splits `doc.text`. `chunkIndex`/`totalChunks` are filled in. */
  chunk(doc: ExtractedDocument): Chunk[] | Promise<Chunk[]>;
}

/** Builds a chunker from configuration. @throws ConfigError for invalid parameters. */
export type ChunkerFactory = (config: ChunkingConfig) => Chunker;
