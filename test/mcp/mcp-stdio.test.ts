import { copyFileSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { extractFile } from "../../src/extract/index.js";
import { docsPath, tempDir } from "../helpers/helpers.js";

const ROOT = resolve(import.meta.dirname, "..", "..");
const tmp = tempDir("kl-mcp-stdio-");
const dataDir = join(tmp.dir, "data");
/** The ingest root: small real documents copied from ../shared/data/docs, and a link leading out. */
const corpus = join(tmp.dir, "corpus");
const comments = join(corpus, "book", "ch03-04-comments.md");
const profiles = join(corpus, "book", "ch14-01-release-profiles.md");
const pdf = join(corpus, "hello_structure.pdf");
const outside = docsPath("markdown", "fastapi_docs_en", "tutorial", "header-params.md");

/** A connected MCP client of a `kl mcp` subprocess, with everything it reported. */
interface Session {
  client: Client;
  /** Protocol errors the client saw, e.g. a stdout line that is not a JSON-RPC message. */
  errors: Error[];
  stderr: () => string;
}

/** Spawns `kl mcp` from source (as `dist/cli/main.js` is built) and connects an SDK client to it. */
async function connect(args: string[], options: { cwd?: string; preload?: string } = {}): Promise<Session> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [
      "--import",
      join(ROOT, "node_modules/tsx/dist/loader.mjs"),
      ...(options.preload ? ["--import", options.preload] : []),
      join(ROOT, "src/cli/main.ts"),
      "mcp",
      "--data-dir",
      dataDir,
      ...args,
    ],
    cwd: options.cwd ?? tmp.dir,
    env: Object.fromEntries(
      Object.entries({ ...process.env, KL_CACHE_URL: "none" }).filter(
        (e): e is [string, string] => e[1] !== undefined,
      ),
    ),
    stderr: "pipe",
  });
  let stderr = "";
  transport.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString("utf8");
  });
  const client = new Client({ name: "kl-test", version: "1.0.0" });
  const errors: Error[] = [];
  client.onerror = (error) => errors.push(error);
  await client.connect(transport);
  return { client, errors, stderr: () => stderr };
}

/** Calls a tool and returns its result (tool errors are results with isError, not exceptions). */
async function call(s: Session, name: string, args: Record<string, unknown> = {}): Promise<CallToolResult> {
  return (await s.client.callTool({ name, arguments: args })) as CallToolResult;
}

/** The text of a tool result's content. */
function textOf(r: CallToolResult): string {
  return r.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");
}

let ingest: Session;

beforeAll(async () => {
  mkdirSync(join(corpus, "book"), { recursive: true });
  copyFileSync(docsPath("markdown", "rust_book_src", "ch03-04-comments.md"), comments);
  copyFileSync(docsPath("markdown", "rust_book_src", "ch14-01-release-profiles.md"), profiles);
  copyFileSync(docsPath("pdf", "pdfplumber_test_pdfs", "hello_structure.pdf"), pdf);
  symlinkSync(outside, join(corpus, "escape.md"));
  // A relative ingest root is read from the working directory.
  ingest = await connect(["--allow-ingest", "--ingest-root", "."], { cwd: corpus });
});

afterAll(async () => {
  await ingest?.client.close();
  tmp.cleanup();
});

