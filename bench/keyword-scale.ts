/**
 * Keyword (BM25) search latency at 10k / 100k chunks: the index as it is (kb_stats,
 * block-compressed posting lists, MaxScore top-k) against the per-query recount over one row
 * per posting that it replaced (count/avg over every chunk row, posting lists joined back to
 * chunks, every scored chunk sorted; the bench writes that `postings` table itself), in the
 * same run on the same database, alternating which runs first per query. Also checks that
 * both return the same top 10, and prints the time and bytes each index layout takes.
 *
 * Chunks: SciFact and Cranfield documents (title as the title field) and ~1,200-character
 * pieces of the FastAPI docs and the Rust book from `../shared/data`, repeated with a
 * suffix term per round to reach the size. They are written straight to the catalog and
 * the BM25 index (no extraction or chunking). Queries: SciFact and Cranfield queries.
 *
 * Usage: node --import tsx bench/keyword-scale.ts [--sizes 10000,100000] [--queries 200] [--keep DIR]
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import {
  Bm25Index,
  type Bm25Params,
  bm25Idf,
  bm25TermScore,
  DEFAULT_BM25_PARAMS,
  TITLE_FIELD_PREFIX,
} from "../src/retrieve/bm25.js";
import { analyzerOptions, termFrequencies, tokenize } from "../src/retrieve/tokenizer.js";
import { type Db, openDatabase } from "../src/store/database.js";

const { values } = parseArgs({
  options: {
    sizes: { type: "string", default: "10000,100000" },
    queries: { type: "string", default: "200" },
    /** Keep each built database in DIR/<size> and reuse it on the next run. */
    keep: { type: "string" },
  },
});
const SHARED = resolve(import.meta.dirname, "..", "..", "shared", "data");

function readJsonl(file: string): Record<string, unknown>[] {
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l));
}

function markdownPieces(dir: string): { title: string; text: string }[] {
  const out: { title: string; text: string }[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else if (name.endsWith(".md")) {
        const text = readFileSync(p, "utf8");
        for (let i = 0; i < text.length; i += 1200) out.push({ title: name, text: text.slice(i, i + 1200) });
      }
    }
  };
  walk(dir);
  return out;
}

const pool: { title: string; text: string }[] = [];
for (const set of ["scifact", "cranfield"]) {
  for (const d of readJsonl(join(SHARED, "ir", set, "corpus.jsonl"))) {
    pool.push({ title: String(d.title ?? ""), text: String(d.text ?? "") });
  }
}
pool.push(...markdownPieces(join(SHARED, "docs", "markdown", "fastapi_docs_en")));
pool.push(...markdownPieces(join(SHARED, "docs", "markdown", "rust_book_src")));
const queries: string[] = [];
for (const set of ["scifact", "cranfield"]) {
  for (const q of readJsonl(join(SHARED, "ir", set, "queries.jsonl")).slice(0, Number(values.queries) / 2)) {
    queries.push(String(q.text));
  }
}

/** The search this index replaced, kept here to measure against. */
function legacySearch(db: Db, kb: string, query: string, topK: number, params: Bm25Params) {
  const queryTerms = termFrequencies(tokenize(query, analyzerOptions(params.analyzer ?? "english")));
  const stats = db
    .prepare(
      `SELECT count(*) AS n, coalesce(avg(token_count), 0) AS avgdl,
              coalesce(avg(title_token_count), 0) AS avgtl FROM chunks WHERE kb = ?`,
    )
    .get(kb) as { n: number; avgdl: number; avgtl: number };
  if (stats.n === 0) return [];
  const body = db.prepare(
    `SELECT p.chunk_id AS id, p.tf AS tf, c.token_count AS len FROM postings p
     JOIN chunks c ON c.id = p.chunk_id WHERE p.kb = ? AND p.term = ?`,
  );
  const titles = db.prepare(
    `SELECT p.chunk_id AS id, p.tf AS tf, c.title_token_count AS len FROM postings p
     JOIN chunks c ON c.id = p.chunk_id WHERE p.kb = ? AND p.term = ?`,
  );
  const titleWeight = params.titleWeight ?? 0.3;
  const scores = new Map<number, number>();
  const add = (rows: { id: number; tf: number; len: number }[], avg: number, weight: number, qtf: number) => {
    if (rows.length === 0) return;
    const idf = bm25Idf(stats.n, rows.length);
    for (const row of rows) {
      const s = weight * qtf * bm25TermScore(row.tf, row.len, avg, idf, params);
      scores.set(row.id, (scores.get(row.id) ?? 0) + s);
    }
  };
  for (const [term, qtf] of queryTerms) {
    add(body.all(kb, term) as { id: number; tf: number; len: number }[], stats.avgdl, 1, qtf);
    if (titleWeight > 0) {
      const rows = titles.all(kb, TITLE_FIELD_PREFIX + term) as { id: number; tf: number; len: number }[];
      add(rows, stats.avgtl, titleWeight, qtf);
    }
  }
  return [...scores]
    .map(([chunkId, score]) => ({ chunkId, score }))
    .sort((x, y) => y.score - x.score || x.chunkId - y.chunkId)
    .slice(0, topK);
}

