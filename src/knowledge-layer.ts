import {
  DEFAULT_KB,
  defaultKbConfig,
  type KnowledgeBaseConfig,
  RETRIEVAL_MODES,
  type RetrievalMode,
  validateKbConfig,
} from "./config.js";
import { CachedEmbedder } from "./embed/cache.js";
import { createEmbedder } from "./embed/index.js";
import { ConfigError, KnowledgeLayerError } from "./errors.js";
import type { ExtractOptions } from "./extract/contract.js";
import {
  type IngestContext,
  type IngestProgress,
  type IngestSummary,
  ingestDocuments,
  ingestPaths,
} from "./ingest/pipeline.js";
import { type Attribution, attribute, formatCitation } from "./retrieve/attribution.js";
import { Bm25Index } from "./retrieve/bm25.js";
import { removeNearDuplicates } from "./retrieve/dedupe.js";
import { reciprocalRankFusion } from "./retrieve/fusion.js";
import { Catalog, type KbCounts, type KbRecord } from "./store/catalog.js";
import { type Db, openDatabase, resolveDataDir } from "./store/database.js";
import { SqliteVectorStore } from "./store/sqlite-vector-store.js";
import type { ExtractedDocument } from "./types.js";

/** Options for {@link KnowledgeLayer.search}. Unset fields come from each KB's retrieval config. */
export interface SearchOptions {
  /** Knowledge bases to query (default: the default KB). */
  kbs?: string[];
  mode?: RetrievalMode;
  /** Results returned. */
  topK?: number;
  /** Vector candidates per KB. */
  vectorTopK?: number;
  /** BM25 candidates per KB. */
  keywordTopK?: number;
  /** Hybrid fusion weights; default from each KB's config. */
  vectorWeight?: number;
  keywordWeight?: number;
  /** Skip near-duplicate removal (used by evaluation). */
  keepDuplicates?: boolean;
}

/** One ranked search result with its source attribution. */
export interface SearchResult {
  /** 1-based rank. */
  rank: number;
  /**
   * The score results are ordered by: the reciprocal-rank-fusion score for
   * hybrid mode or several KBs, else cosine similarity (vector) or BM25 (keyword).
   */
  score: number;
  /** Component scores: cosine similarity, BM25 score, fused RRF score. */
  scores: { vector?: number; keyword?: number; fused?: number };
  kb: string;
  chunkId: number;
  /** Chunk text as embedded (context prefix + body). */
  text: string;
  chunk: { index: number; total: number; type: string; start: number; end: number };
  source: Attribution;
  /** One-line citation for display. */
  citation: string;
}

/** The answer to a search. Stable JSON shape (`kl search --json`). */
export interface SearchResponse {
  query: string;
  mode: RetrievalMode;
  kbs: string[];
  results: SearchResult[];
  /** Problems worth telling the user, e.g. documents without vectors in a vector search. */
  warnings: string[];
  tookMs: number;
}

/** Options for opening a {@link KnowledgeLayer}. */
export interface OpenOptions {
  /** Data directory; default `$KL_HOME` or `./.kl`. */
  dataDir?: string;
}

/** Options for ingest calls. */
export interface IngestOptions {
  kb?: string;
  /**
   * Compute and store chunk vectors (default true). Keyword-only evaluation turns
   * this off. A KB with `embedding_semantic` chunking still embeds sentences to
   * find its cuts (through the embedding cache, so a later embedding ingest reuses
   * them), so its chunks are the same with and without vectors; if the model
   * cannot run, its documents are cut into fixed windows and a warning is reported.
   */
  embed?: boolean;
  onProgress?: (event: IngestProgress) => void;
}

/**
 * The library's entry point: knowledge bases in one data directory, ingest and
 * search. Every knowledge base keeps its own configuration (chunking, embedding,
 * retrieval) and its own vector collection and BM25 statistics.
 *
 * ```ts
 * const kl = KnowledgeLayer.open();
 * await kl.ingest(["./docs"]);
 * const { results } = await kl.search("how is overlap chosen?");
 * kl.close();
 * ```
 */
export class KnowledgeLayer {
  readonly catalog: Catalog;
  readonly store: SqliteVectorStore;
  readonly bm25: Bm25Index;
  private readonly embedders = new Map<string, CachedEmbedder>();

  private constructor(
    readonly dataDir: string,
    readonly db: Db,
  ) {
    this.catalog = new Catalog(db);
    this.store = new SqliteVectorStore(db);
    this.bm25 = new Bm25Index(db);
  }

