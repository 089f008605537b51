/**
 * Listwise reranking with a chat LLM, after RankGPT (Sun et al. 2023, "Is
 * ChatGPT Good at Search? Investigating Large Language Models as Re-Ranking
 * Agents"): the model sees the query and a numbered list of passages and
 * answers a permutation; lists longer than the window are ranked with a
 * sliding window that moves from the end of the list to its start, so strong
 * passages bubble up to the front.
 */
import { endpointUrl } from "../http.js";
import { RerankError, type Reranker, type RerankOptions, type RerankScore } from "./contract.js";
import { type HttpOptions, postJson } from "./http.js";
import { rerankDistinct } from "./shared.js";

/** Options of {@link LlmReranker}. */
export interface LlmRerankerOptions extends HttpOptions {
  /** Chat model, e.g. `gpt-4o-mini`. */
  model: string;
  /**
   * Server root of an OpenAI-compatible API (OpenAI, Azure-compatible proxies,
   * vLLM, Ollama, llama.cpp server, LM Studio …). Requests go to
   * `{baseUrl}/v1/chat/completions`; a `baseUrl` that already ends in `/v1` is not doubled.
   */
  baseUrl: string;
  /** API key, sent as `Authorization: Bearer …`. Omit for local servers. */
  apiKey?: string;
  /** Passages per LLM call. Default 20. */
  windowSize?: number;
  /** How far the window moves between calls (must be ≤ windowSize). Default windowSize / 2. */
  step?: number;
  /** Passages longer than this many characters are cut (with "…") in the prompt. Default 1200. */
  maxPassageChars?: number;
  /** Sampling temperature; `null` leaves it out (for models that reject it). Default 0. */
  temperature?: number | null;
  /** `max_tokens` of the completion; not sent when omitted. */
  maxTokens?: number;
}

/**
 * Parses an LLM's ranking of `count` passages (numbered from 1) into a
 * permutation of 0..count−1.
 *
 * Accepts a JSON array (`[3, 1, 2]`, `["3", "1"]`, `["[3]", "[1]"]`), a JSON
 * object holding one (`{"ranking": [3, 1, 2]}`), the RankGPT form
 * `[3] > [1] > [2]`, or any text with the numbers in order, also inside
 * Markdown code fences or after a `<think>…</think>` block. Numbers outside
 * 1..count, repeats and non-integers are ignored; passages the answer does
 * not rank follow the ranked ones in their original order.
 */
