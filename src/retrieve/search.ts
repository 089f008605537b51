/**
 * The retrieval pipeline behind `KnowledgeLayer.search`: per knowledge base,
 * candidates from the vector index and/or corpus-level BM25, fused, optionally
 * expanded (advanced) and reranked (hybrid_rerank, advanced); then several KBs
 * fused by rank, near-duplicates removed, thresholds applied and attribution
 * attached in one batch lookup.
 *
 * Strategies (`RetrievalMode`):
 * - `vector_only`: cosine top-k (candidates below `vectorMinScore` dropped);
 * - `keyword`: BM25 top-k;
 * - `hybrid`: vector and BM25 lists fused by reciprocal rank fusion (or, with
 *   `fusion: "weighted"`, a weighted sum of min-max normalised scores);
 * - `hybrid_rerank`: hybrid, then the KB's reranker over the top
 *   `rerankCandidates`, final = `rerankWeight × rerank + (1 − rerankWeight) × retrieval`
 *   on [0, 1] scales;
 * - `advanced`: the query plus up to `expansion.variants − 1` expansions (an LLM
 *   when configured, else one pseudo-relevance-feedback variant), each retrieved as
 *   hybrid, fused by RRF with the query's own list weighing {@link ORIGINAL_QUERY_WEIGHT},
 *   then reranked as hybrid_rerank.
 */
import type { KnowledgeBaseConfig, RetrievalMode } from "../config.js";
import type { Catalog, FilteredChunks, KbRecord, StoredChunk } from "../store/catalog.js";
import type { VectorHit, VectorStore } from "../store/contract.js";
import { type Attribution, attribute, formatCitation } from "./attribution.js";
import type { Bm25Hit, Bm25Index, Bm25Params } from "./bm25.js";
import { removeNearDuplicates } from "./dedupe.js";
import { andFilters, type Filter, isEmptyFilter, MAX_FILTER_LIST, parseFilter } from "./filter.js";
import { reciprocalRankFusion, weightedScoreFusion } from "./fusion.js";
import { tokenize } from "./tokenizer.js";

/**
 * Weight of the query's own list when the advanced strategy fuses it with its
 * variants by RRF (each variant weighs 1): a variant moves a result only where it
 * agrees with the query (see the README's advanced-vs-hybrid figures).
 */
export const ORIGINAL_QUERY_WEIGHT = 2;

/** The part of a reranker the pipeline uses (see `src/rerank/contract.ts`). */
export interface PipelineReranker {
  /** What ran, e.g. `cross-encoder:ms-marco-MiniLM-L-6-v2`; shown on every result. */
  readonly name: string;
  /** Scores in [0, 1], best first; `index` is the position in `docs`. */
  rerank(
    query: string,
    docs: string[],
    options?: { topN?: number },
  ): Promise<{ index: number; score: number }[]>;
}

/** Query expansion for the advanced strategy: alternative phrasings of `query` (not including it). */
export type QueryExpander = (query: string, max: number) => Promise<string[]>;

/** What the pipeline needs from the knowledge layer. */
export interface RetrievalDeps {
  catalog: Catalog;
  /** The connected vector store of a KB (its `vectorStore` config). */
  store(config: KnowledgeBaseConfig): Promise<VectorStore>;
  bm25: Bm25Index;
  /**
   * The keyword search to use instead of `bm25.search` (same arguments, same hits): the
   * two-thread search of `bm25-parallel.ts`. Absent: `bm25.search`.
   */
  keywordSearch?(
    kb: string,
    query: string,
    topK: number,
    params: Bm25Params,
    allowed?: ReadonlySet<number>,
  ): Promise<Bm25Hit[]>;
  /** Query vector of `text` with the KB's embedder (cached by the caller). */
  embedQuery(config: KnowledgeBaseConfig, text: string): Promise<Float32Array>;
  /** The KB's reranker, or undefined when it has none. */
  reranker(config: KnowledgeBaseConfig): PipelineReranker | undefined;
  /** The KB's LLM query expander, or undefined (pseudo-relevance feedback is used). */
  expander?(config: KnowledgeBaseConfig): QueryExpander | undefined;
  /** Vector collection of a KB. */
  collection(config: KnowledgeBaseConfig): string;
}

