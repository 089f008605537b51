import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import { KnowledgeLayer } from "../../src/knowledge-layer.js";
import {
  Bm25Index,
  bm25Idf,
  bm25TermScore,
  compareTerms,
  DEFAULT_BM25_PARAMS,
  type IdRange,
  mergeBm25Hits,
} from "../../src/retrieve/bm25.js";
import { ParallelBm25Search } from "../../src/retrieve/bm25-parallel.js";
import { blockRows, decodeBlock, emptyList } from "../../src/retrieve/postings.js";
import { analyzerOptions, tokenize } from "../../src/retrieve/tokenizer.js";
import { Catalog } from "../../src/store/catalog.js";
import { type Db, openDatabase, recountKbStats, SCHEMA_VERSION } from "../../src/store/database.js";
import { tempDir } from "../helpers/helpers.js";

/** The statistics a recount over the rows gives, per KB with any row. */
function recount(db: Db): Record<string, number[]> {
  const out: Record<string, number[]> = {};
  const kbs = db.prepare("SELECT kb FROM documents UNION SELECT kb FROM chunks").pluck().all() as string[];
  for (const kb of kbs) {
    const c = db
      .prepare(
        "SELECT count(*) AS n, coalesce(sum(token_count), 0) AS b, coalesce(sum(title_token_count), 0) AS t FROM chunks WHERE kb = ?",
      )
      .get(kb) as { n: number; b: number; t: number };
    const d = db
      .prepare("SELECT count(*) AS n, coalesce(sum(embedded = 0), 0) AS u FROM documents WHERE kb = ?")
      .get(kb) as { n: number; u: number };
    out[kb] = [c.n, c.b, c.t, d.n, d.u];
  }
  return out;
}

/** The statistics the triggers kept, for KBs that have rows (a dropped KB keeps a zero row). */
function kept(db: Db): Record<string, number[]> {
  const out: Record<string, number[]> = {};
  const rows = db.prepare("SELECT * FROM kb_stats ORDER BY kb").all() as {
    kb: string;
    chunks: number;
    body_tokens: number;
    title_tokens: number;
    documents: number;
    unembedded: number;
  }[];
  for (const r of rows) {
    const values = [r.chunks, r.body_tokens, r.title_tokens, r.documents, r.unembedded];
    if (values.some((v) => v !== 0)) out[r.kb] = values;
  }
  return out;
}

/** Deterministic pseudo-random numbers (mulberry32). */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS =
  "alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega river stone cloud fire water tree light night".split(
    " ",
  );

