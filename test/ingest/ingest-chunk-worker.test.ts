import { readdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it, vi } from "vitest";
import { createChunker } from "../../src/chunk/index.js";
import { defaultKbConfig } from "../../src/config.js";
import { extractFile } from "../../src/extract/index.js";
import { ChunkWorker, ChunkWorkerFailure, chunkAndAnalyze } from "../../src/ingest/chunk-client.js";
import { CHUNK_WORKER_MIN_SOURCES, type IngestSummary } from "../../src/ingest/pipeline.js";
import { KnowledgeLayer } from "../../src/knowledge-layer.js";
import type { ExtractedDocument } from "../../src/types.js";
import { docsPath, tempDir } from "../helpers/helpers.js";

const RUST = docsPath("markdown", "rust_book_src");
const REQUESTS = docsPath("code", "psf+requests", "src", "requests");
const HAM = docsPath("email", "spamassassin_sample", "easy-ham-1");

/** Real sources of several kinds: Markdown chapters, Python modules, mail, a corrupt PDF. */
function sources(): string[] {
  const md = readdirSync(RUST)
    .filter((f) => f.startsWith("ch04") || f.startsWith("ch08"))
    .map((f) => join(RUST, f));
  const py = readdirSync(REQUESTS)
    .filter((f) => f.endsWith(".py"))
    .slice(0, 8)
    .map((f) => join(REQUESTS, f));
  const mail = readdirSync(HAM)
    .slice(0, 6)
    .map((f) => join(HAM, f));
  return [...md, ...py, ...mail, docsPath("pdf", "pdf-parse_npm_test_data", "03-invalid.pdf")];
}

interface Run {
  summary: IngestSummary;
  rows: unknown[];
  postings: unknown[];
  hits: string[][];
}

/** Ingests `paths` keyword-only with the chunking thread on or off; what the KB holds afterwards. */
async function ingestWith(chunkThread: boolean, paths: string[], spy?: () => void): Promise<Run> {
  const tmp = tempDir();
  const kl = KnowledgeLayer.open({ dataDir: join(tmp.dir, "data"), chunkThread, cache: { type: "none" } });
  try {
    spy?.();
    const summary = await kl.ingest(paths, { embed: false });
    const rows = kl.db
      .prepare(
        `SELECT d.uri, c.chunk_index, c.start, c.end, c.text, c.context_prefix, c.metadata, c.token_count, c.title_token_count
         FROM chunks c JOIN documents d ON d.id = c.document_id ORDER BY c.id`,
      )
      .all();
    const postings = kl.db.prepare("SELECT terms FROM kw_pending ORDER BY chunk_id").all();
    const hits: string[][] = [];
    for (const q of ["ownership borrowing rules", "HTTP basic auth header", "string slices UTF-8"]) {
      const response = await kl.search(q, { mode: "keyword", topK: 5, keepDuplicates: true });
      hits.push(response.results.map((r) => `${r.source.uri}#${r.chunkId} ${r.score.toFixed(6)}`));
    }
    return { summary, rows, postings, hits };
  } finally {
    await kl.close();
    tmp.cleanup();
  }
}

/** A summary without its timing. */
function outcome(summary: IngestSummary): Omit<IngestSummary, "durationMs"> {
  const { durationMs: _, ...rest } = summary;
  return rest;
}

