/**
 * Agents: a named retrieval profile of a tenant with attached knowledge bases, each
 * with its own retrieval settings (most results, minimum score, mode, fixed filter),
 * and the inline limit of its attachments. Stored in `kl.db` (`server_agents`,
 * `server_agent_kbs`), created by {@link AgentStore} itself. KBs are recorded by
 * their catalog name. Adapters reach agents through the facade
 * (`KnowledgeLayer.createAgent`, …); an agent's conversation memory lives in the
 * memory tables (see `memories.ts`).
 */
import { randomUUID } from "node:crypto";
import { DEFAULT_INLINE_LIMIT, type RetrievalMode } from "../config.js";
import { ConflictError, NotFoundError } from "../errors.js";
import type { Filter } from "../retrieve/filter.js";
import type { Db } from "./database.js";

/** Per-attachment retrieval settings, passed to search as that KB's `perKb` overrides. */
export interface AttachmentRetrievalConfig {
  /** Most results this KB contributes. */
  maxResults?: number;
  /** Minimum final score of this KB's results (0: none). */
  minScore?: number;
  /** Retrieval strategy for this KB (default the KB's own). */
  mode?: RetrievalMode;
  /**
   * A metadata filter that always applies to this KB's results (in the tenant's KB names),
   * ANDed with a request's own filter, so an agent can never see past it.
   */
  filter?: Filter;
}

/** A KB attached to an agent. */
export interface Attachment {
  /** Catalog name of the KB. */
  kb: string;
  retrievalConfig: AttachmentRetrievalConfig;
  attachedAt: string;
}

/** A stored agent. */
export interface Agent {
  id: string;
  tenant: string;
  name: string;
  description: string | null;
  /** Results a retrieval returns when the request gives no `topK`. */
  topK: number;
  /**
   * Largest attachment text, in characters, answered inline by
   * `POST /agents/:id/attachments` (longer ones are indexed). Default 3,000.
   */
  inlineLimit: number;
  kbs: Attachment[];
  createdAt: string;
  updatedAt: string;
}

/** What a new agent is made of (see {@link AgentStore.create}). */
export interface AgentInput {
  name: string;
  description?: string;
  /** Results a retrieval returns when the request gives no `topK` (default 5). */
  topK?: number;
  /** Largest attachment text, in characters, answered inline (default 3,000). */
  inlineLimit?: number;
  /** KBs (catalog names) to attach, each with its retrieval settings. */
  kbs?: { kb: string; retrievalConfig?: AttachmentRetrievalConfig }[];
}

/** The changeable fields of an agent (`description: null` clears it). */
export interface AgentPatch {
  name?: string;
  description?: string | null;
  topK?: number;
  inlineLimit?: number;
}

/** Default `topK` of a new agent. */
export const DEFAULT_AGENT_TOP_K = 5;

interface AgentRow {
  id: string;
  tenant: string;
  name: string;
  description: string | null;
  top_k: number;
  inline_limit: number;
  created_at: string;
  updated_at: string;
}

/** Agents and their KB attachments in `kl.db`, always read and written within one tenant. */
export class AgentStore {
  constructor(private readonly db: Db) {
    db.exec(`
CREATE TABLE IF NOT EXISTS server_agents (
  id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  name TEXT NOT NULL,
  description TEXT,
  top_k INTEGER NOT NULL,
  inline_limit INTEGER NOT NULL DEFAULT ${DEFAULT_INLINE_LIMIT},
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  UNIQUE (tenant, name)
);
CREATE TABLE IF NOT EXISTS server_agent_kbs (
  agent_id TEXT NOT NULL REFERENCES server_agents (id) ON DELETE CASCADE,
  kb TEXT NOT NULL,
  retrieval_config TEXT NOT NULL,
  attached_at TEXT NOT NULL,
  PRIMARY KEY (agent_id, kb)
);
CREATE INDEX IF NOT EXISTS server_agent_kbs_kb ON server_agent_kbs (kb);
`);
    // Tables created before agents had an inline limit.
    const columns = db.prepare("PRAGMA table_info(server_agents)").all() as { name: string }[];
    if (!columns.some((c) => c.name === "inline_limit")) {
      db.exec(
        `ALTER TABLE server_agents ADD COLUMN inline_limit INTEGER NOT NULL DEFAULT ${DEFAULT_INLINE_LIMIT}`,
      );
    }
  }

  /**
   * Creates an agent with its attachments in one transaction.
   * @throws ConflictError (field `name`) when the tenant already has an agent of that name.
   */
  create(tenant: string, input: AgentInput): Agent {
    const id = `agt_${randomUUID().replace(/-/g, "").slice(0, 20)}`;
    const now = new Date().toISOString();
    this.db
      .transaction(() => {
        this.assertNameFree(tenant, input.name);
        this.db
          .prepare(
            "INSERT INTO server_agents (id, tenant, name, description, top_k, inline_limit, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
          )
          .run(
            id,
            tenant,
            input.name,
            input.description ?? null,
            input.topK ?? DEFAULT_AGENT_TOP_K,
            input.inlineLimit ?? DEFAULT_INLINE_LIMIT,
            now,
            now,
          );
        for (const a of input.kbs ?? []) this.attach(id, a.kb, a.retrievalConfig ?? {}, now);
      })
      .immediate();
    return this.get(tenant, id) as Agent;
  }

