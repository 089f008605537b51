import { createHash } from "node:crypto";
import type { Db } from "../store/database.js";
import { EmbeddingCacheTable } from "../store/embedding-cache.js";
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
 *
 * The key does not include provider options that change vectors without
 * changing the model id (query/document prefixes, pooling, long-text mode):
 * after changing those, use a fresh data directory or clear the cache. A
 * cached vector whose length differs from the embedder's known dimension (a
 * changed `dimension`) is ignored and recomputed.
 */
export class CachedEmbedder implements Embedder {
  readonly stats: CacheStats = { hits: 0, misses: 0 };
  /** Length of the last vector served from the cache (0 before any). */
  private cachedDimension = 0;
  private readonly table: EmbeddingCacheTable;

  /** Model part of the cache key. */
  private readonly cacheModel: string;

  /**
   * @param cacheModel model part of the cache key (default the inner `modelId`): give the
   *   settings that change vectors beyond the model name (endpoint URL, dimension,
   *   prefixes), so two endpoints serving the same model name never share entries.
   */
  constructor(
    private readonly inner: Embedder,
    private readonly db: Db,
    cacheModel?: string,
  ) {
    this.cacheModel = cacheModel ?? inner.modelId;
    this.table = new EmbeddingCacheTable(db);
  }

  get provider(): string {
    return this.inner.provider;
  }
  get modelId(): string {
    return this.inner.modelId;
  }
  /**
   * The inner embedder's dimension; while that is still `0` (not discovered
   * yet), the length of the vectors served from the cache.
   */
  get dimension(): number {
    return this.inner.dimension || this.cachedDimension;
  }

  /** The inner embedder's {@link Embedder.resolveDimension} (or its `dimension` when it has none). */
  async resolveDimension(): Promise<number> {
    return this.inner.resolveDimension ? this.inner.resolveDimension() : this.inner.dimension;
  }

  /** Closes the inner embedder (the database stays open; it belongs to the caller). */
  async close(): Promise<void> {
    await this.inner.close?.();
  }

  /**
   * Embeds `texts`, taking cached vectors where present and storing new ones (unless
   * `options.store` is false: the caller then stores them in the embedded vector store and
   * calls {@link rememberStored}, so each vector is kept once).
   * `onProgress(done, total)` reports texts completed (cached ones count at once).
   */
  async embedTexts(
    texts: string[],
    onProgress?: (done: number, total: number) => void,
    options: { store?: boolean } = {},
  ): Promise<Float32Array[]> {
    const store = options.store ?? true;
    const out: (Float32Array | undefined)[] = new Array(texts.length);
    const missing = new Map<string, { text: string; indices: number[] }>();
    texts.forEach((text, i) => {
      const hash = textHash(text);
      const cached = this.lookup(hash);
      if (cached) {
        out[i] = cached;
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
    const slices: [string, { text: string; indices: number[] }][][] = [];
    for (let i = 0; i < pending.length; i += step) slices.push(pending.slice(i, i + step));
    // The next slice is handed to the model before the current one's vectors are stored, so a
    // model with several workers never waits for the calling thread between slices.
    const embed = (k: number): Promise<Float32Array[]> | undefined => {
      const slice = slices[k];
      if (!slice) return undefined;
      const call = this.inner.embedTexts(slice.map(([, m]) => m.text));
      call.catch(() => undefined); // awaited below; an early failure must not go unhandled
      return call;
    };
    let next = embed(0);
    for (let k = 0; k < slices.length; k++) {
      const slice = slices[k] as [string, { text: string; indices: number[] }][];
      const current = next as Promise<Float32Array[]>;
      next = embed(k + 1);
      const vectors = await current;
      this.db
        .transaction(() => {
          slice.forEach(([hash, m], j) => {
            const vector = vectors[j] as Float32Array;
            if (store) this.table.put(this.provider, this.cacheModel, hash, vector);
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
    const cached = this.lookup(hash);
    if (cached) {
      this.stats.hits++;
      return cached;
    }
    const vector = await this.inner.embedQuery(text);
    this.table.put(this.provider, this.cacheModel, hash, vector);
    this.stats.misses++;
    return vector;
  }

  /**
   * Remembers that the vector of `text` is the embedded store's record `id` of `collection`
   * (instead of a second copy of it): the entry reads that record, and goes away when the
   * record is replaced or deleted (triggers on `vec_records`). Call in the transaction that
   * writes the record, for vectors computed by {@link embedTexts} with `store: false`.
   * An entry holding a vector is replaced by the reference.
   */
  rememberStored(text: string, collection: string, id: string): void {
    this.table.putRef(this.provider, this.cacheModel, textHash(text), collection, id);
  }

  /**
   * The cached vector under `hash`, unless its length differs from the inner
   * embedder's known dimension (e.g. a model whose `dimension` setting was
   * changed): such an entry counts as a miss and is overwritten.
   */
  private lookup(hash: string): Float32Array | undefined {
    // No entry, or a reference whose record is gone.
    const vector = this.table.get(this.provider, this.cacheModel, hash);
    if (!vector) return undefined;
    const expected = this.inner.dimension;
    if (expected > 0 && vector.length !== expected) return undefined;
    this.cachedDimension = vector.length;
    return vector;
  }
}
