/**
 * Conversation-memory rows of `agent/memory.ts` in `kl.db`: turns (`agent_memories`)
 * and their vectors, one per embedding model (`agent_memory_vectors`). Recall itself
 * (embedding, cosine ranking, thresholds) lives in `ConversationMemory`; this module
 * only stores and reads. Reached through `KnowledgeLayer.memories`.
 */
import { blobToVector, type Db, vectorToBlob } from "./database.js";

const SCHEMA = `
CREATE TABLE IF NOT EXISTS agent_memories (
  id INTEGER PRIMARY KEY,
  session_id TEXT NOT NULL,
  thread_id TEXT NOT NULL,
  at TEXT NOT NULL,
  user_text TEXT NOT NULL,
  assistant_text TEXT NOT NULL,
  text TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS agent_memories_session ON agent_memories (session_id, thread_id);
CREATE TABLE IF NOT EXISTS agent_memory_vectors (
  memory_id INTEGER NOT NULL REFERENCES agent_memories (id) ON DELETE CASCADE,
  provider TEXT NOT NULL,
  model TEXT NOT NULL,
  dimension INTEGER NOT NULL,
  vector BLOB NOT NULL,
  PRIMARY KEY (memory_id, provider, model)
);
`;

/** A stored turn. */
export interface Memory {
  id: number;
  sessionId: string;
  threadId: string;
  /** ISO-8601 time of the turn. */
  at: string;
  user: string;
  assistant: string;
  /** The embedded text: `User: …\nAssistant: …`. */
  text: string;
}

/** The embedding model a memory vector was made with. */
export interface MemoryModel {
  provider: string;
  model: string;
}

interface MemoryRow {
  id: number;
  session_id: string;
  thread_id: string;
  at: string;
  user_text: string;
  assistant_text: string;
  text: string;
}

/** Memory turns and their vectors in `kl.db`; creates the tables on construction if needed. */
export class MemoryStore {
  constructor(private readonly db: Db) {
    db.exec(SCHEMA);
  }

  /** Stores a turn with its vector of `model` in one transaction; returns the stored turn. */
  insert(turn: Omit<Memory, "id">, vector: Float32Array, model: MemoryModel): Memory {
    const id = this.db
      .transaction(() => {
        const info = this.db
          .prepare(
            "INSERT INTO agent_memories (session_id, thread_id, at, user_text, assistant_text, text) VALUES (?, ?, ?, ?, ?, ?)",
          )
          .run(turn.sessionId, turn.threadId, turn.at, turn.user, turn.assistant, turn.text);
        const memoryId = Number(info.lastInsertRowid);
        this.storeVector(memoryId, vector, model);
        return memoryId;
      })
      .immediate();
    return { id, ...turn };
  }

  /**
   * A session's turns, oldest first: of one thread with `threadId`, of every thread but
   * one with `exceptThread`, else all.
   */
  list(sessionId: string, options: { threadId?: string; exceptThread?: string } = {}): Memory[] {
    const rows = (
      options.threadId !== undefined
        ? this.db
            .prepare("SELECT * FROM agent_memories WHERE session_id = ? AND thread_id = ? ORDER BY id")
            .all(sessionId, options.threadId)
        : options.exceptThread !== undefined
          ? this.db
              .prepare("SELECT * FROM agent_memories WHERE session_id = ? AND thread_id <> ? ORDER BY id")
              .all(sessionId, options.exceptThread)
          : this.db.prepare("SELECT * FROM agent_memories WHERE session_id = ? ORDER BY id").all(sessionId)
    ) as MemoryRow[];
    return rows.map(toMemory);
  }

  /** The stored vector of `model` of each turn id (undefined where there is none), in the order given. */
  vectors(ids: readonly number[], model: MemoryModel): (Float32Array | undefined)[] {
    const get = this.db.prepare(
      "SELECT vector FROM agent_memory_vectors WHERE memory_id = ? AND provider = ? AND model = ?",
    );
    return ids.map((id) => {
      const hit = get.get(id, model.provider, model.model) as { vector: Buffer } | undefined;
      return hit ? blobToVector(hit.vector) : undefined;
    });
  }

  /**
   * Stores (or replaces) vectors of `model` for turns, in one transaction; turns that were
   * forgotten meanwhile are skipped.
   */
  storeVectors(entries: readonly { id: number; vector: Float32Array }[], model: MemoryModel): void {
    const exists = this.db.prepare("SELECT 1 FROM agent_memories WHERE id = ?");
    this.db
      .transaction(() => {
        for (const { id, vector } of entries) if (exists.get(id)) this.storeVector(id, vector, model);
      })
      .immediate();
  }

  /** Deletes a session's turns (one thread's with `threadId`) with their vectors; returns how many went. */
  forget(sessionId: string, threadId?: string): number {
    const info =
      threadId === undefined
        ? this.db.prepare("DELETE FROM agent_memories WHERE session_id = ?").run(sessionId)
        : this.db
            .prepare("DELETE FROM agent_memories WHERE session_id = ? AND thread_id = ?")
            .run(sessionId, threadId);
    return info.changes;
  }

  /** Deletes the turns of every session whose id starts with `prefix`; returns how many went. */
  forgetSessionsWithPrefix(prefix: string): number {
    return this.db
      .prepare("DELETE FROM agent_memories WHERE substr(session_id, 1, ?) = ?")
      .run(prefix.length, prefix).changes;
  }

  private storeVector(memoryId: number, vector: Float32Array, model: MemoryModel): void {
    this.db
      .prepare(
        "INSERT OR REPLACE INTO agent_memory_vectors (memory_id, provider, model, dimension, vector) VALUES (?, ?, ?, ?, ?)",
      )
      .run(memoryId, model.provider, model.model, vector.length, vectorToBlob(vector));
  }
}

function toMemory(row: MemoryRow): Memory {
  return {
    id: row.id,
    sessionId: row.session_id,
    threadId: row.thread_id,
    at: row.at,
    user: row.user_text,
    assistant: row.assistant_text,
    text: row.text,
  };
}
