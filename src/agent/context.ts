/**
 * Context assembly: the messages an agent sends to its model for one turn,
 * within a character budget.
 *
 * Units: budgets, limits and sizes are in characters, counted as JavaScript
 * string length (UTF-16 code units) of the message contents; roles and message
 * framing are not counted.
 */
import { KnowledgeLayerError } from "../errors.js";

/** Default {@link AssembleContextInput.budget}: 18,000 characters. */
export const DEFAULT_CONTEXT_BUDGET = 18_000;
/** Default {@link AssembleContextInput.messageLimit}: 3,000 characters. */
export const DEFAULT_MESSAGE_LIMIT = 3000;

/** A chat role. */
export type ContextRole = "user" | "assistant" | "system";

/** A message as sent to a chat model. */
export interface ContextMessage {
  role: ContextRole;
  content: string;
}

/** A message of the conversation so far. */
export interface RecentMessage {
  role: ContextRole;
  content: string;
  /** The application's id of the message, shown in its placeholder. */
  id?: string;
}

/** A retrieved document chunk (a `SearchResult` fits as it is). */
export interface ContextChunk {
  text: string;
  /** One-line source citation, shown after the chunk's label. */
  citation: string;
}

/** A recalled memory (a `RecalledMemory` fits as it is). */
export interface ContextMemory {
  /** The remembered turn, e.g. `User: …\nAssistant: …`. */
  text: string;
  /** When it happened (ISO-8601), shown after the memory's label. */
  at?: string;
}

/** What a placeholder function is told about the long message it replaces. */
export interface PlaceholderInput {
  /** The message's id, when it has one. */
  id?: string;
  /** 0-based position of the message in `recent`. */
  index: number;
  role: "user" | "assistant";
  /** Length of the original content, in characters. */
  chars: number;
  content: string;
}

/** Input of {@link assembleContext}. Every part is optional. */
export interface AssembleContextInput {
  /** System messages, each sent as one `system` message. Never dropped. */
  system?: string[];
  /** Summaries of earlier conversation, each one `system` message. */
  summaries?: string[];
  /** Anchor text (e.g. the task or the conversation's first request), one `system` message. */
  anchor?: string;
  /** Retrieved document chunks, best first. Sent together as one `system` message. */
  chunks?: ContextChunk[];
  /** Recalled memories, best first. Sent together as one `system` message. */
  memories?: ContextMemory[];
  /** The conversation so far, oldest first. */
  recent?: RecentMessage[];
  /** Largest total content length, in characters (default 18,000). An integer ≥ 1. */
  budget?: number;
  /**
   * Longest user or assistant message sent whole, in characters (default 3,000);
   * longer ones are replaced by a placeholder. An integer ≥ 1.
   */
  messageLimit?: number;
  /** Text that replaces a long message (default {@link defaultPlaceholder}). */
  placeholder?: (message: PlaceholderInput) => string;
}

/** Which input an assembled message came from. */
export type ContextPartKind = "system" | "summary" | "anchor" | "chunks" | "memories" | "recent";

/** Something left out of the context, or shortened, and why. */
export interface DroppedItem {
  /** The input list it came from. */
  kind: "recent" | "chunk" | "memory";
  /** 0-based position in that list (`recent`, `chunks` or `memories`). */
  index: number;
  /**
   * `placeholder`: a long message replaced by its placeholder (it is still in the
   * context, shortened); `budget`: removed to fit the budget.
   */
  reason: "placeholder" | "budget" | "truncated";
  /** The message id (recent messages). */
  id?: string;
  /** The message role (recent messages). */
  role?: ContextRole;
  /**
   * Characters removed: for a placeholder, the original length; for a budget drop,
   * the length it took in the context (a placeholder's length if it had become one).
   */
  chars: number;
}

/** The output of {@link assembleContext}. */
export interface AssembledContext {
  /** Messages in order: system, summaries, anchor, chunks, memories, recent (oldest first). */
  messages: ContextMessage[];
  /** For each message (same index), the input it came from and its position there. */
  parts: { kind: ContextPartKind; index: number }[];
  /** Placeholders and drops, in the order they were applied. */
  dropped: DroppedItem[];
  /** Sum of the messages' content lengths, in characters; never above the budget. */
  totalChars: number;
  /** The budget applied, in characters. */
  budget: number;
}

/**
 * The parts that are never dropped (system messages, summaries, anchor, the
 * latest user message) alone exceed the budget.
 */
export class ContextBudgetError extends KnowledgeLayerError {
  constructor(
    /** Characters the kept parts need. */
    readonly required: number,
    readonly budget: number,
    detail: string,
  ) {
    super(
      `context does not fit: ${detail} need ${required.toLocaleString("en-US")} characters, over the budget of ${budget.toLocaleString("en-US")}`,
    );
    this.name = "ContextBudgetError";
  }
}

