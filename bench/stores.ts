/**
 * Vector-store benchmark: every {@link VectorStore} backend on the same synthetic
 * corpus, measured through the store contract (what knowledge-layer itself calls).
 *
 * - Corpus: N chunks of 512-d L2-normalised vectors from a seeded PRNG, clustered
 *   (200 random unit centroids + gaussian noise of σ = 0.04 per dimension, then
 *   normalised), so approximate (HNSW) search has neighbours to miss. Payloads look
 *   like real chunks: `{ documentId, chunkIndex, type, text }` with ~200 characters
 *   of text. Smaller sizes use a prefix of the largest corpus.
 * - Insert: `addBatch` in calls of 1,000 records (the adapters split them into
 *   server requests of ≤ 100 themselves); records/s over the time spent in `addBatch`.
 * - Search: `--queries` queries (corpus vectors + gaussian noise σ = 0.01 per
 *   dimension, renormalised), topK 10, one at a time after 5 unmeasured warm-up
 *   queries; p50/p95 latency of `search`, and recall@10 against the exact top 10
 *   computed by brute force in JS (cosine = dot product of unit vectors).
 *
 * Stores: `sqlite` (embedded default, temp data dir), `pgvector` (a throwaway real
 * PostgreSQL server, see test/helpers/postgres-server.ts), `chroma` (a throwaway real Chroma
 * server, test/helpers/chroma-server.ts), `qdrant` and `pinecone` (the local fakes of
 * test/helpers/fakes, in this process: they measure the adapter and the fake's brute-force
 * scan, not the real services). A store whose server cannot start is reported as
 * skipped. If inserting one size takes longer than `--budget` seconds the insert
 * stops there and that row reports the N actually reached.
 *
 * Usage: npm run bench:stores [-- --sizes 10000,100000] [--stores sqlite,pgvector,chroma,qdrant,pinecone]
 *        [--queries 200] [--budget 900]
 *
 * Progress goes to stderr, one Markdown table to stdout.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import pg from "pg";
import type { VectorStoreConfig } from "../src/config.js";
import type { VectorRecord, VectorStore } from "../src/store/contract.js";
import { type Db, openDatabase } from "../src/store/database.js";
import { createVectorStore } from "../src/store/index.js";
import { startChromaServer } from "../test/helpers/chroma-server.js";
import { startFakePinecone } from "../test/helpers/fakes/pinecone-server.js";
import { FAKE_QDRANT_VERSION, startFakeQdrant } from "../test/helpers/fakes/qdrant-server.js";
import { startPostgresServer } from "../test/helpers/postgres-server.js";

const DIM = 512;
const CENTROIDS = 200;
/** Per-dimension σ of a corpus vector around its centroid (before normalising). */
const NOISE = 0.04;
/** Per-dimension σ added to a corpus vector to make a query. */
const QUERY_NOISE = 0.01;
const TOP_K = 10;
/** Records per `addBatch` call. */
const CALL = 1000;
const WARMUP = 5;
const SEED = 0x5eed;
const ALL_STORES = ["sqlite", "pgvector", "chroma", "qdrant", "pinecone"] as const;
type StoreName = (typeof ALL_STORES)[number];

const { values } = parseArgs({
  options: {
    sizes: { type: "string", default: "10000,100000" },
    stores: { type: "string", default: ALL_STORES.join(",") },
    queries: { type: "string", default: "200" },
    budget: { type: "string", default: "900" },
  },
});
const SIZES = String(values.sizes)
  .split(",")
  .map((s) => Number(s.trim()))
  .sort((a, b) => a - b);
if (SIZES.some((n) => !Number.isInteger(n) || n < TOP_K)) throw new Error(`bad --sizes "${values.sizes}"`);
const STORES = String(values.stores)
  .split(",")
  .map((s) => s.trim()) as StoreName[];
for (const s of STORES) if (!ALL_STORES.includes(s)) throw new Error(`unknown store "${s}"`);
const QUERIES = Number(values.queries);
if (!Number.isInteger(QUERIES) || QUERIES < 1) throw new Error(`bad --queries "${values.queries}"`);
const BUDGET_MS = Number(values.budget) * 1000;

