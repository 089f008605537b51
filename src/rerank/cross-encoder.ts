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
 * transformers.js on onnxruntime-node.
 */
import { existsSync, readFileSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { basename, isAbsolute, join, resolve } from "node:path";
import type { PreTrainedModel, PreTrainedTokenizer, Tensor } from "@huggingface/transformers";
import { RerankError, type Reranker, type RerankOptions, type RerankScore } from "./contract.js";
import { describeError, rerankDistinct, sigmoid, throwIfAborted } from "./shared.js";

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
  /** onnxruntime intra-op threads; default: onnxruntime's choice (all cores). */
  threads?: number;
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

interface Loaded {
  tokenizer: PreTrainedTokenizer;
  model: PreTrainedModel;
  Tensor: typeof Tensor;
  maxLength: number;
  padId: number;
  padLeft: boolean;
}

/** True when `ids[at..]` starts with `part`. */
function matchesAt(ids: readonly number[], part: readonly number[], at: number): boolean {
  if (at < 0 || at + part.length > ids.length) return false;
  for (let i = 0; i < part.length; i++) if (ids[at + i] !== part[i]) return false;
  return true;
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
  const ids = enc.input_ids;
  const n = ids.length;
  if (n <= maxLength) return enc;
  const specials = n - a.length - b.length;
  let keep: number[] | undefined;
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
  const pick = (xs: number[]): number[] => (keep as number[]).map((i) => xs[i] as number);
  const out: Encoded = { input_ids: pick(enc.input_ids), attention_mask: pick(enc.attention_mask) };
  if (enc.token_type_ids) out.token_type_ids = pick(enc.token_type_ids);
  return out;
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
 * truncation (see {@link truncatePair}); pairs are sorted by length and run in
 * batches of `batchSize`, padded per batch. Identical passages are scored once.
 *
 * Loading: the tokenizer and the ONNX session are loaded on the first call
 * (or {@link CrossEncoderReranker.load}) and kept. A folder is checked for
 * `config.json`, `tokenizer.json`, `tokenizer_config.json` and
 * `onnx/<dtype file>` first. `rerank` with no documents never loads the model.
 *
 * Threading: onnxruntime-node runs a batch synchronously on the calling
 * thread (on its own thread pool, but the JavaScript thread waits); the event
 * loop runs between batches. Keep batches small or run it in a worker when
 * latency of other work matters.
 *
 * Errors: {@link RerankError} naming the folder (or hub id) and the missing
 * files, or the loader's message, when the model cannot load; naming the
 * reranker when inference fails.
 */
export class CrossEncoderReranker implements Reranker {
  readonly name: string;
  readonly scale = "probability" as const;
  /** Where the model is loaded from. */
  readonly source: ModelSource;
  private readonly batchSize: number;
  private loading: Promise<Loaded> | undefined;

  constructor(private readonly options: CrossEncoderOptions) {
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
  }

  /**
   * Loads the tokenizer and the model now (otherwise done on the first
   * `rerank`), e.g. at start-up. A failed load is retried on the next call.
   * @throws RerankError naming the folder or hub id.
   */
  async load(): Promise<void> {
    await this.loaded();
  }

  rerank(query: string, docs: string[], options?: RerankOptions): Promise<RerankScore[]> {
    return rerankDistinct(this.name, docs, options, (texts) => this.score(query, texts, options?.signal));
  }

  /** Releases the ONNX session. */
  async close(): Promise<void> {
    const loading = this.loading;
    this.loading = undefined;
    if (!loading) return;
    try {
      await (await loading).model.dispose();
    } catch {
      // a failed load has nothing to release
    }
  }

  private loaded(): Promise<Loaded> {
    if (!this.loading) {
      const loading = this.loadModel();
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

  private async loadModel(): Promise<Loaded> {
    const { location, kind } = this.source;
    const dtype = this.options.dtype ?? "fp32";
    if (kind === "folder") {
      if (!existsSync(location) || !statSync(location).isDirectory()) {
        throw new RerankError(this.name, `${this.where()} does not exist or is not a folder`);
      }
      const needed = [
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        `onnx/${CROSS_ENCODER_DTYPES[dtype]}`,
      ];
      const missing = needed.filter((f) => !existsSync(join(location, f)));
      if (missing.length > 0) {
        throw new RerankError(
          this.name,
          `${this.where()} lacks ${missing.join(", ")} (expected the layout of cross-encoder/ms-marco-MiniLM-L-6-v2: ${needed.join(", ")})`,
        );
      }
      for (const file of needed.slice(0, 3)) {
        try {
          JSON.parse(readFileSync(join(location, file), "utf8"));
        } catch (error) {
          throw new RerankError(
            this.name,
            `${this.where()}: ${file} is not valid JSON (${describeError(error)})`,
            {
              cause: error,
            },
          );
        }
      }
    }
    let lib: typeof import("@huggingface/transformers");
    try {
      lib = await import("@huggingface/transformers");
    } catch (error) {
      throw new RerankError(this.name, `cannot load @huggingface/transformers: ${describeError(error)}`, {
        cause: error,
      });
    }
    const hint = kind === "hub" ? " (not a local folder; downloading needs internet access)" : "";
    const common = kind === "folder" ? { local_files_only: true } : {};
    let tokenizer: PreTrainedTokenizer;
    try {
      tokenizer = await lib.AutoTokenizer.from_pretrained(location, common);
    } catch (error) {
      throw new RerankError(
        this.name,
        `cannot load the tokenizer of ${this.where()}${hint}: ${describeError(error)}`,
        {
          cause: error,
        },
      );
    }
    let model: PreTrainedModel;
    try {
      model = await lib.AutoModelForSequenceClassification.from_pretrained(location, {
        ...common,
        dtype,
        device: "cpu",
        session_options: this.options.threads ? { intraOpNumThreads: this.options.threads } : {},
      });
    } catch (error) {
      throw new RerankError(
        this.name,
        `cannot load the model of ${this.where()}${hint}: ${describeError(error)}`,
        {
          cause: error,
        },
      );
    }
    const config = model.config as unknown as { max_position_embeddings?: number };
    const caps = [this.options.maxLength, tokenizer.model_max_length, config.max_position_embeddings].filter(
      (x): x is number => typeof x === "number" && Number.isFinite(x) && x > 0,
    );
    const maxLength = caps.length > 0 ? Math.min(...caps) : 512;
    const padId = typeof tokenizer.pad_token_id === "number" ? tokenizer.pad_token_id : 0;
    return {
      tokenizer,
      model,
      Tensor: lib.Tensor,
      maxLength,
      padId,
      padLeft: tokenizer.padding_side === "left",
    };
  }

  private async score(query: string, texts: string[], signal: AbortSignal | undefined): Promise<number[]> {
    const m = await this.loaded();
    throwIfAborted(signal);
    const queryIds = m.tokenizer.encode(query, { add_special_tokens: false });
    const pairs = texts.map((passage) => {
      const enc = m.tokenizer._call(query, {
        text_pair: passage,
        return_tensor: false,
        return_token_type_ids: true,
      }) as unknown as Encoded;
      if (enc.input_ids.length <= m.maxLength) return enc;
      return truncatePair(
        enc,
        queryIds,
        m.tokenizer.encode(passage, { add_special_tokens: false }),
        m.maxLength,
      );
    });
    // Longest first, so each batch pads to similar lengths.
    const order = pairs
      .map((_, i) => i)
      .sort((x, y) => (pairs[y]?.input_ids.length ?? 0) - (pairs[x]?.input_ids.length ?? 0));
    const scores = new Array<number>(texts.length);
    for (let start = 0; start < order.length; start += this.batchSize) {
      throwIfAborted(signal);
      const rows = order.slice(start, start + this.batchSize);
      const batch = await this.runBatch(
        m,
        rows.map((i) => pairs[i] as Encoded),
      );
      rows.forEach((i, k) => {
        scores[i] = batch[k] as number;
      });
    }
    return scores;
  }

  /** Runs one padded batch; returns a probability per row. */
  private async runBatch(m: Loaded, rows: Encoded[]): Promise<number[]> {
    const width = Math.max(...rows.map((r) => r.input_ids.length));
    const size = rows.length * width;
    const ids = new BigInt64Array(size).fill(BigInt(m.padId));
    const mask = new BigInt64Array(size);
    const types = new BigInt64Array(size);
    rows.forEach((r, row) => {
      const offset = row * width + (m.padLeft ? width - r.input_ids.length : 0);
      for (let t = 0; t < r.input_ids.length; t++) {
        ids[offset + t] = BigInt(r.input_ids[t] as number);
        mask[offset + t] = BigInt(r.attention_mask[t] as number);
        types[offset + t] = BigInt(r.token_type_ids?.[t] ?? 0);
      }
    });
    const dims = [rows.length, width];
    const output = (await m.model({
      input_ids: new m.Tensor("int64", ids, dims),
      attention_mask: new m.Tensor("int64", mask, dims),
      token_type_ids: new m.Tensor("int64", types, dims),
    })) as { logits?: Tensor };
    const logits = output.logits;
    if (logits?.dims.length !== 2 || logits.dims[0] !== rows.length) {
      throw new RerankError(
        this.name,
        `the model returned no logits of shape [${rows.length}, 1] (got ${logits ? `[${logits.dims.join(", ")}]` : "none"})`,
      );
    }
    const labels = logits.dims[1] as number;
    if (labels !== 1 && labels !== 2) {
      throw new RerankError(this.name, `expected a model with 1 or 2 labels, got ${labels}`);
    }
    const data = logits.data as Float32Array;
    return rows.map((_, r) =>
      labels === 1
        ? sigmoid(data[r] as number)
        : sigmoid((data[2 * r + 1] as number) - (data[2 * r] as number)),
    );
  }
}
