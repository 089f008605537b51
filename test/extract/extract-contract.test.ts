/**
 * The extraction seam itself: options and limits, in-memory extraction, detection
 * of the formats added for issue 4, extraction settings in a KB's config, and the
 * attribution fields they feed.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { annotateLines } from "../../src/chunk/spans.js";
import { defaultKbConfig, validateKbConfig } from "../../src/config.js";
import { ConfigError, ExtractionError } from "../../src/errors.js";
import {
  DEFAULT_EXTRACTION_LIMITS,
  detectSourceType,
  detectSourceTypeOf,
  extractBytes,
  extractFile,
  isSlackExportZip,
  looksLikeSlackHistory,
  resolveExtractOptions,
} from "../../src/extract/index.js";
import { KnowledgeLayer } from "../../src/knowledge-layer.js";
import { attribute, formatCitation } from "../../src/retrieve/attribution.js";
import type { StoredChunk } from "../../src/store/catalog.js";
import type { Chunk, ExtractedDocument } from "../../src/types.js";

const SHARED = resolve(import.meta.dirname, "..", "..", "..", "shared");
const docs = (...p: string[]): string => join(SHARED, "data", "docs", ...p);
const tmp = mkdtempSync(join(tmpdir(), "kl-extract-contract-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

async function failure(p: Promise<unknown>): Promise<ExtractionError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof ExtractionError) return err;
    throw err;
  }
  throw new Error("expected an ExtractionError");
}

describe("extraction options and limits", () => {
  it("fills in defaults and refuses limits that are not positive integers", () => {
    const o = resolveExtractOptions({ limits: { maxPages: 5 } });
    expect(o.limits).toEqual({ ...DEFAULT_EXTRACTION_LIMITS, maxPages: 5 });
    expect(o.email.attachments).toBe(true);
    expect(() => resolveExtractOptions({ limits: { maxFileBytes: 0 } })).toThrow(
      /maxFileBytes must be a positive integer/,
    );
    expect(() => resolveExtractOptions({ limits: { maxPages: 1.5 } })).toThrow(/maxPages/);
  });

  it("refuses a file over maxFileBytes before reading it, naming the file and the limit", async () => {
    const file = docs("markdown", "rust_book_src", "ch04-01-what-is-ownership.md");
    const size = readFileSync(file).length;
    const err = await failure(extractFile(file, undefined, { limits: { maxFileBytes: 1024 } }));
    expect(err.path).toBe(file);
    expect(err.reason).toBe(`file too large: ${(size / 1024).toFixed(1)} KiB (limit maxFileBytes = 1.0 KiB)`);
    // At the limit it is read.
    const [doc] = await extractFile(file, undefined, { limits: { maxFileBytes: size } });
    expect(doc?.text.length).toBeGreaterThan(1000);
  });

  it("applies the same limit to in-memory content", async () => {
    const err = await failure(
      extractBytes("notes.md", Buffer.from("# Title\n\nx".repeat(200)), undefined, {
        limits: { maxFileBytes: 100 },
      }),
    );
    expect(err.reason).toMatch(/^file too large: .* \(limit maxFileBytes = 100 B\)$/);
  });
});

describe("extractBytes", () => {
  it("extracts in-memory content by name, with the same result as the file", async () => {
    const file = docs("markdown", "fastapi_docs_zh", "index.md");
    const [fromFile] = await extractFile(file);
    const [fromBytes] = await extractBytes("upload/index.md", readFileSync(file));
    expect(fromBytes?.text).toBe(fromFile?.text);
    expect(fromBytes?.uri).toBe("upload/index.md");
    expect(fromBytes?.metadata.type).toBe("markdown");
    expect(fromBytes?.metadata.title).toBe(fromFile?.metadata.title);
  });

  it("uses the MIME type when the name says nothing, and refuses binary or unknown content", async () => {
    const [doc] = await extractBytes(
      "upload",
      Buffer.from("<html><title>T</title><body><p>Hello there</p></body></html>"),
      undefined,
      {},
      "text/html; charset=utf-8",
    );
    expect(doc?.metadata.type).toBe("html");
    expect(doc?.text).toContain("Hello there");
    expect((await failure(extractBytes("blob.bin", Buffer.from([1, 2, 3])))).reason).toBe(
      "unsupported file type (.bin)",
    );
    expect((await failure(extractBytes("a.txt", Buffer.from([0x41, 0, 0x42])))).reason).toMatch(
      /^binary file/,
    );
  });
});

describe("extractBytes: a Slack export .zip held in memory", () => {
  it("gives the same channels and texts as the zip on disk", async () => {
    const zip = docs("slack", "slack_export_viewer_testarchive", "testarchive.zip");
    const fromFile = await extractFile(zip);
    const fromBytes = await extractBytes("upload/testarchive.zip", readFileSync(zip));
    expect(fromBytes.map((d) => d.metadata.channel)).toEqual(fromFile.map((d) => d.metadata.channel));
    expect(fromBytes.map((d) => d.text)).toEqual(fromFile.map((d) => d.text));
    expect(fromBytes.length).toBeGreaterThan(0);
    expect((await failure(extractBytes("export", readFileSync(zip), "slack"))).reason).toMatch(
      /must be a \.zip export or a \.json history file/,
    );
  });
});

describe("detection of the added formats", () => {
  it("licence files are text, JSON/XML/INI/templates are code, .docx and .mbox have their types", () => {
    expect(detectSourceType(docs("code", "psf+requests", "LICENSE"))).toBe("text");
    expect(detectSourceType(docs("code", "psf+requests", "NOTICE"))).toBe("text");
    expect(detectSourceType(docs("code", "expressjs+express", "package.json"))).toBe("code");
    expect(detectSourceType(docs("code", "psf+requests", "tox.ini"))).toBe("code");
    expect(detectSourceType(docs("code", "expressjs+express", "examples", "mvc", "views", "404.ejs"))).toBe(
      "code",
    );
    expect(detectSourceTypeOf("report.docx", Buffer.from("PK"))).toBe("docx");
    expect(detectSourceTypeOf("archive.mbox", Buffer.from("From a@b Mon Jan  1 00:00:00 2024\n"))).toBe(
      "email",
    );
    expect(detectSourceTypeOf("x", Buffer.from("%PDF-1.4"), "application/pdf")).toBe("pdf");
  });

  it("Slack: API history JSON and a zipped export are Slack; other JSON and zips are not", () => {
    expect(detectSourceType(docs("slack", "archlinuxjp_slacklog_json", "20200401_general.json"))).toBe(
      "slack",
    );
    expect(isSlackExportZip(docs("slack", "slack_export_viewer_testarchive", "testarchive.zip"))).toBe(true);
    expect(detectSourceType(docs("slack", "slack_export_viewer_testarchive", "testarchive.zip"))).toBe(
      "slack",
    );
    expect(
      looksLikeSlackHistory('[{"type": "message", "user": "U1", "text": "hi", "ts": "1588250805.235300"}]'),
    ).toBe(true);
    expect(looksLikeSlackHistory('{"name": "x", "messages": "none"}')).toBe(false);
    expect(looksLikeSlackHistory('{"compilerOptions": {}}')).toBe(false);
    const zip = join(tmp, "other.zip");
    writeFileSync(
      zip,
      Buffer.concat([Buffer.from("PK\u0003\u0004"), Buffer.alloc(64), Buffer.from("readme.txt")]),
    );
    expect(detectSourceType(zip)).toBeUndefined();
  });
});

describe("Slack .zip sniffing reads the whole central directory", () => {
  it("finds channels.json and users.json written first in a zip whose directory is over 4 MiB", async () => {
    const { default: JSZip } = await import("jszip");
    const zip = new JSZip();
    zip.file("export/channels.json", '[{"id":"C1","name":"general"}]');
    zip.file("export/users.json", '[{"id":"U1","name":"ana"}]');
    const pad = "-a-long-file-name-so-that-the-central-directory-grows-quickly";
    for (let i = 0; i < 70_000; i++)
      zip.file(`export/general/${String(i).padStart(6, "0")}${pad}.json`, "[]");
    const bytes = await zip.generateAsync({ type: "nodebuffer", compression: "STORE" });
    const file = join(tmp, "late-directory.zip");
    writeFileSync(file, bytes);
    expect(isSlackExportZip(file)).toBe(true);
    expect(detectSourceTypeOf("late-directory.zip", bytes)).toBe("slack");
    // The same archive without users.json is not a Slack export.
    zip.remove("export/users.json");
    const other = await zip.generateAsync({ type: "nodebuffer", compression: "STORE" });
    expect(detectSourceTypeOf("other.zip", other)).toBeUndefined();
  }, 60_000);
});

describe("extraction settings in a knowledge base", () => {
  it("are validated: unknown keys, bad limits and bad workspace URLs are ConfigErrors", () => {
    const base = defaultKbConfig("x");
    expect(() =>
      validateKbConfig({
        ...base,
        extraction: { limits: { maxPages: 10 }, slack: { workspaceUrl: "https://acme.slack.com" } },
      }),
    ).not.toThrow();
    expect(() => validateKbConfig({ ...base, extraction: { limits: { maxPagez: 1 } } } as never)).toThrow(
      /extraction\.limits\.maxPagez is not a known setting/,
    );
    expect(() => validateKbConfig({ ...base, extraction: { limits: { maxPages: -1 } } })).toThrow(
      ConfigError,
    );
    expect(() => validateKbConfig({ ...base, extraction: { slack: { workspaceUrl: "acme" } } })).toThrow(
      /workspaceUrl must be an http\(s\) URL/,
    );
  });

  it("reach ingest: a KB's maxFileBytes turns an oversized file into a per-file error", async () => {
    const kl = KnowledgeLayer.open({ dataDir: join(tmp, "kb") });
    try {
      await kl.createKb("small", { extraction: { limits: { maxFileBytes: 2000 } } });
      expect((await kl.getKb("small")).config.extraction).toEqual({ limits: { maxFileBytes: 2000 } });
      const big = join(tmp, "big.md");
      const small = join(tmp, "small.md");
      writeFileSync(big, `# Big\n\n${"All work and no play. ".repeat(200)}`);
      writeFileSync(small, "# Small\n\nShort enough to read.");
      const summary = await kl.ingest([big, small], { kb: "small", embed: false });
      expect(summary.added).toBe(1);
      expect(summary.errors).toEqual([
        { path: big, reason: "file too large: 4.3 KiB (limit maxFileBytes = 2.0 KiB)" },
      ]);
      expect((await kl.counts("small")).documentsByType).toEqual({ markdown: 1 });
    } finally {
      kl.close();
    }
  });
});

describe("attribution of the new metadata", () => {
  const doc = (type: string, text: string): ExtractedDocument => ({
    uri: "/r/a.py",
    text,
    metadata: { path: "/r/a.py", type: type as "code" },
  });
  const chunk = (start: number, end: number, text: string): Chunk => ({
    text: text.slice(start, end),
    start,
    end,
    chunkIndex: 0,
    totalChunks: 1,
    chunkType: "code_function",
    metadata: {},
  });

  it("code, Markdown and text chunks carry 1-based line ranges; other types do not", () => {
    const text = "import os\r\n\r\ndef f():\n    return 1\n\ndef g():\n    return 2\n";
    const [a, b] = annotateLines(doc("code", text), [
      chunk(13, 34, text),
      chunk(text.indexOf("def g"), text.length - 1, text),
    ]);
    expect([a?.metadata.lineStart, a?.metadata.lineEnd]).toEqual([3, 4]);
    expect([b?.metadata.lineStart, b?.metadata.lineEnd]).toEqual([6, 7]);
    const [p] = annotateLines(doc("pdf", text), [chunk(0, 9, text)]);
    expect(p?.metadata.lineStart).toBeUndefined();
  });

  it("cites code by path:lines, and carries links, threads and attachment parents", () => {
    const stored = (
      type: string,
      docMeta: Record<string, unknown>,
      meta: Record<string, unknown>,
    ): StoredChunk => ({
      id: 1,
      kb: "default",
      documentId: 1,
      chunkIndex: 0,
      totalChunks: 2,
      chunkType: "text",
      start: 0,
      end: 10,
      text: "x",
      contextPrefix: null,
      metadata: meta,
      document: {
        uri: "/r/x",
        path: "/r/x",
        type,
        title: "T",
        metadata: { path: "/r/x", type: type as "code", ...docMeta },
      },
    });
    const code = attribute(stored("code", { language: "python" }, { lineStart: 3, lineEnd: 9, symbol: "f" }));
    expect(formatCitation(code, { chunkIndex: 0, totalChunks: 2, start: 0, end: 10 }, null)).toBe(
      "/r/x:3-9 › f (chunk 1/2, chars 0–10)",
    );
    const slack = attribute(
      stored(
        "slack",
        { channel: "general" },
        {
          link: "https://acme.slack.com/archives/C1/p1588250805235300",
          user: "ana",
          tsStart: "1588250805.235300",
        },
      ),
    );
    expect(slack.link).toBe("https://acme.slack.com/archives/C1/p1588250805235300");
    const html = attribute(stored("html", { canonicalUrl: "https://example.com/page" }, {}));
    expect(html.link).toBe("https://example.com/page");
    const attachment = attribute(
      stored(
        "pdf",
        { parentUri: "/r/mail.eml", attachmentName: "report.pdf", author: "Ana" },
        { pageStart: 2, pageEnd: 2 },
      ),
    );
    expect(attachment).toMatchObject({
      parentUri: "/r/mail.eml",
      attachmentName: "report.pdf",
      author: "Ana",
      page: 2,
    });
    expect(formatCitation(attachment, { chunkIndex: 0, totalChunks: 2, start: 0, end: 10 }, null)).toBe(
      "/r/x › attachment report.pdf p. 2 (chunk 1/2, chars 0–10)",
    );
    const email = attribute(stored("email", { threadId: "<root@x>", subject: "S" }, {}));
    expect(email.threadId).toBe("<root@x>");
  });
});
