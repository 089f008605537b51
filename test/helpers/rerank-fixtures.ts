/**
 * Builds a tiny cross-encoder in the layout of
 * `cross-encoder/ms-marco-MiniLM-L-6-v2` (config.json, tokenizer.json,
 * tokenizer_config.json, onnx/model.onnx) so the tests load a real model
 * through transformers.js and onnxruntime without any download.
 *
 * The model is a lexical-overlap "cross-encoder" with hand-set weights:
 *
 *   E       = Gather(I_V, input_ids)                 one-hot rows, [b, s, V]
 *   m       = float(attention_mask), t = float(token_type_ids)
 *   qv      = Σ_s E · (m − m·t)                      token counts of segment A (query), [b, V]
 *   pv      = Σ_s E · (m·t)                          token counts of segment B (passage), [b, V]
 *   logit   = (qv ⊙ pv) · W + BIAS                   [b, 1]
 *
 * i.e. logit = Σ_tokens W[tok] · count_query(tok) · count_passage(tok) + BIAS.
 * W: [SEP] 0.5 (one [SEP] closes each segment, so a pair whose passage kept
 * its final [SEP] gets +0.5), "novel" 2, other content words 1 (including the
 * word pieces "wr", "##ote", "##itten", so "wrote" and "written" share "wr"),
 * stop words, punctuation, [CLS], [PAD], [UNK] 0. BIAS = −1.5.
 * A pair with no shared content word has logit 0.5 − 1.5 = −1.
 *
 * The model reads token_type_ids, so a loader that dropped them (or zeroed
 * them) would give every passage logit −1.5 (pv = 0) — the tests would see it.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import onnxProto from "onnx-proto";

const { onnx } = onnxProto;

/** Vocabulary of the test tokenizer, id = position. */
export const TEST_VOCAB = [
  "[PAD]",
  "[UNK]",
  "[CLS]",
  "[SEP]",
  "[MASK]",
  "the",
  "a",
  "of",
  "for",
  "was",
  "by",
  "were",
  "who",
  "is",
  "on",
  "and",
  ".",
  "?",
  ",",
  "novel",
  "wr",
  "##ote",
  "##itten",
  "retired",
  "sailor",
  "reviews",
  "mixed",
  "recipe",
  "lentil",
  "soup",
  "rust",
  "install",
  "##ing",
  "cargo",
  "ship",
  "##s",
  "sea",
  "cat",
  "mat",
  "dog",
] as const;

const SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];
const STOP = new Set(["the", "a", "of", "for", "was", "by", "were", "who", "is", "on", "and", ".", "?", ","]);

/** Match weight of each token. */
export function tokenWeight(token: string): number {
  if (token === "[SEP]") return 0.5;
  if (SPECIAL.includes(token) || STOP.has(token)) return 0;
  if (token === "novel") return 2;
  return 1;
}

/** Bias of the logit. */
export const TEST_BIAS = -1.5;

/** Numerically stable logistic function, for expected values. */
export function sigmoid(x: number): number {
  return 1 / (1 + Math.exp(-x));
}

const FLOAT = 1;
const INT64 = 7;

/**
 * The ONNX model bytes (opset 13). With `labels` > 1 the head has that many
 * columns: column `labels − 1` is the relevance logit above, the others are
 * constant 0 (so a two-label softmax gives sigmoid(logit) again).
 */