/** Per-KB overrides of a multi-KB search (an agent's attachment config). */
export interface KbRetrievalOverrides {
  /** Most results this KB contributes. */
  maxResults?: number;
  /** Minimum final score for this KB's results (0 means 0: no threshold). */
  minScore?: number;
  mode?: RetrievalMode;
  /**
   * A filter that always applies to this KB (an agent attachment's fixed restriction),
   * ANDed with the search's own {@link RetrievalOptions.filter}; it cannot be lifted.
   */
  filter?: Filter;
}

/** Options of one search; unset fields come from each KB's retrieval config. */
export interface RetrievalOptions {
  mode?: RetrievalMode;
  topK?: number;
  vectorTopK?: number;
  keywordTopK?: number;
  vectorWeight?: number;
  keywordWeight?: number;
  /** Minimum final score (see {@link RetrievedResult.score}); 0 means no threshold. */
  minScore?: number;
  /** When nothing passes the threshold, return the best results flagged `belowThreshold`. */
  fallbackBelowThreshold?: boolean;
  keepDuplicates?: boolean;
  perKb?: Record<string, KbRetrievalOverrides>;
  /**
   * Metadata filter (see `filter.ts`): only matching chunks are retrieved, in both the
   * keyword and the vector list, before top-k.
   */
  filter?: Filter;
  /** Scan every vector instead of using the approximate index (the embedded store). */
  exactVectors?: boolean;
  /**
   * How hard the approximate vector index searches (see `VectorSearchOptions.effort`).
   * Default 1 for `vector_only`, {@link HYBRID_VECTOR_EFFORT} when the vector list is
   * fused with BM25's.
   */
  vectorEffort?: number;
}

/**
 * Search effort of the vector list of hybrid modes, as a factor of the HNSW search list
 * that `vector_only` uses. Fused with BM25's list (weight 0.15 against 1 by default), the
 * vector list's tail matters less than it does alone: on `bench:scale`'s 100k and 1M KBs
 * a shorter list leaves the hybrid top 10 almost unchanged (see the README's scale section
 * for the measured agreement with exact-vector hybrid). 0.35 (0.5 before): a hybrid query at
 * 1M is CPU-bound (its BM25 halves use both cores), and the shorter list made it faster.
 * Paired on the kept 1M KB (one process, query by query), one graph: hybrid p50 24–29 ms at
 * 0.35 against 28–32 at 0.5; at 100k the hybrid top 10 agreed with exact-vector hybrid to
 * 0.996 (0.998 at 0.5). With two shards (`ann.shards`) the two lists at 0.35 together cost
 * about what one graph's list did at 0.5 (2 × 0.35 × 2.5·√(N/2) ≈ 0.5 × 2.5·√N).
 */
export const HYBRID_VECTOR_EFFORT = 0.35;

/** Ranks and scores of one result at each stage, for `--explain`. */
export interface ResultExplanation {
  /** Per query variant (advanced) or the single query: 1-based ranks and raw scores. */
  vectorRank?: number;
  vectorScore?: number;
  keywordRank?: number;
  keywordScore?: number;
  /** Fused retrieval score (RRF or weighted) and its [0, 1] normalisation. */
  fused?: number;
  retrieval: number;
  /** Reranker score in [0, 1], when a reranker ran. */
  rerank?: number;
  /** Final score the KB list is ordered by. */
  final: number;
  /** Rank within its KB before multi-KB fusion. */
  kbRank: number;
  /**
   * The chunk's context prefix — document context (issuer, form, period, section…),
   * heading path, table header — which BM25 and the embedding read with its body.
   */
  context?: string;
}

/** One retrieved chunk with its scores, before rank numbering. */
export interface RetrievedResult {
  kb: string;
  chunk: StoredChunk;
  /**
   * The score this KB's list is ordered by, in [0, 1] for every mode except
   * `keyword` (raw BM25): cosine for vector_only, fused score normalised by the
   * best possible (first in every list = 1) for hybrid, the final
   * rerank mix for hybrid_rerank/advanced. Several KBs are fused by rank (RRF).
   */
  score: number;
  scores: { vector?: number; keyword?: number; fused?: number; rerank?: number };
  explain: ResultExplanation;
  /** Set when the result is below the threshold and returned as a fallback. */
  belowThreshold?: boolean;
  /** The reranker that scored it. */
  reranker?: string;
}

/** Result of {@link retrieve}. */
export interface RetrievalOutcome {
  results: RetrievedResult[];
  /** Reranker per KB that ran (`none` when the mode does not rerank or the KB has none). */
  rerankers: Record<string, string>;
  /** Query variants used per KB (advanced). */
  variants: Record<string, string[]>;
  warnings: string[];
}