describe("keyword index: statistics kept by triggers and exact MaxScore top-k", () => {
  const { dir, cleanup } = tempDir();
  const db: Db = openDatabase(dir);
  afterAll(() => {
    db.close();
    cleanup();
  });
  const catalog = new Catalog(db);
  const bm25 = new Bm25Index(db);
  /** What the index should hold: chunk id → its KB, text and title. */
  const model = new Map<number, { kb: string; doc: number; text: string; title: string }>();

  const addDocument = (rand: () => number, kb: string): number => {
    const title = rand() < 0.5 ? "" : `${WORDS[Math.floor(rand() * WORDS.length)]} notes`;
    const n = 1 + Math.floor(rand() * 4);
    const uri = `mem:${kb}/${Math.floor(rand() * 1e9)}`;
    let documentId = 0;
    db.transaction(() => {
      documentId = catalog.insertDocument({
        kb,
        uri,
        path: uri,
        type: "text",
        ...(title ? { title } : {}),
        contentHash: "h",
        pipelineHash: "p",
        embedded: rand() < 0.5,
        metadata: { type: "text" } as never,
        text: "",
        chunkCount: n,
      });
      for (let i = 0; i < n; i++) {
        const words = Array.from(
          { length: Math.floor(rand() * 12) },
          () => WORDS[Math.floor(rand() ** 2 * WORDS.length)],
        );
        const text = words.join(" ");
        const chunk = {
          text,
          chunkIndex: i,
          totalChunks: n,
          chunkType: "text",
          start: 0,
          end: 0,
          metadata: {},
        };
        const id = catalog.insertChunk(kb, documentId, chunk as never, 0);
        const lengths = bm25.indexChunk(kb, id, text, "english", title);
        catalog.setTokenCount(id, lengths.body, lengths.title);
        model.set(id, { kb, doc: documentId, text, title });
      }
    })();
    return documentId;
  };

  const deleteDocument = (documentId: number) => {
    db.transaction(() => {
      bm25.removeDocument(documentId);
      catalog.deleteDocument(documentId);
    })();
    for (const [id, c] of model) if (c.doc === documentId) model.delete(id);
  };

  /** Brute-force BM25 over the model, independent of the postings table. */
  const reference = (kb: string, query: string, titleWeight: number): Map<number, number> => {
    const chunks = [...model].filter(([, c]) => c.kb === kb);
    const body = new Map(chunks.map(([id, c]) => [id, tokenize(c.text, analyzerOptions("english"))]));
    const titles = new Map(
      chunks.map(([id, c]) => [id, c.title ? tokenize(c.title, analyzerOptions("english")) : []]),
    );
    const N = chunks.length;
    const mean = (m: Map<number, string[]>) => [...m.values()].reduce((s, t) => s + t.length, 0) / N;
    const scores = new Map<number, number>();
    for (const term of tokenize(query, analyzerOptions("english"))) {
      for (const [field, weight] of [
        [body, 1],
        [titles, titleWeight],
      ] as const) {
        if (weight === 0) continue;
        const df = [...field.values()].filter((t) => t.includes(term)).length;
        if (df === 0) continue;
        const idf = bm25Idf(N, df);
        const avg = mean(field);
        for (const [id, tokens] of field) {
          const tf = tokens.filter((t) => t === term).length;
          if (tf > 0) {
            const s = weight * bm25TermScore(tf, tokens.length, avg, idf, DEFAULT_BM25_PARAMS);
            scores.set(id, (scores.get(id) ?? 0) + s);
          }
        }
      }
    }
    return scores;
  };

  const checkSearch = (rand: () => number, kb: string) => {
    const query = Array.from(
      { length: 1 + Math.floor(rand() * 5) },
      () => WORDS[Math.floor(rand() * WORDS.length)],
    ).join(" ");
    for (const topK of [1, 3, 10, 1000]) {
      for (const titleWeight of [0.3, 0]) {
        const hits = bm25.search(kb, query, topK, { ...DEFAULT_BM25_PARAMS, titleWeight });
        const all = reference(kb, query, titleWeight);
        const expected = [...all.values()].sort((a, b) => b - a).slice(0, topK);
        expect(hits.map((h) => h.score).length, query).toBe(expected.length);
        hits.forEach((h, i) => {
          expect(h.score, `${query} #${i}`).toBeCloseTo(expected[i] as number, 9);
          expect(all.get(h.chunkId), query).toBeCloseTo(h.score, 9);
          if (i > 0) {
            const prev = hits[i - 1] as { chunkId: number; score: number };
            expect(prev.score > h.score || (prev.score === h.score && prev.chunkId < h.chunkId)).toBe(true);
          }
        });
      }
    }
  };

  /** The index holds exactly the model's chunks, and every term's df equals its decoded list. */
  const checkIndex = (kb: string) => {
    const expected = [...model].filter(([, c]) => c.kb === kb && c.text.trim() + c.title.trim() !== "");
    const indexed = bm25.indexedChunkIds(kb);
    for (const [id] of expected)
      if (tokenize(`${model.get(id)?.text} ${model.get(id)?.title}`, analyzerOptions("english")).length > 0)
        expect(indexed.has(id), `chunk ${id} indexed`).toBe(true);
    for (const id of indexed) expect(model.get(id)?.kb, `chunk ${id} is a live chunk of ${kb}`).toBe(kb);
    const df = new Map<string, number>();
    const segments = new Map(
      (
        db.prepare("SELECT seg, min_id, max_id FROM kw_segments WHERE kb = ?").raw().all(kb) as number[][]
      ).map(([seg, min, max]) => [seg, [min, max]]),
    );
    for (const [seg, term, n, data] of db
      .prepare("SELECT seg, term, n, data FROM kw_seg_blocks WHERE kb = ?")
      .raw()
      .all(kb) as [number, string, number, Buffer][]) {
      const ids = decodeBlock(data, emptyList()).ids;
      expect(ids.length).toBe(n);
      // Every block belongs to a live segment and holds ids of its range.
      const range = segments.get(seg) as number[];
      expect(range, `segment ${seg}`).toBeDefined();
      for (const id of ids) expect(id >= (range[0] as number) && id <= (range[1] as number)).toBe(true);
      df.set(term, (df.get(term) ?? 0) + ids.length);
    }
    const kept = db
      .prepare("SELECT term, sum(df) FROM kw_seg_terms WHERE kb = ? GROUP BY term")
      .raw()
      .all(kb) as [string, number][];
    expect(new Map(kept)).toEqual(df);
  };

  it("statistics equal a recount, and search equals brute force, after random inserts and deletes", () => {
    for (const seed of [1, 2, 3]) {
      const rand = random(seed);
      const docs: number[] = [];
      for (let step = 0; step < 120; step++) {
        const kb = rand() < 0.7 ? "a" : "b";
        const r = rand();
        if (r < 0.6 || docs.length === 0) docs.push(addDocument(rand, kb));
        else if (r < 0.9) deleteDocument(docs.splice(Math.floor(rand() * docs.length), 1)[0] as number);
        else {
          const id = docs[Math.floor(rand() * docs.length)] as number;
          catalog.markEmbedded(id);
        }
        // Merge the pending chunks now and then, so deletes meet both merged and pending chunks.
        if (rand() < 0.15) db.transaction(() => bm25.flush(kb))();
        if (step % 10 === 0) {
          expect(kept(db)).toEqual(recount(db));
          checkIndex("a");
          checkIndex("b");
          checkSearch(rand, "a");
          checkSearch(rand, "b");
        }
      }
      expect(kept(db)).toEqual(recount(db));
      // Drop a KB: statistics go to zero, its version keeps growing.
      const version = catalog.dataVersion("b");
      db.transaction(() => catalog.deleteKb("b"))();
      for (const [id, c] of model) if (c.kb === "b") model.delete(id);
      expect(kept(db)).toEqual(recount(db));
      expect(catalog.dataVersion("b")).not.toBe(version);
      expect(bm25.search("b", WORDS.join(" "), 10, DEFAULT_BM25_PARAMS)).toEqual([]);
      addDocument(rand, "b");
      expect(kept(db)).toEqual(recount(db));
      checkSearch(rand, "b");
    }
  });

  it("merges postings that arrive out of id order, and keeps blocks of at most 128 postings", () => {
    const kb = "ooo";
    db.transaction(() => {
      for (let id = 1000; id < 1300; id += 2) bm25.indexChunk(kb, id, "river stone");
      bm25.flush(kb);
      for (let id = 1001; id < 1300; id += 2) bm25.indexChunk(kb, id, "river cloud");
      bm25.flush(kb);
    })();
    expect(bm25.indexedChunkIds(kb).size).toBe(300);
    const rows = db
      .prepare("SELECT term, n, data FROM kw_seg_blocks WHERE kb = ? ORDER BY term, seg, last_id")
      .raw()
      .all(kb) as [string, number, Buffer][];
    const river = rows
      .filter(([t]) => t === "river")
      .flatMap(([, n, data]) => {
        const list = decodeBlock(data, emptyList());
        expect(list.ids.length).toBe(n);
        expect(n).toBeLessThanOrEqual(128);
        return list.ids;
      });
    expect(river.sort((a, b) => a - b)).toEqual(Array.from({ length: 300 }, (_, i) => 1000 + i));
    expect(
      db.prepare("SELECT sum(df) FROM kw_seg_terms WHERE kb = ? AND term = 'river'").pluck().get(kb),
    ).toBe(300);
    db.transaction(() => catalog.deleteKb(kb))();
    expect(bm25.indexedChunkIds(kb).size).toBe(0);
  });

  it("segments merge in tiers: search equals brute force and the segment count stays logarithmic", () => {
    const rand = random(42);
    const docs: number[] = [];
    let most = 0;
    for (let step = 0; step < 400; step++) {
      // One segment per step (a flush per document), with deletes in between: tier-0
      // segments merge every 8 flushes, and their merged segments again later.
      if (rand() < 0.8 || docs.length === 0) docs.push(addDocument(rand, "seg"));
      else deleteDocument(docs.splice(Math.floor(rand() * docs.length), 1)[0] as number);
      db.transaction(() => bm25.flush("seg"))();
      most = Math.max(most, bm25.segmentCount("seg"));
      if (step % 40 === 39) {
        checkIndex("seg");
        checkSearch(rand, "seg");
      }
    }
    expect(most).toBeLessThanOrEqual(2 * 8);
    expect(kept(db)).toEqual(recount(db));
    // A chunk deleted after its segment was merged leaves no posting behind.
    for (const id of docs.splice(0, 20)) deleteDocument(id);
    checkIndex("seg");
    checkSearch(rand, "seg");
  });

  it("block-max pruning: long lists of skewed tf and length, search equals brute force", () => {
    // Lists of thousands of postings (dozens of blocks) whose tf and chunk length vary a lot,
    // so blocks whose best posting cannot reach the top k are completed or skipped.
    const rand = random(11);
    const vocabulary = WORDS.slice(0, 30);
    db.transaction(() => {
      for (let d = 0; d < 600; d++) {
        const uri = `mem:bmx/${d}`;
        const documentId = catalog.insertDocument({
          kb: "bmx",
          uri,
          path: uri,
          type: "text",
          ...(d % 3 === 0 ? { title: `${vocabulary[d % vocabulary.length]} report` } : {}),
          contentHash: "h",
          pipelineHash: "p",
          embedded: false,
          metadata: { type: "text" } as never,
          text: "",
          chunkCount: 10,
        });
        for (let i = 0; i < 10; i++) {
          const length = rand() < 0.2 ? 3 + Math.floor(rand() * 5) : 20 + Math.floor(rand() * 200);
          const words = Array.from(
            { length },
            () => vocabulary[Math.floor(rand() ** 3 * vocabulary.length)] as string,
          );
          // A few chunks repeat one word many times (high tf).
          if (rand() < 0.05) words.push(...Array(20).fill(vocabulary[Math.floor(rand() * 10)] as string));
          const text = words.join(" ");
          const id = catalog.insertChunk(
            "bmx",
            documentId,
            {
              text,
              chunkIndex: i,
              totalChunks: 10,
              chunkType: "text",
              start: 0,
              end: 0,
              metadata: {},
            } as never,
            0,
          );
          const title = d % 3 === 0 ? `${vocabulary[d % vocabulary.length]} report` : "";
          const lengths = bm25.indexChunk("bmx", id, text, "english", title);
          catalog.setTokenCount(id, lengths.body, lengths.title);
          model.set(id, { kb: "bmx", doc: documentId, text, title });
        }
      }
      bm25.flush("bmx");
    })();
    const before = { ...bm25.searchStats };
    for (let q = 0; q < 60; q++) {
      const query = Array.from(
        { length: 2 + Math.floor(rand() * 7) },
        () => vocabulary[Math.floor(rand() * vocabulary.length)],
      ).join(" ");
      for (const topK of [1, 5, 20]) {
        const hits = bm25.search("bmx", query, topK, DEFAULT_BM25_PARAMS);
        const all = reference("bmx", query, DEFAULT_BM25_PARAMS.titleWeight);
        const expected = [...all.values()].sort((a, b) => b - a).slice(0, topK);
        expect(hits.length, query).toBe(expected.length);
        hits.forEach((h, i) => {
          expect(h.score, `${query} #${i}`).toBeCloseTo(expected[i] as number, 9);
          expect(all.get(h.chunkId), query).toBeCloseTo(h.score, 9);
        });
      }
    }
    // The pruning ran: blocks were completed only, or skipped unread.
    expect(bm25.searchStats.blocksSkipped).toBeGreaterThan(before.blocksSkipped);
    expect(bm25.searchStats.blocksCompleted).toBeGreaterThan(before.blocksCompleted);
  });

  it("merges segments with full blocks: copied or re-cut, search equals brute force", () => {
    const rand = random(7);
    const docs: number[] = [];
    let full = 0;
    // 30 documents (~75 chunks) per segment: common words fill whole blocks once segments
    // merge, so the next tier's merges copy full blocks and re-cut the partial ones (a
    // segment's tail, blocks shrunk by deletes).
    for (let flush = 0; flush < 72; flush++) {
      for (let d = 0; d < 30; d++) {
        if (rand() < 0.9 || docs.length === 0) docs.push(addDocument(rand, "full"));
        else deleteDocument(docs.splice(Math.floor(rand() * docs.length), 1)[0] as number);
      }
      db.transaction(() => bm25.flush("full"))();
      if (flush % 12 === 11) {
        checkIndex("full");
        checkSearch(rand, "full");
        full = Math.max(
          full,
          db
            .prepare("SELECT count(*) FROM kw_seg_blocks WHERE kb = 'full' AND n = 128")
            .pluck()
            .get() as number,
        );
      }
    }
    expect(full).toBeGreaterThan(20);
    for (const id of docs.splice(0, 200)) deleteDocument(id);
    checkIndex("full");
    checkSearch(rand, "full");
    expect(kept(db)).toEqual(recount(db));
  });

  it("orders terms like SQLite (code points, surrogates after U+E000–FFFF)", () => {
    const terms = ["b", "a", "\uffff", "\ud83d\ude00", "\ue000x", "ab", "\u00e9", "\u4e2d"];
    const sqlite = db
      .prepare("SELECT value FROM json_each(?) ORDER BY value COLLATE BINARY")
      .pluck()
      .all(JSON.stringify(terms)) as string[];
    expect([...terms].sort(compareTerms)).toEqual(sqlite);
  });

  it("a rolled-back transaction leaves the statistics as they were", () => {
    const before = kept(db);
    const version = catalog.dataVersion("a");
    expect(() =>
      db.transaction(() => {
        addDocument(random(9), "a");
        throw new Error("crash before commit");
      })(),
    ).toThrow("crash before commit");
    for (const id of model.keys())
      if (!db.prepare("SELECT 1 FROM chunks WHERE id = ?").get(id)) model.delete(id);
    expect(kept(db)).toEqual(before);
    expect(catalog.dataVersion("a")).toBe(version);
  });

  it("recountKbStats gives back what the triggers kept", () => {
    const before = kept(db);
    db.exec("UPDATE kb_stats SET chunks = 0, body_tokens = 7");
    recountKbStats(db);
    expect(kept(db)).toEqual(before);
  });
});