const T0 = performance.now();
const log = (message: string): void => {
  process.stderr.write(`[${((performance.now() - T0) / 1000).toFixed(0).padStart(5)} s] ${message}\n`);
};

// ---- cleanup (normal end, errors, Ctrl-C) ----

const cleanups = new Set<() => Promise<void> | void>();
async function runCleanups(): Promise<void> {
  for (const fn of [...cleanups].reverse()) {
    cleanups.delete(fn);
    try {
      await fn();
    } catch (error) {
      process.stderr.write(`cleanup failed: ${(error as Error).message}\n`);
    }
  }
}
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    process.stderr.write(`\n${signal}: stopping servers and removing temp dirs…\n`);
    void runCleanups().finally(() => process.exit(130));
  });
}

// ---- deterministic data ----

/** mulberry32: a small seeded PRNG, uniform in [0, 1). */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Standard normal samples (Box–Muller) from a uniform PRNG. */
function gaussian(uniform: () => number): () => number {
  let spare: number | undefined;
  return () => {
    if (spare !== undefined) {
      const s = spare;
      spare = undefined;
      return s;
    }
    const u = uniform() || Number.MIN_VALUE;
    const r = Math.sqrt(-2 * Math.log(u));
    const theta = 2 * Math.PI * uniform();
    spare = r * Math.sin(theta);
    return r * Math.cos(theta);
  };
}

function normalise(v: Float32Array): void {
  let s = 0;
  for (let i = 0; i < v.length; i++) s += (v[i] as number) ** 2;
  const inv = 1 / Math.sqrt(s);
  for (let i = 0; i < v.length; i++) v[i] = (v[i] as number) * inv;
}

/** `n` clustered unit vectors in one Float32Array (row-major), generated in chunks. */
function generateCorpus(n: number): Float32Array {
  const rand = prng(SEED);
  const gauss = gaussian(rand);
  const centroids = new Float32Array(CENTROIDS * DIM);
  for (let c = 0; c < CENTROIDS; c++) {
    const row = centroids.subarray(c * DIM, (c + 1) * DIM);
    for (let d = 0; d < DIM; d++) row[d] = gauss();
    normalise(row);
  }
  const corpus = new Float32Array(n * DIM);
  const CHUNK = 10_000;
  for (let start = 0; start < n; start += CHUNK) {
    for (let i = start; i < Math.min(n, start + CHUNK); i++) {
      const c = Math.floor(rand() * CENTROIDS);
      const row = corpus.subarray(i * DIM, (i + 1) * DIM);
      for (let d = 0; d < DIM; d++) row[d] = (centroids[c * DIM + d] as number) + NOISE * gauss();
      normalise(row);
    }
  }
  return corpus;
}

const WORDS = (
  "the of and to in is that for it as with was on be by this are from or at an which have not " +
  "vector store index search query chunk document embedding retrieval latency recall cluster " +
  "server adapter batch insert payload metric cosine knowledge layer agent context answer source"
).split(" ");

/** ~200 characters of deterministic filler text for chunk `i`. */
function textOf(i: number): string {
  const rand = prng(i * 2654435761 + 1);
  let text = "";
  while (text.length < 190) text += `${WORDS[Math.floor(rand() * WORDS.length)]} `;
  return text.trimEnd();
}

const idOf = (i: number): string => `chunk-${i}`;

/** Records `start … end-1`: views into the corpus (no copies) plus chunk-like payloads. */
function recordsOf(corpus: Float32Array, start: number, end: number): VectorRecord[] {
  const out: VectorRecord[] = [];
  for (let i = start; i < end; i++) {
    out.push({
      id: idOf(i),
      vector: corpus.subarray(i * DIM, (i + 1) * DIM),
      payload: { documentId: Math.floor(i / 20), chunkIndex: i % 20, type: "text", text: textOf(i) },
    });
  }
  return out;
}