describe("kl mcp over stdio", () => {
  it("offers ingest_path only with --allow-ingest, with its input schema", async () => {
    const { tools } = await ingest.client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([
      "get_document",
      "ingest_path",
      "list_knowledge_bases",
      "search_knowledge",
    ]);
    const search = tools.find((t) => t.name === "search_knowledge");
    expect(search?.inputSchema.required).toEqual(["query"]);
    expect(search?.inputSchema.properties?.top_k).toMatchObject({ type: "integer", minimum: 1, maximum: 50 });
    expect(search?.outputSchema?.properties).toHaveProperty("results");
    expect(search?.annotations?.readOnlyHint).toBe(true);
    const ingestTool = tools.find((t) => t.name === "ingest_path");
    expect(ingestTool?.inputSchema.required).toEqual(["path"]);
    expect(ingestTool?.description).toContain(corpus);
  });

  it("ingests a folder and a file inside the root, reporting the summary", async () => {
    const folder = await call(ingest, "ingest_path", { path: "book" });
    expect(folder.isError).toBeFalsy();
    expect(folder.structuredContent).toMatchObject({
      kb: "default",
      path: join(corpus, "book"),
      files: 2,
      added: 2,
      errors: [],
      skipped: [],
    });
    expect(textOf(folder)).toMatch(/2 added, 0 updated, 0 unchanged, 0 removed, 0 errors/);
    // With a progress token (the SDK sends one when onprogress is given), progress is notified.
    const progress: { progress: number; total?: number }[] = [];
    const file = (await ingest.client.callTool(
      { name: "ingest_path", arguments: { path: pdf, kb: "default" } },
      undefined,
      {
        onprogress: (p) => progress.push(p),
      },
    )) as CallToolResult;
    expect(file.structuredContent).toMatchObject({ files: 1, added: 1, documents: 1 });
    expect(progress).toContainEqual(expect.objectContaining({ progress: 1, total: 1 }));
    const again = await call(ingest, "ingest_path", { path: "./book" });
    expect(again.structuredContent).toMatchObject({ unchanged: 2, added: 0 });
  });

  it("searches with attributed passages as text and structured content", async () => {
    const r = await call(ingest, "search_knowledge", {
      query: "opt-level release profile",
      mode: "keyword",
      top_k: 2,
    });
    expect(r.isError).toBeFalsy();
    const s = r.structuredContent as {
      mode: string;
      kbs: string[];
      results: {
        rank: number;
        score: number;
        kb: string;
        text: string;
        citation: string;
        source: Record<string, unknown>;
      }[];
    };
    expect(s.mode).toBe("keyword");
    expect(s.kbs).toEqual(["default"]);
    expect(s.results.length).toBeGreaterThan(0);
    expect(s.results.length).toBeLessThanOrEqual(2);
    const first = s.results[0];
    expect(first).toMatchObject({ rank: 1, kb: "default", source: { uri: profiles, type: "markdown" } });
    expect(first?.score).toBeGreaterThan(0);
    expect(first?.text).toMatch(/opt-level/);
    expect(first?.citation).toContain(profiles);
    expect(first?.source.headingPath).toContain("Customizing Builds with Release Profiles");
    const text = textOf(r);
    expect(text).toContain(`[1] ${first?.citation}`);
    expect(text).toMatch(/Source: .*markdown · score \d/);
    expect(text).toContain("opt-level");

    // The PDF's passages carry their page.
    const page = await call(ingest, "search_knowledge", { query: "Goodbye Cruel World", mode: "keyword" });
    const hit = (page.structuredContent as { results: { source: Record<string, unknown> }[] }).results[0];
    expect(hit?.source).toMatchObject({ uri: pdf, type: "pdf" });
    expect(typeof hit?.source.page).toBe("number");
    expect(textOf(page)).toMatch(/pdf · page \d/);

    // The KB's default mode (hybrid_rerank, with vectors from the bundled model).
    const semantic = await call(ingest, "search_knowledge", {
      query: "how do I write comments in Rust code?",
    });
    const sr = semantic.structuredContent as { mode: string; results: { source: { uri: string } }[] };
    expect(sr.mode).toBe("hybrid_rerank");
    expect(sr.results[0]?.source.uri).toBe(comments);
  });

  it("lists knowledge bases with counts and key configuration", async () => {
    const r = await call(ingest, "list_knowledge_bases");
    expect(r.isError).toBeFalsy();
    const [kb] = (r.structuredContent as { knowledgeBases: Record<string, unknown>[] }).knowledgeBases;
    expect(kb).toMatchObject({
      name: "default",
      documents: 3,
      embeddedDocuments: 3,
      documentsByType: { markdown: 2, pdf: 1 },
      chunking: { strategy: "auto" },
      embedding: "bundled:use-lite-mix",
      vectorStore: "sqlite",
      retrieval: { mode: "hybrid_rerank" },
    });
    expect(kb?.chunks as number).toBeGreaterThanOrEqual(3);
    expect(textOf(r)).toMatch(/- default: 3 documents \(2 markdown, 1 pdf\), \d+ chunks/);
  });

  it("returns a document's metadata and extracted text, paged with offset and limit", async () => {
    const [extracted] = await extractFile(profiles);
    const r = await call(ingest, "get_document", { uri: profiles });
    expect(r.isError).toBeFalsy();
    const doc = r.structuredContent as Record<string, unknown>;
    expect(doc).toMatchObject({
      kb: "default",
      uri: profiles,
      path: profiles,
      type: "markdown",
      offset: 0,
      truncated: false,
      totalChars: extracted?.text.length,
    });
    expect(doc.text).toBe(extracted?.text);
    expect(doc.metadata).toMatchObject({ type: "markdown", path: profiles });
    expect(textOf(r)).toContain(extracted?.text);

    // Paging: limit cuts with a note and nextOffset; the pages put together are the text.
    let text = "";
    let offset = 0;
    for (let pages = 0; pages < 10; pages++) {
      const page = await call(ingest, "get_document", { uri: profiles, offset, limit: 1000 });
      const p = page.structuredContent as { text: string; truncated: boolean; nextOffset?: number };
      text += p.text;
      if (!p.truncated) break;
      expect(textOf(page)).toContain(`Call get_document again with offset ${p.nextOffset}`);
      offset = p.nextOffset as number;
    }
    expect(text).toBe(extracted?.text);
  });

  it("reports unknown KBs, bad input and paths outside the root as tool errors", async () => {
    const unknownKb = await call(ingest, "search_knowledge", { query: "comments", kbs: ["nope"] });
    expect(unknownKb.isError).toBe(true);
    expect(textOf(unknownKb)).toContain('unknown knowledge base "nope"');

    const missingQuery = await call(ingest, "search_knowledge", {});
    expect(missingQuery.isError).toBe(true);
    expect(textOf(missingQuery)).toMatch(/Input validation error.*query/);

    const tooMany = await call(ingest, "search_knowledge", { query: "comments", top_k: 51 });
    expect(tooMany.isError).toBe(true);
    expect(textOf(tooMany)).toMatch(/top_k/);

    const badMode = await call(ingest, "search_knowledge", { query: "comments", mode: "fuzzy" });
    expect(badMode.isError).toBe(true);

    const empty = await call(ingest, "search_knowledge", { query: "   " });
    expect(empty.isError).toBe(true);
    expect(textOf(empty)).toContain("the query is empty");

    const outsideRoot = await call(ingest, "ingest_path", { path: outside });
    expect(outsideRoot.isError).toBe(true);
    expect(textOf(outsideRoot)).toContain(`outside the ingest root ${corpus}`);

    const upward = await call(ingest, "ingest_path", { path: "../data" });
    expect(upward.isError).toBe(true);
    expect(textOf(upward)).toContain("outside the ingest root");

    const link = await call(ingest, "ingest_path", { path: "escape.md" });
    expect(link.isError).toBe(true);
    expect(textOf(link)).toContain(`(it resolves to ${outside})`);

    const missing = await call(ingest, "ingest_path", { path: "no-such-file.md" });
    expect(missing.isError).toBe(true);
    expect(textOf(missing)).toContain("path does not exist");

    const unknownIngestKb = await call(ingest, "ingest_path", { path: "book", kb: "nope" });
    expect(unknownIngestKb.isError).toBe(true);
    expect(textOf(unknownIngestKb)).toContain('unknown knowledge base "nope"');

    const noDoc = await call(ingest, "get_document", { uri: join(corpus, "none.md") });
    expect(noDoc.isError).toBe(true);
    expect(textOf(noDoc)).toContain("no document with URI");

    // Nothing outside the root was ingested.
    const list = await call(ingest, "list_knowledge_bases");
    expect(
      (list.structuredContent as { knowledgeBases: { documents: number }[] }).knowledgeBases[0],
    ).toMatchObject({ documents: 3 });
  });

  it("wrote nothing but protocol messages to stdout while ingesting and searching", () => {
    expect(ingest.errors).toEqual([]);
    expect(ingest.stderr()).toContain("kl mcp: serving on stdio");
  });

  it("without --allow-ingest has no ingest_path, and keeps stdout clean when a library prints", async () => {
    // A preload standing in for a chatty library: once the server says it is serving, it writes to
    // stdout every 20 ms (console.log and raw writes).
    const preload = join(tmp.dir, "noisy-library.mjs");
    writeFileSync(
      preload,
      `const stderrWrite = process.stderr.write;
let started = false;
process.stderr.write = function (chunk, ...rest) {
  if (!started && String(chunk).includes("kl mcp: serving")) {
    started = true;
    setInterval(() => {
      console.log("noise: console.log from a library");
      process.stdout.write("noise: raw stdout write\\n");
    }, 20).unref();
  }
  return stderrWrite.call(this, chunk, ...rest);
};
`,
    );
    const readOnly = await connect([], { preload });
    try {
      const { tools } = await readOnly.client.listTools();
      expect(tools.map((t) => t.name).sort()).toEqual([
        "get_document",
        "list_knowledge_bases",
        "search_knowledge",
      ]);
      const refused = await call(readOnly, "ingest_path", { path: "book" });
      expect(refused.isError).toBe(true);
      expect(textOf(refused)).toContain("ingest_path not found");
      const r = await call(readOnly, "search_knowledge", { query: "opt-level release", mode: "keyword" });
      expect((r.structuredContent as { results: { source: { uri: string } }[] }).results[0]?.source.uri).toBe(
        profiles,
      );
      await new Promise((done) => setTimeout(done, 100));
      expect(readOnly.errors).toEqual([]);
      expect(readOnly.stderr()).toContain("noise: console.log from a library");
      expect(readOnly.stderr()).toContain("noise: raw stdout write");
    } finally {
      // The server ends by itself when the client closes stdin (the SDK would SIGTERM it after 2 s).
      const started = Date.now();
      await readOnly.client.close();
      expect(Date.now() - started).toBeLessThan(1900);
    }
  });
});
