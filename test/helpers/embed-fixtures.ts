/**
 * Fixtures of the embedding tests:
 *
 * - a tiny feature-extraction model in the layout of
 *   `Xenova/all-MiniLM-L6-v2` (config.json, tokenizer.json,
 *   tokenizer_config.json, onnx/model.onnx), built with onnx-proto, so the
 *   local provider loads a real ONNX model through transformers.js and
 *   onnxruntime without any download. Its graph is BERT-shaped at the edges:
 *   inputs `input_ids`, `attention_mask`, `token_type_ids` [batch, seq] and
 *   output `last_hidden_state` [batch, seq, hidden], where the vector of a
 *   token is row `id` of a fixed matrix ({@link testEmbeddingRow}). Padding
 *   positions get the (non-zero) row of [PAD], so pooling that ignored the
 *   attention mask would give other vectors;
 * - an independent WordPiece tokenizer and pooling, to compute the expected
 *   vectors without transformers.js;
 * - responders for local HTTP servers (test/helpers/rerank-fixtures.ts'
 *   startMockServer) speaking the OpenAI, Cohere v2, Text Embeddings
 *   Inference and Hugging Face Inference API embedding wire formats,
 *   including their error bodies.
 */
import { createHash } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { countTokens } from "gpt-tokenizer/encoding/cl100k_base";
import onnxProto from "onnx-proto";
import { buildTokenizerJson, type MockReply, type MockRequest, TEST_VOCAB } from "./rerank-fixtures.js";

const { onnx } = onnxProto;
const FLOAT = 1;
const INT64 = 7;

/** Hidden size of the test embedding model unless a test asks for another. */
export const TEST_HIDDEN = 16;

/** Row `id` of the test model's token matrix: the output vector of token `id` (length `hidden`). */
export function testEmbeddingRow(id: number, hidden = TEST_HIDDEN): number[] {
  return Array.from({ length: hidden }, (_, j) => Math.sin(id * 7.1 + j * 1.3 + 0.5) * (1 + (id % 3)));
}

/** Weight of the context term in the test model's output (see {@link buildEmbeddingModel}). */
export const TEST_CONTEXT_WEIGHT = 0.5;

/**
 * ONNX bytes of the test feature-extraction model (opset 13):
 *
 *   tok[b, s]  = row input_ids[b, s] of the token matrix       [b, s, H]
 *   ctx[b]     = Σ_s attention_mask[b, s] · tok[b, s]           [b, 1, H]
 *   out[b, s]  = tok[b, s] + 0.5 · ctx[b]                        last_hidden_state
 *
 * So every output depends on the whole (unpadded) text, as with attention,
 * and padding positions carry a non-zero vector that correct pooling skips.
 */
export function buildEmbeddingModel(hidden = TEST_HIDDEN): Uint8Array {
  const V = TEST_VOCAB.length;
  const matrix = Array.from({ length: V }, (_, id) => testEmbeddingRow(id, hidden)).flat();
  const input = (name: string) => ({
    name,
    type: {
      tensorType: {
        elemType: INT64,
        shape: { dim: [{ dimParam: "batch_size" }, { dimParam: "sequence_length" }] },
      },
    },
  });
  const node = (opType: string, inputs: string[], outputs: string[], attribute: object[] = []) => ({
    opType,
    input: inputs,
    output: outputs,
    name: outputs[0],
    attribute,
  });
  const graph = {
    name: "lookup-feature-extractor",
    input: [input("input_ids"), input("attention_mask"), input("token_type_ids")],
    output: [
      {
        name: "last_hidden_state",
        type: {
          tensorType: {
            elemType: FLOAT,
            shape: {
              dim: [{ dimParam: "batch_size" }, { dimParam: "sequence_length" }, { dimValue: hidden }],
            },
          },
        },
      },
    ],
    initializer: [
      { name: "token_matrix", dataType: FLOAT, dims: [V, hidden], floatData: matrix },
      { name: "axis_seq", dataType: INT64, dims: [1], int64Data: [1] },
      { name: "axis_last", dataType: INT64, dims: [1], int64Data: [2] },
      { name: "context_weight", dataType: FLOAT, dims: [], floatData: [TEST_CONTEXT_WEIGHT] },
    ],
    node: [
      node("Gather", ["token_matrix", "input_ids"], ["tok"], [{ name: "axis", type: 2, i: 0 }]),
      node("Cast", ["attention_mask"], ["m"], [{ name: "to", type: 2, i: FLOAT }]),
      node("Unsqueeze", ["m", "axis_last"], ["m3"]),
      node("Mul", ["tok", "m3"], ["masked"]),
      node("ReduceSum", ["masked", "axis_seq"], ["context"], [{ name: "keepdims", type: 2, i: 1 }]),
      node("Mul", ["context", "context_weight"], ["scaled"]),
      node("Add", ["tok", "scaled"], ["last_hidden_state"]),
    ],
  };
  const model = onnx.ModelProto.create({
    irVersion: 7,
    producerName: "knowledge-layer-tests",
    opsetImport: [{ domain: "", version: 13 }],
    graph,
  });
  return onnx.ModelProto.encode(model).finish();
}