  /** Opens (creating if needed) the data directory. @throws KnowledgeLayerError if it cannot be opened. */
  static open(options: OpenOptions = {}): KnowledgeLayer {
    const dataDir = resolveDataDir(options.dataDir);
    return new KnowledgeLayer(dataDir, openDatabase(dataDir));
  }

  /** Closes the database. */
  close(): void {
    this.db.close();
  }

  /**
   * Creates a knowledge base from the defaults overridden by `overrides`.
   * @throws ConfigError if it exists already or the configuration is invalid.
   */
  createKb(name: string, overrides: DeepPartial<Omit<KnowledgeBaseConfig, "name">> = {}): KbRecord {
    if (this.catalog.getKb(name)) throw new ConfigError(`knowledge base "${name}" already exists`);
    const base = defaultKbConfig(name);
    const config: KnowledgeBaseConfig = {
      name,
      chunking: { ...base.chunking, ...defined(overrides.chunking) },
      embedding: { ...base.embedding, ...defined(overrides.embedding) },
      vectorStore: { ...base.vectorStore, ...defined(overrides.vectorStore) },
      retrieval: { ...base.retrieval, ...defined(overrides.retrieval) },
    };
    const extraction = compactExtraction(overrides.extraction);
    if (extraction) config.extraction = extraction;
    if (overrides.chunking?.chunkSize !== undefined && overrides.chunking.minChunkSize === undefined) {
      config.chunking.minChunkSize = Math.min(
        config.chunking.minChunkSize,
        Math.floor(config.chunking.chunkSize / 3),
      );
    }
    if (overrides.chunking?.chunkSize !== undefined && overrides.chunking.chunkOverlap === undefined) {
      config.chunking.chunkOverlap = Math.min(
        config.chunking.chunkOverlap,
        Math.floor(config.chunking.chunkSize / 10),
      );
    }
    return this.catalog.insertKb(validateKbConfig(config));
  }

  /**
   * Returns a knowledge base. The default KB is created on first use.
   * @throws KnowledgeLayerError naming an unknown KB and the existing ones.
   */
  getKb(name: string = DEFAULT_KB): KbRecord {
    const kb = this.catalog.getKb(name);
    if (kb) return kb;
    if (name === DEFAULT_KB) return this.catalog.insertKb(defaultKbConfig(DEFAULT_KB));
    const known = this.catalog.listKbs().map((k) => k.name);
    throw new KnowledgeLayerError(
      `unknown knowledge base "${name}"${known.length ? ` (existing: ${known.join(", ")})` : ""}; create it with: kl kb create ${name}`,
    );
  }

  /** Lists knowledge bases with their document and chunk counts (the default KB always appears). */
  listKbs(): (KbRecord & { counts: KbCounts })[] {
    this.getKb(DEFAULT_KB);
    return this.catalog.listKbs().map((kb) => ({ ...kb, counts: this.catalog.counts(kb.name) }));
  }

  /**
   * Deletes a knowledge base with its documents, chunks, BM25 postings and
   * vectors, in one transaction. Cached embeddings are kept, so re-ingesting the
   * same texts later costs no model calls.
   * @throws KnowledgeLayerError for an unknown KB.
   */
  deleteKb(name: string): void {
    if (!this.catalog.getKb(name)) throw new KnowledgeLayerError(`unknown knowledge base "${name}"`);
    this.db
      .transaction(() => {
        this.store.dropCollectionSync(collectionName(name));
        this.catalog.deleteKb(name);
      })
      .immediate();
  }

  /** Document and chunk counts of one KB. */
  counts(name: string): KbCounts {
    return this.catalog.counts(this.getKb(name).name);
  }

  /** Ingests files and folders into a KB (see `ingest/pipeline.ts`). */
  async ingest(paths: string[], options: IngestOptions = {}): Promise<IngestSummary> {
    return ingestPaths(this.ingestContext(options), paths, options.embed ?? true);
  }

  /** Ingests in-memory documents (one unit per document URI). */
  async ingestDocuments(
    docs: Iterable<ExtractedDocument>,
    options: IngestOptions = {},
  ): Promise<IngestSummary> {
    return ingestDocuments(this.ingestContext(options), docs, options.embed ?? true);
  }

