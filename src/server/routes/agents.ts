/**
 * The agent routes of the HTTP API (`/agents`): create, list, show, change and delete a
 * tenant's agents, attach and detach KBs, and retrieve from the attached KBs.
 */
import type { Agent, AttachmentRetrievalConfig } from "../../knowledge-layer.js";
import { type Filter, parseFilter } from "../../retrieve/filter.js";
import type { KbRetrievalOverrides } from "../../retrieve/search.js";
import { attachedKbs, overridesOf } from "../agents.js";
import { HttpError } from "../errors.js";
import { schemas } from "../schemas.js";
import { internalKbName, kbNameProblem, tenantKbName } from "../tenancy.js";
import { type RouteContext, requireAgent, resolveAttachment, searchView, tenantFilter } from "./context.js";

/** Registers the `/agents` routes but those of conversations (see `conversations.ts`). */
export function registerAgentRoutes({ app, kl, conversations }: RouteContext): void {
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
        kb: await resolveAttachment(kl, tenant, a.kb, `kbs.${i}.kb`),
        retrievalConfig: a.retrievalConfig ?? {},
      });
    }
    const agent = await kl.createAgent(tenant, { ...body, kbs });
    return reply.code(201).header("location", `/agents/${agent.id}`).send(agentView(tenant, agent));
  });

  app.get("/agents", { schema: schemas.listAgents }, async (request) => ({
    agents: (await kl.listAgents(request.tenant)).map((a) => agentView(request.tenant, a)),
  }));

  app.get<{ Params: { id: string } }>("/agents/:id", { schema: schemas.getAgent }, async (request) =>
    agentView(request.tenant, await requireAgent(kl, request.tenant, request.params.id)),
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
    await requireAgent(kl, tenant, request.params.id);
    const internal = await resolveAttachment(kl, tenant, request.params.kb);
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
      await requireAgent(kl, tenant, request.params.id);
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
      const agent = await requireAgent(kl, tenant, request.params.id);
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
}
