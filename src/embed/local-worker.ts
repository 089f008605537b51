import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";

/**
 * Worker-thread code that runs a sentence-transformers style model with
 * transformers.js (onnxruntime-node): tokenise (padding, truncation to
 * `maxLength`), run the model, pool the token vectors (`mean` over the
 * attention mask or the `cls` token; a model that already outputs
 * `sentence_embedding` is used as is) and L2-normalise. Plain JavaScript
 * evaluated by `new Worker(code, { eval: true })`, so the same code runs
 * whether the library is used from its TypeScript sources or from `dist/`
 * (as ./worker-pool.ts does). Messages are handled one at a time.
 */
const WORKER_SOURCE = `
const { parentPort, workerData, threadId } = require("node:worker_threads");
const o = workerData.options;
const message = (e) => (e && e.message) || String(e);
let lib;
const ready = (async () => {
  lib = require(workerData.transformers);
  lib.env.allowRemoteModels = o.allowRemote;
  lib.env.allowLocalModels = true;
  const common = o.localOnly ? { local_files_only: true } : {};
  let tokenizer, model;
  try {
    tokenizer = await lib.AutoTokenizer.from_pretrained(o.location, common);
  } catch (e) {
    throw new Error("cannot load the tokenizer of " + o.where + o.hint + ": " + message(e));
  }
  try {
    model = await lib.AutoModel.from_pretrained(o.location, {
      ...common,
      dtype: o.dtype,
      device: "cpu",
      session_options: o.threads ? { intraOpNumThreads: o.threads } : {},
    });
  } catch (e) {
    throw new Error("cannot load the model of " + o.where + o.hint + ": " + message(e));
  }
  const config = model.config || {};
  const caps = [o.maxLength, tokenizer.model_max_length, config.max_position_embeddings].filter(
    (x) => typeof x === "number" && Number.isFinite(x) && x > 0,
  );
  const hidden = typeof config.hidden_size === "number" ? config.hidden_size
    : typeof config.d_model === "number" ? config.d_model : undefined;
  return {
    tokenizer,
    model,
    maxLength: Math.max(2, caps.length > 0 ? Math.min(...caps) : 512),
    hidden,
    empty: tokenizer("", { return_tensor: false }).input_ids,
    padId: typeof tokenizer.pad_token_id === "number" ? tokenizer.pad_token_id : 0,
    padLeft: tokenizer.padding_side === "left",
  };
})();
ready.catch(() => undefined);

function normalise(data, offset, dim) {
  let sum = 0;
  for (let d = 0; d < dim; d++) sum += data[offset + d] * data[offset + d];
  const norm = Math.sqrt(sum);
  if (norm > 0) for (let d = 0; d < dim; d++) data[offset + d] /= norm;
}

/**
 * Encodes one text with the model's template ([CLS] … [SEP], <s> … </s>) and,
 * when it is longer than maxLength, cuts its content tokens from the end while
 * keeping the template's closing special tokens, as Hugging Face tokenizers'
 * truncation does (transformers.js would cut the closing token off).
 */
function encodeText(m, text) {
  const e = m.tokenizer(text, { return_tensor: false, return_token_type_ids: true });
  const ids = e.input_ids;
  if (ids.length <= m.maxLength) return e;
  const empty = m.empty;
  let tail = 0;
  for (let k = Math.min(empty.length, ids.length); k >= 0; k--) {
    let ok = true;
    for (let i = 0; ok && i < k; i++) ok = empty[empty.length - k + i] === ids[ids.length - k + i];
    for (let i = 0; ok && i < empty.length - k; i++) ok = empty[i] === ids[i];
    if (ok) { tail = k; break; }
  }
  tail = Math.min(tail, m.maxLength - 1);
  const cut = (xs) => (xs ? xs.slice(0, m.maxLength - tail).concat(tail > 0 ? xs.slice(xs.length - tail) : []) : xs);
  return { input_ids: cut(ids), attention_mask: cut(e.attention_mask), token_type_ids: cut(e.token_type_ids) };
}

async function embed(texts) {
  const m = await ready;
  const rows = texts.map((t) => encodeText(m, t));
  const width = Math.max(...rows.map((r) => r.input_ids.length));
  const size = rows.length * width;
  const ids = new BigInt64Array(size).fill(BigInt(m.padId));
  const mask = new BigInt64Array(size);
  const types = new BigInt64Array(size);
  const withTypes = rows.every((r) => Array.isArray(r.token_type_ids));
  rows.forEach((r, row) => {
    const offset = row * width + (m.padLeft ? width - r.input_ids.length : 0);
    for (let t = 0; t < r.input_ids.length; t++) {
      ids[offset + t] = BigInt(r.input_ids[t]);
      mask[offset + t] = BigInt(r.attention_mask[t]);
      if (withTypes) types[offset + t] = BigInt(r.token_type_ids[t]);
    }
  });
  const dims = [rows.length, width];
  const enc = { input_ids: new lib.Tensor("int64", ids, dims), attention_mask: new lib.Tensor("int64", mask, dims) };
  if (withTypes) enc.token_type_ids = new lib.Tensor("int64", types, dims);
  const out = await m.model(enc);
  const n = texts.length;
  const pooled = out.sentence_embedding;
  if (pooled && pooled.dims.length === 2 && pooled.dims[0] === n) {
    const dim = pooled.dims[1];
    const data = Float32Array.from(pooled.data);
    for (let r = 0; r < n; r++) normalise(data, r * dim, dim);
    return { data, dim };
  }
  let hidden = out.last_hidden_state || out.token_embeddings;
  if (!hidden) hidden = Object.values(out).find((t) => t && t.dims && t.dims.length === 3);
  if (!hidden || hidden.dims.length !== 3 || hidden.dims[0] !== n) {
    const got = Object.entries(out).map(([k, t]) => k + " [" + ((t && t.dims) || []).join(", ") + "]").join(", ");
    throw new Error("the model returned no token vectors [batch, tokens, hidden] (outputs: " + got + ")");
  }
  const [, seq, dim] = hidden.dims;
  const h = hidden.data;
  const data = new Float32Array(n * dim);
  for (let r = 0; r < n; r++) {
    const o2 = r * dim;
    if (o.pooling === "cls") {
      let first = 0;
      while (first < seq - 1 && Number(mask[r * seq + first]) === 0) first++;
      const base = (r * seq + first) * dim;
      for (let d = 0; d < dim; d++) data[o2 + d] = h[base + d];
    } else {
      let count = 0;
      for (let s = 0; s < seq; s++) {
        if (Number(mask[r * seq + s]) === 0) continue;
        count++;
        const base = (r * seq + s) * dim;
        for (let d = 0; d < dim; d++) data[o2 + d] += h[base + d];
      }
      if (count > 0) for (let d = 0; d < dim; d++) data[o2 + d] /= count;
    }
    normalise(data, o2, dim);
  }
  return { data, dim };
}

let chain = Promise.resolve();
parentPort.on("message", (msg) => {
  chain = chain.then(async () => {
    try {
      if (msg.type === "info") {
        const m = await ready;
        parentPort.postMessage({ id: msg.id, info: { hidden: m.hidden, maxLength: m.maxLength }, threadId });
      } else {
        const { data, dim } = await embed(msg.texts);
        parentPort.postMessage({ id: msg.id, data, dim, threadId }, [data.buffer]);
      }
    } catch (e) {
      let fatal = false;
      try { await ready; } catch { fatal = true; }
      parentPort.postMessage({ id: msg.id, error: message(e), fatal, threadId });
    }
  });
});
`;

