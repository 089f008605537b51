/**
 * Cohere Rerank v2 against a local node:http server speaking its wire format:
 * request shape, bearer key, 429 → retry honouring Retry-After, 5xx retries,
 * 4xx error bodies, malformed responses, timeouts and abort.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { CohereReranker } from "../../src/rerank/cohere.js";
import { RerankError } from "../../src/rerank/contract.js";
import { parseRetryAfter } from "../../src/rerank/http.js";
import {
  cohereResponder,
  lexicalRelevance,
  MOCK_COHERE_KEY,
  type MockServer,
  startMockServer,
} from "../helpers/rerank-fixtures.js";

let server: MockServer;
beforeAll(async () => {
  server = await startMockServer(cohereResponder);
});
afterAll(() => server.close());
beforeEach(() => {
  server.requests.length = 0;
  server.script.length = 0;
});

const QUERY = "who wrote the novel";
const DOCS = [
  "A recipe for lentil soup.",
  "The novel was written by a retired sailor.",
  "Reviews of the novel were mixed.",
  "The novel was written by a retired sailor.",
];

function cohere(extra: Partial<ConstructorParameters<typeof CohereReranker>[0]> = {}): CohereReranker {
  return new CohereReranker({
    model: "rerank-v3.5",
    apiKey: MOCK_COHERE_KEY,
    baseUrl: server.url,
    retryBaseDelayMs: 1,
    ...extra,
  });
}

const ok = (results: unknown, extra: object = {}) => ({ body: { id: "x", results, meta: {}, ...extra } });

describe("CohereReranker", () => {
  it("posts the v2 request with the bearer key and maps relevance_score to results", async () => {
    const out = await cohere().rerank(QUERY, DOCS, { topN: 3 });
    expect(server.requests).toHaveLength(1);
    const req = server.requests[0];
    expect(req?.method).toBe("POST");
    expect(req?.path).toBe("/v2/rerank");
    expect(req?.headers.authorization).toBe(`Bearer ${MOCK_COHERE_KEY}`);
    expect(req?.headers["content-type"]).toBe("application/json");
    // Identical texts are sent once; every distinct text is scored and topN is applied locally.
    expect(req?.body).toEqual({ model: "rerank-v3.5", query: QUERY, documents: DOCS.slice(0, 3), top_n: 3 });
    expect(out).toEqual([
      { index: 1, score: lexicalRelevance(QUERY, DOCS[1] as string) },
      { index: 3, score: lexicalRelevance(QUERY, DOCS[1] as string) },
      { index: 2, score: lexicalRelevance(QUERY, DOCS[2] as string) },
    ]);
    expect(out[0]?.score).toBeCloseTo(1 - Math.exp(-2), 12);
  });

  it("accepts a trailing slash on baseUrl and sends max_tokens_per_doc when set", async () => {
    await cohere({ baseUrl: `${server.url}/`, maxTokensPerDoc: 512 }).rerank(QUERY, DOCS);
    expect(server.requests[0]?.path).toBe("/v2/rerank");
    expect(server.requests[0]?.body).toMatchObject({ max_tokens_per_doc: 512 });
  });

  it("retries a 429 after the Retry-After delay, then succeeds", async () => {
    server.script.push({
      status: 429,
      headers: { "retry-after": "0.2" },
      body: { message: "too many requests" },
    });
    const t0 = performance.now();
    const out = await cohere({ retryBaseDelayMs: 5000 }).rerank(QUERY, DOCS);
    const waited = performance.now() - t0;
    expect(server.requests).toHaveLength(2);
    expect(waited).toBeGreaterThanOrEqual(190); // Retry-After, not the (5 s) backoff
    expect(waited).toBeLessThan(2000);
    expect(out.map((r) => r.index)).toEqual([1, 3, 2, 0]);
  });

  it("retries 5xx with backoff and gives up after maxRetries with the last error", async () => {
    for (let i = 0; i < 3; i++) server.script.push({ status: 503, body: { message: "overloaded" } });
    const err = await cohere({ maxRetries: 2 })
      .rerank(QUERY, DOCS)
      .catch((e: unknown) => e);
    expect(server.requests).toHaveLength(3);
    expect(err).toBeInstanceOf(RerankError);
    expect((err as RerankError).status).toBe(503);
    expect((err as Error).message).toBe(
      `cohere:rerank-v3.5: HTTP 503 from ${server.url}/v2/rerank: overloaded (after 3 attempts)`,
    );
  });

  it("fails at once when Retry-After asks for longer than retryMaxDelayMs", async () => {
    server.script.push({ status: 429, headers: { "retry-after": "120" }, body: { message: "slow down" } });
    await expect(cohere({ retryMaxDelayMs: 1000 }).rerank(QUERY, DOCS)).rejects.toThrow(
      /HTTP 429 .*slow down \(the server asks to retry after 120 s, longer than retryMaxDelayMs \(1000 ms\)\)/,
    );
    expect(server.requests).toHaveLength(1);
  });

  it("reports a 400 error body without retrying", async () => {
    server.script.push({ status: 400, body: { message: "invalid request: too many documents" } });
    const err = await cohere()
      .rerank(QUERY, DOCS)
      .catch((e: unknown) => e);
    expect(server.requests).toHaveLength(1);
    expect(err).toBeInstanceOf(RerankError);
    expect((err as RerankError).status).toBe(400);
    expect((err as Error).message).toBe(
      `cohere:rerank-v3.5: HTTP 400 from ${server.url}/v2/rerank: invalid request: too many documents`,
    );
  });

  it("reports a wrong key (401) and never leaks the key", async () => {
    const err = await cohere({ apiKey: "wrong-secret" })
      .rerank(QUERY, DOCS)
      .catch((e: unknown) => e);
    expect((err as Error).message).toMatch(/HTTP 401 .*invalid api token/);
    expect((err as Error).message).not.toContain("wrong-secret");
  });

  it("reports a non-JSON error body in a line", async () => {
    server.script.push({ status: 404, body: "<html>\n  <body>Not Found</body>\n</html>" });
    await expect(cohere().rerank(QUERY, DOCS)).rejects.toThrow(
      /HTTP 404 .*: <html> <body>Not Found<\/body> <\/html>$/,
    );
  });

  it.each([
    ["not JSON", { body: "{results: oops" }, /not JSON/],
    ["no results array", ok(undefined), /no results array/],
    [
      "an index out of range",
      ok([{ index: 7, relevance_score: 0.5 }]),
      /result index 7 is not a document position \(0\.\.2\)/,
    ],
    [
      "a repeated index",
      ok([
        { index: 0, relevance_score: 0.5 },
        { index: 0, relevance_score: 0.4 },
      ]),
      /result index 0 appears twice/,
    ],
    [
      "a missing relevance_score",
      ok([{ index: 0 }]),
      /relevance_score undefined of result 0 is not a number/,
    ],
    ["a string score", ok([{ index: 0, relevance_score: "high" }]), /relevance_score "high"/],
    ["too few results", ok([{ index: 0, relevance_score: 0.5 }]), /1 results for 3 documents/],
  ])("rejects a malformed response: %s", async (_label, reply, message) => {
    server.script.push(reply);
    const err = await cohere()
      .rerank(QUERY, DOCS)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RerankError);
    expect((err as Error).message).toMatch(
      /^cohere:rerank-v3\.5: malformed response from http:\/\/127\.0\.0\.1:\d+\/v2\/rerank/,
    );
    expect((err as Error).message).toMatch(message);
    expect(server.requests).toHaveLength(1);
  });

  it("clamps scores outside [0, 1]", async () => {
    server.script.push(
      ok([
        { index: 0, relevance_score: 1.2 },
        { index: 1, relevance_score: -0.1 },
        { index: 2, relevance_score: 0.5 },
      ]),
    );
    expect(await cohere().rerank(QUERY, DOCS)).toEqual([
      { index: 0, score: 1 },
      { index: 2, score: 0.5 },
      { index: 1, score: 0 },
      { index: 3, score: 0 },
    ]);
  });

  it("times out a slow answer, retries, and names the timeout", async () => {
    server.script.push({ delayMs: 500, ...ok([]) }, { delayMs: 500, ...ok([]) });
    const err = await cohere({ timeoutMs: 50, maxRetries: 1 })
      .rerank(QUERY, DOCS)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RerankError);
    expect((err as Error).message).toMatch(/timed out after 50 ms \(after 2 attempts\)$/);
    expect(server.requests).toHaveLength(2);
  });

  it("reports an unreachable server after the retries", async () => {
    const gone = await startMockServer(cohereResponder);
    await gone.close();
    const r = new CohereReranker({
      model: "rerank-v3.5",
      apiKey: "k",
      baseUrl: gone.url,
      maxRetries: 1,
      retryBaseDelayMs: 1,
    });
    await expect(r.rerank(QUERY, DOCS)).rejects.toThrow(
      new RegExp(
        `^cohere:rerank-v3\\.5: request to ${gone.url}/v2/rerank failed: .*ECONNREFUSED.* \\(after 2 attempts\\)$`,
      ),
    );
  });

  it("aborts during a request and during a retry wait", async () => {
    server.script.push({ delayMs: 2000, ...ok([]) });
    const c1 = new AbortController();
    const p1 = cohere().rerank(QUERY, DOCS, { signal: c1.signal });
    setTimeout(() => c1.abort(), 30);
    await expect(p1).rejects.toMatchObject({ name: "AbortError" });

    server.script.push({ status: 429, headers: { "retry-after": "10" }, body: {} });
    const c2 = new AbortController();
    const t0 = performance.now();
    const p2 = cohere({ retryMaxDelayMs: 60_000 }).rerank(QUERY, DOCS, { signal: c2.signal });
    setTimeout(() => c2.abort(new Error("stop")), 100);
    await expect(p2).rejects.toThrow("stop");
    expect(performance.now() - t0).toBeLessThan(2000);
  });
});

describe("parseRetryAfter", () => {
  it("reads seconds and HTTP dates", () => {
    expect(parseRetryAfter("3")).toBe(3000);
    expect(parseRetryAfter("0.5")).toBe(500);
    expect(parseRetryAfter(null)).toBeUndefined();
    expect(parseRetryAfter("soon")).toBeUndefined();
    const now = Date.parse("2025-01-01T00:00:00Z");
    expect(parseRetryAfter("Wed, 01 Jan 2025 00:00:10 GMT", now)).toBe(10_000);
    expect(parseRetryAfter("Tue, 31 Dec 2024 00:00:00 GMT", now)).toBe(0);
  });
});
