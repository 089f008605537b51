import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { KnowledgeLayerError } from "../../src/errors.js";
import {
  detectSourceType,
  discoverSources,
  extractFile,
  htmlToText,
  isSlackExport,
  languageForPath,
  markdownTitle,
  normalizePdfText,
  parseFrontMatter,
  renderSlackText,
} from "../../src/extract/index.js";
import type { ExtractedDocument } from "../../src/types.js";
import { docsPath, extractionError, SHARED, tempDir } from "../helpers/helpers.js";

const casePath = (name: string): string => join(SHARED, "cases", name);
const SLACK_EXPORT = docsPath("slack", "slack_export_viewer_testarchive", "export");

/** Asserts segments are ordered, non-overlapping and inside the text. */
function expectWellFormedSegments(doc: ExtractedDocument): void {
  const segments = doc.segments ?? [];
  expect(segments.length).toBeGreaterThan(0);
  let previousEnd = 0;
  for (const s of segments) {
    expect(s.start).toBeGreaterThanOrEqual(previousEnd);
    expect(s.end).toBeGreaterThan(s.start);
    expect(s.end).toBeLessThanOrEqual(doc.text.length);
    previousEnd = s.end;
  }
}

/** Materialises a case file shaped `{ "users.json": [...], "chan/day.json": [...] }` as an export folder. */
function writeExport(dir: string, files: Record<string, unknown>): void {
  for (const [name, content] of Object.entries(files)) {
    const path = join(dir, name);
    mkdirSync(join(path, ".."), { recursive: true });
    writeFileSync(path, JSON.stringify(content));
  }
}

describe("detectSourceType", () => {
  it("maps extensions to source types", () => {
    expect(detectSourceType("/x/README.md")).toBe("markdown");
    expect(detectSourceType("/x/page.mdx")).toBe("markdown");
    expect(detectSourceType("/x/notes.rst")).toBe("text");
    expect(detectSourceType("/x/app.log")).toBe("text");
    expect(detectSourceType("/x/index.HTM")).toBe("html");
    expect(detectSourceType("/x/paper.pdf")).toBe("pdf");
    expect(detectSourceType("/x/msg.eml")).toBe("email");
    expect(detectSourceType("/x/main.go")).toBe("code");
    expect(detectSourceType("/x/image.png")).toBeUndefined();
    expect(languageForPath("/x/a.tsx")).toBe("typescript");
    expect(languageForPath("/x/a.py")).toBe("python");
    expect(languageForPath("/x/a.rs")).toBe("rust");
    expect(languageForPath("/x/Makefile")).toBe("make");
  });

  it("sniffs mbox-style mail stored as .txt or without extension", () => {
    const spam = docsPath(
      "email",
      "spamassassin_sample",
      "easy-ham-1",
      "00001.7c53336b37003a9286aba55d2945844c.txt",
    );
    expect(detectSourceType(spam)).toBe("email");
    expect(
      detectSourceType(docsPath("chinese", "debian_reference_zh_cn", "debian-reference.zh-cn.txt")),
    ).toBe("text");
    const { dir, cleanup } = tempDir();
    try {
      writeFileSync(join(dir, "mailbox"), readFileSync(spam));
      writeFileSync(join(dir, "NOTES"), "From the desk of nobody\njust text\n");
      expect(detectSourceType(join(dir, "mailbox"))).toBe("email");
      // Not mail (no header lines after the `From ` line), but text: sniffed as text.
      expect(detectSourceType(join(dir, "NOTES"))).toBe("text");
    } finally {
      cleanup();
    }
  });

  it("recognises a Slack export folder", () => {
    expect(isSlackExport(SLACK_EXPORT)).toBe(true);
    expect(isSlackExport(docsPath("slack", "slack_export_viewer_testarchive"))).toBe(false);
    expect(detectSourceType(SLACK_EXPORT)).toBe("slack");
  });
});

