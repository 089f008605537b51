import { join } from "node:path";
import cliProgress from "cli-progress";
import { afterEach, describe, expect, it, vi } from "vitest";
import { formatSeconds, ingestEstimate, ingestStatus, ProgressReporter } from "../../src/cli/format.js";
import { CachedEmbedder } from "../../src/embed/cache.js";
import type { Embedder } from "../../src/embed/contract.js";
import type { IngestProgress } from "../../src/ingest/pipeline.js";
import { KnowledgeLayer } from "../../src/knowledge-layer.js";
import { tempDir } from "../helpers/helpers.js";

describe("ingest progress line", () => {
  it("shows sources, chunks made and embedded, chunks/s and an ETA", () => {
    // 120 of 480 sources chunked into 300 chunks (2.5 per source → ~1,200 in all), 240 embedded in 4 s:
    // a fifth of the work, so 16 s left.
    expect(ingestStatus({ done: 120, total: 480, chunked: 300, embedded: 240, elapsedMs: 4000 })).toBe(
      "120/480 sources · 300 chunks, 240 embedded · 60.0 chunks/s · eta 16s",
    );
    // Every source chunked but most chunks still to embed: the ETA follows the chunks.
    expect(ingestStatus({ done: 10, total: 10, chunked: 100, embedded: 25, elapsedMs: 5000 })).toBe(
      "10/10 sources · 100 chunks, 25 embedded · 5.0 chunks/s · eta 15s",
    );
    // Nothing embedded (yet, or --no-embed): counted in sources.
    expect(ingestStatus({ done: 3, total: 10, chunked: 6, embedded: undefined, elapsedMs: 1000 })).toBe(
      "3/10 sources · 6 chunks · eta 2s",
    );
    expect(ingestStatus({ done: 10, total: 10, chunked: 25, embedded: 25, elapsedMs: 5000 })).toBe(
      "10/10 sources · 25 chunks, 25 embedded · 5.0 chunks/s",
    );
    // One chunk is "1 chunk" (fresh user report).
    expect(ingestStatus({ done: 1, total: 1, chunked: 1, embedded: 1, elapsedMs: 1000 })).toBe(
      "1/1 sources · 1 chunk, 1 embedded · 1.0 chunks/s",
    );
    expect(ingestEstimate({ done: 0, total: 10, chunked: 0, embedded: undefined, elapsedMs: 1000 })).toEqual({
      fraction: 0,
      etaSeconds: undefined,
    });
  });

  it("measures the ETA from the first counted progress, not from the start (fresh user report)", () => {
    // 3 s of start-up (model, workers), then 100 chunks per 0.5 s of ~1,000: about 4 s left, not 15 s.
    const state = { done: 10, total: 10, chunked: 1000, embedded: 210, elapsedMs: 4000 };
    expect(ingestEstimate(state).etaSeconds).toBeCloseTo(15.05, 1);
    expect(ingestEstimate({ ...state, since: { elapsedMs: 3000, fraction: 0.01 } }).etaSeconds).toBeCloseTo(
      3.95,
      2,
    );
    // Less than 1 s or 1% of the work since that point: no ETA yet.
    expect(
      ingestEstimate({ ...state, since: { elapsedMs: 3500, fraction: 0.11 } }).etaSeconds,
    ).toBeUndefined();
    expect(
      ingestEstimate({ ...state, since: { elapsedMs: 1000, fraction: 0.205 } }).etaSeconds,
    ).toBeUndefined();

    const lefts: string[] = [];
    vi.spyOn(cliProgress.SingleBar.prototype, "start").mockImplementation(() => undefined);
    vi.spyOn(cliProgress.SingleBar.prototype, "stop").mockImplementation(() => undefined);
    vi.spyOn(cliProgress.SingleBar.prototype, "update").mockImplementation(
      (_value: unknown, payload?: unknown) => {
        lefts.push((payload as { left: string }).left);
      },
    );
    let now = 0;
    const reporter = new ProgressReporter("bar", () => now);
    reporter.update({ phase: "discovered", total: 10 });
    reporter.update({ phase: "source", done: 10, total: 10, path: "/j", chunks: 1000 });
    now = 3000; // the model loaded: the first chunks embedded
    reporter.update({ phase: "embedded", chunks: 10 });
    now = 4000;
    reporter.update({ phase: "embedded", chunks: 210 });
    now = 5000;
    reporter.update({ phase: "embedded", chunks: 410 });
    reporter.stop();
    vi.restoreAllMocks();
    // Sources only (all read at once: nothing left to time), the anchor, then 200 chunks a second.
    expect(lefts).toEqual(["-", "-", "4s", "3s"]);
  });

  it("formats durations as seconds, minutes or hours", () => {
    expect(formatSeconds(42.4)).toBe("42s");
    expect(formatSeconds(185)).toBe("3m05s");
    expect(formatSeconds(7620)).toBe("2h07m");
  });

  it("writes a line at most every 10 s off a terminal, and the last one always", () => {
    let now = 1_000;
    const lines: string[] = [];
    const reporter = new ProgressReporter(
      "lines",
      () => now,
      (line) => lines.push(line),
    );
    reporter.update({ phase: "discovered", total: 4 });
    now += 2_000;
    reporter.update({ phase: "source", done: 1, total: 4, path: "/a", chunks: 300 }); // first line
    now += 3_000;
    reporter.update({ phase: "embedded", chunks: 100 }); // within 10 s: silent
    now += 10_000;
    reporter.update({ phase: "embedded", chunks: 300 });
    reporter.update({ phase: "source", done: 4, total: 4, path: "/d", chunks: 1200 }); // within 10 s: silent
    now += 30_000;
    reporter.update({ phase: "embedded", chunks: 1200 }); // the end: always
    expect(lines).toEqual([
      // A first line has no rate to extrapolate from yet.
      "ingest: 1/4 sources · 300 chunks\n",
      "ingest: 1/4 sources · 300 chunks, 300 embedded · 20.0 chunks/s · eta 45s\n",
      "ingest: 4/4 sources · 1200 chunks, 1200 embedded · 26.7 chunks/s\n",
    ]);
  });
});

