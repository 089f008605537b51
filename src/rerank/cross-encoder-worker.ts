/**
 * Worker-thread code of the cross-encoder reranker (./cross-encoder.ts): loads
 * the tokenizer and the sequence-classification model with transformers.js
 * (onnxruntime-node) and scores batches of (query, passage) pairs, so that
 * neither tokenisation nor inference runs on the thread that called `rerank`.
 * Plain JavaScript run by the shared worker pool (../workers/pool.ts).
 */
import type { WorkerPool } from "../workers/pool.js";
import { type TransformersModelOptions, transformersPool } from "../workers/transformers.js";

/**
 * `truncatePair(enc, a, b, maxLength)` in plain JavaScript: the code the
 * workers run, also compiled on the calling thread for the exported
 * `truncatePair` of ./cross-encoder.ts (one implementation, tested directly).
 * See that function for what it does.
 */
export const TRUNCATE_PAIR_SOURCE = `
function matchesAt(ids, part, at) {
  if (at < 0 || at + part.length > ids.length) return false;
  for (let i = 0; i < part.length; i++) if (ids[at + i] !== part[i]) return false;
  return true;
}
function truncatePair(enc, a, b, maxLength) {
  const ids = enc.input_ids;
  const n = ids.length;
  if (n <= maxLength) return enc;
  const specials = n - a.length - b.length;
  let keep;
  for (let p = 0; p <= specials && !keep; p++) {
    if (!matchesAt(ids, a, p)) continue;
    for (let suffix = 0; suffix <= specials - p; suffix++) {
      const q = n - suffix - b.length;
      if (q < p + a.length) break;
      if (!matchesAt(ids, b, q)) continue;
      let ka = a.length;
      let kb = b.length;
      for (let excess = n - maxLength; excess > 0 && ka + kb > 0; excess--) {
        if (ka > kb) ka--;
        else kb--;
      }
      keep = [];
      for (let i = 0; i < n; i++) {
        const inA = i >= p && i < p + a.length;
        const inB = i >= q && i < q + b.length;
        if ((!inA && !inB) || (inA && i < p + ka) || (inB && i < q + kb)) keep.push(i);
      }
      break;
    }
  }
  if (!keep || keep.length > maxLength) {
    keep = [...Array(Math.max(0, maxLength - 1)).keys(), n - 1];
  }
  const pick = (xs) => keep.map((i) => xs[i]);
  const out = { input_ids: pick(enc.input_ids), attention_mask: pick(enc.attention_mask) };
  if (enc.token_type_ids) out.token_type_ids = pick(enc.token_type_ids);
  return out;
}
`;

/**
 * The task: `ready` checks the folder's JSON files (`o.checkJson`), then
 * loads the model; a `{ query, texts }` call tokenises each pair
 * `[CLS] query [SEP] passage [SEP]` (longest_first truncation to the model's
 * length), pads the batch, runs the model and answers one probability per
 * text (Float64Array): sigmoid(logit) for one label, softmax of the last
 * label (sigmoid(logit₁ − logit₀)) for two.
 */
const CROSS_ENCODER_TASK = `
const o = workerData.options;
const ready = (async () => {
  const fs = require("node:fs");
  const path = require("node:path");
  for (const file of o.checkJson || []) {
    try {
      JSON.parse(fs.readFileSync(path.join(o.location, file), "utf8"));
    } catch (e) {
      throw new Error(o.where + ": " + file + " is not valid JSON (" + errorMessage(e) + ")");
    }
  }
  return loadTransformersModel(o, "AutoModelForSequenceClassification");
})();
${TRUNCATE_PAIR_SOURCE}
function sigmoid(x) {
  if (x >= 0) return 1 / (1 + Math.exp(-x));
  const e = Math.exp(x);
  return e / (1 + e);
}

async function score(query, texts) {
  const m = await ready;
  const queryIds = m.tokenizer.encode(query, { add_special_tokens: false });
  const rows = texts.map((passage) => {
    const enc = m.tokenizer._call(query, { text_pair: passage, return_tensor: false, return_token_type_ids: true });
    if (enc.input_ids.length <= m.maxLength) return enc;
    return truncatePair(enc, queryIds, m.tokenizer.encode(passage, { add_special_tokens: false }), m.maxLength);
  });
  const width = Math.max(...rows.map((r) => r.input_ids.length));
  const size = rows.length * width;
  const ids = new BigInt64Array(size).fill(BigInt(m.padId));
  const mask = new BigInt64Array(size);
  const types = new BigInt64Array(size);
  rows.forEach((r, row) => {
    const offset = row * width + (m.padLeft ? width - r.input_ids.length : 0);
    for (let t = 0; t < r.input_ids.length; t++) {
      ids[offset + t] = BigInt(r.input_ids[t]);
      mask[offset + t] = BigInt(r.attention_mask[t]);
      types[offset + t] = BigInt((r.token_type_ids && r.token_type_ids[t]) || 0);
    }
  });
  const dims = [rows.length, width];
  let output;
  try {
    output = await m.model({
      input_ids: new m.lib.Tensor("int64", ids, dims),
      attention_mask: new m.lib.Tensor("int64", mask, dims),
      token_type_ids: new m.lib.Tensor("int64", types, dims),
    });
  } catch (e) {
    throw new Error("inference failed on " + o.where + ": " + errorMessage(e));
  }
  const logits = output && output.logits;
  if (!logits || logits.dims.length !== 2 || logits.dims[0] !== rows.length) {
    throw new Error("the model returned no logits of shape [" + rows.length + ", 1] (got " +
      (logits ? "[" + logits.dims.join(", ") + "]" : "none") + ")");
  }
  const labels = logits.dims[1];
  if (labels !== 1 && labels !== 2) throw new Error("expected a model with 1 or 2 labels, got " + labels);
  const data = logits.data;
  const out = new Float64Array(rows.length);
  for (let r = 0; r < rows.length; r++) {
    out[r] = labels === 1 ? sigmoid(data[r]) : sigmoid(data[2 * r + 1] - data[2 * r]);
  }
  return out;
}

serve(ready, async (msg) => {
  const scores = await score(msg.query, msg.texts);
  return { value: scores, transfer: [scores.buffer] };
});
`;

/** What a cross-encoder worker loads (structured-cloned into it). */
export interface CrossEncoderWorkerOptions extends TransformersModelOptions {
  /** Files of the folder that must parse as JSON before loading (none for a hub id). */
  checkJson: string[];
}

/** A worker pool whose workers score (query, passage) batches; call with `{ query, texts }`, get a Float64Array. */
export function crossEncoderPool(size: number, options: CrossEncoderWorkerOptions): WorkerPool {
  return transformersPool(size, "cross-encoder worker", CROSS_ENCODER_TASK, options);
}
