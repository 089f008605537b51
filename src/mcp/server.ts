/**
 * The knowledge-layer MCP server, independent of its transport: `kl mcp` connects
 * it to stdio or to streamable HTTP (see `stdio.ts`, `http.ts`); tests may connect
 * it to any transport.
 */

import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { DEFAULT_KB } from "../config.js";
import { KnowledgeLayerError } from "../errors.js";
import type { IngestSummary } from "../ingest/pipeline.js";
import type { DocumentDetails, KnowledgeLayer, SearchResponse } from "../knowledge-layer.js";
import type { Filter } from "../retrieve/filter.js";
import { errorText } from "../secrets.js";
import { textPage } from "../text-page.js";
import { formatIngestText, formatSearchText } from "./format.js";
import { checkIngestPath } from "./ingest-root.js";
import {
  getDocumentInput,
  getDocumentOutput,
  ingestInput,
  ingestOutput,
  listOutput,
  MCP_DEFAULT_TOP_K,
  MCP_MAX_DOCUMENT_CHARS,
  searchInput,
  searchOutput,
} from "./schemas.js";

/** Options of {@link createKnowledgeServer}. */
export interface KnowledgeServerOptions {
  /**
   * Register the `ingest_path` tool, which writes to the knowledge bases. `kl mcp`
   * sets it only on stdio with `--allow-ingest`; never expose it over HTTP.
   */
  allowIngest?: boolean;
  /**
   * Real path (see `resolveIngestRoot`) that `ingest_path` is confined to; relative
   * paths are resolved against it. Required when `allowIngest` is set.
   */
  ingestRoot?: string;
  /** Server version reported to clients (default 0.1.0). */
  version?: string;
  /** Where tool failures that are not user errors are logged (default stderr; never stdout). */
  log?: (message: string) => void;
}

/** Names of the tools the server registers (`ingest_path` only with `allowIngest`). */
export const MCP_TOOLS = ["search_knowledge", "list_knowledge_bases", "get_document", "ingest_path"] as const;

/** Most entries of each list (errors, skipped, …) in an `ingest_path` result. */
const MAX_LISTED = 50;

const INSTRUCTIONS = `This server retrieves attributed passages from local knowledge bases (documents ingested with knowledge-layer: Markdown, PDF, email, Slack, HTML, DOCX, code).
Use search_knowledge to find passages answering a question and cite each passage you use by its citation (file, section or page). list_knowledge_bases shows the knowledge bases and what they hold; get_document returns a document's full extracted text, paged with offset/limit.`;

/**
 * Builds an MCP server exposing `kl`'s knowledge bases through tools:
 * `search_knowledge`, `list_knowledge_bases`, `get_document` and, with
 * `allowIngest`, `ingest_path`. Every tool reports bad input, unknown knowledge
 * bases and failures as a result with `isError` and a message, never as a
 * protocol error. The caller owns `kl` (one instance may back several servers,
 * e.g. one per HTTP request) and closes it.
 * @throws KnowledgeLayerError when `allowIngest` is set without `ingestRoot`.
 */
