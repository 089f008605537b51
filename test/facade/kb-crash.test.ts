/**
 * Index consistency after a real crash (issue 14): a child process ingests and kills
 * itself with SIGKILL between the catalog commit and the keyword merge or the vector-index
 * update (test/facade/kb-crash-child.ts). Reopened, the KB's keyword index holds exactly the
 * catalog's chunks and answers like a KB built from the same documents without a crash;
 * its HNSW index (threshold lowered to 50 vectors) is repaired and answers like exact
 * search. Then the full corpus is ingested again (a changed file among it) and documents
 * are deleted, with the same checks.
 */
import { spawnSync } from "node:child_process";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { KnowledgeLayer } from "../../src/knowledge-layer.js";
import { collectionOf } from "../../src/store/index.js";
import type { ExtractedDocument } from "../../src/types.js";
import { tempDir, useEnv } from "../helpers/helpers.js";
import { CRASH_KB, crashDoc, FIRST_RUN, SECOND_RUN } from "./kb-crash-child.js";

const ROOT = resolve(import.meta.dirname, "..", "..");
const CHILD = join(ROOT, "test", "facade", "kb-crash-child.ts");
const QUERIES = [
  "violin glacier",
  "harbour comet 7",
  "marmalade submarine",
  "note 1234 basalt",
  "ember willow",
];

// Small KBs are searched through the HNSW index.
useEnv("KL_ANN_MIN_RECORDS", "50");

/** Keyword top 10 as (text, score) pairs (each note's text is unique), ties in text order. */
async function keyword(kl: KnowledgeLayer): Promise<string[][]> {
  const out: string[][] = [];
  for (const q of QUERIES) {
    const response = await kl.search(q, { kbs: ["notes"], mode: "keyword", topK: 10, keepDuplicates: true });
    out.push(
      response.results
        .map((r) => ({ text: r.text, score: r.score }))
        .sort((a, b) => b.score - a.score || a.text.localeCompare(b.text))
        .map((r) => `${r.text} ${r.score.toFixed(6)}`),
    );
  }
  return out;
}

/** The same documents ingested into a fresh data directory, without a crash: its keyword answers. */
async function reference(docs: ExtractedDocument[]): Promise<string[][]> {
  const tmp = tempDir();
  const kl = KnowledgeLayer.open({ dataDir: tmp.dir, cache: { type: "none" } });
  try {
    await kl.createKb("notes", CRASH_KB);
    await kl.ingestDocuments(docs, { kb: "notes", embed: false });
    return await keyword(kl);
  } finally {
    await kl.close();
    tmp.cleanup();
  }
}

/** The KB's documents as the catalog holds them (uri → text), in id order. */
function storedDocs(kl: KnowledgeLayer): ExtractedDocument[] {
  const rows = kl.db
    .prepare(
      "SELECT d.uri, c.text FROM documents d JOIN chunks c ON c.document_id = d.id WHERE d.kb = 'notes' ORDER BY d.id",
    )
    .raw()
    .all() as [string, string][];
  return rows.map(([uri, text]) => ({ uri, text, metadata: { path: uri, type: "text" } }));
}

