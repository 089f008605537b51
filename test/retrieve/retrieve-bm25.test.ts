import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  Bm25Index,
  bm25Idf,
  bm25TermScore,
  DEFAULT_BM25_PARAMS,
  MemoryBm25Index,
} from "../../src/retrieve/bm25.js";
import { ANALYZERS, type Analyzer, tokenize } from "../../src/retrieve/tokenizer.js";
import { type Db, openDatabase } from "../../src/store/database.js";
import { docsPath, SHARED, tempDir } from "../helpers/helpers.js";

/*
 * Hand-computed BM25 (k1 = 1.2, b = 0.75, Lucene IDF ln(1 + (N − n + 0.5)/(n + 0.5)),
 * score = idf · tf · (k1 + 1) / (tf + k1 · (1 − b + b · dl / avgdl))), `standard` analyzer:
 *
 *   d0 "cat dog"       dl = 2
 *   d1 "cat cat fish"  dl = 3
 *   d2 "bird"          dl = 1        N = 3, avgdl = 6 / 3 = 2
 *
 *   idf(cat)  = ln(1 + (3 − 2 + 0.5)/(2 + 0.5)) = ln(1.6)   = 0.4700036292457356
 *   idf(bird) = ln(1 + (3 − 1 + 0.5)/(1 + 0.5)) = ln(8/3)   = 0.9808292530117262
 *
 *   "cat"  d0: tf 1, norm = 1 + 1.2 · (0.25 + 0.75 · 2/2) = 2.2   → ln(1.6) · 2.2 / 2.2  = 0.4700036292457356
 *          d1: tf 2, norm = 2 + 1.2 · (0.25 + 0.75 · 3/2) = 3.65  → ln(1.6) · 4.4 / 3.65 = 0.5665797174469142
 *          d2: 0
 *   "bird" d2: tf 1, norm = 1 + 1.2 · (0.25 + 0.75 · 1/2) = 1.75  → ln(8/3) · 2.2 / 1.75 = 1.233042489500456
 */
const CORPUS = ["cat dog", "cat cat fish", "bird"];
const CAT_D0 = Math.log(1.6);
const CAT_D1 = (Math.log(1.6) * 4.4) / 3.65;
const BIRD_D2 = (Math.log(8 / 3) * 2.2) / 1.75;

describe("bm25Idf and bm25TermScore", () => {
  it("uses Lucene's IDF, which is never negative", () => {
    expect(bm25Idf(3, 2)).toBeCloseTo(Math.log(1.6), 15);
    expect(bm25Idf(3, 1)).toBeCloseTo(Math.log(8 / 3), 15);
    // A term in every document: ln(1 + 0.5 / (N + 0.5)) > 0 (the classic RSJ IDF would be negative).
    expect(bm25Idf(3, 3)).toBeCloseTo(Math.log(8 / 7), 15);
    expect(bm25Idf(1, 1)).toBeCloseTo(Math.log(4 / 3), 15);
    for (let N = 1; N <= 50; N++) for (let n = 0; n <= N; n++) expect(bm25Idf(N, n)).toBeGreaterThan(0);
  });

  it("scores one term with the default k1 = 1.2, b = 0.75", () => {
    expect(DEFAULT_BM25_PARAMS).toMatchObject({ k1: 1.2, b: 0.75 });
    expect(bm25TermScore(2, 3, 2, Math.log(1.6))).toBeCloseTo(CAT_D1, 15);
    // b = 0: no length normalisation; k1 = 0: binary term weight.
    expect(bm25TermScore(2, 30, 2, 1, { k1: 1.2, b: 0 })).toBeCloseTo((2 * 2.2) / 3.2, 15);
    expect(bm25TermScore(5, 3, 2, 1, { k1: 0, b: 0.75 })).toBe(1);
  });

  it("gives 0, never NaN, for absent terms and an all-empty corpus", () => {
    expect(bm25TermScore(0, 0, 0, 1)).toBe(0);
    expect(bm25TermScore(1, 0, 0, 1)).toBeCloseTo(2.2 / (1 + 1.2 * 0.25), 15);
  });
});

