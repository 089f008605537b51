import { randomUUID } from "node:crypto";
import {
  closeSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readdirSync,
  readSync,
  renameSync,
  rmSync,
  statSync,
} from "node:fs";
import { createRequire } from "node:module";
import { availableParallelism } from "node:os";
import { dirname, join } from "node:path";
import { KnowledgeLayerError } from "../errors.js";
import type { Metric } from "./contract.js";
import type { Db } from "./database.js";

/**
 * Approximate nearest-neighbour (HNSW) indexes for the embedded vector store, kept
 * beside `kl.db` and always derivable from the vectors stored in SQLite.
 *
 * Consistency. Triggers on `vec_records` append the rowid of every inserted,
 * replaced, updated or deleted record to `vec_ann_log`, in the same transaction as
 * the write, whoever the writer is. An index knows the last log sequence number it
 * has applied; before each search it applies the log entries after it (state-based
 * and idempotent: a rowid still stored in the collection is (re)inserted with its
 * current vector, any other is removed). An index file is named
 * `<generation>.<seq>.usearch`, so the file and the sequence it reflects are renamed
 * into place together; a crash between a vector commit and an index save only
 * leaves more log to replay on the next open. A collection gets a fresh generation
 * when it is (re)created, so files of a dropped collection are never loaded. When
 * the log a file needs has been pruned, the file is missing or unreadable, or the
 * loaded index's count differs from the stored rows, the index is rebuilt from
 * SQLite.
 *
 * Storage. Cosine collections are indexed with int8 quantisation (about a quarter of
 * the float32 vectors SQLite keeps); candidates are rescored exactly from SQLite, so
 * returned scores are the exact ones. Other metrics use float16.
 *
 * The native module (`usearch`, prebuilt binaries inside its npm package) is loaded
 * on first use; when it cannot be loaded, search stays exact and one warning is
 * logged.
 */

/** Minimal view of the `usearch` module this file uses. */
interface UsearchIndex {
  add(keys: BigUint64Array, vectors: Float32Array, threads?: number): void;
  search(vector: Float32Array, k: number, threads: number): { keys: BigUint64Array; distances: Float32Array };
  remove(keys: BigUint64Array): number | number[];
  contains(keys: bigint): boolean;
  size(): number;
  save(path: string): void;
  load(path: string): void;
}
export interface UsearchModule {
  Index: new (config: {
    dimensions: number;
    metric: string;
    quantization: string;
    connectivity: number;
    expansion_add: number;
    expansion_search: number;
    multi: boolean;
  }) => UsearchIndex;
}

let usearch: UsearchModule | null | undefined;
let requireUsearch = (): UsearchModule => createRequire(import.meta.url)("usearch") as UsearchModule;

/** Tests: replaces how the native module is loaded and forgets the loaded one. Returns the previous loader. */
export function setUsearchLoader(loader: () => UsearchModule): () => UsearchModule {
  const previous = requireUsearch;
  requireUsearch = loader;
  usearch = undefined;
  return previous;
}

/** Warning sink for a native-module load failure; replaceable in tests. */
export let annWarn: (message: string) => void = (message) => console.warn(message);
/** Replaces the warning sink (tests). Returns the previous one. */
export function setAnnWarn(fn: (message: string) => void): (message: string) => void {
  const previous = annWarn;
  annWarn = fn;
  return previous;
}

/** Loads `usearch` once; `null` (after one warning) when it is unavailable. */
export function loadUsearch(): UsearchModule | null {
  if (usearch !== undefined) return usearch;
  if (process.env.KL_ANN === "off") {
    usearch = null;
    return usearch;
  }
  try {
    usearch = requireUsearch();
  } catch (error) {
    usearch = null;
    annWarn(
      `knowledge-layer: the approximate vector index (usearch) could not be loaded, so vector search scans every vector: ${(error as Error).message}`,
    );
  }
  return usearch;
}

/**
 * The HNSW search list (ef) used for an index of `size` vectors when none is configured:
 * it grows with the square root of the size, between `floor` (the candidates wanted) and
 * {@link AUTO_EXPANSION_MAX}. HNSW needs a longer list as the graph grows (Malkov &
 * Yashunin 2018, sec. 4: search cost ~ ef · log N). On the hashed 512-d text vectors of
 * `bench:scale` (SciFact + Cranfield queries, graph degree 16, insert list 128, the
 * candidates rescored exactly), recall@10 against exact search reaches 0.95 at ef ≈ 205
 * for 10k, ≈ 750 for 100k and ≈ 2,050 for 1M; 2.5·√size (250 / 791 / 2,500) keeps it at
 * 0.95–0.97 at every size.
 */