/** Candidate of one KB with the data of every stage. */
interface Candidate {
  chunkId: number;
  vector?: number;
  vectorRank?: number;
  keyword?: number;
  keywordRank?: number;
  fused?: number;
  retrieval: number;
  rerank?: number;
  final: number;
}

/** Strategies that use the vector index. */
const USES_VECTORS: ReadonlySet<RetrievalMode> = new Set([
  "vector_only",
  "hybrid",
  "hybrid_rerank",
  "advanced",
]);
/** Strategies that use BM25. */
const USES_BM25: ReadonlySet<RetrievalMode> = new Set(["keyword", "hybrid", "hybrid_rerank", "advanced"]);
/** Strategies that rerank. */
const RERANKS: ReadonlySet<RetrievalMode> = new Set(["hybrid_rerank", "advanced"]);

/**
 * Candidates of one KB for one query text: vector and/or BM25 lists, fused.
 * `exhausted` is false when a list came back full (a deeper search may add more).
 */
async function candidatesFor(
  deps: RetrievalDeps,
  kb: KbRecord,
  text: string,
  mode: RetrievalMode,
  depth: number,
  options: RetrievalOptions,
  restriction: FilteredChunks | undefined,
  warn?: (message: string) => void,
): Promise<{ list: Candidate[]; exhausted: boolean }> {
  const r = kb.config.retrieval;
  const byId = new Map<number, Candidate>();
  const get = (id: number): Candidate => {
    let c = byId.get(id);
    if (!c) {
      c = { chunkId: id, retrieval: 0, final: 0 };
      byId.set(id, c);
    }
    return c;
  };
  const lists: { ids: string[]; weight: number; scores: number[] }[] = [];
  let exhausted = true;
  // The vector search is started first and awaited after the keyword search: with the
  // embedded store's index on a worker thread, the HNSW search runs while BM25 runs here.
  let vectorSearch: Promise<{ found?: VectorHit[]; error?: unknown }> | undefined;
  const vectorWant = Math.max(options.vectorTopK ?? r.vectorTopK, depth);
  if (USES_VECTORS.has(mode)) {
    const collection = deps.collection(kb.config);
    try {
      const store = await deps.store(kb.config);
      if (restriction?.ids.length === 0) vectorSearch = Promise.resolve({ found: [] });
      else if (
        store.hasCollection
          ? await store.hasCollection(collection)
          : (await store.info(collection)) !== undefined
      ) {
        const vector = await deps.embedQuery(kb.config, text);
        const search = restriction
          ? restrictedVectorSearch(deps, kb, store, collection, vector, vectorWant, restriction)
          : store.search(collection, vector, {
              topK: vectorWant,
              scoreThreshold: r.vectorMinScore,
              exact: options.exactVectors,
              effort: options.vectorEffort ?? (mode === "vector_only" ? 1 : HYBRID_VECTOR_EFFORT),
            });
        vectorSearch = search.then(
          (found) => ({ found }),
          (error: unknown) => ({ error }),
        );
      }
    } catch (error) {
      vectorSearch = Promise.resolve({ error });
    }
  }
  let keywordHits: Bm25Hit[] | undefined;
  let keywordWant = 0;
  if (USES_BM25.has(mode)) {
    keywordWant = Math.max(options.keywordTopK ?? r.keywordTopK, depth);
    const params: Bm25Params = {
      k1: r.bm25K1,
      b: r.bm25B,
      analyzer: r.analyzer,
      titleWeight: r.bm25TitleWeight,
      documentWeight: r.bm25DocumentWeight,
    };
    keywordHits = deps.keywordSearch
      ? await deps.keywordSearch(kb.name, text, keywordWant, params, restriction?.set)
      : deps.bm25.search(kb.name, text, keywordWant, params, restriction?.set);
  }
  if (vectorSearch) {
    const { found, error } = await vectorSearch;
    if (error !== undefined) {
      // With BM25 to fall back on, an unreachable store or embedder degrades the search instead of failing it.
      if (mode === "vector_only" || !warn) throw error;
      warn(
        `knowledge base "${kb.name}": vector search failed, results are keyword-only: ${(error as Error).message}`,
      );
    }
    if (found) {
      if (found.length === vectorWant) exhausted = false;
      // A server-side store may hold vectors of chunks the catalog no longer has (a write
      // interrupted between the two): only the KB's current chunks count.
      const known = deps.catalog.knownChunkIds(
        kb.name,
        found.map((h) => Number(h.id)),
      );
      const hits = found.filter(
        (h) => known.has(Number(h.id)) && (!restriction || restriction.set.has(Number(h.id))),
      );
      hits.forEach((h, i) => {
        const c = get(Number(h.id));
        c.vector = h.score;
        c.vectorRank = i + 1;
      });
      lists.push({
        ids: hits.map((h) => h.id),
        scores: hits.map((h) => h.score),
        weight: mode === "vector_only" ? 1 : (options.vectorWeight ?? r.vectorWeight),
      });
    }
  }
  if (keywordHits) {
    const hits = keywordHits;
    if (hits.length === keywordWant) exhausted = false;
    hits.forEach((h, i) => {
      const c = get(h.chunkId);
      c.keyword = h.score;
      c.keywordRank = i + 1;
    });
    lists.push({
      ids: hits.map((h) => String(h.chunkId)),
      scores: hits.map((h) => h.score),
      weight: mode === "keyword" ? 1 : (options.keywordWeight ?? r.keywordWeight),
    });
  }
  let list: Candidate[];
  if (mode === "vector_only") {
    list = [...byId.values()].sort((a, b) => (b.vector ?? 0) - (a.vector ?? 0));
    for (const c of list) c.retrieval = Math.max(0, Math.min(1, c.vector ?? 0));
  } else if (mode === "keyword") {
    list = [...byId.values()].sort((a, b) => (b.keyword ?? 0) - (a.keyword ?? 0));
    const top = list[0]?.keyword ?? 0;
    for (const c of list) c.retrieval = top > 0 ? (c.keyword ?? 0) / top : 0;
  } else {
    if (r.fusion === "weighted") {
      // Min-max normalised scores, weighted sum; in [0, 1] when the weights sum to 1.
      const total = lists.reduce((sum, l) => sum + l.weight, 0);
      const fused = weightedScoreFusion(
        lists.map((l) => ({
          items: l.ids.map((id, i) => ({ id, score: l.scores[i] ?? 0 })),
          weight: l.weight,
        })),
      );
      list = fused.map((f) => {
        const c = get(Number(f.id));
        c.fused = f.score;
        c.retrieval = total > 0 ? f.score / total : 0;
        return c;
      });
    } else {
      const k = r.rrfK;
      const fused = reciprocalRankFusion(lists, k);
      // The best possible RRF score: first in every list with a positive weight.
      const best = lists.reduce((sum, l) => sum + (l.weight > 0 ? l.weight / (k + 1) : 0), 0);
      list = fused.map((f) => {
        const c = get(Number(f.id));
        c.fused = f.score;
        c.retrieval = best > 0 ? f.score / best : 0;
        return c;
      });
    }
  }
  for (const c of list) c.final = mode === "keyword" ? (c.keyword ?? 0) : c.retrieval;
  return { list, exhausted };
}