describe("MemoryBm25Index", () => {
  const index = new MemoryBm25Index({ analyzer: "standard" });
  for (const d of CORPUS) index.add(d);

  it("matches the hand-computed scores", () => {
    const cat = index.scores("cat");
    expect(cat[0]).toBeCloseTo(CAT_D0, 14);
    expect(cat[1]).toBeCloseTo(CAT_D1, 14);
    expect(cat[2]).toBe(0);
    const both = index.scores("cat bird");
    expect(both[0]).toBeCloseTo(CAT_D0, 14);
    expect(both[1]).toBeCloseTo(CAT_D1, 14);
    expect(both[2]).toBeCloseTo(BIRD_D2, 14);
    // A repeated query term counts once per occurrence.
    expect(index.scores("cat cat")[1]).toBeCloseTo(2 * CAT_D1, 14);
  });

  it("ranks by score, omits zero scores, and honours topK", () => {
    expect(index.search("cat bird", 10).map((h) => h.doc)).toEqual([2, 1, 0]);
    expect(index.search("cat bird", 1).map((h) => h.doc)).toEqual([2]);
    expect(index.search("cat", 10).map((h) => h.doc)).toEqual([1, 0]);
    expect(index.search("cat", 0)).toEqual([]);
    expect(index.search("unicorn", 10)).toEqual([]);
    expect(index.search("", 10)).toEqual([]);
  });

  it("breaks score ties by insertion order", () => {
    const tie = new MemoryBm25Index();
    tie.add("zebra");
    tie.add("zebra");
    expect(tie.search("zebra", 10).map((h) => h.doc)).toEqual([0, 1]);
  });

  it("scores an empty corpus and empty documents 0, never NaN", () => {
    const empty = new MemoryBm25Index();
    expect(empty.scores("cat")).toEqual([]);
    expect(empty.search("cat", 10)).toEqual([]);
    const blanks = new MemoryBm25Index();
    blanks.add("");
    blanks.add("!!! ...");
    expect(blanks.scores("cat")).toEqual([0, 0]);
    blanks.add("cat");
    const s = blanks.scores("cat");
    expect(s.every((x) => Number.isFinite(x))).toBe(true);
    expect(s[0]).toBe(0);
    expect(s[1]).toBe(0);
    expect(s[2]).toBeGreaterThan(0);
  });

  it("rejects invalid parameters", () => {
    expect(() => new MemoryBm25Index({ k1: -1 })).toThrow(RangeError);
    expect(() => new MemoryBm25Index({ b: 1.5 })).toThrow(RangeError);
  });
});

