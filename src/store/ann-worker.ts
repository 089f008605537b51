/**
 * Worker thread of the approximate vector indexes ({@link AnnIndexes}) of one database,
 * started by `ann-client.ts`. It opens its own connection to the database file (WAL lets
 * it read while the main thread writes) and answers one request at a time, in arrival
 * order, so a search queued after an index update sees it.
 *
 * Protocol (`workers/request-worker.ts`): the client posts `{ id, op, ... }`; the worker
 * answers `{ id, value }` or `{ id, error }`. Ops: `candidates`, `sync`, `forget`, `isLoaded`, `indexedCount`,
 * `close` (saves, answers, then ends the thread).
 */
import { dirname } from "node:path";
import { workerData } from "node:worker_threads";
import { serveRequests } from "../workers/request-worker.js";
import { AnnIndexes, type AnnOptions } from "./ann-index.js";
import type { Metric } from "./contract.js";
import { openDatabase } from "./database.js";

/** What the client passes as `workerData`. */
export interface AnnWorkerData {
  /** The database file (`kl.db`). */
  file: string;
  /** Index options, `dir` resolved. */
  options: AnnOptions;
}

/** A request to the worker. */
export type AnnRequest =
  | {
      id: number;
      op: "candidates";
      collection: string;
      dimension: number;
      metric: Metric;
      vector: Float32Array;
      k: number;
      expansion?: number;
      effort?: number;
    }
  | { id: number; op: "sync"; collection: string; dimension: number; metric: Metric }
  | { id: number; op: "forget" | "isLoaded" | "indexedCount"; collection: string }
  | { id: number; op: "close" };

/** Page cache of the workers' connections (shared among the shards): they read the log and vectors being indexed, little else. */
const WORKER_CACHE_KIB = 16_384;

const data = workerData as AnnWorkerData;
const db = openDatabase(dirname(data.file));
// The shards' workers share the budget of one.
const shards = data.options.shard?.count ?? 1;
db.pragma(`cache_size = -${Math.max(2048, Math.floor(WORKER_CACHE_KIB / shards))}`);
const indexes = new AnnIndexes(db, data.options);
serveRequests(
  (request: AnnRequest): unknown => {
    switch (request.op) {
      case "candidates":
        return indexes.scoredCandidates(
          request.collection,
          request.dimension,
          request.metric,
          request.vector,
          request.k,
          request.expansion,
          request.effort,
        );
      case "sync":
        return indexes.sync(request.collection, request.dimension, request.metric);
      case "forget":
        return indexes.forget(request.collection);
      case "isLoaded":
        return indexes.isLoaded(request.collection);
      case "indexedCount":
        return indexes.indexedCount(request.collection);
      case "close":
        try {
          return indexes.saveAll(true);
        } finally {
          db.close();
        }
    }
  },
  (request) => request.op === "close",
);
