/**
 * BERT-style cross-encoder reranking (Nogueira & Cho 2019, "Passage
 * Re-ranking with BERT"): the query and a passage are fed to the model
 * together as one sequence pair, `[CLS] query [SEP] passage [SEP]`, and a
 * classification head on top outputs a relevance logit. Seeing both texts at
 * once lets attention match query terms against the passage, which is why
 * cross-encoders beat bi-encoders (embeddings compared by cosine) at
 * reranking, at the price of one model pass per (query, passage) pair.
 *
 * Models: ONNX exports of Hugging Face sequence-classification checkpoints in
 * the layout of `cross-encoder/ms-marco-MiniLM-L-6-v2` (`config.json`,
 * `tokenizer.json`, `tokenizer_config.json`, `onnx/model.onnx`), run with
 * transformers.js on onnxruntime-node in worker threads
 * (./cross-encoder-worker.ts on the shared pool of ../workers/pool.ts).
 */
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { basename, isAbsolute, join, resolve } from "node:path";
import { WorkerCrashError, type WorkerPool, WorkerTaskError } from "../workers/pool.js";
import { modelFolderProblem } from "../workers/transformers.js";
import { RerankError, type Reranker, type RerankOptions, type RerankScore } from "./contract.js";
import { crossEncoderPool, TRUNCATE_PAIR_SOURCE } from "./cross-encoder-worker.js";
import { describeError, isAbortOf, rerankDistinct, throwIfAborted } from "./shared.js";

/** Weight formats transformers.js can load, and the model file each one reads. */
export const CROSS_ENCODER_DTYPES = {
  fp32: "model.onnx",
  fp16: "model_fp16.onnx",
  q8: "model_quantized.onnx",
  int8: "model_int8.onnx",
  uint8: "model_uint8.onnx",
  q4: "model_q4.onnx",
  bnb4: "model_bnb4.onnx",
  q4f16: "model_q4f16.onnx",
} as const;

/** A weight format of {@link CROSS_ENCODER_DTYPES}. */
export type CrossEncoderDtype = keyof typeof CROSS_ENCODER_DTYPES;

/** Options of {@link CrossEncoderReranker}. */
export interface CrossEncoderOptions {
  /**
   * A local model folder (absolute, `./relative` or `~/…`; loaded with
   * `local_files_only`, nothing is downloaded) or a Hugging Face model id such
   * as `cross-encoder/ms-marco-MiniLM-L-6-v2` (needs an ONNX export in the
   * repository and internet access on first use; cached by transformers.js).
   * A string naming an existing folder is always a folder.
   */
  model: string;
  /** (query, passage) pairs per model call. Default 16. */
  batchSize?: number;
  /**
   * Token budget per pair, capped by the tokenizer's `model_max_length` and
   * the config's `max_position_embeddings` (default: that cap, or 512).
   */
  maxLength?: number;
  /** Weight format (which ONNX file of `onnx/` is read). Default `fp32` (`onnx/model.onnx`). */
  dtype?: CrossEncoderDtype;
  /** onnxruntime intra-op threads per worker; default: onnxruntime's choice (all cores). */
  threads?: number;
  /**
   * Worker threads, each with its own tokenizer and ONNX session (memory: one
   * model copy each). Batches of one call are spread over them, and calls
   * run side by side. Default 1.
   */
  workers?: number;
}

/** Where a model comes from: a folder on disk or a Hugging Face Hub id. */
export interface ModelSource {
  kind: "folder" | "hub";
  /** Absolute folder path, or the hub id. */
  location: string;
}

/**
 * Decides whether `model` is a local folder or a Hugging Face id: an existing
 * path, an absolute path, or one starting with `./`, `../` or `~` is a folder
 * (resolved to an absolute path — transformers.js would otherwise read a
 * relative `a/b` as a hub id); `name` or `owner/name` otherwise is a hub id.
 */
export function resolveModelSource(model: string): ModelSource {
  const expanded = model === "~" || model.startsWith("~/") ? join(homedir(), model.slice(1)) : model;
  if (existsSync(expanded)) return { kind: "folder", location: resolve(expanded) };
  if (/^[\w.-]+(\/[\w.-]+)?$/.test(model) && !model.startsWith(".") && !model.includes("..")) {
    return { kind: "hub", location: model };
  }
  return { kind: "folder", location: isAbsolute(expanded) ? expanded : resolve(expanded) };
}

/** One encoded (query, passage) pair. */
interface Encoded {
  input_ids: number[];
  attention_mask: number[];
  token_type_ids?: number[];
}

/**
 * Cuts an encoded pair to `maxLength` tokens the way Hugging Face's
 * `longest_first` strategy does: tokens are removed one at a time from the end
 * of the longer of the two texts, and the special tokens around them ([CLS],
 * [SEP]) are kept. `a` and `b` are the ids of the query and the passage
 * without special tokens. If they cannot be located in the pair (an unusual
 * post-processor), the head of the pair plus its last token is kept.
 */