export function autoExpansion(size: number, floor: number): number {
  return Math.max(floor, Math.min(AUTO_EXPANSION_MAX, Math.round(AUTO_EXPANSION_SCALE * Math.sqrt(size))));
}
/** A search effort as a factor: finite and positive, else 1. */
function effortOf(effort: number): number {
  return Number.isFinite(effort) && effort > 0 ? effort : 1;
}

/**
 * Default size threshold of the index: `$KL_ANN_MIN_RECORDS` (a whole number), else 10,000.
 * @throws KnowledgeLayerError naming the variable when it is set to anything else.
 */
export function defaultMinRecords(): number {
  const env = process.env.KL_ANN_MIN_RECORDS;
  if (env === undefined || env === "") return 10_000;
  if (!/^\d+$/.test(env))
    throw new KnowledgeLayerError(`$KL_ANN_MIN_RECORDS must be a whole number of vectors, not "${env}"`);
  return Number(env);
}

/** Upper bound of {@link autoExpansion}. */
export const AUTO_EXPANSION_MAX = 4000;
/** ef per √size of {@link autoExpansion}. */
export const AUTO_EXPANSION_SCALE = 2.5;

/** Tuning of the HNSW indexes. */
export interface AnnOptions {
  /** Collections with fewer records than this are searched exactly (default `$KL_ANN_MIN_RECORDS`, else 10,000). */
  minRecords?: number;
  /**
   * HNSW graph degree (default 16). With the insert list at 128, degree 16 reaches recall@10
   * ~0.95 at 1M hashed 512-d text vectors with a search list of 2,500, where degree 24 with
   * an insert list of 64 (the default before) needed ~3,300: both built in memory and timed
   * in one window, 42 ms against 49 ms p50 per query. At 100k, degree 12 or 24 cost as much
   * or more at equal recall (`bench/ann-recall.ts --rebuild-with connectivity:expansionAdd`).
   */
  connectivity?: number;
  /**
   * Candidate list size while inserting (default 128: a better graph, so searches need a
   * shorter list — at 100k, recall@10 at search list 1,044 is 0.954 against 0.934 with 64;
   * inserting costs ~1.3× more CPU).
   */
  expansionAdd?: number;
  /**
   * Candidate list size while searching; default {@link autoExpansion} of the index size
   * (a fixed 1,000 before: more than small indexes need for recall ≥ 0.95).
   */
  expansionSearch?: number;
  /**
   * Candidates fetched per wanted hit before exact rescoring (default 4, at least 40; with a
   * filter 10, at least 200, so that enough candidates pass it without a second search).
   * The search list is {@link autoExpansion}, far longer than the candidates, so the int8
   * order of its head is already good: at 100k hashed 512-d text vectors (ef 1,044),
   * candidate recall@10 is 0.872 with 10 candidates and 0.929 with 20, 40, 80 or 200
   * (`.probe`-style measurement, SciFact queries); each rescored candidate is a row read
   * from SQLite (~200 of them cost 5–16 ms at 1M).
   */
  oversample?: number;
  /** Directory of index files; default `kl-ann` beside the database file, none for an in-memory database. */
  dir?: string | null;
  /** Threads for index building (default: available parallelism). */
  threads?: number;
  /**
   * The part of each collection this instance indexes: the records whose rowid modulo
   * `count` is `index` (default: all of them). {@link AnnWorkerIndexes} runs one worker per
   * part (shard), so one query's HNSW searches run on several cores at once; each part has
   * its own files (`<generation>.<seq>.<bytes>.s<index>of<count>.usearch`).
   */
  shard?: AnnShard;
  /**
   * Shards per collection of {@link AnnWorkerIndexes} (default `$KL_ANN_SHARDS`, else 2 on a
   * machine with two or more cores, else 1: see `defaultShards` in `ann-client.ts`). Two
   * 500k-vector graphs searched on two threads answer in ~0.6× the time of one 1M graph at
   * equal recall@10 (0.95; `bench:scale` vectors), a whole vector_only search in ~0.75–0.8×;
   * the second worker costs peak RSS (1M ingest: 2,037 MB against 1,740–1,842 with one graph).
   */
  shards?: number;
  /**
   * On close, an index with at least this many changes since its last save is saved, even
   * under the threshold of saves while running (1,000 records or 10% of the index, at most
   * 50,000): a process that ends leaves its changes to every later process to replay on
   * open, and replaying costs more than saving from a few thousand records up (at 1M
   * vectors, 15,000 replayed inserts took ~5.7 s of one core; writing the 650 MB file takes
   * ~1–2 s). Default 5,000.
   */
  saveOnCloseAfter?: number;
  /**
   * How far (in log entries) the log may move past the newest files of another split of a
   * collection's index (another process's shard count) before they are removed (default
   * 200,000). While they are recent, the log is kept for them too.
   */
  otherSplitEntries?: number;
  /**
   * Run the indexes on a worker thread (`ann-client.ts`; default for a database in a file,
   * unless `$KL_ANN_WORKER` is `0`), so index updates and HNSW searches overlap with the
   * main thread's work. `false` keeps them in process (synchronous).
   */
  worker?: boolean;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS vec_ann_log (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  collection TEXT NOT NULL,
  record INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS vec_ann_log_collection ON vec_ann_log (collection, seq);
CREATE TABLE IF NOT EXISTS vec_ann_state (
  collection TEXT PRIMARY KEY,
  generation TEXT NOT NULL,
  pruned_through INTEGER NOT NULL DEFAULT 0
);
CREATE TRIGGER IF NOT EXISTS vec_ann_replace BEFORE INSERT ON vec_records BEGIN
  INSERT INTO vec_ann_log (collection, record)
    SELECT collection, rowid FROM vec_records WHERE collection = NEW.collection AND id = NEW.id;
END;
CREATE TRIGGER IF NOT EXISTS vec_ann_insert AFTER INSERT ON vec_records BEGIN
  INSERT INTO vec_ann_log (collection, record) VALUES (NEW.collection, NEW.rowid);
END;
CREATE TRIGGER IF NOT EXISTS vec_ann_update AFTER UPDATE OF vector ON vec_records BEGIN
  INSERT INTO vec_ann_log (collection, record) VALUES (NEW.collection, NEW.rowid);
END;
CREATE TRIGGER IF NOT EXISTS vec_ann_delete AFTER DELETE ON vec_records
  WHEN EXISTS (SELECT 1 FROM vec_collections WHERE name = OLD.collection) BEGIN
  INSERT INTO vec_ann_log (collection, record) VALUES (OLD.collection, OLD.rowid);
END;
`;

/** Creates the log table, state table and triggers unless present (no write lock when they are). */
export function ensureAnnSchema(db: Db): void {
  const have = db
    .prepare(
      "SELECT count(*) AS n FROM sqlite_master WHERE name IN ('vec_ann_log', 'vec_ann_state', 'vec_ann_replace', 'vec_ann_insert', 'vec_ann_update', 'vec_ann_delete')",
    )
    .get() as { n: number };
  if (have.n < 6) db.exec(SCHEMA);
}

/** Default index directory of a database: `kl-ann` beside the file; none in memory. */
export function defaultAnnDir(db: Db): string | null {
  const file = db.name;
  if (!file || file === ":memory:" || db.memory) return null;
  return join(dirname(file), "kl-ann");
}

/** A part of a collection's records: rowid modulo `count` equals `index` (0 ≤ index < count). */
export interface AnnShard {
  index: number;
  count: number;
}

interface Loaded {
  generation: string;
  index: UsearchIndex;
  /** Last log sequence applied. */
  seq: number;
  /** Sequence of the file this index was loaded from or last saved to (-1 when none). */
  savedSeq: number;
  /** Records removed since the index was built (tombstones). */
  removed: number;
  /** Records changed since the last save (what a reopen would replay). */
  pending: number;
  dimension: number;
}

/** Result of {@link AnnIndexes.candidates}: rowids best first, or `undefined` to search exactly. */
export type Candidates = number[] | undefined;

/** Candidates with their index distances (smaller is nearer), best first. */
export interface ScoredCandidates {
  keys: number[];
  distances: number[];
}

/** An index file: `<generation>.<seq>.<bytes>[.s<index>of<count>].usearch`. */
interface IndexFile {
  path: string;
  seq: number;
  size: number;
  /** The shard it holds (`{0, 1}`: the whole collection, a name without the tag). */
  shard: AnnShard;
}

const FILE_NAME = /^([0-9a-f-]+)\.(\d+)\.(\d+)(?:\.s(\d+)of(\d+))?\.usearch$/;
const WHOLE: AnnShard = { index: 0, count: 1 };

/** The shard tag of an index file name (empty for a whole collection). */
function shardTag(shard: AnnShard): string {
  return shard.count > 1 ? `.s${shard.index}of${shard.count}` : "";
}

/**
 * Cheap checks before handing a file to the native loader, which does not survive
 * every malformed file: the byte size recorded in its name, and the vector-matrix
 * header (rows, bytes per row) it starts with.
 */
function plausibleFile(file: IndexFile, dimension: number, metric: Metric): boolean {
  try {
    if (statSync(file.path).size !== file.size || file.size < 8) return false;
    const header = Buffer.alloc(8);
    const fd = openSync(file.path, "r");
    try {
      if (readSync(fd, header, 0, 8, 0) !== 8) return false;
    } finally {
      closeSync(fd);
    }
    const rows = header.readUInt32LE(0);
    const bytesPerRow = header.readUInt32LE(4);
    const expected = metric === "cosine" ? dimension : dimension * 2;
    return bytesPerRow === expected && 8 + rows * bytesPerRow <= file.size;
  } catch {
    return false;
  }
}

/** The HNSW indexes of one database's collections. */
export class AnnIndexes {
  private readonly loaded = new Map<string, Loaded>();
  private readonly opts: Required<Omit<AnnOptions, "dir" | "expansionSearch" | "worker" | "shards">> & {
    dir: string | null;
    expansionSearch: number | undefined;
  };

  constructor(
    private readonly db: Db,
    options: AnnOptions = {},
  ) {
    this.opts = {
      minRecords: options.minRecords ?? defaultMinRecords(),
      connectivity: options.connectivity ?? 16,
      expansionAdd: options.expansionAdd ?? 128,
      expansionSearch: options.expansionSearch,
      oversample: options.oversample ?? 4,
      threads: options.threads ?? Math.max(1, availableParallelism()),
      dir: options.dir === undefined ? defaultAnnDir(db) : options.dir,
      shard: options.shard ?? WHOLE,
      otherSplitEntries: options.otherSplitEntries ?? 200_000,
      saveOnCloseAfter: options.saveOnCloseAfter ?? 5000,
    };
    const { index, count } = this.opts.shard;
    if (!(Number.isInteger(count) && count >= 1 && Number.isInteger(index) && index >= 0 && index < count))
      throw new RangeError(`vector index shard ${index} of ${count}: need 0 ≤ index < count`);
  }

  /** Does this instance index the record with this rowid (its shard's)? */
  private mine(rowid: number): boolean {
    return rowid % this.opts.shard.count === this.opts.shard.index;
  }

  /** Vectors of the collection in this instance's shard (all of them for a whole collection). */
  private shardCount(collection: string): number {
    const { index, count } = this.opts.shard;
    const row = (
      count === 1
        ? this.db.prepare("SELECT count(*) AS n FROM vec_records WHERE collection = ?").get(collection)
        : this.db
            .prepare("SELECT count(*) AS n FROM vec_records WHERE collection = ? AND rowid % ? = ?")
            .get(collection, count, index)
    ) as { n: number };
    return row.n;
  }

  /** Number of candidates to fetch for `topK` hits (more when a filter will drop some, see {@link AnnOptions.oversample}). */
  candidateCount(topK: number, filtered = false): number {
    return filtered
      ? Math.max(200, Math.ceil(topK * Math.max(10, this.opts.oversample)))
      : Math.max(40, Math.ceil(topK * this.opts.oversample));
  }

  /** Called in the transaction that creates a collection: gives it a fresh generation. */
  onCreate(collection: string): void {
    this.db
      .prepare(
        "INSERT INTO vec_ann_state (collection, generation, pruned_through) VALUES (?, ?, 0) ON CONFLICT (collection) DO UPDATE SET generation = excluded.generation, pruned_through = 0",
      )
      .run(collection, randomUUID());
  }

  /** Called in the transaction that drops a collection (after its `vec_collections` row is gone). */
  onDrop(collection: string): void {
    const state = this.state(collection);
    this.db.prepare("DELETE FROM vec_ann_log WHERE collection = ?").run(collection);
    this.db.prepare("DELETE FROM vec_ann_state WHERE collection = ?").run(collection);
    this.loaded.delete(collection);
    if (state) this.removeFiles(state.generation);
  }

  /**
   * Nearest-neighbour candidates (rowids) for `vector`, after bringing the index up
   * to date with the log; `undefined` when the collection is small enough (or the
   * native module unavailable) that an exact scan should be used instead. The search
   * list is `expansion` when given, else the configured or automatic one times `effort`
   * (default 1), at least `k`.
   */
  candidates(
    collection: string,
    dimension: number,
    metric: Metric,
    vector: Float32Array,
    k: number,
    expansion?: number,
    effort = 1,
  ): Candidates {
    return this.scoredCandidates(collection, dimension, metric, vector, k, expansion, effort)?.keys;
  }

  /**
   * As {@link candidates}, with each candidate's distance in the index (int8 cosine
   * distance for cosine collections: smaller is nearer), so the candidates of several
   * shards can be merged. The search list of a shard is chosen for the shard's size.
   */
  scoredCandidates(
    collection: string,
    dimension: number,
    metric: Metric,
    vector: Float32Array,
    k: number,
    expansion?: number,
    effort = 1,
  ): ScoredCandidates | undefined {
    const loaded = this.ready(collection, dimension, metric);
    if (!loaded) return undefined;
    const size = loaded.index.size();
    // A whole collection that shrank under the threshold is scanned exactly. A shard does not
    // decide alone (shards are rarely of equal size, and one refusal sends the query to a scan).
    if (this.opts.shard.count === 1 && size < this.opts.minRecords) return undefined;
    const keys: number[] = [];
    const distances: number[] = [];
    if (size === 0) return { keys, distances };
    // usearch searches a list of max(expansion_search, wanted) entries, and the index is built
    // with a short one, so asking for ef results is the search list of this query.
    const ef =
      expansion ?? Math.round((this.opts.expansionSearch ?? autoExpansion(size, k)) * effortOf(effort));
    const result = loaded.index.search(vector, Math.min(Math.max(k, ef), size), 1);
    for (let i = 0; i < result.keys.length && keys.length < k; i++) {
      const n = Number(result.keys[i]);
      if (n >= 0 && n < Number.MAX_SAFE_INTEGER) {
        keys.push(n);
        distances.push(result.distances[i] ?? Number.POSITIVE_INFINITY);
      }
    }
    return { keys, distances };
  }

  /** The search list (ef) a query of `k` candidates uses on an index of `size` vectors. */
  expansionFor(size: number, k: number): number {
    return this.opts.expansionSearch ?? autoExpansion(size, k);
  }

  /**
   * Brings a collection's index up to date (building it when the collection has
   * reached the size threshold) and saves it. Call after a large ingest so the
   * first search does not pay for indexing.
   * @returns true when searches of the collection use the index (it has at least
   *   `minRecords` vectors), false when they scan exactly.
   */
  sync(collection: string, dimension: number, metric: Metric): boolean {
    const loaded = this.ready(collection, dimension, metric);
    if (loaded && this.worthSaving(loaded)) this.save(collection, loaded);
    return loaded !== undefined;
  }

  /**
   * Saving rewrites the whole file, so changes stay in the log (replayed on the next open)
   * until they add up to 1,000 records or 10% of the index, at most 50,000 (what a reopen
   * replays). With 2%, a million vectors ingested a few hundred at a time rewrote the file
   * ~230 times (~70 GB); with 10% it is ~40 times up to 500k, then every 50,000 records.
   */
  private worthSaving(loaded: Loaded, closing = false): boolean {
    if (loaded.seq === loaded.savedSeq) return false;
    const running = Math.max(1000, Math.min(50_000, loaded.index.size() * 0.1));
    const threshold = closing ? Math.min(running, this.opts.saveOnCloseAfter) : running;
    return loaded.savedSeq < 0 || loaded.pending >= threshold;
  }

  /**
   * Saves every index with enough unsaved changes (see {@link worthSaving}; with `closing`,
   * also those with `saveOnCloseAfter` changes or more) and unloads them.
   */
  saveAll(closing = false): void {
    for (const [collection, loaded] of this.loaded) {
      if (this.worthSaving(loaded, closing)) {
        try {
          this.save(collection, loaded);
        } catch {
          // The log still holds what the file lacks; the next open replays it.
        }
      }
    }
    this.loaded.clear();
  }

  /** Vectors in the loaded index of a collection (after the last search or sync), else undefined (tests, diagnostics). */
  indexedCount(collection: string): number | undefined {
    return this.loaded.get(collection)?.index.size();
  }

  /** Lets go of a collection's loaded index (a dropped collection); its files stay as they are. */
  forget(collection: string): void {
    this.loaded.delete(collection);
  }

  /** Is an in-memory index loaded for this collection (tests, diagnostics)? */
  isLoaded(collection: string): boolean {
    return this.loaded.has(collection);
  }

  private state(collection: string): { generation: string; pruned_through: number } | undefined {
    return this.db
      .prepare("SELECT generation, pruned_through FROM vec_ann_state WHERE collection = ?")
      .get(collection) as { generation: string; pruned_through: number } | undefined;
  }

  /** The up-to-date index of a collection, or undefined (small collection, no native module). */
  private ready(collection: string, dimension: number, metric: Metric): Loaded | undefined {
    let loaded = this.loaded.get(collection);
    let state = this.state(collection);
    if (loaded && (!state || state.generation !== loaded.generation || loaded.seq < state.pruned_through)) {
      // Dropped and re-created, or another process pruned log entries this index still needs.
      this.loaded.delete(collection);
      loaded = undefined;
    }
    if (!loaded) {
      const count = (
        this.db.prepare("SELECT count(*) AS n FROM vec_records WHERE collection = ?").get(collection) as {
          n: number;
        }
      ).n;
      if (count < this.opts.minRecords) return undefined;
      const lib = loadUsearch();
      if (!lib) return undefined;
      if (!state) {
        // A collection stored before it had a state row. The other shards' workers may be
        // doing the same: the first generation written wins.
        this.db
          .prepare(
            "INSERT INTO vec_ann_state (collection, generation, pruned_through) VALUES (?, ?, 0) ON CONFLICT (collection) DO NOTHING",
          )
          .run(collection, randomUUID());
        state = this.state(collection);
        if (!state) return undefined;
      }
      loaded = this.open(lib, collection, state, dimension, metric);
      this.loaded.set(collection, loaded);
    }
    this.catchUp(collection, loaded);
    if (loaded.removed > Math.max(1000, loaded.index.size() * 0.25)) {
      // Too many tombstones degrade the graph: rebuild.
      const lib = loadUsearch();
      if (lib) {
        loaded = this.build(lib, collection, loaded.generation, dimension, metric);
        this.loaded.set(collection, loaded);
      }
    }
    return loaded;
  }

  private newIndex(lib: UsearchModule, dimension: number, metric: Metric): UsearchIndex {
    return new lib.Index({
      dimensions: dimension,
      metric: metric === "cosine" ? "cos" : metric === "dot" ? "ip" : "l2sq",
      quantization: metric === "cosine" ? "i8" : "f16",
      connectivity: this.opts.connectivity,
      expansion_add: this.opts.expansionAdd,
      // The search list is chosen per query (see candidates); this is only its floor.
      expansion_search: 16,
      multi: false,
    });
  }

  /** Loads the newest usable file of this generation and checks it, else builds from SQLite. */
  private open(
    lib: UsearchModule,
    collection: string,
    state: { generation: string; pruned_through: number },
    dimension: number,
    metric: Metric,
  ): Loaded {
    const file = this.newestFile(state.generation);
    if (file && file.seq >= state.pruned_through && plausibleFile(file, dimension, metric)) {
      try {
        const index = this.newIndex(lib, dimension, metric);
        index.load(file.path);
        const loaded: Loaded = {
          generation: state.generation,
          index,
          seq: file.seq,
          savedSeq: file.seq,
          removed: 0,
          pending: 0,
          dimension,
        };
        this.catchUp(collection, loaded);
        if (index.size() === this.shardCount(collection)) return loaded;
      } catch {
        // Unreadable or wrong shape: rebuild below.
      }
    }
    const built = this.build(lib, collection, state.generation, dimension, metric);
    this.save(collection, built);
    return built;
  }

  /** Builds an index from every stored vector of the collection. */
  private build(
    lib: UsearchModule,
    collection: string,
    generation: string,
    dimension: number,
    metric: Metric,
  ): Loaded {
    const index = this.newIndex(lib, dimension, metric);
    let seq = 0;
    const batch = 4096;
    const keys = new BigUint64Array(batch);
    const vectors = new Float32Array(batch * dimension);
    this.db.transaction(() => {
      seq = this.maxSeq();
      let n = 0;
      const flush = (): void => {
        if (n === 0) return;
        index.add(keys.subarray(0, n), vectors.subarray(0, n * dimension), this.addThreads());
        n = 0;
      };
      const rows = this.db
        .prepare("SELECT rowid AS r, vector FROM vec_records WHERE collection = ?")
        .raw()
        .iterate(collection) as IterableIterator<[number, Buffer]>;
      for (const [rowid, blob] of rows) {
        if (blob.byteLength !== dimension * 4 || !this.mine(rowid)) continue;
        keys[n] = BigInt(rowid);
        vectors.set(new Float32Array(blob.buffer, blob.byteOffset, dimension), n * dimension);
        n++;
        if (n === batch) flush();
      }
      flush();
    })();
    return { generation, index, seq, savedSeq: -1, removed: 0, pending: index.size(), dimension };
  }

  /**
   * The last log sequence number ever given out: the log's largest, or, once pruning has
   * emptied it, AUTOINCREMENT's record of it (`sqlite_sequence`). An index built from the
   * stored vectors reflects everything up to it; `max(seq)` of an emptied log would be 0, below
   * `pruned_through`, and such an index would be rebuilt by every search.
   */
  private maxSeq(): number {
    return (
      this.db
        .prepare(
          "SELECT max(coalesce((SELECT max(seq) FROM vec_ann_log), 0), coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'vec_ann_log'), 0)) AS s",
        )
        .get() as { s: number }
    ).s;
  }

  /** Applies the log entries after `loaded.seq` (idempotent, state-based). */
  private catchUp(collection: string, loaded: Loaded): void {
    const log = this.db
      .prepare("SELECT seq, record FROM vec_ann_log WHERE collection = ? AND seq > ? ORDER BY seq")
      .raw()
      .all(collection, loaded.seq) as [number, number][];
    if (log.length === 0) return;
    const records = new Set<number>();
    let last = loaded.seq;
    for (const [seq, record] of log) {
      if (this.mine(record)) records.add(record);
      last = seq;
    }
    const one = this.db.prepare("SELECT vector FROM vec_records WHERE rowid = ? AND collection = ?").pluck();
    const index = loaded.index;
    const dimension = loaded.dimension;
    const batch = 4096;
    const keys = new BigUint64Array(batch);
    const matrix = new Float32Array(batch * dimension);
    let n = 0;
    const flush = (): void => {
      if (n === 0) return;
      index.add(keys.subarray(0, n), matrix.subarray(0, n * dimension), n > 64 ? this.addThreads() : 1);
      n = 0;
    };
    for (const record of records) {
      const key = BigInt(record);
      if (index.contains(key)) {
        index.remove(BigUint64Array.of(key));
        loaded.removed++;
      }
      const blob = one.get(record, collection) as Buffer | undefined;
      if (blob && blob.byteLength === dimension * 4) {
        keys[n] = key;
        matrix.set(new Float32Array(blob.buffer, blob.byteOffset, dimension), n * dimension);
        n++;
        if (n === batch) flush();
      }
    }
    flush();
    loaded.seq = last;
    loaded.pending += records.size;
    // Persist big catch-ups (a bulk ingest) so a crash does not replay them again.
    if (loaded.seq > loaded.savedSeq && records.size >= Math.max(this.opts.minRecords, index.size() / 2)) {
      try {
        this.save(collection, loaded);
      } catch {
        // The log still covers it.
      }
    }
  }

  /** Writes the index atomically as `<generation>.<seq>.usearch` and prunes the log it covers. */
  private save(collection: string, loaded: Loaded): void {
    const dir = this.opts.dir;
    if (!dir || loaded.seq === loaded.savedSeq) return;
    mkdirSync(dir, { recursive: true });
    const tmp = join(dir, `${loaded.generation}.${loaded.seq}.${process.pid}.${randomUUID()}.tmp`);
    loaded.index.save(tmp);
    const size = statSync(tmp).size;
    const fd = openSync(tmp, "r+");
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    const mine = this.opts.shard;
    renameSync(tmp, join(dir, `${loaded.generation}.${loaded.seq}.${size}${shardTag(mine)}.usearch`));
    loaded.savedSeq = loaded.seq;
    loaded.pending = 0;
    // Older files of this shard go. Files of another split of this generation (a process with
    // another shard count) stay while they are recent and hold the pruning back, so two such
    // processes do not make each other rebuild; once the log is `otherSplitEntries` past them
    // (that process is gone, or they are an earlier release's single file) they go, and a
    // process that still used them rebuilds.
    const newest = new Map<string, { count: number; seq: number; files: string[] }>();
    for (const file of this.files(loaded.generation)) {
      if (file.shard.count === mine.count && file.shard.index === mine.index && file.seq < loaded.seq) {
        rmSync(file.path, { force: true });
        continue;
      }
      const key = `${file.shard.index}/${file.shard.count}`;
      const entry = newest.get(key) ?? { count: file.shard.count, seq: -1, files: [] };
      entry.seq = Math.max(entry.seq, file.seq);
      entry.files.push(file.path);
      newest.set(key, entry);
    }
    const stale = new Set<number>();
    for (const entry of newest.values())
      if (entry.count !== mine.count && loaded.seq - entry.seq > this.opts.otherSplitEntries)
        stale.add(entry.count);
    for (const [key, entry] of newest) {
      if (!stale.has(entry.count)) continue;
      for (const path of entry.files) rmSync(path, { force: true });
      newest.delete(key);
    }
    this.collectGarbage();
    // Only entries every shard's newest file covers may go; a process behind reloads the files.
    const ours = [...newest.values()].filter((entry) => entry.count === mine.count).length;
    if (ours < mine.count) return;
    const through = Math.min(...[...newest.values()].map((entry) => entry.seq));
    this.db
      .transaction(() => {
        const state = this.state(collection);
        if (!state || state.generation !== loaded.generation) return;
        this.db.prepare("DELETE FROM vec_ann_log WHERE collection = ? AND seq <= ?").run(collection, through);
        this.db
          .prepare("UPDATE vec_ann_state SET pruned_through = max(pruned_through, ?) WHERE collection = ?")
          .run(through, collection);
      })
      .immediate();
  }

  /** Threads of a batch insert: the configured ones shared among the shards. */
  private addThreads(): number {
    return Math.max(1, Math.floor(this.opts.threads / this.opts.shard.count));
  }

  private files(generation: string): IndexFile[] {
    const dir = this.opts.dir;
    if (!dir) return [];
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      return [];
    }
    const out: IndexFile[] = [];
    for (const name of names) {
      const m = FILE_NAME.exec(name);
      if (m && m[1] === generation) {
        const shard = m[4] === undefined ? WHOLE : { index: Number(m[4]), count: Number(m[5]) };
        out.push({ path: join(dir, name), seq: Number(m[2]), size: Number(m[3]), shard });
      }
    }
    return out;
  }

  /** The newest file of this instance's shard of a generation. */
  private newestFile(generation: string): IndexFile | undefined {
    const { index, count } = this.opts.shard;
    return this.files(generation)
      .filter((file) => file.shard.index === index && file.shard.count === count)
      .sort((a, b) => b.seq - a.seq)[0];
  }

  private removeFiles(generation: string): void {
    for (const file of this.files(generation)) rmSync(file.path, { force: true });
  }

  /** Removes index files of generations no collection has (dropped collections, crashed saves). */
  private collectGarbage(): void {
    const dir = this.opts.dir;
    if (!dir) return;
    const live = new Set(
      (this.db.prepare("SELECT generation FROM vec_ann_state").pluck().all() as string[]).map(String),
    );
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      return;
    }
    for (const name of names) {
      const m = FILE_NAME.exec(name) ?? /^([0-9a-f-]+)\..*\.tmp$/.exec(name);
      if (m?.[1] && !live.has(m[1])) rmSync(join(dir, name), { force: true });
    }
  }
}
