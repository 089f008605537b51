import { validateChunkingConfig } from "./chunk/spans.js";
import type { EmbeddingProviderConfig } from "./embed/config.js";
import {
  COMMON_EMBEDDING_SETTINGS,
  EMBEDDING_PROVIDER_REGISTRY,
  EMBEDDING_PROVIDERS,
} from "./embed/registry.js";
import { ConfigError } from "./errors.js";
import { DEFAULT_EXTRACTION_LIMITS, type ExtractOptions, resolveExtractOptions } from "./extract/contract.js";
import { HTTP_SCHEMES, urlProblem } from "./http.js";
import { RERANKER_TYPES, rerankerOf } from "./rerank/registry.js";
import { ANALYZERS, type Analyzer } from "./retrieve/tokenizer.js";
import { allSettings, indefiniteArticle, type SettingSchema } from "./settings.js";
import {
  COMMON_STORE_SETTINGS,
  VECTOR_STORES,
  type VectorStoreType,
  vectorStoreOf,
} from "./store/registry.js";

export { COMMON_STORE_SETTINGS, VECTOR_STORES, type VectorStoreType } from "./store/registry.js";

/** Chunking strategies. `auto` picks one per source type (see `chunk/index.ts`). */
export type ChunkingStrategy =
  | "auto"
  | "fixed"
  | "semantic"
  | "document"
  | "email"
  | "slack"
  | "code"
  | "embedding_semantic";

export const CHUNKING_STRATEGIES: readonly ChunkingStrategy[] = [
  "auto",
  "fixed",
  "semantic",
  "document",
  "email",
  "slack",
  "code",
  "embedding_semantic",
];

/** Unit of chunk sizes: UTF-16 code units (`chars`) or tokens of {@link ChunkingConfig.tokenizer}. */
export type SizeUnit = "chars" | "tokens";

export const SIZE_UNITS: readonly SizeUnit[] = ["chars", "tokens"];

/** EMAIL strategy options. */
export interface EmailChunkingOptions {
  /** A message body up to this many units stays one chunk (its header block may add more). Default 2,000. */
  wholeUnder: number;
  /** Quoted replies (`>` lines, "On … wrote:" blocks): `keep` them (marked in metadata) or `drop` them. Default keep. */
  quotedReplies: "keep" | "drop";
}

/** SLACK strategy options. */
export interface SlackChunkingOptions {
  /** A thread up to this many units stays one chunk (`complete_thread`). Default 1,500. */
  wholeThreadUnder: number;
  /** Unthreaded messages further apart than this (seconds) start a new chunk. Default 1,800. */
  maxGapSeconds: number;
}

/** EMBEDDING_SEMANTIC strategy options (sizes in the configured unit). */
export interface EmbeddingSemanticOptions {
  /** `threshold`: cut where neighbour cosine < `threshold`; `percentile`: cut at the lowest similarities. Default threshold. */
  breakpoint: "threshold" | "percentile";
  /** Cosine similarity below which adjacent sentences are split. Default 0.75. */
  threshold: number;
  /** Percentile of neighbour *distances* (1 − cosine) above which to cut, in (0, 100). Default 95. */
  percentile: number;
  /** A chunk is not cut before it reaches this size. Default 50. */
  minSize: number;
  /** A chunk never exceeds this size. Default 600. */
  maxSize: number;
  /** FIXED window size used when the embedder fails. Default 350. */
  fallbackSize: number;
  /** FIXED overlap used when the embedder fails. Default 50. */
  fallbackOverlap: number;
  /** Store a chunk's vector as the normalised mean of its sentence vectors instead of embedding it again. Default true. */
  reuseSentenceEmbeddings: boolean;
}

/**
 * Chunking parameters. Sizes are in `unit`: characters (UTF-16 code units, the
 * default) or tokens of `tokenizer`.
 */
