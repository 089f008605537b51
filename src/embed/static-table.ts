/**
 * The static embedding table of `use-lite-static`: one vector per USE-lite
 * vocabulary piece, distilled from the bundled model, so that a text's vector
 * is a sum of table rows (no network at embedding time).
 *
 * Two halves, each L2-normalised on its own at embedding time, then joined:
 *
 * 1. **Model2Vec half** (Tulkens & van Dongen 2024, "Model2Vec: Distill a
 *    Small Fast Model from any Sentence Transformer",
 *    github.com/MinishLab/model2vec): every piece is embedded alone by USE
 *    lite (one-token windows), the rows are centred and reduced by PCA, and
 *    each row is weighted by SIF (Arora, Liang & Ma 2017, "A Simple but
 *    Tough-to-Beat Baseline for Sentence Embeddings"): `a / (a + p(piece))`,
 *    with `p` the piece's unigram probability from the SentencePiece
 *    vocabulary's log-probabilities (not Model2Vec's Zipf estimate: the
 *    vocabulary has the real ones).
 * 2. **Regression half** (the idea of Tokenlearn, MinishLab): rows `E` fitted
 *    so that the mean of a window's rows reproduces USE lite's vector of that
 *    window, on windows of text that is not used for evaluation: ridge
 *    regression towards the Model2Vec rows, `min ‖X E − Y‖² + λ ‖E − E₀‖²`
 *    (`X` mean-pooling rows, `Y` the teacher's unit vectors, `E₀` the
 *    one-piece unit vectors), solved by Cholesky; then reduced by PCA
 *    (uncentred) to the half's width.
 *
 * Stored as int8 with one scale per row and half (`use-lite-static.bin`, built
 * by scripts/build-static-table.ts; format in {@link encodeStaticTable}).
 */

/** Tokens of one training window and the teacher's unit vector for it. */
export interface TeacherWindows {
  /** Token ids per window (each 1–128 ids). */
  tokens: number[][];
  /** `tokens.length × teacherDimension` unit vectors, row-major. */
  targets: Float32Array;
}

/** Inputs of {@link buildStaticTable}. */
export interface StaticTableInputs {
  /** USE lite's raw output for each vocabulary id as a one-token window: `vocabularySize × teacherDimension`. */
  pieces: Float32Array;
  /** Unigram probability of each id (sums to ~1); reserved ids may be 0. */
  probabilities: Float64Array;
  /** Regression corpus (windows and teacher vectors). */
  corpus: TeacherWindows;
  /** Width of the teacher's vectors (512 for USE lite). */
  teacherDimension: number;
  /** Width of each half (≤ teacherDimension). */
  halfDimension: number;
  /** SIF constant `a`. */
  sif: number;
  /** Ridge constant λ. */
  lambda: number;
  /** Called with a phase name as the build advances (logging). */
  onPhase?: (phase: string) => void;
}

/** A built table: `rows × dimension` float32 (each row: half 1, then half 2). */
export interface StaticTable {
  rows: number;
  /** Full width: `2 × halfDimension`. */
  dimension: number;
  halfDimension: number;
  values: Float32Array;
}

/**
 * Eigen-decomposition of a symmetric `n × n` matrix (row-major) by cyclic
 * Jacobi rotations (Golub & Van Loan, "Matrix Computations", §8.5).
 * @returns eigenvalues, descending, and the eigenvectors as the columns of an
 *   `n × n` row-major matrix in the same order; each vector's largest-magnitude
 *   entry is made positive so the result does not depend on rotation order signs.
 */
