/**
 * Recall of the HNSW candidates against exact search on a kept `bench:scale` data directory,
 * for several search settings (expansion, candidates), with the time per query.
 *
 * Usage: node --import tsx bench/ann-recall.ts DATA_DIR [--queries 200] [--ef 300,600,auto] [--candidates 200,400]
 *        [--rebuild-with connectivity:expansionAdd] (builds a fresh index in memory with those settings)
 */
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { AnnIndexes } from "../src/store/ann-index.js";
import { blobToVector, openDatabase } from "../src/store/database.js";
import { hashEmbed } from "./hash-embedding-server.js";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    queries: { type: "string", default: "200" },
    ef: { type: "string", default: "300,600" },
    candidates: { type: "string", default: "200,400" },
    "rebuild-with": { type: "string" },
  },
});
const dir = resolve(positionals[0] ?? ".");
const db = openDatabase(dir);
const collection = (
  db.prepare("SELECT name FROM vec_collections ORDER BY name").pluck().all() as string[]
).find((n) => n !== "kb_default") as string;
const rows = db
  .prepare("SELECT rowid, vector FROM vec_records WHERE collection = ?")
  .raw()
  .all(collection) as [number, Buffer][];
const ids = rows.map((r) => r[0]);
const vectors = rows.map((r) => blobToVector(r[1]));
const SHARED = resolve(import.meta.dirname, "..", "..", "shared", "data", "ir");
const texts: string[] = [];
for (const set of ["scifact", "cranfield"])
  for (const line of readFileSync(join(SHARED, set, "queries.jsonl"), "utf8")
    .split("\n")
    .filter(Boolean)
    .slice(0, Number(values.queries) / 2))
    texts.push(JSON.parse(line).text as string);
const queries = texts.map((t) => hashEmbed(t));
const exact = queries.map((q) => {
  const scores = vectors.map((v) => {
    let s = 0;
    for (let i = 0; i < v.length; i++) s += (v[i] as number) * (q[i] as number);
    return s;
  });
  const sorted = [...scores].sort((a, b) => b - a);
  return { scores, tenth: sorted[9] as number };
});
const byRowid = new Map(ids.map((id, i) => [id, i]));
console.log(`${collection}: ${vectors.length} vectors, ${queries.length} queries`);
console.log("| index | ef | candidates | recall@10 | p50 ms | p95 ms |");
console.log("|---|---|---|---|---|---|");
const [connectivity, expansionAdd] = (values["rebuild-with"] ?? "").split(":").map(Number);
const ann = new AnnIndexes(db, connectivity ? { connectivity, expansionAdd, dir: null } : {});
const b0 = performance.now();
ann.candidates(collection, 512, "cosine", queries[0] as Float32Array, 10); // load or build
console.log(
  `(index ${connectivity ? "built" : "loaded"} in ${((performance.now() - b0) / 1000).toFixed(1)} s)`,
);
for (const efText of String(values.ef).split(",")) {
  for (const want of String(values.candidates).split(",").map(Number)) {
    const ef = efText === "auto" ? ann.expansionFor(vectors.length, want) : Number(efText);
    const times: number[] = [];
    let hits = 0;
    queries.forEach((q, n) => {
      const t = performance.now();
      const candidates = ann.candidates(collection, 512, "cosine", q, want, ef) ?? [];
      times.push(performance.now() - t);
      const { scores, tenth } = exact[n] as { scores: number[]; tenth: number };
      const top = candidates
        .map((id) => scores[byRowid.get(id) as number] as number)
        .sort((a, b) => b - a)
        .slice(0, 10);
      hits += top.filter((s) => s >= tenth - 1e-6).length;
    });
    times.sort((a, b) => a - b);
    console.log(
      `| ${connectivity ? `M ${connectivity}, efAdd ${expansionAdd}` : "stored"} | ${efText === "auto" ? `auto (${ef})` : ef} | ${want} | ${(hits / (10 * queries.length)).toFixed(3)} | ${(times[Math.floor(times.length / 2)] as number).toFixed(2)} | ${(times[Math.floor(times.length * 0.95)] as number).toFixed(2)} |`,
    );
  }
}
db.close();
