/**
 * What we know about well-known embedding models without asking them: output
 * dimensions, the query/document prefixes asymmetric models were trained
 * with, and their pooling.
 */

/** OpenAI embedding models: default output length. */
const OPENAI_DIMENSIONS: Record<string, number> = {
  "text-embedding-3-small": 1536,
  "text-embedding-3-large": 3072,
  "text-embedding-ada-002": 1536,
};

/** Cohere embed models: default output length. */
const COHERE_DIMENSIONS: Record<string, number> = {
  "embed-v4.0": 1536,
  "embed-english-v3.0": 1024,
  "embed-multilingual-v3.0": 1024,
  "embed-english-light-v3.0": 384,
  "embed-multilingual-light-v3.0": 384,
  "embed-english-v2.0": 4096,
  "embed-english-light-v2.0": 1024,
  "embed-multilingual-v2.0": 768,
};

/** Open models (Hugging Face), by the last segment of the id, lower-cased. */
const OPEN_DIMENSIONS: Record<string, number> = {
  "all-minilm-l6-v2": 384,
  "all-minilm-l12-v2": 384,
  "all-mpnet-base-v2": 768,
  "multi-qa-minilm-l6-cos-v1": 384,
  "multi-qa-mpnet-base-dot-v1": 768,
  "paraphrase-minilm-l6-v2": 384,
  "paraphrase-multilingual-minilm-l12-v2": 384,
  "paraphrase-multilingual-mpnet-base-v2": 768,
  "bge-small-en-v1.5": 384,
  "bge-base-en-v1.5": 768,
  "bge-large-en-v1.5": 1024,
  "bge-small-en": 384,
  "bge-base-en": 768,
  "bge-large-en": 1024,
  "bge-small-zh-v1.5": 512,
  "bge-base-zh-v1.5": 768,
  "bge-large-zh-v1.5": 1024,
  "bge-m3": 1024,
  "e5-small-v2": 384,
  "e5-base-v2": 768,
  "e5-large-v2": 1024,
  "multilingual-e5-small": 384,
  "multilingual-e5-base": 768,
  "multilingual-e5-large": 1024,
  "multilingual-e5-large-instruct": 1024,
  "gte-small": 384,
  "gte-base": 768,
  "gte-large": 1024,
  "nomic-embed-text-v1": 768,
  "nomic-embed-text-v1.5": 768,
  "mxbai-embed-large-v1": 1024,
};

/** The last `/`-separated segment of a model id, lower-cased (`BAAI/bge-m3` → `bge-m3`). */
export function modelBaseName(model: string): string {
  const parts = model.replace(/[/\\]+$/, "").split(/[/\\]/);
  return (parts[parts.length - 1] ?? model).toLowerCase();
}

/**
 * Default output length of a well-known model, or undefined.
 * @param provider `openai`, `cohere` or any other provider (open models, and
 *   OpenAI names for OpenAI-compatible gateways).
 */
export function knownDimension(provider: string, model: string): number | undefined {
  if (provider === "openai") return OPENAI_DIMENSIONS[model];
  if (provider === "cohere") return COHERE_DIMENSIONS[model];
  const base = modelBaseName(model);
  return OPEN_DIMENSIONS[base] ?? OPENAI_DIMENSIONS[base];
}

/** True for OpenAI's own embedding model names (also behind a gateway prefix such as `openai/`). */
export function isOpenAiModel(model: string): boolean {
  return Object.hasOwn(OPENAI_DIMENSIONS, modelBaseName(model));
}

/** Input limit of OpenAI's embedding models, in cl100k_base tokens. */
export const OPENAI_MAX_INPUT_TOKENS = 8191;

/** Query and document prefixes. */
export interface Prefixes {
  query: string;
  document: string;
}

/** The English bge retrieval instruction (BAAI, FlagEmbedding model cards). */
export const BGE_QUERY_INSTRUCTION = "Represent this sentence for searching relevant passages: ";
/** The Chinese bge retrieval instruction. */
const BGE_ZH_QUERY_INSTRUCTION = "为这个句子生成表示以用于检索相关文章：";
/** The instruction the e5 `-instruct` model cards use for web-search retrieval. */
const E5_INSTRUCT_QUERY =
  "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery: ";

/**
 * The prefixes a model was trained with, from its name:
 * - e5 (`e5-*`, `multilingual-e5-*`): `query: ` / `passage: `; the `-instruct`
 *   variants: the model card's web-search instruction / none;
 * - bge v1/v1.5 (`bge-*-en*`, and other `bge-*` except `bge-m3`): query
 *   instruction `Represent this sentence for searching relevant passages: ` /
 *   none (Chinese instruction for `bge-*-zh*`); `bge-m3` needs none;
 * - nomic-embed-text: `search_query: ` / `search_document: `;
 * - anything else: none.
 */
export function defaultPrefixes(model: string): Prefixes {
  const name = modelBaseName(model);
  if (/(^|[-_])e5([-_]|$)/.test(name)) {
    return name.includes("instruct")
      ? { query: E5_INSTRUCT_QUERY, document: "" }
      : { query: "query: ", document: "passage: " };
  }
  if (/(^|[-_])bge([-_]|$)/.test(name) && !/bge-m3/.test(name)) {
    return { query: /-zh/.test(name) ? BGE_ZH_QUERY_INSTRUCTION : BGE_QUERY_INSTRUCTION, document: "" };
  }
  if (name.startsWith("nomic-embed-text")) return { query: "search_query: ", document: "search_document: " };
  return { query: "", document: "" };
}

/** Prefixes from explicit options, falling back per side to {@link defaultPrefixes}. */
export function resolvePrefixes(
  model: string,
  options: { queryPrefix?: string; documentPrefix?: string },
): Prefixes {
  const defaults = defaultPrefixes(model);
  return {
    query: options.queryPrefix ?? defaults.query,
    document: options.documentPrefix ?? defaults.document,
  };
}

/** Default pooling by model name: bge models are trained with the [CLS] vector, others with the mean. */
export function defaultPooling(model: string): "mean" | "cls" {
  const name = modelBaseName(model);
  return /(^|[-_])bge([-_]|$)/.test(name) ? "cls" : "mean";
}
