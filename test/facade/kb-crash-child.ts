/**
 * Child process of test/facade/kb-crash.test.ts: ingests into a KB and kills itself with SIGKILL
 * at a chosen point, as a crash would (no close, no save, no rollback by the program).
 *
 * Usage: node --import tsx test/facade/kb-crash-child.ts DATA_DIR POINT
 *
 * Points (all in the second of two ingest runs; the first one committed):
 * - `keyword-merge`: inside the ingest transaction, when the pending keyword postings are
 *   turned into a segment (catalog rows of the group written, not committed);
 * - `after-commit`: after the run's catalog transactions committed, before the run's final
 *   keyword-index step and the vector-index update;
 * - `vector-index`: after the keyword index, when the HNSW index is brought up to date and saved.
 */
import { fileURLToPath } from "node:url";
import { KnowledgeLayer } from "../../src/knowledge-layer.js";
import { Bm25Index } from "../../src/retrieve/bm25.js";
import { SqliteVectorStore } from "../../src/store/sqlite-vector-store.js";
import type { ExtractedDocument } from "../../src/types.js";

const WORDS =
  "heron bridge violin glacier lantern orchard comet harbour quartz meadow falcon tundra ember willow basalt".split(
    " ",
  );

/** Document i of the crash corpus: one short chunk; `version` changes its text (a changed file). */
export function crashDoc(i: number, version = 0): ExtractedDocument {
  const w = (k: number): string => WORDS[k % WORDS.length] as string;
  const text =
    version === 0
      ? `Note ${i}: the ${w(i)} beside the ${w(Math.floor(i / 15))} near ${w(i * 7 + 3)} ${i % 11}.`
      : `Revised note ${i}: a submarine of marmalade and ${w(i + version)} sails on.`;
  return { uri: `mem:note-${i}`, text, metadata: { path: `mem:note-${i}`, type: "text" } };
}

/** The KB configuration of the crash tests: the bundled static table (fast, offline). */
export const CRASH_KB = { embedding: { provider: "bundled" as const, model: "use-lite-static" } };

/** First run: documents 0–299. Second run: 300–2,399 and a changed note 5. */
export const FIRST_RUN = Array.from({ length: 300 }, (_, i) => crashDoc(i));
export const SECOND_RUN = [crashDoc(5, 1), ...Array.from({ length: 2100 }, (_, i) => crashDoc(300 + i))];

async function main(dataDir: string, point: string): Promise<void> {
  const crash = (): never => {
    process.kill(process.pid, "SIGKILL");
    throw new Error("unreachable");
  };
  const kl = KnowledgeLayer.open({ dataDir, cache: { type: "none" } });
  await kl.createKb("notes", CRASH_KB);
  await kl.ingestDocuments(FIRST_RUN, { kb: "notes" });
  const bm25 = Bm25Index.prototype as unknown as Record<string, unknown>;
  if (point === "keyword-merge") bm25.flushRows = crash;
  else if (point === "after-commit") bm25.flushIfFull = crash;
  else if (point === "vector-index") SqliteVectorStore.prototype.syncIndex = crash;
  else throw new Error(`unknown crash point "${point}"`);
  await kl.ingestDocuments(SECOND_RUN, { kb: "notes" });
  throw new Error(`the crash point "${point}" was not reached`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await main(process.argv[2] as string, process.argv[3] as string);
}