/** `count` queries: random corpus vectors among the first `n`, perturbed and renormalised. */
function makeQueries(corpus: Float32Array, n: number, count: number): Float32Array {
  const rand = prng(SEED ^ n);
  const gauss = gaussian(rand);
  const out = new Float32Array(count * DIM);
  for (let q = 0; q < count; q++) {
    const src = Math.floor(rand() * n);
    const row = out.subarray(q * DIM, (q + 1) * DIM);
    for (let d = 0; d < DIM; d++) row[d] = (corpus[src * DIM + d] as number) + QUERY_NOISE * gauss();
    normalise(row);
  }
  return out;
}

/** Exact top-10 ids (by dot product of unit vectors = cosine) of every query among the first `n` vectors. */
function exactTopK(corpus: Float32Array, n: number, queries: Float32Array, count: number): Set<string>[] {
  const best = new Float64Array(count * TOP_K).fill(Number.NEGATIVE_INFINITY);
  const bestId = new Int32Array(count * TOP_K).fill(-1);
  for (let j = 0; j < n; j++) {
    const base = j * DIM;
    for (let q = 0; q < count; q++) {
      const qb = q * DIM;
      let s = 0;
      for (let d = 0; d < DIM; d++) s += (corpus[base + d] as number) * (queries[qb + d] as number);
      const o = q * TOP_K;
      if (s <= (best[o + TOP_K - 1] as number)) continue;
      let k = TOP_K - 1;
      while (k > 0 && s > (best[o + k - 1] as number)) {
        best[o + k] = best[o + k - 1] as number;
        bestId[o + k] = bestId[o + k - 1] as number;
        k--;
      }
      best[o + k] = s;
      bestId[o + k] = j;
    }
  }
  const out: Set<string>[] = [];
  for (let q = 0; q < count; q++) {
    out.push(new Set(Array.from(bestId.subarray(q * TOP_K, (q + 1) * TOP_K), idOf)));
  }
  return out;
}

// ---- stores ----

interface Harness {
  store: VectorStore;
  /** "how it ran" column. */
  how: string;
  /** Called after every call into the store (the fakes' request logs are emptied). */
  afterCall?: () => void;
}

/** Starts a store, registering its cleanup; throws when its server cannot start. */
async function startStore(name: StoreName): Promise<Harness> {
  switch (name) {
    case "sqlite": {
      const dir = mkdtempSync(join(tmpdir(), "kl-bench-stores-"));
      let db: Db | undefined;
      cleanups.add(() => {
        db?.close();
        rmSync(dir, { recursive: true, force: true });
      });
      db = openDatabase(dir);
      const store = await createVectorStore({ type: "sqlite" }, db);
      const v = db.prepare("SELECT sqlite_version() AS s, vec_version() AS v").get() as {
        s: string;
        v: string;
      };
      return { store, how: `embedded SQLite ${v.s} + sqlite-vec ${v.v} (exact scan)` };
    }
    case "pgvector": {
      const server = await startPostgresServer();
      cleanups.add(() => server.stop());
      const store = await createVectorStore({ type: "pgvector", url: server.url }, await dummyDb());
      await store.connect();
      cleanups.add(() => store.close());
      const client = new pg.Client({ connectionString: server.url });
      await client.connect();
      try {
        const pgv = (await client.query("SHOW server_version")).rows[0]?.server_version as string;
        const ext = (await client.query("SELECT extversion FROM pg_extension WHERE extname = 'vector'"))
          .rows[0]?.extversion as string;
        return {
          store,
          how: `real PostgreSQL ${pgv.split(" ")[0]} + pgvector ${ext} (HNSW m=16, ef_construction=64, ef_search=100)`,
        };
      } finally {
        await client.end();
      }
    }
    case "chroma": {
      const server = await startChromaServer();
      cleanups.add(() => server.stop());
      const response = await fetch(`${server.url}/api/v2/version`);
      const version = String(await response.json());
      const store = await createVectorStore({ type: "chroma", url: server.url }, await dummyDb());
      await store.connect();
      return { store, how: `real Chroma ${version} server (HNSW, defaults)` };
    }
    case "qdrant": {
      const fake = await startFakeQdrant();
      cleanups.add(() => fake.close());
      const store = await createVectorStore({ type: "qdrant", url: fake.url }, await dummyDb());
      await store.connect();
      return {
        store,
        how: `local fake (measures adapter + fake, not Qdrant; in-process brute force, reports ${FAKE_QDRANT_VERSION})`,
        afterCall: () => {
          fake.server.requests.length = 0;
        },
      };
    }
    case "pinecone": {
      const apiKey = "bench-key";
      const fake = await startFakePinecone({
        apiKey,
        indexes: [{ name: "kl-bench-512", dimension: DIM, metric: "cosine" }],
      });
      cleanups.add(() => fake.close());
      const config: VectorStoreConfig = {
        type: "pinecone",
        apiKey,
        index: "kl-bench-512",
        url: fake.controllerUrl,
      };
      const store = await createVectorStore(config, await dummyDb());
      await store.connect();
      return {
        store,
        how: "local fake (measures adapter + fake, not Pinecone; in-process brute force)",
        afterCall: () => {
          fake.control.requests.length = 0;
          for (const index of fake.indexes.values()) index.server.requests.length = 0;
        },
      };
    }
  }
}