  /** The tenant's agents by name. */
  list(tenant: string): Agent[] {
    const rows = this.db
      .prepare("SELECT * FROM server_agents WHERE tenant = ? ORDER BY name")
      .all(tenant) as AgentRow[];
    return rows.map((r) => this.toAgent(r));
  }

  /** One of the tenant's agents, or undefined (also when it belongs to another tenant). */
  get(tenant: string, id: string): Agent | undefined {
    const row = this.db.prepare("SELECT * FROM server_agents WHERE id = ? AND tenant = ?").get(id, tenant) as
      | AgentRow
      | undefined;
    return row && this.toAgent(row);
  }

  /**
   * Updates an agent's name, description, default topK or inline limit (`null` clears the description).
   * @throws NotFoundError for an unknown agent; ConflictError for a name another agent of the tenant has.
   */
  update(tenant: string, id: string, patch: AgentPatch): Agent {
    this.db
      .transaction(() => {
        const agent = this.require(tenant, id);
        if (patch.name !== undefined && patch.name !== agent.name) this.assertNameFree(tenant, patch.name);
        this.db
          .prepare(
            "UPDATE server_agents SET name = ?, description = ?, top_k = ?, inline_limit = ?, updated_at = ? WHERE id = ?",
          )
          .run(
            patch.name ?? agent.name,
            patch.description === undefined ? agent.description : patch.description,
            patch.topK ?? agent.topK,
            patch.inlineLimit ?? agent.inlineLimit,
            new Date().toISOString(),
            id,
          );
      })
      .immediate();
    return this.get(tenant, id) as Agent;
  }

  /** Deletes an agent and its attachments; false when the tenant has no such agent. */
  delete(tenant: string, id: string): boolean {
    return (
      this.db.prepare("DELETE FROM server_agents WHERE id = ? AND tenant = ?").run(id, tenant).changes > 0
    );
  }

  /**
   * Attaches a KB (catalog name) to an agent, or replaces the attachment's retrieval settings.
   * @throws NotFoundError for an unknown agent.
   */
  setAttachment(tenant: string, id: string, kb: string, config: AttachmentRetrievalConfig): Agent {
    this.db
      .transaction(() => {
        this.require(tenant, id);
        this.attach(id, kb, config, new Date().toISOString());
        this.touch(id);
      })
      .immediate();
    return this.get(tenant, id) as Agent;
  }

  /**
   * Detaches a KB (catalog name) from an agent; `shownName` is the KB's name in the
   * error message (default the catalog name).
   * @throws NotFoundError for an unknown agent or a KB that is not attached.
   */
  detach(tenant: string, id: string, kb: string, shownName = kb): Agent {
    this.db
      .transaction(() => {
        this.require(tenant, id);
        const gone = this.db
          .prepare("DELETE FROM server_agent_kbs WHERE agent_id = ? AND kb = ?")
          .run(id, kb);
        if (gone.changes === 0)
          throw new NotFoundError(`knowledge base "${shownName}" is not attached to agent "${id}"`);
        this.touch(id);
      })
      .immediate();
    return this.get(tenant, id) as Agent;
  }

  /** Removes a KB (catalog name) from every agent, when the KB is deleted. */
  detachEverywhere(kb: string): void {
    this.db.prepare("DELETE FROM server_agent_kbs WHERE kb = ?").run(kb);
  }

  private attach(id: string, kb: string, config: AttachmentRetrievalConfig, now: string): void {
    this.db
      .prepare(
        `INSERT INTO server_agent_kbs (agent_id, kb, retrieval_config, attached_at) VALUES (?, ?, ?, ?)
         ON CONFLICT (agent_id, kb) DO UPDATE SET retrieval_config = excluded.retrieval_config`,
      )
      .run(id, kb, JSON.stringify(config), now);
  }

  private touch(id: string): void {
    this.db.prepare("UPDATE server_agents SET updated_at = ? WHERE id = ?").run(new Date().toISOString(), id);
  }

  private require(tenant: string, id: string): Agent {
    const agent = this.get(tenant, id);
    if (!agent) throw new NotFoundError(`agent "${id}" not found`);
    return agent;
  }

  private assertNameFree(tenant: string, name: string): void {
    const taken = this.db
      .prepare("SELECT id FROM server_agents WHERE tenant = ? AND name = ?")
      .get(tenant, name) as { id: string } | undefined;
    if (taken) throw new ConflictError(`an agent named "${name}" already exists (id ${taken.id})`, "name");
  }

  private toAgent(r: AgentRow): Agent {
    const kbs = (
      this.db
        .prepare(
          "SELECT kb, retrieval_config, attached_at FROM server_agent_kbs WHERE agent_id = ? ORDER BY attached_at, kb",
        )
        .all(r.id) as { kb: string; retrieval_config: string; attached_at: string }[]
    ).map((a) => ({ kb: a.kb, retrievalConfig: JSON.parse(a.retrieval_config), attachedAt: a.attached_at }));
    return {
      id: r.id,
      tenant: r.tenant,
      name: r.name,
      description: r.description,
      topK: r.top_k,
      inlineLimit: r.inline_limit,
      kbs,
      createdAt: r.created_at,
      updatedAt: r.updated_at,
    };
  }
}