/** Keyword index = catalog, keyword answers = the crash-free reference, vector ANN = exact. */
async function checkConsistent(kl: KnowledgeLayer): Promise<void> {
  const chunkIds = new Set(
    kl.db.prepare("SELECT id FROM chunks WHERE kb = 'notes'").pluck().all() as number[],
  );
  expect(kl.bm25.indexedChunkIds("notes")).toEqual(chunkIds);
  const answers = await keyword(kl);
  expect(answers[0]?.length).toBe(10);
  for (const list of answers) expect(list.length).toBeGreaterThan(0);
  expect(answers).toEqual(await reference(storedDocs(kl)));
  const kb = await kl.getKb("notes");
  const collection = collectionOf(kb.config);
  const embedder = kl.embedder(kb.config, "query");
  const vectors = kl.db
    .prepare("SELECT count(*) FROM vec_records WHERE collection = ?")
    .pluck()
    .get(collection) as number;
  expect(vectors).toBe(chunkIds.size);
  let hits = 0;
  for (const q of QUERIES) {
    const vector = await embedder.embedQuery(q);
    const ann = await kl.store.search(collection, vector, { topK: 10 });
    const exact = await kl.store.search(collection, vector, { topK: 10, exact: true });
    // Scores are exact (candidates are rescored): a hit counts when it scores at least the exact 10th.
    const tenth = exact[exact.length - 1]?.score ?? 0;
    hits += ann.filter((h) => h.score >= tenth - 1e-6).length;
    expect(ann[0]?.score).toBeCloseTo(exact[0]?.score ?? Number.NaN, 6);
    for (const h of ann) expect(chunkIds.has(Number(h.id))).toBe(true);
  }
  // Approximate search, but on an index that holds exactly the stored vectors.
  expect(hits / (10 * QUERIES.length)).toBeGreaterThanOrEqual(0.9);
  expect(await kl.store.ann?.indexedCount(collection)).toBe(vectors);
  expect(await kl.store.ann?.isLoaded(collection)).toBe(true);
}

describe("a crash between the catalog commit and the index updates", () => {
  for (const point of ["keyword-merge", "after-commit", "vector-index"]) {
    it(`${point}: reopened, the indexes equal the catalog; re-ingest and delete keep them so`, async () => {
      const tmp = tempDir();
      try {
        const r = spawnSync(
          process.execPath,
          ["--import", join(ROOT, "node_modules/tsx/dist/loader.mjs"), CHILD, tmp.dir, point],
          {
            cwd: ROOT,
            env: { ...process.env, KL_ANN_MIN_RECORDS: "50" },
            encoding: "utf8",
            timeout: 120_000,
          },
        );
        expect(r.signal, r.stderr).toBe("SIGKILL");
        const kl = KnowledgeLayer.open({ dataDir: tmp.dir, cache: { type: "none" } });
        try {
          const stored = kl.db
            .prepare("SELECT count(*) FROM documents WHERE kb = 'notes'")
            .pluck()
            .get() as number;
          if (point === "keyword-merge") {
            // The group being written when the merge started is lost whole; earlier ones stay.
            expect(stored).toBeGreaterThan(FIRST_RUN.length);
            expect(stored).toBeLessThan(FIRST_RUN.length + SECOND_RUN.length - 1);
          } else expect(stored).toBe(FIRST_RUN.length + SECOND_RUN.length - 1);
          await checkConsistent(kl);

          // The next ingest completes the corpus (the changed note 5 included) and stays consistent.
          await kl.ingestDocuments([...FIRST_RUN.slice(0, 5), ...SECOND_RUN, ...FIRST_RUN.slice(6)], {
            kb: "notes",
          });
          expect(kl.db.prepare("SELECT count(*) FROM documents WHERE kb = 'notes'").pluck().get()).toBe(
            FIRST_RUN.length + SECOND_RUN.length - 1,
          );
          expect(storedDocs(kl).find((d) => d.uri === "mem:note-5")?.text).toBe(crashDoc(5, 1).text);
          expect(kl.bm25.segmentCount("notes")).toBeGreaterThan(0); // merged and pending chunks both searched
          await checkConsistent(kl);

          // Deleting documents (merged and pending ones) keeps both indexes equal to the catalog.
          const ids = kl.db
            .prepare("SELECT id FROM documents WHERE kb = 'notes' AND (id % 7 = 0 OR id > 2300)")
            .pluck()
            .all() as number[];
          expect(await kl.deleteDocuments("notes", ids)).toBe(ids.length);
          await checkConsistent(kl);
        } finally {
          await kl.close();
        }
      } finally {
        tmp.cleanup();
      }
    }, 180_000);
  }
});
