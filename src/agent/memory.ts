/**
 * Conversation memory: an agent's past turns, embedded and recalled across the
 * threads of a session.
 *
 * Each turn (a user message and the assistant's reply) is embedded as a whole,
 * as one vector of the text `User: …\nAssistant: …`, and stored in the data
 * directory's database (tables `agent_memories` and `agent_memory_vectors`).
 * {@link ConversationMemory.recall} finds the turns of the session's OTHER threads
 * closest to a query: the current thread is excluded (its recent messages are in
 * the prompt already), and other sessions are never seen.
 *
 * Models: every vector is stored with the provider and model that made it, and
 * recall compares only vectors of the memory's current embedder. A turn that has
 * no vector of that model yet (it was remembered under another model, or with
 * another dimension) is re-embedded from its stored text at recall and the new
 * vector is stored beside the old one, so vectors of different models are never
 * compared, nothing is lost when the model changes, and two memories with
 * different models can share one database. Re-embedding goes through the
 * embedding cache, so it costs one model call per turn and model.
 *
 * Scale: recall is a brute-force cosine over the vectors of one session
 * (O(turns × dimension) per query: ~1 ms for 1,000 turns of 512-d vectors).
 * Sessions are assumed small (up to some thousands of turns); nothing is
 * indexed for approximate search.
 */
import { cosine } from "../chunk/embedding-semantic.js";
import { DEFAULT_KB, type EmbeddingConfig, embeddingConfig } from "../config.js";
import type { Embedder } from "../embed/contract.js";
import { KnowledgeLayerError } from "../errors.js";
import type { KnowledgeLayer, Memory, MemoryCatalog } from "../knowledge-layer.js";

export type { Memory } from "../knowledge-layer.js";

/** Default number of memories {@link ConversationMemory.recall} returns. */
export const DEFAULT_MEMORY_TOP_K = 3;
/** Default minimum cosine similarity of a recalled memory. */
export const DEFAULT_MEMORY_THRESHOLD = 0.45;

/**
 * The embedding a KB's configuration gives memories: the KB's own, except that the
 * bundled `use-lite-mix` (the default for documents: the network reads only a chunk's
 * first 128-token window, a table the rest) becomes the full `use-lite` network. A turn
 * is short (one window), so the mix saves nothing on it, and {@link DEFAULT_MEMORY_THRESHOLD}
 * is a cosine calibrated on `use-lite` (the mix scores paraphrases lower: its table part
 * matches word pieces, not meaning).
 */
export function memoryEmbedding(embedding: EmbeddingConfig): EmbeddingConfig {
  if (embedding.provider !== "bundled" || embedding.model !== "use-lite-mix") return embedding;
  return { ...embedding, model: "use-lite" };
}

/** Options for {@link ConversationMemory.open}: which embedder to use (first given wins). */
export interface ConversationMemoryOptions {
  /** An embedder to use as is (e.g. a test double, or a KB's `kl.embedder(config)`). */
  embedder?: Embedder;
  /** An embedding configuration (provider, model, …), as in a KB's `embedding` section. */
  embedding?: Partial<EmbeddingConfig>;
  /** Use this knowledge base's embedder (default: the default KB's; see {@link memoryEmbedding}). */
  kb?: string;
}

/** A turn to remember. */
export interface RememberInput {
  sessionId: string;
  threadId: string;
  /** The user's message. */
  user: string;
  /** The assistant's reply. */
  assistant: string;
  /** When the turn happened (default now). Stored as an ISO-8601 string. */
  at?: Date | string | number;
}

/** A recalled turn with its similarity to the query. */
export interface RecalledMemory extends Memory {
  /** Cosine similarity between the query and the turn, in [-1, 1]. */
  score: number;
  /** Returned by the fallback although below the threshold. */
  belowThreshold?: boolean;
}

/** Options for {@link ConversationMemory.recall}. */
export interface RecallOptions {
  sessionId: string;
  /** The current thread: its turns are excluded. */
  threadId: string;
  query: string;
  /** Largest number of memories returned (default 3). An integer ≥ 1. */
  topK?: number;
  /** Minimum cosine similarity (default 0.45), in [-1, 1]. */
  threshold?: number;
  /**
   * When no memory reaches the threshold, return the best `topK` anyway, each
   * flagged `belowThreshold` (the empty-result fallback). Default false.
   */
  fallback?: boolean;
}

/** The text a turn is embedded as. */
export function memoryText(user: string, assistant: string): string {
  return `User: ${user}\nAssistant: ${assistant}`;
}