export function truncatePair(
  enc: Encoded,
  a: readonly number[],
  b: readonly number[],
  maxLength: number,
): Encoded {
  return compiledTruncatePair(enc, a, b, maxLength);
}

/** The workers' implementation (./cross-encoder-worker.ts), compiled here so both threads run the same code. */
const compiledTruncatePair = new Function(`${TRUNCATE_PAIR_SOURCE}\nreturn truncatePair;`)() as (
  enc: Encoded,
  a: readonly number[],
  b: readonly number[],
  maxLength: number,
) => Encoded;

/** Waits for `promise`, rejecting with the abort reason as soon as `signal` aborts. */
function abortable<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  promise.catch(() => undefined);
  signal.throwIfAborted();
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}

/**
 * Reranks with a cross-encoder (Nogueira & Cho 2019) through transformers.js.
 *
 * Score: sigmoid(logit) of the model's single relevance logit (for a two-label
 * head, the softmax probability of the last label, which equals
 * sigmoid(logit₁ − logit₀)); scale `probability`. ms-marco cross-encoders
 * are trained with a binary relevance objective, so the sigmoid is their
 * intended probability reading; ordering is the logit ordering.
 *
 * Inputs: each pair is tokenised as `(query, passage)` with the model's
 * tokenizer and cut to the model's maximum length with `longest_first`
 * truncation (see {@link truncatePair}); passages are sorted by length and
 * run in batches of `batchSize`, padded per batch (padding is masked, so
 * scores do not depend on the batching). Identical passages are scored once.
 *
 * Loading: the tokenizer and the ONNX session are loaded in each worker on
 * the first call (or {@link CrossEncoderReranker.load}) and kept; concurrent
 * first calls share one load. A folder is checked for `config.json`,
 * `tokenizer.json`, `tokenizer_config.json` and `onnx/<dtype file>` first.
 * `rerank` with no documents never loads the model. A failed load is retried
 * by the next call (in new workers, so a fixed folder is picked up).
 *
 * Threading: tokenisation and inference run in `workers` worker threads
 * (default 1), never on the thread that calls `rerank`, whose event loop
 * keeps running (a server can answer other requests meanwhile). Workers start
 * on first use, do not keep the process alive while idle and stop with
 * {@link CrossEncoderReranker.close}. A worker that dies fails the calls it
 * was running (a {@link RerankError} naming the model) and is replaced by the
 * next call.
 *
 * Abort: checked before each batch is sent; an abort while a batch runs
 * rejects at once (the worker finishes that batch and the result is dropped).
 *
 * Errors: {@link RerankError}s, all starting with the reranker's name —
 * naming the folder (or hub id) and the missing files, or the loader's
 * message, when the model cannot load; `inference failed on model folder
 * "…": …` when onnxruntime fails; `model folder "…": the cross-encoder worker
 * (thread n) stopped unexpectedly: …` when a worker dies; `… workers were
 * closed` for calls cut short by {@link CrossEncoderReranker.close}; the
 * problem alone for an unusable output (e.g. 3 labels).
 */
export class CrossEncoderReranker implements Reranker {
  readonly name: string;
  readonly scale = "probability" as const;
  /** Where the model is loaded from. */
  readonly source: ModelSource;
  private readonly batchSize: number;
  private readonly workers: number;
  private readonly dtype: CrossEncoderDtype;
  private readonly pool: WorkerPool;
  /** The one load shared by concurrent first calls; reset after a failure. */
  private loading: Promise<void> | undefined;

  constructor(options: CrossEncoderOptions) {
    this.source = resolveModelSource(options.model);
    const short =
      this.source.kind === "hub"
        ? (options.model.split("/").pop() ?? options.model)
        : basename(this.source.location);
    this.name = `cross-encoder:${short}`;
    this.batchSize = options.batchSize ?? 16;
    if (!Number.isInteger(this.batchSize) || this.batchSize < 1) {
      throw new RerankError(
        this.name,
        `batchSize must be a positive integer, got ${String(options.batchSize)}`,
      );
    }
    if (options.maxLength !== undefined && (!Number.isInteger(options.maxLength) || options.maxLength < 4)) {
      throw new RerankError(this.name, `maxLength must be an integer ≥ 4, got ${String(options.maxLength)}`);
    }
    if (options.dtype !== undefined && !Object.hasOwn(CROSS_ENCODER_DTYPES, options.dtype)) {
      throw new RerankError(
        this.name,
        `dtype must be one of ${Object.keys(CROSS_ENCODER_DTYPES).join(", ")}, got ${String(options.dtype)}`,
      );
    }
    this.workers = options.workers ?? 1;
    if (!Number.isInteger(this.workers) || this.workers < 1) {
      throw new RerankError(this.name, `workers must be a positive integer, got ${String(options.workers)}`);
    }
    this.dtype = options.dtype ?? "fp32";
    const folder = this.source.kind === "folder";
    this.pool = crossEncoderPool(this.workers, {
      location: this.source.location,
      localOnly: folder,
      allowRemote: !folder,
      dtype: this.dtype,
      threads: options.threads,
      maxLength: options.maxLength,
      where: this.where(),
      hint: folder ? "" : " (not a local folder; downloading needs internet access)",
      checkJson: folder ? ["config.json", "tokenizer.json", "tokenizer_config.json"] : [],
    });
  }

