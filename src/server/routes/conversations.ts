/**
 * The conversation routes of an agent (`/agents/:id/…`): attachments (inlined, or
 * indexed into an attached KB by a job), conversation memory (turns, sessions) and
 * context assembly (see `../conversations.ts`).
 */
import { createWriteStream } from "node:fs";
import { readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { INLINE_DOCUMENT_SEPARATOR, routeText } from "../../agent/routing.js";
import { ExtractionError } from "../../errors.js";
import { extractBytes } from "../../extract/index.js";
import type { Agent, KbRecord } from "../../knowledge-layer.js";
import type { ContextRequest, TurnInput } from "../conversations.js";
import { formatBytes, HttpError } from "../errors.js";
import type { UploadedFile } from "../jobs.js";
import { schemas } from "../schemas.js";
import { tenantKbName } from "../tenancy.js";
import { type RouteContext, requireAgent, resolveAttachment, uploadName } from "./context.js";

/** Registers `/agents/:id/attachments`, `/turns`, `/sessions/:sessionId` and `/context`. */
export function registerConversationRoutes({
  app,
  kl,
  jobs,
  conversations,
  maxFileBytes,
}: RouteContext): void {
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
    const internal = await resolveAttachment(kl, tenant, name, "kb");
    if (!agent.kbs.some((a) => a.kb === internal))
      throw new HttpError(400, `knowledge base "${name}" is not attached to agent "${agent.id}"`, "kb");
    return kl.findKb(internal);
  };

  app.post<{ Params: { id: string }; Querystring: { kb?: string } }>(
    "/agents/:id/attachments",
    { schema: schemas.attachToAgent },
    async (request, reply) => {
      const { tenant } = request;
      const agent = await requireAgent(kl, tenant, request.params.id);
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
      const agent = await requireAgent(kl, request.tenant, request.params.id);
      const memory = await conversations.remember(request.tenant, agent, request.body);
      return reply.code(201).send(memory);
    },
  );

  app.delete<{ Params: { id: string; sessionId: string }; Querystring: { threadId?: string } }>(
    "/agents/:id/sessions/:sessionId",
    { schema: schemas.forgetSession },
    async (request) => {
      const agent = await requireAgent(kl, request.tenant, request.params.id);
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
        await requireAgent(kl, request.tenant, request.params.id),
        request.body,
      ),
  );
}
