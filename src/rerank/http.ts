/**
 * JSON-over-HTTP for the remote rerankers (Cohere, OpenAI-compatible chat):
 * src/http.ts's {@link postJsonWith} with failures reported as
 * {@link RerankError}s naming the reranker. See src/http.ts for the timeout,
 * retry and `Retry-After` policy.
 */
import { type HttpOptions, postJsonWith } from "../http.js";
import { RerankError } from "./contract.js";

export { type HttpOptions, parseRetryAfter } from "../http.js";

/**
 * POSTs `body` as JSON to `url` and returns the parsed JSON response.
 * @throws RerankError for a 4xx answer (status and body message), a non-JSON
 *   2xx body, or when retries are exhausted; the caller's abort reason when
 *   `signal` aborts (also during a retry wait).
 */
export function postJson(
  reranker: string,
  url: string,
  body: unknown,
  headers: Record<string, string>,
  options: HttpOptions = {},
  signal?: AbortSignal,
): Promise<unknown> {
  return postJsonWith(
    (message, opts) => new RerankError(reranker, message, opts),
    url,
    body,
    headers,
    options,
    signal,
  );
}
