/**
 * CachedEmbedder with the providers' dimension rules: a cached vector of
 * another length than the embedder's dimension is recomputed; an embedder
 * whose dimension is not known yet reports the cached vectors' length;
 * resolveDimension and close pass through.
 */
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { CachedEmbedder } from "../../src/embed/cache.js";
import type { Embedder } from "../../src/embed/contract.js";
import { createEmbedder } from "../../src/embed/index.js";
import { openDatabase } from "../../src/store/database.js";
import { tempDir } from "../helpers/helpers.js";

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

describe("CachedEmbedder slices", () => {
  it("hands the model the next 64 texts before the current slice comes back, keeping order and progress", async () => {
    const handle = db();
    const events: string[] = [];
    const release: (() => void)[] = [];
    const inner: Embedder = {
      provider: "fake",
      modelId: "slow",
      dimension: 2,
      embedTexts: (texts) => {
        events.push(`start ${texts[0]}`);
        return new Promise((resolve) => {
          release.push(() => {
            events.push(`end ${texts[0]}`);
            resolve(texts.map((t) => Float32Array.of(Number(t.slice(1)), 1)));
          });
        });
      },
      embedQuery: async () => Float32Array.of(0, 1),
    };
    const texts = Array.from({ length: 150 }, (_, i) => `t${i}`);
    const progress: number[] = [];
    const call = new CachedEmbedder(inner, handle).embedTexts(texts, (done) => progress.push(done));
    await new Promise((r) => setImmediate(r));
    // Two slices in flight at once: t0–t63 and t64–t127.
    expect(events).toEqual(["start t0", "start t64"]);
    release.shift()?.();
    await new Promise((r) => setImmediate(r));
    expect(events).toEqual(["start t0", "start t64", "end t0", "start t128"]);
    release.shift()?.();
    await new Promise((r) => setImmediate(r));
    release.shift()?.();
    const vectors = await call;
    expect(vectors.map((v) => v[0])).toEqual(texts.map((_, i) => i));
    expect(progress).toEqual([0, 64, 128, 150]);
  });

  it("rejects with the model's error when a slice fails, with no unhandled rejection from the one in flight", async () => {
    const handle = db();
    let calls = 0;
    const inner: Embedder = {
      provider: "fake",
      modelId: "broken",
      dimension: 2,
      embedTexts: async () => {
        calls++;
        throw new Error(`model failed ${calls}`);
      },
      embedQuery: async () => Float32Array.of(0, 1),
    };
    const texts = Array.from({ length: 100 }, (_, i) => `u${i}`);
    await expect(new CachedEmbedder(inner, handle).embedTexts(texts)).rejects.toThrow("model failed 1");
    expect(calls).toBe(2);
  });
});

describe("CachedEmbedder and the bundled models", () => {
  it("keys use-lite and use-lite-int8 vectors apart, so a KB moved to int8 never reads fp32 vectors", async () => {
    const handle = db();
    const text = "Vitamin D deficiency is associated with fractures.";
    const fp32 = new CachedEmbedder(
      createEmbedder({ provider: "bundled", model: "use-lite", workers: 0 }),
      handle,
    );
    const int8 = new CachedEmbedder(
      createEmbedder({ provider: "bundled", model: "use-lite-int8", workers: 0 }),
      handle,
    );
    const [a] = await fp32.embedTexts([text]);
    const [b] = await int8.embedTexts([text]);
    expect(int8.stats).toEqual({ hits: 0, misses: 1 }); // not served from use-lite's entry
    const rows = handle.prepare("SELECT model FROM embedding_cache ORDER BY model").all() as {
      model: string;
    }[];
    expect(rows.map((r) => r.model)).toEqual(["use-lite", "use-lite-int8"]);
    expect(b).not.toEqual(a);
    await Promise.all([fp32.close(), int8.close()]);
  });
});