/**
 * The default placeholder: `[message 12 (8,400 chars) is indexed; its relevant
 * parts appear as file chunks above]` (`#3` for the third recent message when it has no id).
 */
export function defaultPlaceholder(message: PlaceholderInput): string {
  const name = message.id ?? `#${message.index + 1}`;
  return `[message ${name} (${message.chars.toLocaleString("en-US")} chars) is indexed; its relevant parts appear as file chunks above]`;
}

/** The label and body of the n-th chunk (1-based): `[file chunk n] citation\ntext`. */
export function formatChunk(chunk: ContextChunk, n: number): string {
  return `[file chunk ${n}]${chunk.citation ? ` ${chunk.citation}` : ""}\n${chunk.text}`;
}

/** The label and body of the n-th memory (1-based): `[memory n] (at)\ntext`. */
export function formatMemory(memory: ContextMemory, n: number): string {
  return `[memory ${n}]${memory.at ? ` (${memory.at})` : ""}\n${memory.text}`;
}

/** Separator between the chunks (and between the memories) inside their message. */
const BLOCK_SEPARATOR = "\n\n";

interface RecentItem {
  index: number;
  role: ContextRole;
  id?: string;
  content: string;
  /** Droppable for the budget: not a system message and not the latest user message. */
  droppable: boolean;
  dropped: boolean;
}

/**
 * Assembles a turn's context within `budget` characters.
 *
 * Order: `system` messages, `summaries`, `anchor`, the chunks (one `system`
 * message, each labelled `[file chunk n]` with n 1-based in rank order, followed by
 * its citation), the memories (one `system` message, `[memory n] (at)`), then the
 * `recent` messages oldest first. Empty strings and empty lists add no message.
 *
 * Then, in this order:
 * 1. every user or assistant message in `recent` longer than `messageLimit` is
 *    replaced by `placeholder(…)`, except the latest user message (the question
 *    being answered is kept whole); reported with reason `placeholder`; a memory
 *    longer than `messageLimit` is cut to its first `messageLimit` characters + "…"
 *    (reason `truncated`), so one long remembered turn cannot crowd out the chunks;
 * 2. while over the budget, the oldest conversation message is dropped, one at a
 *    time; system messages and the latest user message (the one being answered)
 *    are never dropped;
 * 3. while still over the budget (what is left cannot be dropped), memories are
 *    removed from the lowest-ranked up, then chunks the same way (documents ground
 *    the answer; memories are context); reported with kind `memory` / `chunk` and
 *    reason `budget`. Messages dropped in step 2 are not brought back.
 *
 * @throws KnowledgeLayerError for invalid input; ContextBudgetError when the system
 *   messages, summaries, anchor and latest user message alone exceed the budget.
 */
