/**
 * API keys of the HTTP API, scoped to a tenant, in the `server_api_keys` table of
 * `kl.db`. Keys are random 32-byte tokens shown once; only their SHA-256 is stored.
 * Adapters reach them through the facade (`KnowledgeLayer.createApiKey`, …).
 */
import { createHash, randomBytes, randomUUID } from "node:crypto";
import { KnowledgeLayerError } from "../errors.js";
import type { Db } from "./database.js";

/** Tenant names: 1-32 letters, digits, `_` or `-`, starting with a letter or digit (no dot). */
export const TENANT_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$/;

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

/** A stored API key, without its secret. */
export interface ApiKeyInfo {
  id: string;
  tenant: string;
  label: string | null;
  createdAt: string;
}

/** A new API key: its record and the key itself (shown only once). */
export type NewApiKey = ApiKeyInfo & { key: string };

/** SHA-256 (hex) of an API key, as stored. */
export function hashApiKey(key: string): string {
  return createHash("sha256").update(key, "utf8").digest("hex");
}

/** API keys in `kl.db`; creates its table on construction if it does not exist. */
export class ApiKeyStore {
  constructor(private readonly db: Db) {
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

  /**
   * Creates an API key for `tenant` and returns it with its id. The key itself is
   * returned only here: the database keeps its SHA-256.
   * @throws KnowledgeLayerError for an invalid tenant name.
   */
  create(tenant: string, label?: string): NewApiKey {
    checkTenant(tenant);
    const key = `kl_${randomBytes(32).toString("base64url")}`;
    const id = `key_${randomUUID().replace(/-/g, "").slice(0, 16)}`;
    const createdAt = new Date().toISOString();
    this.db
      .prepare("INSERT INTO server_api_keys (id, tenant, key_hash, label, created_at) VALUES (?, ?, ?, ?, ?)")
      .run(id, tenant, hashApiKey(key), label ?? null, createdAt);
    return { id, tenant, label: label ?? null, createdAt, key };
  }

  /** Lists API keys (all, or one tenant's), oldest first, without secrets. */
  list(tenant?: string): ApiKeyInfo[] {
    const rows = (
      tenant === undefined
        ? this.db
            .prepare("SELECT id, tenant, label, created_at FROM server_api_keys ORDER BY created_at, id")
            .all()
        : this.db
            .prepare(
              "SELECT id, tenant, label, created_at FROM server_api_keys WHERE tenant = ? ORDER BY created_at, id",
            )
            .all(tenant)
    ) as { id: string; tenant: string; label: string | null; created_at: string }[];
    return rows.map((r) => ({ id: r.id, tenant: r.tenant, label: r.label, createdAt: r.created_at }));
  }

  /** Deletes an API key by id; true when it existed. */
  revoke(id: string): boolean {
    return this.db.prepare("DELETE FROM server_api_keys WHERE id = ?").run(id).changes > 0;
  }

  /** The tenant of an API key, or undefined when the key is unknown. */
  tenantOf(key: string): string | undefined {
    const row = this.db
      .prepare("SELECT tenant FROM server_api_keys WHERE key_hash = ?")
      .get(hashApiKey(key)) as { tenant: string } | undefined;
    return row?.tenant;
  }
}

/**
 * Creates an API key for `tenant` in the database `db` (see {@link ApiKeyStore.create}).
 * Adapters use `KnowledgeLayer.createApiKey`; this form serves tests and tools holding a database.
 */
export function createApiKey(db: Db, tenant: string, label?: string): NewApiKey {
  return new ApiKeyStore(db).create(tenant, label);
}

/** Lists the API keys of `db` (see {@link ApiKeyStore.list}). */
export function listApiKeys(db: Db, tenant?: string): ApiKeyInfo[] {
  return new ApiKeyStore(db).list(tenant);
}

/** Deletes an API key of `db` by id (see {@link ApiKeyStore.revoke}); true when it existed. */
export function revokeApiKey(db: Db, id: string): boolean {
  return new ApiKeyStore(db).revoke(id);
}