/** Options of {@link writeEmbeddingModel}. */
export interface EmbeddingModelOptions {
  /** Hidden size (output dimension). Default {@link TEST_HIDDEN}. */
  hidden?: number;
  /** `model_max_length` of the tokenizer. Default 512. */
  modelMaxLength?: number;
  /** Write a sentence-transformers `1_Pooling/config.json` with this mode. */
  stPooling?: "mean" | "cls";
  /** Files to leave out. */
  omit?: string[];
  /** Files to replace (or add). */
  replace?: Record<string, string | Uint8Array>;
}

/** Writes the test embedding model into `dir` (created if needed). Returns `dir`. */
export function writeEmbeddingModel(dir: string, options: EmbeddingModelOptions = {}): string {
  const hidden = options.hidden ?? TEST_HIDDEN;
  const config = {
    architectures: ["BertModel"],
    model_type: "bert",
    hidden_size: hidden,
    num_attention_heads: 1,
    num_hidden_layers: 1,
    intermediate_size: hidden,
    max_position_embeddings: 512,
    type_vocab_size: 2,
    vocab_size: TEST_VOCAB.length,
    pad_token_id: 0,
  };
  const tokenizerConfig = {
    tokenizer_class: "BertTokenizer",
    do_lower_case: true,
    model_max_length: options.modelMaxLength ?? 512,
    cls_token: "[CLS]",
    sep_token: "[SEP]",
    pad_token: "[PAD]",
    unk_token: "[UNK]",
    mask_token: "[MASK]",
  };
  const files: Record<string, string | Uint8Array> = {
    "config.json": JSON.stringify(config, null, 2),
    "tokenizer.json": JSON.stringify(buildTokenizerJson()),
    "tokenizer_config.json": JSON.stringify(tokenizerConfig, null, 2),
    "onnx/model.onnx": buildEmbeddingModel(hidden),
  };
  if (options.stPooling) {
    files["1_Pooling/config.json"] = JSON.stringify({
      word_embedding_dimension: hidden,
      pooling_mode_cls_token: options.stPooling === "cls",
      pooling_mode_mean_tokens: options.stPooling === "mean",
      pooling_mode_max_tokens: false,
    });
  }
  Object.assign(files, options.replace);
  for (const [rel, content] of Object.entries(files)) {
    if (options.omit?.includes(rel)) continue;
    const path = join(dir, rel);
    mkdirSync(join(path, ".."), { recursive: true });
    writeFileSync(path, content);
  }
  return dir;
}

const VOCAB_IDS = new Map<string, number>(TEST_VOCAB.map((t, i) => [t, i]));

/**
 * Token ids of `text` as the test tokenizer gives them, computed without
 * transformers.js: lower-case, split into words and punctuation, greedy
 * longest-prefix WordPiece over TEST_VOCAB (`##` continuations), [UNK] for a
 * word that cannot be covered, wrapped in [CLS] … [SEP] and cut to
 * `maxLength` (keeping [SEP]).
 */
