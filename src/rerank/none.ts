/** The identity reranker: keeps the first-stage order. */
import type { Reranker, RerankOptions, RerankScore } from "./contract.js";
import { checkTopN, orderScores, throwIfAborted } from "./shared.js";

/**
 * Keeps the input order (the first-stage ranking): document i of n gets
 * score 1 − i/n; scale `rank`. Duplicates keep their own positions (and so
 * different scores). Used for `{ type: "none" }` so callers can always call a
 * reranker; check `name === "none"` to skip the rerank step instead.
 */
export class NoneReranker implements Reranker {
  readonly name = "none";
  readonly scale = "rank" as const;

  async rerank(_query: string, docs: string[], options?: RerankOptions): Promise<RerankScore[]> {
    checkTopN(this.name, options?.topN);
    throwIfAborted(options?.signal);
    if (docs.length === 0) return [];
    // One turn of the event loop, so an abort right after the call is honoured like everywhere else.
    await Promise.resolve();
    throwIfAborted(options?.signal);
    return orderScores(
      docs.map((_, i) => 1 - i / docs.length),
      options?.topN,
    );
  }
}
