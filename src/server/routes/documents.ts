/**
 * The document routes of the HTTP API (`/kbs/:kb/documents`): uploads (stored, then
 * ingested by a background job), listing with a filter, one document, deletion.
 */
import { createWriteStream } from "node:fs";
import { stat } from "node:fs/promises";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { checkUserMetadata } from "../../ingest/pipeline.js";
import { type Filter, type FilterScalar, parseFilterJson } from "../../retrieve/filter.js";
import { deleteDocuments, getDocument, listDocuments } from "../documents.js";
import { formatBytes, HttpError } from "../errors.js";
import type { UploadedFile } from "../jobs.js";
import { schemas } from "../schemas.js";
import { type RouteContext, requireKb, tenantFilter, uploadName } from "./context.js";

/** Registers the `/kbs/:kb/documents` routes. */
export function registerDocumentRoutes({ app, kl, jobs, maxFileBytes }: RouteContext): void {
  app.post<{ Params: { kb: string }; Querystring: { embed?: "true" | "false" } }>(
    "/kbs/:kb/documents",
    { schema: schemas.uploadDocuments },
    async (request, reply) => {
      const { tenant } = request;
      const kb = await requireKb(kl, tenant, request.params.kb);
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
      const kb = await requireKb(kl, tenant, request.params.kb);
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
      const kb = await requireKb(kl, request.tenant, request.params.kb);
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
      const kb = await requireKb(kl, request.tenant, request.params.kb);
      const deleted = await deleteDocuments(kl, kb, [Number(request.params.id)]);
      if (deleted === 0)
        throw new HttpError(
          404,
          `document ${request.params.id} not found in knowledge base "${request.params.kb}"`,
        );
      return reply.code(204).send();
    },
  );
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