export function testTokenIds(text: string, maxLength = 512): number[] {
  const words = text.toLowerCase().match(/[a-z0-9]+|[^\sa-z0-9]/g) ?? [];
  const ids: number[] = [];
  for (const word of words) {
    const pieces: number[] = [];
    let start = 0;
    let ok = true;
    while (start < word.length) {
      let end = word.length;
      let found: number | undefined;
      while (end > start) {
        const piece = (start > 0 ? "##" : "") + word.slice(start, end);
        found = VOCAB_IDS.get(piece);
        if (found !== undefined) break;
        end--;
      }
      if (found === undefined) {
        ok = false;
        break;
      }
      pieces.push(found);
      start = end;
    }
    if (ok) ids.push(...pieces);
    else ids.push(VOCAB_IDS.get("[UNK]") as number);
  }
  const body = ids.slice(0, Math.max(0, maxLength - 2));
  return [VOCAB_IDS.get("[CLS]") as number, ...body, VOCAB_IDS.get("[SEP]") as number];
}

/** The vector the test model plus pooling and L2 normalisation should give `text`. */
export function expectedEmbedding(
  text: string,
  options: { pooling?: "mean" | "cls"; maxLength?: number; hidden?: number } = {},
): Float32Array {
  const hidden = options.hidden ?? TEST_HIDDEN;
  const ids = testTokenIds(text, options.maxLength);
  const context = new Float64Array(hidden);
  for (const id of ids) {
    const row = testEmbeddingRow(id, hidden);
    for (let j = 0; j < hidden; j++) context[j] = (context[j] as number) + (row[j] as number);
  }
  const pooled = options.pooling === "cls" ? ids.slice(0, 1) : ids;
  const v = new Float64Array(hidden);
  for (const id of pooled) {
    const row = testEmbeddingRow(id, hidden);
    for (let j = 0; j < hidden; j++) {
      const out = (row[j] as number) + TEST_CONTEXT_WEIGHT * (context[j] as number);
      v[j] = (v[j] as number) + out / pooled.length;
    }
  }
  const norm = Math.hypot(...v);
  return Float32Array.from(v, (x) => x / norm);
}

// ---------------------------------------------------------------------------
// Mock embedding services.
// ---------------------------------------------------------------------------

/**
 * A deterministic, not normalised pseudo-embedding of `text` (length `dim`),
 * derived from SHA-256 of `salt + text`; a mock server's "model".
 */
export function mockVector(text: string, dim: number, salt = ""): number[] {
  const out: number[] = [];
  let block = 0;
  while (out.length < dim) {
    const digest = createHash("sha256").update(`${salt}\u0000${block++}\u0000${text}`).digest();
    for (let i = 0; i + 1 < digest.length && out.length < dim; i += 2) {
      out.push((digest.readUInt16BE(i) / 65535 - 0.5) * 3);
    }
  }
  return out;
}

/** `v` scaled to unit length, as a Float32Array. */
export function unit(v: readonly number[]): Float32Array {
  const norm = Math.hypot(...v);
  return Float32Array.from(v, (x) => x / norm);
}

/** The API keys the mock servers accept. */
export const MOCK_KEYS = { openai: "sk-test-openai", cohere: "co-test-key", hf: "hf_test_token" } as const;

/** cl100k_base token count, special-token strings counted as text (as the embeddings API does). */
export function cl100kCount(text: string): number {
  return countTokens(text, { disallowedSpecial: new Set() });
}

/** Dimensions the mock OpenAI server gives per model (as the real API does by default). */
const OPENAI_MOCK_DIMS: Record<string, number> = {
  "text-embedding-3-small": 1536,
  "text-embedding-3-large": 3072,
  "text-embedding-ada-002": 1536,
};

/** Options of {@link openAiResponder}. */
export interface OpenAiMockOptions {
  /** Required bearer key; undefined = none required. Default {@link MOCK_KEYS.openai}. */
  key?: string | null;
  /** Dimension for models not in the OpenAI table (compatible servers). Default 8. */
  otherDim?: number;
  /** Input limit in cl100k tokens. Default 8191. */
  maxTokens?: number;
  /** Count tokens (for the limit check). Default: cl100k_base via gpt-tokenizer. */
  countTokens?: (text: string) => number;
  /** Path prefix of the endpoint. Default `/v1`. */
  prefix?: string;
  /** Answer the `data` array in reverse order (indices still right). Default true. */
  shuffle?: boolean;
}

