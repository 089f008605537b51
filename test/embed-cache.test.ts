/**
 * CachedEmbedder with the providers' dimension rules: a cached vector of
 * another length than the embedder's dimension is recomputed; an embedder
 * whose dimension is not known yet reports the cached vectors' length;
 * resolveDimension and close pass through.
 */
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { CachedEmbedder } from "../src/embed/cache.js";
import type { Embedder } from "../src/embed/contract.js";
import { openDatabase } from "../src/store/database.js";
import { tempDir } from "./helpers.js";

/** A fake remote-like embedder: `dimension` is 0 until the first call or resolveDimension. */
function fake(length: number, known = 0): Embedder & { calls: number; closed: boolean } {
  let dimension = known;
  const vector = (t: string) => {
    dimension = length;
    const v = new Float32Array(length);
    v[t.length % length] = 1;
    return v;
  };
  const e = {
    provider: "fake",
    modelId: "m",
    get dimension() {
      return dimension;
    },
    calls: 0,
    closed: false,
    embedTexts: async (texts: string[]) => {
      e.calls++;
      return texts.map(vector);
    },
    embedQuery: async (text: string) => {
      e.calls++;
      return vector(text);
    },
    resolveDimension: async () => {
      dimension = length;
      return length;
    },
    close: async () => {
      e.closed = true;
    },
  };
  return e;
}

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

function db() {
  const tmp = tempDir("kl-embed-cache-");
  const handle = openDatabase(join(tmp.dir, "data"));
  cleanups.push(() => {
    handle.close();
    tmp.cleanup();
  });
  return handle;
}

describe("CachedEmbedder and dimensions", () => {
  it("recomputes cached vectors whose length differs from the embedder's dimension", async () => {
    const handle = db();
    await new CachedEmbedder(fake(4), handle).embedTexts(["a", "bb"]);
    const wider = fake(8, 8);
    const cached = new CachedEmbedder(wider, handle);
    const vectors = await cached.embedTexts(["a", "bb"]);
    expect(vectors.map((v) => v.length)).toEqual([8, 8]);
    expect(cached.stats).toEqual({ hits: 0, misses: 2 });
    // Overwritten: the next run hits.
    const again = new CachedEmbedder(fake(8, 8), handle);
    await again.embedTexts(["a", "bb"]);
    expect(again.stats).toEqual({ hits: 2, misses: 0 });
  });

  it("reports the cached vectors' length while the inner dimension is unknown; passes resolveDimension and close", async () => {
    const handle = db();
    await new CachedEmbedder(fake(6), handle).embedQuery("q");
    const inner = fake(6);
    const cached = new CachedEmbedder(inner, handle);
    expect(cached.dimension).toBe(0);
    await cached.embedQuery("q");
    expect(inner.calls).toBe(0);
    expect(cached.dimension).toBe(6);
    expect(await cached.resolveDimension()).toBe(6);
    await cached.close();
    expect(inner.closed).toBe(true);
  });
});
