/**
 * The approximate vector indexes of a database, run on a worker thread of their own
 * (`ann-worker.ts`, the same {@link AnnIndexes} class as in process). Two things run in
 * parallel then, on two cores: an index update after an ingest's commit with the main
 * thread's next writes (the worker reads the committed vectors through its own
 * connection), and a query's HNSW search with the keyword search of a hybrid query.
 *
 * Shards. With `shards` 2 (`$KL_ANN_SHARDS`; default 2 on two or more cores, see
 * {@link defaultShards}) each collection's index is split in
 * two (by rowid parity), one worker per shard: a query searches both graphs at once
 * and keeps the nearest candidates of the two, and an ingest's inserts go to both in
 * parallel. Two graphs of half the size need a search list of ~0.7× the length for the same
 * recall, so a query costs ~0.6× the time of one graph, at ~1.4× the CPU (on the kept 1M
 * `bench:scale` KB, recall@10 0.95: 17.7–19.5 ms p50 against 29.9–33.7 ms).
 *
 * The workers start on the first request for a collection large enough to be indexed
 * (`minRecords`): small KBs never start them, so a one-off `kl search` on them pays nothing.
 * Requests are answered in order. Consistency is the log's, as in process: a worker
 * brings its shard up to date with the log before every search. Writes that belong to the
 * caller's transaction (`onCreate`, `onDrop`) run on the caller's connection.
 *
 * An idle worker does not keep the process alive; one with requests in flight does.
 * {@link close} saves the indexes (what is not saved is replayed from the log next time).
 */
import { availableParallelism } from "node:os";
import { KnowledgeLayerError } from "../errors.js";
import { siblingModule } from "../workers/module-worker.js";
import { RequestWorker } from "../workers/request-worker.js";
import {
  AnnIndexes,
  type AnnOptions,
  type Candidates,
  defaultAnnDir,
  defaultMinRecords,
  loadUsearch,
  type ScoredCandidates,
} from "./ann-index.js";
import type { AnnRequest, AnnWorkerData } from "./ann-worker.js";
import type { Metric } from "./contract.js";
import type { Db } from "./database.js";

/** A request without its id (the client numbers them). */
type Request = AnnRequest extends infer R ? (R extends { id: number } ? Omit<R, "id"> : never) : never;
type RunningWorker = RequestWorker<Request, unknown>;

/** {@link AnnIndexes} behind a worker thread; see the module comment. */
export class AnnWorkerIndexes {
  /** In-process instance for the caller's transactional writes (creating and dropping collections). */
  private readonly local: AnnIndexes;
  private readonly options: AnnOptions & { minRecords: number };
  /** Shards per collection, one worker each. */
  readonly shards: number;
  /** The running worker of each shard (by index), its calls in flight and its end. */
  private readonly current: (RunningWorker | undefined)[];
  /** Collections known to hold at least `minRecords` vectors (they rarely shrink back). */
  private readonly large = new Set<string>();
  private readonly countAtLeast;

  constructor(
    private readonly db: Db,
    options: AnnOptions = {},
  ) {
    this.options = {
      ...options,
      minRecords: options.minRecords ?? defaultMinRecords(),
      dir: options.dir === undefined ? defaultAnnDir(db) : options.dir,
      threads: options.threads ?? Math.max(1, availableParallelism()),
    };
    this.shards = options.shards ?? defaultShards();
    if (!(Number.isInteger(this.shards) && this.shards >= 1 && this.shards <= 64))
      throw new KnowledgeLayerError(`ann.shards must be a whole number from 1 to 64, not ${options.shards}`);
    this.current = Array.from({ length: this.shards }, () => undefined);
    this.local = new AnnIndexes(db, this.options);
    this.countAtLeast = db
      .prepare("SELECT count(*) FROM (SELECT 1 FROM vec_records WHERE collection = ? LIMIT ?)")
      .pluck();
  }

  /** Number of candidates to fetch for `topK` hits (as {@link AnnIndexes.candidateCount}). */
  candidateCount(topK: number, filtered = false): number {
    return this.local.candidateCount(topK, filtered);
  }

  /** The search list (ef) a query of `k` candidates uses on an index of `size` vectors. */
  expansionFor(size: number, k: number): number {
    return this.local.expansionFor(size, k);
  }

  /** As {@link AnnIndexes.onCreate}, in the caller's transaction. */
  onCreate(collection: string): void {
    this.local.onCreate(collection);
    this.large.delete(collection);
  }

  /** As {@link AnnIndexes.onDrop}, in the caller's transaction; the worker lets go of its copy. */
  onDrop(collection: string): void {
    this.local.onDrop(collection);
    this.large.delete(collection);
    for (const running of this.current)
      if (running) void running.request({ op: "forget", collection }).catch(() => undefined);
  }

  /**
   * HNSW candidates (rowids, best first) for `vector`, from the worker; `undefined` when
   * the collection is small enough to scan exactly, or the native module is unavailable.
   */
  async candidates(
    collection: string,
    dimension: number,
    metric: Metric,
    vector: Float32Array,
    k: number,
    expansion?: number,
    effort?: number,
  ): Promise<Candidates> {
    if (!this.isLarge(collection) || loadUsearch() === null) return undefined;
    const query = Float32Array.from(vector);
    const parts = (await this.requestAll({
      op: "candidates",
      collection,
      dimension,
      metric,
      vector: query,
      k,
      expansion,
      effort,
    })) as (ScoredCandidates | null)[];
    if (parts.some((part) => part === null)) return undefined;
    return mergeCandidates(parts as ScoredCandidates[], k);
  }