/** Most conditions of a filter pushed down to a vector store for a restriction (see below). */
const PUSHDOWN_CONDITIONS = 600;

/**
 * Vector hits among a filter's chunks, best first. The restriction is pushed into the
 * store's own filter as the chunks' `documentId` (whole documents) and `chunkIndex`
 * (documents of which only some chunks match), payload fields every store holds, so the
 * store applies it before top-k. A restriction too scattered for one filter (more than
 * {@link PUSHDOWN_CONDITIONS} conditions) is applied to an over-fetched list instead,
 * widened until `want` hits pass or the store has no more (up to 10,000 candidates).
 */
async function restrictedVectorSearch(
  deps: RetrievalDeps,
  kb: KbRecord,
  store: VectorStore,
  collection: string,
  vector: Float32Array,
  want: number,
  restriction: FilteredChunks,
): Promise<VectorHit[]> {
  const scoreThreshold = kb.config.retrieval.vectorMinScore;
  const perDocument = new Map<number, number[]>();
  restriction.documentIds.forEach((doc, i) => {
    let list = perDocument.get(doc);
    if (!list) {
      list = [];
      perDocument.set(doc, list);
    }
    list.push(restriction.chunkIndexes[i] as number);
  });
  const whole: number[] = [];
  const partial: Filter[] = [];
  for (const [doc, indexes] of perDocument) {
    if (indexes.length >= (restriction.documentChunks.get(doc) ?? 0)) whole.push(doc);
    else if (partial.length < PUSHDOWN_CONDITIONS)
      for (let i = 0; i < indexes.length; i += MAX_FILTER_LIST)
        partial.push({ documentId: doc, chunkIndex: { $in: indexes.slice(i, i + MAX_FILTER_LIST) } });
  }
  const conditions = Math.ceil(whole.length / MAX_FILTER_LIST) + 2 * partial.length;
  if (conditions <= PUSHDOWN_CONDITIONS) {
    const any: Filter[] = [];
    for (let i = 0; i < whole.length; i += MAX_FILTER_LIST)
      any.push({ documentId: { $in: whole.slice(i, i + MAX_FILTER_LIST) } });
    any.push(...partial);
    const filter = any.length === 1 ? (any[0] as Filter) : { $or: any };
    return store.search(collection, vector, { topK: want, scoreThreshold, filter });
  }
  const total = Math.max(1, deps.catalog.counts(kb.name).chunks);
  let fetch = Math.min(10_000, Math.ceil((want * total * 2) / restriction.ids.length));
  for (;;) {
    const hits = await store.search(collection, vector, { topK: fetch, scoreThreshold });
    const kept = hits.filter((h) => restriction.set.has(Number(h.id)));
    if (kept.length >= want || hits.length < fetch || fetch >= 10_000) return kept.slice(0, want);
    fetch = Math.min(10_000, fetch * 4);
  }
}