  /**
   * Searches one or more knowledge bases.
   *
   * - `vector`: cosine top-k from each KB's vector collection;
   * - `keyword`: corpus-level BM25 top-k;
   * - `hybrid` (default): both lists fused with reciprocal rank fusion (k from the KB config, 60).
   * Several KBs are fused with RRF too. Near-duplicates (token-set Jaccard ≥ threshold) are removed.
   * @throws KnowledgeLayerError for an unknown KB or mode.
   */
  async search(query: string, options: SearchOptions = {}): Promise<SearchResponse> {
    const started = Date.now();
    const names = options.kbs && options.kbs.length > 0 ? [...new Set(options.kbs)] : [DEFAULT_KB];
    const kbs = names.map((n) => this.getKb(n));
    const first = kbs[0] as KbRecord;
    const mode = options.mode ?? first.config.retrieval.mode;
    if (!RETRIEVAL_MODES.includes(mode)) {
      throw new KnowledgeLayerError(
        `unknown search mode "${mode}"; use one of ${RETRIEVAL_MODES.join(", ")}`,
      );
    }
    const topK = options.topK ?? first.config.retrieval.topK;
    if (!Number.isInteger(topK) || topK < 1 || topK > MAX_TOP_K) {
      throw new KnowledgeLayerError(`top-k must be an integer from 1 to ${MAX_TOP_K} (got ${topK})`);
    }
    if (query.trim().length === 0) throw new KnowledgeLayerError("the query is empty");
    const warnings: string[] = [];

    for (const kb of kbs) {
      if (mode === "keyword") continue;
      // Documents table only: cheap enough for every search, unlike counting chunks.
      const { documents, unembedded } = this.catalog.unembeddedDocuments(kb.name);
      if (unembedded > 0) {
        warnings.push(
          `${unembedded} of ${documents} documents in knowledge base "${kb.name}" have no vectors ` +
            "(ingested with --no-embed): vector search cannot find them; ingest them again without --no-embed",
        );
      }
    }
    const queryVectors = new Map<string, Float32Array>();

    type Candidate = { kb: string; chunkId: number; vector?: number; keyword?: number };
    /**
     * Collects candidate lists (each at least `depth` long where the index has that
     * many), fuses them, loads the chunks and removes near-duplicates. `exhausted`
     * is true when no list was cut short, i.e. a deeper search cannot add anything.
     */
    const rank = async (depth: number) => {
      const candidates = new Map<string, Candidate>();
      const lists: { ids: string[]; weight: number }[] = [];
      let exhausted = true;
      const note = (kb: string, chunkId: number, field: "vector" | "keyword", score: number): string => {
        const key = `${kb}:${chunkId}`;
        const c = candidates.get(key) ?? { kb, chunkId };
        c[field] = score;
        candidates.set(key, c);
        return key;
      };
      for (const kb of kbs) {
        const r = kb.config.retrieval;
        if (mode === "vector" || mode === "hybrid") {
          const collection = collectionName(kb.name);
          if (await this.store.info(collection)) {
            let vector = queryVectors.get(kb.name);
            if (!vector) {
              vector = await this.embedder(kb.config).embedQuery(query);
              queryVectors.set(kb.name, vector);
            }
            const want = Math.max(options.vectorTopK ?? r.vectorTopK, depth);
            const hits = this.store.searchSync(collection, vector, {
              topK: want,
              scoreThreshold: r.minScore,
            });
            if (hits.length === want) exhausted = false;
            const ids = hits.map((h) => note(kb.name, Number(h.id), "vector", h.score));
            lists.push({ ids, weight: options.vectorWeight ?? r.vectorWeight });
          } else {
            lists.push({ ids: [], weight: 0 });
          }
        }
        if (mode === "keyword" || mode === "hybrid") {
          const want = Math.max(options.keywordTopK ?? r.keywordTopK, depth);
          const hits = this.bm25.search(kb.name, query, want, {
            k1: r.bm25K1,
            b: r.bm25B,
            analyzer: r.analyzer,
          });
          if (hits.length === want) exhausted = false;
          const ids = hits.map((h) => note(kb.name, h.chunkId, "keyword", h.score));
          lists.push({ ids, weight: options.keywordWeight ?? r.keywordWeight });
        }
      }

      let ordered: { key: string; score: number; fused?: number }[];
      if (lists.length === 1) {
        ordered = (lists[0]?.ids ?? []).map((key) => {
          const c = candidates.get(key) as Candidate;
          return { key, score: (mode === "vector" ? c.vector : c.keyword) ?? 0 };
        });
      } else {
        ordered = reciprocalRankFusion(lists, first.config.retrieval.rrfK).map((f) => ({
          key: f.id,
          score: f.score,
          fused: f.score,
        }));
      }

      const stored = this.catalog.loadChunks(
        ordered.map((o) => (candidates.get(o.key) as Candidate).chunkId),
      );
      let rows = ordered
        .map((o) => ({ o, c: candidates.get(o.key) as Candidate }))
        .map(({ o, c }) => ({ o, c, chunk: stored.get(c.chunkId) }))
        .filter((x) => x.chunk !== undefined && x.chunk.kb === x.c.kb);
      if (!options.keepDuplicates) {
        rows = removeNearDuplicates(rows, (x) => x.chunk?.text ?? "", first.config.retrieval.dedupThreshold);
      }
      return { rows, exhausted };
    };

    // Candidate lists are at least top-k deep; when near-duplicate removal leaves
    // fewer than top-k results and the lists were cut short, search deeper.
    let depth = topK;
    let { rows, exhausted } = await rank(depth);
    while (rows.length < topK && !exhausted && depth < 16 * topK) {
      depth *= 2;
      ({ rows, exhausted } = await rank(depth));
    }
    const results: SearchResult[] = rows.slice(0, topK).map(({ o, c, chunk }, i) => {
      const s = chunk as NonNullable<typeof chunk>;
      const source = attribute(s);
      const scores: SearchResult["scores"] = {};
      if (c.vector !== undefined) scores.vector = c.vector;
      if (c.keyword !== undefined) scores.keyword = c.keyword;
      if (o.fused !== undefined) scores.fused = o.fused;
      return {
        rank: i + 1,
        score: o.score,
        scores,
        kb: c.kb,
        chunkId: c.chunkId,
        text: s.text,
        chunk: { index: s.chunkIndex, total: s.totalChunks, type: s.chunkType, start: s.start, end: s.end },
        source,
        citation: formatCitation(source, s, null),
      };
    });
    return { query, mode, kbs: kbs.map((k) => k.name), results, warnings, tookMs: Date.now() - started };
  }

