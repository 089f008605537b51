import { createRequire } from "node:module";
import { describe, expect, it } from "vitest";
import { BundledEmbedder, dedupeWindows, padBatch } from "../../src/embed/bundled.js";
import { createEmbedder } from "../../src/embed/index.js";
import { encodeOnnxModel, OnnxType } from "../../src/embed/onnx-writer.js";
import { onnxRuntimePath, readUseWeights, useModelJsonPath } from "../../src/embed/use-onnx.js";

interface Ort {
  Tensor: new (type: string, data: Float32Array, dims: number[]) => unknown;
  InferenceSession: {
    create(model: Uint8Array): Promise<{
      run(feeds: Record<string, unknown>): Promise<Record<string, { data: Float32Array; dims: number[] }>>;
    }>;
  };
}
const ort = createRequire(import.meta.url)(onnxRuntimePath()) as Ort;

function cosine(a: Float32Array, b: Float32Array): number {
  let ab = 0;
  let aa = 0;
  let bb = 0;
  for (let i = 0; i < a.length; i++) {
    ab += (a[i] as number) * (b[i] as number);
    aa += (a[i] as number) ** 2;
    bb += (b[i] as number) ** 2;
  }
  return ab / Math.sqrt(aa * bb);
}

/** Real-world texts of every length class: queries, sentences, abstracts past 128 tokens, odd symbols. */
const TEXTS = [
  "How do I install Rust?",
  "0-dimensional biomaterials show inductive properties.",
  "Vitamin D deficiency is associated with an increased risk of fractures in older adults.",
  "emoji 😀 and CJK 日本語 and ligatures ﬁ — unknown symbols map to id 0",
  "a",
  "",
  "Alterations of the architecture of cerebral white matter in the developing human brain can affect cortical " +
    "development and result in functional disabilities. A line scan diffusion-weighted magnetic resonance imaging " +
    "(MRI) sequence with diffusion tensor analysis was applied to measure the apparent diffusion coefficient, to " +
    "calculate relative anisotropy, and to delineate three-dimensional fiber architecture in cerebral white matter " +
    "in preterm (n = 17) and full-term infants (n = 7). To assess effects of prematurity on cerebral white matter " +
    "development, early gestation preterm infants (n = 10) were studied a second time at term.",
  "Rust ownership rules: each value has an owner, and borrowing lets code use a value without owning it. ".repeat(
    9,
  ),
];

describe("ONNX writer", () => {
  it("writes a model onnxruntime loads and runs (Add, Mul with an initialiser, negative int attribute)", async () => {
    const bytes = encodeOnnxModel({
      name: "tiny",
      nodes: [
        { op: "Mul", inputs: ["x", "w"], outputs: ["xw"] },
        { op: "Add", inputs: ["xw", "x"], outputs: ["s"] },
        { op: "Softmax", inputs: ["s"], outputs: ["y"], attributes: { axis: { i: -1 } } },
      ],
      initializers: [{ name: "w", dims: [3], type: OnnxType.FLOAT, data: Float32Array.of(1, 2, 3) }],
      inputs: [{ name: "x", type: OnnxType.FLOAT, dims: ["batch", 3] }],
      outputs: [{ name: "y", type: OnnxType.FLOAT, dims: ["batch", 3] }],
      opsets: { "": 17 },
    });
    const session = await ort.InferenceSession.create(bytes);
    const out = await session.run({
      x: new ort.Tensor("float32", Float32Array.of(1, 1, 1, 0, 0, 0), [2, 3]),
    });
    const y = out.y as { data: Float32Array; dims: number[] };
    expect(y.dims).toEqual([2, 3]);
    // Row 1: softmax([2, 3, 4]); row 2: softmax([0, 0, 0]).
    const z = Math.exp(2) + Math.exp(3) + Math.exp(4);
    expect([...y.data].map((v) => Number(v.toFixed(5)))).toEqual(
      [Math.exp(2) / z, Math.exp(3) / z, Math.exp(4) / z, 1 / 3, 1 / 3, 1 / 3].map((v) =>
        Number(v.toFixed(5)),
      ),
    );
  });
});