export interface ChunkingConfig {
  strategy: ChunkingStrategy;
  /** Maximum size of a chunk's text. Default 1,500. */
  chunkSize: number;
  /** Size shared by consecutive chunks (FIXED). Default 150; must be < chunkSize. */
  chunkOverlap: number;
  /** A tail shorter than this merges into its neighbour when the result fits. Default 500. */
  minChunkSize: number;
  /** Unit of every size above and in the strategy options. Default `chars`. */
  unit?: SizeUnit;
  /**
   * Tokenizer for `unit: "tokens"`: `o200k_base` (default), `cl100k_base`,
   * `p50k_base`, `r50k_base` (OpenAI BPE via gpt-tokenizer) or `use-lite` (the
   * bundled embedding model's own tokenizer).
   */
  tokenizer?: string;
  email?: Partial<EmailChunkingOptions>;
  slack?: Partial<SlackChunkingOptions>;
  embeddingSemantic?: Partial<EmbeddingSemanticOptions>;
  /**
   * OpenAI-compatible chat endpoint that writes one sentence situating each chunk in
   * its document, prepended to the chunk's context prefix (see `chunk/llm-context.ts`).
   * Absent (default): no LLM context; the offline document context still applies.
   */
  contextLlm?: ContextLlmConfig;
}

/** Where the chunk-context LLM is (any OpenAI-compatible chat endpoint). */
export interface ContextLlmConfig {
  /** Server root (`…/v1/chat/completions` is appended; a trailing `/v1` is not doubled). */
  baseUrl: string;
  /** Chat model, e.g. `gpt-4o-mini`. */
  model: string;
  /** Bearer key, if the endpoint needs one (masked in every output, not part of the pipeline fingerprint). */
  apiKey?: string;
}

/** Embedding provider settings. */
/**
 * Embedding settings of a KB: one provider's options (see `src/embed/config.ts`:
 * `bundled`, `local`, `openai`, `cohere`, `huggingface`, `openai-compatible`/`litellm`)
 * with the model and batch size always filled in. Default: the bundled offline model,
 * `{ provider: "bundled", model: "use-lite-mix", batchSize: 32 }` (USE lite int8 on the
 * first 128-token window joined with the table distilled from it, 1024-d; see
 * `src/embed/bundled-models.ts`).
 */
export type EmbeddingConfig = EmbeddingProviderConfig & {
  /** Model id within the provider. */
  model: string;
  /** Texts per embedding call. Default 32. */
  batchSize: number;
};

/**
 * Model used when a KB names a provider but no model, from the providers' registry
 * (`embed/registry.ts`; `openai-compatible` has none: its model is required).
 */
export const DEFAULT_EMBEDDING_MODELS: Readonly<Record<string, string>> = Object.fromEntries(
  Object.entries(EMBEDDING_PROVIDER_REGISTRY).flatMap(([name, p]) =>
    p.defaultModel === undefined ? [] : [[name, p.defaultModel]],
  ),
);

/**
 * A KB's embedding config from partial settings: the bundled default when no
 * provider is named; else the named provider's settings with its default model
 * (see {@link DEFAULT_EMBEDDING_MODELS}) and batch size 32, nothing carried over
 * from the bundled default.
 * @throws ConfigError when the provider has no default model and none is given.
 */
export function embeddingConfig(partial: Partial<Record<string, unknown>> = {}): EmbeddingConfig {
  const provider = String(partial.provider ?? "bundled");
  const model = partial.model ?? DEFAULT_EMBEDDING_MODELS[provider];
  if (model === undefined) {
    throw new ConfigError(
      `embedding provider "${provider}" needs a model (embedding.model, --embedding-model)`,
    );
  }
  return { ...partial, provider, model, batchSize: partial.batchSize ?? 32 } as EmbeddingConfig;
}

/** Every field some embedding provider accepts (unknown fields are rejected), from the providers' registry. */
const EMBEDDING_FIELDS = [
  "provider",
  ...Object.keys(allSettings(EMBEDDING_PROVIDER_REGISTRY, COMMON_EMBEDDING_SETTINGS)),
];

/** Every {@link VectorStoreType}: the names of the stores' registry (`store/registry.ts`). */
export const VECTOR_STORE_TYPES = Object.keys(VECTOR_STORES) as readonly VectorStoreType[];

/** Every setting some vector store accepts, with the ones all accept (`collection`) first. */
export const VECTOR_STORE_SETTINGS = allSettings(VECTOR_STORES, COMMON_STORE_SETTINGS);

