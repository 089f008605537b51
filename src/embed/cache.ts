import { createHash } from "node:crypto";
import { blobToVector, type Db, vectorToBlob } from "../store/database.js";
import type { Embedder } from "./contract.js";

/** Counters of a {@link CachedEmbedder}: texts served from the cache vs computed. */
export interface CacheStats {
  hits: number;
  misses: number;
}

/** SHA-256 (hex) of a text, the cache key's text part. */
export function textHash(text: string): string {
  return createHash("sha256").update(text, "utf8").digest("hex");
}

/**
 * Wraps an embedder with a persistent cache keyed by (provider, model, SHA-256 of
 * the text), stored in the `embedding_cache` table of the data directory's
 * database. Cached vectors are returned without calling the model, so re-ingest
 * and repeated queries cost nothing. Within one call, duplicate texts are
 * embedded once.
 */
export class CachedEmbedder implements Embedder {
  readonly stats: CacheStats = { hits: 0, misses: 0 };
  private readonly get;
  private readonly put;

  constructor(
    private readonly inner: Embedder,
    private readonly db: Db,
  ) {
    this.get = db.prepare(
      "SELECT vector FROM embedding_cache WHERE provider = ? AND model = ? AND text_hash = ?",
    );
    this.put = db.prepare(
      "INSERT OR REPLACE INTO embedding_cache (provider, model, text_hash, vector) VALUES (?, ?, ?, ?)",
    );
  }

  get provider(): string {
    return this.inner.provider;
  }
  get modelId(): string {
    return this.inner.modelId;
  }
  get dimension(): number {
    return this.inner.dimension;
  }

  /**
   * Embeds `texts`, taking cached vectors where present and storing new ones.
   * `onProgress(done, total)` reports texts completed (cached ones count at once).
   */
  async embedTexts(
    texts: string[],
    onProgress?: (done: number, total: number) => void,
  ): Promise<Float32Array[]> {
    const out: (Float32Array | undefined)[] = new Array(texts.length);
    const missing = new Map<string, { text: string; indices: number[] }>();
    texts.forEach((text, i) => {
      const hash = textHash(text);
      const row = this.get.get(this.provider, this.modelId, hash) as { vector: Buffer } | undefined;
      if (row) {
        out[i] = blobToVector(row.vector);
        this.stats.hits++;
        return;
      }
      const entry = missing.get(hash);
      if (entry) entry.indices.push(i);
      else missing.set(hash, { text, indices: [i] });
    });
    let done = texts.length - [...missing.values()].reduce((n, m) => n + m.indices.length, 0);
    onProgress?.(done, texts.length);
    const pending = [...missing.entries()];
    const step = 64;
    for (let i = 0; i < pending.length; i += step) {
      const slice = pending.slice(i, i + step);
      const vectors = await this.inner.embedTexts(slice.map(([, m]) => m.text));
      this.db
        .transaction(() => {
          slice.forEach(([hash, m], j) => {
            const vector = vectors[j] as Float32Array;
            this.put.run(this.provider, this.modelId, hash, vectorToBlob(vector));
            for (const index of m.indices) out[index] = vector;
            this.stats.misses += m.indices.length;
            done += m.indices.length;
          });
        })
        .immediate();
      onProgress?.(done, texts.length);
    }
    return out as Float32Array[];
  }

  /** Embeds a query with the provider's query path; cached under a key distinct from documents. */
  async embedQuery(text: string): Promise<Float32Array> {
    const hash = textHash(`query\u0000${text}`);
    const row = this.get.get(this.provider, this.modelId, hash) as { vector: Buffer } | undefined;
    if (row) {
      this.stats.hits++;
      return blobToVector(row.vector);
    }
    const vector = await this.inner.embedQuery(text);
    this.put.run(this.provider, this.modelId, hash, vectorToBlob(vector));
    this.stats.misses++;
    return vector;
  }
}