/**
 * Cosine similarity of two vectors of the same length (0 when either is all zeros).
 * @throws KnowledgeLayerError when the lengths differ.
 */
export function cosineSimilarity(a: Float32Array, b: Float32Array): number {
  if (a.length !== b.length) {
    throw new KnowledgeLayerError(`cannot compare vectors of lengths ${a.length} and ${b.length}`);
  }
  return cosine(a, b);
}

/**
 * Remembers conversation turns and recalls them across the threads of a session.
 * See the module documentation for the model rule and the scale assumption.
 *
 * ```ts
 * const memory = await ConversationMemory.open(kl);
 * await memory.remember({ sessionId: "s1", threadId: "t1", user: "…", assistant: "…" });
 * const hits = await memory.recall({ sessionId: "s1", threadId: "t2", query: "…" });
 * ```
 */
export class ConversationMemory {
  /** The embedder turns and queries are embedded with. */
  readonly embedder: Embedder;
  private readonly turns: MemoryCatalog;

  /**
   * The data directory's memories, embedded with `options.embedder` (use {@link open}
   * for a KB's embedder or an embedding configuration).
   */
  constructor(kl: KnowledgeLayer, options: { embedder: Embedder }) {
    this.turns = kl.memories;
    this.embedder = options.embedder;
  }

  /**
   * The data directory's memories with the embedder `options` name: the one given, else
   * the `embedding` configuration laid over the KB's, else the KB's (default the default
   * KB's; its configuration is read from the catalog, hence asynchronous).
   * @throws KnowledgeLayerError for an unknown `kb`; ConfigError for an invalid `embedding`.
   */
  static async open(
    kl: KnowledgeLayer,
    options: ConversationMemoryOptions = {},
  ): Promise<ConversationMemory> {
    if (options.embedder) return new ConversationMemory(kl, { embedder: options.embedder });
    const base = (await kl.getKb(options.kb ?? DEFAULT_KB)).config;
    const embedder = options.embedding
      ? kl.embedder({ ...base, embedding: embeddingConfig(options.embedding) })
      : kl.embedder({ ...base, embedding: memoryEmbedding(base.embedding) });
    return new ConversationMemory(kl, { embedder });
  }

  /**
   * Stores a turn with its vector (one embedding of {@link memoryText}).
   * @returns the stored memory.
   * @throws KnowledgeLayerError for a missing id, non-string texts, an empty turn or
   *   an invalid time; the embedder's error when embedding fails (nothing is stored then).
   */
  async remember(input: RememberInput): Promise<Memory> {
    checkId("sessionId", input.sessionId);
    checkId("threadId", input.threadId);
    if (typeof input.user !== "string" || typeof input.assistant !== "string") {
      throw new KnowledgeLayerError("remember: user and assistant must be strings");
    }
    if (input.user.trim() === "" && input.assistant.trim() === "") {
      throw new KnowledgeLayerError("remember: the turn is empty (no user message and no reply)");
    }
    const at = toIso(input.at);
    const text = memoryText(input.user, input.assistant);
    const [vector] = await this.embedder.embedTexts([text]);
    if (!vector) throw new KnowledgeLayerError(`remember: ${this.modelName()} returned no vector`);
    return this.turns.insert(
      {
        sessionId: input.sessionId,
        threadId: input.threadId,
        at,
        user: input.user,
        assistant: input.assistant,
        text,
      },
      vector,
      this.model(),
    );
  }

  /**
   * The session's memories from threads other than `threadId` whose cosine
   * similarity to `query` is at least `threshold`, best first (ties: newer first),
   * at most `topK`. With `fallback` and none at the threshold, the best `topK`
   * flagged `belowThreshold`. Turns without a vector of the current model are
   * re-embedded first (see the module documentation).
   * @throws KnowledgeLayerError for invalid options; the embedder's error when embedding fails.
   */
  async recall(options: RecallOptions): Promise<RecalledMemory[]> {
    checkId("sessionId", options.sessionId);
    checkId("threadId", options.threadId);
    if (typeof options.query !== "string" || options.query.trim() === "") {
      throw new KnowledgeLayerError("recall: the query is empty");
    }
    const topK = options.topK ?? DEFAULT_MEMORY_TOP_K;
    const threshold = options.threshold ?? DEFAULT_MEMORY_THRESHOLD;
    checkTopK("recall: topK", topK);
    checkThreshold("recall: threshold", threshold);
    const rows = await this.turns.list(options.sessionId, { exceptThread: options.threadId });
    if (rows.length === 0) return [];
    const queryVector = await this.embedder.embedQuery(options.query);
    const vectors = await this.vectorsOf(rows, queryVector.length);
    const scored: RecalledMemory[] = rows.map((row, i) => ({
      ...row,
      score: cosineSimilarity(queryVector, vectors[i] as Float32Array),
    }));
    // ISO timestamps compare by code unit (no localeCompare: no host locale).
    scored.sort((a, b) => b.score - a.score || (b.at < a.at ? -1 : b.at > a.at ? 1 : 0) || b.id - a.id);
    const passing = scored.filter((m) => m.score >= threshold);
    if (passing.length > 0 || !options.fallback) return passing.slice(0, topK);
    return scored.slice(0, topK).map((m) => ({ ...m, belowThreshold: true }));
  }

