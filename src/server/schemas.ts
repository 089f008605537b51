/**
 * JSON schemas of the HTTP API's requests and responses. Fastify validates
 * requests with them (unknown fields are rejected, types are not coerced) and
 * @fastify/swagger turns them into `GET /openapi.json`.
 */
import { DEFAULT_CHUNK_TOP_K } from "../agent/retrieve.js";
import { DEFAULT_INLINE_LIMIT } from "../agent/routing.js";
import { COMMON_STORE_SETTINGS, RETRIEVAL_MODES, VECTOR_STORES } from "../config.js";
import { COMMON_EMBEDDING_SETTINGS, EMBEDDING_PROVIDER_REGISTRY } from "../embed/registry.js";
import { RERANKERS } from "../rerank/registry.js";
import { sectionJsonSchema } from "../settings.js";
import { ERROR_SCHEMA } from "./errors.js";

/** Largest `topK` the API accepts. */
export const MAX_API_TOP_K = 100;

/** Longest query accepted, in characters. */
export const MAX_QUERY_CHARS = 4000;

/** Largest agent `inlineLimit`, in characters. */
export const MAX_INLINE_LIMIT = 1_000_000;

/** Longest session or thread id, in characters. */
export const MAX_CONVERSATION_ID = 200;

const inlineLimitSchema = {
  type: "integer",
  minimum: 0,
  maximum: MAX_INLINE_LIMIT,
  description: `largest attachment text, in characters, answered inline by POST /agents/{id}/attachments (default ${DEFAULT_INLINE_LIMIT}; 0 always indexes)`,
} as const;

const conversationId = { type: "string", minLength: 1, maxLength: MAX_CONVERSATION_ID } as const;

const modeSchema = {
  type: "string",
  enum: [...RETRIEVAL_MODES, "vector"],
  description: "retrieval strategy (`vector` is accepted for `vector_only`)",
} as const;

const anyObject = { type: "object", additionalProperties: true } as const;

const kbName = { type: "string", minLength: 1, maxLength: 64, description: "knowledge base name" } as const;

/** Error responses every authenticated route may give. */
const errors = {
  400: { description: "invalid request", ...ERROR_SCHEMA },
  401: { description: "missing or invalid API key", ...ERROR_SCHEMA },
  404: { description: "not found (also another tenant's resource)", ...ERROR_SCHEMA },
} as const;

const security = [{ bearerAuth: [] }];

const kbParams = {
  type: "object",
  properties: { kb: kbName },
  required: ["kb"],
  additionalProperties: false,
} as const;

const idParams = {
  type: "object",
  properties: { id: { type: "string", minLength: 1, maxLength: 100 } },
  required: ["id"],
  additionalProperties: false,
} as const;

/** A metadata filter (validated by `parseFilter`, whose errors name the position). */
const filterSchema = {
  type: "object",
  additionalProperties: true,
  description:
    'metadata filter, e.g. {"type": "email", "date": {"$gte": "2024-03-01"}}: equality, $eq $ne $in $nin $lt $lte $gt $gte (numbers, ISO dates) $prefix $contains $exists, $and $or $not over source attributes (type, path, uri, title, author, from, to, subject, date, channel, user, language, page, headingPath, tags, kb…) and user metadata',
} as const;

/** Settings of a KB attached to an agent (passed to search as per-KB overrides). */
export const RETRIEVAL_CONFIG_SCHEMA = {
  type: "object",
  additionalProperties: false,
  properties: {
    maxResults: { type: "integer", minimum: 1, maximum: MAX_API_TOP_K },
    minScore: { type: "number", minimum: 0 },
    mode: modeSchema,
    filter: {
      ...filterSchema,
      description: `a filter that always applies to this KB's results (ANDed with a request's filter; it cannot be lifted): ${filterSchema.description}`,
    },
  },
} as const;

const configSections = {
  chunking: { ...anyObject, description: "chunking settings (see the README: strategy, chunkSize, …)" },
  // The implementations and their settings come from the stage registries.
  embedding: sectionJsonSchema(
    EMBEDDING_PROVIDER_REGISTRY,
    "provider",
    "embedding provider settings (restricted unless the server allows tenant services)",
    COMMON_EMBEDDING_SETTINGS,
  ),
  vectorStore: sectionJsonSchema(
    VECTOR_STORES,
    "type",
    "vector store settings (restricted unless the server allows tenant services)",
    COMMON_STORE_SETTINGS,
  ),
  retrieval: {
    ...anyObject,
    description: "retrieval settings: mode, topK, minScore, fusion, weights, reranker, …",
    properties: {
      reranker: sectionJsonSchema(
        RERANKERS,
        "type",
        "reranker of hybrid_rerank and advanced (restricted to the offline ones unless the server allows tenant services)",
      ),
    },
  },
  extraction: { ...anyObject, description: "extraction limits and per-format options" },
} as const;

