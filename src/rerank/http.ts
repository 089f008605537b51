/**
 * JSON-over-HTTP for the remote rerankers (Cohere, OpenAI-compatible chat):
 * a per-attempt timeout, retries with exponential backoff on 408/429/5xx and
 * network errors (honouring `Retry-After`), and errors that name the reranker,
 * the HTTP status and the message of the error body. API keys never appear in
 * error messages.
 */
import { RerankError } from "./contract.js";
import { describeError, sleep } from "./shared.js";

/** Transport settings of a remote reranker. */
export interface HttpOptions {
  /** Timeout of one attempt (request and response body), in ms. Default 30 000. */
  timeoutMs?: number;
  /** Retries after the first attempt on 408, 429, 5xx, timeouts and network errors. Default 3. */
  maxRetries?: number;
  /** First backoff delay in ms; doubles per retry, with jitter. Default 500. */
  retryBaseDelayMs?: number;
  /**
   * Longest wait before a retry, in ms. A `Retry-After` longer than this fails
   * the call at once instead of waiting. Default 30 000.
   */
  retryMaxDelayMs?: number;
  /** The `fetch` to use (tests, proxies). Default: the global `fetch`. */
  fetch?: typeof fetch;
}

const DEFAULTS = { timeoutMs: 30_000, maxRetries: 3, retryBaseDelayMs: 500, retryMaxDelayMs: 30_000 };

/** A failure worth retrying, with the wait the server asked for (ms), if any. */
class Retryable extends Error {
  constructor(
    /** What went wrong, without the reranker name. */
    readonly detail: string,
    readonly status: number | undefined,
    readonly retryAfterMs: number | undefined,
    readonly origin?: unknown,
  ) {
    super(detail);
  }
}

/**
 * Parses a `Retry-After` header (delta-seconds or an HTTP date) into ms from now.
 * Returns undefined when absent or unparseable.
 */
export function parseRetryAfter(value: string | null, now: number = Date.now()): number | undefined {
  if (value === null || value.trim() === "") return undefined;
  const v = value.trim();
  if (/^\d+(\.\d+)?$/.test(v)) return Math.round(Number(v) * 1000);
  const date = Date.parse(v);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** The human-readable message of an error body: JSON `message`, `error.message`, `error`, `detail`, else the text. */
function bodyMessage(text: string): string {
  try {
    const body = JSON.parse(text) as Record<string, unknown>;
    const err = body.error;
    const candidates = [
      body.message,
      typeof err === "object" && err !== null ? (err as Record<string, unknown>).message : err,
      body.detail,
    ];
    for (const c of candidates) if (typeof c === "string" && c.trim() !== "") return c.trim();
  } catch {
    // not JSON: fall through to the raw text
  }
  const t = text.trim().replace(/\s+/g, " ");
  if (t === "") return "(empty body)";
  return t.length > 300 ? `${t.slice(0, 300)}…` : t;
}

/** A signal that aborts when any of `signals` aborts, with that signal's reason. */
function anySignal(signals: AbortSignal[]): AbortSignal {
  if (typeof AbortSignal.any === "function") return AbortSignal.any(signals);
  const controller = new AbortController();
  for (const s of signals) {
    if (s.aborted) {
      controller.abort(s.reason);
      break;
    }
    s.addEventListener("abort", () => controller.abort(s.reason), { once: true });
  }
  return controller.signal;
}

/**
 * POSTs `body` as JSON to `url` and returns the parsed JSON response.
 * @throws RerankError for a 4xx answer (status and body message), a non-JSON
 *   2xx body, or when retries are exhausted; the caller's abort reason when
 *   `signal` aborts (also during a retry wait).
 */
export async function postJson(
  reranker: string,
  url: string,
  body: unknown,
  headers: Record<string, string>,
  options: HttpOptions = {},
  signal?: AbortSignal,
): Promise<unknown> {
  const timeoutMs = options.timeoutMs ?? DEFAULTS.timeoutMs;
  const maxRetries = options.maxRetries ?? DEFAULTS.maxRetries;
  const baseDelay = options.retryBaseDelayMs ?? DEFAULTS.retryBaseDelayMs;
  const maxDelay = options.retryMaxDelayMs ?? DEFAULTS.retryMaxDelayMs;
  const doFetch = options.fetch ?? fetch;
  const payload = JSON.stringify(body);
  for (let attempt = 0; ; attempt++) {
    signal?.throwIfAborted();
    try {
      return await attemptOnce(reranker, url, payload, headers, timeoutMs, doFetch, signal);
    } catch (error) {
      if (!(error instanceof Retryable)) throw error;
      const fail = (why: string): RerankError =>
        new RerankError(reranker, `${error.detail} (${why})`, { cause: error.origin, status: error.status });
      if (attempt >= maxRetries) throw fail(`after ${attempt + 1} attempts`);
      if (error.retryAfterMs !== undefined && error.retryAfterMs > maxDelay) {
        throw fail(
          `the server asks to retry after ${Math.ceil(error.retryAfterMs / 1000)} s, longer than retryMaxDelayMs (${maxDelay} ms)`,
        );
      }
      const backoff = Math.min(maxDelay, baseDelay * 2 ** attempt) * (0.5 + Math.random() / 2);
      await sleep(error.retryAfterMs ?? backoff, signal);
    }
  }
}

async function attemptOnce(
  reranker: string,
  url: string,
  payload: string,
  headers: Record<string, string>,
  timeoutMs: number,
  doFetch: typeof fetch,
  signal: AbortSignal | undefined,
): Promise<unknown> {
  const timeout = AbortSignal.timeout(timeoutMs);
  const combined = signal ? anySignal([signal, timeout]) : timeout;
  let status: number;
  let text: string;
  let retryAfter: string | null;
  try {
    const res = await doFetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json", ...headers },
      body: payload,
      signal: combined,
    });
    status = res.status;
    retryAfter = res.headers.get("retry-after");
    text = await res.text();
  } catch (error) {
    if (signal?.aborted) throw signal.reason;
    if (timeout.aborted) {
      throw new Retryable(`request to ${url} timed out after ${timeoutMs} ms`, undefined, undefined, error);
    }
    throw new Retryable(
      `request to ${url} failed: ${describeError(causeOf(error))}`,
      undefined,
      undefined,
      error,
    );
  }
  if (status >= 200 && status < 300) {
    try {
      return JSON.parse(text);
    } catch (error) {
      throw new RerankError(reranker, `malformed response from ${url}: not JSON (${bodyMessage(text)})`, {
        cause: error,
        status,
      });
    }
  }
  const detail = `HTTP ${status} from ${url}: ${bodyMessage(text)}`;
  if (status === 408 || status === 429 || status >= 500) {
    throw new Retryable(detail, status, parseRetryAfter(retryAfter));
  }
  throw new RerankError(reranker, detail, { status });
}

/** fetch wraps network failures in `TypeError: fetch failed` with the real error as `cause`. */
function causeOf(error: unknown): unknown {
  return error instanceof Error && error.cause !== undefined ? error.cause : error;
}