export function buildTestModel(labels = 1): Uint8Array {
  const V = TEST_VOCAB.length;
  const identity: number[] = [];
  for (let i = 0; i < V; i++) for (let j = 0; j < V; j++) identity.push(i === j ? 1 : 0);
  const weights = TEST_VOCAB.flatMap((t) =>
    Array.from({ length: labels }, (_, k) => (k === labels - 1 ? tokenWeight(t) : 0)),
  );
  const bias = Array.from({ length: labels }, (_, k) => (k === labels - 1 ? TEST_BIAS : 0));
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
    name: "lexical-overlap-cross-encoder",
    input: [input("input_ids"), input("attention_mask"), input("token_type_ids")],
    output: [
      {
        name: "logits",
        type: {
          tensorType: { elemType: FLOAT, shape: { dim: [{ dimParam: "batch_size" }, { dimValue: labels }] } },
        },
      },
    ],
    initializer: [
      { name: "embeddings", dataType: FLOAT, dims: [V, V], floatData: identity },
      { name: "weights", dataType: FLOAT, dims: [V, labels], floatData: weights },
      { name: "bias", dataType: FLOAT, dims: [labels], floatData: bias },
      { name: "axis_seq", dataType: INT64, dims: [1], int64Data: [1] },
      { name: "axis_last", dataType: INT64, dims: [1], int64Data: [2] },
    ],
    node: [
      node("Gather", ["embeddings", "input_ids"], ["onehot"], [{ name: "axis", type: 2, i: 0 }]),
      node("Cast", ["attention_mask"], ["m"], [{ name: "to", type: 2, i: FLOAT }]),
      node("Cast", ["token_type_ids"], ["t"], [{ name: "to", type: 2, i: FLOAT }]),
      node("Mul", ["m", "t"], ["pmask"]),
      node("Sub", ["m", "pmask"], ["qmask"]),
      node("Unsqueeze", ["qmask", "axis_last"], ["qmask3"]),
      node("Unsqueeze", ["pmask", "axis_last"], ["pmask3"]),
      node("Mul", ["onehot", "qmask3"], ["qtok"]),
      node("Mul", ["onehot", "pmask3"], ["ptok"]),
      node("ReduceSum", ["qtok", "axis_seq"], ["qv"], [{ name: "keepdims", type: 2, i: 0 }]),
      node("ReduceSum", ["ptok", "axis_seq"], ["pv"], [{ name: "keepdims", type: 2, i: 0 }]),
      node("Mul", ["qv", "pv"], ["shared"]),
      node("MatMul", ["shared", "weights"], ["raw"]),
      node("Add", ["raw", "bias"], ["logits"]),
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

/** tokenizer.json of a lower-casing BERT WordPiece tokenizer over {@link TEST_VOCAB}. */
export function buildTokenizerJson(): object {
  const vocab = Object.fromEntries(TEST_VOCAB.map((t, i) => [t, i]));
  const special = (content: string) => ({
    id: vocab[content],
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true,
  });
  const tok = (id: string, typeId: number) => ({ SpecialToken: { id, type_id: typeId } });
  const seq = (id: "A" | "B", typeId: number) => ({ Sequence: { id, type_id: typeId } });
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: SPECIAL.map(special),
    normalizer: {
      type: "BertNormalizer",
      clean_text: true,
      handle_chinese_chars: true,
      strip_accents: null,
      lowercase: true,
    },
    pre_tokenizer: { type: "BertPreTokenizer" },
    post_processor: {
      type: "TemplateProcessing",
      single: [tok("[CLS]", 0), seq("A", 0), tok("[SEP]", 0)],
      pair: [tok("[CLS]", 0), seq("A", 0), tok("[SEP]", 0), seq("B", 1), tok("[SEP]", 1)],
      special_tokens: {
        "[CLS]": { id: "[CLS]", ids: [vocab["[CLS]"]], tokens: ["[CLS]"] },
        "[SEP]": { id: "[SEP]", ids: [vocab["[SEP]"]], tokens: ["[SEP]"] },
      },
    },
    decoder: { type: "WordPiece", prefix: "##", cleanup: true },
    model: {
      type: "WordPiece",
      unk_token: "[UNK]",
      continuing_subword_prefix: "##",
      max_input_chars_per_word: 100,
      vocab,
    },
  };
}

/** Files of a test model folder, by relative path. */
export function testModelFiles(
  options: { modelMaxLength?: number; labels?: number } = {},
): Record<string, string | Uint8Array> {
  const labels = options.labels ?? 1;
  const config = {
    architectures: ["BertForSequenceClassification"],
    model_type: "bert",
    hidden_size: 8,
    num_attention_heads: 1,
    num_hidden_layers: 1,
    intermediate_size: 8,
    max_position_embeddings: 512,
    type_vocab_size: 2,
    vocab_size: TEST_VOCAB.length,
    pad_token_id: 0,
    id2label: Object.fromEntries(Array.from({ length: labels }, (_, k) => [String(k), `LABEL_${k}`])),
    label2id: Object.fromEntries(Array.from({ length: labels }, (_, k) => [`LABEL_${k}`, k])),
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
  return {
    "config.json": JSON.stringify(config, null, 2),
    "tokenizer.json": JSON.stringify(buildTokenizerJson()),
    "tokenizer_config.json": JSON.stringify(tokenizerConfig, null, 2),
    "onnx/model.onnx": buildTestModel(labels),
  };
}

/**
 * Writes the test model into `dir` (created if needed), leaving out the files
 * in `omit` and replacing those in `replace`. Returns `dir`.
 */
export function writeTestModel(
  dir: string,
  options: {
    modelMaxLength?: number;
    labels?: number;
    omit?: string[];
    replace?: Record<string, string | Uint8Array>;
  } = {},
): string {
  const files = { ...testModelFiles(options), ...options.replace };
  for (const [rel, content] of Object.entries(files)) {
    if (options.omit?.includes(rel)) continue;
    const path = join(dir, rel);
    mkdirSync(join(path, ".."), { recursive: true });
    writeFileSync(path, content);
  }
  return dir;
}

/**
 * The logit the test model gives a (query, passage) pair, from WordPiece
 * token lists of each side (without specials; [SEP] handling included:
 * +0.5 when the passage keeps its final [SEP]).
 */
export function expectedLogit(queryTokens: string[], passageTokens: string[], passageSep = true): number {
  const count = (xs: string[]) => {
    const c = new Map<string, number>();
    for (const x of xs) c.set(x, (c.get(x) ?? 0) + 1);
    return c;
  };
  const q = count(queryTokens);
  const p = count(passageTokens);
  let s = passageSep ? 0.5 : 0;
  for (const [tok, n] of q) s += tokenWeight(tok) * n * (p.get(tok) ?? 0);
  return s + TEST_BIAS;
}

// ---------------------------------------------------------------------------
// Mock HTTP servers speaking the Cohere v2 rerank and OpenAI chat-completions
// wire formats, scoring with a small lexical relevance function.
// ---------------------------------------------------------------------------

const MOCK_STOP = new Set([
  "the",
  "a",
  "an",
  "of",
  "for",
  "was",
  "by",
  "were",
  "who",
  "how",
  "do",
  "i",
  "is",
  "on",
  "and",
  "with",
  "then",
  "at",
  "to",
]);
/** Words the mock servers treat as the same (a stand-in for a real model's semantics). */
const MOCK_SAME: Record<string, string> = {
  wrote: "write",
  written: "write",
  writer: "write",
  installing: "install",
};

/** Content words of a text, lower-cased and normalised by {@link MOCK_SAME}. */
function mockWords(text: string): string[] {
  return (text.toLowerCase().match(/[a-z0-9]+/g) ?? [])
    .filter((w) => !MOCK_STOP.has(w))
    .map((w) => MOCK_SAME[w] ?? w);
}

/** The mock servers' relevance: 1 − e^(−k) for k distinct query content words found in the document. */
export function lexicalRelevance(query: string, doc: string): number {
  const d = new Set(mockWords(doc));
  const k = new Set(mockWords(query).filter((w) => d.has(w))).size;
  return 1 - Math.exp(-k);
}

/** One request a mock server received. */
export interface MockRequest {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
}

/** A reply a mock server sends. */
export interface MockReply {
  status?: number;
  headers?: Record<string, string>;
  /** JSON-encoded unless a string. */
  body?: unknown;
  /** Wait this long before answering (ms). */
  delayMs?: number;
}

/** A running mock server. */
export interface MockServer {
  /** `http://127.0.0.1:<port>` */
  url: string;
  requests: MockRequest[];
  /** Replies used, in order, before the default behaviour (one per request). */
  script: MockReply[];
  close(): Promise<void>;
}

/**
 * Starts a local HTTP server. Requests under `/broken` always get a 401
 * with a JSON error body; others take the next scripted reply, else
 * `respond(request)`.
 */
export async function startMockServer(respond: (req: MockRequest) => MockReply): Promise<MockServer> {
  const { createServer } = await import("node:http");
  const requests: MockRequest[] = [];
  const script: MockReply[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const raw = Buffer.concat(chunks).toString("utf8");
      let body: unknown = raw;
      try {
        body = JSON.parse(raw);
      } catch {
        // keep the raw text
      }
      const request: MockRequest = {
        method: req.method ?? "",
        path: req.url ?? "",
        headers: req.headers,
        body,
      };
      requests.push(request);
      const reply: MockReply = request.path.startsWith("/broken")
        ? { status: 401, body: { message: "invalid api token" } }
        : (script.shift() ?? respond(request));
      const send = (): void => {
        if (res.destroyed) return;
        const text = typeof reply.body === "string" ? reply.body : JSON.stringify(reply.body ?? {});
        res.writeHead(reply.status ?? 200, { "content-type": "application/json", ...reply.headers });
        res.end(text);
      };
      if (reply.delayMs) setTimeout(send, reply.delayMs);
      else send();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    script,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The API key the mock Cohere server accepts. */
export const MOCK_COHERE_KEY = "test-key";

/** Default behaviour of a Cohere v2 `/v2/rerank` endpoint, scoring with {@link lexicalRelevance}. */
export function cohereResponder(req: MockRequest): MockReply {
  if (req.method !== "POST" || req.path !== "/v2/rerank")
    return { status: 404, body: { message: "not found" } };
  if (req.headers.authorization !== `Bearer ${MOCK_COHERE_KEY}`)
    return { status: 401, body: { message: "invalid api token" } };
  const body = req.body as { model?: unknown; query?: unknown; documents?: unknown; top_n?: unknown };
  if (typeof body.model !== "string" || typeof body.query !== "string" || !Array.isArray(body.documents)) {
    return { status: 400, body: { message: "invalid request: model, query and documents are required" } };
  }
  if (body.documents.length === 0) {
    return { status: 400, body: { message: "invalid request: list of documents must not be empty" } };
  }
  const query = body.query;
  const results = (body.documents as string[])
    .map((d, index) => ({ index, relevance_score: lexicalRelevance(query, d) }))
    .sort((a, b) => b.relevance_score - a.relevance_score || a.index - b.index);
  const topN = typeof body.top_n === "number" ? body.top_n : results.length;
  return {
    body: {
      id: "mock-rerank-id",
      results: results.slice(0, topN),
      meta: { api_version: { version: "2" }, billed_units: { search_units: 1 } },
    },
  };
}

/** Query and numbered passages of a ranking prompt built by src/rerank/llm.ts. */
export function parsePrompt(req: MockRequest): { query: string; passages: string[] } {
  const messages = (req.body as { messages: { role: string; content: string }[] }).messages;
  const user = messages.find((m) => m.role === "user")?.content ?? "";
  const query = /^Query: (.*)$/m.exec(user)?.[1] ?? "";
  const passages = [...user.matchAll(/^\[(\d+)\] (.*)$/gm)].map((m) => m[2] as string);
  return { query, passages };
}

/** A chat-completions reply whose message content is `content`. */
export function chatReply(content: string | null): MockReply {
  return {
    body: {
      id: "chatcmpl-mock",
      object: "chat.completion",
      created: 0,
      model: "mock",
      choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
      usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
    },
  };
}

/** The ranking (1-based passage numbers) the mock LLM gives: lexical relevance, ties by number. */
export function mockRanking(req: MockRequest): number[] {
  const { query, passages } = parsePrompt(req);
  return passages
    .map((p, i) => ({ n: i + 1, s: lexicalRelevance(query, p) }))
    .sort((a, b) => b.s - a.s || a.n - b.n)
    .map((x) => x.n);
}

/** Default behaviour of `/v1/chat/completions`: answers the mock ranking as a JSON array. */
export function chatResponder(req: MockRequest): MockReply {
  if (req.method !== "POST" || req.path !== "/v1/chat/completions") {
    return { status: 404, body: { error: { message: "not found", type: "invalid_request_error" } } };
  }
  return chatReply(JSON.stringify(mockRanking(req)));
}