const kbView = {
  type: "object",
  additionalProperties: true,
  properties: {
    name: { type: "string" },
    createdAt: { type: "string" },
    config: anyObject,
    counts: anyObject,
  },
} as const;

const jobView = {
  type: "object",
  additionalProperties: true,
  properties: {
    id: { type: "string" },
    kb: { type: "string" },
    status: { type: "string", enum: ["queued", "running", "succeeded", "failed"] },
    done: { type: "integer" },
    total: { type: "integer" },
    current: { type: "string" },
    files: { type: "array", items: anyObject },
    summary: anyObject,
    error: { type: "string" },
    createdAt: { type: "string" },
    startedAt: { type: "string" },
    finishedAt: { type: "string" },
  },
} as const;

const agentView = {
  type: "object",
  additionalProperties: true,
  properties: {
    id: { type: "string" },
    name: { type: "string" },
    description: { type: ["string", "null"] },
    topK: { type: "integer" },
    inlineLimit: { type: "integer" },
    kbs: {
      type: "array",
      items: {
        type: "object",
        additionalProperties: true,
        properties: { kb: { type: "string" }, retrievalConfig: anyObject, attachedAt: { type: "string" } },
      },
    },
    createdAt: { type: "string" },
    updatedAt: { type: "string" },
  },
} as const;

const searchResponse = {
  type: "object",
  additionalProperties: true,
  description: "ranked results with attribution (`kb`, `source`, `citation` per result)",
  properties: {
    query: { type: "string" },
    results: { type: "array", items: anyObject },
    warnings: { type: "array", items: { type: "string" } },
  },
} as const;