/**
 * A server speaking OpenAI's `POST /v1/embeddings`: checks the bearer key,
 * `model`, `input` (non-empty strings, at most 2,048, each within the token
 * limit), `encoding_format`, `dimensions` (text-embedding-3 only); answers
 * `{ object: "list", data: [{ object, index, embedding }], model, usage }`
 * with data in reverse order, or `{ error: { message, type, param, code } }`.
 */
export function openAiResponder(options: OpenAiMockOptions = {}): (req: MockRequest) => MockReply {
  const key = options.key === undefined ? MOCK_KEYS.openai : options.key;
  const prefix = options.prefix ?? "/v1";
  const maxTokens = options.maxTokens ?? 8191;
  const count = options.countTokens ?? cl100kCount;
  const err = (
    status: number,
    message: string,
    type = "invalid_request_error",
    code: string | null = null,
  ) => ({
    status,
    body: { error: { message, type, param: null, code } },
  });
  return (req) => {
    if (req.method !== "POST" || req.path !== `${prefix}/embeddings`) {
      return err(
        404,
        `Unknown request URL: ${req.method} ${req.path}.`,
        "invalid_request_error",
        "unknown_url",
      );
    }
    if (key !== null && req.headers.authorization !== `Bearer ${key}`) {
      return err(
        401,
        "Incorrect API key provided: sk-***. You can find your API key at https://platform.openai.com/account/api-keys.",
        "invalid_request_error",
        "invalid_api_key",
      );
    }
    const body = req.body as {
      model?: unknown;
      input?: unknown;
      dimensions?: unknown;
      encoding_format?: unknown;
    };
    if (typeof body.model !== "string") return err(400, "you must provide a model parameter");
    const input = body.input;
    if (!Array.isArray(input) || input.length === 0)
      return err(400, "'$.input' is invalid. Please check the API reference.");
    if (input.length > 2048) return err(400, "'$.input' is too long: at most 2048 inputs per request.");
    for (const text of input) {
      if (typeof text !== "string" || text === "")
        return err(400, "'$.input' is invalid. Please check the API reference.");
      const n = count(text);
      if (n > maxTokens) {
        return err(
          400,
          `This model's maximum context length is ${maxTokens + 1} tokens, however you requested ${n} tokens (${n} in your prompt; 0 for the completion). Please reduce your prompt; or completion length.`,
        );
      }
    }
    let dim = OPENAI_MOCK_DIMS[body.model] ?? options.otherDim ?? 8;
    if (body.dimensions !== undefined) {
      if (!body.model.startsWith("text-embedding-3")) {
        return err(400, "This model does not support specifying dimensions.");
      }
      dim = body.dimensions as number;
    }
    const format = body.encoding_format ?? "float";
    if (format !== "float" && format !== "base64") {
      return err(400, `'${String(format)}' is not one of ['float', 'base64'] - 'encoding_format'`);
    }
    const data = (input as string[]).map((text, index) => {
      const vector = mockVector(text, dim, body.model as string);
      return {
        object: "embedding",
        index,
        embedding:
          format === "base64" ? Buffer.from(Float32Array.from(vector).buffer).toString("base64") : vector,
      };
    });
    if (options.shuffle !== false) data.reverse();
    return {
      body: {
        object: "list",
        data,
        model: body.model,
        usage: { prompt_tokens: input.length, total_tokens: input.length },
      },
    };
  };
}

/** Dimensions of the mock Cohere server per model. */
const COHERE_MOCK_DIMS: Record<string, number> = {
  "embed-english-v3.0": 1024,
  "embed-multilingual-v3.0": 1024,
  "embed-english-light-v3.0": 384,
  "embed-v4.0": 1536,
};

/**
 * A server speaking Cohere's `POST /v2/embed`: checks the bearer key,
 * `model`, `texts` (1-96), `input_type` (required for v3+ models),
 * `embedding_types`; answers `{ id, embeddings: { float }, texts, meta,
 * response_type: "embeddings_by_type" }` whose vectors depend on input_type,
 * or `{ message }` errors.
 */
