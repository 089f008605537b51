/**
 * Optional LLM-written chunk context ("contextual retrieval", Anthropic 2024): when a
 * KB's chunking config names an OpenAI-compatible chat endpoint (`contextLlm`), each
 * chunk gets one sentence situating it within its document, written by the model
 * from the document's beginning and the text just before the chunk, and prepended
 * to its context prefix — so BM25 and the embedding model read it with the chunk.
 * Off by default; answers are cached by the SHA-256 of the prompt, so re-ingesting
 * unchanged text asks nothing again.
 */
import { createHash } from "node:crypto";
import type { ContextLlmConfig } from "../config.js";
import type { HttpOptions } from "../http.js";
import { chatCompletion } from "../rerank/http.js";
import { redactText } from "../secrets.js";
import { type Chunk, type ExtractedDocument, withContext } from "../types.js";
import { MAX_CONTEXT_CHARS, shorten } from "./context.js";
import { type ChunkLimits, fitPrefix } from "./spans.js";

/** Version of the prompt below; part of every cache key, so a new prompt asks again. */
export const CONTEXT_PROMPT_VERSION = 1;
/** Characters of the document's beginning shown to the model. */
const DOCUMENT_HEAD = 2500;
/** Characters of text right before the chunk shown to the model (when it is not in the beginning). */
const BEFORE_CHUNK = 800;
/** Characters of the chunk shown to the model. */
const CHUNK_CHARS = 2500;
/** Chunks of one document situated at once. */
const CONCURRENCY = 4;

/** A persistent store of written sentences, keyed by the hash of their prompt. */
export interface ContextCache {
  get(key: string): string | undefined;
  set(key: string, sentence: string): void;
}

/** The chat messages asking for one sentence that situates `chunk` within `doc`. */
export function situateMessages(
  doc: ExtractedDocument,
  chunk: Pick<Chunk, "start" | "end" | "contextPrefix">,
): { role: "system" | "user"; content: string }[] {
  const text = doc.text;
  const head = text.slice(0, DOCUMENT_HEAD);
  const before =
    chunk.start > DOCUMENT_HEAD
      ? text.slice(Math.max(DOCUMENT_HEAD, chunk.start - BEFORE_CHUNK), chunk.start)
      : "";
  const title = typeof doc.metadata.title === "string" ? `Title: ${doc.metadata.title}\n` : "";
  const known = chunk.contextPrefix ? `Known context: ${chunk.contextPrefix.replace(/\n/g, " · ")}\n` : "";
  return [
    {
      role: "system",
      content:
        "You situate passages of documents for a search engine. Reply with one short sentence only, " +
        "in the language of the document, without quotes or preamble.",
    },
    {
      role: "user",
      content:
        `<document>\n${title}${head}${before ? `\n…\n${before}` : ""}\n</document>\n` +
        `${known}Here is the passage we want to situate within the whole document:\n` +
        `<passage>\n${text.slice(chunk.start, Math.min(chunk.end, chunk.start + CHUNK_CHARS))}\n</passage>\n` +
        "Give one short sentence (at most 40 words) that situates this passage within the document " +
        "(who or what it concerns, which part of the document, which period), to improve search " +
        "retrieval of the passage. Answer only with the sentence.",
    },
  ];
}

/** The sentence in a chat answer: its first non-empty line, quotes and labels removed, at most 300 characters. */
export function parseSentence(content: string): string | undefined {
  const line = content
    .replace(/<think>[\s\S]*?<\/think>/g, "")
    .split(/\r?\n/)
    .map((l) => l.trim())
    .find((l) => l !== "");
  if (!line) return undefined;
  const unquote = (t: string): string => t.replace(/^["'“”]+|["'“”]+$/g, "").trim();
  const clean = unquote(unquote(line).replace(/^(?:context|sentence)\s*:\s*/i, ""));
  return clean ? shorten(clean, 300) : undefined;
}

/** What {@link ChunkSituator.situate} did for one document. */
export interface SituateOutcome {
  /** Chunks that got a sentence (from the model or the cache). */
  situated: number;
  /** Sentences served from the cache. */
  cached: number;
  /** Why some chunks got none (the first failure), when the endpoint failed. */
  failure?: string;
}

/** Writes LLM context for the chunks of a document (see the module comment). */
export interface ChunkSituator {
  /** `llm-context:<model>`. */
  readonly name: string;
  /** Prepends a situating sentence to each chunk's prefix (within `limits.size`); never throws for endpoint failures. */
  situate(doc: ExtractedDocument, chunks: Chunk[], limits: ChunkLimits): Promise<SituateOutcome>;
}

/**
 * A {@link ChunkSituator} backed by an OpenAI-compatible chat endpoint
 * (`POST {baseUrl}/v1/chat/completions`, `{model, messages, temperature: 0}`),
 * retrying 408/429/5xx with backoff (see `src/http.ts`). Sentences are cached in
 * `cache` under the SHA-256 of the model and prompt. A chunk whose request fails
 * keeps its prefix; the outcome names the failure (credentials masked).
 */
export function createLlmSituator(
  config: ContextLlmConfig,
  cache: ContextCache,
  http: HttpOptions = {},
): ChunkSituator {
  const name = `llm-context:${config.model}`;
  const ask = async (messages: ReturnType<typeof situateMessages>): Promise<string | undefined> =>
    parseSentence(await chatCompletion(name, config, messages, http));
  return {
    name,
    async situate(doc, chunks, limits) {
      const outcome: SituateOutcome = { situated: 0, cached: 0 };
      let next = 0;
      const worker = async (): Promise<void> => {
        while (next < chunks.length) {
          const chunk = chunks[next++] as Chunk;
          const messages = situateMessages(doc, chunk);
          const key = createHash("sha256")
            .update(JSON.stringify([CONTEXT_PROMPT_VERSION, config.model, messages]))
            .digest("hex");
          let sentence = cache.get(key);
          if (sentence !== undefined) outcome.cached++;
          else {
            try {
              sentence = await ask(messages);
            } catch (err) {
              outcome.failure ??= redactText((err as Error).message);
              continue;
            }
            if (sentence === undefined) continue;
            cache.set(key, sentence);
          }
          const body = doc.text.slice(chunk.start, chunk.end);
          const own = chunk.contextPrefix;
          const line = shorten(sentence, MAX_CONTEXT_CHARS + 100);
          const fitted = fitPrefix(limits, line, own ? `${own}\n\n${body}` : body);
          if (!fitted) continue;
          chunk.contextPrefix = own ? `${fitted}\n${own}` : fitted;
          chunk.text = withContext(chunk.contextPrefix, body);
          chunk.metadata.llmContext = true;
          outcome.situated++;
        }
      };
      await Promise.all(Array.from({ length: Math.min(CONCURRENCY, chunks.length) }, worker));
      return outcome;
    },
  };
}
