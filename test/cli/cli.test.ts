import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { cliRunner, docsPath, tempDir } from "../helpers/helpers.js";

const ROOT = resolve(import.meta.dirname, "..", "..");
const tmp = tempDir();
const env = { ...process.env, KL_HOME: join(tmp.dir, "home") };

/** Runs the CLI from source in the temporary folder. */
const kl = cliRunner(tmp.dir, env);

afterAll(() => tmp.cleanup());

describe("kl CLI", () => {
  it("creates, lists and shows knowledge bases with their own config", () => {
    const created = kl("kb", "create", "manuals", "--strategy", "document", "--chunk-size", "800", "--json");
    expect(created.code).toBe(0);
    const config = JSON.parse(created.stdout);
    expect(config.chunking).toMatchObject({ strategy: "document", chunkSize: 800 });
    expect(config.chunking.chunkOverlap).toBeLessThan(800);
    expect(config.retrieval).toMatchObject({
      mode: "hybrid_rerank",
      topK: 5,
      vectorTopK: 20,
      keywordTopK: 20,
      rrfK: 60,
      vectorMinScore: 0.2,
      reranker: { type: "auto" },
      rerankCandidates: 20,
      rerankWeight: 0.7,
    });
    const list = kl("kb", "list", "--json");
    expect(JSON.parse(list.stdout).map((k: { name: string }) => k.name)).toEqual(["default", "manuals"]);
    const show = kl("kb", "show", "manuals");
    expect(show.stdout).toContain("document, size 800");
    expect(kl("kb", "create", "scratch").code).toBe(0);
    expect(kl("kb", "delete", "scratch").stdout).toContain('deleted knowledge base "scratch"');
    expect(JSON.parse(kl("kb", "list", "--json").stdout).map((k: { name: string }) => k.name)).toEqual([
      "default",
      "manuals",
    ]);
    expect(kl("kb", "delete", "scratch").stderr).toContain('unknown knowledge base "scratch"');
  });

  it("rejects bad input with a clear message and exit code 1", () => {
    const dup = kl("kb", "create", "manuals");
    expect(dup.code).toBe(1);
    expect(dup.stderr).toContain('knowledge base "manuals" already exists');
    const bad = kl("kb", "create", "x", "--chunk-size", "100", "--chunk-overlap", "100");
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/chunkOverlap \(100\) must be smaller than chunking.chunkSize \(100\)/);
    const unknown = kl("search", "q", "--kb", "nope");
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('unknown knowledge base "nope"');
    const missing = kl("ingest", join(tmp.dir, "does-not-exist"));
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("does-not-exist");
  });

  it("ingests keyword-only and prints a summary, then searches with --json", () => {
    const ing = kl(
      "ingest",
      "--no-embed",
      "--kb",
      "manuals",
      docsPath("markdown", "rust_book_src", "ch03-02-data-types.md"),
    );
    expect(ing.code).toBe(0);
    expect(ing.stdout).toMatch(/1 added, 0 updated, 0 unchanged, 0 removed, 0 errors/);
    const out = kl(
      "search",
      "--kb",
      "manuals",
      "--mode",
      "keyword",
      "--json",
      "-k",
      "3",
      "floating-point types f32 f64",
    );
    expect(out.code).toBe(0);
    const json = JSON.parse(out.stdout);
    expect(json).toMatchObject({ query: "floating-point types f32 f64", mode: "keyword", kbs: ["manuals"] });
    expect(json.results.length).toBeGreaterThan(0);
    expect(json.results.length).toBeLessThanOrEqual(3);
    const r = json.results[0];
    expect(r.rank).toBe(1);
    expect(r.source.path).toContain("ch03-02-data-types.md");
    expect(r.source.headingPath).toContain("Data Types");
    expect(r.text).toMatch(/f64/);
    expect(typeof r.chunk.start).toBe("number");
    expect(json.warnings).toEqual([]);
    const hybrid = kl("search", "--kb", "manuals", "floating-point types");
    expect(hybrid.stdout).toMatch(/warning: 1 of 1 documents in knowledge base "manuals" have no vectors/);
    expect(hybrid.stdout).toContain("ch03-02-data-types.md");
    const empty = kl("search", "--kb", "manuals", "   ");
    expect(empty.code).toBe(1);
    expect(empty.stderr).toContain("the query is empty");
    // An option value its parser refuses is a usage error: exit 2.
    const huge = kl("search", "--kb", "manuals", "-k", "99999999", "types");
    expect(huge.code).toBe(2);
    expect(huge.stderr).toContain("--top-k must be an integer from 1 to 10000");
    const human = kl("search", "--kb", "manuals", "--mode", "keyword", "floating-point types");
    expect(human.stdout).toMatch(/^1\. \[\d+\.\d+\] .*ch03-02-data-types\.md/m);
  });

  it("kl chunk prints a file's chunks with exact spans, in characters or tokens", () => {
    const file = docsPath("markdown/rust_book_src/ch04-01-what-is-ownership.md");
    const source = readFileSync(file, "utf8");
    const r = kl("chunk", file, "--strategy", "document", "--chunk-size", "400", "--json");
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out.chunking).toMatchObject({ strategy: "document", chunkSize: 400 });
    const [d] = out.documents;
    expect(d.type).toBe("markdown");
    expect(d.chunks.length).toBeGreaterThan(10);
    d.chunks.forEach((c: Record<string, unknown>, i: number) => {
      expect(c.body).toBe(source.slice(c.start as number, c.end as number));
      expect(c.chunkIndex).toBe(i);
      expect(c.totalChunks).toBe(d.chunks.length);
      expect((c.text as string).length).toBeLessThanOrEqual(400);
      expect(c.text).toBe(c.contextPrefix ? `${c.contextPrefix}\n\n${c.body}` : c.body);
    });
    expect(d.chunks[3].metadata.headingPath[0]).toBe("What Is Ownership?");
    // Tokens: sizes are reported in the tokenizer's unit and stay within the limit.
    const t = JSON.parse(
      kl(
        "chunk",
        file,
        "--strategy",
        "fixed",
        "--unit",
        "tokens",
        "--chunk-size",
        "64",
        "--overlap",
        "8",
        "--json",
      ).stdout,
    );
    const sizes = t.documents[0].chunks.map((c: { size: number }) => c.size);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(64);
    expect(Math.max(...sizes)).toBeGreaterThan(48);
    const human = kl("chunk", file, "--chunk-size", "300");
    expect(human.stdout).toMatch(/^── chunk 1\/\d+ · section · \[0, \d+\) · \d+ chars ──$/m);
    const bad = kl("chunk", file, "--chunk-size", "10", "--overlap", "20");
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("chunkOverlap (20) must be smaller than chunkSize (10)");
    expect(kl("chunk", "missing.md").stderr).toContain("missing.md: file not found");
    // --tokenizer implies token sizes; a new --chunk-size scales the default overlap like kb create.
    const tk = JSON.parse(
      kl("chunk", file, "--tokenizer", "cl100k_base", "--chunk-size", "151", "--json").stdout,
    );
    expect(tk.chunking).toMatchObject({
      unit: "tokens",
      tokenizer: "cl100k_base",
      chunkOverlap: 15,
      minChunkSize: 50,
    });
  });

  it("kl extract prints the extracted text and metadata", () => {
    const r = kl("extract", resolve(ROOT, "../shared/cases/B19.eml"), "--json");
    expect(r.code, r.stderr).toBe(0);
    const [d] = JSON.parse(r.stdout).documents;
    expect(d.metadata).toMatchObject({
      type: "email",
      subject: "Grüße aus München",
      to: ["team@example.de"],
    });
    expect(d.text).toContain("viele Grüße aus München.");
    const pdf = kl("extract", docsPath("pdf/pdf-parse_npm_test_data"));
    expect(pdf.code).toBe(1);
    expect(pdf.stderr).toContain("is a directory");
    const human = kl("extract", resolve(ROOT, "../shared/cases/B19.eml"));
    expect(human.stdout).toMatch(/^subject: Grüße aus München$/m);
  });

  it("extraction options: a KB's Slack workspace URL gives permalinks in search results; limits fail per file", () => {
    const created = kl(
      "kb",
      "create",
      "team",
      "--slack-workspace-url",
      "https://acme.slack.com/",
      "--max-pages",
      "50",
      "--json",
    );
    expect(created.code, created.stderr).toBe(0);
    expect(JSON.parse(created.stdout).extraction).toEqual({
      limits: { maxPages: 50 },
      slack: { workspaceUrl: "https://acme.slack.com" },
    });
    expect(kl("kb", "show", "team").stdout).toMatch(
      /^extraction: .*max pages 50, .*Slack workspace https:\/\/acme\.slack\.com$/m,
    );
    const ingested = kl(
      "ingest",
      docsPath("slack/slack_export_viewer_testarchive/export"),
      "--kb",
      "team",
      "--no-embed",
    );
    expect(ingested.code, ingested.stderr).toBe(0);
    const found = kl("search", "what should setup.py do", "--kb", "team", "--mode", "keyword", "--json");
    expect(found.code, found.stderr).toBe(0);
    const top = JSON.parse(found.stdout).results[0];
    expect(top.source).toMatchObject({ type: "slack", channel: "enrique" });
    expect(top.source.link).toMatch(/^https:\/\/acme\.slack\.com\/archives\/C0JGLMMNX\/p\d{16}/);
    expect(kl("search", "what should setup.py do", "--kb", "team", "--mode", "keyword").stdout).toContain(
      "https://acme.slack.com/archives/C0JGLMMNX/p",
    );
    // A PDF over --max-pages is a clear error naming the file and the limit.
    const pdf = docsPath("pdf/pdf-parse_npm_test_data/01-valid.pdf");
    const limited = kl("extract", pdf, "--max-pages", "1");
    expect(limited.code).toBe(1);
    expect(limited.stderr).toMatch(/01-valid\.pdf: too many pages: \d+ \(limit maxPages = 1\)/);
    expect(kl("kb", "create", "bad", "--slack-workspace-url", "acme").stderr).toContain(
      "must be an http(s) URL",
    );
  });

  it("fresh-user reports: a FIFO never hangs ingest, nothing ingestible exits 1, control characters are escaped", () => {
    const fifo = join(tmp.dir, "pipe.md");
    spawnSync("mkfifo", [fifo]);
    const piped = kl("ingest", fifo, "--no-embed");
    expect(piped.code).toBe(1);
    expect(piped.stdout).toContain("not a regular file (a pipe, socket or device)");
    const image = join(tmp.dir, "photo.jpg");
    writeFileSync(image, Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 0x10]));
    const skipped = kl("ingest", image, "--no-embed");
    expect(skipped.code).toBe(1);
    expect(skipped.stdout).toContain("unsupported file type (.jpg)");
    // An empty folder: nothing to do is said, and the exit code tells it.
    const empty = join(tmp.dir, "empty-folder");
    mkdirSync(empty);
    const none = kl("ingest", empty, "--no-embed");
    expect(none.code).toBe(1);
    expect(none.stderr).toContain(`nothing to ingest: no files found in "${empty}"`);
    const hostile = join(tmp.dir, "hostile.txt");
    writeFileSync(hostile, "before\u001b]0;pwned\u0007after\n");
    const shown = kl("extract", hostile);
    expect(shown.code).toBe(0);
    // Extraction strips the escape sequence itself (test/extract/extract-hygiene.test.ts).
    expect(shown.stdout).toContain("beforeafter");
    expect(shown.stdout).not.toContain("\u001b");
  });

  it("kb create takes EMBEDDING_SEMANTIC options and kb show lists them", () => {
    const r = kl("kb", "create", "notes", "--strategy", "embedding_semantic", "--percentile", "90", "--json");
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).chunking.embeddingSemantic).toEqual({
      breakpoint: "percentile",
      percentile: 90,
    });
    expect(kl("kb", "show", "notes").stdout).toContain("cut where distance > p90, chunks 50–600");
    const bad = kl("kb", "create", "x2", "--threshold", "1.5");
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--threshold must be a cosine similarity from -1 to 1");
  });

  it("kl chunk and kl ingest agree: binary files are refused, UTF-16 text with a BOM is read", () => {
    const bin = join(tmp.dir, "blob.txt");
    writeFileSync(bin, Buffer.from([0x7f, 0x45, 0x4c, 0x46, 0, 0, 1, 2, 3, 0, 0x41]));
    const r = kl("chunk", bin);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("blob.txt: binary file");
    const utf16 = join(tmp.dir, "utf16.txt");
    writeFileSync(
      utf16,
      Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from("Grüße aus München. 你好。", "utf16le")]),
    );
    const c = JSON.parse(kl("chunk", utf16, "--json").stdout);
    expect(c.documents[0].chunks[0].text).toBe("Grüße aus München. 你好。");
    const ing = JSON.parse(kl("ingest", utf16, "blob.txt", "--kb", "manuals", "--no-embed", "--json").stdout);
    expect(ing.skipped.map((x: { reason: string }) => x.reason)).toEqual(["binary file"]);
    expect(ing.errors).toEqual([]);
    expect(ing.added).toBe(1);
  });
});

