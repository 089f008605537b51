/**
 * The HTTP API (`kl serve`): knowledge bases, document uploads ingested by
 * background jobs (with server-sent progress events), agents with attached KBs
 * (inline routing of attachments, conversation memory and context assembly, see
 * `conversations.ts`), search, OpenAPI and health, on fastify. Every route but `/health` and
 * `/openapi.json` needs an API key, and a key only sees its tenant's resources
 * (see `tenancy.ts`).
 *
 * ```ts
 * const kl = KnowledgeLayer.open({ dataDir });
 * const app = await buildServer(kl);
 * await app.listen({ port: 8080 });
 * ```
 */

import { createWriteStream } from "node:fs";
import { readFile, stat } from "node:fs/promises";
import type { ServerResponse } from "node:http";
import { createRequire } from "node:module";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import multipart from "@fastify/multipart";
import swagger from "@fastify/swagger";
import Fastify, { type FastifyInstance, type FastifyServerOptions } from "fastify";
import { INLINE_DOCUMENT_SEPARATOR, routeText } from "../agent/routing.js";
import { type KnowledgeBaseConfig, type RetrievalMode, VECTOR_STORES } from "../config.js";
import { EMBEDDING_PROVIDER_REGISTRY } from "../embed/registry.js";
import { ExtractionError } from "../errors.js";
import { DEFAULT_EXTRACTION_LIMITS } from "../extract/contract.js";
import { extractBytes } from "../extract/index.js";
import { checkUserMetadata } from "../ingest/pipeline.js";
import type {
  Agent,
  AttachmentRetrievalConfig,
  DeepPartial,
  KbRecord,
  KbUpdate,
  KnowledgeLayer,
  SearchResponse,
} from "../knowledge-layer.js";
import { RERANKERS } from "../rerank/registry.js";
import {
  type Filter,
  type FilterScalar,
  mapFilterValues,
  parseFilter,
  parseFilterJson,
} from "../retrieve/filter.js";
import type { KbRetrievalOverrides } from "../retrieve/search.js";
import { redactSecrets } from "../secrets.js";
import { offlineNamesOf, type Registry } from "../settings.js";
import { attachedKbs, overridesOf } from "./agents.js";
import { AgentConversations, type ContextRequest, type TurnInput } from "./conversations.js";
import { deleteDocuments, getDocument, listDocuments } from "./documents.js";
import { formatBytes, HttpError, installErrorHandlers } from "./errors.js";
import { JobManager, type UploadedFile } from "./jobs.js";
import { schemas } from "./schemas.js";
import { installAuth, internalKbName, kbNameProblem, ownsKb, tenantKbName, tenantText } from "./tenancy.js";

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