describe("markdown", () => {
  it("keeps the file content and takes the H1 as title (Rust book)", async () => {
    const path = docsPath("markdown", "rust_book_src", "ch01-00-getting-started.md");
    const [doc] = await extractFile(path);
    expect(doc?.uri).toBe(path);
    expect(doc?.text).toBe(readFileSync(path, "utf8"));
    expect(doc?.metadata).toEqual({ path, type: "markdown", title: "Getting Started" });
  });

  it("drops heading attributes from titles (FastAPI docs, English and Chinese)", async () => {
    const [en] = await extractFile(docsPath("markdown", "fastapi_docs_en", "features.md"));
    const [zh] = await extractFile(docsPath("markdown", "fastapi_docs_zh", "features.md"));
    expect(en?.metadata.title).toBe("Features");
    expect(zh?.metadata.title).toBe("特性");
    expect(en?.text.startsWith("# Features { #features }")).toBe(true);
  });

  it("falls back to the file name without an H1", async () => {
    const path = docsPath("markdown", "rust_book_src", "ch06-02-match.md");
    const [doc] = await extractFile(path);
    expect(doc?.metadata.title).toBe("ch06-02-match.md");
    expect(doc?.metadata).not.toHaveProperty("frontMatter");
  });

  it("reads Setext titles, ignores fenced code, parses front matter", () => {
    expect(markdownTitle("Intro text\n\nMy Title\n========\n\nbody")).toBe("My Title");
    expect(markdownTitle("```\n# not a title\n```\n# The `match` Construct\n")).toBe("The match Construct");
    const text = '---\ntitle: "Front Title"\ntags:\n  - a\nauthor: Ann\n---\n# Heading\n';
    expect(parseFrontMatter(text)?.fields).toEqual({ title: "Front Title", author: "Ann" });
    expect(text.slice(parseFrontMatter(text)?.end)).toBe("# Heading\n");
    expect(markdownTitle(text)).toBe("Heading");
  });

  it("uses the front matter title and keeps the text unchanged", async () => {
    const { dir, cleanup } = tempDir();
    try {
      const path = join(dir, "fm.md");
      const content = "---\ntitle: Release notes\nversion: 2\n---\n\n# 2.0\n\nChanges.\n";
      writeFileSync(path, content);
      const [doc] = await extractFile(path);
      expect(doc?.text).toBe(content);
      expect(doc?.metadata.title).toBe("Release notes");
      expect(doc?.metadata.frontMatter).toEqual({ title: "Release notes", version: 2 });
    } finally {
      cleanup();
    }
  });
});

describe("text and code", () => {
  it("tags code files with their language and keeps the content", async () => {
    const cases: [string, string][] = [
      [docsPath("code", "gin-gonic+gin", "gin.go"), "go"],
      [docsPath("code", "psf+requests", "src", "requests", "api.py"), "python"],
      [docsPath("code", "expressjs+express", "lib", "express.js"), "javascript"],
      [docsPath("code", "colinhacks+zod", "packages", "zod", "src", "index.ts"), "typescript"],
    ];
    for (const [path, language] of cases) {
      const [doc] = await extractFile(path);
      expect(doc?.metadata.type).toBe("code");
      expect(doc?.metadata.language).toBe(language);
      expect(doc?.metadata.title).toBe(path.split("/").pop());
      expect(doc?.text).toBe(readFileSync(path, "utf8"));
    }
    const [gin] = await extractFile(docsPath("code", "gin-gonic+gin", "gin.go"));
    expect(gin?.text).toContain("func New(");
  });

  it("reads plain text unchanged", async () => {
    const path = docsPath("code", "psf+requests", "AUTHORS.rst");
    const [doc] = await extractFile(path);
    expect(doc?.metadata).toEqual({ path, type: "text", title: "AUTHORS.rst" });
    expect(doc?.text).toBe(readFileSync(path, "utf8"));
  });

  it("rejects empty files and decodes invalid UTF-8 with replacement characters", async () => {
    const { dir, cleanup } = tempDir();
    try {
      writeFileSync(join(dir, "empty.txt"), "");
      writeFileSync(join(dir, "blank.md"), " \n\t\n");
      writeFileSync(join(dir, "empty.py"), "");
      writeFileSync(
        join(dir, "bad.txt"),
        Buffer.concat([Buffer.from("机器 a"), Buffer.from([0xff, 0xfe, 0x62, 0x0a])]),
      );
      for (const name of ["empty.txt", "blank.md", "empty.py"]) {
        const err = await extractionError(() => extractFile(join(dir, name)));
        expect(err.message).toContain("file is empty");
        expect(err.path).toBe(join(dir, name));
      }
      const [doc] = await extractFile(join(dir, "bad.txt"));
      expect(doc?.text).toBe("机器 a\uFFFD\uFFFDb\n");
    } finally {
      cleanup();
    }
  });

  it("reports missing and unsupported files", async () => {
    const missing = await extractionError(() => extractFile("/nonexistent/nowhere.md"));
    expect(missing.message).toContain("/nonexistent/nowhere.md");
    const unsupported = await extractionError(() =>
      extractFile(docsPath("pdf", "pdfplumber_test_pdfs", "issue-948.zip")),
    );
    expect(unsupported.message).toContain("unsupported file type (.zip)");
  });
});

