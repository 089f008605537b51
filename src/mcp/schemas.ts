/**
 * Input and output schemas (zod 4) of the MCP tools. The SDK turns them into the
 * JSON Schemas clients see in `tools/list`, validates arguments against the input
 * schemas (a violation is a tool result with `isError`) and `structuredContent`
 * against the output schemas. Output objects are closed (`additionalProperties:
 * false` in JSON Schema) except attribution and document metadata, which grow with
 * new source types.
 */
import * as z from "zod";
import { RETRIEVAL_MODES, type RetrievalMode, VECTOR_STORE_TYPES, VECTOR_STORES } from "../config.js";

/** Retrieval modes accepted by `search_knowledge` (the `vector` alias of the CLI is not offered). */
export const MCP_SEARCH_MODES = RETRIEVAL_MODES as readonly RetrievalMode[] as readonly [
  RetrievalMode,
  ...RetrievalMode[],
];

/** Largest `top_k` of `search_knowledge`. */
export const MCP_MAX_TOP_K = 50;

/** Default `top_k` of `search_knowledge`. */
export const MCP_DEFAULT_TOP_K = 5;

/** Most characters of document text `get_document` returns in one call (and its default `limit`). */
export const MCP_MAX_DOCUMENT_CHARS = 200_000;

/** `search_knowledge` arguments. */
export const searchInput = {
  query: z
    .string()
    .max(10_000)
    .describe("The question or keywords to look up, in natural language (required)."),
  kbs: z
    .array(z.string().min(1))
    .max(50)
    .optional()
    .describe(
      'Knowledge bases to search (see list_knowledge_bases); default ["default"]. Several are searched concurrently and fused by rank.',
    ),
  top_k: z
    .number()
    .int()
    .min(1)
    .max(MCP_MAX_TOP_K)
    .optional()
    .describe(`Number of passages to return, 1–${MCP_MAX_TOP_K} (default ${MCP_DEFAULT_TOP_K}).`),
  mode: z
    .enum(MCP_SEARCH_MODES)
    .optional()
    .describe(
      "Retrieval strategy; default each knowledge base's own (normally hybrid_rerank). keyword = BM25 only (exact terms, identifiers); vector_only = semantic similarity; hybrid = both fused; hybrid_rerank = hybrid then reranked; advanced = query expansion + hybrid_rerank.",
    ),
  filter: z
    .record(z.string(), z.unknown())
    .optional()
    .describe(
      'Metadata filter: only passages whose source matches are searched, e.g. {"type": "email", "from": {"$in": ["a@x.com"]}, "date": {"$gte": "2024-03-01"}}. Operators: equality, $eq $ne $in $nin $lt $lte $gt $gte (numbers, ISO dates) $prefix $contains (array membership, e.g. tags) $exists, and $and $or $not. Fields: the source attributes of a result (type, path, uri, title, author, from, to, subject, date, channel, user, language, page, headingPath, tags, kb…) and user metadata given at ingest.',
    ),
};

/**
 * Where a passage came from. The fields present depend on the source type (see
 * the README's `kl search --json` shape); unknown future fields are allowed.
 */
export const attributionSchema = z.looseObject({
  uri: z.string().describe("Document URI: the absolute file path, or `file#…` for a part of a file."),
  path: z.string().describe("Absolute path of the source file or folder."),
  type: z.string().describe("Source type: markdown, text, html, pdf, docx, email, slack, code."),
  title: z.string().optional(),
  author: z.string().optional(),
  link: z.string().optional(),
  lineStart: z.number().optional(),
  lineEnd: z.number().optional(),
  parentUri: z.string().optional(),
  attachmentName: z.string().optional(),
  page: z.number().optional().describe("PDF: first page (1-based) of the passage."),
  pageEnd: z.number().optional(),
  headingPath: z.array(z.string()).optional(),
  headings: z
    .array(z.array(z.string()))
    .optional()
    .describe("Heading path of every section the passage covers, when it covers several."),
  from: z.string().optional(),
  to: z.array(z.string()).optional(),
  cc: z.array(z.string()).optional(),
  subject: z.string().optional(),
  date: z.string().optional(),
  threadId: z.string().optional(),
  channel: z.string().optional(),
  user: z.string().optional(),
  participants: z.array(z.string()).optional(),
  ts: z.string().optional(),
  tsEnd: z.string().optional(),
  language: z.string().optional(),
  symbol: z.string().optional(),
  tags: z.array(z.string()).optional().describe("Front matter tags and tags given at ingest."),
  metadata: z
    .record(z.string(), z.union([z.string(), z.number(), z.boolean()]))
    .optional()
    .describe("User metadata given at ingest."),
});

