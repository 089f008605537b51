/**
 * Tenancy of the HTTP API: API keys scoped to a tenant, and the mapping between a
 * tenant's knowledge-base names and the catalog's.
 *
 * A tenant's KB `docs` is the catalog KB `<tenant>.docs` (tenant names have no dot,
 * so the split is unambiguous). Every route resolves names through this module, so
 * a key only ever reaches names under its own prefix; another tenant's resource is
 * simply not found (404). API keys are random 32-byte tokens shown once; only their
 * SHA-256 is stored, in the `server_api_keys` table of `kl.db`.
 */
import { createHash, randomBytes, randomUUID } from "node:crypto";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { KnowledgeLayerError } from "../errors.js";
import type { Db } from "../store/database.js";

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

/** Tenant names: 1-32 letters, digits, `_` or `-`, starting with a letter or digit (no dot). */
export const TENANT_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$/;

/** Longest catalog KB name (see `validateKbConfig`). */
const MAX_KB_NAME = 64;

/** Tenant-visible KB names: letters, digits, `_`, `.`, `-`, starting with a letter or digit. */
const KB_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;

/**
 * Checks a tenant name.
 * @throws KnowledgeLayerError naming the tenant and the rule it breaks.
 */
export function checkTenant(tenant: string): string {
  if (!TENANT_PATTERN.test(tenant)) {
    throw new KnowledgeLayerError(
      `invalid tenant "${tenant}": use 1-32 letters, digits, '_' or '-', starting with a letter or digit`,
    );
  }
  return tenant;
}

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

/** A stored API key, without its secret. */
export interface ApiKeyInfo {
  id: string;
  tenant: string;
  label: string | null;
  createdAt: string;
}

/** Creates the API key table in `kl.db` if it does not exist. */
export function ensureApiKeyTable(db: Db): void {
  db.exec(`
CREATE TABLE IF NOT EXISTS server_api_keys (
  id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  key_hash TEXT NOT NULL UNIQUE,
  label TEXT,
  created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS server_api_keys_tenant ON server_api_keys (tenant);
`);
}

/** SHA-256 (hex) of an API key, as stored. */
export function hashApiKey(key: string): string {
  return createHash("sha256").update(key, "utf8").digest("hex");
}

/**
 * Creates an API key for `tenant` and returns it with its id. The key itself is
 * returned only here: the database keeps its SHA-256.
 * @throws KnowledgeLayerError for an invalid tenant name.
 */
export function createApiKey(db: Db, tenant: string, label?: string): ApiKeyInfo & { key: string } {
  checkTenant(tenant);
  ensureApiKeyTable(db);
  const key = `kl_${randomBytes(32).toString("base64url")}`;
  const id = `key_${randomUUID().replace(/-/g, "").slice(0, 16)}`;
  const createdAt = new Date().toISOString();
  db.prepare(
    "INSERT INTO server_api_keys (id, tenant, key_hash, label, created_at) VALUES (?, ?, ?, ?, ?)",
  ).run(id, tenant, hashApiKey(key), label ?? null, createdAt);
  return { id, tenant, label: label ?? null, createdAt, key };
}

/** Lists API keys (all, or one tenant's), oldest first, without secrets. */
export function listApiKeys(db: Db, tenant?: string): ApiKeyInfo[] {
  ensureApiKeyTable(db);
  const rows = (
    tenant === undefined
      ? db.prepare("SELECT id, tenant, label, created_at FROM server_api_keys ORDER BY created_at, id").all()
      : db
          .prepare(
            "SELECT id, tenant, label, created_at FROM server_api_keys WHERE tenant = ? ORDER BY created_at, id",
          )
          .all(tenant)
  ) as { id: string; tenant: string; label: string | null; created_at: string }[];
  return rows.map((r) => ({ id: r.id, tenant: r.tenant, label: r.label, createdAt: r.created_at }));
}

/** Deletes an API key by id; true when it existed. */
export function revokeApiKey(db: Db, id: string): boolean {
  ensureApiKeyTable(db);
  return db.prepare("DELETE FROM server_api_keys WHERE id = ?").run(id).changes > 0;
}

/** The tenant of an API key, or undefined when the key is unknown. */
export function tenantOfKey(db: Db, key: string): string | undefined {
  const row = db.prepare("SELECT tenant FROM server_api_keys WHERE key_hash = ?").get(hashApiKey(key)) as
    | { tenant: string }
    | undefined;
  return row?.tenant;
}

/**
 * Requires `Authorization: Bearer <key>` on every route not marked `config.public`
 * and sets `request.tenant`; a missing or unknown key is a 401 (before the body is read).
 */
export function installAuth(app: FastifyInstance, db: Db): void {
  ensureApiKeyTable(db);
  app.decorateRequest("tenant", "");
  app.addHook("onRequest", async (request: FastifyRequest, reply: FastifyReply) => {
    if (request.routeOptions.config?.public) return;
    const header = request.headers.authorization;
    const match = typeof header === "string" ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
    const deny = (error: string) =>
      reply.code(401).header("www-authenticate", 'Bearer realm="knowledge-layer"').send({ error });
    if (!match?.[1]) return deny("missing API key: send Authorization: Bearer <key>");
    const tenant = tenantOfKey(db, match[1]);
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
