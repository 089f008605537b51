/**
 * The HTTP API (`kl serve`): knowledge bases, document uploads ingested by
 * background jobs (with server-sent progress events), agents with attached KBs
 * (inline routing of attachments, conversation memory and context assembly, see
 * `conversations.ts`), search, OpenAPI and health, on fastify. Every route but `/health` and
 * `/openapi.json` needs an API key, and a key only sees its tenant's resources
 * (see `tenancy.ts`). This file builds the app (limits, hooks, OpenAPI, job resumption);
 * the routes are grouped by resource in `routes/`: `health.ts`, `kbs.ts`, `documents.ts`,
 * `jobs.ts`, `agents.ts`, `conversations.ts` (attachments, memory, context) and `search.ts`,
 * sharing `context.ts`.
 *
 * ```ts
 * const kl = KnowledgeLayer.open({ dataDir });
 * const app = await buildServer(kl);
 * await app.listen({ port: 8080 });
 * ```
 */

import type { ServerResponse } from "node:http";
import { createRequire } from "node:module";
import { join } from "node:path";
import multipart from "@fastify/multipart";
import swagger from "@fastify/swagger";
import Fastify, { type FastifyInstance, type FastifyServerOptions } from "fastify";
import type { KnowledgeLayer } from "../knowledge-layer.js";
import { AgentConversations } from "./conversations.js";
import { installErrorHandlers } from "./errors.js";
import { JobManager } from "./jobs.js";
import { registerAgentRoutes } from "./routes/agents.js";
import type { RouteContext } from "./routes/context.js";
import { registerConversationRoutes } from "./routes/conversations.js";
import { registerDocumentRoutes } from "./routes/documents.js";
import { registerHealthRoutes } from "./routes/health.js";
import { registerJobRoutes } from "./routes/jobs.js";
import { registerKbRoutes } from "./routes/kbs.js";
import { registerSearchRoutes } from "./routes/search.js";
import { installAuth } from "./tenancy.js";

export { uploadName } from "./routes/context.js";
export { checkTenantSettings } from "./routes/kbs.js";

const VERSION: string = (createRequire(import.meta.url)("../../package.json") as { version: string }).version;

/** Options of {@link buildServer}. */
export interface ServerOptions {
  /** Largest uploaded file, in bytes (larger → 413). Default 50 MiB. */
  maxFileBytes?: number;
  /** Most files in one upload request (more → 413). Default 100. */
  maxFiles?: number;
  /** Largest JSON request body, in bytes (larger → 413). Default 1 MiB. */
  bodyLimit?: number;
  /**
   * Let tenants choose embedding providers, vector stores, rerankers and query
   * expansion that call other services or read server files (model folders).
   * Default false: tenants get the bundled model, the embedded store and the
   * offline rerankers, so an API key cannot make the server reach other hosts.
   */
  allowTenantServices?: boolean;
  /** Finished jobs kept per tenant for `GET /jobs/:id` (older ones are deleted from `kl.db`). Default 1,000. */
  maxFinishedJobs?: number;
  /** Folder for uploads waiting to be ingested. Default `<dataDir>/uploads`. */
  uploadsDir?: string;
  /** fastify's logger option (default off; `kl serve` logs requests at info level). */
  logger?: FastifyServerOptions["logger"];
}

/** Default largest uploaded file: 50 MiB. */
export const DEFAULT_MAX_FILE_BYTES = 50 * 1024 * 1024;
/** Default largest JSON body: 1 MiB. */
export const DEFAULT_BODY_LIMIT = 1024 * 1024;
/** Default most files per upload. */
export const DEFAULT_MAX_FILES = 100;

/** The multipart body of an agent attachment, for the OpenAPI document. */
const ATTACHMENT_BODY_DOC = {
  type: "object",
  properties: {
    file: {
      type: "string",
      format: "binary",
      description: "the one file to attach; the part's file name becomes the document's name",
    },
    kb: { type: "string", description: "knowledge base to index a long file into (attached to the agent)" },
  },
  required: ["file"],
};

/** The multipart body of an upload, for the OpenAPI document (not validated: the route reads the parts). */
const UPLOAD_BODY_DOC = {
  type: "object",
  properties: {
    file: {
      type: "array",
      items: { type: "string", format: "binary" },
      description: "one file part per document; the part's file name becomes the document's name",
    },
  },
  required: ["file"],
};

