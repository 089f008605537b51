import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { ConfigError, ConflictError, KnowledgeLayerError, NotFoundError } from "../errors.js";
import { FilterError } from "../retrieve/filter.js";
import { redactText } from "../secrets.js";
import { tenantText } from "./tenancy.js";

/**
 * An error with an HTTP status, raised by route handlers. The message is sent to
 * the client as `{ error, field? }`, so it must name the input and the problem and
 * never hold internals (paths, stack traces, other tenants' names).
 */
export class HttpError extends Error {
  constructor(
    readonly statusCode: number,
    message: string,
    /** The request field at fault (dotted path such as `retrieval.topK`), when there is one. */
    readonly field?: string,
  ) {
    super(message);
    this.name = "HttpError";
  }
}

/** Body of every error response. */
export interface ErrorBody {
  error: string;
  /** Dotted path of the request field at fault, when one is. */
  field?: string;
}

/** JSON schema of {@link ErrorBody}, for route response schemas and OpenAPI. */
export const ERROR_SCHEMA = {
  type: "object",
  properties: { error: { type: "string" }, field: { type: "string" } },
  required: ["error"],
} as const;

/** The field a library `ConfigError` names (`knowledge base "x": retrieval.topK must …` → `retrieval.topK`). */
export function configErrorField(message: string): string | undefined {
  if (message.startsWith("invalid knowledge base name")) return "name";
  const m = /^knowledge base "[^"]*": ([A-Za-z][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*):?(?:\s|$)/.exec(message);
  return m?.[1];
}

interface AjvError {
  instancePath?: string;
  keyword?: string;
  message?: string;
  params?: Record<string, unknown>;
}

/** A 400 body from fastify's schema-validation errors: the first error, with its field. */
export function validationBody(errors: AjvError[], context: string | undefined): ErrorBody {
  const e = errors[0] ?? {};
  const base = (e.instancePath ?? "").replace(/^\//, "").replace(/\//g, ".");
  const join = (name: unknown): string => (base ? `${base}.${String(name)}` : String(name));
  const where = context === "querystring" ? "query parameter" : context === "params" ? "path parameter" : "";
  const label = (field: string): string => (where ? `${where} "${field}"` : `"${field}"`);
  switch (e.keyword) {
    case "required": {
      const field = join(e.params?.missingProperty);
      return { error: `${label(field)} is required`, field };
    }
    case "additionalProperties": {
      const field = join(e.params?.additionalProperty);
      return { error: `${label(field)} is not a known field`, field };
    }
    case "enum": {
      const allowed = (e.params?.allowedValues as unknown[] | undefined)?.map((v) => String(v)).join(", ");
      return {
        error: `${label(base || "body")} must be one of ${allowed}`,
        ...(base ? { field: base } : {}),
      };
    }
    default: {
      if (!base) return { error: `request ${where || "body"} ${e.message ?? "is invalid"}` };
      return { error: `${label(base)} ${e.message ?? "is invalid"}`, field: base };
    }
  }
}

/** Human-readable byte size for limit messages (`50 MiB`, `1 KiB`). */
export function formatBytes(n: number): string {
  if (n >= 1024 * 1024 && n % (1024 * 1024) === 0) return `${n / (1024 * 1024)} MiB`;
  if (n >= 1024 * 1024) return `${(n / (1024 * 1024)).toFixed(1)} MiB`;
  if (n >= 1024 && n % 1024 === 0) return `${n / 1024} KiB`;
  return `${n} bytes`;
}

/**
 * Installs the error and not-found handlers: schema errors → 400 `{error, field}`,
 * {@link HttpError} → its status, the library's `NotFoundError` → 404 and `ConflictError` → 409,
 * `ConfigError`/`KnowledgeLayerError` → 400 with the
 * field the message names, fastify's own 4xx errors (bad JSON, body too large,
 * unsupported media type) → their status with a plain message, anything else → 500
 * with a generic message (the error is logged server-side, never sent). Messages are
 * rewritten to the tenant's view of KB names.
 */
export function installErrorHandlers(
  app: FastifyInstance,
  limits: { bodyLimit: number; maxFiles: number },
): void {
  app.setErrorHandler((error: FastifyError & { validationContext?: string }, request, reply) => {
    const send = (status: number, body: ErrorBody): FastifyReply => {
      const tenant = request.tenant;
      const text = redactText(body.error);
      const out: ErrorBody = { error: tenant ? tenantText(text, tenant) : text };
      if (body.field) out.field = body.field;
      return reply.code(status).send(out);
    };
    if (error.validation) return send(400, validationBody(error.validation, error.validationContext));
    if (error instanceof HttpError)
      return send(error.statusCode, { error: error.message, field: error.field });
    if (error instanceof NotFoundError) return send(404, { error: error.message });
    if (error instanceof ConflictError)
      return send(409, { error: error.message, field: (error as ConflictError).field });
    if (error instanceof ConfigError)
      return send(400, { error: error.message, field: configErrorField(error.message) });
    if (error instanceof FilterError)
      return send(400, { error: error.message, field: error.message.slice(0, error.message.indexOf(":")) });
    if (error instanceof KnowledgeLayerError) {
      // A vector store that cannot be reached is the server's problem, not the request's.
      if (/cannot connect to vector store/.test(error.message)) {
        request.log.warn({ err: error }, "vector store unavailable");
        return send(503, { error: error.message });
      }
      return send(400, { error: error.message });
    }
    // busboy's parse errors (a truncated or malformed upload) carry no status: the client's fault.
    if (
      typeof error.statusCode !== "number" &&
      /multipart|Unexpected end of form|part header/i.test(error.message)
    ) {
      return send(400, { error: `malformed multipart body: ${error.message}` });
    }
    const status = typeof error.statusCode === "number" ? error.statusCode : 500;
    if (status >= 400 && status < 500) return send(status, { error: clientMessage(error, limits) });
    request.log.error({ err: error }, "request failed");
    return send(500, { error: "internal server error (details are in the server log)" });
  });
  app.setNotFoundHandler((request: FastifyRequest, reply: FastifyReply) =>
    reply.code(404).send({ error: `no route ${request.method} ${request.url.split("?")[0]}` }),
  );
}

/** The client-facing message of one of fastify's (or a plugin's) own 4xx errors. */
function clientMessage(error: FastifyError, limits: { bodyLimit: number; maxFiles: number }): string {
  switch (error.code) {
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return `request body is larger than the limit of ${formatBytes(limits.bodyLimit)}`;
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      return "unsupported content type: send application/json (or multipart/form-data for uploads)";
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
      return "request body is empty but content-type is application/json";
    case "FST_INVALID_MULTIPART_CONTENT_TYPE":
      return "the request is not multipart/form-data: upload files as multipart/form-data";
    case "FST_FILES_LIMIT":
      return `too many files in one request (the limit is ${limits.maxFiles})`;
    case "FST_PARTS_LIMIT":
      return "too many parts in the multipart request";
    case "FST_ERR_CTP_INVALID_JSON_BODY":
      return "request body is not valid JSON";
    default:
      if (error instanceof SyntaxError) return `request body is not valid JSON: ${error.message}`;
      return error.message;
  }
}
