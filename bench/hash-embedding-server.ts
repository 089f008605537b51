/**
 * A deterministic stand-in for an embedding model, served over OpenAI's
 * embeddings wire format (`POST /v1/embeddings`), for `bench/scale.ts`.
 *
 * Vectors: feature hashing of word unigrams and bigrams into `dim` (512)
 * dimensions with sign hashing, L2-normalised.
 * - Tokens: lower-cased runs of letters and digits (`[\p{L}\p{N}]+`).
 * - Features: every token (weight 1) and every pair of adjacent tokens
 *   (weight 0.5); a feature seen `tf` times weighs `w × (1 + ln tf)`.
 * - A feature's 32-bit hash (FNV-1a over its UTF-16 code units, then the
 *   murmur3 finaliser) picks the dimension (`(h & 0x7fffffff) mod dim`) and the
 *   sign (the top bit), so collisions cancel out on average.
 * - The sum is L2-normalised; a text without tokens gets the unit vector e₀.
 *
 * Texts sharing words and phrases get a high cosine, unrelated texts a cosine
 * near 0, so nearest-neighbour recall is meaningful. The function is pure: the
 * benchmark recomputes the vector of any stored chunk text exactly.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { performance } from "node:perf_hooks";

export const HASH_DIM = 512;
/** Model name the KB is configured with (no e5/bge/nomic prefix rules apply to it). */
export const HASH_MODEL = "feature-hash-512";

const TOKEN = /[\p{L}\p{N}]+/gu;

/** FNV-1a over UTF-16 code units, then the murmur3 32-bit finaliser. */
export function hash32(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** The vector of `text` (see the module comment). */
export function hashEmbed(text: string, dim = HASH_DIM): Float32Array {
  const tf = new Map<string, number>();
  let prev: string | undefined;
  for (const m of text.toLowerCase().matchAll(TOKEN)) {
    const token = m[0];
    tf.set(token, (tf.get(token) ?? 0) + 1);
    if (prev !== undefined) {
      const bigram = `${prev}\u0000${token}`;
      tf.set(bigram, (tf.get(bigram) ?? 0) + 1);
    }
    prev = token;
  }
  const acc = new Float64Array(dim);
  for (const [feature, count] of tf) {
    const h = hash32(feature);
    const weight = (feature.includes("\u0000") ? 0.5 : 1) * (1 + Math.log(count));
    const d = (h & 0x7fffffff) % dim;
    acc[d] = (acc[d] as number) + (h & 0x80000000 ? -weight : weight);
  }
  let norm = 0;
  for (let i = 0; i < dim; i++) norm += (acc[i] as number) ** 2;
  const out = new Float32Array(dim);
  if (norm === 0) {
    out[0] = 1;
    return out;
  }
  const inv = 1 / Math.sqrt(norm);
  for (let i = 0; i < dim; i++) out[i] = (acc[i] as number) * inv;
  return out;
}

/** Unit vectors of a 32-bit seeded generator (mulberry32), a pool for {@link cheapEmbed}. */
function cheapPool(size: number, dim: number): Float32Array[] {
  let state = 0x9e3779b9;
  const next = (): number => {
    state = (state + 0x6d2b79f5) | 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296 - 0.5;
  };
  return Array.from({ length: size }, () => {
    const v = Float32Array.from({ length: dim }, next);
    const inv = 1 / Math.hypot(...v);
    return v.map((x) => x * inv);
  });
}
let pool: Float32Array[] | undefined;

/**
 * A near-free vector for `text` (a few µs, against ~170 µs for {@link hashEmbed}): a pool
 * vector picked by the text's hash, with two coordinates moved by it, L2-normalised. Distinct
 * texts get distinct vectors, but similar texts do not get similar ones, so search quality
 * over them means nothing: for timing ingest with a model that costs (almost) no CPU here.
 */
export function cheapEmbed(text: string, dim = HASH_DIM): Float32Array {
  pool ??= cheapPool(4096, dim);
  const h = hash32(text);
  const out = Float32Array.from(pool[h & 4095] as Float32Array);
  out[(h >>> 12) % dim] = (out[(h >>> 12) % dim] as number) + 0.3;
  out[(h >>> 21) % dim] = (out[(h >>> 21) % dim] as number) - 0.3;
  let norm = 0;
  for (let i = 0; i < dim; i++) norm += (out[i] as number) ** 2;
  const inv = 1 / Math.sqrt(norm);
  for (let i = 0; i < dim; i++) out[i] = (out[i] as number) * inv;
  return out;
}

/** A running embedding server. */
export interface HashEmbeddingServer {
  /** OpenAI-style root including `/v1`, for the embedder's `baseUrl`. */
  baseUrl: string;
  /** Requests answered and texts embedded so far, and the time spent answering them (ms). */
  stats: { requests: number; texts: number; ms: number };
  close(): Promise<void>;
}

/**
 * Starts the server on 127.0.0.1 (an ephemeral port unless `port` is given), answering with
 * `embed` ({@link hashEmbed} by default, or {@link cheapEmbed}).
 */
export async function startHashEmbeddingServer(
  port = 0,
  embed: (text: string) => Float32Array = hashEmbed,
): Promise<HashEmbeddingServer> {
  const stats = { requests: 0, texts: 0, ms: 0 };
  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const t0 = performance.now();
      const reply = (status: number, body: unknown): void => {
        const json = JSON.stringify(body);
        res.writeHead(status, {
          "content-type": "application/json",
          "content-length": Buffer.byteLength(json),
        });
        res.end(json);
      };
      if (req.method !== "POST" || !req.url?.endsWith("/embeddings")) {
        reply(404, {
          error: { message: `no route ${req.method} ${req.url}`, type: "invalid_request_error" },
        });
        return;
      }
      let body: { input?: unknown; model?: unknown; encoding_format?: unknown };
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as typeof body;
      } catch {
        reply(400, { error: { message: "invalid JSON", type: "invalid_request_error" } });
        return;
      }
      const input = typeof body.input === "string" ? [body.input] : body.input;
      if (!Array.isArray(input) || input.some((t) => typeof t !== "string")) {
        reply(400, {
          error: { message: "input must be a string or an array of strings", type: "invalid_request_error" },
        });
        return;
      }
      const format = body.encoding_format ?? "float";
      if (format !== "float" && format !== "base64") {
        reply(400, {
          error: { message: "encoding_format must be float or base64", type: "invalid_request_error" },
        });
        return;
      }
      // base64: the little-endian float32 bytes of each vector (OpenAI's wire format).
      const data = (input as string[]).map((text, index) => {
        const vector = embed(text);
        return {
          object: "embedding",
          index,
          embedding:
            format === "base64"
              ? Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength).toString("base64")
              : Array.from(vector),
        };
      });
      reply(200, {
        object: "list",
        data,
        model: typeof body.model === "string" ? body.model : HASH_MODEL,
        usage: { prompt_tokens: 0, total_tokens: 0 },
      });
      stats.requests++;
      stats.texts += input.length;
      stats.ms += performance.now() - t0;
    });
  };
  const server: Server = createServer(handle);
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve());
  });
  const { port: actual } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${actual}/v1`,
    stats,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