  /** Thread ids of the worker threads that have run this reranker's batches (diagnostics). */
  get workerThreadIds(): number[] {
    return this.pool.threadIds;
  }

  /**
   * Starts the workers and loads the tokenizer and the model in each now
   * (otherwise done on the first `rerank`), e.g. at start-up. Concurrent
   * calls share one load; a failed load is retried on the next call.
   * @throws RerankError naming the folder or hub id.
   */
  load(): Promise<void> {
    return this.loaded();
  }

  rerank(query: string, docs: string[], options?: RerankOptions): Promise<RerankScore[]> {
    return rerankDistinct(this.name, docs, options, (texts) => this.score(query, texts, options?.signal));
  }

  /**
   * Stops the worker threads (releasing their ONNX sessions); calls still
   * running reject. A later call would start new workers and load again.
   */
  async close(): Promise<void> {
    this.loading = undefined;
    await this.pool.close();
  }

  private loaded(): Promise<void> {
    if (!this.loading) {
      const loading = (async () => {
        this.checkFolder();
        try {
          await this.pool.warm();
        } catch (error) {
          throw this.wrap(error);
        }
      })();
      this.loading = loading;
      loading.catch(() => {
        if (this.loading === loading) this.loading = undefined;
      });
    }
    return this.loading;
  }

  private where(): string {
    return this.source.kind === "folder"
      ? `model folder "${this.source.location}"`
      : `Hugging Face model "${this.source.location}"`;
  }

  /** Checks a folder's files on the calling thread (cheap), so a wrong path fails before any worker starts. */
  private checkFolder(): void {
    const { location, kind } = this.source;
    if (kind !== "folder") return;
    const problem = modelFolderProblem(
      location,
      `onnx/${CROSS_ENCODER_DTYPES[this.dtype]}`,
      "cross-encoder/ms-marco-MiniLM-L-6-v2",
    );
    if (problem) throw new RerankError(this.name, `${this.where()} ${problem}`);
  }

  /** A worker failure as a {@link RerankError}; the caller's abort reason passes through. */
  private wrap(error: unknown, signal?: AbortSignal): unknown {
    if (isAbortOf(signal, error) || error instanceof RerankError) return error;
    if (error instanceof WorkerCrashError) {
      return new RerankError(this.name, `${this.where()}: ${error.message}`, { cause: error });
    }
    // Load errors name the folder already; inference errors name it from the worker.
    const message = error instanceof WorkerTaskError ? error.message : describeError(error);
    return new RerankError(this.name, message, { cause: error });
  }

  private async score(query: string, texts: string[], signal: AbortSignal | undefined): Promise<number[]> {
    await abortable(this.loaded(), signal);
    throwIfAborted(signal);
    // Longest first, so each batch pads to similar lengths; scores are put back in input order.
    const order = texts.map((_, i) => i).sort((x, y) => (texts[y]?.length ?? 0) - (texts[x]?.length ?? 0));
    const batches: number[][] = [];
    for (let start = 0; start < order.length; start += this.batchSize) {
      batches.push(order.slice(start, start + this.batchSize));
    }
    const scores = new Array<number>(texts.length);
    let next = 0;
    // One lane per worker: each sends its next batch when the previous one is back.
    const lane = async (): Promise<void> => {
      for (let b = next++; b < batches.length; b = next++) {
        throwIfAborted(signal);
        const rows = batches[b] as number[];
        const { value } = await abortable(
          this.pool.run<Float64Array>({ query, texts: rows.map((i) => texts[i] as string) }),
          signal,
        );
        if (value.length !== rows.length) {
          throw new RerankError(
            this.name,
            `the worker returned ${value.length} scores for ${rows.length} pairs`,
          );
        }
        rows.forEach((i, k) => {
          scores[i] = value[k] as number;
        });
      }
    };
    try {
      await Promise.all(Array.from({ length: Math.min(this.workers, batches.length) }, lane));
    } catch (error) {
      throw this.wrap(error, signal);
    }
    return scores;
  }
}
