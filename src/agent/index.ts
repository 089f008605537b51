/**
 * Agent-side building blocks: inline routing of attachments, conversation memory
 * across threads, concurrent per-turn retrieval and budgeted context assembly.
 */
export {
  type AssembleContextInput,
  type AssembledContext,
  assembleContext,
  ContextBudgetError,
  type ContextChunk,
  type ContextMemory,
  type ContextMessage,
  type ContextPartKind,
  type ContextRole,
  DEFAULT_CONTEXT_BUDGET,
  DEFAULT_MESSAGE_LIMIT,
  type DroppedItem,
  defaultPlaceholder,
  formatChunk,
  formatMemory,
  type PlaceholderInput,
  type RecentMessage,
} from "./context.js";
export {
  ConversationMemory,
  type ConversationMemoryOptions,
  cosineSimilarity,
  DEFAULT_MEMORY_THRESHOLD,
  DEFAULT_MEMORY_TOP_K,
  type Memory,
  memoryText,
  type RecalledMemory,
  type RecallOptions,
  type RememberInput,
} from "./memory.js";
export {
  DEFAULT_CHUNK_TOP_K,
  retrieveForTurn,
  type TurnRetrieval,
  type TurnRetrievalOptions,
} from "./retrieve.js";
export {
  type AttachInput,
  type AttachOptions,
  type AttachResult,
  attachSource,
  checkInlineLimit,
  DEFAULT_INLINE_LIMIT,
  INLINE_DOCUMENT_SEPARATOR,
  type InlineAttachment,
  type RetrieveAttachment,
  type Route,
  routeText,
} from "./routing.js";
