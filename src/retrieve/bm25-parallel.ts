/**
 * Keyword search on two cores: a large KB's chunk ids are cut into two parts along segment
 * boundaries ({@link Bm25Index.searchParts}); a worker thread (`bm25-worker.ts`, its own
 * connection) searches one part while the calling thread searches the other, and the two
 * top-k lists are merged ({@link mergeBm25Hits}). Each part is scored with the whole KB's
 * statistics, so the merged top k is exactly the single-threaded search's (same scores, same
 * order). Document-partitioned search is how search engines spread one query over shards
 * (Barroso, Dean & Hölzle 2003, "Web search for a planet").
 *
 * One thread does it all when splitting cannot pay: a KB under `minChunks`, a metadata filter
 * (its allowed set stays on this thread), an in-memory database, a single core, segments that
 * cannot be cut, or a failed worker. When the two connections saw different states of the KB
 * (an ingest committed in between) the search runs again on this thread alone.
 *
 * The worker starts on the first search of a large KB, and searches stay on this thread until
 * it is ready (so a one-off search does not wait for a thread to start); an idle worker does
 * not keep the process alive. {@link close} ends it (it only reads, so it is terminated).
 */
import { availableParallelism } from "node:os";
import type { Statement } from "better-sqlite3";
import { KnowledgeLayerError } from "../errors.js";
import type { Db } from "../store/database.js";
import { siblingModule } from "../workers/module-worker.js";
import { RequestWorker } from "../workers/request-worker.js";
import { type Bm25Hit, type Bm25Index, type Bm25Params, mergeBm25Hits } from "./bm25.js";
import type { Bm25PartResult, Bm25Request, Bm25WorkerData } from "./bm25-worker.js";

/**
 * A non-negative integer from environment variable `name`, or undefined when it is unset or empty.
 * @throws KnowledgeLayerError naming the variable when it holds anything else.
 */
function envCount(name: string): number | undefined {
  const raw = process.env[name]?.trim();
  if (raw === undefined || raw === "") return undefined;
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(Number(raw))) {
    throw new KnowledgeLayerError(`$${name} must be a whole number of chunks (≥ 0), not "${raw}"`);
  }
  return Number(raw);
}

/** Options of a {@link ParallelBm25Search}. */
export interface ParallelBm25Options {
  /**
   * Chunks a KB needs before its searches are split (default `$KL_KEYWORD_PARALLEL_MIN_CHUNKS`,
   * else 200,000). Measured on `bench:scale` KBs, each query run split and single alternately in
   * one process: at 1M chunks the split search takes 0.57–0.63× the time; at 100k it gains
   * nothing (keyword p50 4.5 against 4.9 ms, hybrid p50 8.9 against 8.7 ms: the halves are too
   * short for the worker round trip and the second core, busy with the HNSW search in hybrid).
   */
  minChunks?: number;
  /**
   * Split at all (default: when the machine has ≥ 2 cores, the database is a file and
   * `$KL_KEYWORD_PARALLEL` is not `0`).
   */
  enabled?: boolean;
}

type RunningWorker = { client: RequestWorker<Omit<Bm25Request, "id">, Bm25PartResult>; ready: Int32Array };

/** See the module comment. */
export class ParallelBm25Search {
  private readonly minChunks: number;
  private readonly enabled: boolean;
  private current: RunningWorker | undefined;
  /** Searches answered by two threads (`split`) and by this one alone (`single`): diagnostics and tests. */
  readonly stats = { split: 0, single: 0 };
  /** Set after a worker failure: later searches stay on this thread. */
  private failed = false;
  private chunksOf: Statement | undefined;

  constructor(
    private readonly db: Db,
    private readonly bm25: Bm25Index,
    options: ParallelBm25Options = {},
  ) {
    this.minChunks = options.minChunks ?? envCount("KL_KEYWORD_PARALLEL_MIN_CHUNKS") ?? 200_000;
    this.enabled =
      options.enabled ??
      (process.env.KL_KEYWORD_PARALLEL !== "0" &&
        availableParallelism() >= 2 &&
        !db.memory &&
        db.name !== "");
  }