describe("ingest progress bar", () => {
  afterEach(() => vi.restoreAllMocks());

  it("never moves back when embedding starts behind the chunking (fresh user report)", () => {
    const shown: number[] = [];
    vi.spyOn(cliProgress.SingleBar.prototype, "start").mockImplementation(() => undefined);
    vi.spyOn(cliProgress.SingleBar.prototype, "stop").mockImplementation(() => undefined);
    vi.spyOn(cliProgress.SingleBar.prototype, "update").mockImplementation((value: unknown) => {
      shown.push(value as number);
    });
    let now = 0;
    const reporter = new ProgressReporter("bar", () => now);
    reporter.update({ phase: "discovered", total: 20 });
    now += 1_000;
    reporter.update({ phase: "source", done: 3, total: 20, path: "/c", chunks: 300 });
    now += 1_000;
    // The first chunks embedded: alone, the estimate would fall from 15% to 0.5%.
    reporter.update({ phase: "embedded", chunks: 10 });
    now += 1_000;
    reporter.update({ phase: "embedded", chunks: 1_000 });
    reporter.update({ phase: "source", done: 20, total: 20, path: "/t", chunks: 2_000 });
    reporter.update({ phase: "embedded", chunks: 2_000 });
    reporter.stop();
    expect(shown).toEqual([150, 150, 150, 500, 1000]);
    // A new ingest starts from zero again.
    shown.length = 0;
    reporter.update({ phase: "discovered", total: 4 });
    reporter.update({ phase: "source", done: 1, total: 4, path: "/a", chunks: 10 });
    expect(shown).toEqual([250]);
  });
});

/** 8-d vectors from character codes; records every call. */
class CountingEmbedder implements Embedder {
  readonly provider = "fake";
  readonly modelId = "count";
  readonly dimension = 8;
  calls = 0;
  async embedTexts(texts: string[]): Promise<Float32Array[]> {
    this.calls++;
    return texts.map((t) => Float32Array.from({ length: 8 }, (_, d) => (t.charCodeAt(d % t.length) % 7) + 1));
  }
  async embedQuery(text: string): Promise<Float32Array> {
    return (await this.embedTexts([text]))[0] as Float32Array;
  }
}

describe("ingest pipeline progress", () => {
  const cleanups: (() => void)[] = [];
  afterEach(() => {
    for (const c of cleanups.splice(0)) c();
  });

  it("reports chunks embedded so far, cumulative over embedding steps, ending at the chunk count", async () => {
    const tmp = tempDir();
    const kl = KnowledgeLayer.open({ dataDir: join(tmp.dir, "data") });
    cleanups.push(() => {
      kl.close();
      tmp.cleanup();
    });
    vi.spyOn(kl, "embedder").mockReturnValue(new CachedEmbedder(new CountingEmbedder(), kl.db));
    await kl.createKb("p", {
      chunking: { strategy: "fixed", chunkSize: 100, chunkOverlap: 0, minChunkSize: 1 },
    });
    // 300 documents of one ~60-character chunk each: two flushes (256 chunks), several 64-text steps.
    const docs = Array.from({ length: 300 }, (_, i) => ({
      uri: `mem://${i}`,
      text: `Document number ${i} talks about topic ${i % 17} and nothing else.`,
      metadata: { path: `mem://${i}`, type: "text" as const },
    }));
    const events: IngestProgress[] = [];
    const summary = await kl.ingestDocuments(docs, { kb: "p", onProgress: (e) => events.push(e) });
    expect(summary.chunks).toBe(300);
    const embedded = events.flatMap((e) => (e.phase === "embedded" ? [e.chunks] : []));
    expect(embedded.at(-1)).toBe(300);
    expect(embedded).toContain(256); // the first flush completes at 256 chunks
    expect(embedded.some((n) => n > 0 && n < 256)).toBe(true); // progress within a flush
    for (let i = 1; i < embedded.length; i++)
      expect(embedded[i]).toBeGreaterThanOrEqual(embedded[i - 1] as number);
  });
});