describe("kl kb: vector stores and embedding providers", () => {
  it("creates a KB on a server store, masking credentials, and refuses incomplete settings", () => {
    const created = kl(
      "kb",
      "create",
      "on-pg",
      "--store",
      "pgvector",
      "--store-url",
      "postgres://kl:s3cret@db.internal:5432/kl",
      "--json",
    );
    expect(created.code).toBe(0);
    expect(created.stdout).not.toContain("s3cret");
    const vectorStore = JSON.parse(created.stdout).vectorStore;
    expect(vectorStore).toEqual({
      type: "pgvector",
      url: "postgres://kl:***@db.internal:5432/kl",
      collection: expect.stringMatching(/^kb_on-pg_[0-9a-f]{6}$/),
    });
    const show = kl("kb", "show", "on-pg");
    expect(show.stdout).toContain(
      `store:      pgvector postgres://kl:***@db.internal:5432/kl, collection ${vectorStore.collection}`,
    );
    expect(show.stdout).not.toContain("s3cret");
    const noUrl = kl("kb", "create", "no-url", "--store", "chroma");
    expect(noUrl.code).toBe(1);
    expect(noUrl.stderr).toContain('knowledge base "no-url": vectorStore.url is required for chroma');
    const badScheme = kl("kb", "create", "bad-url", "--store", "qdrant", "--store-url", "ftp://x");
    expect(badScheme.stderr).toContain('"ftp:" URLs do not work with qdrant');
    const noBase = kl(
      "kb",
      "create",
      "no-base",
      "--embedding-provider",
      "openai-compatible",
      "--embedding-model",
      "m",
    );
    expect(noBase.code).toBe(1);
    expect(noBase.stderr).toMatch(/knowledge base "no-base": embedding: .*baseUrl/);
    const base64 = kl(
      "kb",
      "create",
      "b64",
      "--embedding-provider",
      "openai-compatible",
      "--embedding-url",
      "http://127.0.0.1:9/v1",
      "--embedding-model",
      "m",
      "--embedding-dimension",
      "8",
      "--embedding-encoding",
      "base64",
    );
    expect(base64.code).toBe(0);
    expect(JSON.parse(kl("kb", "show", "b64", "--json").stdout).config.embedding.encodingFormat).toBe(
      "base64",
    );
    const badEncoding = kl("kb", "create", "hex", "--embedding-encoding", "hex");
    expect(badEncoding.code).toBe(2);
    expect(badEncoding.stderr).toMatch(/--embedding-encoding.*hex/);
  });

  it("migrates a KB to another collection, verified, and says what it did", () => {
    const dir = docsPath("markdown", "fastapi_docs_en", "reference", "openapi");
    expect(kl("kb", "create", "movable").code).toBe(0);
    const ingest = kl("ingest", dir, "--kb", "movable", "--json");
    expect(ingest.code).toBe(0);
    const chunks = JSON.parse(kl("kb", "show", "movable", "--json").stdout).counts.chunks as number;
    const moved = kl(
      "kb",
      "migrate",
      "movable",
      "--to",
      "sqlite",
      "--to-collection",
      "movable_v2",
      "--drop-source",
    );
    expect(moved.code).toBe(0);
    expect(moved.stdout).toContain(`${chunks} vectors verified (${chunks} copied, 0 already there)`);
    expect(kl("kb", "show", "movable").stdout).toContain("collection movable_v2");
    const again = kl("kb", "migrate", "movable", "--to", "sqlite", "--to-collection", "movable_v2");
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('knowledge base "movable" already uses sqlite');
    const search = kl("search", "OpenAPI models", "--kb", "movable", "--mode", "vector_only", "--json");
    expect(JSON.parse(search.stdout).results.length).toBeGreaterThan(0);
  });
});
