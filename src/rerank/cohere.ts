/**
 * Cohere Rerank over HTTP (`POST {baseUrl}/v2/rerank`).
 *
 * Wire format (Cohere API v2): request `{ model, query, documents: string[],
 * top_n }`, bearer API key; response `{ id, results: [{ index,
 * relevance_score }], meta }` with `results` sorted by relevance.
 */
import { endpointUrl } from "../http.js";
import { RerankError, type Reranker, type RerankOptions, type RerankScore } from "./contract.js";
import { type HttpOptions, postJson } from "./http.js";
import { rerankDistinct } from "./shared.js";

/** Default endpoint of Cohere's hosted API. */
export const COHERE_BASE_URL = "https://api.cohere.com";

/** Options of {@link CohereReranker}. */
export interface CohereRerankerOptions extends HttpOptions {
  /** Rerank model, e.g. `rerank-v3.5`, `rerank-english-v3.0`, `rerank-multilingual-v3.0`. */
  model: string;
  /** API key, sent as `Authorization: Bearer …`. Omit for keyless compatible servers. */
  apiKey?: string;
  /** Server root without `/v2`, default {@link COHERE_BASE_URL}. */
  baseUrl?: string;
  /** Cohere's `max_tokens_per_doc` (documents are truncated server-side to this many tokens). Not sent when omitted. */
  maxTokensPerDoc?: number;
}

/**
 * Reranks with Cohere's hosted Rerank models (or a server speaking the same
 * API, e.g. a private deployment).
 *
 * Score: Cohere's `relevance_score`, documented as normalised to [0, 1]
 * (values are clamped to [0, 1] defensively); scale `probability`. Cohere
 * calibrates it per model, not as a strict probability, so compare thresholds
 * only within one model.
 *
 * Identical texts are sent once (they get the same score); all distinct texts
 * are scored (`top_n` = their count) and `topN` is applied locally, so
 * duplicates never crowd a result out.
 *
 * Errors: {@link RerankError} with the HTTP status and the body's message for
 * 4xx answers (bad key, unknown model, too many documents); after the retries
 * for 429/5xx/timeouts (honouring `Retry-After`); for a malformed response
 * (not JSON, no `results` array, an index out of range or repeated, a missing
 * or non-numeric `relevance_score`, or fewer results than documents).
 */
export class CohereReranker implements Reranker {
  readonly name: string;
  readonly scale = "probability" as const;
  private readonly url: string;

  constructor(private readonly options: CohereRerankerOptions) {
    this.name = `cohere:${options.model}`;
    this.url = endpointUrl(options.baseUrl ?? COHERE_BASE_URL, "/v2/rerank");
  }

  rerank(query: string, docs: string[], options?: RerankOptions): Promise<RerankScore[]> {
    return rerankDistinct(this.name, docs, options, (texts) => this.score(query, texts, options?.signal));
  }

  private async score(query: string, texts: string[], signal: AbortSignal | undefined): Promise<number[]> {
    const body: Record<string, unknown> = {
      model: this.options.model,
      query,
      documents: texts,
      top_n: texts.length,
    };
    if (this.options.maxTokensPerDoc !== undefined) body.max_tokens_per_doc = this.options.maxTokensPerDoc;
    const headers: Record<string, string> = {};
    if (this.options.apiKey) headers.authorization = `Bearer ${this.options.apiKey}`;
    const response = await postJson(this.name, this.url, body, headers, this.options, signal);
    return this.parse(response, texts.length);
  }

  /** Scores per document position from a v2 rerank response; throws on anything malformed. */
  private parse(response: unknown, n: number): number[] {
    const bad = (why: string): RerankError =>
      new RerankError(this.name, `malformed response from ${this.url}: ${why}`);
    const results = (response as { results?: unknown } | null)?.results;
    if (!Array.isArray(results)) throw bad("no results array");
    const scores = new Array<number | undefined>(n).fill(undefined);
    for (const r of results as unknown[]) {
      const { index, relevance_score: score } = (r ?? {}) as { index?: unknown; relevance_score?: unknown };
      if (typeof index !== "number" || !Number.isInteger(index) || index < 0 || index >= n) {
        throw bad(`result index ${JSON.stringify(index)} is not a document position (0..${n - 1})`);
      }
      if (scores[index] !== undefined) throw bad(`result index ${index} appears twice`);
      if (typeof score !== "number" || !Number.isFinite(score)) {
        throw bad(`relevance_score ${JSON.stringify(score)} of result ${index} is not a number`);
      }
      scores[index] = Math.min(1, Math.max(0, score));
    }
    const missing = scores.filter((s) => s === undefined).length;
    if (missing > 0) throw bad(`${results.length} results for ${n} documents`);
    return scores as number[];
  }
}