/** Server stores ignore the project database; an in-memory-dir one satisfies the signature. */
let sharedDb: Db | undefined;
async function dummyDb(): Promise<Db> {
  if (!sharedDb) {
    const dir = mkdtempSync(join(tmpdir(), "kl-bench-stores-db-"));
    const db = openDatabase(dir);
    sharedDb = db;
    cleanups.add(() => {
      db.close();
      sharedDb = undefined;
      rmSync(dir, { recursive: true, force: true });
    });
  }
  return sharedDb;
}

// ---- measurement ----

interface Result {
  n: number;
  insertRate: number;
  p50: number;
  p95: number;
  recall: number;
  note?: string;
}

const percentile = (sorted: number[], p: number): number =>
  sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))] ?? Number.NaN;

const truth = new Map<number, { queries: Float32Array; exact: Set<string>[] }>();
function groundTruth(corpus: Float32Array, n: number) {
  let t = truth.get(n);
  if (!t) {
    const started = performance.now();
    const queries = makeQueries(corpus, n, QUERIES);
    t = { queries, exact: exactTopK(corpus, n, queries, QUERIES) };
    truth.set(n, t);
    log(
      `exact top-${TOP_K} of ${QUERIES} queries over ${n} vectors: ${((performance.now() - started) / 1000).toFixed(1)} s`,
    );
  }
  return t;
}

async function measure(name: StoreName, h: Harness, corpus: Float32Array, n: number): Promise<Result> {
  const { store } = h;
  const collection = `bench_${n}`;
  await store.dropCollection(collection);
  await store.createCollection(collection, DIM, "cosine");
  h.afterCall?.();
  let inserted = 0;
  let insertMs = 0;
  let lastLog = performance.now();
  let note: string | undefined;
  for (let start = 0; start < n; start += CALL) {
    const records = recordsOf(corpus, start, Math.min(n, start + CALL));
    const t = performance.now();
    await store.addBatch(collection, records);
    insertMs += performance.now() - t;
    h.afterCall?.();
    inserted += records.length;
    if (performance.now() - lastLog > 10_000 || inserted === n) {
      lastLog = performance.now();
      log(`${name} N=${n}: inserted ${inserted} (${Math.round(inserted / (insertMs / 1000))} rec/s)`);
    }
    if (insertMs > BUDGET_MS && inserted < n) {
      note = `insert stopped at the ${BUDGET_MS / 1000} s budget after ${inserted} of ${n}`;
      log(`${name} N=${n}: ${note}`);
      break;
    }
  }
  const info = await store.info(collection);
  h.afterCall?.();
  if (info?.count !== inserted)
    log(`${name} N=${n}: WARNING info().count = ${info?.count}, expected ${inserted}`);

  const { queries, exact } = groundTruth(corpus, inserted);
  const query = (q: number) => queries.subarray(q * DIM, (q + 1) * DIM);
  for (let q = 0; q < WARMUP; q++) await store.search(collection, query(q % QUERIES), { topK: TOP_K });
  h.afterCall?.();
  const latencies: number[] = [];
  let found = 0;
  for (let q = 0; q < QUERIES; q++) {
    const t = performance.now();
    const hits = await store.search(collection, query(q), { topK: TOP_K });
    latencies.push(performance.now() - t);
    h.afterCall?.();
    const want = exact[q] as Set<string>;
    for (const hit of hits) if (want.has(hit.id)) found++;
  }
  latencies.sort((a, b) => a - b);
  const result: Result = {
    n: inserted,
    insertRate: inserted / (insertMs / 1000),
    p50: percentile(latencies, 0.5),
    p95: percentile(latencies, 0.95),
    recall: found / (QUERIES * TOP_K),
    note,
  };
  log(
    `${name} N=${inserted}: ${Math.round(result.insertRate)} rec/s, p50 ${result.p50.toFixed(2)} ms, ` +
      `p95 ${result.p95.toFixed(2)} ms, recall@10 ${result.recall.toFixed(4)}`,
  );
  await store.dropCollection(collection);
  h.afterCall?.();
  return result;
}