/**
 * Pseudo-relevance feedback expansion (RM3-style, Abdul-Jaleel et al. 2004, simplified):
 * the terms that weigh most in the top `docs` feedback chunks (term frequency in the
 * chunk × IDF over the feedback set, summed, query terms excluded) form one variant,
 * the query plus the top terms (none when `max` is 0 or nothing is found). The terms
 * alone, without the query, are not a variant: they drift off the topic (see the README).
 */
export function feedbackVariants(
  query: string,
  feedback: string[],
  max: number,
  analyzer: "english" | "standard",
): string[] {
  if (max <= 0 || feedback.length === 0) return [];
  // Whole words (no stems): the variants are also embedded for vector search.
  const opts = analyzer === "english" ? { stem: false } : { stem: false, stopWords: false };
  // Query words are left out also in other forms (`tomatoes` for `tomato`): compare stems.
  const stemOf = (word: string): string => (analyzer === "english" ? (tokenize(word)[0] ?? word) : word);
  const queryTerms = new Set(tokenize(query, opts).map(stemOf));
  const df = new Map<string, number>();
  const tfs = feedback.map((text) => {
    const tf = new Map<string, number>();
    for (const t of tokenize(text, opts))
      if (
        !queryTerms.has(stemOf(t)) &&
        (t.length > 2 || (t.length === 2 && /[^\p{ASCII}]/u.test(t))) &&
        !/^\d+$/.test(t)
      )
        tf.set(t, (tf.get(t) ?? 0) + 1);
    for (const t of tf.keys()) df.set(t, (df.get(t) ?? 0) + 1);
    return tf;
  });
  const weight = new Map<string, number>();
  tfs.forEach((tf, rank) => {
    const total = [...tf.values()].reduce((a, b) => a + b, 0) || 1;
    const docWeight = 1 / (rank + 1);
    for (const [t, n] of tf)
      weight.set(t, (weight.get(t) ?? 0) + docWeight * (n / total) * ((df.get(t) ?? 0) > 1 ? 1 : 0.5));
  });
  const top = [...weight.entries()]
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
    .slice(0, 10)
    .map(([t]) => t);
  if (top.length === 0) return [];
  // The expansion terms alone (without the query) drift off topic: SciFact nDCG@10 −4.3 points.
  return [`${query} ${top.join(" ")}`];
}

