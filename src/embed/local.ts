/**
 * Local sentence embeddings: a sentence-transformers style model (BERT,
 * MiniLM, MPNet, e5, bge, … exported to ONNX) run with transformers.js on
 * onnxruntime-node in worker threads, pooled and L2-normalised here. Nothing
 * leaves the machine; a Hugging Face id is downloaded once (when allowed and
 * online) into transformers.js' cache.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ConfigError } from "../errors.js";
import { CROSS_ENCODER_DTYPES, type CrossEncoderDtype, resolveModelSource } from "../rerank/cross-encoder.js";
import { WorkerTaskError } from "../workers/pool.js";
import { modelFolderProblem } from "../workers/transformers.js";
import { type Embedder, EmbeddingError } from "./contract.js";
import { LocalWorkerPool } from "./local-worker.js";
import { defaultPooling, knownDimension, type Prefixes, resolvePrefixes } from "./models.js";

/** Model used when none is configured (384-d, mean pooling, 256-token window in sentence-transformers). */
export const DEFAULT_LOCAL_MODEL = "Xenova/all-MiniLM-L6-v2";
/** Texts per model call unless configured. */
const DEFAULT_BATCH_SIZE = 32;

/** Options of {@link LocalEmbedder} (the same fields as `LocalConfig` without `provider`). */
export interface LocalEmbedderOptions {
  /**
   * A model folder (absolute, `./relative` or `~/…`, with `config.json`,
   * `tokenizer.json`, `tokenizer_config.json` and `onnx/model.onnx` — the
   * layout of the `Xenova/*` repositories) or a Hugging Face id. A string
   * naming an existing folder is always a folder. Default {@link DEFAULT_LOCAL_MODEL}.
   */
  model?: string;
  /** Texts per model call, an integer ≥ 1. Default 32. */
  batchSize?: number;
  /** Expected vector length; default: `hidden_size` of the model config, else the first output's length. */
  dimension?: number;
  /** `mean` over the attention mask or `cls`; default from `1_Pooling/config.json`, else bge → `cls`, else `mean`. */
  pooling?: "mean" | "cls";
  /** Query prefix; default from the model name (e5 `query: `, bge's retrieval instruction, nomic). */
  queryPrefix?: string;
  /** Document prefix; default from the model name (e5 `passage: `, nomic). */
  documentPrefix?: string;
  /**
   * Token cap per text (longer texts are truncated, keeping the closing
   * special token). Default: `max_seq_length` of the folder's
   * `sentence_bert_config.json` when present; capped by the tokenizer's
   * `model_max_length` and the config's `max_position_embeddings`.
   */
  maxLength?: number;
  /** Worker threads, each with its own model session. Default 1. */
  workers?: number;
  /** onnxruntime intra-op threads per worker. Default: onnxruntime's choice. */
  threads?: number;
  /** Weight format (which file of `onnx/` is read). Default `fp32`. */
  dtype?: CrossEncoderDtype;
  /** May a Hugging Face id be downloaded? Default true unless `HF_HUB_OFFLINE` or `TRANSFORMERS_OFFLINE` is set. */
  allowDownload?: boolean;
}

/** True when the environment asks Hugging Face libraries to stay offline. */
function offlineByEnvironment(): boolean {
  return ["HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"].some((name) => {
    const v = process.env[name]?.trim().toLowerCase();
    return v !== undefined && v !== "" && v !== "0" && v !== "false";
  });
}

