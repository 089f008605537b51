/**
 * The bundled embedding models (provider `bundled`), in a module of their own
 * so that configuration code can name them without loading a runtime.
 *
 * - `use-lite`: Universal Sentence Encoder lite with its published float32
 *   weights, every 128-token window of a text averaged (the default before
 *   issue 15; KBs created with it keep it).
 * - `use-lite-int8`: the same network with its projection matrices as 7-bit
 *   integers, one scale per output column (onnxruntime only): ~1.6x faster per
 *   window on 2 cores, cosine ~0.998 against `use-lite`. Its vectors differ, so
 *   it has a model id, and an embedding cache, of its own (`kl kb reembed`
 *   moves a KB between the two).
 * - `use-lite-static`: a static table distilled from USE lite (one vector per
 *   vocabulary piece, ./static-table.ts): a text's vector is a sum of table
 *   rows, no network runs (./static.ts). Another vector space, so another id.
 * - `use-lite-mix`: `use-lite-int8` on the first 128-token window only, joined
 *   with the `use-lite-static` vector of the whole text (./static-mix.ts), 1024-d.
 *   The default: ~2x `use-lite`'s ingest speed on 2 cores with hybrid nDCG@10 at
 *   least `use-lite`'s on SciFact, Cranfield and XQuAD-en (`npm run bench:embed-goal`).
 */
export const BUNDLED_MODELS = ["use-lite", "use-lite-int8", "use-lite-static", "use-lite-mix"] as const;

/** One of {@link BUNDLED_MODELS}. */
export type BundledModel = (typeof BUNDLED_MODELS)[number];

/** The bundled models that run the USE-lite network (./bundled.ts); the others are static tables. */
export const USE_NETWORK_MODELS = ["use-lite", "use-lite-int8"] as const;

/** One of {@link USE_NETWORK_MODELS}. */
export type UseNetworkModel = (typeof USE_NETWORK_MODELS)[number];

/** Vector length of each bundled model. */
export const BUNDLED_DIMENSIONS: Record<BundledModel, number> = {
  "use-lite": 512,
  "use-lite-int8": 512,
  "use-lite-static": 512,
  "use-lite-mix": 1024,
};