export function symmetricEigen(
  matrix: Float64Array,
  n: number,
): { values: Float64Array; vectors: Float64Array } {
  const a = Float64Array.from(matrix);
  const v = new Float64Array(n * n);
  for (let i = 0; i < n; i++) v[i * n + i] = 1;
  for (let sweep = 0; sweep < 100; sweep++) {
    let off = 0;
    let diag = 0;
    for (let i = 0; i < n; i++) {
      diag += (a[i * n + i] as number) ** 2;
      for (let j = i + 1; j < n; j++) off += (a[i * n + j] as number) ** 2;
    }
    if (off <= 1e-22 * diag || off === 0) break;
    for (let p = 0; p < n - 1; p++) {
      for (let q = p + 1; q < n; q++) {
        const apq = a[p * n + q] as number;
        if (Math.abs(apq) < 1e-300) continue;
        const app = a[p * n + p] as number;
        const aqq = a[q * n + q] as number;
        const theta = (aqq - app) / (2 * apq);
        const t = Math.sign(theta || 1) / (Math.abs(theta) + Math.sqrt(theta * theta + 1));
        const c = 1 / Math.sqrt(t * t + 1);
        const s = t * c;
        // A ← Jᵀ A J on rows/columns p and q.
        for (let k = 0; k < n; k++) {
          const akp = a[k * n + p] as number;
          const akq = a[k * n + q] as number;
          a[k * n + p] = c * akp - s * akq;
          a[k * n + q] = s * akp + c * akq;
        }
        for (let k = 0; k < n; k++) {
          const apk = a[p * n + k] as number;
          const aqk = a[q * n + k] as number;
          a[p * n + k] = c * apk - s * aqk;
          a[q * n + k] = s * apk + c * aqk;
        }
        for (let k = 0; k < n; k++) {
          const vkp = v[k * n + p] as number;
          const vkq = v[k * n + q] as number;
          v[k * n + p] = c * vkp - s * vkq;
          v[k * n + q] = s * vkp + c * vkq;
        }
      }
    }
  }
  const order = Array.from({ length: n }, (_, i) => i).sort(
    (x, y) => (a[y * n + y] as number) - (a[x * n + x] as number),
  );
  const values = Float64Array.from(order, (i) => a[i * n + i] as number);
  const vectors = new Float64Array(n * n);
  order.forEach((col, j) => {
    let big = 0;
    for (let k = 0; k < n; k++)
      if (Math.abs(v[k * n + col] as number) > Math.abs(big)) big = v[k * n + col] as number;
    const sign = big < 0 ? -1 : 1;
    for (let k = 0; k < n; k++) vectors[k * n + j] = sign * (v[k * n + col] as number);
  });
  return { values, vectors };
}

/**
 * Projects `rows × n` data onto its top `k` principal axes (PCA).
 * @param center subtract the column means first (classic PCA) or not (uncentred: top right singular vectors).
 * @returns `rows × k` row-major.
 */
export function pcaProject(
  data: Float64Array,
  rows: number,
  n: number,
  k: number,
  center: boolean,
): Float64Array {
  const mean = new Float64Array(n);
  if (center) {
    for (let r = 0; r < rows; r++)
      for (let d = 0; d < n; d++) mean[d] = (mean[d] as number) + (data[r * n + d] as number);
    for (let d = 0; d < n; d++) mean[d] = (mean[d] as number) / rows;
  }
  const cov = new Float64Array(n * n);
  const row = new Float64Array(n);
  for (let r = 0; r < rows; r++) {
    for (let d = 0; d < n; d++) row[d] = (data[r * n + d] as number) - (mean[d] as number);
    for (let i = 0; i < n; i++) {
      const x = row[i] as number;
      if (x === 0) continue;
      for (let j = i; j < n; j++) cov[i * n + j] = (cov[i * n + j] as number) + x * (row[j] as number);
    }
  }
  for (let i = 0; i < n; i++) for (let j = 0; j < i; j++) cov[i * n + j] = cov[j * n + i] as number;
  const { vectors } = symmetricEigen(cov, n);
  const out = new Float64Array(rows * k);
  for (let r = 0; r < rows; r++) {
    for (let d = 0; d < n; d++) row[d] = (data[r * n + d] as number) - (mean[d] as number);
    for (let j = 0; j < k; j++) {
      let s = 0;
      for (let d = 0; d < n; d++) s += (row[d] as number) * (vectors[d * n + j] as number);
      out[r * k + j] = s;
    }
  }
  return out;
}

/**
 * Solves `A X = B` for a symmetric positive-definite `n × n` matrix `A`
 * (row-major, overwritten by its Cholesky factor) and `n × m` right-hand
 * sides `B` (overwritten by `X`).
 * @throws Error when `A` is not positive definite.
 */
export function choleskySolve(a: Float64Array, n: number, b: Float64Array, m: number): void {
  // A = L Lᵀ, L stored in the lower triangle (row-major, so dot products run along rows).
  for (let j = 0; j < n; j++) {
    const rj = j * n;
    let d = a[rj + j] as number;
    for (let k = 0; k < j; k++) d -= (a[rj + k] as number) ** 2;
    if (!(d > 0)) throw new Error(`matrix is not positive definite (pivot ${j})`);
    const l = Math.sqrt(d);
    a[rj + j] = l;
    for (let i = j + 1; i < n; i++) {
      const ri = i * n;
      let s = a[ri + j] as number;
      for (let k = 0; k < j; k++) s -= (a[ri + k] as number) * (a[rj + k] as number);
      a[ri + j] = s / l;
    }
  }
  // Forward: L Y = B.
  for (let i = 0; i < n; i++) {
    const ri = i * n;
    for (let k = 0; k < i; k++) {
      const lik = a[ri + k] as number;
      if (lik === 0) continue;
      for (let c = 0; c < m; c++) b[i * m + c] = (b[i * m + c] as number) - lik * (b[k * m + c] as number);
    }
    const lii = a[ri + i] as number;
    for (let c = 0; c < m; c++) b[i * m + c] = (b[i * m + c] as number) / lii;
  }
  // Backward: Lᵀ X = Y.
  for (let i = n - 1; i >= 0; i--) {
    for (let k = i + 1; k < n; k++) {
      const lki = a[k * n + i] as number;
      if (lki === 0) continue;
      for (let c = 0; c < m; c++) b[i * m + c] = (b[i * m + c] as number) - lki * (b[k * m + c] as number);
    }
    const lii = a[i * n + i] as number;
    for (let c = 0; c < m; c++) b[i * m + c] = (b[i * m + c] as number) / lii;
  }
}

