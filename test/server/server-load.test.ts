import { readdirSync, statSync } from "node:fs";
import { basename } from "node:path";
import { performance } from "node:perf_hooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { docsPath } from "../helpers/helpers.js";
import { client, startServer, type TestServer, waitForJob } from "../helpers/server-helpers.js";

const CLIENTS = 20;
const SEARCHES_PER_CLIENT = 50;

/** Small real chapters of the Rust book (sorted, 500 B – 4 KB: quick to embed). */
const CHAPTERS = readdirSync(docsPath("markdown", "rust_book_src"))
  .filter((f) => f.endsWith(".md"))
  .sort()
  .map((f) => docsPath("markdown", "rust_book_src", f))
  .filter((p) => {
    const size = statSync(p).size;
    return size >= 500 && size <= 4000;
  });
const CORPUS = CHAPTERS.slice(0, 6);
const INCOMING = CHAPTERS.slice(6, 18);
const LATER = CHAPTERS.slice(18, 21);

const QUERIES = [
  "how do packages and crates relate?",
  "release profiles and optimisation levels",
  "installing binaries with cargo install",
  "what is a smart pointer?",
  "fearless concurrency with threads",
  "reading a file in an I/O project",
  "how are errors grouped into categories?",
  "patterns and matching",
  "object oriented features of Rust",
  "extending cargo with custom commands",
  "writing automated tests",
  "closures and iterators performance",
  "structs to structure related data",
  "enums and pattern matching",
  "common collections vectors strings hash maps",
  "comments in Rust code",
  "editions of the Rust language",
  "translations of the book",
  "building a multithreaded web server",
  "advanced features unsafe traits types",
  "common programming concepts variables",
  "functional language features",
  "ownership and borrowing",
  "getting started installation",
  "foreword of the book",
];

/** The q-th quantile (0–1) of sorted numbers, nearest rank. */
function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] as number;
}

/**
 * Runs CLIENTS concurrent clients, each sending SEARCHES_PER_CLIENT searches one after
 * another (queries cycled, a third over each KB set, a quarter in keyword mode). With
 * `until`, each client goes on past SEARCHES_PER_CLIENT until `until()` is true, so the
 * load covers a window of unknown length (an ingest job) however fast or slow the machine.
 */
async function searchLoad(base: string, key: string, suffix: string, until: () => boolean = () => true) {
  const latencies: number[] = [];
  const failures: string[] = [];
  const answeredAt: number[] = [];
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CLIENTS }, async (_, c) => {
      const api = client(base, key);
      for (let i = 0; i < SEARCHES_PER_CLIENT || !until(); i++) {
        const n = c * SEARCHES_PER_CLIENT + i;
        const body: Record<string, unknown> = { query: `${QUERIES[n % QUERIES.length]}${suffix}`, topK: 5 };
        if (n % 3 === 1) body.kbs = ["incoming"];
        if (n % 3 === 2) body.kbs = ["corpus", "incoming"];
        if (n % 4 === 3) body.mode = "keyword";
        const t0 = performance.now();
        const r = await api.post("/search", body);
        latencies.push(performance.now() - t0);
        if (r.status !== 200 || !Array.isArray(r.body?.results))
          failures.push(`${r.status} ${r.text.slice(0, 200)}`);
        answeredAt.push(Date.now());
      }
    }),
  );
  return { latencies, failures, answeredAt, elapsed: performance.now() - started };
}

/** `N requests in T s (R req/s); latency p50 …, p95 …, p99 …, max …`. */
function describeLoad(latencies: number[], elapsed: number): string {
  const sorted = [...latencies].sort((a, b) => a - b);
  const ms = (q: number): string => quantile(sorted, q).toFixed(1);
  return (
    `${latencies.length} requests from ${CLIENTS} clients in ${(elapsed / 1000).toFixed(2)} s ` +
    `(${((latencies.length / elapsed) * 1000).toFixed(0)} req/s); latency p50 ${ms(0.5)} ms, p95 ${ms(0.95)} ms, ` +
    `p99 ${ms(0.99)} ms, max ${ms(1)} ms`
  );
}