  /**
   * The best `topK` chunks of `kb` for `query`, as {@link Bm25Index.search} gives them. A half
   * that fails (in either thread) or a change of the KB between the halves makes it search again
   * on this thread alone.
   * @throws what {@link Bm25Index.search} throws.
   */
  async search(
    kb: string,
    query: string,
    topK: number,
    params: Bm25Params,
    allowed?: ReadonlySet<number>,
  ): Promise<Bm25Hit[]> {
    const parts = this.partsOf(kb, allowed);
    const worker = parts ? this.start() : undefined;
    if (!parts || !worker || Atomics.load(worker.ready, 0) !== 1) {
      this.stats.single++;
      return this.bm25.search(kb, query, topK, params, allowed);
    }
    const [mine, theirs] = parts;
    const remote = worker.client.request({ op: "search", kb, query, topK, params, part: theirs }).then(
      (value) => value,
      () => undefined,
    );
    let local: Bm25PartResult | undefined;
    try {
      local = this.bm25.searchPart(kb, query, topK, params, undefined, mine);
    } catch {
      // A merge committed since the parts were cut (the part now cuts a segment), or worse:
      // the single search below answers, or throws what it throws.
    }
    const other = await remote;
    if (!local || !other || other.state !== local.state) {
      this.stats.single++;
      return this.bm25.search(kb, query, topK, params, allowed);
    }
    this.stats.split++;
    return mergeBm25Hits([local.hits, other.hits], topK);
  }

  /**
   * Starts the worker if it is not running and resolves once it can take searches (a server
   * may call it at start so its first searches of a large KB are split too; {@link splits}
   * tells whether a KB is large enough for that).
   * @returns false when searches are not split here (disabled, or the worker failed).
   */
  async warm(): Promise<boolean> {
    if (!this.enabled || this.failed) return false;
    const running = this.start();
    while (Atomics.load(running.ready, 0) !== 1) {
      if (this.current !== running) return false;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    return true;
  }

  /** Ends the worker (it only reads: it is terminated); resolves when it has. */
  async close(): Promise<void> {
    const current = this.current;
    if (!current) return;
    this.current = undefined;
    await current.client.terminate();
  }

  /** The two id ranges of a split search of `kb`, or undefined to search on this thread. */
  private partsOf(kb: string, allowed: ReadonlySet<number> | undefined) {
    if (!this.enabled || this.failed || allowed !== undefined) return undefined;
    if (this.chunkCount(kb) < this.minChunks) return undefined;
    const parts = this.bm25.searchParts(kb, 2);
    return parts.length === 2 ? (parts as [(typeof parts)[0], (typeof parts)[0]]) : undefined;
  }

  /** Are keyword searches of `kb` (without a filter) split over two threads when the worker runs? */
  splits(kb: string): boolean {
    return this.enabled && !this.failed && this.chunkCount(kb) >= this.minChunks;
  }

  /** Chunks of `kb` in its keyword index (0 for an unknown KB). */
  private chunkCount(kb: string): number {
    this.chunksOf ??= this.db.prepare("SELECT chunks FROM kb_stats WHERE kb = ?").pluck();
    return (this.chunksOf.get(kb) as number | undefined) ?? 0;
  }

  private start(): RunningWorker {
    if (this.current) return this.current;
    const ready = new SharedArrayBuffer(4);
    const data: Bm25WorkerData = { file: this.db.name, ready };
    const running: RunningWorker = {
      client: new RequestWorker(siblingModule(import.meta.url, "bm25-worker"), {
        workerData: data,
        name: "keyword search worker",
        onFail: () => {
          this.failed = true;
        },
        onExit: () => {
          if (this.current === running) this.current = undefined;
        },
      }),
      ready: new Int32Array(ready),
    };
    this.current = running;
    return running;
  }
}
