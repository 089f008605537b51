/**
 * Documents of a knowledge base as the HTTP API shows them: listing, one document
 * with its text, and deletion, all through the facade's document operations.
 */
import type { DocumentRecord, KbRecord, KnowledgeLayer } from "../knowledge-layer.js";
import type { Filter } from "../retrieve/filter.js";

/** A document as listed by the API. */
export interface DocumentView {
  id: number;
  /** Identifier within the KB: the upload's file name (`name#attachment/1/x` for a child document). */
  uri: string;
  /** Source the document came from (the uploaded file name). */
  path: string;
  type: string;
  title: string | null;
  chunks: number;
  /** The document's chunks have vectors. */
  embedded: boolean;
  contentHash: string;
  ingestedAt: string;
}

function toView(d: DocumentRecord): DocumentView {
  return {
    id: d.id,
    uri: d.uri,
    path: d.path,
    type: d.type,
    title: d.title,
    chunks: d.chunkCount,
    embedded: d.embedded,
    contentHash: d.contentHash,
    ingestedAt: d.ingestedAt,
  };
}

/**
 * A page of a KB's documents by id, with the number of documents the listing covers
 * (the KB's, or with a filter those with a matching chunk).
 * @throws FilterError for a malformed filter.
 */
export async function listDocuments(
  kl: KnowledgeLayer,
  kb: string,
  limit: number,
  offset: number,
  filter?: Filter,
): Promise<{ documents: DocumentView[]; total: number }> {
  const documents = (await kl.listDocuments({ kb, filter, limit, offset })).map(toView);
  return { documents, total: await kl.countDocuments({ kb, filter }) };
}

/** One document of a KB with its metadata and extracted text, or undefined when the KB has no such id. */
export async function getDocument(
  kl: KnowledgeLayer,
  kb: string,
  id: number,
): Promise<(DocumentView & { metadata: Record<string, unknown>; text: string }) | undefined> {
  const doc = await kl.getDocument(id, { kb });
  if (!doc) return undefined;
  return { ...toView(doc), metadata: doc.metadata, text: await kl.documentText(doc.id) };
}

/** Ids of a KB's documents that came from source `path` (an upload and its child documents). */
export async function documentIdsOfSource(
  kl: KnowledgeLayer,
  kb: string,
  path: string,
): Promise<{ id: number; uri: string }[]> {
  return (await kl.documentsOfSource(kb, path)).map((d) => ({ id: d.id, uri: d.uri }));
}

/**
 * Deletes documents of a KB with their chunks, BM25 postings and vectors
 * (`KnowledgeLayer.deleteDocuments`). Returns the number of documents deleted.
 */
export function deleteDocuments(kl: KnowledgeLayer, kb: KbRecord, ids: readonly number[]): Promise<number> {
  return kl.deleteDocuments(kb.name, ids);
}