describe("keyword index through ingest: re-ingest, delete, KB dropped and re-created, migration", () => {
  const tmp = tempDir();
  afterAll(() => tmp.cleanup());
  const folder = join(tmp.dir, "docs");
  const dataDir = join(tmp.dir, "data");

  const consistent = (kl: KnowledgeLayer) => expect(kept(kl.db)).toEqual(recount(kl.db));
  const ids = async (kl: KnowledgeLayer, query: string) =>
    (await kl.search(query, { mode: "keyword", kbs: ["kw"] })).results.map((r) => r.source.path);

  it("keeps statistics, versions and results right through every change", async () => {
    const { mkdirSync } = await import("node:fs");
    mkdirSync(folder, { recursive: true });
    const a = join(folder, "a.md");
    const b = join(folder, "b.md");
    writeFileSync(a, "# Apples\n\nOrchard apples ripen in autumn.\n");
    writeFileSync(b, "# Borrowing\n\nThe borrow checker rejects dangling references.\n");
    const kl = KnowledgeLayer.open({ dataDir });
    try {
      await kl.createKb("kw");
      const versions = new Set<string>();
      const version = () => kl.catalog.dataVersion("kw");
      await kl.ingest([folder], { kb: "kw", embed: false });
      consistent(kl);
      versions.add(version());
      expect(await ids(kl, "orchard")).toEqual([a]);
      expect(kl.catalog.unembeddedDocuments("kw")).toEqual({ documents: 2, unembedded: 2 });

      // Re-ingest of a changed file: the old text is gone, the new one found, the cache not reused.
      writeFileSync(a, "# Apples\n\nCider presses squeeze the harvest.\n");
      await kl.ingest([folder], { kb: "kw", embed: false });
      consistent(kl);
      expect(versions.has(version())).toBe(false);
      versions.add(version());
      expect(await ids(kl, "orchard")).toEqual([]);
      expect(await ids(kl, "cider")).toEqual([a]);

      // A deleted file: removed from the index by the next ingest.
      rmSync(b);
      await kl.ingest([folder], { kb: "kw", embed: false });
      consistent(kl);
      expect(versions.has(version())).toBe(false);
      versions.add(version());
      expect(await ids(kl, "borrow checker")).toEqual([]);

      // KB dropped and re-created: nothing of the old KB is found, versions are not reused.
      expect(await ids(kl, "cider")).toEqual([a]);
      await kl.deleteKb("kw");
      consistent(kl);
      await kl.createKb("kw");
      writeFileSync(join(folder, "c.md"), "# Ciphers\n\nA cider-free note on ciphers.\n");
      rmSync(a);
      await kl.ingest([folder], { kb: "kw", embed: false });
      consistent(kl);
      expect(versions.has(version())).toBe(false);
      expect(await ids(kl, "harvest")).toEqual([]);
      expect(await ids(kl, "ciphers")).toEqual([join(folder, "c.md")]);
    } finally {
      await kl.close();
    }
  });

  it("migrates a schema-5 database: one list per term becomes each KB's first segment", async () => {
    let before: unknown;
    {
      const kl = KnowledgeLayer.open({ dataDir, cache: { type: "none" } });
      await kl.ingest([folder], { kb: "kw", embed: false });
      kl.bm25.flush("kw"); // the old layouts had no pending rows: merge them first
      before = (await kl.search("ciphers references", { mode: "keyword", kbs: ["kw"] })).results;
      await kl.close();
    }
    // Schema 5 kept one list per term (kw_blocks) and its df (kw_terms).
    const raw = new Database(join(dataDir, "kl.db"));
    raw.exec(`CREATE TABLE kw_blocks (kb TEXT NOT NULL, term TEXT NOT NULL, last_id INTEGER NOT NULL,
      n INTEGER NOT NULL, max_tf INTEGER NOT NULL, min_len INTEGER NOT NULL, data BLOB NOT NULL,
      PRIMARY KEY (kb, term, last_id)) WITHOUT ROWID;
      CREATE TABLE kw_terms (kb TEXT NOT NULL, term TEXT NOT NULL, df INTEGER NOT NULL,
      PRIMARY KEY (kb, term)) WITHOUT ROWID;`);
    const lists = new Map<
      string,
      { kb: string; term: string; ids: number[]; tfs: number[]; lens: number[] }
    >();
    for (const [kb, term, data] of raw.prepare("SELECT kb, term, data FROM kw_seg_blocks").raw().all() as [
      string,
      string,
      Buffer,
    ][]) {
      const key = `${kb}\u0000${term}`;
      const list = lists.get(key) ?? { kb, term, ids: [], tfs: [], lens: [] };
      decodeBlock(data, list);
      lists.set(key, list);
    }
    const insertBlock = raw.prepare(
      "INSERT INTO kw_blocks (kb, term, last_id, n, max_tf, min_len, data) VALUES (?, ?, ?, ?, ?, ?, ?)",
    );
    for (const list of lists.values()) {
      const order = list.ids
        .map((_, i) => i)
        .sort((x, y) => (list.ids[x] as number) - (list.ids[y] as number));
      const sorted = {
        ids: order.map((i) => list.ids[i] as number),
        tfs: order.map((i) => list.tfs[i] as number),
        lens: order.map((i) => list.lens[i] as number),
      };
      for (const b of blockRows(sorted))
        insertBlock.run(list.kb, list.term, b.lastId, b.n, b.maxTf, b.minLen, b.data);
      raw
        .prepare("INSERT INTO kw_terms (kb, term, df) VALUES (?, ?, ?)")
        .run(list.kb, list.term, sorted.ids.length);
    }
    const postings = raw.prepare("SELECT sum(n) FROM kw_seg_blocks").pluck().get();
    raw.exec("DELETE FROM kw_seg_blocks; DELETE FROM kw_seg_terms; DELETE FROM kw_segments");
    raw.prepare("UPDATE meta SET value = '5' WHERE key = 'schema_version'").run();
    raw.close();
    const kl = KnowledgeLayer.open({ dataDir, cache: { type: "none" } });
    try {
      expect(kl.db.prepare("SELECT value FROM meta WHERE key = 'schema_version'").pluck().get()).toBe(
        String(SCHEMA_VERSION),
      );
      expect(
        kl.db
          .prepare("SELECT count(*) FROM sqlite_master WHERE name IN ('kw_blocks', 'kw_terms')")
          .pluck()
          .get(),
      ).toBe(0);
      expect(kl.db.prepare("SELECT sum(n) FROM kw_seg_blocks").pluck().get()).toBe(postings);
      expect(kl.db.prepare("SELECT count(DISTINCT seg) FROM kw_seg_blocks").pluck().get()).toBe(1);
      consistent(kl);
      expect((await kl.search("ciphers references", { mode: "keyword", kbs: ["kw"] })).results).toEqual(
        before,
      );
      writeFileSync(join(folder, "f.md"), "# Fresh\n\nCiphers after the migration.\n");
      await kl.ingest([folder], { kb: "kw", embed: false });
      consistent(kl);
      expect(await ids(kl, "migration")).toEqual([join(folder, "f.md")]);
    } finally {
      await kl.close();
    }
  });

  it("migrates a schema-2 database: postings become blocks, kb_stats is built", async () => {
    writeFileSync(join(folder, "d.md"), "# Dangling\n\nReferences outlive nothing here; ciphers again.\n");
    let before: unknown;
    {
      const kl = KnowledgeLayer.open({ dataDir, cache: { type: "none" } });
      await kl.ingest([folder], { kb: "kw", embed: false });
      kl.bm25.flush("kw"); // the old layouts had no pending rows: merge them first
      before = (await kl.search("ciphers references", { mode: "keyword", kbs: ["kw"] })).results;
      await kl.close();
    }
    // Turn the file back into schema 2.
    const raw = new Database(join(dataDir, "kl.db"));
    const blocksBefore = raw.prepare("SELECT sum(n) FROM kw_seg_blocks").pluck().get();
    for (const t of raw.prepare("SELECT name FROM sqlite_master WHERE type = 'trigger'").pluck().all()) {
      raw.exec(`DROP TRIGGER "${t}"`);
    }
    // Schema 2 kept one row per posting, without its field length.
    raw.exec(`CREATE TABLE postings (kb TEXT NOT NULL, term TEXT NOT NULL, chunk_id INTEGER NOT NULL,
      tf INTEGER NOT NULL, PRIMARY KEY (kb, term, chunk_id)) WITHOUT ROWID`);
    expect(raw.prepare("SELECT count(*) FROM kw_pending").pluck().get()).toBe(0);
    const insert = raw.prepare("INSERT INTO postings (kb, term, chunk_id, tf) VALUES (?, ?, ?, ?)");
    const blocks = raw.prepare("SELECT kb, term, data FROM kw_seg_blocks").raw().all() as [
      string,
      string,
      Buffer,
    ][];
    for (const [kb, term, data] of blocks) {
      const list = decodeBlock(data, emptyList());
      list.ids.forEach((id, i) => {
        insert.run(kb, term, id, list.tfs[i]);
      });
    }
    raw.exec(
      "DROP TABLE kb_stats; DROP TABLE kw_seg_blocks; DROP TABLE kw_seg_terms; DROP TABLE kw_segments; DROP TABLE kw_pending",
    );
    raw.prepare("UPDATE meta SET value = '2' WHERE key = 'schema_version'").run();
    raw.close();
    const kl = KnowledgeLayer.open({ dataDir, cache: { type: "none" } });
    try {
      expect(kl.db.prepare("SELECT value FROM meta WHERE key = 'schema_version'").pluck().get()).toBe(
        String(SCHEMA_VERSION),
      );
      consistent(kl);
      expect(kl.db.prepare("SELECT count(*) FROM sqlite_master WHERE name = 'postings'").pluck().get()).toBe(
        0,
      );
      expect(kl.db.prepare("SELECT count(*) FROM kw_seg_blocks WHERE min_len = 0").pluck().get()).toBe(0);
      expect(kl.db.prepare("SELECT sum(n) FROM kw_seg_blocks").pluck().get()).toBe(blocksBefore);
      const after = (await kl.search("ciphers references", { mode: "keyword", kbs: ["kw"] })).results;
      expect(after).toEqual(before);
      // The triggers are back: a later ingest keeps the statistics.
      writeFileSync(join(folder, "e.md"), "# Extra\n\nOne more note.\n");
      await kl.ingest([folder], { kb: "kw", embed: false });
      consistent(kl);
    } finally {
      await kl.close();
    }
  });
});