/**
 * Where a knowledge base keeps its vectors. Fields beyond `type` apply to some backends:
 * - `sqlite`: none (the project's `kl.db`);
 * - `pgvector`: `url` (`postgres://user:pass@host:5432/db`, required), `schema` (default `kl`);
 * - `qdrant`: `url` (`http://host:6333`, required), `apiKey` (else `$QDRANT_API_KEY`), `timeoutMs` (default 30 000);
 * - `pinecone`: `index` (required), `apiKey` (else `$PINECONE_API_KEY`), `url` (control plane, default
 *   `https://api.pinecone.io`); the KB is a namespace of the index (its dimension must be the embedder's);
 * - `chroma`: `url` (`http://host:8000`, required).
 * Secrets are better given by environment variable: the config is stored in `kl.db` (and shown
 * with credentials masked).
 */
export interface VectorStoreConfig {
  type: VectorStoreType;
  /** Collection (pgvector table, Qdrant/Chroma collection, Pinecone namespace). Default `kb_<name>`. */
  collection?: string;
  url?: string;
  apiKey?: string;
  schema?: string;
  index?: string;
  timeoutMs?: number;
}

/**
 * Checks a vector-store config: a known type and the fields that type needs.
 * @param fail called with the field path and the problem (it throws).
 */
export function validateVectorStore(
  vs: VectorStoreConfig,
  fail: (field: string, problem: string) => never,
): void {
  const store = vectorStoreOf(vs.type);
  if (!store) {
    fail(
      "vectorStore.type",
      `"${String(vs.type)}" is not a vector store; use one of ${VECTOR_STORE_TYPES.join(", ")}`,
    );
  }
  const given = vs as unknown as Record<string, unknown>;
  for (const [field, setting] of Object.entries(store.settings)) {
    const value = given[field];
    if (setting.required && setting.type === "string" && (typeof value !== "string" || value.trim() === ""))
      fail(`vectorStore.${field}`, `is required for ${vs.type}`);
  }
  for (const [field, setting] of Object.entries(VECTOR_STORE_SETTINGS)) {
    const value = given[field];
    if (
      setting.type === "string" &&
      value !== undefined &&
      (typeof value !== "string" || value.trim() === "")
    ) {
      fail(`vectorStore.${field}`, "must be a non-empty string");
    }
  }
  if (vs.url !== undefined && !Object.hasOwn(store.settings, "url"))
    fail("vectorStore.url", `does not apply to ${vs.type} (${store.summary})`);
  const urlSetting = (store.settings as Record<string, SettingSchema | undefined>).url;
  if (vs.url !== undefined && urlSetting?.schemes) {
    const allowed: readonly string[] = urlSetting.schemes;
    const problem = urlProblem(vs.url, { schemes: allowed, credentials: true });
    const protocol = /^([a-z][a-z0-9+.-]*:)\/\//i.exec(vs.url)?.[1]?.toLowerCase();
    if (problem !== undefined && protocol !== undefined && !allowed.includes(protocol)) {
      fail("vectorStore.url", `"${protocol}" URLs do not work with ${vs.type}; use ${allowed.join(" or ")}`);
    }
    if (problem !== undefined) {
      fail("vectorStore.url", `${problem} (${vs.type} expects e.g. ${urlSetting.example ?? "a URL"})`);
    }
  }
  for (const [field, setting] of Object.entries(VECTOR_STORE_SETTINGS)) {
    const value = given[field];
    if (
      setting.type === "integer" &&
      value !== undefined &&
      !(Number.isInteger(value) && (value as number) > 0)
    )
      fail(`vectorStore.${field}`, `must be a positive integer (got ${String(value)})`);
  }
}

/** Retrieval modes available to `search`. */
/**
 * Retrieval strategies: `vector_only` (cosine), `keyword` (BM25), `hybrid` (both,
 * fused), `hybrid_rerank` (hybrid, then a reranker; the default) and `advanced`
 * (query expansion, each variant retrieved, fused, reranked). See `retrieve/search.ts`.
 */
export type RetrievalMode = "vector_only" | "keyword" | "hybrid" | "hybrid_rerank" | "advanced";

export const RETRIEVAL_MODES: readonly RetrievalMode[] = [
  "vector_only",
  "keyword",
  "hybrid",
  "hybrid_rerank",
  "advanced",
];

/** Older names still accepted: `vector` is `vector_only`. */
const MODE_ALIASES: Readonly<Record<string, RetrievalMode>> = { vector: "vector_only" };

/** The retrieval mode a name stands for (`vector` → `vector_only`), or undefined when unknown. */
export function parseRetrievalMode(name: string): RetrievalMode | undefined {
  if ((RETRIEVAL_MODES as readonly string[]).includes(name)) return name as RetrievalMode;
  return MODE_ALIASES[name];
}

