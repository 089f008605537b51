/**
 * JSON-over-HTTP for the remote rerankers (Cohere, OpenAI-compatible chat):
 * src/http.ts's {@link postJsonWith} with failures reported as
 * {@link RerankError}s naming the reranker. See src/http.ts for the timeout,
 * retry and `Retry-After` policy.
 */
import { endpointUrl, type HttpOptions, postJsonWith } from "../http.js";
import { redactText } from "../secrets.js";
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

/** An OpenAI-compatible chat endpoint: server root, model and optional bearer key. */
export interface ChatEndpoint {
  baseUrl: string;
  model: string;
  apiKey?: string;
}

/**
 * Asks an OpenAI-compatible chat endpoint (`POST <baseUrl>/v1/chat/completions`,
 * `{model, messages, temperature: 0}`) and returns `choices[0].message.content`.
 * @throws RerankError-style errors named `name` (see {@link postJson}), and an Error
 *   (credentials masked) when the answer has no string content.
 */
export async function chatCompletion(
  name: string,
  endpoint: ChatEndpoint,
  messages: readonly { role: string; content: string }[],
  http: HttpOptions = {},
): Promise<string> {
  const url = endpointUrl(endpoint.baseUrl, "/v1/chat/completions", "/v1");
  const headers: Record<string, string> = endpoint.apiKey
    ? { authorization: `Bearer ${endpoint.apiKey}` }
    : {};
  const response = (await postJson(
    name,
    url,
    { model: endpoint.model, messages, temperature: 0 },
    headers,
    http,
  )) as { choices?: { message?: { content?: unknown } }[] };
  const content = response?.choices?.[0]?.message?.content;
  if (typeof content !== "string")
    throw new Error(redactText(`${name}: malformed response from ${url}: no choices[0].message.content`));
  return content;
}
