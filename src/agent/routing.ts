/**
 * Inline routing: decides whether an attached source is small enough to go into
 * the model's context whole ("inline") or must be indexed and retrieved from
 * ("retrieve").
 *
 * Units: every size and limit in this module is in characters, counted as
 * JavaScript string length (UTF-16 code units, the unit of the rest of the
 * library: chunk offsets, `chunkSize` with `unit: "chars"`).
 */
import { DEFAULT_INLINE_LIMIT, DEFAULT_KB } from "../config.js";
import { KnowledgeLayerError } from "../errors.js";
import { extractBytes, extractFile } from "../extract/index.js";
import type { IngestProgress, IngestSummary } from "../ingest/pipeline.js";
import type { KnowledgeLayer } from "../knowledge-layer.js";
import type { ExtractedDocument, SourceType } from "../types.js";

export { DEFAULT_INLINE_LIMIT } from "../config.js";

/** Separator placed between the texts of a multi-document source (an mbox, an email with attachments). */
export const INLINE_DOCUMENT_SEPARATOR = "\n\n";

/** Where a source goes: into the prompt whole, or into a knowledge base for retrieval. */
export type Route = "inline" | "retrieve";

/** A source to attach: a file (or Slack export folder) on disk, or content in memory (an upload). */
export type AttachInput =
  | { path: string }
  | {
      /** File name or pseudo-path: its extension chooses the extractor; it becomes the document URI. */
      name: string;
      bytes: Uint8Array;
      /** MIME type, used to detect the format when the name has no telling extension. */
      contentType?: string;
    };

/** Options for {@link attachSource}. */
export interface AttachOptions {
  /** Knowledge base the source is indexed into when it is too long to inline (default `default`). */
  kb?: string;
  /**
   * Largest text, in characters, returned inline (default 3,000). The source is
   * inlined when its text is at most this long. A non-negative integer, or
   * `Infinity` to always inline; 0 always retrieves.
   */
  inlineLimit?: number;
  /** Source type; detected from the name and content when omitted. */
  type?: SourceType;
  /** Progress of the ingest (retrieve route only). */
  onProgress?: (event: IngestProgress) => void;
}

/** The text of a small source, for the prompt. Nothing was indexed. */
export interface InlineAttachment {
  route: "inline";
  /** The documents' texts joined with {@link INLINE_DOCUMENT_SEPARATOR}. */
  text: string;
  /** The extracted documents (metadata, segments, warnings). */
  documents: ExtractedDocument[];
  /** `text.length`, in characters. */
  chars: number;
  /** The limit applied, in characters. */
  limit: number;
}

/** A large source, indexed into a knowledge base; its relevant parts come back through search. */
export interface RetrieveAttachment {
  route: "retrieve";
  /** What the ingest did (documents, chunks, embeddings, per-document problems). */
  summary: IngestSummary;
  /** Knowledge base the source was indexed into. */
  kb: string;
  /** URIs of the indexed documents (search results cite them as `source.uri`). */
  uris: string[];
  /** Length of the joined text, in characters (what would have been inlined). */
  chars: number;
  /** The limit applied, in characters. */
  limit: number;
}

/** The outcome of {@link attachSource}. */
export type AttachResult = InlineAttachment | RetrieveAttachment;

/**
 * Checks an inline limit.
 * @throws KnowledgeLayerError unless it is a non-negative integer or `Infinity`.
 */
export function checkInlineLimit(limit: number): void {
  if (!(limit === Number.POSITIVE_INFINITY || (Number.isInteger(limit) && limit >= 0))) {
    throw new KnowledgeLayerError(
      `inlineLimit must be a non-negative integer number of characters (got ${String(limit)})`,
    );
  }
}

/**
 * The route for a text: `inline` when it is at most `limit` characters long
 * (so exactly `limit` characters is still inline), else `retrieve`. Pure.
 * @param text the whole text of a source, in characters (`text.length`).
 * @param limit largest inline text, in characters.
 * @throws KnowledgeLayerError for an invalid limit or an empty (or whitespace-only) text.
 */
export function routeText(text: string, limit: number = DEFAULT_INLINE_LIMIT): Route {
  checkInlineLimit(limit);
  if (typeof text !== "string") {
    throw new KnowledgeLayerError(`the text to route must be a string (got ${typeof text})`);
  }
  if (text.trim() === "") throw new KnowledgeLayerError("the text to route is empty");
  return text.length <= limit ? "inline" : "retrieve";
}

/**
 * Attaches a source to an agent's conversation. The source is extracted with the
 * KB's extraction options; when its text (all its documents together, joined with
 * {@link INLINE_DOCUMENT_SEPARATOR}) is at most `inlineLimit` characters it is
 * returned for the prompt and nothing is indexed, else its documents are ingested
 * into the KB (chunk → embed → store, through {@link KnowledgeLayer.ingestDocuments}:
 * each document is its own ingest unit keyed by its URI, so attaching the same
 * content again is a no-op and changed content replaces the document's chunks).
 *
 * @throws KnowledgeLayerError for an unknown KB, an invalid limit, a source without
 *   text, or when no document of the source could be ingested (the reasons are named).
 * @throws ExtractionError when the source cannot be read or parsed ("file is empty",
 *   "unsupported file type (.png)", …).
 */
export async function attachSource(
  kl: KnowledgeLayer,
  input: AttachInput,
  options: AttachOptions = {},
): Promise<AttachResult> {
  const limit = options.inlineLimit ?? DEFAULT_INLINE_LIMIT;
  checkInlineLimit(limit);
  const kb = await kl.getKb(options.kb ?? DEFAULT_KB);
  const extraction = kb.config.extraction;
  let documents: ExtractedDocument[];
  let label: string;
  if ("path" in input) {
    if (typeof input.path !== "string" || input.path === "") {
      throw new KnowledgeLayerError("attachSource: path must be a non-empty string");
    }
    label = input.path;
    documents = await extractFile(input.path, options.type, extraction);
  } else {
    if (typeof input.name !== "string" || input.name === "") {
      throw new KnowledgeLayerError("attachSource: name must be a non-empty string");
    }
    if (!(input.bytes instanceof Uint8Array)) {
      throw new KnowledgeLayerError(`attachSource: ${input.name}: bytes must be a Uint8Array`);
    }
    label = input.name;
    documents = await extractBytes(input.name, input.bytes, options.type, extraction, input.contentType);
  }
  const withText = documents.filter((d) => d.text.trim() !== "");
  if (withText.length === 0) {
    throw new KnowledgeLayerError(`${label}: no text to attach (the extracted text is empty)`);
  }
  const text = withText.map((d) => d.text).join(INLINE_DOCUMENT_SEPARATOR);
  if (routeText(text, limit) === "inline") {
    return { route: "inline", text, documents: withText, chars: text.length, limit };
  }
  const summary = await kl.ingestDocuments(withText, { kb: kb.name, onProgress: options.onProgress });
  if (summary.added + summary.updated + summary.unchanged === 0) {
    const reasons = summary.errors.map((e) => `${e.path}: ${e.reason}`).join("; ");
    throw new KnowledgeLayerError(
      `${label}: nothing could be indexed into knowledge base "${kb.name}"${reasons ? `: ${reasons}` : ""}`,
    );
  }
  return {
    route: "retrieve",
    summary,
    kb: kb.name,
    uris: withText.map((d) => d.uri),
    chars: text.length,
    limit,
  };
}
