/**
 * Worker thread of the parallel keyword search (`bm25-parallel.ts`): it opens its own
 * connection to the database file (WAL lets it read while the main thread writes) and
 * answers one part of a search at a time with {@link Bm25Index.searchPart}.
 *
 * Protocol: the worker sets `ready` once its connection is open; the client posts
 * `{ id, op: "search", ... }` (id ≥ 1) and the worker answers `{ id, value }` or `{ id, error }`.
 * The client ends it with `terminate()` (it only reads).
 */
import { dirname } from "node:path";
import { workerData } from "node:worker_threads";
import { openDatabase } from "../store/database.js";
import { serveRequests } from "../workers/request-worker.js";
import { type Bm25Hit, Bm25Index, type Bm25Params, type IdRange } from "./bm25.js";

/** What the client passes as `workerData`. */
export interface Bm25WorkerData {
  /** The database file (`kl.db`). */
  file: string;
  /**
   * One Int32 the worker sets to 1 once its connection is open. Shared memory, not a message:
   * a caller running searches back to back never yields to the event loop between them, so a
   * message saying "ready" would not arrive.
   */
  ready: SharedArrayBuffer;
}

/** A request to the worker. */
export type Bm25Request = {
  id: number;
  op: "search";
  kb: string;
  query: string;
  topK: number;
  params: Bm25Params;
  part: IdRange;
};

/** The worker's answer to a search: the part's hits and the state of the KB it saw. */
export interface Bm25PartResult {
  hits: Bm25Hit[];
  state: string;
}

/** Page cache of the worker's connection, in KiB: the posting blocks of its half of the segments. */
const WORKER_CACHE_KIB = 65_536;

const data = workerData as Bm25WorkerData;
const db = openDatabase(dirname(data.file));
db.pragma(`cache_size = -${WORKER_CACHE_KIB}`);
const bm25 = new Bm25Index(db);
serveRequests(
  (request: Bm25Request): Bm25PartResult =>
    bm25.searchPart(request.kb, request.query, request.topK, request.params, undefined, request.part),
);
Atomics.store(new Int32Array(data.ready), 0, 1);
