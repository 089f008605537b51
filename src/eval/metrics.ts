/** Relevance judgements of one query: document id → graded relevance (> 0 is relevant). */
export type Qrels = ReadonlyMap<string, number>;

/**
 * nDCG@k with linear gain (`rel / log2(rank + 1)`), as trec_eval / pytrec_eval
 * compute it for BEIR (Järvelin & Kekäläinen 2002). `ranked` is best first;
 * duplicate ids count once, at their first position. Returns 0 when the query
 * has no relevant documents.
 */
export function ndcgAtK(ranked: readonly string[], qrels: Qrels, k: number): number {
  const ideal = [...qrels.values()]
    .filter((r) => r > 0)
    .sort((a, b) => b - a)
    .slice(0, k);
  const idcg = ideal.reduce((s, rel, i) => s + rel / Math.log2(i + 2), 0);
  if (idcg === 0) return 0;
  let dcg = 0;
  const seen = new Set<string>();
  let rank = 0;
  for (const id of ranked) {
    if (seen.has(id)) continue;
    seen.add(id);
    if (rank >= k) break;
    const rel = qrels.get(id) ?? 0;
    if (rel > 0) dcg += rel / Math.log2(rank + 2);
    rank++;
  }
  return dcg / idcg;
}

/** Recall@k: share of the relevant documents found in the first k distinct ids. 0 if none are relevant. */
export function recallAtK(ranked: readonly string[], qrels: Qrels, k: number): number {
  const relevant = [...qrels].filter(([, r]) => r > 0).map(([id]) => id);
  if (relevant.length === 0) return 0;
  const top = new Set(distinct(ranked).slice(0, k));
  return relevant.filter((id) => top.has(id)).length / relevant.length;
}

/** MRR@k: 1 / rank of the first relevant id within the first k distinct ids, else 0. */
export function mrrAtK(ranked: readonly string[], qrels: Qrels, k: number): number {
  const top = distinct(ranked).slice(0, k);
  const i = top.findIndex((id) => (qrels.get(id) ?? 0) > 0);
  return i < 0 ? 0 : 1 / (i + 1);
}

function distinct(ids: readonly string[]): string[] {
  return [...new Set(ids)];
}