  /**
   * Brings a collection's index up to date with the log and saves it when worthwhile, on the
   * worker; the promise settles when it is done (an ingest need not wait for it: a later
   * search waits in the worker's queue).
   */
  sync(collection: string, dimension: number, metric: Metric): Promise<boolean> {
    if (!this.isLarge(collection) || loadUsearch() === null) return Promise.resolve(false);
    return this.requestAll({ op: "sync", collection, dimension, metric }).then((indexed) =>
      indexed.every((one) => one === true),
    );
  }

  /** Is an index loaded for this collection in every shard's worker (tests, diagnostics)? */
  async isLoaded(collection: string): Promise<boolean> {
    if (this.current.some((running) => !running)) return false;
    const loaded = await this.requestAll({ op: "isLoaded", collection });
    return loaded.every((one) => one === true);
  }

  /** Vectors in the workers' loaded shards of a collection, else undefined (tests, diagnostics). */
  async indexedCount(collection: string): Promise<number | undefined> {
    if (this.current.some((running) => !running)) return undefined;
    const counts = (await this.requestAll({ op: "indexedCount", collection })) as (number | null)[];
    return counts.some((n) => n === null) ? undefined : counts.reduce<number>((sum, n) => sum + (n ?? 0), 0);
  }

  /**
   * Saves the indexes and ends the workers; resolves when they have (at once without any).
   * Later requests start new workers.
   */
  close(): Promise<void> {
    const exits: Promise<void>[] = [];
    for (let shard = 0; shard < this.shards; shard++) {
      const current = this.current[shard];
      if (!current) continue;
      this.current[shard] = undefined;
      // Held (not unref'd) until it has exited, so a process awaiting this does not end first.
      current.hold();
      void current.request({ op: "close" }).catch(() => undefined);
      exits.push(current.exited);
    }
    return Promise.all(exits).then(() => undefined);
  }

  /** Does the collection hold enough vectors for an index? Remembered once it does. */
  private isLarge(collection: string): boolean {
    if (this.large.has(collection)) return true;
    const min = this.options.minRecords;
    if ((this.countAtLeast.get(collection, min) as number) < min) return false;
    this.large.add(collection);
    return true;
  }

  /** Sends a request to every shard's worker (starting them), answers in shard order. */
  private requestAll(body: Request): Promise<unknown[]> {
    const running = Array.from({ length: this.shards }, (_, shard) => this.start(shard));
    return Promise.all(running.map((to) => to.request(body)));
  }

  private start(shard: number): RunningWorker {
    const current = this.current[shard];
    if (current) return current;
    const data: AnnWorkerData = {
      file: this.db.name,
      options: { ...this.options, shard: { index: shard, count: this.shards } },
    };
    const running: RunningWorker = new RequestWorker(siblingModule(import.meta.url, "ann-worker"), {
      workerData: data,
      name: "vector index worker",
      error: (message) => new KnowledgeLayerError(message),
      onExit: () => {
        if (this.current[shard] === running) this.current[shard] = undefined;
      },
    });
    this.current[shard] = running;
    return running;
  }
}

/**
 * Default shard count: `$KL_ANN_SHARDS` (a whole number from 1 to 64), else 2 on a machine
 * with two or more cores (`cores`, default its available parallelism), else 1. Two shards
 * answer vector_only at 1M in ~0.75× the time of one graph (on the kept 1M `bench:scale`
 * KB, 2 cores: 19.7–20.2 against 25.7–26.7 ms p50 with the query's embedding, recall@10
 * 0.952 against 0.957), for more peak RSS while ingesting (one more thread, heap and
 * connection: the fresh 1M `bench:scale` ingest peaked at 2,037 MB, against 1,740–1,842 MB
 * with one graph in earlier runs; runs of the same code differ by ~100 MB).
 * @throws KnowledgeLayerError naming the variable when it is set to anything else.
 */
export function defaultShards(cores: number = availableParallelism()): number {
  const env = process.env.KL_ANN_SHARDS;
  if (env !== undefined && env !== "") {
    if (!/^[1-9]\d*$/.test(env) || Number(env) > 64)
      throw new KnowledgeLayerError(`$KL_ANN_SHARDS must be a whole number from 1 to 64, not "${env}"`);
    return Number(env);
  }
  return cores >= 2 ? 2 : 1;
}

/**
 * The `k` nearest of several shards' candidates (each best first), by index distance; ties
 * keep the lower shard first. The shards hold disjoint records, so nothing repeats.
 */
export function mergeCandidates(parts: readonly ScoredCandidates[], k: number): number[] {
  if (parts.length === 1) return (parts[0]?.keys ?? []).slice(0, k);
  const at = parts.map(() => 0);
  const out: number[] = [];
  while (out.length < k) {
    let best = -1;
    let bestDistance = Number.POSITIVE_INFINITY;
    for (let p = 0; p < parts.length; p++) {
      const part = parts[p] as ScoredCandidates;
      const i = at[p] as number;
      if (i < part.keys.length) {
        const d = part.distances[i] as number;
        if (best < 0 || d < bestDistance) {
          best = p;
          bestDistance = d;
        }
      }
    }
    if (best < 0) break;
    const part = parts[best] as ScoredCandidates;
    out.push(part.keys[at[best] as number] as number);
    at[best] = (at[best] as number) + 1;
  }
  return out;
}