describe("Bm25Index (SQLite) agrees with the hand computation", () => {
  const { dir, cleanup } = tempDir();
  const db: Db = openDatabase(dir);
  afterAll(() => {
    db.close();
    cleanup();
  });
  const bm25 = new Bm25Index(db);
  let docs = 0;
  const addChunks = (kb: string, texts: string[], analyzer: Analyzer, title = ""): number[] => {
    const uri = `test:${kb}/${docs++}`;
    const doc = db
      .prepare(
        `INSERT INTO documents (kb, uri, path, type, content_hash, pipeline_hash, metadata, text, chunk_count, ingested_at)
         VALUES (?, ?, ?, 'text', 'h', 'p', '{}', '', ?, '')`,
      )
      .run(kb, uri, uri, texts.length).lastInsertRowid;
    return texts.map((text, i) => {
      const id = Number(
        db
          .prepare(
            `INSERT INTO chunks (kb, document_id, chunk_index, total_chunks, chunk_type, start, end, text, metadata, token_count)
             VALUES (?, ?, ?, ?, 'text', 0, 0, ?, '{}', 0)`,
          )
          .run(kb, doc, i, texts.length, text).lastInsertRowid,
      );
      const length = bm25.indexChunk(kb, id, text, analyzer, title);
      db.prepare("UPDATE chunks SET token_count = ?, title_token_count = ? WHERE id = ?").run(
        length.body,
        length.title,
        id,
      );
      return id;
    });
  };

  it("scores the 3-document corpus exactly", () => {
    const ids = addChunks("three", CORPUS, "standard");
    const hits = bm25.search("three", "cat bird", 10, { k1: 1.2, b: 0.75, analyzer: "standard" });
    expect(hits.map((h) => h.chunkId)).toEqual([ids[2], ids[1], ids[0]]);
    expect(hits[0]?.score).toBeCloseTo(BIRD_D2, 14);
    expect(hits[1]?.score).toBeCloseTo(CAT_D1, 14);
    expect(hits[2]?.score).toBeCloseTo(CAT_D0, 14);
  });

  it("adds the document title as its own BM25 field, weighted by titleWeight", () => {
    const [a] = addChunks("titled", ["cat sat here"], "standard", "bird notes");
    const [b] = addChunks("titled", ["cat sat here"], "standard", "dog notes");
    const [c] = addChunks("titled", ["bird song"], "standard");
    const params = { k1: 1.2, b: 0.75, analyzer: "standard" as const };
    const hits = bm25.search("titled", "bird", 10, { ...params, titleWeight: 0.3 });
    // Body: only c has "bird" (N 3, df 1, its length 2, mean length 8/3).
    const body = bm25TermScore(1, 2, 8 / 3, bm25Idf(3, 1), params);
    // Title: only a has "bird" (title lengths 2, 2, 0: mean 4/3).
    const title = 0.3 * bm25TermScore(1, 2, 4 / 3, bm25Idf(3, 1), params);
    expect(hits.map((h) => h.chunkId)).toEqual(body > title ? [c, a] : [a, c]);
    expect(hits.find((h) => h.chunkId === c)?.score).toBeCloseTo(body, 12);
    expect(hits.find((h) => h.chunkId === a)?.score).toBeCloseTo(title, 12);
    expect(hits.some((h) => h.chunkId === b)).toBe(false);
    // Weight 0 turns the field off; a title term never matches as a body term.
    expect(bm25.search("titled", "bird", 10, { ...params, titleWeight: 0 }).map((h) => h.chunkId)).toEqual([
      c,
    ]);
    expect(bm25.search("titled", "notes", 10, { ...params, titleWeight: 0 })).toEqual([]);
  });

  it("returns [] for an empty knowledge base, and never NaN with empty chunks", () => {
    expect(bm25.search("nothing-here", "cat", 10, { k1: 1.2, b: 0.75 })).toEqual([]);
    addChunks("blank", ["", "---"], "english");
    expect(bm25.search("blank", "cat", 10, { k1: 1.2, b: 0.75 })).toEqual([]);
    const [, , cat] = addChunks("blank", ["", "", "cat"], "english");
    const hits = bm25.search("blank", "cat", 10, { k1: 1.2, b: 0.75 });
    expect(hits.map((h) => h.chunkId)).toEqual([cat]);
    expect(Number.isFinite(hits[0]?.score)).toBe(true);
    expect(hits[0]?.score).toBeGreaterThan(0);
  });
});

describe("case B27: identifiers, hex ids, hyphenated codes, trailing punctuation, non-ASCII", () => {
  const { docs } = JSON.parse(readFileSync(join(SHARED, "cases", "B27.json"), "utf8")) as { docs: string[] };
  const expectation = JSON.parse(readFileSync(join(SHARED, "cases", "B27.expect.json"), "utf8")) as {
    calls: { query: string; must: string[] }[];
  };
  // Top document of each call, from its `must` text ("top result is doc N ...").
  const topOf = (must: string): number => Number(/top result is doc (\d+)/.exec(must)?.[1]);

  for (const analyzer of ANALYZERS) {
    const index = new MemoryBm25Index({ analyzer });
    for (const d of docs) index.add(d);
    for (const call of expectation.calls) {
      it(`${analyzer}: "${call.query}" → doc ${topOf(call.must[0] as string)}`, () => {
        const hits = index.search(call.query, 5);
        expect(hits[0]?.doc).toBe(topOf(call.must[0] as string));
        expect(hits[0]?.score).toBeGreaterThan(0);
      });
    }
    it(`${analyzer}: the hex id is one token, so "a6339a53" scores doc 2 zero`, () => {
      const scores = index.scores("a6339a53");
      expect(scores[2]).toBe(0);
      expect(scores.filter((s) => s > 0)).toHaveLength(1);
    });
  }

  it("covers all 7 calls", () => {
    expect(expectation.calls).toHaveLength(7);
  });

  it("tokenizes the documents as documented", () => {
    const plain = { stem: false, stopWords: false };
    expect(tokenize(docs[0] as string, plain)).toEqual([
      "reverted",
      "commit",
      "a6339a53",
      "after",
      "the",
      "outage",
    ]);
    expect(tokenize(docs[1] as string, plain)).toContain("user_id");
    expect(tokenize(docs[2] as string, plain)).toContain("getuserbyid");
    expect(tokenize(docs[3] as string, plain)).toEqual(
      expect.arrayContaining(["rfc-9110", "rfc", "9110", "semantics"]),
    );
    expect(tokenize(docs[4] as string, plain)).toEqual([
      "der",
      "zähler",
      "für",
      "überläufe",
      "wurde",
      "zurückgesetzt",
    ]);
  });
});