/**
 * The reranker of a KB: `auto` (the best one available offline, which with the
 * bundled model is none: hybrid_rerank then equals hybrid — see the README's
 * measurements), `none`, `sentence-max-sim` (bundled model, max cosine over the
 * passage's sentences), a local `cross-encoder` model folder (or Hugging Face id
 * with internet), `cohere` (Rerank API) or `llm` (listwise, OpenAI-compatible chat).
 */
export type RerankerConfig =
  | { type: "auto" }
  | { type: "none" }
  | { type: "sentence-max-sim" }
  | { type: "cross-encoder"; model: string; batchSize?: number }
  | { type: "cohere"; model: string; apiKey?: string; baseUrl?: string }
  | { type: "llm"; model: string; baseUrl: string; apiKey?: string };

/** Retrieval settings. */
export interface RetrievalConfig {
  mode: RetrievalMode;
  /** Candidates taken from the vector index (cosine). Default 20. */
  vectorTopK: number;
  /** Candidates taken from the BM25 index. Default 20. */
  keywordTopK: number;
  /**
   * How hybrid fuses the vector and BM25 lists: `weighted` (weighted sum of min-max
   * normalised scores, default) or `rrf` (reciprocal rank fusion). With the bundled
   * model, weighted 0.15 : 1 beat both BM25 alone and RRF 1 : 1 on SciFact, Cranfield
   * and XQuAD-en (README, measured figures); RRF let the weak vector ranks displace
   * good BM25 hits.
   */
  fusion: "rrf" | "weighted";
  /** Reciprocal rank fusion constant k (Cormack et al. 2009). Default 60. */
  rrfK: number;
  /** Weight of the vector list in hybrid fusion (≥ 0; 0 means the list is ignored). Default 0.15. */
  vectorWeight: number;
  /** Weight of the BM25 list in hybrid fusion (≥ 0; 0 means the list is ignored). Default 1. */
  keywordWeight: number;
  /** Results returned. Default 5. */
  topK: number;
  /** Minimum cosine similarity of vector candidates, in [-1, 1]. Default 0.2 (0 means 0). */
  vectorMinScore: number;
  /**
   * Minimum final score of a result (see `RetrievedResult.score`: in [0, 1] except
   * for `keyword`, raw BM25). Default 0: no threshold.
   */
  minScore: number;
  /** When nothing passes `minScore`, return the best results flagged `belowThreshold`. Default false. */
  fallbackBelowThreshold: boolean;
  /** Reranker for hybrid_rerank and advanced. Default `{ type: "auto" }`. */
  reranker: RerankerConfig;
  /** Candidates (best fused first) the reranker scores. Default 20. */
  rerankCandidates: number;
  /** Weight of the rerank score in the final score (`w × rerank + (1 − w) × retrieval`). Default 0.7. */
  rerankWeight: number;
  /** Query variants of the advanced strategy, the query included (1–4). Default 3. */
  expansionVariants: number;
  /**
   * OpenAI-compatible chat endpoint that writes the advanced strategy's query variants
   * (`{ baseUrl, model, apiKey? }`). Absent (default): pseudo-relevance feedback, offline.
   */
  expansionLlm?: { baseUrl: string; model: string; apiKey?: string };
  /** Jaccard similarity of token sets at or above which a result is a near-duplicate. Default 0.9. */
  dedupThreshold: number;
  /** BM25 parameters (Robertson & Zaragoza 2009). Defaults k1 1.2, b 0.75. */
  bm25K1: number;
  bm25B: number;
  /**
   * Weight of the BM25 title field (each chunk's document title, scored as its own
   * field) added to the body score; 0 turns it off. Default 0.3 (SciFact keyword
   * nDCG@10 0.683 → 0.699, Cranfield 0.362 → 0.378; see `bench/retrieval.ts`).
   */
  bm25TitleWeight: number;
  /**
   * Weight of the document profile (organisation, kind and period a document states,
   * such as a report's cover page) added to each of its chunks' BM25 score, scored with
   * document-level frequencies; 0 turns it off. Default 1. See `Bm25Params.documentWeight`.
   */
  bm25DocumentWeight: number;
  /** BM25 analyzer: `english` (stop words + Porter stemming, default) or `standard`. Fixed at index time. */
  analyzer: Analyzer;
}

