/**
 * Tenancy of the HTTP API: authentication by API keys scoped to a tenant, and the mapping between a
 * tenant's knowledge-base names and the catalog's.
 *
 * A tenant's KB `docs` is the catalog KB `<tenant>.docs` (tenant names have no dot,
 * so the split is unambiguous). Every route resolves names through this module, so
 * a key only ever reaches names under its own prefix; another tenant's resource is
 * simply not found (404). API keys (random 32-byte tokens shown once, stored as their
 * SHA-256) are kept by the library: `KnowledgeLayer.createApiKey`, `tenantOfApiKey`, ….
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { KnowledgeLayer } from "../knowledge-layer.js";

declare module "fastify" {
  interface FastifyRequest {
    /** The tenant of the request's API key (empty on public routes). */
    tenant: string;
  }
  interface FastifyContextConfig {
    /** Route needs no API key (`/health`, `/openapi.json`). */
    public?: boolean;
  }
}

/** Longest catalog KB name (see `validateKbConfig`). */
const MAX_KB_NAME = 64;

/** Tenant-visible KB names: letters, digits, `_`, `.`, `-`, starting with a letter or digit. */
const KB_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;

/**
 * Why `name` cannot be one of `tenant`'s KB names, or undefined when it can.
 * The catalog name `<tenant>.<name>` must fit the catalog's 64 characters.
 */
export function kbNameProblem(tenant: string, name: string): string | undefined {
  const max = MAX_KB_NAME - tenant.length - 1;
  if (!KB_NAME.test(name) || name.length > max) {
    return `invalid knowledge base name "${name}": use 1-${max} letters, digits, '_', '-' or '.', starting with a letter or digit`;
  }
  return undefined;
}

/** The catalog name of `tenant`'s KB `name` (check it with {@link kbNameProblem} first). */
export function internalKbName(tenant: string, name: string): string {
  return `${tenant}.${name}`;
}

/** True when the catalog KB `internal` belongs to `tenant`. */
export function ownsKb(tenant: string, internal: string): boolean {
  return internal.startsWith(`${tenant}.`) && internal.length > tenant.length + 1;
}

/** The tenant's name of its catalog KB `internal`. */
export function tenantKbName(tenant: string, internal: string): string {
  return ownsKb(tenant, internal) ? internal.slice(tenant.length + 1) : internal;
}

/**
 * A library message rewritten to the tenant's view: catalog KB names (`"acme.docs"`,
 * collection `kb_acme.docs`) lose the tenant prefix, and lists of existing KBs (which
 * would name other tenants') are dropped.
 */
export function tenantText(text: string, tenant: string): string {
  return text
    .split(`"${tenant}.`)
    .join('"')
    .split(`kb_${tenant}.`)
    .join("kb_")
    .replace(/ \(existing: [^)]*\)/g, "");
}

/**
 * Requires `Authorization: Bearer <key>` on every route not marked `config.public`
 * and sets `request.tenant`; a missing or unknown key is a 401 (before the body is read).
 */
export function installAuth(app: FastifyInstance, kl: KnowledgeLayer): void {
  app.decorateRequest("tenant", "");
  app.addHook("onRequest", async (request: FastifyRequest, reply: FastifyReply) => {
    if (request.routeOptions.config?.public) return;
    const header = request.headers.authorization;
    const match = typeof header === "string" ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
    const deny = (error: string) =>
      reply.code(401).header("www-authenticate", 'Bearer realm="knowledge-layer"').send({ error });
    if (!match?.[1]) return deny("missing API key: send Authorization: Bearer <key>");
    const tenant = await kl.tenantOfApiKey(match[1]);
    if (!tenant) return deny("invalid API key");
    request.tenant = tenant;
  });
}

/**
 * The embedding-cache scope of a catalog KB name (`KnowledgeLayer.open({ cacheScope })`):
 * its tenant, the part before the first dot; `""` for KBs outside any tenant.
 */
export function tenantScope(internal: string): string {
  const dot = internal.indexOf(".");
  return dot > 0 ? internal.slice(0, dot) : "";
}