describe("HTTP API under concurrent load while an ingest job runs", () => {
  let s: TestServer;
  let key: string;
  let api: ReturnType<typeof client>;

  beforeAll(async () => {
    expect(INCOMING.length).toBe(12);
    expect(LATER.length).toBe(3);
    s = await startServer();
    key = s.key("load");
    api = client(s.base, key);
    expect((await api.post("/kbs", { name: "corpus" })).status).toBe(201);
    expect((await api.post("/kbs", { name: "incoming" })).status).toBe(201);
    const seed = await api.upload("corpus", CORPUS);
    expect((await waitForJob(s.base, key, seed.body.id)).status).toBe("succeeded");
  });
  afterAll(async () => s.close());

  it(`answers ${CLIENTS} clients × ${SEARCHES_PER_CLIENT} searches while ingesting, losing no document`, async () => {
    const first = await api.upload("incoming", INCOMING);
    const second = await api.upload("incoming", LATER);
    expect(first.status).toBe(202);
    expect(second.status).toBe(202);
    // One job at a time per KB: the second waits for the first.
    expect((await api.get(`/jobs/${second.body.id}`)).body.status).toBe("queued");
    const busy = await api.delete("/kbs/incoming");
    expect(busy.status).toBe(409);
    expect(busy.body.error).toContain(first.body.id);

    // The clients search until both jobs have ended, so some searches fall inside the
    // jobs' window whether ingest is quick or slowed by a loaded machine.
    let ingesting = true;
    const jobsDone = (async () => {
      try {
        return [
          await waitForJob(s.base, key, first.body.id),
          await waitForJob(s.base, key, second.body.id),
        ] as const;
      } finally {
        ingesting = false;
      }
    })();
    const { latencies, failures, answeredAt, elapsed } = await searchLoad(s.base, key, "", () => !ingesting);
    const [done1, done2] = await jobsDone;

    expect(failures).toEqual([]);
    expect(latencies.length).toBeGreaterThanOrEqual(CLIENTS * SEARCHES_PER_CLIENT);
    for (const job of [done1, done2]) {
      expect(job.status).toBe("succeeded");
      expect(job.summary.errors).toEqual([]);
    }
    expect(done1.summary.documents).toBe(INCOMING.length);
    expect(done2.summary.documents).toBe(LATER.length);
    expect(done2.startedAt >= done1.finishedAt).toBe(true);
    // Searches answered while a job of the KB was ingesting.
    const ingestFrom = Date.parse(done1.startedAt);
    const ingestTo = Date.parse(done2.finishedAt);
    const duringIngest = answeredAt.filter((t) => t >= ingestFrom && t <= ingestTo).length;
    expect(duringIngest).toBeGreaterThan(0);

    const docs = await api.get("/kbs/incoming/documents?limit=1000");
    expect(docs.body.total).toBe(INCOMING.length + LATER.length);
    expect(docs.body.documents.map((d: { path: string }) => d.path).sort()).toEqual(
      [...INCOMING, ...LATER].map((p) => basename(p)).sort(),
    );
    expect(docs.body.documents.every((d: { embedded: boolean }) => d.embedded)).toBe(true);
    expect((await api.get("/kbs/corpus")).body.counts.documents).toBe(CORPUS.length);

    process.stderr.write(
      `[server-load] /search during ingest: ${describeLoad(latencies, elapsed)}; ${duringIngest} of them answered while ` +
        `${INCOMING.length + LATER.length} files were being ingested (${((ingestTo - ingestFrom) / 1000).toFixed(2)} s)\n`,
    );
    // The same load with nothing ingesting, for comparison (new query texts: no cached results).
    const idle = await searchLoad(s.base, key, " please");
    expect(idle.failures).toEqual([]);
    process.stderr.write(`[server-load] /search idle: ${describeLoad(idle.latencies, idle.elapsed)}\n`);
  });
});
