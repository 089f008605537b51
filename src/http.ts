/**
 * JSON-over-HTTP shared by the remote rerankers, query expansion and the
 * remote embedders: a per-attempt timeout, retries with exponential backoff on
 * 408/429/5xx and network errors (honouring `Retry-After`, and optionally a
 * wait hint found in the error body, such as Hugging Face's `estimated_time`),
 * and errors that name the caller, the HTTP status and the message of the
 * error body. API keys never appear in error messages: the values of the
 * secret headers sent (`authorization`, `x-api-key`, …) and of
 * {@link HttpOptions.secrets} are masked in every message, even when the
 * server echoes them (`Incorrect API key provided: …`), and so are URL
 * credentials ({@link redactText}).
 *
 * Callers choose the error type through an {@link HttpErrorFactory}
 * (src/rerank/http.ts builds `RerankError`s, src/embed/remote.ts
 * `EmbeddingError`s).
 */

import { ConfigError } from "./errors.js";
import { isSecretKey, maskKnownSecrets, maskUrl, redactText } from "./secrets.js";

/** Transport settings of a remote service. */
export interface HttpOptions {
  /** Timeout of one attempt (request and response body), in ms. Default 30 000. */
  timeoutMs?: number;
  /** Retries after the first attempt on 408, 429, 5xx, timeouts and network errors. Default 3. */
  maxRetries?: number;
  /** First backoff delay in ms; doubles per retry, with jitter. Default 500. */
  retryBaseDelayMs?: number;
  /**
   * Longest wait before a retry, in ms. A `Retry-After` longer than this fails
   * the call at once instead of waiting; a wait hint from the body is capped
   * to it. Default 30 000.
   */
  retryMaxDelayMs?: number;
  /** The `fetch` to use (tests, proxies). Default: the global `fetch`. */
  fetch?: typeof fetch;
  /**
   * Secret values of the caller's config (API keys, passwords) to mask in error
   * messages besides the secret headers' values (see {@link maskKnownSecrets}).
   */
  secrets?: readonly (string | undefined)[];
}

/**
 * The URL of endpoint `path` under a service root `base`: `path` is appended to
 * the root's path (trailing slashes dropped), and the root's query string (e.g.
 * `?api-version=2024-02-01`) and fragment are kept after it. With `skipPrefix`, a
 * root whose path already ends in that prefix does not get it twice
 * (`endpointUrl("http://h/v1", "/v1/chat/completions", "/v1")` → `http://h/v1/chat/completions`).
 * @throws ConfigError when `base` is not an http(s) URL (the message has its credentials masked).
 */
export function endpointUrl(base: string, path: string, skipPrefix?: string): string {
  let url: URL;
  try {
    url = new URL(base.trim());
  } catch {
    throw new ConfigError(
      `${JSON.stringify(maskUrl(base))} is not a URL (expected e.g. http://host:port/v1)`,
    );
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new ConfigError(`${JSON.stringify(maskUrl(base))} is not an http(s) URL`);
  }
  const root = url.pathname.replace(/\/+$/, "");
  const tail = skipPrefix !== undefined && root.endsWith(skipPrefix) ? path.slice(skipPrefix.length) : path;
  url.pathname = `${root}${tail.startsWith("/") ? "" : "/"}${tail}`;
  return url.href;
}

/**
 * Why `value` cannot be used as the URL of a service, or undefined when it can:
 * not a string, whitespace in it (a password with an unencoded space), more than
 * one `@` before the host (an unencoded `@` in a password: write it as `%40`),
 * unparseable, a scheme not in `schemes` (e.g. `["http:", "https:"]`), or
 * credentials (`user:password@`) when `credentials` is false (HTTP clients refuse
 * such URLs: the key belongs in `apiKey`). The problem quotes the URL with its
 * credentials masked, after the field name (`… must be …`).
 */