describe("email", () => {
  it("extracts body and headers of an RFC 2822 example", async () => {
    const path = docsPath("email", "ruby_mail_gem_fixtures", "emails", "rfc2822", "example01.eml");
    const [doc] = await extractFile(path);
    expect(doc?.text).toBe('This is a message just to say hello.\nSo, "Hello".');
    expect(doc?.metadata).toEqual({
      path,
      type: "email",
      title: "Saying Hello",
      subject: "Saying Hello",
      from: "John Doe <jdoe@machine.example>",
      to: ["Mary Smith <mary@example.net>"],
      mailboxes: {
        from: [{ name: "John Doe", address: "jdoe@machine.example" }],
        to: [{ name: "Mary Smith", address: "mary@example.net" }],
      },
      date: "1997-11-21T15:55:06.000Z",
      messageId: "<1234@local.machine.example>",
      threadId: "<1234@local.machine.example>",
    });
  });

  it("parses an mbox-style SpamAssassin mail (From_ line, .txt extension)", async () => {
    const path = docsPath(
      "email",
      "spamassassin_sample",
      "easy-ham-1",
      "00001.7c53336b37003a9286aba55d2945844c.txt",
    );
    const [doc] = await extractFile(path);
    const m = doc?.metadata;
    expect(m?.type).toBe("email");
    expect(m?.from).toBe("Robert Elz <kre@munnari.OZ.AU>");
    expect(m?.subject).toBe("Re: New Sequences Window");
    expect(m?.title).toBe("Re: New Sequences Window");
    expect(m?.date).toBe("2002-08-22T11:26:25.000Z");
    expect(m?.messageId).toBe("<13258.1030015585@munnari.OZ.AU>");
    expect(m?.to).toEqual(["Chris Garrigues <cwg-dated-1030377287.06fa6d@DeepEddy.Com>"]);
    expect(doc?.text).toContain("I can't reproduce this error.");
    expect(doc?.text).not.toContain("Return-Path:");
    expect(doc?.text).not.toContain("Received:");
  });

  it("lists attachments and handles non-UTF-8 charsets", async () => {
    const pdfMail = docsPath(
      "email",
      "ruby_mail_gem_fixtures",
      "emails",
      "attachment_emails",
      "attachment_pdf.eml",
    );
    const [withPdf] = await extractFile(pdfMail);
    const attachments = withPdf?.metadata.attachments as {
      filename?: string;
      contentType: string;
      size: number;
    }[];
    expect(attachments.some((a) => a.contentType === "application/pdf" && a.size > 0 && !!a.filename)).toBe(
      true,
    );
    expect(withPdf?.text).toContain("Just attaching another PDF");

    const jis = docsPath(
      "email",
      "ruby_mail_gem_fixtures",
      "emails",
      "multi_charset",
      "japanese_iso_2022.eml",
    );
    const [jp] = await extractFile(jis);
    expect(jp?.metadata.subject).toBe("まみむめも");
    expect(jp?.text).toBe("すみません。");
    expect(jp?.metadata).not.toHaveProperty("date");
  });

  it("B17: empty text/plain alternative falls back to the HTML part", async () => {
    const [doc] = await extractFile(casePath("B17.eml"));
    const body = doc?.text.replace(/\s+/g, " ") ?? "";
    expect(body).toContain("The database will be offline from 22:00 to 23:00 UTC.");
    expect(body).toContain("Plan accordingly.");
    expect(doc?.text).not.toContain("UTC.Plan");
    expect(doc?.text).not.toContain("<");
    expect(doc?.metadata.subject).toBe("Maintenance window");
  });

  it("B19: quoted-printable windows-1252 body and encoded subject", async () => {
    const [doc] = await extractFile(casePath("B19.eml"));
    expect(doc?.metadata.subject).toBe("Grüße aus München");
    expect(doc?.text).toBe(
      "Hallo Team,\n\nviele Grüße aus München. Der Bericht ist fertig… wir sehen uns am Montag.\n“Danke” für alles!",
    );
    for (const bad of ["=\n", "=FC", "Ã", "\uFFFD"]) expect(doc?.text).not.toContain(bad);
  });

  it("B20: no Subject header and a base64 body", async () => {
    const [doc] = await extractFile(casePath("B20.eml"));
    expect(doc?.text).toBe("Reminder: the office is closed on Monday.\nThe café reopens Tuesday at 08:00.");
    expect(doc?.metadata).not.toHaveProperty("subject");
    expect(doc?.metadata.title).toBe("(no subject)");
    expect(JSON.stringify(doc?.metadata)).not.toMatch(/undefined|null/);
  });
});

