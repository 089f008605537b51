/**
 * The bundled embedding models (provider `bundled`), in a module of their own
 * so that configuration code can name them without loading a runtime.
 *
 * - `use-lite`: Universal Sentence Encoder lite with its published float32
 *   weights (the default).
 * - `use-lite-int8`: the same network with its projection matrices as 7-bit
 *   integers, one scale per output column (onnxruntime only): ~1.6x faster per
 *   window on 2 cores, cosine ~0.998 against `use-lite`. Its vectors differ, so
 *   it has a model id, and an embedding cache, of its own (`kl kb reembed`
 *   moves a KB between the two).
 */
export const BUNDLED_MODELS = ["use-lite", "use-lite-int8"] as const;

/** One of {@link BUNDLED_MODELS}. */
export type BundledModel = (typeof BUNDLED_MODELS)[number];
