/**
 * The facade's document operations with more to them than one catalog call: listing and
 * counting with a filter, lookups scoped to a KB, and document deletion.
 */
import { KnowledgeLayerError } from "../errors.js";
import { removeDocuments } from "../ingest/pipeline.js";
import { type Filter, parseFilter } from "../retrieve/filter.js";
import type { DocumentRecord } from "../store/catalog.js";
import { collectionOf } from "../store/index.js";
import type { SqliteCatalogBackend } from "../store/sqlite-catalog.js";
import type { FacadeParts } from "./parts.js";
import type { DocumentDetails, DocumentListOptions } from "./types.js";

/** The body of `KnowledgeLayer.listDocuments` (documented there). */
export function listDocuments(
  backend: SqliteCatalogBackend,
  options: DocumentListOptions = {},
): Promise<DocumentRecord[]> {
  const filter = options.filter === undefined ? undefined : parseFilter(options.filter);
  return backend.documents.list(options.kb, { ...options, filter });
}

/** The body of `KnowledgeLayer.countDocuments` (documented there). */
export async function countDocuments(
  backend: SqliteCatalogBackend,
  options: { kb?: string; filter?: Filter } = {},
): Promise<number> {
  const filter = options.filter === undefined ? undefined : parseFilter(options.filter);
  return backend.documents.count(options.kb, filter);
}

/** The body of `KnowledgeLayer.getDocument` (documented there). */
export async function getDocument(
  backend: SqliteCatalogBackend,
  id: number,
  options: { kb?: string } = {},
): Promise<DocumentDetails | undefined> {
  if (!Number.isSafeInteger(id)) return undefined;
  const doc = await backend.documents.byId(id);
  if (!doc || (options.kb !== undefined && doc.kb !== options.kb)) return undefined;
  return doc;
}

/** The body of `KnowledgeLayer.getDocumentByUri` (documented there). */
export async function getDocumentByUri(
  backend: SqliteCatalogBackend,
  kb: string,
  uri: string,
): Promise<DocumentDetails | undefined> {
  const doc = await backend.documents.byUri(kb, uri);
  return doc && backend.documents.byId(doc.id);
}

/** The body of `KnowledgeLayer.deleteDocuments` (documented there). */
export async function deleteDocuments(
  parts: FacadeParts,
  kb: string,
  ids: readonly number[],
): Promise<number> {
  const record = await parts.backend.kbs.get(kb);
  if (!record) throw new KnowledgeLayerError(`unknown knowledge base "${kb}"`);
  if (ids.length === 0) return 0;
  return removeDocuments(
    {
      catalog: parts.catalog,
      bm25: parts.bm25,
      store: await parts.vectorStore(record.config),
      config: record.config,
      collection: collectionOf(record.config),
    },
    ids,
  );
}
