/**
 * Chunking stage entry points: pick a strategy (explicitly or `auto` by source
 * type) and split extracted documents into chunks.
 *
 * Sizes are in characters (UTF-16 code units of the extracted text) unless the
 * configuration sets `unit: "tokens"`.
 */
import type { ChunkingConfig, ChunkingStrategy } from "../config.js";
import type { Embedder } from "../embed/contract.js";
import { ConfigError } from "../errors.js";
import type { Chunk, ExtractedDocument, SourceType } from "../types.js";
import { chunkCode } from "./code.js";
import type { Chunker } from "./contract.js";
import { chunkMarkdown } from "./document.js";
import { chunkEmail } from "./email.js";
import { createEmbeddingSemanticChunker } from "./embedding-semantic.js";
import { chunkFixed } from "./fixed.js";
import { chunkSemantic } from "./semantic.js";
import { chunkSlack } from "./slack.js";
import { type ChunkFn, defineChunker } from "./spans.js";

// Re-exports: per-strategy factories and functions, and the helpers other stages may use
// (each is documented where it is defined).
export { chunkCode, createCodeChunker } from "./code.js";
export type { Chunker, ChunkerFactory } from "./contract.js";
export { chunkMarkdown, createDocumentChunker } from "./document.js";
export { chunkEmail, createEmailChunker, emailHeaderBlock, quotedSpans } from "./email.js";
export {
  chunkEmbeddingSemantic,
  cosine,
  createEmbeddingSemanticChunker,
  EMBEDDING_SEMANTIC_CHUNKER,
  type EmbeddingSemanticDeps,
  FIXED_FALLBACK_CHUNKER,
  percentile,
  semanticBreakpoints,
} from "./embedding-semantic.js";
export { chunkFixed, createFixedChunker } from "./fixed.js";
export {
  firstHeadingTitle,
  type MarkdownBlock,
  type MarkdownBlockKind,
  markdownHeadings,
  parseMarkdownBlocks,
} from "./markdown-blocks.js";
export { chunkSemantic, createSemanticChunker } from "./semantic.js";
export { type SentenceSpanOptions, sentenceBoundaries, sentenceSpans, splitSentences } from "./sentences.js";
export { chunkSlack, createSlackChunker, SLACK_MAX_GAP_SECONDS } from "./slack.js";
export { type ChunkLimits, type Span, validateChunkingConfig } from "./spans.js";

/** A concrete strategy (everything but `auto`). */
export type ConcreteStrategy = Exclude<ChunkingStrategy, "auto">;

/** Strategies that need nothing but the document. */
export type TextStrategy = Exclude<ConcreteStrategy, "embedding_semantic">;

/** Strategies that need nothing but the text (EMBEDDING_SEMANTIC also needs an embedder). */
const STRATEGIES: Record<TextStrategy, ChunkFn> = {
  fixed: chunkFixed,
  semantic: chunkSemantic,
  document: chunkMarkdown,
  email: chunkEmail,
  slack: chunkSlack,
  code: chunkCode,
};

/** The strategy `auto` uses for a source type. */
const AUTO: Record<SourceType, TextStrategy> = {
  markdown: "document",
  html: "document",
  docx: "document",
  email: "email",
  slack: "slack",
  code: "code",
  pdf: "semantic",
  text: "semantic",
};

/**
 * The strategy `auto` picks for a document: markdown/html/docx → `document`,
 * email → `email`, slack → `slack`, code → `code`, pdf/text (and anything
 * unknown) → `semantic`.
 */
export function strategyFor(doc: ExtractedDocument): TextStrategy {
  return AUTO[doc.metadata.type] ?? "semantic";
}

/** What strategies beyond the document need; only `embedding_semantic` uses it. */
export interface ChunkerDeps {
  /** Embedder for EMBEDDING_SEMANTIC's sentence vectors (the knowledge base's, so its cache and vectors are shared). */
  embedder?: Embedder;
  /** Sentences per embedding call for EMBEDDING_SEMANTIC. Default 32. */
  batchSize?: number;
}

/**
 * Creates a chunker for `strategy` (default: `config.strategy`; `auto` chooses
 * per document with {@link strategyFor} and never picks `embedding_semantic`).
 * Every chunker sets `chunkIndex` and `totalChunks`, orders chunks by start, and
 * adds `pageStart`/`pageEnd` metadata when the document has segments with a
 * numeric `page`. The `code` chunker (tree-sitter) and the `embedding_semantic`
 * chunker (which needs `deps.embedder`, see `createEmbeddingSemanticChunker`) are
 * asynchronous; the others are synchronous and ignore `deps`. `await` the result
 * of `chunk()` to handle all of them.
 *
 * @throws ConfigError immediately (before any text is read) when chunkSize ≤ 0,
 *   chunkOverlap < 0, chunkOverlap ≥ chunkSize, minChunkSize < 0, a value is not an
 *   integer, the strategy is unknown, or `embedding_semantic` has no `deps.embedder`.
 */
export function createChunker(
  config: ChunkingConfig,
  strategy?: ConcreteStrategy,
  deps?: ChunkerDeps,
): Chunker {
  const name: ChunkingStrategy = strategy ?? config.strategy;
  if (name === "embedding_semantic") {
    return createEmbeddingSemanticChunker(
      config,
      deps?.embedder ? { embedder: deps.embedder, batchSize: deps.batchSize } : undefined,
    );
  }
  if (name === "auto") {
    return defineChunker("auto", config, (doc, limits) => STRATEGIES[strategyFor(doc)](doc, limits));
  }
  const fn = STRATEGIES[name];
  if (!fn) {
    throw new ConfigError(
      `unknown chunking strategy "${String(name)}" (use auto, ${Object.keys(STRATEGIES).join(", ")}, embedding_semantic)`,
    );
  }
  return defineChunker(name, config, fn);
}

/**
 * Splits one extracted document with the configured strategy (see
 * {@link createChunker}; `deps` as there). A blank document yields `[]`.
 * @throws ConfigError for invalid chunking parameters.
 */
export async function chunkDocument(
  doc: ExtractedDocument,
  config: ChunkingConfig,
  deps?: ChunkerDeps,
): Promise<Chunk[]> {
  return createChunker(config, undefined, deps).chunk(doc);
}