/**
 * Builds the table (see the module comment). Deterministic for the same
 * inputs. Cost: O(V³/3) for the Cholesky factor of the V × V Gram matrix
 * (15 minutes for the 7,025 pieces the corpus holds, on 2 loaded cores) plus two PCAs of `teacherDimension` columns.
 */
export function buildStaticTable(inputs: StaticTableInputs): StaticTable {
  const { pieces, probabilities, corpus, teacherDimension: n, halfDimension: k, sif, lambda } = inputs;
  const rows = probabilities.length;
  if (pieces.length !== rows * n)
    throw new Error(`pieces hold ${pieces.length} values; expected ${rows} × ${n}`);
  if (corpus.targets.length !== corpus.tokens.length * n) {
    throw new Error(
      `corpus targets hold ${corpus.targets.length} values; expected ${corpus.tokens.length} × ${n}`,
    );
  }
  if (k > n) throw new Error(`half dimension ${k} exceeds the teacher's ${n}`);
  const say = inputs.onPhase ?? (() => {});

  // Half 1: centred PCA of the one-piece vectors, SIF-weighted.
  say("model2vec half: PCA of the piece vectors");
  const half1 = pcaProject(Float64Array.from(pieces), rows, n, k, true);
  for (let r = 0; r < rows; r++) {
    const w = sif / (sif + (probabilities[r] as number));
    for (let j = 0; j < k; j++) half1[r * k + j] = (half1[r * k + j] as number) * w;
  }

  // Half 2: ridge regression of window vectors on mean-pooled piece counts, towards the unit piece vectors.
  say(`regression half: Gram matrix of ${corpus.tokens.length} windows`);
  const gram = new Float64Array(rows * rows);
  const rhs = new Float64Array(rows * n);
  const counts = new Map<number, number>();
  for (let w = 0; w < corpus.tokens.length; w++) {
    const ids = corpus.tokens[w] as number[];
    counts.clear();
    for (const id of ids) counts.set(id, (counts.get(id) ?? 0) + 1 / ids.length);
    const entries = [...counts.entries()];
    for (const [i, xi] of entries) {
      for (const [j, xj] of entries) gram[i * rows + j] = (gram[i * rows + j] as number) + xi * xj;
      for (let d = 0; d < n; d++) {
        rhs[i * n + d] = (rhs[i * n + d] as number) + xi * (corpus.targets[w * n + d] as number);
      }
    }
  }
  for (let r = 0; r < rows; r++) {
    gram[r * rows + r] = (gram[r * rows + r] as number) + lambda;
    let norm = 0;
    for (let d = 0; d < n; d++) norm += (pieces[r * n + d] as number) ** 2;
    norm = Math.sqrt(norm) || 1;
    for (let d = 0; d < n; d++)
      rhs[r * n + d] = (rhs[r * n + d] as number) + (lambda * (pieces[r * n + d] as number)) / norm;
  }
  // Pieces no window contains are decoupled (their row of the Gram matrix is λ on the diagonal):
  // their solution is the prior, so only the others enter the Cholesky solve.
  const active: number[] = [];
  for (let r = 0; r < rows; r++) if ((gram[r * rows + r] as number) > lambda) active.push(r);
  const m = active.length;
  const reduced = new Float64Array(m * m);
  const solution = new Float64Array(m * n);
  active.forEach((r, i) => {
    active.forEach((c, j) => {
      reduced[i * m + j] = gram[r * rows + c] as number;
    });
    solution.set(rhs.subarray(r * n, (r + 1) * n), i * n);
  });
  say(`regression half: Cholesky solve (${m} × ${m} of ${rows} pieces, ${n} right-hand sides)`);
  choleskySolve(reduced, m, solution, n);
  active.forEach((r, i) => {
    rhs.set(solution.subarray(i * n, (i + 1) * n), r * n);
  });
  for (let r = 0; r < rows; r++) {
    if ((gram[r * rows + r] as number) > lambda) continue;
    for (let d = 0; d < n; d++) rhs[r * n + d] = (rhs[r * n + d] as number) / lambda;
  }
  say("regression half: PCA");
  const half2 = pcaProject(rhs, rows, n, k, false);

  const values = new Float32Array(rows * 2 * k);
  for (let r = 0; r < rows; r++) {
    for (let j = 0; j < k; j++) {
      values[r * 2 * k + j] = half1[r * k + j] as number;
      values[r * 2 * k + k + j] = half2[r * k + j] as number;
    }
  }
  return { rows, dimension: 2 * k, halfDimension: k, values };
}