/** What a worker needs to load the model (structured-cloned into it). */
export interface LocalWorkerOptions {
  /** Folder path or Hugging Face id, as transformers.js takes it. */
  location: string;
  /** Load with `local_files_only` (a folder). */
  localOnly: boolean;
  /** transformers.js `env.allowRemoteModels` inside the worker. */
  allowRemote: boolean;
  /** Weight format. */
  dtype: string;
  /** onnxruntime intra-op threads, or undefined for its default. */
  threads: number | undefined;
  /** Token cap, or undefined for the model's. */
  maxLength: number | undefined;
  pooling: "mean" | "cls";
  /** `model folder "…"` / `Hugging Face model "…"`, for error messages. */
  where: string;
  /** Appended to load errors (e.g. a hint about internet access). */
  hint: string;
}

/** Result of one embedding batch. */
export interface WorkerBatch {
  /** `texts.length × dim` floats, row-major, each row L2-normalised. */
  data: Float32Array;
  dim: number;
  /** `threadId` of the worker thread that ran it. */
  threadId: number;
}

/** What a worker reports about its loaded model. */
export interface WorkerInfo {
  /** `hidden_size` of the model config, when present. */
  hidden: number | undefined;
  /** Effective token cap per text. */
  maxLength: number;
}

/**
 * A failure inside a worker. `fatal` means the model could not be loaded (the
 * pool restarts its workers on the next call, so a fixed model folder is
 * picked up).
 */
