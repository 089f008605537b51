/** A ranked list of ids, best first, as input to fusion. */
export interface RankedList {
  ids: readonly string[];
  /** Weight of this list in the fused score. Default 1; 0 means the list contributes nothing. */
  weight?: number;
}

/** A fused result: id, fused score, and its 1-based rank in each input list (absent if not there). */
export interface FusedItem {
  id: string;
  score: number;
  ranks: (number | undefined)[];
}

/**
 * Reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009):
 * `score(d) = Σ_lists weight / (k + rank(d))` with 1-based ranks.
 * Ties are broken by the best rank in any list, then by first appearance
 * (list order, then position), so the output is deterministic.
 * @param k smoothing constant, default 60; must be ≥ 0.
 */
export function reciprocalRankFusion(lists: readonly RankedList[], k = 60): FusedItem[] {
  if (!(k >= 0)) throw new RangeError(`RRF k must be >= 0 (got ${k})`);
  const items = new Map<string, FusedItem & { first: number; best: number }>();
  let order = 0;
  lists.forEach((list, li) => {
    const weight = list.weight ?? 1;
    list.ids.forEach((id, position) => {
      const rank = position + 1;
      let item = items.get(id);
      if (!item) {
        item = { id, score: 0, ranks: lists.map(() => undefined), first: order++, best: rank };
        items.set(id, item);
      }
      if (item.ranks[li] !== undefined) return; // an id counts once per list, at its best rank
      item.ranks[li] = rank;
      item.best = Math.min(item.best, rank);
      item.score += weight / (k + rank);
    });
  });
  return [...items.values()]
    .sort((a, b) => b.score - a.score || a.best - b.best || a.first - b.first)
    .map(({ id, score, ranks }) => ({ id, score, ranks }));
}