describe("USE lite on onnxruntime", () => {
  it("reads the 61 weights of the package's model.json (27.9 MB)", () => {
    const weights = readUseWeights(useModelJsonPath());
    expect(weights.size).toBe(61);
    expect(weights.get("module/Embeddings_en")?.shape).toEqual([8002, 256]);
    let bytes = 0;
    for (const w of weights.values()) bytes += w.data.byteLength;
    expect(bytes).toBe(27_903_656);
  });

  it("gives the TF.js graph's vectors (cosine > 0.99999) for short, long and odd texts, batched and alone", async () => {
    const onnx = new BundledEmbedder({ runtime: "onnx", workers: 0, batchSize: 4 });
    const tfjs = new BundledEmbedder({ runtime: "tfjs", workers: 0, batchSize: 4 });
    const [a, b] = [await onnx.embedTexts(TEXTS), await tfjs.embedTexts(TEXTS)];
    TEXTS.forEach((text, i) => {
      expect(cosine(a[i] as Float32Array, b[i] as Float32Array), JSON.stringify(text)).toBeGreaterThan(
        0.99999,
      );
    });
    for (const text of TEXTS.slice(0, 3)) {
      expect(cosine(await onnx.embedQuery(text), await tfjs.embedQuery(text))).toBeGreaterThan(0.99999);
    }
  });

  it("gives the same vectors on worker threads as on the calling thread", async () => {
    const pooled = new BundledEmbedder({ runtime: "onnx", workers: 2, batchSize: 2 });
    const local = new BundledEmbedder({ runtime: "onnx", workers: 0, batchSize: 2 });
    const [a, b] = [await pooled.embedTexts(TEXTS), await local.embedTexts(TEXTS)];
    expect(pooled.workerThreadIds.length).toBeGreaterThan(0);
    TEXTS.forEach((_, i) => {
      expect(cosine(a[i] as Float32Array, b[i] as Float32Array)).toBeGreaterThan(0.99999);
    });
    await pooled.close();
  });
});

describe("window batching", () => {
  it("pads a batch to its longest row with a 0/1 mask", () => {
    const { ids, mask, width } = padBatch([[5, 6], [7], [8, 9, 10]]);
    expect(width).toBe(3);
    expect([...ids]).toEqual([5, 6, 0, 7, 0, 0, 8, 9, 10]);
    expect([...mask]).toEqual([1, 1, 0, 1, 0, 0, 1, 1, 1]);
  });

  it("embeds each distinct window once and maps every window to it", () => {
    const { unique, slot } = dedupeWindows([
      { text: 0, ids: [1, 2, 3] },
      { text: 0, ids: [4, 5] },
      { text: 1, ids: [1, 2, 3] },
      { text: 2, ids: [1, 2] },
      { text: 3, ids: [4, 5] },
    ]);
    expect(unique).toEqual([
      [1, 2, 3],
      [4, 5],
      [1, 2],
    ]);
    expect(slot).toEqual([0, 1, 0, 2, 1]);
  });

  it("a text repeated in a call, or sharing windows with another, gets the vector it gets alone", async () => {
    const embedder = new BundledEmbedder({ workers: 0 });
    const long = TEXTS[7] as string;
    const [x, y, z] = await embedder.embedTexts([long, long, `${long} Mitochondria produce ATP.`]);
    const alone = await embedder.embedQuery(`${long} Mitochondria produce ATP.`);
    expect([...(y as Float32Array)]).toEqual([...(x as Float32Array)]);
    expect(cosine(z as Float32Array, alone)).toBeGreaterThan(0.99999);
  });
});

describe("use-lite-int8", () => {
  it("has a model id of its own and vectors within cosine 0.99 of use-lite", async () => {
    const int8 = new BundledEmbedder({ model: "use-lite-int8", workers: 0 });
    const fp32 = new BundledEmbedder({ workers: 0 });
    expect(int8.modelId).toBe("use-lite-int8");
    expect(fp32.modelId).toBe("use-lite");
    const [a, b] = [await int8.embedTexts(TEXTS), await fp32.embedTexts(TEXTS)];
    TEXTS.forEach((text, i) => {
      const c = cosine(a[i] as Float32Array, b[i] as Float32Array);
      expect(c, JSON.stringify(text)).toBeGreaterThan(0.99);
      expect(c, JSON.stringify(text)).toBeLessThan(0.99999); // really other vectors: a cache of their own
    });
  });

  it("is refused on the TF.js runtime and as an unknown bundled model", () => {
    expect(() => new BundledEmbedder({ model: "use-lite-int8", runtime: "tfjs" })).toThrow(
      /onnxruntime only/,
    );
    expect(() => new BundledEmbedder({ model: "use-lite-q4" as never })).toThrow(/use-lite, use-lite-int8/);
    expect(() => createEmbedder({ provider: "bundled", model: "use-lite-int8", runtime: "tfjs" })).toThrow(
      /onnxruntime only/,
    );
    expect(() => createEmbedder({ provider: "bundled", model: "use-lite-q4" })).toThrow(
      /"use-lite" or "use-lite-int8"/,
    );
    expect(createEmbedder({ provider: "bundled", model: "use-lite-int8" }).modelId).toBe("use-lite-int8");
  });
});