export function urlProblem(
  value: unknown,
  options: { schemes: readonly string[]; credentials: boolean },
): string | undefined {
  const http = options.schemes.length === 2 && options.schemes.every((s) => HTTP_SCHEMES.includes(s));
  const names = http ? "http(s)" : options.schemes.map((s) => s.replace(/:$/, "")).join(" or ");
  const expected = `must be ${/^[aeioh]/.test(names) ? "an" : "a"} ${names} URL`;
  if (typeof value !== "string" || value.trim() === "") return `${expected}, got ${JSON.stringify(value)}`;
  const shown = JSON.stringify(maskUrl(value));
  if (/\s/.test(value)) {
    return `${expected} without spaces, got ${shown}; percent-encode a space in a password as %20`;
  }
  const authority = /^[a-z][a-z0-9+.-]*:\/\/([^/?#]*)/i.exec(value)?.[1] ?? "";
  if ((authority.match(/@/g) ?? []).length > 1) {
    return `has an unencoded "@" in its user name or password, got ${shown}; write it as %40`;
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return `${expected}, got ${shown}`;
  }
  if (!options.schemes.includes(url.protocol)) return `${expected}, got ${shown}`;
  if (!options.credentials && (url.username !== "" || url.password !== "")) {
    return (
      `must not hold credentials (user:password@ or token@): HTTP clients refuse such URLs, got ${shown}; ` +
      "remove them and put the key in the apiKey setting (or the provider's API key environment variable)"
    );
  }
  return undefined;
}

/** `http:` and `https:`, the schemes of the HTTP services (embedders, rerankers, expansion). */
export const HTTP_SCHEMES: readonly string[] = ["http:", "https:"];

/** The values of the secret headers (`authorization` → the credential after `Bearer `, `x-api-key`, …). */
function headerSecrets(headers: Record<string, string>): string[] {
  const out: string[] = [];
  for (const [name, value] of Object.entries(headers)) {
    if (!isSecretKey(name) || typeof value !== "string") continue;
    out.push(value);
    const parts = value.trim().split(/\s+/);
    if (parts.length === 2 && parts[1] !== undefined) out.push(parts[1]);
  }
  return out;
}

/** The password (and a lone user name, often a token) of a URL, decoded. */
export function urlSecrets(url: string | undefined): string[] {
  if (url === undefined) return [];
  try {
    const u = new URL(url);
    const values = u.password !== "" ? [u.password] : [u.username];
    return values.filter((v) => v !== "").map((v) => safeDecode(v));
  } catch {
    return [];
  }
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/**
 * Builds the error a failed request rejects with, from a message (`HTTP 401
 * from <url>: <body message>`, `request to <url> timed out after 100 ms (after
 * 4 attempts)`, …) and the HTTP status when there was an answer.
 */
export type HttpErrorFactory = (message: string, options: { cause?: unknown; status?: number }) => Error;

/** Per-service tweaks of {@link postJsonWith}. */
export interface PostJsonHooks {
  /**
   * How long to wait (ms) before retrying a retryable answer (408/429/5xx)
   * that has no `Retry-After` header, read from its status and body text;
   * `undefined` → exponential backoff. The wait is capped to
   * `retryMaxDelayMs` (it is a hint, unlike `Retry-After`).
   */
  retryDelayFromBody?: (status: number, text: string) => number | undefined;
}

const DEFAULTS = { timeoutMs: 30_000, maxRetries: 3, retryBaseDelayMs: 500, retryMaxDelayMs: 30_000 };

/** A failure worth retrying, with the wait the server asked for (ms), if any. */
class Retryable extends Error {
  constructor(
    /** What went wrong, without the caller's name. */
    readonly detail: string,
    readonly status: number | undefined,
    readonly retryAfterMs: number | undefined,
    readonly origin?: unknown,
    /** A wait suggested by the body: capped to the maximum delay instead of failing the call. */
    readonly hintMs?: number,
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

/**
 * The human-readable message of an error body: JSON `message`, `error.message`
 * (OpenAI), `error` (Hugging Face TEI / Inference API), `detail`, else the
 * text (cut to 300 characters).
 */
export function errorBodyMessage(text: string): string {
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

/** Waits `ms` milliseconds; rejects with the abort reason as soon as `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
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
 * @param fail builds the error to reject with (see {@link HttpErrorFactory}).
 * @throws the error built by `fail` for a 4xx answer other than 408/429
 *   (status and body message), a non-JSON 2xx body, or when retries are
 *   exhausted (or a `Retry-After` exceeds `retryMaxDelayMs`); the caller's
 *   abort reason when `signal` aborts (also during a retry wait).
 */
export async function postJsonWith(
  fail: HttpErrorFactory,
  url: string,
  body: unknown,
  headers: Record<string, string>,
  options: HttpOptions = {},
  signal?: AbortSignal,
  hooks: PostJsonHooks = {},
): Promise<unknown> {
  const secrets = [...headerSecrets(headers), ...urlSecrets(url), ...(options.secrets ?? [])];
  const rawFail = fail;
  // Every message is masked here, where it is built: provider errors end up in
  // search warnings, job reasons and logs, some of which keep the raw text.
  fail = (message, opts) => rawFail(redactText(maskKnownSecrets(message, secrets)), opts);
  if (/^[a-z][a-z0-9+.-]*:\/\/[^/?#]*@/i.test(url)) {
    throw fail(
      `cannot send a request to ${maskUrl(url)}: the URL holds credentials (user:password@), which HTTP clients refuse; ` +
        "remove them from the URL and set the apiKey setting (or the provider's API key environment variable) instead",
      {},
    );
  }
  const timeoutMs = options.timeoutMs ?? DEFAULTS.timeoutMs;
  const maxRetries = options.maxRetries ?? DEFAULTS.maxRetries;
  const baseDelay = options.retryBaseDelayMs ?? DEFAULTS.retryBaseDelayMs;
  const maxDelay = options.retryMaxDelayMs ?? DEFAULTS.retryMaxDelayMs;
  const doFetch = options.fetch ?? fetch;
  const payload = JSON.stringify(body);
  for (let attempt = 0; ; attempt++) {
    signal?.throwIfAborted();
    try {
      return await attemptOnce(fail, url, payload, headers, timeoutMs, doFetch, signal, hooks);
    } catch (error) {
      if (!(error instanceof Retryable)) throw error;
      const give = (why: string): Error =>
        fail(`${error.detail} (${why})`, { cause: error.origin, status: error.status });
      if (attempt >= maxRetries) throw give(`after ${attempt + 1} attempts`);
      if (error.retryAfterMs !== undefined && error.retryAfterMs > maxDelay) {
        throw give(
          `the server asks to retry after ${Math.ceil(error.retryAfterMs / 1000)} s, longer than retryMaxDelayMs (${maxDelay} ms)`,
        );
      }
      const backoff = Math.min(maxDelay, baseDelay * 2 ** attempt) * (0.5 + Math.random() / 2);
      const hinted = error.hintMs === undefined ? undefined : Math.min(maxDelay, error.hintMs);
      await sleep(error.retryAfterMs ?? hinted ?? backoff, signal);
    }
  }
}

async function attemptOnce(
  fail: HttpErrorFactory,
  url: string,
  payload: string,
  headers: Record<string, string>,
  timeoutMs: number,
  doFetch: typeof fetch,
  signal: AbortSignal | undefined,
  hooks: PostJsonHooks,
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
    throw new Retryable(`request to ${url} failed: ${describe(causeOf(error))}`, undefined, undefined, error);
  }
  if (status >= 200 && status < 300) {
    try {
      return JSON.parse(text);
    } catch (error) {
      throw fail(`malformed response from ${url}: not JSON (${errorBodyMessage(text)})`, {
        cause: error,
        status,
      });
    }
  }
  const detail = `HTTP ${status} from ${url}: ${errorBodyMessage(text)}`;
  if (status === 408 || status === 429 || status >= 500) {
    const after = parseRetryAfter(retryAfter);
    const hint = after === undefined ? hooks.retryDelayFromBody?.(status, text) : undefined;
    throw new Retryable(detail, status, after, undefined, hint);
  }
  throw fail(detail, { status });
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** fetch wraps network failures in `TypeError: fetch failed` with the real error as `cause`. */
function causeOf(error: unknown): unknown {
  return error instanceof Error && error.cause !== undefined ? error.cause : error;
}