describe("keyword search cut into parts along segments (two threads on large KBs)", () => {
  const { dir, cleanup } = tempDir();
  const db: Db = openDatabase(dir);
  const catalog = new Catalog(db);
  const bm25 = new Bm25Index(db);
  // Its own index instance: the document frequencies it caches come from split searches only
  // (a cache filled by whole searches hid a part's wrong df).
  const parallel = new ParallelBm25Search(db, new Bm25Index(db), { minChunks: 1, enabled: true });
  afterAll(async () => {
    await parallel.close();
    db.close();
    cleanup();
  });
  const rand = random(7);
  const addDocuments = (count: number, kb = "parts", extra = "") => {
    const ids: number[] = [];
    for (let d = 0; d < count; d++) {
      db.transaction(() => {
        const documentId = catalog.insertDocument({
          kb,
          uri: `mem:${kb}/${ids.length}-${rand()}`,
          path: "p",
          type: "text",
          title: `${WORDS[Math.floor(rand() * WORDS.length)]} notes`,
          contentHash: "h",
          pipelineHash: "p",
          embedded: true,
          // Every fourth document states a profile (organisation, period): its chunks get a
          // fixed contribution in queries naming them (a list of its own, bounded like the others).
          metadata: (ids.length % 4 === 0
            ? {
                type: "text",
                organization: `${WORDS[ids.length % 7]} holdings`,
                period: `fiscal ${2018 + (ids.length % 5)}`,
              }
            : { type: "text" }) as never,
          text: "",
          chunkCount: 3,
        });
        ids.push(documentId);
        for (let i = 0; i < 3; i++) {
          const text = `${Array.from(
            { length: 2 + Math.floor(rand() * 20) },
            () => WORDS[Math.floor(rand() ** 2 * WORDS.length)],
          ).join(" ")} ${extra}`;
          const chunk = {
            text,
            chunkIndex: i,
            totalChunks: 3,
            chunkType: "text",
            start: 0,
            end: 0,
            metadata: {},
          };
          const id = catalog.insertChunk(kb, documentId, chunk as never, 0);
          const lengths = bm25.indexChunk(kb, id, text, "english", `${WORDS[i]} notes`);
          catalog.setTokenCount(id, lengths.body, lengths.title);
        }
      })();
    }
    return ids;
  };
  const queries = Array.from({ length: 30 }, () =>
    Array.from({ length: 1 + Math.floor(rand() * 6) }, () => WORDS[Math.floor(rand() * WORDS.length)]).join(
      " ",
    ),
  );
  // Several segments (a flush every 40 documents), then pending chunks not merged yet.
  for (let s = 0; s < 6; s++) {
    addDocuments(40);
    db.transaction(() => bm25.flush("parts"))();
  }
  // Pending chunks, some with a word no segment holds (its df is all pending).
  addDocuments(10);
  addDocuments(5, "parts", "quokka");
  queries.push(
    "quokka",
    "quokka alpha river",
    "alpha quokka title notes",
    "alpha holdings fiscal 2019",
    "beta holdings 2021 river stone",
    "holdings fiscal 2020 gamma",
  );

  it("the parts' merged top k equals the single search, scores and order included", () => {
    for (const count of [2, 3, 5]) {
      const parts = bm25.searchParts("parts", count);
      expect(parts.length, `${count} parts`).toBeGreaterThan(1);
      expect(parts[0]?.from).toBe(0);
      expect(parts.at(-1)?.to).toBe(Number.MAX_SAFE_INTEGER);
      for (let p = 1; p < parts.length; p++) expect(parts[p]?.from).toBe((parts[p - 1]?.to as number) + 1);
      for (const query of queries) {
        for (const topK of [1, 10, 1000]) {
          const whole = bm25.search("parts", query, topK, DEFAULT_BM25_PARAMS);
          // A fresh instance per part: nothing cached by another search helps it.
          const results = parts.map((part) =>
            new Bm25Index(db).searchPart("parts", query, topK, DEFAULT_BM25_PARAMS, undefined, part),
          );
          if (query === "quokka") expect(whole.length).toBe(Math.min(topK, 15));
          expect(new Set(results.map((r) => r.state)).size).toBe(1);
          expect(
            mergeBm25Hits(
              results.map((r) => r.hits),
              topK,
            ),
            `${query} top ${topK}`,
          ).toEqual(whole);
        }
      }
    }
  });

  it("cuts at the segment boundary closest to half, even between two segments", () => {
    const two = new Bm25Index(db);
    db.transaction(() => {
      // Two segments of 40 and 41 documents' chunks: the first holds less than half.
      for (const n of [40, 41]) {
        addDocuments(n, "two");
        bm25.flush("two");
      }
    })();
    const parts = two.searchParts("two", 2);
    expect(parts.length).toBe(2);
    const [min, max] = db
      .prepare("SELECT min(min_id), max(max_id) FROM kw_segments WHERE kb = 'two'")
      .raw()
      .get() as [number, number];
    expect(parts[0]?.to).toBeGreaterThan(min);
    expect(parts[0]?.to).toBeLessThan(max);
    for (const query of queries) {
      expect(
        mergeBm25Hits(
          parts.map(
            (part) =>
              new Bm25Index(db).searchPart("two", query, 10, DEFAULT_BM25_PARAMS, undefined, part).hits,
          ),
          10,
        ),
      ).toEqual(bm25.search("two", query, 10, DEFAULT_BM25_PARAMS));
    }
  });

  it("refuses a part that cuts a segment", () => {
    const [first] = bm25.searchParts("parts", 2) as IdRange[];
    const segment = db
      .prepare("SELECT min_id, max_id FROM kw_segments WHERE kb = 'parts' ORDER BY min_id LIMIT 1")
      .raw()
      .get() as [number, number];
    expect(first?.to).toBeGreaterThanOrEqual(segment[1]);
    expect(() =>
      bm25.searchPart("parts", "alpha", 10, DEFAULT_BM25_PARAMS, undefined, {
        from: 0,
        to: segment[0] + 1,
      }),
    ).toThrow(/cuts segment/);
  });

  it("searches on two threads give the single search's hits, with new chunks, filters and after close", async () => {
    expect(await parallel.warm()).toBe(true);
    for (const query of queries) {
      expect(await parallel.search("parts", query, 10, DEFAULT_BM25_PARAMS), query).toEqual(
        bm25.search("parts", query, 10, DEFAULT_BM25_PARAMS),
      );
    }
    expect(parallel.stats.split).toBe(queries.length);
    // A write between searches: both threads see it.
    addDocuments(5);
    db.transaction(() => bm25.flush("parts"))();
    const allowed = new Set(
      db.prepare("SELECT id FROM chunks WHERE kb = 'parts' AND id % 3 = 0").pluck().all() as number[],
    );
    for (const query of queries.slice(0, 10)) {
      expect(await parallel.search("parts", query, 10, DEFAULT_BM25_PARAMS)).toEqual(
        bm25.search("parts", query, 10, DEFAULT_BM25_PARAMS),
      );
      const filtered = await parallel.search("parts", query, 10, DEFAULT_BM25_PARAMS, allowed);
      expect(filtered).toEqual(bm25.search("parts", query, 10, DEFAULT_BM25_PARAMS, allowed));
      for (const hit of filtered) expect(allowed.has(hit.chunkId)).toBe(true);
    }
    expect(parallel.stats.split).toBe(queries.length + 10);
    await parallel.close();
    // After close a search still answers (on this thread until a new worker is ready).
    expect(await parallel.search("parts", queries[0] as string, 10, DEFAULT_BM25_PARAMS)).toEqual(
      bm25.search("parts", queries[0] as string, 10, DEFAULT_BM25_PARAMS),
    );
  });

  it("searches run back to back (never yielding to the event loop) are split once the worker is up", async () => {
    const fresh = new ParallelBm25Search(db, bm25, { minChunks: 1, enabled: true });
    const deadline = Date.now() + 30_000;
    // The first search starts the worker; until it is ready searches run on this thread.
    while (fresh.stats.split === 0 && Date.now() < deadline) {
      await fresh.search("parts", "alpha river", 10, DEFAULT_BM25_PARAMS);
    }
    expect(fresh.stats.split).toBe(1);
    expect(fresh.stats.single).toBeGreaterThan(0);
    await fresh.close();
  });

  it("a half that fails (a merge cut its segments since) makes the search run again on one thread", async () => {
    const index = new Bm25Index(db);
    const flaky = new ParallelBm25Search(db, index, { minChunks: 1, enabled: true });
    try {
      expect(await flaky.warm()).toBe(true);
      // The calling thread's half fails once (the single search then uses searchPart too).
      const real = index.searchPart.bind(index);
      let failures = 0;
      index.searchPart = (...args) => {
        if (failures++ === 0) throw new RangeError("keyword search part 0…10 cuts segment 9 (1…20)");
        return real(...args);
      };
      const before = { ...flaky.stats };
      expect(await flaky.search("parts", "alpha river", 10, DEFAULT_BM25_PARAMS)).toEqual(
        bm25.search("parts", "alpha river", 10, DEFAULT_BM25_PARAMS),
      );
      expect(flaky.stats).toEqual({ split: before.split, single: before.single + 1 });
    } finally {
      await flaky.close();
    }
  });

  it("a KB under the size threshold, or a database in memory, is searched on one thread", async () => {
    const memory = new Database(":memory:");
    expect(await new ParallelBm25Search(memory as Db, bm25).warm()).toBe(false);
    memory.close();
    // $KL_KEYWORD_PARALLEL=0 turns splitting off; a threshold that is not a whole number is refused.
    process.env.KL_KEYWORD_PARALLEL = "0";
    try {
      expect(await new ParallelBm25Search(db, bm25).warm()).toBe(false);
    } finally {
      delete process.env.KL_KEYWORD_PARALLEL;
    }
    for (const bad of ["abc", "-1", "1.5", "1e3"]) {
      process.env.KL_KEYWORD_PARALLEL_MIN_CHUNKS = bad;
      try {
        expect(() => new ParallelBm25Search(db, bm25)).toThrow(
          `$KL_KEYWORD_PARALLEL_MIN_CHUNKS must be a whole number of chunks (≥ 0), not "${bad}"`,
        );
      } finally {
        delete process.env.KL_KEYWORD_PARALLEL_MIN_CHUNKS;
      }
    }
    const small = new ParallelBm25Search(db, bm25, { minChunks: 1_000_000, enabled: true });
    expect(small.splits("parts")).toBe(false);
    expect(await small.search("parts", "alpha beta", 5, DEFAULT_BM25_PARAMS)).toEqual(
      bm25.search("parts", "alpha beta", 5, DEFAULT_BM25_PARAMS),
    );
    expect(small.stats).toEqual({ split: 0, single: 1 });
    await small.close();
    // Over the threshold, warming starts the worker: the next search is split.
    const large = new ParallelBm25Search(db, bm25, { minChunks: 1, enabled: true });
    try {
      expect(large.splits("parts")).toBe(true);
      expect(large.splits("no-such-kb")).toBe(false);
      expect(await large.warm()).toBe(true);
      expect(await large.search("parts", "alpha beta", 5, DEFAULT_BM25_PARAMS)).toEqual(
        bm25.search("parts", "alpha beta", 5, DEFAULT_BM25_PARAMS),
      );
      expect(large.stats).toEqual({ split: 1, single: 0 });
    } finally {
      await large.close();
    }
  });
});