export class LocalWorkerError extends Error {
  constructor(
    message: string,
    readonly fatal: boolean,
  ) {
    super(message);
    this.name = "LocalWorkerError";
  }
}

interface Slot {
  worker: Worker;
  pending: number;
  /** Its model failed to load: no new calls; terminated once its queued calls have been answered. */
  retired: boolean;
}

type Reply =
  | { id: number; data: Float32Array; dim: number; threadId: number }
  | { id: number; info: WorkerInfo; threadId: number }
  | { id: number; error: string; fatal: boolean; threadId: number };

interface Call {
  resolve: (reply: Reply) => void;
  reject: (error: Error) => void;
  slot: Slot;
}

/**
 * Worker threads, each with its own tokenizer and onnxruntime session of one
 * model, so that inference never blocks the main thread's event loop and
 * several batches can run at once. Workers start on the first call and do
 * not keep the process alive while idle.
 */
export class LocalWorkerPool {
  private slots: Slot[] = [];
  private readonly calls = new Map<number, Call>();
  private nextId = 0;

  /**
   * @param size worker threads (≥ 1).
   * @param options what each worker loads.
   */
  constructor(
    private readonly size: number,
    private readonly options: LocalWorkerOptions,
  ) {}

  /**
   * Embeds one batch in the least busy worker.
   * @throws LocalWorkerError when loading or inference fails; Error when a worker dies.
   */
  async embed(texts: string[]): Promise<WorkerBatch> {
    const reply = await this.send({ type: "embed", texts });
    if ("data" in reply) return { data: reply.data, dim: reply.dim, threadId: reply.threadId };
    throw new Error("embedding worker sent an unexpected reply");
  }

  /** Loads the model (if not yet) and reports its size. @throws as {@link embed}. */
  async info(): Promise<WorkerInfo> {
    const reply = await this.send({ type: "info" });
    if ("info" in reply) return reply.info;
    throw new Error("embedding worker sent an unexpected reply");
  }

  /** Stops the workers. Pending calls are rejected. */
  async close(): Promise<void> {
    const slots = this.slots;
    this.slots = [];
    for (const [id, call] of this.calls) {
      this.calls.delete(id);
      call.reject(new Error("the embedder was closed"));
    }
    await Promise.all(slots.map((s) => s.worker.terminate()));
  }

  private send(message: { type: "embed"; texts: string[] } | { type: "info" }): Promise<Reply> {
    this.start();
    const slot = this.slots.reduce((a, b) => (b.pending < a.pending ? b : a));
    const id = this.nextId++;
    if (slot.pending++ === 0) slot.worker.ref();
    return new Promise<Reply>((resolve, reject) => {
      this.calls.set(id, { resolve, reject, slot });
      slot.worker.postMessage({ id, ...message });
    }).then((reply) => {
      if ("error" in reply) {
        // Every current worker loaded the same files: all restart on the next call.
        if (reply.fatal) for (const s of [...this.slots, slot]) this.retire(s);
        throw new LocalWorkerError(reply.error, reply.fatal);
      }
      return reply;
    });
  }

  /** Takes a worker whose model failed to load out of service, so the next call starts a fresh one. */
  private retire(slot: Slot): void {
    if (slot.retired) return;
    slot.retired = true;
    this.slots = this.slots.filter((s) => s !== slot);
    if (slot.pending === 0) void slot.worker.terminate();
  }

  /** Starts workers until there are `size` of them (on the first call, and after a failure). */
  private start(): void {
    if (this.slots.length >= this.size) return;
    const require = createRequire(import.meta.url);
    const workerData = { transformers: require.resolve("@huggingface/transformers"), options: this.options };
    while (this.slots.length < this.size) {
      const worker = new Worker(WORKER_SOURCE, { eval: true, workerData });
      const slot: Slot = { worker, pending: 0, retired: false };
      worker.unref();
      worker.on("message", (reply: Reply) => {
        const call = this.calls.get(reply.id);
        if (!call) return;
        this.calls.delete(reply.id);
        if (--call.slot.pending === 0) {
          call.slot.worker.unref();
          if (call.slot.retired) void call.slot.worker.terminate();
        }
        call.resolve(reply);
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
      call.reject(new Error(`embedding worker failed: ${error.message}`, { cause: error }));
    }
    this.slots = this.slots.filter((s) => s !== slot);
  }
}