/** First bytes of a table file. */
const MAGIC = "KLST";

/**
 * Serialises a table as int8 with one float32 scale per row and half
 * (little-endian): `"KLST"`, uint32 version (1), uint32 rows, uint32
 * halfDimension, `rows × 2` float32 scales, then `rows × 2·halfDimension`
 * int8 values (value = int8 × scale; scale = max |value| / 127 of that row half).
 */
export function encodeStaticTable(table: StaticTable): Uint8Array {
  const { rows, halfDimension: k } = table;
  const header = 16;
  const bytes = new Uint8Array(header + rows * 2 * 4 + rows * 2 * k);
  const view = new DataView(bytes.buffer);
  for (let i = 0; i < 4; i++) bytes[i] = MAGIC.charCodeAt(i);
  view.setUint32(4, 1, true);
  view.setUint32(8, rows, true);
  view.setUint32(12, k, true);
  const valuesAt = header + rows * 2 * 4;
  for (let r = 0; r < rows; r++) {
    for (let h = 0; h < 2; h++) {
      const start = r * 2 * k + h * k;
      let max = 0;
      for (let j = 0; j < k; j++) max = Math.max(max, Math.abs(table.values[start + j] as number));
      const scale = max / 127;
      view.setFloat32(header + (r * 2 + h) * 4, scale, true);
      for (let j = 0; j < k; j++) {
        const q = scale > 0 ? Math.round((table.values[start + j] as number) / scale) : 0;
        view.setInt8(valuesAt + start + j, q);
      }
    }
  }
  return bytes;
}

/**
 * Reads a table written by {@link encodeStaticTable} back as float32.
 * @throws Error when the bytes are not a table of version 1 or are truncated.
 */
export function decodeStaticTable(bytes: Uint8Array): StaticTable {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const magic = String.fromCharCode(...bytes.subarray(0, 4));
  if (bytes.length < 16 || magic !== MAGIC) throw new Error("not a static embedding table (bad magic)");
  const version = view.getUint32(4, true);
  if (version !== 1) throw new Error(`static embedding table version ${version}; expected 1`);
  const rows = view.getUint32(8, true);
  const k = view.getUint32(12, true);
  const valuesAt = 16 + rows * 2 * 4;
  if (bytes.length !== valuesAt + rows * 2 * k) {
    throw new Error(`static embedding table is ${bytes.length} bytes; expected ${valuesAt + rows * 2 * k}`);
  }
  const values = new Float32Array(rows * 2 * k);
  for (let r = 0; r < rows; r++) {
    for (let h = 0; h < 2; h++) {
      const scale = view.getFloat32(16 + (r * 2 + h) * 4, true);
      const start = r * 2 * k + h * k;
      for (let j = 0; j < k; j++) values[start + j] = view.getInt8(valuesAt + start + j) * scale;
    }
  }
  return { rows, dimension: 2 * k, halfDimension: k, values };
}

/**
 * Unigram probabilities of a SentencePiece vocabulary from its
 * log-probabilities: `exp(score)`, normalised. Reserved ids (< 6) get 0; a
 * missing (`null`) or non-negative score (user-defined pieces such as `:30`)
 * takes the previous id's, the vocabulary being sorted by score.
 */
export function pieceProbabilities(
  vocabulary: ReadonlyArray<readonly [string, number | null]>,
): Float64Array {
  const p = new Float64Array(vocabulary.length);
  let last = -20;
  for (let id = 0; id < vocabulary.length; id++) {
    const s = vocabulary[id]?.[1];
    if (id < 6) continue;
    if (typeof s === "number" && s < 0) last = s;
    p[id] = Math.exp(last);
  }
  let sum = 0;
  for (const x of p) sum += x;
  for (let id = 0; id < p.length; id++) p[id] = (p[id] as number) / sum;
  return p;
}