type ConfigOverrides = DeepPartial<Omit<KnowledgeBaseConfig, "name">>;
type Obj = Record<string, unknown>;

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

  /** The tenant's KB `name`, or a 404 (also for another tenant's KB). */
  const requireKb = async (tenant: string, name: string): Promise<KbRecord> => {
    const kb = kbNameProblem(tenant, name) ? undefined : await kl.findKb(internalKbName(tenant, name));
    if (!kb) throw new HttpError(404, `knowledge base "${name}" not found`);
    return kb;
  };

  const kbView = async (tenant: string, kb: KbRecord) => ({
    name: tenantKbName(tenant, kb.name),
    createdAt: kb.createdAt,
    config: redactSecrets({ ...kb.config, name: tenantKbName(tenant, kb.name) }),
    counts: await kl.counts(kb.name),
    activeJobs: await jobs.active(kb.name),
  });

  const agentView = (tenant: string, agent: Agent) => ({
    id: agent.id,
    name: agent.name,
    description: agent.description,
    topK: agent.topK,
    inlineLimit: agent.inlineLimit,
    kbs: agent.kbs.map((a) => ({ ...a, kb: tenantKbName(tenant, a.kb) })),
    createdAt: agent.createdAt,
    updatedAt: agent.updatedAt,
  });

  /** A search response in the tenant's names. */
  const searchView = (tenant: string, response: SearchResponse) => {
    const rename = <T>(o: Record<string, T>): Record<string, T> =>
      Object.fromEntries(Object.entries(o).map(([k, v]) => [tenantKbName(tenant, k), v]));
    return {
      ...response,
      kbs: response.kbs.map((k) => tenantKbName(tenant, k)),
      rerankers: rename(response.rerankers),
      ...(response.variants ? { variants: rename(response.variants) } : {}),
      warnings: response.warnings.map((w) => tenantText(w, tenant)),
      results: response.results.map((r) => ({ ...r, kb: tenantKbName(tenant, r.kb) })),
    };
  };

  // ---- public ----

  app.get("/health", { schema: schemas.health, config: { public: true } }, async () => {
    await kl.checkHealth();
    return { status: "ok", version: VERSION };
  });

  app.get("/openapi.json", { schema: { hide: true }, config: { public: true } }, async () => app.swagger());

  // ---- knowledge bases ----

  app.post<{ Body: { name: string } & ConfigOverrides }>(
    "/kbs",
    { schema: schemas.createKb },
    async (request, reply) => {
      const { tenant } = request;
      const { name, ...overrides } = request.body;
      const problem = kbNameProblem(tenant, name);
      if (problem) throw new HttpError(400, problem, "name");
      checkTenantSettings(overrides as Obj, allowServices);
      const internal = internalKbName(tenant, name);
      if (await kl.findKb(internal))
        throw new HttpError(409, `knowledge base "${name}" already exists`, "name");
      const record = await kl.createKb(internal, overrides);
      return reply
        .code(201)
        .header("location", `/kbs/${encodeURIComponent(name)}`)
        .send(await kbView(tenant, record));
    },
  );

  app.get("/kbs", { schema: schemas.listKbs }, async (request) => {
    const { tenant } = request;
    return {
      kbs: await Promise.all(
        (await kl.knowledgeBases()).filter((k) => ownsKb(tenant, k.name)).map((k) => kbView(tenant, k)),
      ),
    };
  });

  app.get<{ Params: { kb: string } }>("/kbs/:kb", { schema: schemas.getKb }, async (request) =>
    kbView(request.tenant, await requireKb(request.tenant, request.params.kb)),
  );

  app.patch<{ Params: { kb: string }; Body: { retrieval?: Obj; extraction?: Obj } }>(
    "/kbs/:kb",
    { schema: schemas.updateKb },
    async (request) => {
      const { tenant } = request;
      const kb = await requireKb(tenant, request.params.kb);
      const { retrieval, extraction } = request.body;
      checkTenantSettings({ retrieval, extraction }, allowServices);
      return kbView(tenant, await kl.updateKb(kb.name, { retrieval, extraction } as KbUpdate));
    },
  );

  app.delete<{ Params: { kb: string } }>("/kbs/:kb", { schema: schemas.deleteKb }, async (request, reply) => {
    const kb = await requireKb(request.tenant, request.params.kb);
    const active = await jobs.active(kb.name);
    if (active.length > 0) {
      throw new HttpError(
        409,
        `knowledge base "${request.params.kb}" has ingest jobs queued or running (${active.join(", ")}); delete it when they have finished`,
      );
    }
    await kl.deleteKb(kb.name);
    return reply.code(204).send();
  });

  // ---- documents ----

  app.post<{ Params: { kb: string }; Querystring: { embed?: "true" | "false" } }>(
    "/kbs/:kb/documents",
    { schema: schemas.uploadDocuments },
    async (request, reply) => {
      const { tenant } = request;
      const kb = await requireKb(tenant, request.params.kb);
      if (!request.isMultipart()) {
        throw new HttpError(415, "upload files as multipart/form-data (one file part per document)");
      }
      const { id, dir } = await jobs.reserve(tenant);
      const files: UploadedFile[] = [];
      /** Client file names by upload name: two parts with one name would be one document (the first lost). */
      const given = new Map<string, { raw: string; part: number }>();
      const metadata: { meta: Record<string, FilterScalar>; tags: string[] } = { meta: {}, tags: [] };
      try {
        for await (const part of request.parts()) {
          if (part.type !== "file") {
            // `meta` (key=value, or a JSON object) and `tag` fields: user metadata of every document.
            if (part.fieldname === "meta" || part.fieldname === "tag") {
              addUploadMetadata(metadata, part.fieldname, String(part.value));
              continue;
            }
            throw new HttpError(
              400,
              `unexpected form field "${part.fieldname}": send file parts, and optionally "meta" (key=value or a JSON object) and "tag" fields`,
              part.fieldname,
            );
          }
          const name = uploadName(part.filename);
          if (!name) {
            part.file.resume();
            throw new HttpError(400, `file part "${part.fieldname}" has no usable file name`, part.fieldname);
          }
          const earlier = given.get(name);
          if (earlier) {
            part.file.resume();
            throw new HttpError(
              400,
              duplicateUploadMessage(name, earlier, part.filename, files.length + 1),
              part.fieldname,
            );
          }
          given.set(name, { raw: part.filename, part: files.length + 1 });
          const storedPath = join(dir, String(files.length));
          await pipeline(part.file, createWriteStream(storedPath));
          if (part.file.truncated) {
            throw new HttpError(
              413,
              `file "${name}" is larger than the upload limit of ${formatBytes(maxFileBytes)}`,
              part.fieldname,
            );
          }
          files.push({ name, storedPath, bytes: (await stat(storedPath)).size, mimetype: part.mimetype });
        }
        if (files.length === 0) {
          throw new HttpError(400, "no files: send one or more file parts as multipart/form-data");
        }
        try {
          checkUserMetadata(metadata, "meta");
        } catch (error) {
          throw new HttpError(
            400,
            (error as Error).message,
            error instanceof Error && /^tags/.test(error.message) ? "tag" : "meta",
          );
        }
      } catch (error) {
        await jobs.release(dir);
        throw error;
      }
      const job = await jobs.submit({
        id,
        dir,
        tenant,
        kb: request.params.kb,
        internalKb: kb.name,
        files,
        embed: request.query.embed !== "false",
        metadata: Object.keys(metadata.meta).length > 0 || metadata.tags.length > 0 ? metadata : undefined,
      });
      return reply.code(202).header("location", `/jobs/${job.id}`).send(job);
    },
  );

  app.get<{ Params: { kb: string }; Querystring: { limit?: string; offset?: string; where?: string } }>(
    "/kbs/:kb/documents",
    { schema: schemas.listDocuments },
    async (request) => {
      const { tenant } = request;
      const kb = await requireKb(tenant, request.params.kb);
      const limit = Number(request.query.limit ?? 100);
      const offset = Number(request.query.offset ?? 0);
      if (limit < 1 || limit > 1000)
        throw new HttpError(400, 'query parameter "limit" must be from 1 to 1000', "limit");
      const { where } = request.query;
      // A malformed filter is a 400 naming its position (`where.date.$gte: …`).
      if (where !== undefined) parseFilterJson(where, "where");
      const filter = where === undefined ? undefined : tenantFilter(tenant, JSON.parse(where) as Filter);
      return { ...(await listDocuments(kl, kb.name, limit, offset, filter)), limit, offset };
    },
  );

  app.get<{ Params: { kb: string; id: string } }>(
    "/kbs/:kb/documents/:id",
    { schema: schemas.getDocument },
    async (request) => {
      const kb = await requireKb(request.tenant, request.params.kb);
      const doc = await getDocument(kl, kb.name, Number(request.params.id));
      if (!doc)
        throw new HttpError(
          404,
          `document ${request.params.id} not found in knowledge base "${request.params.kb}"`,
        );
      return doc;
    },
  );

  app.delete<{ Params: { kb: string; id: string } }>(
    "/kbs/:kb/documents/:id",
    { schema: schemas.deleteDocument },
    async (request, reply) => {
      const kb = await requireKb(request.tenant, request.params.kb);
      const deleted = await deleteDocuments(kl, kb, [Number(request.params.id)]);
      if (deleted === 0)
        throw new HttpError(
          404,
          `document ${request.params.id} not found in knowledge base "${request.params.kb}"`,
        );
      return reply.code(204).send();
    },
  );

  // ---- jobs ----

  app.get("/jobs", { schema: schemas.listJobs }, async (request) => ({
    jobs: await jobs.list(request.tenant),
  }));

  app.get<{ Params: { id: string } }>("/jobs/:id", { schema: schemas.getJob }, async (request) => {
    const job = await jobs.get(request.tenant, request.params.id);
    if (!job) throw new HttpError(404, `job "${request.params.id}" not found`);
    return job;
  });

  app.get<{ Params: { id: string } }>(
    "/jobs/:id/events",
    { schema: schemas.jobEvents },
    async (request, reply) => {
      const { tenant } = request;
      // Live events are held from here on, so none falls between the stored ones and the subscription.
      const follower = await jobs.follow(tenant, request.params.id);
      if (!follower) throw new HttpError(404, `job "${request.params.id}" not found`);
      const { job, seq } = follower;
      // A reconnecting client (EventSource sends it by itself) gets every stored event after the last it saw.
      const header = request.headers["last-event-id"];
      const lastId = Array.isArray(header) ? header[0] : header;
      if (lastId !== undefined && !/^\d{1,9}$/.test(lastId.trim())) {
        follower.stop();
        throw new HttpError(400, `Last-Event-ID must be an event id of this job (a number), not "${lastId}"`);
      }
      const after = lastId === undefined ? undefined : Number(lastId.trim());
      let missed: Awaited<ReturnType<typeof follower.eventsAfter>>;
      try {
        missed = after === undefined ? [] : await follower.eventsAfter(after);
      } catch (error) {
        follower.stop();
        throw error;
      }
      const finished = follower.finished;
      // Nothing after the client's last event of a finished job: 204 tells EventSource not to reconnect.
      if (after !== undefined && finished && missed.length === 0) {
        follower.stop();
        return reply.code(204).send();
      }
      reply.hijack();
      const res = reply.raw;
      res.writeHead(200, {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache, no-transform",
        connection: "keep-alive",
        "x-accel-buffering": "no",
      });
      const write = (event: string, data: unknown, id?: number): void => {
        res.write(
          `${id === undefined ? "" : `id: ${id}\n`}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`,
        );
      };
      if (after === undefined) {
        // The job as of its last event: a client reconnecting after this sends that id and gets what follows.
        write("status", job, finished ? undefined : seq);
        if (finished) {
          follower.stop();
          write("done", job);
          res.end();
          return;
        }
      } else {
        for (const e of missed) write(e.type, e.job, e.seq);
        if (finished) {
          follower.stop();
          res.end();
          return;
        }
      }
      streams.add(res);
      const keepAlive = setInterval(() => res.write(": keep-alive\n\n"), 15_000);
      const stop = (): void => {
        clearInterval(keepAlive);
        follower.stop();
        streams.delete(res);
      };
      res.on("close", stop);
      follower.listen((event) => {
        write(event.type, event.job, event.seq);
        if (event.type === "done") {
          stop();
          res.end();
        }
      });
    },
  );

  // ---- agents ----

  /** Catalog names of attachments, checked to be the tenant's KBs (`field` names the body path). */
  const resolveAttachment = async (tenant: string, kb: string, field?: string): Promise<string> => {
    const internal = kbNameProblem(tenant, kb) ? undefined : internalKbName(tenant, kb);
    if (!internal || !(await kl.findKb(internal))) {
      if (field) throw new HttpError(400, `unknown knowledge base "${kb}"`, field);
      throw new HttpError(404, `knowledge base "${kb}" not found`);
    }
    return internal;
  };

  app.post<{
    Body: {
      name: string;
      description?: string;
      topK?: number;
      inlineLimit?: number;
      kbs?: { kb: string; retrievalConfig?: AttachmentRetrievalConfig }[];
    };
  }>("/agents", { schema: schemas.createAgent }, async (request, reply) => {
    const { tenant } = request;
    const body = request.body;
    const kbs: { kb: string; retrievalConfig: AttachmentRetrievalConfig }[] = [];
    for (const [i, a] of (body.kbs ?? []).entries()) {
      if (a.retrievalConfig?.filter !== undefined)
        parseFilter(a.retrievalConfig.filter, `kbs.${i}.retrievalConfig.filter`);
      kbs.push({
        kb: await resolveAttachment(tenant, a.kb, `kbs.${i}.kb`),
        retrievalConfig: a.retrievalConfig ?? {},
      });
    }
    const agent = await kl.createAgent(tenant, { ...body, kbs });
    return reply.code(201).header("location", `/agents/${agent.id}`).send(agentView(tenant, agent));
  });

  app.get("/agents", { schema: schemas.listAgents }, async (request) => ({
    agents: (await kl.listAgents(request.tenant)).map((a) => agentView(request.tenant, a)),
  }));

  const requireAgent = async (tenant: string, id: string): Promise<Agent> => {
    const agent = await kl.getAgent(tenant, id);
    if (!agent) throw new HttpError(404, `agent "${id}" not found`);
    return agent;
  };

  app.get<{ Params: { id: string } }>("/agents/:id", { schema: schemas.getAgent }, async (request) =>
    agentView(request.tenant, await requireAgent(request.tenant, request.params.id)),
  );

  app.patch<{
    Params: { id: string };
    Body: { name?: string; description?: string | null; topK?: number; inlineLimit?: number };
  }>("/agents/:id", { schema: schemas.updateAgent }, async (request) =>
    agentView(request.tenant, await kl.updateAgent(request.tenant, request.params.id, request.body)),
  );

  app.delete<{ Params: { id: string } }>(
    "/agents/:id",
    { schema: schemas.deleteAgent },
    async (request, reply) => {
      if (!(await kl.deleteAgent(request.tenant, request.params.id)))
        throw new HttpError(404, `agent "${request.params.id}" not found`);
      await conversations.forgetAgent(request.tenant, request.params.id);
      return reply.code(204).send();
    },
  );

  app.put<{
    Params: { id: string; kb: string };
    Body: { retrievalConfig?: AttachmentRetrievalConfig } | undefined;
  }>("/agents/:id/kbs/:kb", { schema: schemas.attachKb }, async (request) => {
    const { tenant } = request;
    await requireAgent(tenant, request.params.id);
    const internal = await resolveAttachment(tenant, request.params.kb);
    if (request.body?.retrievalConfig?.filter !== undefined)
      parseFilter(request.body.retrievalConfig.filter, "retrievalConfig.filter");
    const agent = await kl.attachKb(tenant, request.params.id, internal, request.body?.retrievalConfig ?? {});
    return agentView(tenant, agent);
  });

  app.delete<{ Params: { id: string; kb: string } }>(
    "/agents/:id/kbs/:kb",
    { schema: schemas.detachKb },
    async (request) => {
      const { tenant } = request;
      await requireAgent(tenant, request.params.id);
      if (kbNameProblem(tenant, request.params.kb))
        throw new HttpError(
          404,
          `knowledge base "${request.params.kb}" is not attached to agent "${request.params.id}"`,
        );
      const internal = internalKbName(tenant, request.params.kb);
      return agentView(tenant, await kl.detachKb(tenant, request.params.id, internal));
    },
  );

  app.post<{ Params: { id: string }; Body: { query: string; topK?: number; filter?: Filter } }>(
    "/agents/:id/retrieve",
    { schema: schemas.retrieve },
    async (request) => {
      const { tenant } = request;
      const agent = await requireAgent(tenant, request.params.id);
      const attached = await attachedKbs(kl, agent);
      const topK = request.body.topK ?? agent.topK;
      if (attached.length === 0) {
        return {
          query: request.body.query,
          agent: agent.id,
          kbs: [],
          results: [],
          warnings: [
            `agent "${agent.name}" has no knowledge bases attached: attach one with PUT /agents/${agent.id}/kbs/{kb}`,
          ],
          tookMs: 0,
        };
      }
      const perKb: Record<string, KbRetrievalOverrides> = {};
      const kbName = (name: string) => internalKbName(tenant, name);
      for (const a of attached) perKb[a.kb] = overridesOf(a.retrievalConfig, kbName);
      const response = await kl.search(request.body.query, {
        kbs: attached.map((a) => a.kb),
        perKb,
        topK,
        filter: tenantFilter(tenant, request.body.filter),
      });
      return { agent: agent.id, ...searchView(tenant, response) };
    },
  );

  // ---- agents: attachments, conversation memory, context ----

  /**
   * The KB (catalog record) a long attachment of `agent` is indexed into: `name`
   * when given (it must be attached), else the agent's first attached KB; undefined
   * when none is given and none is attached.
   * @throws HttpError 400 (`kb`) for an unknown or unattached KB.
   */
  const attachmentKb = async (
    tenant: string,
    agent: Agent,
    name: string | undefined,
  ): Promise<KbRecord | undefined> => {
    if (name === undefined) {
      for (const a of agent.kbs) {
        const kb = await kl.findKb(a.kb);
        if (kb) return kb;
      }
      return undefined;
    }
    const internal = await resolveAttachment(tenant, name, "kb");
    if (!agent.kbs.some((a) => a.kb === internal))
      throw new HttpError(400, `knowledge base "${name}" is not attached to agent "${agent.id}"`, "kb");
    return kl.findKb(internal);
  };

  app.post<{ Params: { id: string }; Querystring: { kb?: string } }>(
    "/agents/:id/attachments",
    { schema: schemas.attachToAgent },
    async (request, reply) => {
      const { tenant } = request;
      const agent = await requireAgent(tenant, request.params.id);
      if (!request.isMultipart()) {
        throw new HttpError(415, "upload the file as multipart/form-data (one file part)");
      }
      const { id, dir } = await jobs.reserve(tenant);
      let submitted = false;
      try {
        let file: UploadedFile | undefined;
        let kbField: string | undefined;
        for await (const part of request.parts()) {
          if (part.type !== "file") {
            if (part.fieldname !== "kb")
              throw new HttpError(
                400,
                `unexpected form field "${part.fieldname}": send one file part and optionally "kb"`,
                part.fieldname,
              );
            if (kbField !== undefined || typeof part.value !== "string" || part.value === "")
              throw new HttpError(400, 'form field "kb" must be given once, as a knowledge base name', "kb");
            kbField = part.value;
            continue;
          }
          if (file) {
            part.file.resume();
            throw new HttpError(
              400,
              "send exactly one file part (attach files one at a time)",
              part.fieldname,
            );
          }
          const name = uploadName(part.filename);
          if (!name) {
            part.file.resume();
            throw new HttpError(400, `file part "${part.fieldname}" has no usable file name`, part.fieldname);
          }
          const storedPath = join(dir, "0");
          await pipeline(part.file, createWriteStream(storedPath));
          if (part.file.truncated) {
            throw new HttpError(
              413,
              `file "${name}" is larger than the upload limit of ${formatBytes(maxFileBytes)}`,
              part.fieldname,
            );
          }
          file = { name, storedPath, bytes: (await stat(storedPath)).size, mimetype: part.mimetype };
        }
        if (!file) throw new HttpError(400, "no file: send one file part as multipart/form-data", "file");
        const queryKb = request.query.kb;
        if (kbField !== undefined && queryKb !== undefined && kbField !== queryKb)
          throw new HttpError(
            400,
            `the form field "kb" ("${kbField}") and the query parameter "kb" ("${queryKb}") differ`,
            "kb",
          );
        const kb = await attachmentKb(tenant, agent, kbField ?? queryKb);
        let documents: Awaited<ReturnType<typeof extractBytes>>;
        try {
          documents = await extractBytes(
            file.name,
            await readFile(file.storedPath),
            undefined,
            kb?.config.extraction ?? {},
            file.mimetype,
          );
        } catch (error) {
          if (error instanceof ExtractionError) throw new HttpError(400, error.message, "file");
          throw error;
        }
        const withText = documents.filter((d) => d.text.trim() !== "");
        if (withText.length === 0)
          throw new HttpError(400, `${file.name}: no text to attach (the extracted text is empty)`, "file");
        const text = withText.map((d) => d.text).join(INLINE_DOCUMENT_SEPARATOR);
        const limit = agent.inlineLimit;
        if (routeText(text, limit) === "inline") {
          return { route: "inline", name: file.name, text, chars: text.length, limit };
        }
        if (!kb) {
          throw new HttpError(
            400,
            `"${file.name}" has ${text.length} characters, over agent "${agent.name}"'s inline limit of ${limit}, so it must be indexed, but the agent has no knowledge base attached: attach one with PUT /agents/${agent.id}/kbs/{kb}`,
            "kb",
          );
        }
        const job = await jobs.submit({
          id,
          dir,
          tenant,
          kb: tenantKbName(tenant, kb.name),
          internalKb: kb.name,
          files: [{ ...file, documents: withText }],
          embed: true,
          textOnly: true,
        });
        submitted = true;
        return reply
          .code(202)
          .header("location", `/jobs/${job.id}`)
          .send({
            route: "retrieve",
            name: file.name,
            kb: tenantKbName(tenant, kb.name),
            chars: text.length,
            limit,
            job,
          });
      } finally {
        if (!submitted) await jobs.release(dir);
      }
    },
  );

  app.post<{ Params: { id: string }; Body: TurnInput }>(
    "/agents/:id/turns",
    { schema: schemas.rememberTurn },
    async (request, reply) => {
      const agent = await requireAgent(request.tenant, request.params.id);
      const memory = await conversations.remember(request.tenant, agent, request.body);
      return reply.code(201).send(memory);
    },
  );

  app.delete<{ Params: { id: string; sessionId: string }; Querystring: { threadId?: string } }>(
    "/agents/:id/sessions/:sessionId",
    { schema: schemas.forgetSession },
    async (request) => {
      const agent = await requireAgent(request.tenant, request.params.id);
      const { sessionId } = request.params;
      const { threadId } = request.query;
      const deleted = await conversations.forget(request.tenant, agent, sessionId, threadId);
      return { sessionId, ...(threadId === undefined ? {} : { threadId }), deleted };
    },
  );

  app.post<{ Params: { id: string }; Body: ContextRequest }>(
    "/agents/:id/context",
    { schema: schemas.context },
    async (request) =>
      conversations.context(
        request.tenant,
        await requireAgent(request.tenant, request.params.id),
        request.body,
      ),
  );

  // ---- search ----

  app.post<{
    Body: {
      query: string;
      kbs?: string[];
      topK?: number;
      mode?: RetrievalMode | "vector";
      minScore?: number;
      filter?: Filter;
    };
  }>("/search", { schema: schemas.search }, async (request) => {
    const { tenant } = request;
    const body = request.body;
    const kbs: string[] = [];
    if (body.kbs) for (const name of body.kbs) kbs.push((await requireKb(tenant, name)).name);
    else for (const k of await kl.knowledgeBases()) if (ownsKb(tenant, k.name)) kbs.push(k.name);
    if (kbs.length === 0) {
      return {
        query: body.query,
        kbs: [],
        results: [],
        warnings: ["there are no knowledge bases to search: create one with POST /kbs"],
        tookMs: 0,
      };
    }
    const response = await kl.search(body.query, {
      kbs,
      topK: body.topK,
      mode: body.mode,
      minScore: body.minScore,
      filter: tenantFilter(tenant, body.filter),
    });
    return searchView(tenant, response);
  });

  return app;
}

