/**
 * Documents of a knowledge base as the HTTP API shows them: listing, one document
 * with its text, and deletion (catalog rows, BM25 postings and vectors).
 */
import type { KnowledgeLayer } from "../knowledge-layer.js";
import { decodeDocumentText, type KbRecord } from "../store/catalog.js";
import { collectionOf } from "../store/index.js";
import { SqliteVectorStore } from "../store/sqlite-vector-store.js";

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

interface DocumentRow {
  id: number;
  uri: string;
  path: string;
  type: string;
  title: string | null;
  chunk_count: number;
  embedded: number;
  content_hash: string;
  ingested_at: string;
}

const COLUMNS = "id, uri, path, type, title, chunk_count, embedded, content_hash, ingested_at";

function toView(r: DocumentRow): DocumentView {
  return {
    id: r.id,
    uri: r.uri,
    path: r.path,
    type: r.type,
    title: r.title,
    chunks: r.chunk_count,
    embedded: r.embedded === 1,
    contentHash: r.content_hash,
    ingestedAt: r.ingested_at,
  };
}

/** A page of a KB's documents by id, with the KB's total document count. */
export function listDocuments(
  kl: KnowledgeLayer,
  kb: string,
  limit: number,
  offset: number,
): { documents: DocumentView[]; total: number } {
  const rows = kl.db
    .prepare(`SELECT ${COLUMNS} FROM documents WHERE kb = ? ORDER BY id LIMIT ? OFFSET ?`)
    .all(kb, limit, offset) as DocumentRow[];
  const { n } = kl.db.prepare("SELECT count(*) AS n FROM documents WHERE kb = ?").get(kb) as { n: number };
  return { documents: rows.map(toView), total: n };
}

/** One document of a KB with its metadata and extracted text, or undefined when the KB has no such id. */
export function getDocument(
  kl: KnowledgeLayer,
  kb: string,
  id: number,
): (DocumentView & { metadata: Record<string, unknown>; text: string }) | undefined {
  const row = kl.db
    .prepare(`SELECT ${COLUMNS}, metadata, text FROM documents WHERE kb = ? AND id = ?`)
    .get(kb, id) as (DocumentRow & { metadata: string; text: string | Buffer }) | undefined;
  if (!row) return undefined;
  return { ...toView(row), metadata: JSON.parse(row.metadata), text: decodeDocumentText(row.text) };
}

/** Ids of a KB's documents that came from source `path` (an upload and its child documents). */
export function documentIdsOfSource(
  kl: KnowledgeLayer,
  kb: string,
  path: string,
): { id: number; uri: string }[] {
  return kl.db
    .prepare("SELECT id, uri FROM documents WHERE kb = ? AND (uri = ? OR substr(uri, 1, ?) = ?)")
    .all(kb, path, path.length + 1, `${path}#`) as { id: number; uri: string }[];
}

/**
 * Deletes documents of a KB with their chunks, BM25 postings and vectors. With the
 * embedded store everything is one transaction; a server store's vectors are
 * deleted after the catalog commit (a failure there leaves orphan vectors, which
 * search ignores because their chunks are gone). Ids that are not documents of the
 * KB are ignored. Returns the number of documents deleted.
 */
export async function deleteDocuments(
  kl: KnowledgeLayer,
  kb: KbRecord,
  ids: readonly number[],
): Promise<number> {
  if (ids.length === 0) return 0;
  const store = await kl.vectorStore(kb.config);
  const collection = collectionOf(kb.config);
  const embedded = store instanceof SqliteVectorStore ? store : undefined;
  const stale: string[] = [];
  let deleted = 0;
  const owned = kl.db.prepare("SELECT 1 FROM documents WHERE id = ? AND kb = ?").pluck();
  kl.db
    .transaction(() => {
      for (const id of ids) {
        if (owned.get(id, kb.name) === undefined) continue;
        const chunkIds = kl.catalog.chunkIds(id).map(String);
        kl.bm25.removeDocument(id, kb.config.retrieval.analyzer);
        kl.catalog.deleteDocument(id);
        if (embedded) {
          if (chunkIds.length > 0) embedded.deleteSync(collection, chunkIds);
        } else stale.push(...chunkIds);
        deleted++;
      }
    })
    .immediate();
  if (stale.length > 0) {
    try {
      if (await store.info(collection)) await store.delete(collection, stale);
    } catch {
      // Orphan vectors are harmless: search only returns chunks the catalog has.
    }
  }
  return deleted;
}
