/** Small vector and window helpers shared by the embedders. */

/** Scales `v` to unit L2 norm in place and returns it. A zero vector stays zero. */
export function normalise(v: Float32Array): Float32Array {
  let sum = 0;
  for (const x of v) sum += x * x;
  const norm = Math.sqrt(sum);
  if (norm > 0) for (let i = 0; i < v.length; i++) v[i] = (v[i] as number) / norm;
  return v;
}

/**
 * Cuts token ids into ⌈n/size⌉ consecutive windows of near-equal length (each
 * at most `size`), so no window is a tiny remainder. `[]` gives `[[]]`.
 */
export function splitWindows(ids: number[], size: number): number[][] {
  if (ids.length <= size) return [ids];
  const count = Math.ceil(ids.length / size);
  const out: number[][] = [];
  for (let k = 0; k < count; k++) {
    out.push(ids.slice(Math.round((k * ids.length) / count), Math.round(((k + 1) * ids.length) / count)));
  }
  return out;
}

/**
 * The weighted mean of `vectors` (weights ≥ 0, e.g. token counts), normalised
 * to unit length. All vectors must have the same length.
 */
export function weightedMean(vectors: readonly Float32Array[], weights: readonly number[]): Float32Array {
  const first = vectors[0];
  if (first === undefined) throw new Error("weightedMean of no vectors");
  const out = new Float32Array(first.length);
  vectors.forEach((v, k) => {
    const w = weights[k] ?? 1;
    for (let d = 0; d < out.length; d++) out[d] = (out[d] as number) + (v[d] as number) * w;
  });
  return normalise(out);
}