/** Adds an upload's `meta` field (`key=value`, or a JSON object of them) or `tag` field to `into`. */
function addUploadMetadata(
  into: { meta: Record<string, FilterScalar>; tags: string[] },
  field: "meta" | "tag",
  value: string,
): void {
  if (field === "tag") {
    into.tags.push(value);
    return;
  }
  const text = value.trim();
  if (text.startsWith("{")) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (error) {
      throw new HttpError(400, `form field "meta": not valid JSON: ${(error as Error).message}`, "meta");
    }
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed))
      throw new HttpError(400, 'form field "meta": expected a JSON object or key=value', "meta");
    Object.assign(into.meta, parsed);
    return;
  }
  const eq = text.indexOf("=");
  if (eq <= 0) throw new HttpError(400, 'form field "meta": expected key=value or a JSON object', "meta");
  into.meta[text.slice(0, eq).trim()] = text.slice(eq + 1);
}

/**
 * A request's filter, validated (a FilterError names the position: 400), with the tenant's
 * KB names in `kb` conditions turned into catalog names.
 */
function tenantFilter(tenant: string, filter: Filter | undefined): Filter | undefined {
  if (filter === undefined) return undefined;
  parseFilter(filter);
  return mapFilterValues(filter, "kb", (name) => internalKbName(tenant, name));
}

