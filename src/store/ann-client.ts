/**
 * The approximate vector indexes of a database, run on a worker thread of their own
 * (`ann-worker.ts`, the same {@link AnnIndexes} class as in process). Two things run in
 * parallel then, on two cores: an index update after an ingest's commit with the main
 * thread's next writes (the worker reads the committed vectors through its own
 * connection), and a query's HNSW search with the keyword search of a hybrid query.
 *
 * The worker starts on the first request for a collection large enough to be indexed
 * (`minRecords`): small KBs never start it, so a one-off `kl search` on them pays nothing.
 * Requests are answered in order. Consistency is the log's, as in process: the worker
 * brings an index up to date with the log before every search. Writes that belong to the
 * caller's transaction (`onCreate`, `onDrop`) run on the caller's connection.
 *
 * An idle worker does not keep the process alive; one with requests in flight does.
 * {@link close} saves the indexes (what is not saved is replayed from the log next time).
 */
import { availableParallelism } from "node:os";
import type { Worker } from "node:worker_threads";
import { KnowledgeLayerError } from "../errors.js";
import { siblingModule, startModuleWorker } from "../workers/module-worker.js";
import { AnnIndexes, type AnnOptions, type Candidates, defaultAnnDir, loadUsearch } from "./ann-index.js";
import type { AnnRequest, AnnWorkerData } from "./ann-worker.js";
import type { Metric } from "./contract.js";
import type { Db } from "./database.js";

type Pending = { resolve: (value: unknown) => void; reject: (error: Error) => void };
type RunningWorker = {
  worker: Worker;
  pending: Map<number, Pending>;
  exited: Promise<void>;
  closing: boolean;
};
/** A request without its id (the client numbers them). */
type Request = AnnRequest extends infer R ? (R extends { id: number } ? Omit<R, "id"> : never) : never;

/** {@link AnnIndexes} behind a worker thread; see the module comment. */
export class AnnWorkerIndexes {
  /** In-process instance for the caller's transactional writes (creating and dropping collections). */
  private readonly local: AnnIndexes;
  private readonly options: AnnOptions & { minRecords: number };
  /** The running worker, its calls in flight and its end. */
  private current: RunningWorker | undefined;
  private nextId = 1;
  /** Collections known to hold at least `minRecords` vectors (they rarely shrink back). */
  private readonly large = new Set<string>();
  private readonly countAtLeast;

  constructor(
    private readonly db: Db,
    options: AnnOptions = {},
  ) {
    this.options = {
      ...options,
      minRecords: options.minRecords ?? (Number(process.env.KL_ANN_MIN_RECORDS) || 10_000),
      dir: options.dir === undefined ? defaultAnnDir(db) : options.dir,
      threads: options.threads ?? Math.max(1, availableParallelism()),
    };
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
    if (this.current) void this.request({ op: "forget", collection }).catch(() => undefined);
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
    const value = await this.request({
      op: "candidates",
      collection,
      dimension,
      metric,
      vector: Float32Array.from(vector),
      k,
      expansion,
      effort,
    });
    return (value as number[] | null) ?? undefined;
  }

  /**
   * Brings a collection's index up to date with the log and saves it when worthwhile, on the
   * worker; the promise settles when it is done (an ingest need not wait for it: a later
   * search waits in the worker's queue).
   */
  sync(collection: string, dimension: number, metric: Metric): Promise<void> {
    if (!this.isLarge(collection) || loadUsearch() === null) return Promise.resolve();
    return this.request({ op: "sync", collection, dimension, metric }).then(() => undefined);
  }

  /** Is an index loaded for this collection in the worker (tests, diagnostics)? */
  async isLoaded(collection: string): Promise<boolean> {
    if (!this.current) return false;
    return (await this.request({ op: "isLoaded", collection })) as boolean;
  }

  /** Vectors in the worker's loaded index of a collection, else undefined (tests, diagnostics). */
  async indexedCount(collection: string): Promise<number | undefined> {
    if (!this.current) return undefined;
    return ((await this.request({ op: "indexedCount", collection })) as number | null) ?? undefined;
  }

  /** Saves every index with enough unsaved changes (in the worker). */
  async saveAll(): Promise<void> {
    if (this.current) await this.request({ op: "saveAll" });
  }

  /**
   * Saves the indexes and ends the worker; resolves when it has (at once without one).
   * Later requests start a new worker.
   */
  close(): Promise<void> {
    const current = this.current;
    if (!current) return Promise.resolve();
    this.current = undefined;
    // Held (not unref'd) until it has exited, so a process awaiting this does not end first.
    current.closing = true;
    void this.send(current, { op: "close" }).catch(() => undefined);
    return current.exited;
  }

  /** Does the collection hold enough vectors for an index? Remembered once it does. */
  private isLarge(collection: string): boolean {
    if (this.large.has(collection)) return true;
    const min = this.options.minRecords;
    if ((this.countAtLeast.get(collection, min) as number) < min) return false;
    this.large.add(collection);
    return true;
  }

  private request(body: Request): Promise<unknown> {
    return this.send(this.start(), body);
  }

  private send(to: RunningWorker, body: Request): Promise<unknown> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      to.pending.set(id, { resolve, reject });
      if (to.pending.size === 1) to.worker.ref();
      to.worker.postMessage({ ...body, id });
    });
  }

  private start(): RunningWorker {
    if (this.current) return this.current;
    const data: AnnWorkerData = { file: this.db.name, options: this.options };
    const worker = startModuleWorker(siblingModule(import.meta.url, "ann-worker"), { workerData: data });
    worker.unref();
    const pending = new Map<number, Pending>();
    const running: RunningWorker = { worker, pending, exited: Promise.resolve(), closing: false };
    this.current = running;
    worker.on("message", (message: { id: number; value?: unknown; error?: string }) => {
      const call = pending.get(message.id);
      if (!call) return;
      pending.delete(message.id);
      if (pending.size === 0 && !running.closing) worker.unref();
      if (message.error !== undefined) call.reject(new KnowledgeLayerError(`vector index: ${message.error}`));
      else call.resolve(message.value);
    });
    const failAll = (error: Error): void => {
      for (const call of pending.values()) call.reject(error);
      pending.clear();
    };
    worker.on("error", (error) =>
      failAll(new KnowledgeLayerError(`vector index worker failed: ${error.message}`)),
    );
    const exited = new Promise<void>((resolve) => {
      worker.once("exit", () => {
        if (this.current === running) this.current = undefined;
        failAll(new KnowledgeLayerError("vector index worker exited"));
        resolve();
      });
    });
    running.exited = exited;
    return running;
  }
}
