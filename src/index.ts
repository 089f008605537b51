/**
 * knowledge-layer public API. See README.md for the architecture.
 */

// Agent-side pieces: inline routing, conversation memory, turn retrieval, context assembly.
export * from "./agent/index.js";
export type { Chunker } from "./chunk/contract.js";
export { chunkDocument, createChunker } from "./chunk/index.js";
export * from "./config.js";
export { BundledEmbedder } from "./embed/bundled.js";
export { CachedEmbedder } from "./embed/cache.js";
export {
  type BundledConfig,
  type CohereConfig,
  CohereEmbedder,
  createEmbedder,
  EMBEDDING_PROVIDERS,
  type Embedder,
  EmbeddingError,
  type EmbeddingProviderConfig,
  type HuggingFaceConfig,
  HuggingFaceEmbedder,
  type LocalConfig,
  LocalEmbedder,
  type OpenAiCompatibleConfig,
  OpenAiCompatibleEmbedder,
  type OpenAiConfig,
  OpenAiEmbedder,
} from "./embed/index.js";
export * from "./errors.js";
export { evaluateBeir, loadBeir } from "./eval/beir.js";
export { mrrAtK, ndcgAtK, recallAtK } from "./eval/metrics.js";
export {
  DEFAULT_EXTRACTION_LIMITS,
  type DiscoveredSource,
  type Discovery,
  detectSourceType,
  detectSourceTypeOf,
  discoverSources,
  type EmailExtractOptions,
  type ExtractContext,
  type ExtractionLimits,
  type ExtractOptions,
  type Extractor,
  extractBytes,
  extractFile,
  resolveExtractOptions,
  type SkippedPath,
  type SlackExtractOptions,
} from "./extract/index.js";
export type { IngestProgress, IngestSummary } from "./ingest/pipeline.js";
export {
  type Agent,
  type AgentInput,
  type ApiKeyInfo,
  type AttachmentRetrievalConfig,
  type CatalogBackend,
  type DocumentDetails,
  type DocumentRecord,
  type JobEventRecord,
  type JobRecord,
  type JobState,
  type JobStatus,
  type JobSummary,
  type KbUpdate,
  KnowledgeLayer,
  type NewApiKey,
  type NewJob,
  type SearchOptions,
  type SearchResponse,
  type SearchResult,
} from "./knowledge-layer.js";
export { createKnowledgeServer, serveHttp, serveStdio } from "./mcp/index.js";
export { type Attribution, attribute, formatCitation } from "./retrieve/attribution.js";
export { Bm25Index, bm25Idf, bm25TermScore, MemoryBm25Index } from "./retrieve/bm25.js";
export { jaccard, removeNearDuplicates, tokenSet } from "./retrieve/dedupe.js";
export {
  andFilters,
  type FieldCondition,
  type FieldOperators,
  type Filter,
  FilterError,
  type FilterNode,
  type FilterScalar,
  matchesFilter,
  parseFilter,
  parseFilterJson,
} from "./retrieve/filter.js";
export { normalizeScores, reciprocalRankFusion, weightedScoreFusion } from "./retrieve/fusion.js";
export {
  feedbackVariants,
  HYBRID_VECTOR_EFFORT,
  isInstructionQuery,
  type KbRetrievalOverrides,
  type PipelineReranker,
  type ResultExplanation,
  type RetrievedResult,
} from "./retrieve/search.js";
export { type CjkSegmentation, tokenize } from "./retrieve/tokenizer.js";
export { errorForLog, errorText, isSecretKey, MASK, maskUrl, redactSecrets, redactText } from "./secrets.js";
export { buildServer, type ServerOptions } from "./server/app.js";
export type * from "./store/catalog-contract.js";
// Server adapters (their clients load only when a store of that type is used through createVectorStore).
export type { ChromaVectorStore, ChromaVectorStoreOptions } from "./store/chroma.js";
export type * from "./store/contract.js";
export { METRICS } from "./store/contract.js";
export { collectionOf, createVectorStore, describeStore, redactKbConfig } from "./store/index.js";
export { type FillProgress, fillCollection } from "./store/migrate.js";
export type { PgVectorStore, PgVectorStoreOptions } from "./store/pgvector.js";
export type { PineconeVectorStore, PineconeVectorStoreOptions } from "./store/pinecone.js";
export type { QdrantVectorStore, QdrantVectorStoreOptions } from "./store/qdrant.js";
export { SqliteVectorStore } from "./store/sqlite-vector-store.js";
export * from "./types.js";