export function assembleContext(input: AssembleContextInput): AssembledContext {
  const budget = input.budget ?? DEFAULT_CONTEXT_BUDGET;
  const messageLimit = input.messageLimit ?? DEFAULT_MESSAGE_LIMIT;
  checkPositiveInt("budget", budget);
  checkPositiveInt("messageLimit", messageLimit);
  const system = strings("system", input.system);
  const summaries = strings("summaries", input.summaries);
  if (input.anchor !== undefined && typeof input.anchor !== "string") {
    throw new KnowledgeLayerError("assembleContext: anchor must be a string");
  }
  const chunks = input.chunks ?? [];
  const memories = input.memories ?? [];
  chunks.forEach((c, i) => {
    if (typeof c?.text !== "string" || typeof c.citation !== "string") {
      throw new KnowledgeLayerError(`assembleContext: chunks[${i}] needs string text and citation`);
    }
  });
  memories.forEach((m, i) => {
    if (typeof m?.text !== "string" || (m.at !== undefined && typeof m.at !== "string")) {
      throw new KnowledgeLayerError(`assembleContext: memories[${i}] needs a string text (and at)`);
    }
  });
  const placeholder = input.placeholder ?? defaultPlaceholder;
  const dropped: DroppedItem[] = [];

  const recentInput = input.recent ?? [];
  let latestUser = -1;
  recentInput.forEach((m, i) => {
    if (!m || !["user", "assistant", "system"].includes(m.role) || typeof m.content !== "string") {
      throw new KnowledgeLayerError(
        `assembleContext: recent[${i}] needs a role of user, assistant or system and a string content`,
      );
    }
    if (m.role === "user") latestUser = i;
  });
  const recent: RecentItem[] = recentInput.map((m, index) => {
    let content = m.content;
    if (m.role !== "system" && index !== latestUser && content.length > messageLimit) {
      content = placeholder({ id: m.id, index, role: m.role, chars: m.content.length, content: m.content });
      if (typeof content !== "string") {
        throw new KnowledgeLayerError("assembleContext: placeholder must return a string");
      }
      dropped.push(
        withId({ kind: "recent", index, reason: "placeholder", role: m.role, chars: m.content.length }, m.id),
      );
    }
    const item: RecentItem = {
      index,
      role: m.role,
      content,
      droppable: m.role !== "system" && index !== latestUser,
      dropped: false,
    };
    if (m.id !== undefined) item.id = m.id;
    return item;
  });

  const memoryTexts = memories.map((m, index) => {
    if (m.text.length <= messageLimit) return m;
    dropped.push({ kind: "memory", index, reason: "truncated", chars: m.text.length - messageLimit });
    return { ...m, text: `${m.text.slice(0, messageLimit)}…` };
  });
  let chunksKept = chunks.length;
  let memoriesKept = memories.length;
  const build = (): { messages: ContextMessage[]; parts: AssembledContext["parts"] } => {
    const messages: ContextMessage[] = [];
    const parts: AssembledContext["parts"] = [];
    const add = (role: ContextRole, content: string, kind: ContextPartKind, index: number): void => {
      if (content === "") return;
      messages.push({ role, content });
      parts.push({ kind, index });
    };
    for (const [i, s] of system.entries()) add("system", s, "system", i);
    for (const [i, s] of summaries.entries()) add("system", s, "summary", i);
    if (input.anchor) add("system", input.anchor, "anchor", 0);
    if (chunksKept > 0) {
      const text = chunks
        .slice(0, chunksKept)
        .map((c, i) => formatChunk(c, i + 1))
        .join(BLOCK_SEPARATOR);
      add("system", text, "chunks", 0);
    }
    if (memoriesKept > 0) {
      const text = memoryTexts
        .slice(0, memoriesKept)
        .map((m, i) => formatMemory(m, i + 1))
        .join(BLOCK_SEPARATOR);
      add("system", text, "memories", 0);
    }
    for (const r of recent) if (!r.dropped) add(r.role, r.content, "recent", r.index);
    return { messages, parts };
  };
  const size = (messages: ContextMessage[]): number => messages.reduce((n, m) => n + m.content.length, 0);

  let built = build();
  let total = size(built.messages);
  for (const r of recent) {
    if (total <= budget) break;
    if (!r.droppable) continue;
    r.dropped = true;
    total -= r.content.length;
    dropped.push(
      withId(
        { kind: "recent", index: r.index, reason: "budget", role: r.role, chars: r.content.length },
        r.id,
      ),
    );
  }
  built = build();
  while (total > budget && memoriesKept > 0) {
    memoriesKept--;
    built = build();
    const after = size(built.messages);
    dropped.push({ kind: "memory", index: memoriesKept, reason: "budget", chars: total - after });
    total = after;
  }
  while (total > budget && chunksKept > 0) {
    chunksKept--;
    built = build();
    const after = size(built.messages);
    dropped.push({ kind: "chunk", index: chunksKept, reason: "budget", chars: total - after });
    total = after;
  }
  if (total > budget) {
    const kept = built.parts.map((p) => p.kind);
    const keptRecent = recent.filter((r) => !r.dropped && r.content !== "");
    const named = [
      kept.includes("system") ? "the system messages" : "",
      kept.includes("summary") ? "the summaries" : "",
      kept.includes("anchor") ? "the anchor" : "",
      keptRecent.some((r) => r.role === "user") ? "the latest user message" : "",
      keptRecent.some((r) => r.role === "system") ? "the system messages in recent" : "",
    ].filter(Boolean);
    throw new ContextBudgetError(total, budget, named.join(", ") || "the kept messages");
  }
  return { messages: built.messages, parts: built.parts, dropped, totalChars: total, budget };
}

function withId(item: DroppedItem, id: string | undefined): DroppedItem {
  if (id !== undefined) item.id = id;
  return item;
}

function checkPositiveInt(name: string, value: number): void {
  if (!(Number.isInteger(value) && value >= 1)) {
    throw new KnowledgeLayerError(
      `assembleContext: ${name} must be an integer >= 1 (characters; got ${String(value)})`,
    );
  }
}

function strings(name: string, values: string[] | undefined): string[] {
  const list = values ?? [];
  if (!Array.isArray(list) || list.some((s) => typeof s !== "string")) {
    throw new KnowledgeLayerError(`assembleContext: ${name} must be a list of strings`);
  }
  return list;
}