describe("pdf", () => {
  it("gives one segment per page that covers the page text", async () => {
    const path = docsPath("pdf", "pdfplumber_test_pdfs", "federal-register-2020-17221.pdf");
    const [doc] = await extractFile(path);
    if (!doc) throw new Error("no document");
    expect(doc.metadata.pageCount).toBe(15);
    expect(doc.metadata.title).toBe("federal-register-2020-17221.pdf");
    expectWellFormedSegments(doc);
    const segments = doc.segments ?? [];
    expect(segments.map((s) => s.metadata.page)).toEqual(Array.from({ length: 15 }, (_, i) => i + 1));
    expect(segments[0]?.start).toBe(0);
    expect(segments.at(-1)?.end).toBe(doc.text.length);
    for (let i = 1; i < segments.length; i++) {
      expect(doc.text.slice(segments[i - 1]?.end, segments[i]?.start)).toBe("\n\n");
    }
    const page1 = doc.text.slice(segments[0]?.start, segments[0]?.end);
    expect(page1).toContain("DEPARTMENT OF TRANSPORTATION");
    // Three-column page: the SUMMARY paragraph is read down its column, not across the page.
    expect(page1).toContain("SUMMARY: The FAA proposes to\nsupersede Airworthiness Directive (AD)");
  });

  it("reads title and author from the document info", async () => {
    const [doc] = await extractFile(docsPath("pdf", "pdf-parse_npm_test_data", "04-valid.pdf"));
    expect(doc?.metadata.title).toBe("sag-39-3-4-0902-21:sag-0");
    expect(doc?.metadata.author).toBe("tubitak");
    expect(doc?.metadata.pageCount).toBe(5);
    expect(doc?.text).toContain("Acute effect of speed exercise on nitric oxide (NO)");
  });

  it("rejects invalid, encrypted, empty and text-less PDFs with a clear reason", async () => {
    const invalid = await extractionError(() =>
      extractFile(docsPath("pdf", "pdf-parse_npm_test_data", "03-invalid.pdf")),
    );
    expect(invalid.message).toMatch(/not a valid PDF: /);
    const encrypted = await extractionError(() =>
      extractFile(docsPath("pdf", "pdfplumber_test_pdfs", "password-example.pdf")),
    );
    expect(encrypted.message).toContain("password-protected");
    const empty = await extractionError(() =>
      extractFile(docsPath("pdf", "pdfplumber_test_pdfs", "empty.pdf")),
    );
    expect(empty.message).toContain("file is empty");
    const noText = await extractionError(() =>
      extractFile(docsPath("pdf", "pdfplumber_test_pdfs", "issue-297-example.pdf")),
    );
    expect(noText.message).toContain("no text layer (image-only PDF?)");
  });

  it("B23: two columns are read column by column, words never glued", async () => {
    const [doc] = await extractFile(casePath("B23.pdf"));
    const text = doc?.text ?? "";
    for (const glued of ["lineRight", "lineleft", "RoadAmount", "Amount9021", "Road9021"]) {
      expect(text).not.toContain(glued);
    }
    for (const run of [
      "Left column first line",
      "left column second line.",
      "Right column first line",
      "right column second line.",
      "12 Harbour Road",
      "Amount",
      "9021 ZX Lakeside",
    ]) {
      expect(text).toContain(run);
    }
    expect(text.indexOf("left column second line.")).toBeLessThan(text.indexOf("Right column first line"));
    expect(text.indexOf("9021 ZX Lakeside")).toBeLessThan(text.indexOf("Amount"));
  });

  it("B24: undoes end-of-line hyphenation and expands ligatures", async () => {
    const [doc] = await extractFile(casePath("B24.pdf"));
    const text = doc?.text ?? "";
    expect(text).toContain("information security team");
    expect(text).toContain("received by staff");
    expect(text).toContain("COVID-19");
    for (const bad of ["infor- mation", "infor mation", "re- ceived", "re ceived"])
      expect(text).not.toContain(bad);
    const ligatures = normalizePdfText(readFileSync(casePath("B24.ligatures.txt"), "utf8"));
    expect(ligatures).toBe("The efficient filter flagged off-site traffic.");
    expect(/[\uFB00-\uFB06]/.test(ligatures)).toBe(false);
  });
});

