import type { WorkerPool } from "../workers/pool.js";
import { type TransformersModelOptions, transformersPool } from "../workers/transformers.js";

/**
 * Worker-thread code that runs a sentence-transformers style model with
 * transformers.js (onnxruntime-node): tokenise (padding, truncation to
 * `maxLength`), run the model, pool the token vectors (`mean` over the
 * attention mask or the `cls` token; a model that already outputs
 * `sentence_embedding` is used as is) and L2-normalise. Plain JavaScript run
 * by the shared worker pool (../workers/pool.ts) after its runtime and the
 * shared transformers.js loader (../workers/transformers.ts), so the same
 * code runs from the TypeScript sources and from `dist/`. Messages are
 * handled one at a time.
 */
const EMBED_TASK = `
const o = workerData.options;
let lib;
const ready = (async () => {
  const m = await loadTransformersModel(o, "AutoModel");
  lib = m.lib;
  const config = m.config;
  const hidden = typeof config.hidden_size === "number" ? config.hidden_size
    : typeof config.d_model === "number" ? config.d_model : undefined;
  return {
    tokenizer: m.tokenizer,
    model: m.model,
    maxLength: Math.max(2, m.maxLength),
    hidden,
    empty: m.tokenizer("", { return_tensor: false }).input_ids,
    padId: m.padId,
    padLeft: m.padLeft,
  };
})();

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

serve(ready, async (msg) => {
  if (msg.type === "info") {
    const m = await ready;
    return { value: { hidden: m.hidden, maxLength: m.maxLength } };
  }
  const { data, dim } = await embed(msg.texts);
  return { value: { data, dim }, transfer: [data.buffer] };
});
`;

/** What a worker needs to load the model (structured-cloned into it). */
export interface LocalWorkerOptions extends TransformersModelOptions {
  pooling: "mean" | "cls";
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
 * Worker threads, each with its own tokenizer and onnxruntime session of one
 * model, so that inference never blocks the main thread's event loop and
 * several batches can run at once. Built on the shared {@link WorkerPool}:
 * workers start on the first call, do not keep the process alive while idle,
 * are replaced after a load failure (so a fixed folder is picked up) or a
 * crash.
 */
export class LocalWorkerPool {
  private readonly pool: WorkerPool;

  /**
   * @param size worker threads (≥ 1).
   * @param options what each worker loads.
   */
  constructor(size: number, options: LocalWorkerOptions) {
    this.pool = transformersPool(size, "embedding worker", EMBED_TASK, options);
  }

  /**
   * Embeds one batch in the least busy worker.
   * @throws WorkerTaskError when loading or inference fails; WorkerCrashError when a worker dies.
   */
  async embed(texts: string[]): Promise<WorkerBatch> {
    const { value, threadId } = await this.pool.run<{ data: Float32Array; dim: number }>({
      type: "embed",
      texts,
    });
    return { data: value.data, dim: value.dim, threadId };
  }

  /** Loads the model (if not yet) and reports its size. @throws as {@link embed}. */
  async info(): Promise<WorkerInfo> {
    return (await this.pool.run<WorkerInfo>({ type: "info" })).value;
  }

  /** Stops the workers. Pending calls are rejected. */
  close(): Promise<void> {
    return this.pool.close();
  }
}