export function cohereEmbedResponder(req: MockRequest): MockReply {
  const err = (status: number, message: string) => ({ status, body: { message } });
  if (req.method !== "POST" || req.path !== "/v2/embed") return err(404, "not found");
  if (req.headers.authorization !== `Bearer ${MOCK_KEYS.cohere}`) return err(401, "invalid api token");
  const body = req.body as {
    model?: unknown;
    texts?: unknown;
    input_type?: unknown;
    embedding_types?: unknown;
    output_dimension?: unknown;
  };
  if (typeof body.model !== "string") return err(400, "invalid request: model must be a string");
  const base = COHERE_MOCK_DIMS[body.model];
  if (base === undefined)
    return err(404, `model '${body.model}' not found, make sure the correct model ID was used`);
  if (!Array.isArray(body.texts) || body.texts.length === 0)
    return err(400, "invalid request: texts must not be empty");
  if (body.texts.length > 96) {
    return err(
      400,
      `invalid request: total number of texts must be at most 96 - received ${body.texts.length}`,
    );
  }
  if (body.input_type !== "search_document" && body.input_type !== "search_query") {
    return err(400, "invalid request: valid input_type must be provided with the provided model");
  }
  if (!Array.isArray(body.embedding_types) || !body.embedding_types.includes("float")) {
    return err(400, "invalid request: embedding_types must include float");
  }
  const dim = typeof body.output_dimension === "number" ? body.output_dimension : base;
  const floats = (body.texts as string[]).map((t) => mockVector(t, dim, `${body.model}:${body.input_type}`));
  return {
    body: {
      id: "mock-embed-id",
      embeddings: { float: floats },
      texts: body.texts,
      meta: { api_version: { version: "2" }, billed_units: { input_tokens: body.texts.length } },
      response_type: "embeddings_by_type",
    },
  };
}

/** Options of {@link teiResponder}. */
export interface TeiMockOptions {
  /** Output dimension. Default 12. */
  dim?: number;
  /** TEI's `--max-client-batch-size`. Default 32. */
  maxBatch?: number;
  /** Required bearer token (TEI's `--api-key`), or undefined for none. */
  key?: string;
  /** Endpoint path. Default `/embed`. */
  path?: string;
  /** Salt of the mock vectors (the "model"). Default `tei`. */
  salt?: string;
}

/**
 * A server speaking Text Embeddings Inference's `POST /embed` (also the
 * Inference API's feature-extraction pipeline, with `path`): checks the
 * token, `inputs` (non-empty strings, at most `maxBatch`), answers
 * `number[][]` (normalised when `normalize` is not false) or
 * `{ error, error_type }`.
 */
export function teiResponder(options: TeiMockOptions = {}): (req: MockRequest) => MockReply {
  const dim = options.dim ?? 12;
  const maxBatch = options.maxBatch ?? 32;
  const path = options.path ?? "/embed";
  const err = (status: number, error: string, errorType: string) => ({
    status,
    body: { error, error_type: errorType },
  });
  return (req) => {
    if (req.method !== "POST" || req.path !== path) return err(404, "Not Found", "Unhealthy");
    if (options.key !== undefined && req.headers.authorization !== `Bearer ${options.key}`) {
      return err(401, "Unauthorized", "Unhealthy");
    }
    const body = req.body as { inputs?: unknown; normalize?: unknown };
    const inputs = typeof body.inputs === "string" ? [body.inputs] : body.inputs;
    if (!Array.isArray(inputs))
      return err(422, "Failed to deserialize the JSON body: missing field `inputs`", "Validation");
    if (inputs.length === 0) return err(422, "`inputs` cannot be empty", "Empty");
    if (inputs.length > maxBatch) {
      return err(413, `batch size ${inputs.length} > maximum allowed batch size ${maxBatch}`, "Validation");
    }
    for (const text of inputs) {
      if (typeof text !== "string" || text === "") return err(422, "`inputs` cannot be empty", "Empty");
    }
    const vectors = (inputs as string[]).map((t) => {
      const v = mockVector(t, dim, options.salt ?? "tei");
      return body.normalize === false ? v : Array.from(unit(v));
    });
    return { body: vectors };
  };
}
