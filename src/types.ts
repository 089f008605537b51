/**
 * Shared data shapes that flow through the pipeline:
 * `extract → chunk → embed → store → retrieve → attribute`.
 *
 * Units: every offset and size in this file is in UTF-16 code units of the
 * extracted document text (JavaScript string indices), unless stated otherwise.
 */

/** The kinds of source the extractors recognise. */
export type SourceType = "markdown" | "text" | "html" | "pdf" | "docx" | "email" | "slack" | "code";

/**
 * Metadata describing where a document came from. Extractors fill the fields that
 * apply to their format; absent fields are left out (never the string "undefined").
 */
export interface DocumentMetadata {
  /** Path of the file as ingested (absolute). For Slack, the export folder. */
  path: string;
  /** Source type detected from the file. */
  type: SourceType;
  /** Human-readable title: Markdown H1, HTML <title>, PDF title, email subject, `#channel`. */
  title?: string;
  /** Programming language, for `type: "code"` (e.g. `typescript`, `python`). */
  language?: string;
  /** PDF: number of pages. */
  pageCount?: number;
  /** PDF: author from the document info. */
  author?: string;
  /** Email: sender, recipients, subject and ISO-8601 date. */
  from?: string;
  to?: string[];
  cc?: string[];
  subject?: string;
  date?: string;
  /** Email: the mailboxes of `From`, `To` and `Cc`, each `{ name?, address? }` (address lower-cased). */
  mailboxes?: Partial<Record<"from" | "to" | "cc", { name?: string; address?: string }[]>>;
  messageId?: string;
  /** Slack: channel name (without `#`). */
  channel?: string;
  /** Any further format-specific fields. Values must be JSON-serialisable. */
  [key: string]: unknown;
}

/**
 * A structural part of a document with its own metadata: a PDF page, a Slack
 * message, an email header block. `text.slice(start, end)` is the segment.
 * Segments are ordered by `start` and do not overlap.
 */
export interface Segment {
  start: number;
  end: number;
  /** e.g. PDF: `{ page: 3 }`; Slack: `{ user, ts, threadTs }`; email: `{ part: "header" }`. */
  metadata: Record<string, unknown>;
}

/**
 * The output of an extractor: plain text plus where it came from.
 * One file may yield several documents (a Slack export yields one per channel).
 */
export interface ExtractedDocument {
  /**
   * Stable identifier of this document, unique within a knowledge base:
   * the absolute file path, or `path#channel` for a Slack channel.
   */
  uri: string;
  /** The extracted text. Chunk spans index into this string. */
  text: string;
  metadata: DocumentMetadata;
  /** Optional structure (pages, messages) used by chunkers and attribution. */
  segments?: Segment[];
  /**
   * Problems that did not stop extraction but degrade the result, each a sentence
   * naming what was lost: `pages 3-5 have no text layer`, `attachment logo.png: unsupported type`.
   */
  warnings?: string[];
}

/** Chunk kinds produced by the strategies. */
export type ChunkType =
  | "text"
  | "paragraph"
  | "section"
  | "email_start"
  | "email_body"
  | "complete_thread"
  | "message_cluster"
  | "code_function"
  | "code_class"
  | "code_block"
  | "semantic";

/**
 * A vector a chunker computed for a chunk (EMBEDDING_SEMANTIC: the normalised
 * mean of its sentence vectors), so ingest need not embed the chunk again.
 * Ingest uses it only while `text` is still the chunk's text and the provider
 * and model are the knowledge base's; it never enters the embedding cache.
 */
export interface ChunkEmbedding {
  /** L2-normalised vector. */
  vector: Float32Array;
  /** Provider and model of the embedder whose vectors it was derived from. */
  provider: string;
  modelId: string;
  /** The chunk text the vector stands for (context prefix included; EMBEDDING_SEMANTIC has none). */
  text: string;
}

/**
 * A retrievable passage of a document.
 *
 * Invariants (tested for every strategy):
 * - `source.slice(start, end) === body(chunk)`, where `body` is `text` with
 *   `contextPrefix` (and the separator `"\n\n"`) removed from the front;
 * - the body is non-empty, not whitespace-only, and well-formed UTF-16.
 */
export interface Chunk {
  /** Text to embed and show: `contextPrefix + "\n\n" + body`, or just the body. */
  text: string;
  /** Start offset of the body in the extracted text (UTF-16 code units, inclusive). */
  start: number;
  /** End offset of the body in the extracted text (UTF-16 code units, exclusive). */
  end: number;
  /** 0-based position of this chunk within its document. */
  chunkIndex: number;
  /** Number of chunks the document was split into. */
  totalChunks: number;
  chunkType: ChunkType;
  /** Context prepended to the body (heading path, email header), if any. */
  contextPrefix?: string;
  /**
   * Chunk-level metadata: `headingPath` (DOCUMENT), `pageStart`/`pageEnd` (PDF),
   * `participants`, `users`, `tsStart`/`tsEnd`, `threadTs` (SLACK), `symbol` (CODE).
   */
  metadata: Record<string, unknown>;
  /** Precomputed embedding of `text`, when the chunker made one (see {@link ChunkEmbedding}). */
  embedding?: ChunkEmbedding;
}

/** Separator placed between a chunk's context prefix and its body. */
export const CONTEXT_SEPARATOR = "\n\n";

/** Returns the body of a chunk: its text without the prepended context. */
export function chunkBody(chunk: Pick<Chunk, "text" | "contextPrefix">): string {
  if (!chunk.contextPrefix) return chunk.text;
  return chunk.text.slice(chunk.contextPrefix.length + CONTEXT_SEPARATOR.length);
}

/** Builds a chunk's `text` from an optional context prefix and its body. */
export function withContext(prefix: string | undefined, body: string): string {
  return prefix ? `${prefix}${CONTEXT_SEPARATOR}${body}` : body;
}
