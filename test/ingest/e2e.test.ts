import { copyFileSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { IngestSummary } from "../../src/ingest/pipeline.js";
import { KnowledgeLayer, type SearchResult } from "../../src/knowledge-layer.js";
import { chunkBody } from "../../src/types.js";
import { docsPath, tempDir } from "../helpers/helpers.js";

/** Runs `fn` with a KnowledgeLayer on a fresh temporary data directory, then closes and removes it. */
async function withKnowledgeLayer(
  fn: (kl: KnowledgeLayer, tmp: { dir: string }) => Promise<void>,
): Promise<void> {
  const tmp = tempDir();
  const kl = KnowledgeLayer.open({ dataDir: join(tmp.dir, "data") });
  try {
    await fn(kl, tmp);
  } finally {
    kl.close();
    tmp.cleanup();
  }
}

const rust = (f: string): string => docsPath("markdown", "rust_book_src", f);
const ham = (f: string): string => docsPath("email", "spamassassin_sample", "easy-ham-1", f);

const KLEZ = ham("00004.864220c5b6930b209cc287c361c99af1.txt");
const SUSE = ham("00027.4d456dd9ce0afde7629f94dc3034e0bb.txt");
const PDF = docsPath("pdf", "pdf-parse_npm_test_data", "02-valid.pdf");
const CORRUPT_PDF = docsPath("pdf", "pdf-parse_npm_test_data", "03-invalid.pdf");
const SLACK = docsPath("slack", "slack_export_viewer_testarchive", "export");
const REQUESTS_AUTH = docsPath("code", "psf+requests", "src", "requests", "auth.py");
const GIN_AUTH = docsPath("code", "gin-gonic+gin", "auth.go");

describe("end to end: ingest real documents and answer questions", () => {
  const tmp = tempDir();
  let kl: KnowledgeLayer;
  let first: IngestSummary;
  const empty = join(tmp.dir, "empty.md");

  beforeAll(async () => {
    writeFileSync(empty, "");
    kl = KnowledgeLayer.open({ dataDir: join(tmp.dir, "data") });
    first = await kl.ingest([
      rust("ch01-01-installation.md"),
      rust("ch04-01-what-is-ownership.md"),
      rust("ch04-02-references-and-borrowing.md"),
      rust("ch08-02-strings.md"),
      KLEZ,
      SUSE,
      PDF,
      CORRUPT_PDF,
      SLACK,
      REQUESTS_AUTH,
      GIN_AUTH,
      empty,
    ]);
  });

  afterAll(() => {
    kl.close();
    tmp.cleanup();
  });

  it("ingests every good file and reports the corrupt PDF and the empty file without stopping", () => {
    expect(first.added).toBe(10);
    expect(first.errors.map((e) => basename(e.path)).sort()).toEqual(["03-invalid.pdf", "empty.md"]);
    for (const e of first.errors) expect(e.reason.length).toBeGreaterThan(5);
    // The Slack export yields one document per channel.
    expect(first.documents).toBe(11);
    expect(first.chunks).toBeGreaterThan(50);
    expect(first.embedded.computed).toBeGreaterThan(50);
  });

  const top = async (q: string): Promise<SearchResult[]> => (await kl.search(q)).results;
  const paths = (rs: SearchResult[]): string[] => rs.map((r) => r.source.path);

  it("answers a Markdown question with heading-path attribution", async () => {
    const rs = await top("What are the ownership rules in Rust?");
    expect(rs).toHaveLength(5);
    const hit = rs.find((r) => r.source.path === rust("ch04-01-what-is-ownership.md"));
    expect(hit).toBeDefined();
    expect(hit?.source.type).toBe("markdown");
    expect(hit?.source.headingPath?.[0]).toBe("What Is Ownership?");
    expect(hit?.chunk.total).toBeGreaterThan(1);
    expect(hit?.chunk.end).toBeGreaterThan(hit?.chunk.start ?? 0);
    expect(hit?.citation).toContain("ch04-01-what-is-ownership.md");
  });

  it("finds the installation chapter", async () => {
    expect(paths(await top("How do I install Rust with rustup on Linux or macOS?"))).toContain(
      rust("ch01-01-installation.md"),
    );
  });

  it("answers from an email with sender, subject and date", async () => {
    const rs = await top("how many new Klez virus infections are reported daily?");
    const hit = rs.find((r) => r.source.path === KLEZ);
    expect(hit).toBeDefined();
    expect(hit?.source.type).toBe("email");
    expect(hit?.source.subject).toContain("Klez");
    expect(hit?.source.from).toBeTruthy();
    expect(hit?.source.date?.startsWith("2002-")).toBe(true);
    expect(paths(await top("Suse 7.2 does not detect my nVidia GeForce video card"))).toContain(SUSE);
  });

  it("answers from a PDF with page numbers", async () => {
    const rs = await top("GaInP/GaAs solar cell structure");
    const hit = rs.find((r) => r.source.path === PDF);
    expect(hit).toBeDefined();
    expect(hit?.source.type).toBe("pdf");
    expect(hit?.source.page).toBeGreaterThanOrEqual(1);
    expect(hit?.source.page).toBeLessThanOrEqual(5);
  });

  it("answers from Slack with channel, user and time", async () => {
    const rs = await top("genetic algorithm versus simulated annealing");
    const hit = rs.find((r) => r.source.type === "slack");
    expect(hit).toBeDefined();
    expect(hit?.source.channel).toBe("enrique");
    expect(hit?.source.user).toBeTruthy();
    expect(hit?.source.ts).toMatch(/^\d{10}\.\d+$/);
  });

  it("answers from source code", async () => {
    const rs = await top("HTTP basic authentication username password header");
    expect(paths(rs).some((p) => p === REQUESTS_AUTH || p === GIN_AUTH)).toBe(true);
    const code = rs.find((r) => r.source.type === "code");
    expect(["python", "go"]).toContain(code?.source.language);
  });

  it("keyword and vector modes return ranked results with their own scores", async () => {
    const kw = await kl.search("ownership rules", { mode: "keyword" });
    expect(kw.results[0]?.scores.keyword).toBeGreaterThan(0);
    expect(kw.results[0]?.scores.vector).toBeUndefined();
    const vec = await kl.search("ownership rules", { mode: "vector" });
    const scores = vec.results.map((r) => r.score);
    expect(scores).toEqual([...scores].sort((a, b) => b - a));
    expect(scores[0]).toBeLessThanOrEqual(1);
    // A fusion weight of 0 silences a list: hybrid then ranks like the other list.
    const onlyVector = await kl.search("ownership rules", { mode: "hybrid", keywordWeight: 0 });
    expect(onlyVector.results.map((r) => r.chunkId)).toEqual(vec.results.map((r) => r.chunkId));
    const onlyKeyword = await kl.search("ownership rules", { mode: "hybrid", vectorWeight: 0 });
    expect(onlyKeyword.results.map((r) => r.chunkId)).toEqual(kw.results.map((r) => r.chunkId));
  });

  it("keeps every chunk's span exact, non-empty and well-formed", () => {
    const rows = kl.db
      .prepare("SELECT c.text, c.context_prefix, c.start, c.end, c.document_id AS doc FROM chunks c")
      .all() as { text: string; context_prefix: string | null; start: number; end: number; doc: number }[];
    expect(rows.length).toBe(first.chunks);
    for (const row of rows) {
      const r = { ...row, source: kl.catalog.documentText(row.doc) };
      const body = chunkBody({ text: r.text, contextPrefix: r.context_prefix ?? undefined });
      expect(r.source.slice(r.start, r.end)).toBe(body);
      expect(body.trim().length).toBeGreaterThan(0);
      expect(body.isWellFormed()).toBe(true);
      expect(r.text.isWellFormed()).toBe(true);
    }
  });

  it("re-ingesting unchanged files does nothing", async () => {
    const before = await kl.counts("default");
    const again = await kl.ingest([rust("ch04-01-what-is-ownership.md"), KLEZ, PDF, SLACK]);
    expect(again.unchanged).toBe(4);
    expect(again.added + again.updated).toBe(0);
    expect(again.chunks).toBe(0);
    expect(again.embedded.computed).toBe(0);
    expect(await kl.counts("default")).toEqual(before);
  });
});

describe("re-ingest of a modified file", () => {
  it("replaces only that file's chunks, atomically, and reuses cached embeddings", async () => {
    await withKnowledgeLayer(async (kl, tmp) => {
      const a = join(tmp.dir, "slices.md");
      const b = join(tmp.dir, "structs.md");
      copyFileSync(rust("ch04-03-slices.md"), a);
      copyFileSync(rust("ch05-01-defining-structs.md"), b);
      await kl.createKb("notes");
      await kl.ingest([a, b], { kb: "notes" });
      const ids = (path: string): number[] =>
        (
          kl.db
            .prepare(
              "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id WHERE d.path = ? ORDER BY c.id",
            )
            .all(path) as { id: number }[]
        ).map((r) => r.id);
      const aBefore = ids(a);
      const bBefore = ids(b);
      writeFileSync(b, `${"# Defining Structs\n\nA zebracorn struct holds a name and a horn length.\n\n"}`);
      const s = await kl.ingest([a, b], { kb: "notes" });
      expect(s.unchanged).toBe(1);
      expect(s.updated).toBe(1);
      expect(ids(a)).toEqual(aBefore);
      const bAfter = ids(b);
      expect(bAfter.length).toBe(1);
      expect(bAfter.some((id) => bBefore.includes(id))).toBe(false);
      const hits = await kl.search("zebracorn horn", { kbs: ["notes"] });
      expect(hits.results[0]?.source.path).toBe(b);
      // Old chunks are gone from BM25 and from the vector collection.
      const chunkIds = new Set(kl.db.prepare("SELECT id FROM chunks").pluck().all() as number[]);
      for (const name of ["notes", "default"])
        expect([...kl.bm25.indexedChunkIds(name)].filter((id) => !chunkIds.has(id))).toEqual([]);
      const vectors = (await kl.store.info("kb_notes"))?.count;
      expect(vectors).toBe((await kl.counts("notes")).chunks);
      // The default KB is untouched: KBs are isolated.
      expect((await kl.counts("default")).chunks).toBe(0);
    });
  });
});

describe("crash safety of ingest", () => {
  it("a write that fails mid-transaction leaves the previous version intact and the run going", async () => {
    await withKnowledgeLayer(async (kl, _tmp) => {
      const doc = (text: string) => ({
        uri: "mem:notes",
        text,
        metadata: { path: "mem:notes", type: "text" as const, title: "notes" },
      });
      const other = {
        uri: "mem:other",
        text: "Another note about gardening.",
        metadata: { path: "mem:other", type: "text" as const },
      };
      await kl.ingestDocuments([doc("The first version mentions a heron.")], { embed: false });
      // The chunk insert of the new version fails inside the transaction, after the old
      // version's rows were deleted in it (every time: the group is written again source by
      // source after a failure, and only this source is left out).
      const insertChunk = kl.catalog.insertChunk.bind(kl.catalog);
      vi.spyOn(kl.catalog, "insertChunk").mockImplementation((...args) => {
        if (args[2].text.includes("kingfisher")) throw new Error("disk I/O error");
        return insertChunk(...args);
      });
      const s = await kl.ingestDocuments([doc("The second version mentions a kingfisher."), other], {
        embed: false,
      });
      expect(s.errors).toHaveLength(1);
      expect(s.errors[0]?.path).toBe("mem:notes");
      expect(s.errors[0]?.reason).toBe("cannot store: disk I/O error");
      expect(s.added).toBe(1);
      expect(s.updated).toBe(0);
      expect(s.documents).toBe(1);
      const heron = await kl.search("heron", { mode: "keyword" });
      expect(heron.results[0]?.source.uri).toBe("mem:notes");
      expect((await kl.search("kingfisher", { mode: "keyword" })).results).toHaveLength(0);
      expect((await kl.search("gardening", { mode: "keyword" })).results[0]?.source.uri).toBe("mem:other");
      expect(await kl.counts("default")).toMatchObject({ documents: 2, chunks: 2 });
    });
  });
});

describe("group commit of the embedded store", () => {
  it("a source that fails once is written again on its own: nothing is lost", async () => {
    await withKnowledgeLayer(async (kl) => {
      const doc = (uri: string, text: string) => ({
        uri,
        text,
        metadata: { path: uri, type: "text" as const },
      });
      vi.spyOn(kl.catalog, "insertChunk").mockImplementationOnce(() => {
        throw new Error("disk I/O error");
      });
      const s = await kl.ingestDocuments(
        [doc("mem:a", "A note about a kingfisher."), doc("mem:b", "A note about a heron.")],
        { embed: false },
      );
      expect(s.errors).toEqual([]);
      expect(s).toMatchObject({ added: 2, documents: 2, chunks: 2 });
      expect(await kl.counts("default")).toMatchObject({ documents: 2, chunks: 2 });
      expect((await kl.search("kingfisher", { mode: "keyword" })).results[0]?.source.uri).toBe("mem:a");
    });
  });
});

describe("re-ingest of a folder mirrors it", () => {
  it("removes sources that were deleted, emptied or became unsupported", async () => {
    await withKnowledgeLayer(async (kl, tmp) => {
      const folder = join(tmp.dir, "docs");
      const { mkdirSync, rmSync } = await import("node:fs");
      mkdirSync(folder);
      writeFileSync(join(folder, "a.md"), "# Herons\n\nHerons wade in shallow water.\n");
      writeFileSync(join(folder, "b.md"), "# Kingfishers\n\nKingfishers dive for fish.\n");
      writeFileSync(join(folder, "c.md"), "# Ospreys\n\nOspreys hover before they strike.\n");
      writeFileSync(join(folder, "d.txt"), "Cormorants dry their wings in the sun.\n");
      const first = await kl.ingest([folder], { embed: false });
      expect(first.added).toBe(4);
      rmSync(join(folder, "a.md"));
      writeFileSync(join(folder, "b.md"), "");
      writeFileSync(join(folder, "d.txt"), Buffer.from([0, 1, 2, 3, 0, 255]));
      const second = await kl.ingest([folder], { embed: false });
      expect(second.removed.map((p) => basename(p)).sort()).toEqual(["a.md", "b.md", "d.txt"]);
      expect(second.unchanged).toBe(1);
      expect((await kl.counts("default")).documents).toBe(1);
      for (const q of ["herons", "kingfishers", "cormorants"]) {
        expect((await kl.search(q, { mode: "keyword" })).results).toHaveLength(0);
      }
      expect((await kl.search("ospreys", { mode: "keyword" })).results).toHaveLength(1);
    });
  });
});

describe("paths", () => {
  it("a file reached through a symlinked folder is the same source as the file itself", async () => {
    await withKnowledgeLayer(async (kl, tmp) => {
      const { mkdirSync, symlinkSync } = await import("node:fs");
      const real = join(tmp.dir, "real");
      mkdirSync(real);
      writeFileSync(join(real, "a.md"), "# Egrets\n\nEgrets are small herons.\n");
      symlinkSync(real, join(tmp.dir, "link"));
      await kl.ingest([real], { embed: false });
      const again = await kl.ingest([join(tmp.dir, "link")], { embed: false });
      expect(again.unchanged).toBe(1);
      expect(again.added).toBe(0);
      expect((await kl.counts("default")).documents).toBe(1);
    });
  });
});

describe("near-duplicate removal keeps the result list full", () => {
  it("searches deeper when duplicates would leave fewer than top-k results", async () => {
    await withKnowledgeLayer(async (kl, _tmp) => {
      const docs = [
        ...Array.from({ length: 25 }, (_, i) => ({
          uri: `mem:dup${i}`,
          text: "Herons wade in shallow water.",
          metadata: { path: `mem:dup${i}`, type: "text" as const },
        })),
        ...[
          "Herons also hunt in salt marshes at dawn.",
          "In estuaries herons share the mudflats with egrets and curlews.",
          "Grey herons nest in colonies called heronries, high in tall trees.",
          "A heron swallows its prey whole, head first.",
          "Herons fly with their necks folded back, unlike cranes.",
        ].map((text, i) => ({
          uri: `mem:fact${i}`,
          text,
          metadata: { path: `mem:fact${i}`, type: "text" as const },
        })),
      ];
      await kl.ingestDocuments(docs, { embed: false });
      const { results } = await kl.search("herons", { mode: "keyword", topK: 5 });
      expect(results).toHaveLength(5);
      expect(results.filter((r) => r.text === "Herons wade in shallow water.")).toHaveLength(1);
      expect(results.map((r) => r.rank)).toEqual([1, 2, 3, 4, 5]);
    });
  });
});