/**
 * Builds the fastify app of the HTTP API over an open {@link KnowledgeLayer}
 * (which the caller keeps and closes after `app.close()`). Every route goes through
 * the facade's public operations (`test/architecture.test.ts`). Start it with
 * `app.listen({ port })` (port 0 picks a free one).
 */
export async function buildServer(kl: KnowledgeLayer, options: ServerOptions = {}): Promise<FastifyInstance> {
  const maxFileBytes = options.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES;
  const maxFiles = options.maxFiles ?? DEFAULT_MAX_FILES;
  const bodyLimit = options.bodyLimit ?? DEFAULT_BODY_LIMIT;
  const allowServices = options.allowTenantServices ?? false;

  const app = Fastify({
    logger: options.logger ?? false,
    bodyLimit,
    // Requests arriving while the server closes get our own 503 (see the onRequest hook below).
    return503OnClosing: false,
    // Strict bodies: unknown fields are errors and types are not coerced.
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false, useDefaults: true } },
  });
  const conversations = new AgentConversations(kl);
  const uploadsDir = options.uploadsDir ?? join(kl.dataDir, "uploads");
  const jobs = new JobManager(kl, {
    uploadsDir,
    maxFinishedJobs: options.maxFinishedJobs,
    logError: (error, message) => app.log.error({ err: error }, message),
  });
  // Jobs are stored in kl.db: the ones a stopped (or crashed) server left queued or running resume now.
  const resumed = await jobs.start();
  if (resumed.length > 0) app.log.info({ jobs: resumed }, `resuming ${resumed.length} ingest job(s)`);
  const streams = new Set<ServerResponse>();
  // JSON bodies only (and multipart uploads): a text/plain body is a 415, not a string to validate.
  app.removeContentTypeParser("text/plain");

  installErrorHandlers(app, { bodyLimit, maxFiles });
  let closing = false;
  app.addHook("onRequest", async (_request, reply) => {
    if (closing)
      return reply
        .code(503)
        .header("connection", "close")
        .send({ error: "the server is shutting down; try again once it is back" });
  });
  installAuth(app, kl);
  await app.register(swagger, {
    openapi: {
      openapi: "3.0.3",
      info: {
        title: "knowledge-layer API",
        version: VERSION,
        description:
          "Knowledge bases, document ingest jobs, agents and search. Authenticate with `Authorization: Bearer <key>` (create keys with `kl apikey create TENANT`).",
      },
      components: { securitySchemes: { bearerAuth: { type: "http", scheme: "bearer" } } },
    },
    // The upload routes read their multipart bodies themselves; describe those bodies in the document only.
    transform: ({ schema, url, route }) => {
      if (route.method === "POST" && url === "/kbs/:kb/documents")
        return { schema: { ...schema, body: UPLOAD_BODY_DOC }, url };
      if (route.method === "POST" && url === "/agents/:id/attachments")
        return { schema: { ...schema, body: ATTACHMENT_BODY_DOC }, url };
      return { schema, url };
    },
  });
  await app.register(multipart, {
    throwFileSizeLimit: false,
    limits: { fileSize: maxFileBytes, files: maxFiles, fields: 100, parts: maxFiles + 100 },
  });
  // On close, fastify runs preClose hooks, then waits for open connections to end (new requests get a 503
  // meanwhile), then runs onClose hooks. Jobs are stopped here, first: a running job stops after its
  // current file and goes back to `queued` (its stream gets that event), then every event stream ends
  // before the connections are awaited; clients reconnect with Last-Event-ID once the server is back.
  app.addHook("preClose", async () => {
    closing = true;
    await jobs.close();
    for (const res of streams) res.end();
    streams.clear();
  });

  // The route groups (`routes/*.ts`), registered in this order (it is the OpenAPI document's order).
  const context: RouteContext = {
    app,
    kl,
    jobs,
    conversations,
    streams,
    maxFileBytes,
    allowServices,
    version: VERSION,
  };
  registerHealthRoutes(context);
  registerKbRoutes(context);
  registerDocumentRoutes(context);
  registerJobRoutes(context);
  registerAgentRoutes(context);
  registerConversationRoutes(context);
  registerSearchRoutes(context);

  return app;
}