function build(db: Db, size: number): void {
  const bm25 = new Bm25Index(db);
  const insertDoc = db.prepare(
    `INSERT INTO documents (kb, uri, path, type, title, content_hash, pipeline_hash, embedded, metadata, text, chunk_count, ingested_at)
     VALUES ('bench', ?, ?, 'text', ?, 'h', 'p', 0, '{}', '', 1, '')`,
  );
  const insertChunk = db.prepare(
    `INSERT INTO chunks (kb, document_id, chunk_index, total_chunks, chunk_type, start, end, text, metadata, token_count, title_token_count)
     VALUES ('bench', ?, 0, 1, 'text', 0, 0, ?, '{}', ?, ?)`,
  );
  db.exec(`CREATE TABLE IF NOT EXISTS postings (kb TEXT NOT NULL, term TEXT NOT NULL, chunk_id INTEGER NOT NULL,
    tf INTEGER NOT NULL, PRIMARY KEY (kb, term, chunk_id)) WITHOUT ROWID`);
  const insertPosting = db.prepare("INSERT INTO postings (kb, term, chunk_id, tf) VALUES ('bench', ?, ?, ?)");
  const started = Date.now();
  let blockMs = 0;
  let rowMs = 0;
  const batch = 2000;
  for (let i = 0; i < size; i += batch) {
    db.transaction(() => {
      for (let j = i; j < Math.min(size, i + batch); j++) {
        const round = Math.floor(j / pool.length);
        const piece = pool[j % pool.length] as { title: string; text: string };
        const text = round === 0 ? piece.text : `${piece.text} copy${round}`;
        const uri = `bench:${j}`;
        const doc = Number(insertDoc.run(uri, uri, piece.title).lastInsertRowid);
        // Lengths first (the triggers count them at insert), then the postings.
        const options = analyzerOptions("english");
        const body = tokenize(text, options).length;
        const title = piece.title ? tokenize(piece.title, options).length : 0;
        const id = Number(insertChunk.run(doc, text, body, title).lastInsertRowid);
        let t = performance.now();
        bm25.indexChunk("bench", id, text, "english", piece.title);
        blockMs += performance.now() - t;
        t = performance.now();
        for (const [term, tf] of termFrequencies(tokenize(text, options))) insertPosting.run(term, id, tf);
        if (piece.title)
          for (const [term, tf] of termFrequencies(tokenize(piece.title, options)))
            insertPosting.run(TITLE_FIELD_PREFIX + term, id, tf);
        rowMs += performance.now() - t;
      }
    })();
  }
  const t = performance.now();
  db.transaction(() => bm25.flush("bench"))();
  blockMs += performance.now() - t;
  process.stderr.write(
    `  built ${size} chunks in ${((Date.now() - started) / 1000).toFixed(1)} s ` +
      `(block index ${(blockMs / 1000).toFixed(1)} s incl. tokenizing, row postings ${(rowMs / 1000).toFixed(1)} s incl. tokenizing)\n`,
  );
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))] as number;
};

console.log(`pool ${pool.length} real pieces; ${queries.length} queries; top 10 (and 100)`);
console.log("| chunks | top-k | before p50 | before p95 | after p50 | after p95 | p50 ratio | same top-k |");
console.log("|---|---|---|---|---|---|---|---|");
for (const size of String(values.sizes).split(",").map(Number)) {
  const dir = values.keep ? join(values.keep, String(size)) : mkdtempSync(join(tmpdir(), "kw-scale-"));
  const db = openDatabase(dir);
  try {
    const have = db.prepare("SELECT chunks FROM kb_stats WHERE kb = 'bench'").pluck().get() as
      | number
      | undefined;
    if (have !== size) {
      db.exec(
        "DELETE FROM kw_seg_blocks; DELETE FROM kw_seg_terms; DELETE FROM kw_segments; DELETE FROM kw_pending;",
      );
      db.exec("DROP TABLE IF EXISTS postings; DELETE FROM chunks; DELETE FROM documents;");
      build(db, size);
    }
    db.exec("ANALYZE");
    const bytes = (names: string[]) =>
      db
        .prepare(
          `SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name IN (${names.map(() => "?").join(",")})`,
        )
        .pluck()
        .get(...names) as number;
    const rowBytes = bytes(["postings"]);
    const blockBytes = bytes(["kw_seg_blocks", "kw_seg_terms", "kw_segments", "kw_pending"]);
    process.stderr.write(
      `  ${size} chunks: row postings ${(rowBytes / size).toFixed(0)} B/chunk, ` +
        `blocks ${(blockBytes / size).toFixed(0)} B/chunk (${(rowBytes / blockBytes).toFixed(1)}× smaller)\n`,
    );
    const bm25 = new Bm25Index(db);
    const params = { ...DEFAULT_BM25_PARAMS };
    for (const k of [10, 100]) {
      const before: number[] = [];
      const after: number[] = [];
      let same = 0;
      // Warm-up pass over a few queries.
      for (const q of queries.slice(0, 10)) {
        bm25.search("bench", q, k, params);
        legacySearch(db, "bench", q, k, params);
      }
      queries.forEach((q, i) => {
        const runNew = () => {
          const t = performance.now();
          const r = bm25.search("bench", q, k, params);
          after.push(performance.now() - t);
          return r;
        };
        const runOld = () => {
          const t = performance.now();
          const r = legacySearch(db, "bench", q, k, params);
          before.push(performance.now() - t);
          return r;
        };
        const [a, b] = i % 2 === 0 ? [runNew(), runOld()] : [runOld(), runNew()].reverse();
        const equal =
          a?.length === b?.length &&
          (a ?? []).every(
            (h, n) => h.chunkId === b?.[n]?.chunkId && Math.abs(h.score - (b?.[n]?.score ?? 0)) < 1e-9,
          );
        if (equal) same++;
      });
      console.log(
        `| ${size} | ${k} | ${pct(before, 0.5).toFixed(1)} | ${pct(before, 0.95).toFixed(1)} | ` +
          `${pct(after, 0.5).toFixed(2)} | ${pct(after, 0.95).toFixed(2)} | ` +
          `${(pct(before, 0.5) / pct(after, 0.5)).toFixed(1)}× | ${same}/${queries.length} |`,
      );
    }
  } finally {
    db.close();
    if (!values.keep) rmSync(dir, { recursive: true, force: true });
  }
}