/** The whole configuration of one knowledge base, stored with it. */
export interface KnowledgeBaseConfig {
  name: string;
  /** Extraction limits and per-format options (Slack workspace URL, email attachments); defaults when absent. */
  extraction?: ExtractOptions;
  chunking: ChunkingConfig;
  embedding: EmbeddingConfig;
  vectorStore: VectorStoreConfig;
  retrieval: RetrievalConfig;
}

/**
 * Largest attachment text, in characters, that an agent answers inline instead of
 * indexing it (`agent/routing.ts` `AttachOptions.inlineLimit`, an agent's `inlineLimit`): 3,000.
 */
export const DEFAULT_INLINE_LIMIT = 3000;

/** Name of the knowledge base used when none is given. It exists implicitly. */
export const DEFAULT_KB = "default";

/** Returns the default configuration for a knowledge base called `name`. */
export function defaultKbConfig(name: string = DEFAULT_KB): KnowledgeBaseConfig {
  return {
    name,
    chunking: { strategy: "auto", chunkSize: 1500, chunkOverlap: 150, minChunkSize: 500 },
    embedding: { provider: "bundled", model: "use-lite-mix", batchSize: 32 },
    vectorStore: { type: "sqlite" },
    retrieval: {
      mode: "hybrid_rerank",
      vectorTopK: 20,
      keywordTopK: 20,
      fusion: "weighted",
      rrfK: 60,
      vectorWeight: 0.15,
      keywordWeight: 1,
      topK: 5,
      vectorMinScore: 0.2,
      minScore: 0,
      fallbackBelowThreshold: false,
      reranker: { type: "auto" },
      rerankCandidates: 20,
      rerankWeight: 0.7,
      expansionVariants: 3,
      dedupThreshold: 0.9,
      bm25K1: 1.2,
      bm25B: 0.75,
      bm25TitleWeight: 0.3,
      bm25DocumentWeight: 1,
      analyzer: "english",
    },
  };
}

const KB_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

/** Keys a configuration may have, per section (a misspelt key is an error, not silently ignored). */
export const KNOWN_KEYS: Record<string, readonly string[]> = {
  "": ["name", "extraction", "chunking", "embedding", "vectorStore", "retrieval"],
  extraction: ["limits", "slack", "email"],
  "extraction.limits": Object.keys(DEFAULT_EXTRACTION_LIMITS),
  "extraction.slack": ["workspaceUrl", "keepSystemMessages"],
  "extraction.email": ["attachments"],
  chunking: [
    "strategy",
    "chunkSize",
    "chunkOverlap",
    "minChunkSize",
    "unit",
    "tokenizer",
    "email",
    "slack",
    "embeddingSemantic",
    "contextLlm",
  ],
  "chunking.contextLlm": ["baseUrl", "model", "apiKey"],
  "chunking.email": ["wholeUnder", "quotedReplies"],
  "chunking.slack": ["wholeThreadUnder", "maxGapSeconds"],
  "chunking.embeddingSemantic": [
    "breakpoint",
    "threshold",
    "percentile",
    "minSize",
    "maxSize",
    "fallbackSize",
    "fallbackOverlap",
    "reuseSentenceEmbeddings",
  ],
  embedding: EMBEDDING_FIELDS,
  vectorStore: ["type", ...Object.keys(VECTOR_STORE_SETTINGS)],
  retrieval: [
    "mode",
    "vectorTopK",
    "keywordTopK",
    "fusion",
    "rrfK",
    "vectorWeight",
    "keywordWeight",
    "topK",
    "vectorMinScore",
    "minScore",
    "fallbackBelowThreshold",
    "reranker",
    "rerankCandidates",
    "rerankWeight",
    "expansionVariants",
    "expansionLlm",
    "dedupThreshold",
    "bm25K1",
    "bm25B",
    "bm25TitleWeight",
    "bm25DocumentWeight",
    "analyzer",
  ],
};

function checkKeys(config: KnowledgeBaseConfig, fail: (field: string, problem: string) => never): void {
  for (const [section, known] of Object.entries(KNOWN_KEYS)) {
    let value: unknown = config;
    for (const part of section ? section.split(".") : []) value = (value as Record<string, unknown>)?.[part];
    if (value === undefined || value === null || typeof value !== "object") continue;
    for (const key of Object.keys(value)) {
      if (!known.includes(key)) {
        fail(section ? `${section}.${key}` : key, `is not a known setting (known: ${known.join(", ")})`);
      }
    }
  }
}

