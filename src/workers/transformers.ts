/**
 * Worker-side loading of a transformers.js (onnxruntime-node) model, shared
 * by the local embedder's and the cross-encoder's worker code: both load a
 * tokenizer and an ONNX session from a folder or a Hugging Face id with the
 * same options and the same error messages.
 */
import { existsSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { WORKER_RUNTIME, WorkerPool } from "./pool.js";

/** What a worker needs to load a transformers.js model (structured-cloned into it). */
export interface TransformersModelOptions {
  /** Folder path or Hugging Face id, as transformers.js takes it. */
  location: string;
  /** Load with `local_files_only` (a folder, or downloads disabled). */
  localOnly: boolean;
  /** transformers.js `env.allowRemoteModels` inside the worker. */
  allowRemote: boolean;
  /** Weight format (`fp32`, `q8`, …). */
  dtype: string;
  /** onnxruntime intra-op threads, or undefined for its default. */
  threads: number | undefined;
  /** Token cap, or undefined for the model's. */
  maxLength: number | undefined;
  /** `model folder "…"` / `Hugging Face model "…"`, for error messages. */
  where: string;
  /** Appended to load errors (e.g. a hint about internet access). */
  hint: string;
}

/**
 * Worker-side helper (plain JavaScript, after {@link WORKER_RUNTIME}):
 * `loadTransformersModel(o, modelClass)` loads transformers.js from
 * `workerData.transformers`, then the tokenizer and
 * `lib[modelClass].from_pretrained(o.location, …)` on the CPU, and resolves
 * to `{ lib, tokenizer, model, config, maxLength, padId, padLeft }`, where
 * `maxLength` is the smallest of `o.maxLength`, the tokenizer's
 * `model_max_length` and the config's `max_position_embeddings` (512 when
 * none is set). Failures read `cannot load the tokenizer|model of <where><hint>: …`.
 */
export const TRANSFORMERS_LOADER = `
async function loadTransformersModel(o, modelClass) {
  const lib = require(workerData.transformers);
  lib.env.allowRemoteModels = o.allowRemote;
  lib.env.allowLocalModels = true;
  const common = o.localOnly ? { local_files_only: true } : {};
  let tokenizer, model;
  try {
    tokenizer = await lib.AutoTokenizer.from_pretrained(o.location, common);
  } catch (e) {
    throw new Error("cannot load the tokenizer of " + o.where + o.hint + ": " + errorMessage(e));
  }
  try {
    model = await lib[modelClass].from_pretrained(o.location, {
      ...common,
      dtype: o.dtype,
      device: "cpu",
      session_options: o.threads ? { intraOpNumThreads: o.threads } : {},
    });
  } catch (e) {
    throw new Error("cannot load the model of " + o.where + o.hint + ": " + errorMessage(e));
  }
  const config = model.config || {};
  const caps = [o.maxLength, tokenizer.model_max_length, config.max_position_embeddings].filter(
    (x) => typeof x === "number" && Number.isFinite(x) && x > 0,
  );
  return {
    lib,
    tokenizer,
    model,
    config,
    maxLength: caps.length > 0 ? Math.min(...caps) : 512,
    padId: typeof tokenizer.pad_token_id === "number" ? tokenizer.pad_token_id : 0,
    padLeft: tokenizer.padding_side === "left",
  };
}
`;

/**
 * A {@link WorkerPool} whose workers run `task` (plain JavaScript calling
 * `serve(ready, handle)`, with `loadTransformersModel` and
 * `workerData.options` available) on transformers.js.
 * @param label for error messages, e.g. `cross-encoder worker`.
 * @param extra more `workerData` fields for the task code.
 */
export function transformersPool(
  size: number,
  label: string,
  task: string,
  options: unknown,
  extra: Record<string, unknown> = {},
): WorkerPool {
  return new WorkerPool({
    size,
    label,
    source: WORKER_RUNTIME + TRANSFORMERS_LOADER + task,
    workerData: () => {
      let transformers: string;
      try {
        transformers = createRequire(import.meta.url).resolve("@huggingface/transformers");
      } catch (error) {
        throw new Error(`cannot find @huggingface/transformers: ${(error as Error).message}`, {
          cause: error,
        });
      }
      return { ...extra, transformers, options };
    },
  });
}

/**
 * What is wrong with a local transformers.js model folder, or undefined when it has
 * what loading needs: `config.json`, `tokenizer.json`, `tokenizer_config.json` and the
 * weights file (e.g. `onnx/model.onnx`). Checked on the calling thread before any
 * worker starts, so a wrong path fails fast. `layout` names the model whose folder
 * layout is expected, for the message.
 */
export function modelFolderProblem(location: string, weights: string, layout: string): string | undefined {
  if (!existsSync(location) || !statSync(location).isDirectory()) return "does not exist or is not a folder";
  const needed = ["config.json", "tokenizer.json", "tokenizer_config.json", weights];
  const missing = needed.filter((f) => !existsSync(join(location, f)));
  if (missing.length === 0) return undefined;
  return `lacks ${missing.join(", ")} (expected the layout of ${layout}: ${needed.join(", ")})`;
}