/**
 * An upload's file name without directories, control characters or `#` (which
 * separates child documents in a uri), at most 255 characters; undefined when
 * nothing usable is left.
 */
export function uploadName(raw: string | undefined): string | undefined {
  const base = (raw ?? "").split(/[\\/]/).pop() ?? "";
  const clean = [...base]
    .filter((ch) => ch.charCodeAt(0) >= 0x20 && ch !== "\u007f")
    .join("")
    .replace(/#/g, "_")
    .trim()
    .slice(0, 255);
  if (!clean || clean === "." || clean === "..") return undefined;
  return clean;
}

/**
 * The 400 message for a second file part named `name` (part `part`, client name
 * `raw`) in one upload, naming both parts and, when the client's names differ
 * (`a/x.md`, `b/x.md`), both of those.
 */
function duplicateUploadMessage(
  name: string,
  earlier: { raw: string; part: number },
  raw: string,
  part: number,
): string {
  const names =
    earlier.raw === raw ? "" : ` (sent as ${JSON.stringify(earlier.raw)} and ${JSON.stringify(raw)})`;
  return `file "${name}" is in the upload twice, as file parts ${earlier.part} and ${part}${names}: a file's name is its document's uri, so each file of an upload needs its own name; rename one (nothing was stored)`;
}

const isObject = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

/** Reranker types that run offline on the bundled model (from the rerankers' registry). */
const OFFLINE_RERANKERS = offlineNamesOf(RERANKERS);
/** Embedding providers, and their models, that run offline (from the providers' registry). */
const OFFLINE_EMBEDDING_PROVIDERS = offlineNamesOf(EMBEDDING_PROVIDER_REGISTRY);
const OFFLINE_EMBEDDING_MODELS: readonly unknown[] = OFFLINE_EMBEDDING_PROVIDERS.flatMap(
  (p) => (EMBEDDING_PROVIDER_REGISTRY as Registry)[p]?.settings.model?.enum ?? [],
);
/** Vector stores in the data directory (from the stores' registry). */
const OFFLINE_VECTOR_STORES = offlineNamesOf(VECTOR_STORES);

/**
 * Refuses settings that make the server call other services or read its files,
 * unless `allow`: embedding providers other than the bundled model, vector stores
 * other than the embedded one, cross-encoder/Cohere/LLM rerankers and LLM query
 * expansion. A vector-store collection is never accepted (it could name another
 * KB's collection).
 * @throws HttpError 400 naming the field.
 */
export function checkTenantSettings(settings: Obj, allow: boolean): void {
  const { embedding, vectorStore, retrieval } = settings;
  if (isObject(vectorStore) && vectorStore.collection !== undefined) {
    throw new HttpError(
      400,
      "vectorStore.collection cannot be set through the API (each knowledge base gets its own)",
      "vectorStore.collection",
    );
  }
  // Extraction limits protect the server (zip bombs, huge PDFs): a tenant may lower them, never raise them.
  const extraction = settings.extraction;
  const limits = isObject(extraction) ? extraction.limits : undefined;
  if (isObject(limits)) {
    for (const [key, value] of Object.entries(limits)) {
      const cap = (DEFAULT_EXTRACTION_LIMITS as unknown as Record<string, number>)[key];
      if (cap !== undefined && typeof value === "number" && value > cap) {
        throw new HttpError(
          400,
          `extraction.limits.${key} cannot exceed the server's limit ${cap} (got ${value})`,
          `extraction.limits.${key}`,
        );
      }
    }
  }
  if (allow) return;
  const hint =
    "this server lets tenants use only offline services (start kl serve with --allow-tenant-services)";
  if (isObject(embedding)) {
    for (const [key, value] of Object.entries(embedding)) {
      const ok =
        (key === "provider" && OFFLINE_EMBEDDING_PROVIDERS.includes(String(value))) ||
        (key === "model" && OFFLINE_EMBEDDING_MODELS.includes(value));
      if (!ok) throw new HttpError(400, `embedding.${key} cannot be set: ${hint}`, `embedding.${key}`);
    }
  } else if (embedding !== undefined) throw new HttpError(400, "embedding must be an object", "embedding");
  if (isObject(vectorStore)) {
    for (const [key, value] of Object.entries(vectorStore)) {
      if (!(key === "type" && OFFLINE_VECTOR_STORES.includes(String(value))))
        throw new HttpError(400, `vectorStore.${key} cannot be set: ${hint}`, `vectorStore.${key}`);
    }
  } else if (vectorStore !== undefined)
    throw new HttpError(400, "vectorStore must be an object", "vectorStore");
  if (isObject(settings.chunking) && settings.chunking.contextLlm !== undefined)
    throw new HttpError(400, `chunking.contextLlm cannot be set: ${hint}`, "chunking.contextLlm");
  if (isObject(retrieval)) {
    if (retrieval.expansionLlm !== undefined)
      throw new HttpError(400, `retrieval.expansionLlm cannot be set: ${hint}`, "retrieval.expansionLlm");
    const reranker = retrieval.reranker;
    if (reranker !== undefined) {
      const type = isObject(reranker) ? reranker.type : undefined;
      if (!OFFLINE_RERANKERS.includes(String(type))) {
        throw new HttpError(
          400,
          `retrieval.reranker.type must be one of ${OFFLINE_RERANKERS.join(", ")} (got ${JSON.stringify(type)}): ${hint}`,
          "retrieval.reranker.type",
        );
      }
    }
  }
}
