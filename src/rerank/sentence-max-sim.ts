/**
 * An offline reranker built on the bundled sentence embedder: a passage is
 * as relevant as its best-matching sentence.
 *
 * Long passages dilute a single embedding; scoring each sentence separately
 * and taking the maximum (the "MaxP" aggregation of Dai & Callan 2019,
 * "Deeper Text Understanding for IR with Contextual Neural Language
 * Modeling", applied at sentence level with a bi-encoder) finds a short
 * answer inside a long chunk. Optionally mixed with the cosine of the whole
 * passage, which rewards passages that are on topic throughout.
 */
import { splitSentences } from "../chunk/sentences.js";
import type { Embedder } from "../embed/contract.js";
import { RerankError, type Reranker, type RerankOptions, type RerankScore } from "./contract.js";
import { rerankDistinct, throwIfAborted } from "./shared.js";

/** Options of {@link SentenceMaxSimReranker}. */
export interface SentenceMaxSimOptions {
  /**
   * Weight w of the whole-passage cosine: score = (1 − w)·max sentence cosine +
   * w·passage cosine (before the mapping to [0, 1]). 0 uses sentences only,
   * 1 is plain embedding similarity. Default 0.5 (best of 0, 0.2, 0.3, 0.5,
   * 0.7, 1 on SciFact, see the class comment).
   */
  passageWeight?: number;
  /** At most this many sentences per passage are embedded (the first ones). Default 64. */
  maxSentences?: number;
}

/** Dot product of two unit vectors = their cosine. */
function cosine(a: Float32Array, b: Float32Array): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += (a[i] as number) * (b[i] as number);
  return Math.max(-1, Math.min(1, s));
}

/**
 * Scores passages by the maximum cosine similarity between the query
 * embedding and the embeddings of the passage's sentences (sentence splitter
 * of src/chunk/sentences.ts), optionally mixed with the whole-passage cosine
 * (see {@link SentenceMaxSimOptions.passageWeight}).
 *
 * Score: (cosine + 1) / 2, so −1 → 0, 0 → 0.5, 1 → 1; scale `similarity`.
 * A blank passage (no sentence) scores 0.
 * With USE-lite, related passages typically land in 0.6–0.9. Monotone in the
 * cosine, so ordering is the cosine ordering.
 *
 * Runs offline and needs no model of its own; cost is one embedding per
 * sentence (plus one per passage when passageWeight > 0) per call — no cache
 * beyond the embedder's. With USE-lite that is slow for long passages: about
 * 50 sentences/s on the development machine, i.e. ~3.5 s for 20 SciFact
 * abstracts.
 *
 * Quality (measured, not a promise): on SciFact (first 100 test queries,
 * BM25 top 20, nDCG@10) BM25 alone scored 0.621; reordering by this score
 * alone gave 0.440 (w = 0), 0.470 (w = 0.5), 0.433 (w = 1, passage cosine
 * only); 0.7 × this score + 0.3 × BM25 rank score gave 0.612–0.615. USE-lite is
 * too weak a model to improve a scientific first-stage ranking; treat this
 * reranker as a fallback for short, general-domain passages, not a default.
 *
 * Errors: a {@link RerankError} wrapping the embedder's error.
 */
export class SentenceMaxSimReranker implements Reranker {
  readonly name: string;
  readonly scale = "similarity" as const;
  private readonly passageWeight: number;
  private readonly maxSentences: number;

  constructor(
    private readonly embedder: Embedder,
    options: SentenceMaxSimOptions = {},
  ) {
    this.name = `sentence-max-sim:${embedder.modelId}`;
    this.passageWeight = options.passageWeight ?? 0.5;
    this.maxSentences = options.maxSentences ?? 64;
    if (!(this.passageWeight >= 0 && this.passageWeight <= 1)) {
      throw new RerankError(this.name, `passageWeight must be in [0, 1], got ${this.passageWeight}`);
    }
    if (!Number.isInteger(this.maxSentences) || this.maxSentences < 1) {
      throw new RerankError(this.name, `maxSentences must be a positive integer, got ${this.maxSentences}`);
    }
  }

  rerank(query: string, docs: string[], options?: RerankOptions): Promise<RerankScore[]> {
    return rerankDistinct(this.name, docs, options, (texts) => this.score(query, texts, options?.signal));
  }

  private async score(query: string, texts: string[], signal: AbortSignal | undefined): Promise<number[]> {
    const sentences: string[] = [];
    const owner: number[] = [];
    texts.forEach((t, i) => {
      for (const s of splitSentences(t).slice(0, this.maxSentences)) {
        sentences.push(s);
        owner.push(i);
      }
    });
    if (sentences.length === 0) return texts.map(() => 0);
    // Passages with at least one sentence, embedded whole when they are mixed in.
    const hasSentence = new Set(owner);
    const whole = this.passageWeight > 0 ? texts.map((_, i) => i).filter((i) => hasSentence.has(i)) : [];
    const q = await this.embedder.embedQuery(query);
    throwIfAborted(signal);
    const vectors = await this.embedder.embedTexts([...sentences, ...whole.map((i) => texts[i] as string)]);
    throwIfAborted(signal);
    // A blank passage has no sentence and keeps −1 (score 0).
    const best = new Array<number>(texts.length).fill(-1);
    sentences.forEach((_, k) => {
      const i = owner[k] as number;
      best[i] = Math.max(best[i] as number, cosine(q, vectors[k] as Float32Array));
    });
    const mixed = [...best];
    whole.forEach((i, k) => {
      const passage = cosine(q, vectors[sentences.length + k] as Float32Array);
      mixed[i] = (1 - this.passageWeight) * (best[i] as number) + this.passageWeight * passage;
    });
    return mixed.map((c) => (c + 1) / 2);
  }
}