/** One attributed passage of `search_knowledge`. */
export const searchResultSchema = z.object({
  rank: z.number().int().describe("1-based rank."),
  score: z
    .number()
    .describe(
      "The KB-level score: [0, 1] for hybrid/hybrid_rerank/advanced, cosine for vector_only, raw BM25 for keyword.",
    ),
  kb: z.string(),
  text: z.string().describe("The passage as indexed (heading context prefix + body)."),
  citation: z.string().describe("One-line citation to show the user."),
  source: attributionSchema,
  chunk: z.object({
    index: z.number().int().describe("0-based chunk index in the document."),
    total: z.number().int(),
    start: z.number().int().describe("UTF-16 offset of the chunk body in the document text (get_document)."),
    end: z.number().int(),
  }),
  belowThreshold: z.boolean().optional(),
});

/** `search_knowledge` structured output. */
export const searchOutput = {
  query: z.string(),
  mode: z.string().describe("The retrieval mode that ran."),
  kbs: z.array(z.string()),
  results: z.array(searchResultSchema),
  warnings: z.array(z.string()),
  tookMs: z.number(),
};

/** One knowledge base of `list_knowledge_bases`. */
export const knowledgeBaseSchema = z.object({
  name: z.string(),
  documents: z.number().int(),
  chunks: z.number().int(),
  embeddedDocuments: z.number().int().describe("Documents with vectors (the rest are keyword-only)."),
  documentsByType: z.record(z.string(), z.number().int()),
  createdAt: z.string(),
  chunking: z.object({ strategy: z.string(), chunkSize: z.number(), unit: z.string() }),
  embedding: z.string().describe("provider:model"),
  vectorStore: z
    .string()
    .describe(
      `Vector store type: ${VECTOR_STORE_TYPES.map((t) => (VECTOR_STORES[t].offline ? `${t} (${VECTOR_STORES[t].summary})` : t)).join(", ")}.`,
    ),
  retrieval: z.object({
    mode: z.string().describe("Default retrieval mode of search_knowledge for this KB."),
    topK: z.number().int(),
    reranker: z.string(),
    analyzer: z.string(),
  }),
});

/** `list_knowledge_bases` structured output. */
export const listOutput = { knowledgeBases: z.array(knowledgeBaseSchema) };

/** `get_document` arguments. */
export const getDocumentInput = {
  uri: z
    .string()
    .min(1)
    .describe(
      "Document URI as returned in search results (source.uri); a source file path is accepted when it yields one document.",
    ),
  kb: z.string().min(1).optional().describe('Knowledge base (default "default").'),
  offset: z
    .number()
    .int()
    .min(0)
    .optional()
    .describe(
      "First character (UTF-16 offset, as chunk.start) of the text to return; default 0. An offset inside a surrogate pair starts at the pair.",
    ),
  limit: z
    .number()
    .int()
    .min(1)
    .max(MCP_MAX_DOCUMENT_CHARS)
    .optional()
    .describe(
      `Most characters (UTF-16 code units) to return, 1–${MCP_MAX_DOCUMENT_CHARS} (default ${MCP_MAX_DOCUMENT_CHARS}); a surrogate pair is never split, so a page ends before one that would be cut, or holds it whole when it is the page's first character.`,
    ),
};

/** `get_document` structured output. */
export const getDocumentOutput = {
  kb: z.string(),
  uri: z.string(),
  path: z.string(),
  type: z.string(),
  title: z.string().optional(),
  metadata: z.looseObject({}).describe("Extracted source metadata (author, pages, email headers, …)."),
  chunkCount: z.number().int(),
  embedded: z.boolean(),
  ingestedAt: z.string(),
  totalChars: z.number().int().describe("Length of the whole extracted text."),
  offset: z
    .number()
    .int()
    .describe("Where text starts: the requested offset, one less when that fell inside a surrogate pair."),
  text: z.string().describe("text[offset, offset + returned length) of the extracted text."),
  truncated: z.boolean().describe("True when text stops before the end of the document."),
  nextOffset: z
    .number()
    .int()
    .optional()
    .describe("Offset to pass to read on, when truncated; always greater than offset."),
};

/** `ingest_path` arguments. */
export const ingestInput = {
  path: z
    .string()
    .min(1)
    .describe(
      "File or folder to ingest; relative paths are resolved against the server's ingest root, and the path must lie inside it.",
    ),
  kb: z.string().min(1).optional().describe('Knowledge base to ingest into (default "default"; must exist).'),
};

const issueSchema = z.object({ path: z.string(), reason: z.string() });

/** `ingest_path` structured output: the ingest summary, lists capped. */
export const ingestOutput = {
  kb: z.string(),
  path: z.string().describe("The real path ingested (symbolic links resolved)."),
  files: z.number().int(),
  added: z.number().int(),
  updated: z.number().int(),
  unchanged: z.number().int(),
  documents: z.number().int(),
  chunks: z.number().int(),
  removed: z.array(z.string()),
  errors: z.array(issueSchema),
  skipped: z.array(issueSchema),
  warnings: z.array(issueSchema),
  omitted: z
    .object({
      removed: z.number().int(),
      errors: z.number().int(),
      skipped: z.number().int(),
      warnings: z.number().int(),
    })
    .describe("Entries left out of each list (each list shows at most 50)."),
  embedded: z.object({ computed: z.number().int(), cached: z.number().int(), reused: z.number().int() }),
  durationMs: z.number(),
};