function readJson(path: string): Record<string, unknown> | undefined {
  try {
    return JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

function checkPositiveInt(name: string, value: number | undefined): void {
  if (value !== undefined && (!Number.isInteger(value) || value < 1)) {
    throw new ConfigError(`local embedder: ${name} must be an integer >= 1, got ${String(value)}`);
  }
}

/**
 * Embeds with a local transformers.js model, off the main thread.
 *
 * - Pipeline per batch (in a worker): tokenise with the model's tokenizer
 *   (padding to the longest text of the batch, truncation to the model's
 *   limit), run the ONNX model, pool the `last_hidden_state` — `mean`: the
 *   average of the token vectors where the attention mask is 1; `cls`: the
 *   first token's vector — and L2-normalise. A model exporting
 *   `sentence_embedding` is used as is.
 * - Prefixes: `queryPrefix` is put before queries ({@link embedQuery}),
 *   `documentPrefix` before documents; defaults from the model name (e5:
 *   `query: ` / `passage: `; bge: `Represent this sentence for searching
 *   relevant passages: ` / none). For other models embedQuery(t) equals
 *   embedTexts([t])[0].
 * - Threads: inference runs in `workers` worker threads (default 1), each
 *   with its own tokenizer and onnxruntime session (which itself uses
 *   `threads` intra-op threads), so the event loop of the calling thread
 *   keeps running. Texts are sorted by length and batched to cut padding;
 *   results come back in input order.
 * - Loading: on the first call (or {@link resolveDimension}); a folder is
 *   checked for its files first. A failed load is retried by the next call.
 * - Dimension: the configured `dimension`, else `hidden_size` from the
 *   folder's `config.json` (read at construction), else the known size of a
 *   well-known id (`Xenova/all-MiniLM-L6-v2` → 384), else what the loaded
 *   model reports. Output of another length → {@link EmbeddingError}.
 * - The empty string gets the vector of `[CLS] [SEP]`.
 * - Errors: {@link EmbeddingError} naming provider `local`, the model, the
 *   folder's missing files or the loader's message.
 */
export class LocalEmbedder implements Embedder {
  readonly provider = "local";
  /** The Hugging Face id, or the folder's absolute path. */
  readonly modelId: string;
  private readonly source: { kind: "folder" | "hub"; location: string };
  private readonly batchSize: number;
  private readonly prefixes: Prefixes;
  private readonly dtype: CrossEncoderDtype;
  private readonly pool: LocalWorkerPool;
  private expected: { value: number; source: string } | undefined;
  private checked = false;
  private readonly threads = new Set<number>();

  /** @throws ConfigError for invalid options (nothing is loaded yet). */
  constructor(options: LocalEmbedderOptions = {}) {
    const model = options.model ?? DEFAULT_LOCAL_MODEL;
    if (typeof model !== "string" || model.trim() === "") {
      throw new ConfigError("local embedder: model must be a folder or a Hugging Face id");
    }
    this.source = resolveModelSource(model);
    this.modelId = this.source.location;
    checkPositiveInt("batchSize", options.batchSize);
    checkPositiveInt("dimension", options.dimension);
    checkPositiveInt("maxLength", options.maxLength);
    checkPositiveInt("workers", options.workers);
    checkPositiveInt("threads", options.threads);
    if (options.pooling !== undefined && options.pooling !== "mean" && options.pooling !== "cls") {
      throw new ConfigError(
        `local embedder: pooling must be "mean" or "cls", got ${String(options.pooling)}`,
      );
    }
    this.dtype = options.dtype ?? "fp32";
    if (!Object.hasOwn(CROSS_ENCODER_DTYPES, this.dtype)) {
      throw new ConfigError(
        `local embedder: dtype must be one of ${Object.keys(CROSS_ENCODER_DTYPES).join(", ")}, got ${String(options.dtype)}`,
      );
    }
    this.batchSize = options.batchSize ?? DEFAULT_BATCH_SIZE;
    this.prefixes = resolvePrefixes(model, options);
    const folder = this.source.kind === "folder";
    let pooling = options.pooling;
    let maxLength = options.maxLength;
    if (options.dimension !== undefined) {
      this.expected = { value: options.dimension, source: "the configured dimension" };
    }
    if (folder) {
      const config = readJson(join(this.source.location, "config.json"));
      const hidden = config?.hidden_size ?? config?.d_model;
      if (this.expected === undefined && typeof hidden === "number" && hidden > 0) {
        this.expected = { value: hidden, source: "hidden_size in the model's config.json" };
      }
      const sbert = readJson(join(this.source.location, "sentence_bert_config.json"));
      const seq = sbert?.max_seq_length;
      if (maxLength === undefined && typeof seq === "number" && Number.isInteger(seq) && seq > 0)
        maxLength = seq;
      const st = readJson(join(this.source.location, "1_Pooling", "config.json"));
      if (pooling === undefined && st) {
        if (st.pooling_mode_cls_token === true) pooling = "cls";
        else if (st.pooling_mode_mean_tokens === true) pooling = "mean";
      }
    } else if (this.expected === undefined) {
      const known = knownDimension("local", model);
      if (known !== undefined) this.expected = { value: known, source: "the known dimension of this model" };
    }
    const allowRemote = !folder && (options.allowDownload ?? !offlineByEnvironment());
    const where = folder
      ? `model folder "${this.source.location}"`
      : `Hugging Face model "${this.source.location}"`;
    this.pool = new LocalWorkerPool(options.workers ?? 1, {
      location: this.source.location,
      localOnly: folder || !allowRemote,
      allowRemote,
      dtype: this.dtype,
      threads: options.threads,
      maxLength,
      pooling: pooling ?? defaultPooling(model),
      where,
      hint: folder
        ? ""
        : allowRemote
          ? " (not a local folder: the first use downloads it, which needs internet access)"
          : " (not a local folder, and downloads are disabled: it must already be in transformers.js' cache)",
    });
  }

  /** Vector length; `0` until known (see the class comment). */
  get dimension(): number {
    return this.expected?.value ?? 0;
  }

  /** Thread ids of the worker threads that have run this embedder's batches (diagnostics). */
  get workerThreadIds(): number[] {
    return [...this.threads];
  }

  /**
   * Embeds documents (with the document prefix), in order.
   * @returns one unit-norm `Float32Array` of length {@link dimension} per text; `[]` for `[]` without loading the model.
   * @throws EmbeddingError when the model cannot be loaded or run, or returns another dimension.
   */
  embedTexts(texts: string[]): Promise<Float32Array[]> {
    return this.embed(texts.map((t) => this.prefixes.document + t));
  }

  /**
   * Embeds one query (with the query prefix).
   * @throws EmbeddingError as {@link embedTexts}.
   */
  async embedQuery(text: string): Promise<Float32Array> {
    const [vector] = await this.embed([this.prefixes.query + text]);
    if (vector === undefined) throw this.error("returned no vector for the query");
    return vector;
  }

  /**
   * The vector length, loading the model if it is not known from the
   * configuration, the folder's config.json or the table of known models.
   * @throws EmbeddingError when the model cannot be loaded.
   */
  async resolveDimension(): Promise<number> {
    if (this.expected !== undefined) return this.expected.value;
    this.checkFolder();
    let info: { hidden: number | undefined };
    try {
      info = await this.pool.info();
    } catch (error) {
      throw this.wrap(error);
    }
    if (this.expected === undefined && info.hidden !== undefined) {
      this.expected = { value: info.hidden, source: "hidden_size of the model config" };
      return info.hidden;
    }
    await this.embed(["dimension probe"]);
    return this.dimension;
  }

  /** Stops the worker threads. */
  async close(): Promise<void> {
    await this.pool.close();
  }

  private error(message: string, options?: { cause?: unknown }): EmbeddingError {
    return new EmbeddingError(this.provider, this.modelId, message, options);
  }

  private wrap(error: unknown): EmbeddingError {
    if (error instanceof EmbeddingError) return error;
    const message = error instanceof Error ? error.message : String(error);
    return this.error(error instanceof WorkerTaskError ? message : `inference failed: ${message}`, {
      cause: error,
    });
  }

  /** Checks a folder's files once (before starting workers), so a wrong path fails fast with a clear message. */
  private checkFolder(): void {
    if (this.checked || this.source.kind !== "folder") return;
    const { location } = this.source;
    const problem = modelFolderProblem(
      location,
      `onnx/${CROSS_ENCODER_DTYPES[this.dtype]}`,
      "Xenova/all-MiniLM-L6-v2",
    );
    if (problem) throw this.error(`model folder "${location}" ${problem}`);
    this.checked = true;
  }

  private async embed(inputs: string[]): Promise<Float32Array[]> {
    if (inputs.length === 0) return [];
    this.checkFolder();
    // Longest first, so each batch pads to similar lengths; results are put back in input order.
    const order = inputs.map((_, i) => i).sort((a, b) => (inputs[b]?.length ?? 0) - (inputs[a]?.length ?? 0));
    const batches: number[][] = [];
    for (let start = 0; start < order.length; start += this.batchSize) {
      batches.push(order.slice(start, start + this.batchSize));
    }
    let results: Awaited<ReturnType<LocalWorkerPool["embed"]>>[];
    try {
      results = await Promise.all(
        batches.map((rows) => this.pool.embed(rows.map((i) => inputs[i] as string))),
      );
    } catch (error) {
      throw this.wrap(error);
    }
    const out = new Array<Float32Array>(inputs.length);
    batches.forEach((rows, b) => {
      const { data, dim, threadId } = results[b] as (typeof results)[number];
      this.threads.add(threadId);
      if (data.length !== rows.length * dim) {
        throw this.error(
          `the worker returned ${data.length} values for ${rows.length} texts of dimension ${dim}`,
        );
      }
      if (this.expected === undefined) {
        this.expected = { value: dim, source: "the length of the model's first vectors" };
      } else if (dim !== this.expected.value) {
        throw this.error(
          `returned vectors of dimension ${dim}, expected ${this.expected.value} (${this.expected.source})`,
        );
      }
      rows.forEach((i, j) => {
        out[i] = data.slice(j * dim, (j + 1) * dim);
      });
    });
    return out;
  }
}