  /**
   * Lists stored memories of a session (of one thread when given), oldest first.
   * @throws KnowledgeLayerError for a missing session id.
   */
  async list(filter: { sessionId: string; threadId?: string }): Promise<Memory[]> {
    checkId("sessionId", filter.sessionId);
    return this.turns.list(filter.sessionId, { threadId: filter.threadId });
  }

  /**
   * Deletes a session's memories (one thread's when `threadId` is given) with their vectors.
   * @returns how many turns were deleted.
   * @throws KnowledgeLayerError for a missing session id or an empty thread id.
   */
  async forget(filter: { sessionId: string; threadId?: string }): Promise<number> {
    checkId("sessionId", filter.sessionId);
    if (filter.threadId !== undefined) checkId("threadId", filter.threadId);
    return this.turns.forget(filter.sessionId, filter.threadId);
  }

  /**
   * Deletes the memories of every session whose id starts with `prefix` (an adapter that
   * namespaces session ids, forgetting a whole namespace).
   * @returns how many turns were deleted.
   * @throws KnowledgeLayerError for an empty prefix.
   */
  async forgetSessionsWithPrefix(prefix: string): Promise<number> {
    checkId("prefix", prefix);
    return this.turns.forgetSessionsWithPrefix(prefix);
  }

  /**
   * The current model's vector of each row, re-embedding (and storing) those that
   * have none or one of another length than the query vector.
   */
  private async vectorsOf(rows: Memory[], dimension: number): Promise<Float32Array[]> {
    const out: (Float32Array | undefined)[] = (
      await this.turns.vectors(
        rows.map((row) => row.id),
        this.model(),
      )
    ).map((vector) => (vector && vector.length === dimension ? vector : undefined));
    const missing = rows.map((row, i) => ({ row, i })).filter(({ i }) => out[i] === undefined);
    if (missing.length > 0) {
      const fresh = await this.embedder.embedTexts(missing.map(({ row }) => row.text));
      missing.forEach(({ i }, j) => {
        out[i] = fresh[j] as Float32Array;
      });
      // A turn forgotten while it was embedded is skipped by the store.
      await this.turns.storeVectors(
        missing.map(({ row, i }) => ({ id: row.id, vector: out[i] as Float32Array })),
        this.model(),
      );
    }
    return out as Float32Array[];
  }

  /** The model memory vectors are stored under: the embedder's provider and model id. */
  private model(): { provider: string; model: string } {
    return { provider: this.embedder.provider, model: this.embedder.modelId };
  }

  private modelName(): string {
    return `${this.embedder.provider}:${this.embedder.modelId}`;
  }
}

function checkId(name: string, value: unknown): void {
  if (typeof value !== "string" || value === "") {
    throw new KnowledgeLayerError(`${name} must be a non-empty string (got ${JSON.stringify(value)})`);
  }
}

/** @throws KnowledgeLayerError unless `value` is an integer ≥ 1. */
export function checkTopK(name: string, value: number): void {
  if (!(Number.isInteger(value) && value >= 1)) {
    throw new KnowledgeLayerError(`${name} must be an integer >= 1 (got ${String(value)})`);
  }
}

/** @throws KnowledgeLayerError unless `value` is a cosine threshold in [-1, 1]. */
export function checkThreshold(name: string, value: number): void {
  if (!(Number.isFinite(value) && value >= -1 && value <= 1)) {
    throw new KnowledgeLayerError(`${name} must be a number from -1 to 1 (got ${String(value)})`);
  }
}

function toIso(at: RememberInput["at"]): string {
  const date = at === undefined ? new Date() : at instanceof Date ? at : new Date(at);
  if (Number.isNaN(date.getTime())) {
    throw new KnowledgeLayerError(`remember: invalid time ${JSON.stringify(String(at))}`);
  }
  return date.toISOString();
}