/** Ranked candidates of one KB, reranked when the mode asks for it. */
async function retrieveKb(
  deps: RetrievalDeps,
  kb: KbRecord,
  query: string,
  mode: RetrievalMode,
  depth: number,
  options: RetrievalOptions,
  outcome: RetrievalOutcome,
  restriction: FilteredChunks | undefined,
): Promise<{ list: Candidate[]; exhausted: boolean }> {
  const r = kb.config.retrieval;
  const baseMode: RetrievalMode = mode === "hybrid_rerank" || mode === "advanced" ? "hybrid" : mode;
  const warn = (message: string): void => {
    if (!outcome.warnings.includes(message)) outcome.warnings.push(message);
  };
  let { list, exhausted } = await candidatesFor(deps, kb, query, baseMode, depth, options, restriction, warn);
  if (mode === "advanced") {
    const max = Math.max(0, r.expansionVariants - 1);
    const expander = deps.expander?.(kb.config);
    let variants: string[] = [];
    let expanded = false;
    if (expander) {
      try {
        variants = (await expander(query, max)).filter((v) => v.trim() !== "" && v !== query).slice(0, max);
        expanded = true;
      } catch (err) {
        outcome.warnings.push(
          `knowledge base "${kb.name}": LLM query expansion failed, pseudo-relevance feedback used instead: ${(err as Error).message}`,
        );
      }
    }
    if (!expanded) {
      const feedbackIds = list.slice(0, 5).map((c) => c.chunkId);
      const texts = [...deps.catalog.loadChunks(feedbackIds).values()].map((c) => c.text);
      variants = feedbackVariants(query, texts, max, r.analyzer);
    }
    outcome.variants[kb.name] = [query, ...variants];
    if (variants.length > 0) {
      const runs = [
        { list, exhausted },
        ...(await Promise.all(
          variants.map((v) => candidatesFor(deps, kb, v, "hybrid", depth, options, restriction, warn)),
        )),
      ];
      exhausted = runs.every((x) => x.exhausted);
      const first = new Map(list.map((c) => [c.chunkId, c]));
      // The query's own list counts twice: a variant moves a result only where it agrees.
      const weights = runs.map((_, i) => (i === 0 ? ORIGINAL_QUERY_WEIGHT : 1));
      const fused = reciprocalRankFusion(
        runs.map((x) => ({ ids: x.list.map((c) => String(c.chunkId)) })),
        { k: r.rrfK, weights },
      );
      const best = weights.reduce((a, b) => a + b, 0) / (r.rrfK + 1);
      list = fused.map((f) => {
        const id = Number(f.id);
        const own = first.get(id) ??
          runs.map((x) => x.list.find((c) => c.chunkId === id)).find((c) => c) ?? {
            chunkId: id,
            retrieval: 0,
            final: 0,
          };
        return { ...own, fused: f.score, retrieval: f.score / best, final: f.score / best };
      });
    }
  }
  if (RERANKS.has(mode)) {
    const reranker = deps.reranker(kb.config);
    outcome.rerankers[kb.name] = reranker?.name ?? "none";
    if (reranker && list.length > 0) {
      const n = Math.min(list.length, Math.max(r.rerankCandidates, options.topK ?? r.topK));
      const head = list.slice(0, n);
      const chunks = deps.catalog.loadChunks(head.map((c) => c.chunkId));
      const texts = head.map((c) => chunks.get(c.chunkId)?.text ?? "");
      let scores: { index: number; score: number }[];
      try {
        scores = await reranker.rerank(query, texts);
      } catch (err) {
        // A failing reranker (model missing, endpoint down) must not fail the search.
        outcome.warnings.push(
          `knowledge base "${kb.name}": reranker ${reranker.name} failed, results are not reranked: ${(err as Error).message}`,
        );
        outcome.rerankers[kb.name] = `none (${reranker.name} failed)`;
        return { list, exhausted };
      }
      const w = r.rerankWeight;
      for (const s of scores) {
        const c = head[s.index];
        if (!c) continue;
        c.rerank = s.score;
        c.final = w * s.score + (1 - w) * c.retrieval;
      }
      head.sort((a, b) => b.final - a.final || a.chunkId - b.chunkId);
      list = [...head, ...list.slice(n)];
    }
  } else {
    outcome.rerankers[kb.name] = "none";
  }
  return { list, exhausted };
}

/** The thing an instruction-type query points at: this file, the attachment… */
const TARGET_EN =
  "(?:this|the|that|attached|uploaded|latest|last|my|above)\\s+(?:file|document|doc|attachment|pdf|email|e-mail|message|upload)";
const TARGET_ZH = "(?:这个|这份|该|此|上传的|刚才的|最新的)?(?:文件|文档|附件|邮件|PDF)";

/**
 * Whole-query patterns of instruction-type queries, anchored at both ends so a
 * question that merely mentions a file ("what is the file size limit?") is not one.
 */
