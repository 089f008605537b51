/**
 * Vector search in the embedded store at scale: exact scan vs the HNSW index.
 *
 *   node --import tsx bench/ann-scale.ts [--sizes 10000,100000] [--dim 512] [--queries 200]
 *
 * Vectors are synthetic but clustered (1,000 Gaussian centres plus noise, unit
 * length) so nearest neighbours are meaningful; queries come from the same
 * distribution and are not stored. For each size it reports the time to write the
 * vectors to SQLite, to build and save the index, to load it again in a fresh
 * connection, p50/p95 of exact and approximate top-10 searches (alternating, same
 * run), recall@10 of the index against exact search, RSS and bytes on disk.
 */
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDatabase } from "../src/store/database.js";
import { SqliteVectorStore } from "../src/store/sqlite-vector-store.js";

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? (process.argv[i + 1] ?? fallback) : fallback;
}

const sizes = arg("sizes", "10000,100000").split(",").map(Number);
const dim = Number(arg("dim", "512"));
const queryCount = Number(arg("queries", "200"));
const K = 10;

let seed = 42;
const rnd = (): number => {
  seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
  return seed / 2 ** 32;
};
const gauss = (): number => Math.sqrt(-2 * Math.log(rnd() + 1e-12)) * Math.cos(2 * Math.PI * rnd());
const centres = Array.from({ length: 1000 }, () => Float32Array.from({ length: dim }, gauss));
function make(): Float32Array {
  const c = centres[Math.floor(rnd() * centres.length)] as Float32Array;
  const v = new Float32Array(dim);
  let n = 0;
  for (let i = 0; i < dim; i++) {
    const x = (c[i] as number) + gauss();
    v[i] = x;
    n += x * x;
  }
  n = Math.sqrt(n);
  for (let i = 0; i < dim; i++) v[i] = (v[i] as number) / n;
  return v;
}

const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((s.length - 1) * p))] as number;
};
const mb = (bytes: number): string => `${(bytes / 2 ** 20).toFixed(0)} MB`;
const dirBytes = (dir: string): number => {
  let total = 0;
  for (const name of readdirSync(dir, { recursive: true }) as string[]) {
    const st = statSync(join(dir, name));
    if (st.isFile()) total += st.size;
  }
  return total;
};

const rows: string[] = [];
for (const size of sizes) {
  const dir = mkdtempSync(join(tmpdir(), "kl-ann-bench-"));
  try {
    let db = openDatabase(dir);
    let store = new SqliteVectorStore(db, { ann: { worker: false } }); // in process: timed synchronously
    await store.createCollection("kb", dim, "cosine");
    let t = performance.now();
    const batch = 1000;
    for (let i = 0; i < size; i += batch) {
      const records = [];
      for (let j = i; j < Math.min(size, i + batch); j++) {
        records.push({ id: String(j), vector: make(), payload: { documentId: j >> 4 } });
      }
      store.addBatchSync("kb", records);
    }
    const writeS = (performance.now() - t) / 1000;
    t = performance.now();
    store.syncIndex("kb");
    const buildS = (performance.now() - t) / 1000;
    const rssBuilt = process.memoryUsage().rss;
    await store.close();
    db.close();

    db = openDatabase(dir);
    store = new SqliteVectorStore(db, { ann: { worker: false } }); // in process: timed synchronously
    const queries = Array.from({ length: queryCount }, make);
    t = performance.now();
    store.searchSync("kb", queries[0] as Float32Array, { topK: K });
    const loadS = (performance.now() - t) / 1000;

    const exactMs: number[] = [];
    const annMs: number[] = [];
    let found = 0;
    for (const q of queries) {
      let t0 = performance.now();
      const exact = store.searchSync("kb", q, { topK: K, exact: true });
      exactMs.push(performance.now() - t0);
      t0 = performance.now();
      const approx = store.searchSync("kb", q, { topK: K });
      annMs.push(performance.now() - t0);
      const want = new Set(exact.map((h) => h.id));
      found += approx.filter((h) => want.has(h.id)).length;
    }
    const recall = found / (queries.length * K);
    const rss = process.memoryUsage().rss;
    await store.close();
    db.close();
    const indexBytes = dirBytes(join(dir, "kl-ann"));
    const line = [
      size.toLocaleString("en-US"),
      `${writeS.toFixed(1)} s`,
      `${buildS.toFixed(1)} s (${Math.round(size / buildS)}/s)`,
      `${loadS.toFixed(2)} s`,
      `${pct(exactMs, 0.5).toFixed(1)} / ${pct(exactMs, 0.95).toFixed(1)}`,
      `${pct(annMs, 0.5).toFixed(2)} / ${pct(annMs, 0.95).toFixed(2)}`,
      recall.toFixed(3),
      `${mb(rssBuilt)} / ${mb(rss)}`,
      `${mb(indexBytes)} (${Math.round(indexBytes / size)} B/vec)`,
      mb(dirBytes(dir) - indexBytes),
    ].join(" | ");
    rows.push(`| ${line} |`);
    console.error(`done ${size}: ${line}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

console.log(
  `\n${dim}-d cosine, top-${K}, ${queryCount} queries, ${process.env.KL_ANN === "off" ? "index off" : "HNSW int8 M=16 efC=64 ef=128, 40 candidates rescored"}`,
);
console.log(
  "| vectors | write to SQLite | index build+save | index load | exact p50/p95 ms | ANN p50/p95 ms | recall@10 | RSS built / searching | index file | kl.db |",
);
console.log("|---|---|---|---|---|---|---|---|---|---|");
for (const row of rows) console.log(row);
