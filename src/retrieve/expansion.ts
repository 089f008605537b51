/**
 * LLM query expansion for the `advanced` strategy: an OpenAI-compatible chat
 * endpoint (`POST {baseUrl}/v1/chat/completions`) is asked for alternative
 * phrasings of the query (multi-query retrieval, as in RAG-Fusion: Rackauckas 2024),
 * each retrieved and fused by reciprocal rank fusion. Without an LLM configured,
 * the pipeline uses pseudo-relevance feedback instead (see `feedbackVariants`).
 */
import { chatCompletion, type HttpOptions } from "../rerank/http.js";
import type { QueryExpander } from "./search.js";

/** Where the expansion LLM is. */
export interface ExpansionLlmConfig {
  /** OpenAI-compatible server root (`…/v1/chat/completions` is appended; a trailing `/v1` is not doubled). */
  baseUrl: string;
  /** Chat model, e.g. `gpt-4o-mini`. */
  model: string;
  /** Bearer key, if the endpoint needs one. */
  apiKey?: string;
}

/** The chat messages asking for `max` alternative phrasings of `query`, one per line. */
export function expansionMessages(
  query: string,
  max: number,
): { role: "system" | "user"; content: string }[] {
  return [
    {
      role: "system",
      content:
        "You rewrite search queries for a document retrieval system. Reply with alternative phrasings only, " +
        "one per line, no numbering, no explanations, in the language of the query.",
    },
    { role: "user", content: `Give ${max} different phrasings of this search query:\n${query}` },
  ];
}

/**
 * The variants in a chat answer: one per non-empty line, list markers (`1.`, `-`,
 * `*`) and surrounding quotes removed, duplicates and the query itself dropped, at most `max`.
 */
export function parseVariants(content: string, query: string, max: number): string[] {
  const seen = new Set([query.trim().toLowerCase()]);
  const out: string[] = [];
  for (const line of content.split(/\r?\n/)) {
    const v = line
      .replace(/^\s*(?:\d+[.)]|[-*•])\s*/, "")
      .replace(/^["'“”]+|["'“”]+$/g, "")
      .trim();
    if (v === "" || v.length > 500 || seen.has(v.toLowerCase())) continue;
    seen.add(v.toLowerCase());
    out.push(v);
    if (out.length >= max) break;
  }
  return out;
}

/**
 * A {@link QueryExpander} backed by an OpenAI-compatible chat endpoint.
 * The request is `{model, messages, temperature: 0}`; the answer's
 * `choices[0].message.content` is parsed with {@link parseVariants}.
 * Retries 408/429/5xx with backoff (honouring `Retry-After`).
 * @throws RerankError-style errors (named `llm-expansion:MODEL`) for 4xx answers,
 *   malformed responses or exhausted retries; the pipeline turns them into a warning.
 */
export function createLlmExpander(config: ExpansionLlmConfig, http: HttpOptions = {}): QueryExpander {
  const name = `llm-expansion:${config.model}`;
  return async (query, max) => {
    if (max <= 0) return [];
    const content = await chatCompletion(name, config, expansionMessages(query, max), http);
    return parseVariants(content, query, max);
  };
}