  /** The cached embedder of a KB's embedding configuration (one per provider+model). */
  embedder(config: KnowledgeBaseConfig): CachedEmbedder {
    const key = `${config.embedding.provider}/${config.embedding.model}/${config.embedding.batchSize}`;
    let e = this.embedders.get(key);
    if (!e) {
      e = new CachedEmbedder(createEmbedder(config.embedding), this.db);
      this.embedders.set(key, e);
    }
    return e;
  }

  private ingestContext(options: IngestOptions): IngestContext {
    const kb = this.getKb(options.kb ?? DEFAULT_KB);
    const embed = options.embed ?? true;
    return {
      catalog: this.catalog,
      bm25: this.bm25,
      store: this.store,
      embedder: embed ? this.embedder(kb.config) : undefined,
      // embedding_semantic chunking embeds sentences even without chunk vectors (see IngestOptions.embed).
      chunkingEmbedder:
        kb.config.chunking.strategy === "embedding_semantic" ? this.embedder(kb.config) : undefined,
      config: kb.config,
      collection: collectionName(kb.name),
      onProgress: options.onProgress,
    };
  }
}

/** Largest accepted `topK`. */
export const MAX_TOP_K = 10_000;

/** Name of a KB's vector collection. */
export function collectionName(kb: string): string {
  return `kb_${kb}`;
}

/** Copies an object without its `undefined` fields, so they do not override defaults. */
function defined<T extends object>(o: T | undefined): Partial<T> {
  return Object.fromEntries(Object.entries(o ?? {}).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** Extraction overrides without undefined fields or empty sections; undefined when nothing is set. */
function compactExtraction(o: DeepPartial<ExtractOptions> | undefined): ExtractOptions | undefined {
  if (!o) return undefined;
  const out: ExtractOptions = {};
  const limits = defined(o.limits);
  const slack = defined(o.slack);
  const email = defined(o.email);
  if (Object.keys(limits).length > 0) out.limits = limits as ExtractOptions["limits"];
  if (Object.keys(slack).length > 0) out.slack = slack as ExtractOptions["slack"];
  if (Object.keys(email).length > 0) out.email = email as ExtractOptions["email"];
  return Object.keys(out).length > 0 ? out : undefined;
}

/** Recursive partial, for configuration overrides. */
export type DeepPartial<T> = { [K in keyof T]?: T[K] extends object ? DeepPartial<T[K]> : T[K] };
