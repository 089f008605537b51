/**
 * Conversation memory and context assembly of the HTTP API's agents: the
 * library's {@link ConversationMemory}, {@link retrieveForTurn} and
 * {@link assembleContext} behind `POST /agents/:id/turns`,
 * `DELETE /agents/:id/sessions/:sessionId` and `POST /agents/:id/context`.
 *
 * Isolation: the memory tables are shared by every tenant, so a client's session
 * id is stored namespaced as `<tenant>:<agent id>:<session id>` (tenant names have
 * no `:` and agent ids are `agt_<hex>`, so the prefix is unambiguous). Two tenants,
 * or two agents of one tenant, using the same session id never see each other's
 * memories, and deleting an agent forgets its memories. Clients only ever see
 * their own session ids.
 *
 * Memories are embedded with the bundled model on the query lane (so a turn
 * never waits behind an ingest's batches), whatever the agent's KBs use: memory
 * vectors are compared only with each other, never with a KB's.
 */
import {
  type AssembledContext,
  assembleContext,
  ContextBudgetError,
  type RecentMessage,
} from "../agent/context.js";
import { ConversationMemory, type Memory, memoryEmbedding, type RecalledMemory } from "../agent/memory.js";
import { DEFAULT_CHUNK_TOP_K, retrieveForTurn } from "../agent/retrieve.js";
import { defaultKbConfig, type KnowledgeBaseConfig } from "../config.js";
import type { KnowledgeLayer, SearchResult } from "../knowledge-layer.js";
import type { KbRetrievalOverrides } from "../retrieve/search.js";
import { type Agent, attachedKbs, overridesOf } from "./agents.js";
import { HttpError } from "./errors.js";
import { tenantKbName, tenantText } from "./tenancy.js";

/** A turn to remember, as `POST /agents/:id/turns` takes it. */
export interface TurnInput {
  sessionId: string;
  threadId: string;
  user: string;
  assistant: string;
  /** When the turn happened (ISO-8601; default now). */
  at?: string;
}

/** The body of `POST /agents/:id/context`. */
export interface ContextRequest {
  query: string;
  sessionId: string;
  threadId: string;
  system?: string[];
  summaries?: string[];
  anchor?: string;
  recent?: RecentMessage[];
  budget?: number;
  messageLimit?: number;
  /** Document chunks retrieved (default 4; 0 skips document retrieval). */
  chunkTopK?: number;
  /** Memories recalled (default 3; 0 skips memory recall). */
  memoryTopK?: number;
  /** Minimum score of chunks (unless an attachment sets `minScore`) and memories (default 0.45). */
  threshold?: number;
  /** Below-threshold fallback (default true). */
  fallback?: boolean;
}

/** A memory as a client sees it: its own session id. */
export type MemoryView = Omit<Memory, "sessionId"> & {
  sessionId: string;
  score?: number;
  belowThreshold?: boolean;
};

/** The answer of `POST /agents/:id/context`. */
export interface ContextView {
  messages: AssembledContext["messages"];
  parts: AssembledContext["parts"];
  dropped: AssembledContext["dropped"];
  totalChars: number;
  budget: number;
  /** The retrieved chunks, best first, in the tenant's KB names (before the budget: see `dropped`). */
  chunks: SearchResult[];
  /** The recalled memories, best first (before the budget: see `dropped`). */
  memories: MemoryView[];
  warnings: string[];
  tookMs: number;
}

/** Name of the (never stored) KB config the memory embedder is built from. */
const MEMORY_CONFIG = "agent-memory";

/** The (never stored) KB config of the memory embedder: the default one, with the memory model. */
function memoryConfig(): KnowledgeBaseConfig {
  const config = defaultKbConfig(MEMORY_CONFIG);
  return { ...config, embedding: memoryEmbedding(config.embedding) };
}

/** An agent's conversations: memory namespaced per tenant and agent, and turn context. */
export class AgentConversations {
  readonly memory: ConversationMemory;

  constructor(private readonly kl: KnowledgeLayer) {
    this.memory = new ConversationMemory(kl, {
      embedder: kl.embedder(memoryConfig(), "query"),
    });
  }

  /** Stores a turn of one of `agent`'s sessions. */
  async remember(tenant: string, agent: Agent, turn: TurnInput): Promise<MemoryView> {
    const stored = await this.memory.remember({
      ...turn,
      sessionId: sessionKey(tenant, agent.id, turn.sessionId),
    });
    return view(stored, turn.sessionId);
  }

  /** Forgets a session of `agent` (one thread when given); returns how many turns went. */
  forget(tenant: string, agent: Agent, sessionId: string, threadId?: string): Promise<number> {
    return this.memory.forget({ sessionId: sessionKey(tenant, agent.id, sessionId), threadId });
  }

  /** Forgets every session of an agent (when it is deleted); returns how many turns went. */
  forgetAgent(tenant: string, agentId: string): Promise<number> {
    return this.memory.forgetSessionsWithPrefix(sessionKey(tenant, agentId, ""));
  }

  /**
   * Retrieves the turn's chunks (the agent's attached KBs, each with its
   * attachment's settings) and memories (the session's other threads)
   * concurrently, then assembles the context within the budget.
   * @throws HttpError 400 (`budget`) when the kept parts alone exceed the budget.
   */
  async context(tenant: string, agent: Agent, body: ContextRequest): Promise<ContextView> {
    const attached = await attachedKbs(this.kl, agent);
    const perKb: Record<string, KbRetrievalOverrides> = {};
    for (const a of attached) perKb[a.kb] = overridesOf(a.retrievalConfig);
    const warnings: string[] = [];
    let chunkTopK = body.chunkTopK ?? DEFAULT_CHUNK_TOP_K;
    if (attached.length === 0 && chunkTopK > 0) {
      chunkTopK = 0;
      warnings.push(
        `agent "${agent.name}" has no knowledge bases attached, so no document chunks were retrieved: attach one with PUT /agents/${agent.id}/kbs/{kb}`,
      );
    }
    const found = await retrieveForTurn(this.kl, this.memory, {
      query: body.query,
      perKb,
      kbs: attached.map((a) => a.kb),
      sessionId: sessionKey(tenant, agent.id, body.sessionId),
      threadId: body.threadId,
      chunkTopK,
      memoryTopK: body.memoryTopK,
      threshold: body.threshold,
      fallback: body.fallback,
    });
    let assembled: AssembledContext;
    try {
      assembled = assembleContext({
        system: body.system,
        summaries: body.summaries,
        anchor: body.anchor,
        chunks: found.chunks,
        memories: found.memories,
        recent: body.recent,
        budget: body.budget,
        messageLimit: body.messageLimit,
      });
    } catch (error) {
      if (error instanceof ContextBudgetError) throw new HttpError(400, error.message, "budget");
      throw error;
    }
    return {
      messages: assembled.messages,
      parts: assembled.parts,
      dropped: assembled.dropped,
      totalChars: assembled.totalChars,
      budget: assembled.budget,
      chunks: found.chunks.map((r) => ({ ...r, kb: tenantKbName(tenant, r.kb) })),
      memories: found.memories.map((m) => view(m, body.sessionId)),
      warnings: [...warnings, ...found.warnings.map((w) => tenantText(w, tenant))],
      tookMs: found.tookMs,
    };
  }
}

/** The stored session id of a client's session of one agent. */
export function sessionKey(tenant: string, agentId: string, sessionId: string): string {
  return `${tenant}:${agentId}:${sessionId}`;
}

function view(memory: Memory | RecalledMemory, sessionId: string): MemoryView {
  return { ...memory, sessionId };
}