/**
 * Validates a knowledge base configuration.
 * @throws ConfigError naming the first invalid field and why.
 */
export function validateKbConfig(config: KnowledgeBaseConfig): KnowledgeBaseConfig {
  const fail = (field: string, problem: string): never => {
    throw new ConfigError(`knowledge base "${config.name}": ${field} ${problem}`);
  };
  if (!KB_NAME.test(config.name)) {
    throw new ConfigError(
      `invalid knowledge base name "${config.name}": use 1-64 letters, digits, '_', '-' or '.', starting with a letter or digit`,
    );
  }
  checkKeys(config, fail);
  if (config.extraction !== undefined) {
    try {
      resolveExtractOptions(config.extraction);
    } catch (err) {
      throw new ConfigError(`knowledge base "${config.name}": extraction.${(err as Error).message}`);
    }
  }
  const c = config.chunking;
  if (!CHUNKING_STRATEGIES.includes(c.strategy)) {
    fail("chunking.strategy", `must be one of ${CHUNKING_STRATEGIES.join(", ")} (got "${c.strategy}")`);
  }
  checkInt(c.chunkSize, "chunking.chunkSize", 1, fail);
  checkInt(c.chunkOverlap, "chunking.chunkOverlap", 0, fail);
  checkInt(c.minChunkSize, "chunking.minChunkSize", 0, fail);
  if (c.chunkOverlap >= c.chunkSize) {
    fail(
      "chunking.chunkOverlap",
      `(${c.chunkOverlap}) must be smaller than chunking.chunkSize (${c.chunkSize})`,
    );
  }
  try {
    validateChunkingConfig(c);
  } catch (err) {
    if (err instanceof ConfigError) fail("chunking", err.message);
    throw err;
  }
  if (c.contextLlm !== undefined) {
    const llm = c.contextLlm as Partial<ContextLlmConfig>;
    if (llm === null || typeof llm !== "object")
      fail("chunking.contextLlm", "must be { baseUrl, model, apiKey? }");
    const problem = urlProblem(llm.baseUrl, { schemes: HTTP_SCHEMES, credentials: false });
    if (problem !== undefined) fail("chunking.contextLlm.baseUrl", problem);
    if (typeof llm.model !== "string" || llm.model.trim() === "")
      fail("chunking.contextLlm.model", "must be a non-empty model name");
  }
  if (!(EMBEDDING_PROVIDERS as readonly string[]).includes(config.embedding.provider)) {
    fail(
      "embedding.provider",
      `"${String(config.embedding.provider)}" is not an embedding provider; use one of ${EMBEDDING_PROVIDERS.join(", ")}`,
    );
  }
  if (typeof config.embedding.model !== "string" || config.embedding.model.trim() === "") {
    fail("embedding.model", "must be a non-empty string");
  }
  checkInt(config.embedding.batchSize, "embedding.batchSize", 1, fail);
  const embeddingUrl = (config.embedding as { baseUrl?: unknown }).baseUrl;
  if (embeddingUrl !== undefined) {
    const problem = urlProblem(embeddingUrl, { schemes: HTTP_SCHEMES, credentials: false });
    if (problem !== undefined) fail("embedding.baseUrl", problem);
  }
  validateVectorStore(config.vectorStore, fail);
  const r = config.retrieval;
  if (!RETRIEVAL_MODES.includes(r.mode)) {
    fail("retrieval.mode", `must be one of ${RETRIEVAL_MODES.join(", ")} (got "${r.mode}")`);
  }
  if (r.fusion !== "rrf" && r.fusion !== "weighted")
    fail("retrieval.fusion", `must be rrf or weighted (got ${JSON.stringify(r.fusion)})`);
  checkInt(r.vectorTopK, "retrieval.vectorTopK", 1, fail);
  checkInt(r.keywordTopK, "retrieval.keywordTopK", 1, fail);
  checkInt(r.topK, "retrieval.topK", 1, fail);
  if (!(r.rrfK >= 0)) fail("retrieval.rrfK", `must be >= 0 (got ${r.rrfK})`);
  if (!(r.vectorWeight >= 0)) fail("retrieval.vectorWeight", `must be >= 0 (got ${r.vectorWeight})`);
  if (!(r.keywordWeight >= 0)) fail("retrieval.keywordWeight", `must be >= 0 (got ${r.keywordWeight})`);
  if (r.vectorWeight === 0 && r.keywordWeight === 0) {
    fail(
      "retrieval.vectorWeight",
      "and retrieval.keywordWeight are both 0: hybrid would score every result 0",
    );
  }
  if (!(r.vectorMinScore >= -1 && r.vectorMinScore <= 1))
    fail("retrieval.vectorMinScore", `must be in [-1, 1] (got ${r.vectorMinScore})`);
  if (!(r.minScore >= 0)) fail("retrieval.minScore", `must be >= 0 (got ${r.minScore})`);
  if (typeof r.fallbackBelowThreshold !== "boolean")
    fail(
      "retrieval.fallbackBelowThreshold",
      `must be true or false (got ${String(r.fallbackBelowThreshold)})`,
    );
  checkInt(r.rerankCandidates, "retrieval.rerankCandidates", 1, fail);
  if (!(r.rerankWeight >= 0 && r.rerankWeight <= 1))
    fail("retrieval.rerankWeight", `must be in [0, 1] (got ${r.rerankWeight})`);
  checkInt(r.expansionVariants, "retrieval.expansionVariants", 1, fail);
  if (r.expansionVariants > 4)
    fail("retrieval.expansionVariants", `must be at most 4 (got ${r.expansionVariants})`);
  const rerankerImpl = r.reranker ? rerankerOf(String(r.reranker.type)) : undefined;
  if (!rerankerImpl) {
    return fail(
      "retrieval.reranker.type",
      `must be one of ${RERANKER_TYPES.join(", ")} (got ${JSON.stringify(r.reranker?.type)})`,
    );
  }
  for (const [field, setting] of Object.entries(rerankerImpl.settings)) {
    if (setting.required && !(r.reranker as unknown as Record<string, unknown>)[field])
      fail(
        `retrieval.reranker.${field}`,
        `is required for ${indefiniteArticle(r.reranker.type)} ${r.reranker.type} reranker`,
      );
  }
  const reranker = r.reranker as { baseUrl?: unknown };
  if (reranker.baseUrl !== undefined) {
    const problem = urlProblem(reranker.baseUrl, { schemes: HTTP_SCHEMES, credentials: false });
    if (problem !== undefined) fail("retrieval.reranker.baseUrl", problem);
  }
  if (r.expansionLlm !== undefined) {
    const problem = urlProblem(r.expansionLlm.baseUrl, { schemes: HTTP_SCHEMES, credentials: false });
    if (problem !== undefined) fail("retrieval.expansionLlm.baseUrl", problem);
    if (typeof r.expansionLlm.model !== "string" || r.expansionLlm.model.trim() === "") {
      fail("retrieval.expansionLlm.model", "must be a non-empty model name");
    }
  }
  if (!(r.dedupThreshold > 0 && r.dedupThreshold <= 1)) {
    fail("retrieval.dedupThreshold", `must be in (0, 1] (got ${r.dedupThreshold})`);
  }
  if (!(r.bm25K1 >= 0)) fail("retrieval.bm25K1", `must be >= 0 (got ${r.bm25K1})`);
  if (!(r.bm25B >= 0 && r.bm25B <= 1)) fail("retrieval.bm25B", `must be in [0, 1] (got ${r.bm25B})`);
  if (!(r.bm25TitleWeight >= 0 && Number.isFinite(r.bm25TitleWeight))) {
    fail("retrieval.bm25TitleWeight", `must be a finite number >= 0 (got ${r.bm25TitleWeight})`);
  }
  if (
    r.bm25DocumentWeight !== undefined &&
    !(r.bm25DocumentWeight >= 0 && Number.isFinite(r.bm25DocumentWeight))
  ) {
    fail("retrieval.bm25DocumentWeight", `must be a finite number >= 0 (got ${r.bm25DocumentWeight})`);
  }
  if (!ANALYZERS.includes(r.analyzer)) {
    fail("retrieval.analyzer", `must be one of ${ANALYZERS.join(", ")} (got "${r.analyzer}")`);
  }
  return config;
}

function checkInt(value: number, field: string, min: number, fail: (f: string, p: string) => never): void {
  if (!Number.isInteger(value) || value < min) fail(field, `must be an integer >= ${min} (got ${value})`);
}