// ---- main ----

const rows: string[] = [];
const cell = (s: string) => s.replaceAll("|", "\\|").replaceAll("\n", " ");
const fmtInt = (x: number) => Math.round(x).toLocaleString("en-US");
const fmtMs = (x: number) => (x < 10 ? x.toFixed(2) : x.toFixed(1));

try {
  const maxN = SIZES[SIZES.length - 1] as number;
  log(`generating ${maxN} clustered ${DIM}-d vectors (${((maxN * DIM * 4) / 2 ** 20).toFixed(0)} MiB)…`);
  const corpus = generateCorpus(maxN);
  log("corpus ready");
  for (const name of STORES) {
    const before = new Set(cleanups);
    let harness: Harness;
    try {
      log(`${name}: starting`);
      harness = await startStore(name);
      log(`${name}: ${harness.how}`);
    } catch (error) {
      const reason = (error as Error).message.split("\n")[0] ?? String(error);
      log(`${name}: skipped: ${reason}`);
      rows.push(`| ${name} | skipped: ${cell(reason)} | – | – | – | – | – |`);
      for (const fn of [...cleanups].filter((f) => !before.has(f)).reverse()) {
        cleanups.delete(fn);
        await Promise.resolve(fn()).catch(() => {});
      }
      continue;
    }
    try {
      for (const n of SIZES) {
        try {
          const r = await measure(name, harness, corpus, n);
          const how = r.note ? `${harness.how}; ${r.note}` : harness.how;
          rows.push(
            `| ${name} | ${cell(how)} | ${fmtInt(r.n)} | ${fmtInt(r.insertRate)} | ${fmtMs(r.p50)} | ` +
              `${fmtMs(r.p95)} | ${r.recall.toFixed(4)} |`,
          );
        } catch (error) {
          const reason = (error as Error).message.split("\n")[0] ?? String(error);
          log(`${name} N=${n}: failed: ${reason}`);
          rows.push(
            `| ${name} | ${cell(harness.how)}; failed: ${cell(reason)} | ${fmtInt(n)} | – | – | – | – |`,
          );
        }
      }
    } finally {
      // Stop this store's server (and close its connections) before the next one starts.
      for (const fn of [...cleanups].filter((f) => !before.has(f)).reverse()) {
        cleanups.delete(fn);
        try {
          await fn();
        } catch (error) {
          log(`${name}: cleanup failed: ${(error as Error).message}`);
        }
      }
    }
  }
} finally {
  await runCleanups();
}

console.log("| store | how it ran | N | insert rec/s | search p50 ms | p95 ms | recall@10 |");
console.log("|---|---|---:|---:|---:|---:|---:|");
for (const row of rows) console.log(row);
log(`done in ${((performance.now() - T0) / 60_000).toFixed(1)} min`);