describe("tokenize: the ASCII path", () => {
  // ASCII text skips NFKC and the Unicode word pattern; appending one non-ASCII word sends the
  // same text down the Unicode path, which must give the same terms plus that word's.
  const files = [
    docsPath("markdown", "rust_book_src", "ch04-01-what-is-ownership.md"),
    docsPath("code", "expressjs+express", "lib", "response.js"),
    docsPath("code", "psf+requests", "src", "requests", "sessions.py"),
  ];
  it.each(files)("gives the Unicode path's terms on real text, every analyzer: %s", (file) => {
    const lines = readFileSync(file, "utf8")
      .split("\n")
      .filter((l) => !/[\u0080-\uffff]/.test(l));
    expect(lines.length).toBeGreaterThan(50);
    for (const options of [{}, { stem: false, stopWords: false }, { cjk: "bigram" as const }]) {
      for (let i = 0; i < lines.length; i += 20) {
        const text = lines.slice(i, i + 20).join("\n");
        const unicode = tokenize(`${text} é`, options);
        expect(unicode.pop()).toBe("é");
        expect(tokenize(text, options)).toEqual(unicode);
      }
    }
  });
});

describe("tokenize: CJK segmentation", () => {
  it("segments Chinese into dictionary words by default", () => {
    expect(tokenize("机器学习是人工智能的一个分支")).toEqual([
      "机器",
      "学习",
      "是",
      "人工",
      "智能",
      "的",
      "一个",
      "分支",
    ]);
    expect(tokenize("東京の会社")).toEqual(expect.arrayContaining(["東京", "会社"]));
  });

  it("offers character bigrams and unigrams + bigrams (code points, not UTF-16 units)", () => {
    expect(tokenize("机器学习", { cjk: "bigram" })).toEqual(["机器", "器学", "学习"]);
    expect(tokenize("中", { cjk: "bigram" })).toEqual(["中"]);
    expect(tokenize("机器学", { cjk: "unigram+bigram" })).toEqual(["机", "机器", "器", "器学", "学"]);
    expect(tokenize("𠀀𠀁中", { cjk: "bigram" })).toEqual(["𠀀𠀁", "𠀁中"]);
  });

  it("keeps Latin identifiers and numbers inside CJK text whole, with their parts", () => {
    expect(tokenize("GPU显存8GB不够", { cjk: "bigram" })).toEqual(["gpu", "显存", "8gb", "不够"]);
    expect(tokenize("请参考RFC-9110和user_id字段", { cjk: "bigram", stem: false })).toEqual([
      "请参",
      "参考",
      "rfc-9110",
      "rfc",
      "9110",
      "和",
      "user_id",
      "user",
      "id",
      "字段",
    ]);
    expect(tokenize("全长364.6公里", { cjk: "bigram" })).toEqual(["全长", "364.6", "364", "6", "公里"]);
  });

  it("leaves English tokens unchanged by the CJK setting", () => {
    const text = "The user_id of RFC-9110 isn't a6339a53; Alzheimer's patients.";
    const expected = tokenize(text);
    expect(tokenize(text, { cjk: "bigram" })).toEqual(expected);
    expect(tokenize(text, { cjk: "unigram+bigram" })).toEqual(expected);
    expect(expected).toEqual([
      "user_id",
      "user",
      "id",
      "rfc-9110",
      "rfc",
      "9110",
      "isn't",
      "isn",
      "t",
      "a6339a53",
      "alzheim",
      "patient",
    ]);
  });
});
