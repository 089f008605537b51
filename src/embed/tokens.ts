/**
 * cl100k_base token counting and windowing for OpenAI-style embedding APIs
 * (the encoding of `text-embedding-3-*` and `text-embedding-ada-002`), via
 * gpt-tokenizer. Special-token strings such as `<|endoftext|>` are counted as
 * plain text, as the embeddings endpoint treats them.
 */
import { createRequire } from "node:module";
import { splitWindows } from "./vectors.js";

interface Cl100k {
  encode(text: string, options?: { disallowedSpecial?: Set<string> }): number[];
  decode(ids: number[]): string;
}

const require = createRequire(import.meta.url);
let cl100k: Cl100k | undefined;
const PLAIN = { disallowedSpecial: new Set<string>() };

function encoding(): Cl100k {
  // The CommonJS build loads synchronously (as src/chunk/measure.ts does).
  cl100k ??= require("gpt-tokenizer/cjs/encoding/cl100k_base") as Cl100k;
  return cl100k;
}

/** Texts longer than this are encoded piece by piece (BPE is quadratic in the length of one pre-token). */
const PIECE = 1024;

/** Pieces of at most {@link PIECE} characters, cut before a whitespace character when one is in the second half. */
function pieces(text: string): string[] {
  const out: string[] = [];
  let p = 0;
  while (p < text.length) {
    let q = Math.min(text.length, p + PIECE);
    if (q < text.length) {
      let w = q;
      while (w > p + PIECE / 2 && !/\s/.test(text.charAt(w))) w--;
      if (w > p + PIECE / 2) q = w;
      else {
        const c = text.charCodeAt(q);
        if (c >= 0xdc00 && c <= 0xdfff) q--;
      }
    }
    out.push(text.slice(p, q));
    p = q;
  }
  return out;
}

/**
 * cl100k_base token ids of `text`. Texts over 1,024 characters are encoded in
 * pieces cut before whitespace, which is exact wherever a cut falls on a
 * pre-token boundary (an unbroken run is cut every 1,024 characters, which
 * can only add tokens).
 */
export function encodeCl100k(text: string): number[] {
  const enc = encoding();
  if (text.length <= PIECE) return enc.encode(text, PLAIN);
  const ids: number[] = [];
  for (const piece of pieces(text)) for (const id of enc.encode(piece, PLAIN)) ids.push(id);
  return ids;
}

/**
 * An upper bound of the token count of `text` that is exact when it matters:
 * the UTF-8 byte length for short texts (a BPE token covers at least one
 * byte), the cl100k_base count otherwise.
 */
export function tokenBound(text: string): number {
  const bytes = Buffer.byteLength(text, "utf8");
  return bytes <= 2048 ? bytes : encodeCl100k(text).length;
}

/** One part of a text after windowing, with its token count (its weight in a mean). */
export interface TextWindow {
  text: string;
  tokens: number;
}

/**
 * Fits `text` into `limit` tokens: unchanged when it fits; else either its
 * first `limit` tokens (`truncate`) or ⌈n/limit⌉ consecutive windows of
 * near-equal token count (`mean`), each decoded back to text. A window whose
 * decoded text re-encodes to more than `limit` tokens (a cut inside a
 * multi-byte character) is shortened until it fits.
 */
export function fitToTokenLimit(text: string, limit: number, mode: "mean" | "truncate"): TextWindow[] {
  const bound = tokenBound(text);
  if (bound <= limit) return [{ text, tokens: bound }];
  const ids = encodeCl100k(text);
  if (ids.length <= limit) return [{ text, tokens: ids.length }];
  const windows = mode === "truncate" ? [ids.slice(0, limit)] : splitWindows(ids, limit);
  const enc = encoding();
  return windows.map((window) => {
    let w = window;
    for (;;) {
      const decoded = enc.decode(w);
      const count = encodeCl100k(decoded).length;
      if (count <= limit) return { text: decoded, tokens: count };
      w = w.slice(0, w.length - Math.max(1, count - limit));
    }
  });
}