describe("chunking on a worker thread during ingest", () => {
  const worker = new ChunkWorker();
  afterAll(() => worker.close());

  it("gives the chunks and BM25 analyses the calling thread gives, on real Markdown, code and mail", async () => {
    const docs: ExtractedDocument[] = [];
    for (const path of sources().slice(0, -1)) docs.push(...(await extractFile(path)));
    for (const analyzer of ["english", "standard"] as const) {
      const { chunking } = defaultKbConfig();
      const there = await worker.prepare(chunking, analyzer, docs);
      const here = await chunkAndAnalyze(createChunker(chunking), analyzer, docs);
      expect(there).toEqual(here);
      expect(there.error).toBeUndefined();
      expect(there.docs.length).toBe(docs.length);
      expect(there.docs.reduce((n, d) => n + d.chunks.length, 0)).toBeGreaterThan(100);
      // Code went through tree-sitter, Markdown through heading paths.
      expect(there.docs.some((d) => d.chunks.some((c) => typeof c.metadata.symbol === "string"))).toBe(true);
      expect(there.docs.some((d) => d.chunks.some((c) => Array.isArray(c.metadata.headingPath)))).toBe(true);
    }
  });

  it("an ingest of many sources writes the same rows, postings and ranking with and without it", async () => {
    const paths = sources();
    expect(paths.length).toBeGreaterThanOrEqual(CHUNK_WORKER_MIN_SOURCES);
    const prepare = vi.spyOn(ChunkWorker.prototype, "prepare");
    const on = await ingestWith(true, paths);
    // Every source but the corrupt PDF (which fails to extract) went through the worker.
    expect(prepare).toHaveBeenCalledTimes(paths.length - 1);
    prepare.mockClear();
    const off = await ingestWith(false, paths);
    expect(prepare).not.toHaveBeenCalled();
    prepare.mockRestore();
    expect(on.summary.errors).toEqual([{ path: paths.at(-1), reason: expect.any(String) }]);
    expect(on.summary.added).toBe(paths.length - 1);
    expect(outcome(on.summary)).toEqual(outcome(off.summary));
    expect(on.rows.length).toBe(on.summary.chunks);
    expect(on.rows).toEqual(off.rows);
    expect(on.postings).toEqual(off.postings);
    expect(on.hits).toEqual(off.hits);
    expect(on.hits.every((h) => h.length === 5)).toBe(true);
  });

  it("a run whose worker fails chunks on the calling thread instead, losing nothing", async () => {
    const paths = sources();
    const off = await ingestWith(false, paths);
    let calls = 0;
    const failing = await ingestWith(true, paths, () => {
      const real = ChunkWorker.prototype.prepare;
      vi.spyOn(ChunkWorker.prototype, "prepare").mockImplementation(function (this: ChunkWorker, ...args) {
        // Every third source: the worker "died" under it.
        if (++calls % 3 === 0) return Promise.reject(new ChunkWorkerFailure("chunking worker exited"));
        return real.apply(this, args);
      });
    });
    vi.restoreAllMocks();
    expect(calls).toBe(paths.length - 1);
    expect(outcome(failing.summary)).toEqual(outcome(off.summary));
    expect(failing.rows).toEqual(off.rows);
    expect(failing.postings).toEqual(off.postings);
  });

  it("a stopped run commits whole sources only, and the next run does the rest", async () => {
    const paths = sources();
    const tmp = tempDir();
    const kl = KnowledgeLayer.open({ dataDir: join(tmp.dir, "data"), cache: { type: "none" } });
    try {
      const controller = new AbortController();
      const first = await kl.ingest(paths, {
        embed: false,
        signal: controller.signal,
        onProgress: (event) => {
          if (event.phase === "source" && event.done === 7) controller.abort();
        },
      });
      expect(first.stopped).toBe(true);
      const documents = (): number =>
        (kl.db.prepare("SELECT count(DISTINCT path) AS n FROM documents").get() as { n: number }).n;
      // Sources finished before the stop are committed, those begun ahead of it are not.
      expect(documents()).toBe(first.added);
      expect(first.added).toBeLessThanOrEqual(7);
      const second = await kl.ingest(paths, { embed: false });
      expect(second.unchanged).toBe(first.added);
      expect(second.added).toBe(paths.length - 1 - first.added);
      expect(documents()).toBe(paths.length - 1);
    } finally {
      await kl.close();
      tmp.cleanup();
    }
  });

  it("ChunkWorker: a source stops at a document that cannot be chunked, as on the calling thread; close() is final", async () => {
    const { chunking } = defaultKbConfig();
    const good: ExtractedDocument = {
      uri: "good",
      text: "Ownership rules in Rust.",
      metadata: { type: "text", path: "good" },
    };
    const bad = {
      uri: "bad",
      text: 42,
      metadata: { type: "text", path: "bad" },
    } as unknown as ExtractedDocument;
    const source = await worker.prepare(chunking, "english", [good, bad, good]);
    const here = await chunkAndAnalyze(createChunker(chunking), "english", [good, bad, good]);
    expect(source).toEqual(here);
    expect(source.docs.length).toBe(1);
    expect(source.error).toEqual(expect.any(String));
    expect(source.docs[0]?.chunks[0]?.text).toBe("Ownership rules in Rust.");
    // "ownership", "rule", "rust": the English analyzer drops "in" and stems.
    expect(source.docs[0]?.analyzed[0]?.body).toBe(3);
    const pending = worker.prepare(chunking, "english", [good]);
    await worker.close();
    // A request in flight either got its answer before the thread ended or fails as the worker's.
    const settled = await pending.then(
      (answer) => answer.docs[0]?.chunks[0]?.text,
      (error: unknown) => (error instanceof ChunkWorkerFailure ? "worker failure" : error),
    );
    expect(["Ownership rules in Rust.", "worker failure"]).toContain(settled);
    await expect(worker.prepare(chunking, "english", [good])).rejects.toBeInstanceOf(ChunkWorkerFailure);
  });

  it("an ingest whose source fails to chunk on the worker reports it as on the calling thread", async () => {
    const paths = sources();
    const off = await ingestWith(false, paths);
    const failing = await ingestWith(true, paths, () => {
      const real = ChunkWorker.prototype.prepare;
      vi.spyOn(ChunkWorker.prototype, "prepare").mockImplementation(async function (
        this: ChunkWorker,
        ...args
      ) {
        const source = await real.apply(this, args);
        // The first document of the README-like chapter "fails" to chunk.
        return String(args[2][0]?.uri).endsWith("ch04-01-what-is-ownership.md")
          ? { docs: [], error: "chunker gave up" }
          : source;
      });
    });
    vi.restoreAllMocks();
    const failed = paths.find((p) => p.endsWith("ch04-01-what-is-ownership.md"));
    expect(failing.summary.errors).toContainEqual({ path: failed, reason: "chunker gave up" });
    expect(failing.summary.added).toBe(off.summary.added - 1);
    expect(failing.rows).toEqual(
      off.rows.filter((r) => !String((r as { uri: string }).uri).endsWith("ch04-01-what-is-ownership.md")),
    );
  });
});
