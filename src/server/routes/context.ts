/**
 * What the route groups of the HTTP API (`src/server/routes/*.ts`) share: the
 * {@link RouteContext} `buildServer` hands each of them, and the lookups, views and
 * checks several groups use.
 */
import type { ServerResponse } from "node:http";
import type { FastifyInstance } from "fastify";
import type { Agent, KbRecord, KnowledgeLayer, SearchResponse } from "../../knowledge-layer.js";
import { type Filter, mapFilterValues, parseFilter } from "../../retrieve/filter.js";
import type { AgentConversations } from "../conversations.js";
import { HttpError } from "../errors.js";
import type { JobManager } from "../jobs.js";
import { internalKbName, kbNameProblem, tenantKbName, tenantText } from "../tenancy.js";

/** The app, the facade and the server's state, as `buildServer` sets them up. */
export interface RouteContext {
  app: FastifyInstance;
  kl: KnowledgeLayer;
  jobs: JobManager;
  conversations: AgentConversations;
  /** Open job event streams, ended when the server closes. */
  streams: Set<ServerResponse>;
  /** Largest uploaded file, in bytes. */
  maxFileBytes: number;
  /** See `ServerOptions.allowTenantServices`. */
  allowServices: boolean;
  /** The package's version, as `/health` and the OpenAPI document show it. */
  version: string;
}

/** The tenant's KB `name`, or a 404 (also for another tenant's KB). */
export async function requireKb(kl: KnowledgeLayer, tenant: string, name: string): Promise<KbRecord> {
  const kb = kbNameProblem(tenant, name) ? undefined : await kl.findKb(internalKbName(tenant, name));
  if (!kb) throw new HttpError(404, `knowledge base "${name}" not found`);
  return kb;
}

/** The tenant's agent `id`, or a 404 (also for another tenant's agent). */
export async function requireAgent(kl: KnowledgeLayer, tenant: string, id: string): Promise<Agent> {
  const agent = await kl.getAgent(tenant, id);
  if (!agent) throw new HttpError(404, `agent "${id}" not found`);
  return agent;
}

/** Catalog names of attachments, checked to be the tenant's KBs (`field` names the body path). */
export async function resolveAttachment(
  kl: KnowledgeLayer,
  tenant: string,
  kb: string,
  field?: string,
): Promise<string> {
  const internal = kbNameProblem(tenant, kb) ? undefined : internalKbName(tenant, kb);
  if (!internal || !(await kl.findKb(internal))) {
    if (field) throw new HttpError(400, `unknown knowledge base "${kb}"`, field);
    throw new HttpError(404, `knowledge base "${kb}" not found`);
  }
  return internal;
}

/** A search response in the tenant's names. */
export function searchView(tenant: string, response: SearchResponse) {
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
}

/**
 * A request's filter, validated (a FilterError names the position: 400), with the tenant's
 * KB names in `kb` conditions turned into catalog names.
 */
export function tenantFilter(tenant: string, filter: Filter | undefined): Filter | undefined {
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