describe("html", () => {
  it("B25: drops non-content nodes and keeps blocks apart", async () => {
    const [doc] = await extractFile(casePath("B25.html"));
    const text = doc?.text ?? "";
    expect(doc?.metadata.title).toBe("Fleet Status");
    expect(text.startsWith("# Fleet Status\n")).toBe(true);
    for (const leak of ["analyticsId", "document.title", "font-weight", "unrendered template body"]) {
      expect(text).not.toContain(leak);
    }
    for (const glued of [
      "MenuFleet",
      "StatusTrucks",
      "time.Fuel",
      "dropped.Depot",
      "northDepot",
      "rowsecond",
      "Q110",
    ]) {
      expect(text).not.toContain(glued);
    }
    expect(text).toContain("Thanks everyone! Read the FAQ.");
    expect(text).toContain("Salt & pepper <3");
    const lines = text.split("\n");
    for (const line of [
      "Trucks are on time.",
      "Fuel costs dropped.",
      "- Depot north",
      "- Depot south",
      "first row",
    ]) {
      expect(lines).toContain(line);
    }
  });

  it("converts a real DocBook page: title, Markdown headings, no navigation chrome", async () => {
    const path = docsPath("chinese", "debian_reference_zh_cn", "ch01.zh-cn.html");
    const [doc] = await extractFile(path);
    const text = doc?.text ?? "";
    expect(doc?.metadata).toEqual({ path, type: "html", title: "第 1 章 GNU/Linux 教程" });
    expect(text.startsWith("# 第 1 章 GNU/Linux 教程\n")).toBe(true);
    expect(text).toMatch(/^## 1\.1\. 控制台基础$/m);
    expect(text).toMatch(/^### 1\.1\.1\. shell 提示符$/m);
    expect(text).not.toMatch(/<\/?(div|span|a|p|table|td|img)\b/);
    // Literal "<" in the content is decoded once, not left as an entity.
    expect(text).toContain("$ pager </etc/motd");
  });

  it("falls back to tag stripping for pathologically deep nesting, quickly", () => {
    const depth = 50_000;
    const html = `<title>Deep</title>${"<div>".repeat(depth)}a &amp; b&#39;s &#x263A;${"</div>".repeat(depth)}<p>end</p>`;
    const started = Date.now();
    const out = htmlToText(html);
    expect(Date.now() - started).toBeLessThan(5000);
    expect(out.title).toBe("Deep");
    expect(out.text).toContain("a & b's \u263A");
    expect(out.text).toContain("end");
    expect(out.text).not.toContain("Deep");
    expect(out.text).not.toContain("<");
  });

  it("keeps <main> only when present", () => {
    const out = htmlToText(
      "<html><head><title> T </title></head><body><header>Site</header><main><h2>Part</h2><p>a<br>b</p></main><footer>f</footer></body></html>",
    );
    expect(out).toEqual({ title: "T", text: "## Part\n\na\nb" });
  });
});

describe("slack", () => {
  it("extracts one document per channel with resolved names and exact segments", async () => {
    const docs = await extractFile(SLACK_EXPORT);
    expect(docs.map((d) => d.metadata.channel)).toEqual(["enrique", "traveling-sailor"]);
    const enrique = docs[0];
    if (!enrique) throw new Error("no document");
    expect(enrique.uri).toBe(`${SLACK_EXPORT}#enrique`);
    expect(enrique.metadata.path).toBe(SLACK_EXPORT);
    expect(enrique.metadata.title).toBe("#enrique");
    expect(enrique.text.split("\n")[0]).toBe(
      "[2016-01-15 05:55] Hamza Faran: @Harry Potter: Created an issue for a setup.py so that it can be installed to a standard place",
    );
    expect(enrique.text).not.toContain("has joined the channel");
    expect(enrique.text).not.toMatch(/<@U|<http|&gt;|&lt;|&amp;/);
    expect(enrique.text).toContain(
      "Here's an example: https://github.com/hfaran/progressive/blob/master/setup.py",
    );
    expectWellFormedSegments(enrique);
    const segments = enrique.segments ?? [];
    expect(segments.length).toBe(enrique.metadata.messageCount);
    // Segments tile the text: consecutive messages are separated by exactly one newline.
    expect(segments[0]?.start).toBe(0);
    expect(segments.at(-1)?.end).toBe(enrique.text.length);
    for (let i = 1; i < segments.length; i++) {
      expect(enrique.text.slice(segments[i - 1]?.end, segments[i]?.start)).toBe("\n");
    }
    const first = segments[0];
    expect(first?.metadata).toMatchObject({
      user: "Hamza Faran",
      userId: "U0BMQB6JE",
      ts: "1452837352.000006",
      isReply: false,
    });
    // Bot posts carry their attachment text and are marked.
    const bot = segments.find((s) => s.metadata.bot === true);
    expect(bot?.metadata.user).toBe("github");
    expect(enrique.text.slice(bot?.start, bot?.end)).toContain("1 new commit by Anthony Bilinski");
    // A multi-line message keeps its newlines inside its segment.
    const multi = segments.find((s) => s.metadata.ts === "1458211039.000006");
    expect(enrique.text.slice(multi?.start, multi?.end)).toMatch(
      /^\[2016-03-17 10:\d\d\] Hamza Faran: From that, .*\n/,
    );
  });

  it("orders threads contiguously even when replies sit in later day files", async () => {
    const { dir, cleanup } = tempDir();
    try {
      writeExport(dir, {
        "users.json": [
          { id: "U1", name: "alice", real_name: "Alice A" },
          { id: "U2", name: "bob" },
        ],
        "channels.json": [{ id: "C1", name: "general", topic: { value: "Ops talk" } }],
        "general/2016-05-12.json": [
          {
            type: "message",
            user: "U1",
            ts: "1463061780.000100",
            thread_ts: "1463061780.000100",
            text: "Deploy?",
          },
          { type: "message", user: "U2", ts: "1463061900.000200", text: "unrelated <#C1|general> note" },
          {
            type: "message",
            user: "U2",
            ts: "1463062000.000300",
            thread_ts: "1463061780.000100",
            text: "yes\nnow",
          },
        ],
        "general/2016-05-13.json": [
          { type: "message", user: "U2", ts: "1463140000.000400", text: "next day" },
          {
            type: "message",
            user: "U1",
            ts: "1463141000.000500",
            thread_ts: "1463061780.000100",
            text: "done",
          },
        ],
      });
      const [doc] = await extractFile(dir, "slack");
      expect(doc?.text).toBe(
        [
          "[2016-05-12 14:03] Alice A: Deploy?",
          "  ↳ [2016-05-12 14:06] bob: yes\nnow",
          "  ↳ [2016-05-13 12:03] Alice A: done",
          "[2016-05-12 14:05] bob: unrelated #general note",
          "[2016-05-13 11:46] bob: next day",
        ].join("\n"),
      );
      expect(doc?.metadata.topic).toBe("Ops talk");
      const segs = doc?.segments ?? [];
      expect(segs.map((s) => [s.metadata.ts, s.metadata.isReply, s.metadata.threadTs])).toEqual([
        ["1463061780.000100", false, "1463061780.000100"],
        ["1463062000.000300", true, "1463061780.000100"],
        ["1463141000.000500", true, "1463061780.000100"],
        ["1463061900.000200", false, undefined],
        ["1463140000.000400", false, undefined],
      ]);
      expect(doc?.text.slice(segs[1]?.start, segs[1]?.end)).toBe("  ↳ [2016-05-12 14:06] bob: yes\nnow");
      // The whole thread is one contiguous span.
      const thread = segs.filter((s) => s.metadata.threadTs === "1463061780.000100");
      expect(doc?.text.slice(thread[0]?.start, thread.at(-1)?.end)).not.toContain("unrelated");
    } finally {
      cleanup();
    }
  });

  it("B22: entities, mentions, links, bots, messages without text", async () => {
    const { dir, cleanup } = tempDir();
    try {
      writeExport(dir, JSON.parse(readFileSync(casePath("B22.json"), "utf8")));
      const [doc] = await extractFile(dir);
      const text = doc?.text ?? "";
      const segs = doc?.segments ?? [];
      const message = (ts: string) => {
        const s = segs.find((x) => x.metadata.ts === ts);
        return text.slice(s?.start, s?.end);
      };
      const m2 = message("1715335200.000200");
      expect(m2).toContain("Latency < 200ms & errors > 0");
      expect(m2).toContain("@Ana Example");
      expect(m2).toContain("@U09ZZZ");
      expect(m2).toContain("incident 42 (https://status.example.com/incidents/42)");
      expect(m2).toContain("https://example.com/runbook");
      for (const raw of ["&lt;", "&gt;", "&amp;", "<http", "|incident", "<@", "<!"])
        expect(m2).not.toContain(raw);
      expect(segs.find((s) => s.metadata.ts === "1715335300.000300")?.metadata).toMatchObject({
        user: "deploybot",
        ts: "1715335300.000300",
        isReply: false,
        bot: true,
      });
      expect(message("1715335400.000400")).toContain("[file: diagram.png]");
      expect(text.match(/Rollback done/g)?.length).toBe(1);
      expect(text).not.toContain("has joined the channel");
    } finally {
      cleanup();
    }
  });

  it("renders markup without an export", () => {
    const ctx = { users: new Map([["U1", "Ann"]]), channels: new Map([["C9", "dev"]]) };
    expect(renderSlackText("<@U1> see <#C9> and <mailto:a@b.c|a@b.c> &amp;lt;", ctx)).toBe(
      "@Ann see #dev and a@b.c &lt;",
    );
  });
});

describe("discoverSources", () => {
  it("walks folders, honours .gitignore, skips binaries and unknown types", async () => {
    const { dir, cleanup } = tempDir();
    try {
      const write = (rel: string, content: string | Buffer) => {
        mkdirSync(join(dir, rel, ".."), { recursive: true });
        writeFileSync(join(dir, rel), content);
      };
      write(".gitignore", "ignored.md\nbuild/\n");
      write("a.md", "# A\n");
      write("b.txt", "bee\n");
      write("ignored.md", "# secret\n");
      write("build/out.md", "# built\n");
      write("node_modules/pkg/readme.md", "# dep\n");
      write(".git/HEAD", "ref: refs/heads/main\n");
      write(".kl/db.md", "# state\n");
      write("image.png", Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0, 0, 0]));
      write("blob.txt", Buffer.from([0x61, 0x00, 0x62]));
      write("src/main.ts", "export const x = 1;\n");
      write("src/.gitignore", "*.log\n");
      write("src/debug.log", "noise\n");
      write(
        "mail/inbox",
        "From someone@example.com Thu Aug 22 12:36:23 2002\nFrom: a@b.c\nSubject: hi\n\nbody\n",
      );
      write("chat/channels.json", "[]");
      write("chat/users.json", "[]");
      write("chat/general/2020-01-01.json", "[]");

      const { sources, skipped } = await discoverSources([dir]);
      expect(sources).toEqual([
        { path: join(dir, "a.md"), type: "markdown" },
        { path: join(dir, "b.txt"), type: "text" },
        { path: join(dir, "chat"), type: "slack" },
        { path: join(dir, "mail", "inbox"), type: "email" },
        { path: join(dir, "src", "main.ts"), type: "code" },
      ]);
      expect(skipped).toEqual([
        { path: join(dir, "blob.txt"), reason: "binary file" },
        { path: join(dir, "build"), reason: "ignored by .gitignore" },
        { path: join(dir, "ignored.md"), reason: "ignored by .gitignore" },
        { path: join(dir, "image.png"), reason: "unsupported file type (.png)" },
        { path: join(dir, "src", "debug.log"), reason: "ignored by .gitignore" },
      ]);

      // Explicit files and overlapping paths: listed once, sorted.
      const again = await discoverSources([join(dir, "src", "main.ts"), dir, join(dir, "a.md")]);
      expect(again.sources.map((s) => s.path)).toEqual(sources.map((s) => s.path));
    } finally {
      cleanup();
    }
  });

  it("treats a Slack export as one source and PDFs as non-binary", async () => {
    const { sources } = await discoverSources([docsPath("slack", "slack_export_viewer_testarchive")]);
    // The unpacked export folder and the zipped export are one Slack source each; the licence is text.
    expect(sources).toEqual([
      { path: docsPath("slack", "slack_export_viewer_testarchive", "LICENSE"), type: "text" },
      { path: SLACK_EXPORT, type: "slack" },
      { path: docsPath("slack", "slack_export_viewer_testarchive", "testarchive.zip"), type: "slack" },
    ]);
    const pdfs = await discoverSources([docsPath("pdf", "pdf-parse_npm_test_data")]);
    expect(pdfs.sources.map((s) => s.path.split("/").pop())).toEqual([
      "01-valid.pdf",
      "02-valid.pdf",
      "03-invalid.pdf",
      "04-valid.pdf",
      "05-versions-space.pdf",
      "LICENSE.pdf-parse",
    ]);
    // The licence has an unknown extension and text content: sniffed as text.
    expect(pdfs.sources.at(-1)?.type).toBe("text");
    expect(pdfs.skipped).toEqual([]);
  });

  it("throws a KnowledgeLayerError naming a missing path", async () => {
    await expect(discoverSources(["/definitely/not/here"])).rejects.toThrow(KnowledgeLayerError);
    await expect(discoverSources(["/definitely/not/here"])).rejects.toThrow("/definitely/not/here");
  });
});