/** Route schemas, by route. */
export const schemas = {
  health: {
    tags: ["health"],
    summary: "liveness and database check (no API key needed)",
    response: {
      200: { type: "object", additionalProperties: true, properties: { status: { type: "string" } } },
    },
  },
  createKb: {
    tags: ["knowledge bases"],
    summary: "create a knowledge base (settings not given take the defaults)",
    security,
    body: {
      type: "object",
      additionalProperties: false,
      required: ["name"],
      properties: { name: kbName, ...configSections },
    },
    response: { 201: kbView, ...errors, 409: { description: "the KB exists", ...ERROR_SCHEMA } },
  },
  listKbs: {
    tags: ["knowledge bases"],
    summary: "list the tenant's knowledge bases with counts",
    security,
    response: { 200: { type: "object", properties: { kbs: { type: "array", items: kbView } } }, ...errors },
  },
  getKb: {
    tags: ["knowledge bases"],
    summary: "a knowledge base's configuration (secrets masked) and counts",
    security,
    params: kbParams,
    response: { 200: kbView, ...errors },
  },
  updateKb: {
    tags: ["knowledge bases"],
    summary: "change retrieval and extraction settings (chunking, embedding and store are fixed)",
    security,
    params: kbParams,
    body: {
      type: "object",
      additionalProperties: false,
      minProperties: 1,
      properties: { retrieval: configSections.retrieval, extraction: configSections.extraction },
    },
    response: { 200: kbView, ...errors },
  },
  deleteKb: {
    tags: ["knowledge bases"],
    summary: "delete a knowledge base with its documents, chunks and vectors",
    security,
    params: kbParams,
    response: {
      204: { type: "null", description: "deleted" },
      ...errors,
      409: { description: "an ingest job of the KB is queued or running", ...ERROR_SCHEMA },
    },
  },
  uploadDocuments: {
    tags: ["documents"],
    summary:
      "upload files (multipart/form-data, one or more file parts; optional `meta` fields, key=value or a JSON object, and `tag` fields set user metadata on every document) and ingest them in a background job",
    description:
      "Each file part is ingested under its file name (the document's uri, path and citation); uploading a name again replaces that document, and two file parts of one name in one upload are a 400 naming it (nothing stored). Answers 202 with the job; follow it with GET /jobs/:id or GET /jobs/:id/events.",
    security,
    consumes: ["multipart/form-data"],
    params: kbParams,
    querystring: {
      type: "object",
      additionalProperties: false,
      properties: {
        embed: { type: "string", enum: ["true", "false"], description: "compute vectors (default true)" },
      },
    },
    response: {
      202: jobView,
      ...errors,
      413: { description: "a file is over the size limit, or too many files", ...ERROR_SCHEMA },
    },
  },
  listDocuments: {
    tags: ["documents"],
    summary: "list a knowledge base's documents",
    security,
    params: kbParams,
    querystring: {
      type: "object",
      additionalProperties: false,
      properties: {
        limit: { type: "string", pattern: "^[0-9]{1,4}$", description: "page size, 1-1000 (default 100)" },
        offset: { type: "string", pattern: "^[0-9]{1,9}$", description: "documents to skip (default 0)" },
        where: {
          type: "string",
          description:
            'metadata filter as JSON (the language of /search\'s filter): only documents with a matching chunk, e.g. {"type":"email"}',
        },
      },
    },
    response: {
      200: {
        type: "object",
        additionalProperties: true,
        properties: {
          documents: { type: "array", items: anyObject },
          total: { type: "integer" },
          limit: { type: "integer" },
          offset: { type: "integer" },
        },
      },
      ...errors,
    },
  },
  getDocument: {
    tags: ["documents"],
    summary: "one document: metadata and extracted text",
    security,
    params: {
      type: "object",
      properties: { kb: kbName, id: { type: "string", pattern: "^[0-9]{1,15}$" } },
      required: ["kb", "id"],
      additionalProperties: false,
    },
    response: { 200: anyObject, ...errors },
  },
  deleteDocument: {
    tags: ["documents"],
    summary: "delete a document with its chunks, BM25 postings and vectors",
    security,
    params: {
      type: "object",
      properties: { kb: kbName, id: { type: "string", pattern: "^[0-9]{1,15}$" } },
      required: ["kb", "id"],
      additionalProperties: false,
    },
    response: { 204: { type: "null", description: "deleted" }, ...errors },
  },
  listJobs: {
    tags: ["jobs"],
    summary: "the tenant's recent jobs, newest first",
    security,
    response: { 200: { type: "object", properties: { jobs: { type: "array", items: jobView } } }, ...errors },
  },
  getJob: {
    tags: ["jobs"],
    summary: "a job's status, progress and summary",
    security,
    params: idParams,
    response: { 200: jobView, ...errors },
  },
  jobEvents: {
    tags: ["jobs"],
    summary: "server-sent events of a job: `status` (now), `progress` per step, then one `done`",
    security,
    params: idParams,
    headers: {
      type: "object",
      properties: {
        "last-event-id": {
          type: "string",
          description:
            "id of the last event the client received (EventSource sends it when it reconnects): the stream replays every later event instead of starting with `status`",
        },
      },
    },
    produces: ["text/event-stream"],
    response: {
      200: {
        type: "string",
        description:
          "text/event-stream: `event: status` (the job now, with the id of the job's last event), `event: progress` (id, job view) per step, then `event: done` (the finished job: succeeded or failed) and the stream ends. Events are stored with the job: with `Last-Event-ID` the stream replays every event after it. When the server shuts down the stream ends without `done` (a running job goes back to `queued` and resumes when the server is back); reconnect with `Last-Event-ID`",
      },
      204: {
        type: "null",
        description:
          "with `Last-Event-ID`: the job has finished and no event follows that id (stop reconnecting)",
      },
      ...errors,
    },
  },
  createAgent: {
    tags: ["agents"],
    summary: "create an agent, optionally with attached knowledge bases",
    security,
    body: {
      type: "object",
      additionalProperties: false,
      required: ["name"],
      properties: {
        name: { type: "string", minLength: 1, maxLength: 100 },
        description: { type: "string", maxLength: 2000 },
        topK: { type: "integer", minimum: 1, maximum: MAX_API_TOP_K },
        inlineLimit: inlineLimitSchema,
        kbs: {
          type: "array",
          maxItems: 50,
          items: {
            type: "object",
            additionalProperties: false,
            required: ["kb"],
            properties: { kb: kbName, retrievalConfig: RETRIEVAL_CONFIG_SCHEMA },
          },
        },
      },
    },
    response: { 201: agentView, ...errors, 409: { description: "the name is taken", ...ERROR_SCHEMA } },
  },
  listAgents: {
    tags: ["agents"],
    summary: "the tenant's agents",
    security,
    response: {
      200: { type: "object", properties: { agents: { type: "array", items: agentView } } },
      ...errors,
    },
  },
  getAgent: {
    tags: ["agents"],
    summary: "one agent",
    security,
    params: idParams,
    response: { 200: agentView, ...errors },
  },
  updateAgent: {
    tags: ["agents"],
    summary: "rename an agent or change its description, default topK or inline limit",
    security,
    params: idParams,
    body: {
      type: "object",
      additionalProperties: false,
      minProperties: 1,
      properties: {
        name: { type: "string", minLength: 1, maxLength: 100 },
        description: { type: ["string", "null"], maxLength: 2000 },
        topK: { type: "integer", minimum: 1, maximum: MAX_API_TOP_K },
        inlineLimit: inlineLimitSchema,
      },
    },
    response: { 200: agentView, ...errors, 409: { description: "the name is taken", ...ERROR_SCHEMA } },
  },
  deleteAgent: {
    tags: ["agents"],
    summary: "delete an agent (its knowledge bases stay)",
    security,
    params: idParams,
    response: { 204: { type: "null", description: "deleted" }, ...errors },
  },
  attachKb: {
    tags: ["agents"],
    summary: "attach a knowledge base to an agent, or change the attachment's retrieval settings",
    security,
    params: {
      type: "object",
      properties: { id: idParams.properties.id, kb: kbName },
      required: ["id", "kb"],
      additionalProperties: false,
    },
    body: {
      type: "object",
      additionalProperties: false,
      properties: { retrievalConfig: RETRIEVAL_CONFIG_SCHEMA },
    },
    response: { 200: agentView, ...errors },
  },
  detachKb: {
    tags: ["agents"],
    summary: "detach a knowledge base from an agent",
    security,
    params: {
      type: "object",
      properties: { id: idParams.properties.id, kb: kbName },
      required: ["id", "kb"],
      additionalProperties: false,
    },
    response: { 200: agentView, ...errors },
  },
  retrieve: {
    tags: ["agents"],
    summary: "retrieve from every knowledge base attached to the agent, with its per-KB settings",
    security,
    params: idParams,
    body: {
      type: "object",
      additionalProperties: false,
      required: ["query"],
      properties: {
        query: { type: "string", minLength: 1, maxLength: MAX_QUERY_CHARS },
        topK: { type: "integer", minimum: 1, maximum: MAX_API_TOP_K },
        filter: filterSchema,
      },
    },
    response: { 200: searchResponse, ...errors },
  },
  attachToAgent: {
    tags: ["agents"],
    summary: "attach a file to an agent's conversation: inline when short, else indexed in a background job",
    description:
      "multipart/form-data with one file part (and optionally a `kb` field). When the file's extracted text is at most the agent's `inlineLimit` characters, answers 200 with the text and indexes nothing; otherwise ingests it into the knowledge base named by `kb` (form field or query parameter; it must be attached to the agent; default the agent's first attached KB) and answers 202 with the job.",
    security,
    consumes: ["multipart/form-data"],
    params: idParams,
    querystring: {
      type: "object",
      additionalProperties: false,
      properties: { kb: { ...kbName, description: "knowledge base to index a long file into" } },
    },
    response: {
      200: {
        type: "object",
        additionalProperties: true,
        description: "the file is short enough to go into the prompt whole; nothing was indexed",
        properties: {
          route: { type: "string", enum: ["inline"] },
          name: { type: "string" },
          text: { type: "string" },
          chars: { type: "integer" },
          limit: { type: "integer" },
        },
      },
      202: {
        type: "object",
        additionalProperties: true,
        description: "the file is being indexed; follow the job with GET /jobs/:id or GET /jobs/:id/events",
        properties: {
          route: { type: "string", enum: ["retrieve"] },
          name: { type: "string" },
          kb: { type: "string" },
          chars: { type: "integer" },
          limit: { type: "integer" },
          job: jobView,
        },
      },
      ...errors,
      413: { description: "the file is over the size limit", ...ERROR_SCHEMA },
    },
  },
  rememberTurn: {
    tags: ["agents"],
    summary: "remember a conversation turn (user message and reply) of a session's thread",
    security,
    params: idParams,
    body: {
      type: "object",
      additionalProperties: false,
      required: ["sessionId", "threadId", "user", "assistant"],
      properties: {
        sessionId: conversationId,
        threadId: conversationId,
        user: { type: "string" },
        assistant: { type: "string" },
        at: { type: "string", format: "date-time", description: "when the turn happened (default now)" },
      },
    },
    response: {
      201: {
        type: "object",
        additionalProperties: true,
        properties: {
          id: { type: "integer" },
          sessionId: { type: "string" },
          threadId: { type: "string" },
          at: { type: "string" },
          text: { type: "string" },
        },
      },
      ...errors,
    },
  },
  forgetSession: {
    tags: ["agents"],
    summary: "forget a session's remembered turns (one thread's with `threadId`)",
    security,
    params: {
      type: "object",
      properties: { id: idParams.properties.id, sessionId: conversationId },
      required: ["id", "sessionId"],
      additionalProperties: false,
    },
    querystring: {
      type: "object",
      additionalProperties: false,
      properties: { threadId: conversationId },
    },
    response: {
      200: {
        type: "object",
        additionalProperties: true,
        properties: {
          sessionId: { type: "string" },
          threadId: { type: "string" },
          deleted: { type: "integer", description: "turns forgotten" },
        },
      },
      ...errors,
    },
  },
  context: {
    tags: ["agents"],
    summary:
      "assemble a turn's context: attached KBs' chunks, other threads' memories, conversation, within a budget",
    description:
      "Retrieves document chunks from the agent's attached knowledge bases (each with its attachment's settings) and memories from the session's other threads concurrently, then builds the messages in order: system, summaries, anchor, `[file chunk n]` chunks, `[memory n]` memories, recent messages. Sizes are characters.",
    security,
    params: idParams,
    body: {
      type: "object",
      additionalProperties: false,
      required: ["query", "sessionId", "threadId"],
      properties: {
        query: { type: "string", minLength: 1, maxLength: MAX_QUERY_CHARS },
        sessionId: conversationId,
        threadId: { ...conversationId, description: "the current thread (its memories are not recalled)" },
        system: { type: "array", items: { type: "string" }, maxItems: 100 },
        summaries: { type: "array", items: { type: "string" }, maxItems: 100 },
        anchor: { type: "string" },
        recent: {
          type: "array",
          maxItems: 1000,
          description: "the conversation so far, oldest first",
          items: {
            type: "object",
            additionalProperties: false,
            required: ["role", "content"],
            properties: {
              role: { type: "string", enum: ["user", "assistant", "system"] },
              content: { type: "string" },
              id: { type: "string", maxLength: MAX_CONVERSATION_ID },
            },
          },
        },
        budget: {
          type: "integer",
          minimum: 1,
          maximum: 10_000_000,
          description: "largest total content, in characters (default 18000)",
        },
        messageLimit: {
          type: "integer",
          minimum: 1,
          maximum: 10_000_000,
          description: "longest user/assistant message sent whole, in characters (default 3000)",
        },
        chunkTopK: {
          type: "integer",
          minimum: 0,
          maximum: MAX_API_TOP_K,
          description: `document chunks retrieved (default ${DEFAULT_CHUNK_TOP_K}; 0 skips)`,
        },
        memoryTopK: {
          type: "integer",
          minimum: 0,
          maximum: MAX_API_TOP_K,
          description: "memories recalled (default 3; 0 skips)",
        },
        threshold: {
          type: "number",
          minimum: 0,
          maximum: 1,
          description:
            "minimum score of chunks (unless the attachment sets minScore) and memories (default 0.45)",
        },
        fallback: {
          type: "boolean",
          description:
            "when a side finds nothing at the threshold, return its best flagged belowThreshold (default true)",
        },
      },
    },
    response: {
      200: {
        type: "object",
        additionalProperties: true,
        properties: {
          messages: {
            type: "array",
            items: {
              type: "object",
              properties: { role: { type: "string" }, content: { type: "string" } },
            },
          },
          parts: { type: "array", items: anyObject },
          dropped: { type: "array", items: anyObject },
          totalChars: { type: "integer" },
          budget: { type: "integer" },
          chunks: { type: "array", items: anyObject },
          memories: { type: "array", items: anyObject },
          warnings: { type: "array", items: { type: "string" } },
        },
      },
      ...errors,
    },
  },
  search: {
    tags: ["search"],
    summary: "search the tenant's knowledge bases (all of them unless `kbs` names some)",
    security,
    body: {
      type: "object",
      additionalProperties: false,
      required: ["query"],
      properties: {
        query: { type: "string", minLength: 1, maxLength: MAX_QUERY_CHARS },
        kbs: { type: "array", items: kbName, minItems: 1, maxItems: 50 },
        topK: { type: "integer", minimum: 1, maximum: MAX_API_TOP_K },
        mode: modeSchema,
        minScore: { type: "number", minimum: 0 },
        filter: filterSchema,
      },
    },
    response: { 200: searchResponse, ...errors },
  },
} as const;