export function parseRanking(content: string, count: number): number[] {
  const text = content
    .replace(/<think>[\s\S]*?<\/think>/gi, " ")
    .replace(/```[a-z]*\s*/gi, " ")
    .trim();
  const picked = rankingNumbers(text);
  const out: number[] = [];
  const used = new Set<number>();
  for (const x of picked) {
    if (Number.isInteger(x) && x >= 1 && x <= count && !used.has(x)) {
      used.add(x);
      out.push(x - 1);
    }
  }
  for (let i = 0; i < count; i++) if (!used.has(i + 1)) out.push(i);
  return out;
}

/** The numbers of a ranking answer, in answer order, before range checks. */
function rankingNumbers(text: string): number[] {
  const fromJson = (value: unknown): number[] | undefined => {
    if (Array.isArray(value)) return value.map(toNumber);
    if (value !== null && typeof value === "object") {
      for (const v of Object.values(value)) if (Array.isArray(v)) return v.map(toNumber);
    }
    return undefined;
  };
  try {
    const whole = fromJson(JSON.parse(text));
    if (whole) return whole;
  } catch {
    // not pure JSON
  }
  // RankGPT style: [2] > [1] > [3]
  if (/\[\s*\d+\s*\]\s*>/.test(text)) return [...text.matchAll(/\[\s*(\d+)\s*\]/g)].map((m) => Number(m[1]));
  // The bracketed JSON array with the most numbers.
  let best: number[] | undefined;
  for (const m of text.matchAll(/\[[^[\]]*\]/g)) {
    try {
      const arr = fromJson(JSON.parse(m[0]));
      if (arr && (!best || arr.filter(Number.isFinite).length > best.filter(Number.isFinite).length))
        best = arr;
    } catch {
      // not JSON
    }
  }
  if (best?.some(Number.isFinite)) return best;
  return [...text.matchAll(/\d+/g)].map((m) => Number(m[0]));
}

function toNumber(v: unknown): number {
  if (typeof v === "number") return v;
  if (typeof v === "string") {
    const m = /^\s*\[?\s*(\d+)\s*\]?\s*$/.exec(v);
    if (m) return Number(m[1]);
  }
  return Number.NaN;
}

/** The text of `choices[0].message.content` (a string, or an array of text parts). */
function messageContent(response: unknown): string | undefined {
  const choices = (response as { choices?: unknown } | null)?.choices;
  if (!Array.isArray(choices) || choices.length === 0) return undefined;
  const message = (choices[0] as { message?: { content?: unknown } } | null)?.message;
  if (!message || typeof message !== "object") return undefined;
  const content = message.content;
  if (typeof content === "string") return content;
  if (content === null || content === undefined) return "";
  if (Array.isArray(content)) {
    return content
      .map((p) => (p && typeof p === "object" && typeof p.text === "string" ? p.text : ""))
      .join("");
  }
  return undefined;
}

/**
 * Reranks with any OpenAI-compatible chat-completions endpoint, listwise.
 *
 * Score: from the rank only — score = 1 − r/n for the passage at 0-based rank
 * r among n distinct passages (1 for the best, 1/n for the last); scale
 * `rank`. Identical texts are shown to the model once and share a score.
 *
 * Cost: one chat completion per window — ⌈(n − windowSize) / step⌉ + 1 calls
 * for n > windowSize distinct passages, run one after the other.
 *
 * Parsing is lenient (see {@link parseRanking}): a ranking that misses
 * passages keeps the rest in their input order, so a bad answer degrades to
 * the first-stage order rather than failing.
 *
 * Errors: {@link RerankError} for HTTP 4xx answers (with the body message),
 * after the retries for 429/5xx/timeouts, and for a response without
 * `choices[0].message`.
 */
export class LlmReranker implements Reranker {
  readonly name: string;
  readonly scale = "rank" as const;
  private readonly url: string;
  private readonly windowSize: number;
  private readonly step: number;

  constructor(private readonly options: LlmRerankerOptions) {
    this.name = `llm:${options.model}`;
    this.url = endpointUrl(options.baseUrl, "/v1/chat/completions", "/v1");
    this.windowSize = options.windowSize ?? 20;
    this.step = options.step ?? Math.max(1, Math.floor(this.windowSize / 2));
    if (!Number.isInteger(this.windowSize) || this.windowSize < 2) {
      throw new RerankError(this.name, `windowSize must be an integer ≥ 2, got ${this.windowSize}`);
    }
    if (!Number.isInteger(this.step) || this.step < 1 || this.step > this.windowSize) {
      throw new RerankError(this.name, `step must be an integer in 1..windowSize, got ${this.step}`);
    }
  }

  rerank(query: string, docs: string[], options?: RerankOptions): Promise<RerankScore[]> {
    return rerankDistinct(this.name, docs, options, (texts) => this.score(query, texts, options?.signal));
  }

  private async score(query: string, texts: string[], signal: AbortSignal | undefined): Promise<number[]> {
    const n = texts.length;
    const order = texts.map((_, i) => i);
    if (n > 1) {
      let end = n;
      for (;;) {
        const start = Math.max(0, end - this.windowSize);
        const window = order.slice(start, end);
        const perm = await this.rankWindow(
          query,
          window.map((i) => texts[i] as string),
          signal,
        );
        for (let k = 0; k < perm.length; k++) order[start + k] = window[perm[k] as number] as number;
        if (start === 0) break;
        end -= this.step;
      }
    }
    const scores = new Array<number>(n);
    order.forEach((doc, rank) => {
      scores[doc] = 1 - rank / n;
    });
    return scores;
  }

  /** Asks the model to rank one window; returns a permutation of its positions. */
  private async rankWindow(
    query: string,
    passages: string[],
    signal: AbortSignal | undefined,
  ): Promise<number[]> {
    const body: Record<string, unknown> = {
      model: this.options.model,
      messages: buildMessages(query, passages, this.options.maxPassageChars ?? 1200),
    };
    const temperature = this.options.temperature === undefined ? 0 : this.options.temperature;
    if (temperature !== null) body.temperature = temperature;
    if (this.options.maxTokens !== undefined) body.max_tokens = this.options.maxTokens;
    const headers: Record<string, string> = {};
    if (this.options.apiKey) headers.authorization = `Bearer ${this.options.apiKey}`;
    const response = await postJson(this.name, this.url, body, headers, this.options, signal);
    const content = messageContent(response);
    if (content === undefined) {
      throw new RerankError(this.name, `malformed response from ${this.url}: no choices[0].message.content`);
    }
    return parseRanking(content, passages.length);
  }
}

/** The chat messages asking for a ranking of `passages` (numbered from 1). */
export function buildMessages(
  query: string,
  passages: string[],
  maxPassageChars: number,
): { role: "system" | "user"; content: string }[] {
  const clip = (p: string): string => {
    const t = p.replace(/\s+/g, " ").trim();
    return t.length > maxPassageChars ? `${t.slice(0, maxPassageChars)}…` : t;
  };
  const list = passages.map((p, i) => `[${i + 1}] ${clip(p)}`).join("\n");
  const w = passages.length;
  return [
    {
      role: "system",
      content: "You judge search results. You order passages by how well they answer a query.",
    },
    {
      role: "user",
      content:
        `Query: ${query.trim()}\n\n${w} passages:\n${list}\n\n` +
        `Order the ${w} passages from most to least relevant to the query. ` +
        `Answer with a JSON array of passage numbers only, most relevant first, using each number from 1 to ${w} once ` +
        `(for three passages, e.g. [2, 3, 1]).`,
    },
  ];
}