const INSTRUCTION_QUERIES: readonly RegExp[] = [
  new RegExp(
    `^(?:please\\s+|can you\\s+|could you\\s+)?(?:summari[sz]e|give me a summary of|tl;?dr(?:\\s+of)?|describe|explain)\\s+${TARGET_EN}(?:\\s+(?:for me|please))?\\s*[.?!]*$`,
    "i",
  ),
  new RegExp(`^what(?:'s|\\s+is)?\\s+in\\s+${TARGET_EN}\\s*[.?!]*$`, "i"),
  new RegExp(`^what\\s+(?:does|is)\\s+${TARGET_EN}\\s+(?:say|about|saying)\\s*[.?!]*$`, "i"),
  new RegExp(`^(?:请|帮我|麻烦)?(?:总结|概括|摘要|归纳)(?:一下)?${TARGET_ZH}(?:的内容|的要点)?[。？?！!]*$`),
  /^(?:请|帮我)?(?:这个|这份|该|此)?(?:文件|文档|附件|邮件)(?:里|中)?(?:说了什么|讲了什么|写了什么|是什么内容|的内容是什么|讲的是什么)[。？?！!]*$/,
];

/**
 * True for instruction-type queries that ask about a file rather than search for
 * content ("summarise this file", "what does the attachment say", "总结一下这个文件"):
 * they skip the score threshold and prefer the most recently ingested document.
 */
export function isInstructionQuery(query: string): boolean {
  const q = query.trim();
  return q.length <= 120 && INSTRUCTION_QUERIES.some((re) => re.test(q));
}

/**
 * Runs a search over `kbs` (see the module comment for the strategies).
 *
 * Several KBs are queried concurrently, each with its own embedder, store,
 * reranker and retrieval config, and fused by reciprocal rank (never by raw
 * cosine: KBs may use different models). Near-duplicates are removed
 * (token-set Jaccard ≥ the first KB's `dedupThreshold`); when that leaves fewer
 * than top-k and the lists were cut short, the search goes deeper (up to 16 × top-k).
 * A result below its KB's `minScore` is dropped; when none is left and
 * `fallbackBelowThreshold` is set, the best ones come back flagged `belowThreshold`.
 * Instruction-type queries skip the threshold and put the most recently ingested
 * document's chunks first.
 */