export function createKnowledgeServer(kl: KnowledgeLayer, options: KnowledgeServerOptions = {}): McpServer {
  if (options.allowIngest && !options.ingestRoot)
    throw new KnowledgeLayerError("createKnowledgeServer: allowIngest needs an ingestRoot");
  const log = options.log ?? ((message: string) => process.stderr.write(`kl mcp: ${message}\n`));
  const server = new McpServer(
    { name: "knowledge-layer", title: "knowledge-layer", version: options.version ?? "0.1.0" },
    { instructions: INSTRUCTIONS },
  );

  /** Runs a tool body, turning any failure into an `isError` result. */
  const guarded = async (tool: string, body: () => Promise<CallToolResult>): Promise<CallToolResult> => {
    try {
      return await body();
    } catch (err) {
      if (!(err instanceof KnowledgeLayerError)) log(`${tool} failed: ${errorText(err, true)}`);
      return errorResult(errorText(err));
    }
  };

  server.registerTool(
    "search_knowledge",
    {
      title: "Search knowledge bases",
      description:
        "Retrieve the passages of the ingested documents that best answer a question, ranked, each with its citation and source (file path, title, section, page, line, email or Slack metadata). Returns numbered passages as text and the same as structured content.",
      inputSchema: searchInput,
      outputSchema: searchOutput,
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    (args) =>
      guarded("search_knowledge", async () => {
        const response = await kl.search(args.query, {
          kbs: args.kbs,
          topK: args.top_k ?? MCP_DEFAULT_TOP_K,
          mode: args.mode,
          filter: args.filter as Filter | undefined,
        });
        return {
          content: [{ type: "text", text: formatSearchText(response) }],
          structuredContent: searchStructured(response),
        };
      }),
  );

  server.registerTool(
    "list_knowledge_bases",
    {
      title: "List knowledge bases",
      description:
        "List the knowledge bases with their document and chunk counts and key configuration (chunking strategy, embedding provider:model, vector store, default retrieval mode).",
      outputSchema: listOutput,
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    () =>
      guarded("list_knowledge_bases", async () => {
        const knowledgeBases = (await kl.listKbs()).map((k) => {
          const c = k.config;
          return {
            name: k.name,
            documents: k.counts.documents,
            chunks: k.counts.chunks,
            embeddedDocuments: k.counts.embeddedDocuments,
            documentsByType: k.counts.documentsByType,
            createdAt: k.createdAt,
            chunking: {
              strategy: c.chunking.strategy,
              chunkSize: c.chunking.chunkSize,
              unit: c.chunking.unit ?? "chars",
            },
            embedding: `${c.embedding.provider}:${c.embedding.model}`,
            vectorStore: c.vectorStore.type,
            retrieval: {
              mode: c.retrieval.mode,
              topK: c.retrieval.topK,
              reranker: c.retrieval.reranker.type,
              analyzer: c.retrieval.analyzer,
            },
          };
        });
        const lines = [`${knowledgeBases.length} knowledge base${knowledgeBases.length === 1 ? "" : "s"}:`];
        for (const k of knowledgeBases) {
          const types = Object.entries(k.documentsByType)
            .map(([t, n]) => `${n} ${t}`)
            .join(", ");
          lines.push(
            `- ${k.name}: ${k.documents} documents${types ? ` (${types})` : ""}, ${k.chunks} chunks; ` +
              `chunking ${k.chunking.strategy}/${k.chunking.chunkSize} ${k.chunking.unit}, embedding ${k.embedding}, ` +
              `store ${k.vectorStore}, retrieval ${k.retrieval.mode}`,
          );
        }
        return { content: [{ type: "text", text: lines.join("\n") }], structuredContent: { knowledgeBases } };
      }),
  );

  server.registerTool(
    "get_document",
    {
      title: "Get a document",
      description: `Return an ingested document's metadata and its full extracted text (the text chunk offsets refer to). At most ${MCP_MAX_DOCUMENT_CHARS.toLocaleString("en")} characters per call: page through longer documents with offset and limit.`,
      inputSchema: getDocumentInput,
      outputSchema: getDocumentOutput,
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    (args) =>
      guarded("get_document", async () => {
        const kbName = (await kl.getKb(args.kb ?? DEFAULT_KB)).name;
        const doc = await findDocument(kl, kbName, args.uri);
        const full = await kl.documentText(doc.id);
        // Never splits a surrogate pair, and every page before the end holds at least one character.
        const {
          start: offset,
          end,
          text,
          truncated,
        } = textPage(full, args.offset ?? 0, args.limit ?? MCP_MAX_DOCUMENT_CHARS);
        const metadata = doc.chunkCount > 0 ? doc.metadata : {};
        const structured: Record<string, unknown> = {
          kb: kbName,
          uri: doc.uri,
          path: doc.path,
          type: doc.type,
          ...(doc.title ? { title: doc.title } : {}),
          metadata,
          chunkCount: doc.chunkCount,
          embedded: doc.embedded,
          ingestedAt: doc.ingestedAt,
          totalChars: full.length,
          offset,
          text,
          truncated,
          ...(truncated ? { nextOffset: end } : {}),
        };
        const header = [
          `Document ${doc.uri} (knowledge base "${kbName}")`,
          `type ${doc.type}${doc.title ? ` · title "${doc.title}"` : ""} · ${doc.chunkCount} chunks · ${full.length} characters · ingested ${doc.ingestedAt}`,
          `metadata: ${JSON.stringify(metadata)}`,
        ];
        const range = offset > 0 || truncated ? `characters ${offset}–${end} of ${full.length}` : "full text";
        const content: CallToolResult["content"] = [
          { type: "text", text: `${header.join("\n")}\n\n--- ${range} ---\n${text}` },
        ];
        if (truncated) {
          content.push({
            type: "text",
            text: `[Truncated: showed characters ${offset}–${end} of ${full.length}. Call get_document again with offset ${end} to read on.]`,
          });
        }
        return { content, structuredContent: structured };
      }),
  );

  if (options.allowIngest && options.ingestRoot) {
    const root = options.ingestRoot;
    let queue: Promise<unknown> = Promise.resolve();
    server.registerTool(
      "ingest_path",
      {
        title: "Ingest a file or folder",
        description: `Extract, chunk, embed and store a file or folder (recursively, .gitignore respected) into a knowledge base; unchanged files are skipped, changed ones replaced, files gone from an ingested folder removed. Only paths inside ${root} are accepted. Returns the ingest summary. Sends progress notifications when the request carries a progress token.`,
        inputSchema: ingestInput,
        outputSchema: ingestOutput,
        annotations: {
          readOnlyHint: false,
          destructiveHint: false,
          idempotentHint: true,
          openWorldHint: false,
        },
      },
      (args, extra) =>
        guarded("ingest_path", async () => {
          const path = await checkIngestPath(args.path, root);
          const kbName = (await kl.getKb(args.kb ?? DEFAULT_KB)).name;
          const token = extra._meta?.progressToken;
          let last = 0;
          const run = async (): Promise<IngestSummary> =>
            kl.ingest([path], {
              kb: kbName,
              onProgress: (event) => {
                if (token === undefined || event.phase !== "source") return;
                const now = Date.now();
                if (now - last < 250 && event.done !== event.total) return;
                last = now;
                void extra
                  .sendNotification({
                    method: "notifications/progress",
                    params: {
                      progressToken: token,
                      progress: event.done,
                      total: event.total,
                      message: event.path,
                    },
                  })
                  .catch(() => {});
              },
            });
          // One ingest at a time: concurrent calls wait for each other.
          const result = queue.then(run, run);
          queue = result.catch(() => {});
          const summary = await result;
          const ingested = summary.added + summary.updated + summary.unchanged;
          const failed = ingested === 0 && (summary.errors.length > 0 || summary.skipped.length > 0);
          return {
            content: [
              {
                type: "text",
                text: `${failed ? "Nothing could be ingested.\n" : ""}${formatIngestText(summary, path, MAX_LISTED)}`,
              },
            ],
            structuredContent: ingestStructured(summary, path),
            ...(failed ? { isError: true } : {}),
          };
        }),
    );
  }
  return server;
}

/** A tool result reporting a failure. */
function errorResult(message: string): CallToolResult {
  return { content: [{ type: "text", text: `Error: ${message}` }], isError: true };
}

/** The structured content of `search_knowledge`: each result's rank, score, kb, text, citation, source, chunk. */
function searchStructured(r: SearchResponse): Record<string, unknown> {
  return {
    query: r.query,
    mode: r.mode,
    kbs: r.kbs,
    results: r.results.map((x) => ({
      rank: x.rank,
      score: x.score,
      kb: x.kb,
      text: x.text,
      citation: x.citation,
      source: x.source,
      chunk: { index: x.chunk.index, total: x.chunk.total, start: x.chunk.start, end: x.chunk.end },
      ...(x.belowThreshold ? { belowThreshold: true } : {}),
    })),
    warnings: r.warnings,
    tookMs: r.tookMs,
  };
}

/** The structured content of `ingest_path`: the summary with each list capped at {@link MAX_LISTED}. */
function ingestStructured(s: IngestSummary, path: string): Record<string, unknown> {
  const cap = <T>(items: T[]): T[] => items.slice(0, MAX_LISTED);
  const over = (items: unknown[]): number => Math.max(0, items.length - MAX_LISTED);
  return {
    kb: s.kb,
    path,
    files: s.files,
    added: s.added,
    updated: s.updated,
    unchanged: s.unchanged,
    documents: s.documents,
    chunks: s.chunks,
    removed: cap(s.removed),
    errors: cap(s.errors).map(({ path, reason }) => ({ path, reason })),
    skipped: cap(s.skipped).map(({ path, reason }) => ({ path, reason })),
    warnings: cap(s.warnings).map(({ path, reason }) => ({ path, reason })),
    omitted: {
      removed: over(s.removed),
      errors: over(s.errors),
      skipped: over(s.skipped),
      warnings: over(s.warnings),
    },
    embedded: { computed: s.embedded.computed, cached: s.embedded.cached, reused: s.embedded.reused },
    durationMs: s.durationMs,
  };
}

/**
 * A document of a KB by URI, else by source path when that path yields exactly one document.
 * @throws KnowledgeLayerError naming the KB when there is none (or several, listing their URIs).
 */
async function findDocument(kl: KnowledgeLayer, kb: string, uri: string): Promise<DocumentDetails> {
  const doc = await kl.getDocumentByUri(kb, uri);
  if (doc) return doc;
  const byPath = await kl.documentsAtPath(kb, uri);
  const [single] = byPath;
  const only = byPath.length === 1 && single ? await kl.getDocument(single.id) : undefined;
  if (only) return only;
  if (byPath.length > 1) {
    const uris = byPath.slice(0, 10).map((d) => d.uri);
    throw new KnowledgeLayerError(
      `${uri} holds ${byPath.length} documents in knowledge base "${kb}"; pass one of their URIs: ${uris.join(", ")}${byPath.length > 10 ? ", …" : ""}`,
    );
  }
  throw new KnowledgeLayerError(
    `no document with URI ${uri} in knowledge base "${kb}" (URIs are absolute paths as in search results' source.uri)`,
  );
}