describe("email detection in .txt files (fresh-user report)", () => {
  it("detects SpamAssassin messages that start with Return-Path or Received headers", async () => {
    const { detectSourceType } = await import("../../src/extract/detect.js");
    const { readdirSync } = await import("node:fs");
    const dir = docsPath("email", "spamassassin_sample", "hard-ham-1");
    const files = readdirSync(dir).filter((f) => f.endsWith(".txt"));
    expect(files.length).toBeGreaterThan(100);
    const types = files.map((f) => detectSourceType(`${dir}/${f}`));
    expect(types.filter((t) => t === "email").length).toBe(files.length);
    // A plain .txt file with prose is still text.
    expect(
      detectSourceType(docsPath("chinese", "debian_reference_zh_cn", "debian-reference.zh-cn.txt")),
    ).toBe("text");
    const tmp = tempDir();
    writeFileSync(join(tmp.dir, "note.txt"), "From: the start of a story\nit was a dark night\n");
    expect(detectSourceType(join(tmp.dir, "note.txt"))).toBe("text");
    tmp.cleanup();
  });
});

describe("text decoding (fresh-user report)", () => {
  it("reads Latin-1 text files instead of producing U+FFFD", async () => {
    const { decodeText } = await import("../../src/extract/util.js");
    expect(decodeText(Uint8Array.from([0x63, 0x61, 0x66, 0xe9, 0x20, 0x61, 0xe0, 0x20, 0xb1, 0x35]))).toBe(
      "café aà ±5",
    );
    expect(decodeText(new TextEncoder().encode("naïve café 机器"))).toBe("naïve café 机器");
    // Mostly UTF-8 with one stray byte stays UTF-8.
    const mixed = new Uint8Array([...new TextEncoder().encode("机器学习 café "), 0xff]);
    expect(decodeText(mixed)).toBe("机器学习 café \uFFFD");
  });
});