export async function retrieve(
  deps: RetrievalDeps,
  kbs: KbRecord[],
  query: string,
  options: RetrievalOptions,
): Promise<RetrievalOutcome> {
  const first = kbs[0] as KbRecord;
  const topK = options.topK ?? first.config.retrieval.topK;
  const instruction = isInstructionQuery(query);
  const outcome: RetrievalOutcome = { results: [], rerankers: {}, variants: {}, warnings: [] };
  // Each KB's filter (the search's, ANDed with the KB's fixed one) as the chunks it lets through.
  const restrictions = new Map<string, FilteredChunks>();
  for (const kb of kbs) {
    const filter = andFilters(options.filter, options.perKb?.[kb.name]?.filter);
    if (!filter) continue;
    const node = parseFilter(filter);
    if (!isEmptyFilter(node)) restrictions.set(kb.name, deps.catalog.filterChunks(kb.name, node));
  }

  const rank = async (depth: number) => {
    const perKb = await Promise.all(
      kbs.map(async (kb) => {
        const over = options.perKb?.[kb.name] ?? {};
        const mode = over.mode ?? options.mode ?? kb.config.retrieval.mode;
        const { list, exhausted } = await retrieveKb(
          deps,
          kb,
          query,
          mode,
          depth,
          options,
          outcome,
          restrictions.get(kb.name),
        );
        const minScore = instruction
          ? 0
          : (over.minScore ?? options.minScore ?? kb.config.retrieval.minScore);
        const passing = list.filter((c) => c.final >= minScore);
        const max = over.maxResults ?? Number.POSITIVE_INFINITY;
        return { kb, list: passing.slice(0, max), all: list.slice(0, max), below: false, exhausted, mode };
      }),
    );
    // The fallback applies to the whole search: only when no KB has a result that passes.
    if (options.fallbackBelowThreshold && perKb.every((p) => p.list.length === 0)) {
      for (const p of perKb) {
        p.list = p.all;
        p.below = p.all.length > 0;
      }
    }
    const exhausted = perKb.every((p) => p.exhausted);
    let ordered: { kb: KbRecord; c: Candidate; kbRank: number; below: boolean }[];
    if (perKb.length === 1) {
      const p = perKb[0] as (typeof perKb)[number];
      ordered = p.list.map((c, i) => ({ kb: p.kb, c, kbRank: i + 1, below: p.below }));
    } else {
      const byKey = new Map<string, { kb: KbRecord; c: Candidate; kbRank: number; below: boolean }>();
      const lists = perKb.map((p) => ({
        ids: p.list.map((c, i) => {
          const key = `${p.kb.name}:${c.chunkId}`;
          byKey.set(key, { kb: p.kb, c, kbRank: i + 1, below: p.below });
          return key;
        }),
      }));
      ordered = reciprocalRankFusion(lists, first.config.retrieval.rrfK).map(
        (f) => byKey.get(f.id) as NonNullable<ReturnType<typeof byKey.get>>,
      );
    }
    const stored = deps.catalog.loadChunks(ordered.map((o) => o.c.chunkId));
    let rows = ordered
      .map((o) => ({ ...o, chunk: stored.get(o.c.chunkId) }))
      .filter(
        (x): x is typeof x & { chunk: StoredChunk } => x.chunk !== undefined && x.chunk.kb === x.kb.name,
      );
    if (!options.keepDuplicates)
      rows = removeNearDuplicates(rows, (x) => x.chunk.text, first.config.retrieval.dedupThreshold);
    return { rows, exhausted, modes: perKb.map((p) => p.mode) };
  };

  let depth = topK;
  let { rows, exhausted } = await rank(depth);
  while (rows.length < topK && !exhausted && depth < 16 * topK) {
    depth *= 2;
    ({ rows, exhausted } = await rank(depth));
  }
  if (instruction) {
    // Prefer the most recently ingested document among the KBs: its chunks first, in reading order.
    const latest = kbs
      .map((kb) => {
        const restriction = restrictions.get(kb.name);
        return restriction
          ? deps.catalog.latestDocumentAmong([...new Set(restriction.documentIds)])
          : deps.catalog.latestDocument(kb.name);
      })
      .filter((d): d is NonNullable<typeof d> => d !== undefined)
      .sort((a, b) => (a.ingestedAt < b.ingestedAt ? 1 : a.ingestedAt > b.ingestedAt ? -1 : 0))[0];
    if (latest) {
      // The document's first chunks in reading order, whether retrieval found them or not.
      const allowed = restrictions.get(latest.kb)?.set;
      const ids = deps.catalog
        .chunkIds(latest.id)
        .filter((id) => !allowed || allowed.has(id))
        .slice(0, topK);
      const chunks = deps.catalog.loadChunks(ids);
      const kb = kbs.find((k) => k.name === latest.kb) as KbRecord;
      const found = new Map(rows.filter((x) => x.chunk.documentId === latest.id).map((x) => [x.chunk.id, x]));
      const own: typeof rows = [];
      ids.forEach((id, i) => {
        const chunk = chunks.get(id);
        if (!chunk) return;
        own.push(
          found.get(id) ?? {
            kb,
            c: { chunkId: id, retrieval: 0, final: 0 },
            kbRank: i + 1,
            below: false,
            chunk,
          },
        );
      });
      own.sort((a, b) => a.chunk.chunkIndex - b.chunk.chunkIndex);
      const ownIds = new Set(own.map((x) => x.chunk.id));
      rows = [...own, ...rows.filter((x) => !ownIds.has(x.chunk.id))];
    }
  }
  outcome.results = rows.slice(0, topK).map(({ kb, c, kbRank, below, chunk }) => {
    const scores: RetrievedResult["scores"] = {};
    if (c.vector !== undefined) scores.vector = c.vector;
    if (c.keyword !== undefined) scores.keyword = c.keyword;
    if (c.fused !== undefined) scores.fused = c.fused;
    if (c.rerank !== undefined) scores.rerank = c.rerank;
    const result: RetrievedResult = {
      kb: kb.name,
      chunk,
      score: c.final,
      scores,
      explain: {
        vectorRank: c.vectorRank,
        vectorScore: c.vector,
        keywordRank: c.keywordRank,
        keywordScore: c.keyword,
        fused: c.fused,
        retrieval: c.retrieval,
        rerank: c.rerank,
        final: c.final,
        kbRank,
      },
    };
    if (below) result.belowThreshold = true;
    const reranker = outcome.rerankers[kb.name];
    if (reranker && reranker !== "none" && c.rerank !== undefined) result.reranker = reranker;
    return result;
  });
  return outcome;
}

/** Attribution and citation of a retrieved chunk. */
export function attributed(chunk: StoredChunk): { source: Attribution; citation: string } {
  const source = attribute(chunk);
  return { source, citation: formatCitation(source, chunk, null) };
}
