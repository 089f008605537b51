import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { extractBytes, extractFile, htmlToText, parseFrontMatter } from "../../src/extract/index.js";
import { docsPath, extractionError, tempDir } from "../helpers/helpers.js";
import { serializePdf } from "../helpers/pdf-fixtures.js";

/** A page entry of {@link makePdf} whose page object is broken (a number instead of a dictionary). */
const BROKEN = Symbol("broken page");

/**
 * Builds a small valid PDF: one Letter page per entry of `pages`, each showing its
 * string in Helvetica 12 pt, or nothing (no text layer) for `null`, or a page
 * tree entry that is not a page for {@link BROKEN}; `info` becomes the document
 * information dictionary.
 */
function makePdf(pages: (string | null | typeof BROKEN)[], info: Record<string, string> = {}): Buffer {
  const objects: string[] = [];
  const add = (body: string): number => objects.push(body);
  const catalog = add("");
  const tree = add("");
  const font = add("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>");
  const kids: number[] = [];
  for (const text of pages) {
    if (text === BROKEN) {
      kids.push(add("42"));
      continue;
    }
    const stream = text === null ? "" : `BT /F1 12 Tf 72 720 Td (${text}) Tj ET`;
    const contents = add(`<< /Length ${stream.length} >>\nstream\n${stream}\nendstream`);
    kids.push(
      add(
        `<< /Type /Page /Parent ${tree} 0 R /MediaBox [0 0 612 792] ` +
          `/Resources << /Font << /F1 ${font} 0 R >> >> /Contents ${contents} 0 R >>`,
      ),
    );
  }
  objects[catalog - 1] = `<< /Type /Catalog /Pages ${tree} 0 R >>`;
  objects[tree - 1] =
    `<< /Type /Pages /Kids [${kids.map((k) => `${k} 0 R`).join(" ")}] /Count ${kids.length} >>`;
  const infoRef = add(
    `<< ${Object.entries(info)
      .map(([k, v]) => `/${k} (${v})`)
      .join(" ")} >>`,
  );
  return serializePdf(objects, catalog, infoRef);
}

describe("pdf limits, warnings and metadata", () => {
  it("refuses a real PDF with more pages than maxPages before reading any page", async () => {
    const path = docsPath("pdf", "pdf-parse_npm_test_data", "04-valid.pdf");
    const err = await extractionError(() => extractFile(path, undefined, { limits: { maxPages: 1 } }));
    expect(err.path).toBe(path);
    expect(err.reason).toBe("too many pages: 5 (limit maxPages = 1)");
    const [doc] = await extractFile(path, undefined, { limits: { maxPages: 5 } });
    expect(doc?.metadata.pageCount).toBe(5);
  });

  it("names the pages without a text layer compactly and keeps the others", async () => {
    const pdf = makePdf(["First page text.", null, null, null, "Fifth page text.", null], {
      Title: "Fleet Report",
      Author: "Ann Smith",
    });
    const [doc] = await extractBytes("fleet.pdf", pdf);
    expect(doc?.text).toBe("First page text.\n\nFifth page text.");
    expect(doc?.segments?.map((s) => s.metadata.page)).toEqual([1, 5]);
    expect(doc?.warnings).toEqual(["pages 2–4, 6 have no text layer (scanned images?)"]);
    expect(doc?.metadata).toEqual({
      path: "fleet.pdf",
      type: "pdf",
      title: "Fleet Report",
      author: "Ann Smith",
      pageCount: 6,
    });
    const tooLong = await extractionError(() =>
      extractBytes("fleet.pdf", pdf, undefined, { limits: { maxPages: 3 } }),
    );
    expect(tooLong.reason).toBe("too many pages: 6 (limit maxPages = 3)");
  });

  it("turns a page that cannot be read into a warning when other pages can be read", async () => {
    const [doc] = await extractBytes("partly.pdf", makePdf(["Readable page.", BROKEN]));
    expect(doc?.text).toBe("Readable page.");
    expect(doc?.segments?.map((s) => s.metadata.page)).toEqual([1]);
    expect(doc?.warnings).toHaveLength(1);
    expect(doc?.warnings?.[0]).toMatch(/^text of page 2 could not be extracted: \S/);
    const err = await extractionError(() => extractBytes("broken.pdf", makePdf([BROKEN])));
    expect(err.reason).toMatch(/^(cannot read PDF|not a valid PDF): /);
  });

  it("warns about the one empty page of a real 65-page PDF", async () => {
    const [doc] = await extractFile(docsPath("pdf", "pdfplumber_test_pdfs", "chelsea_pdta.pdf"));
    expect(doc?.metadata.pageCount).toBe(65);
    expect(doc?.segments).toHaveLength(64);
    expect(doc?.warnings).toEqual(["page 4 has no text layer (scanned images?)"]);
    expect(doc?.metadata.title).toBe("Plan stratégique du sentier récréatif régional de Prescott et Russell");
    expect(doc?.metadata.author).toBe("office-2007");
  });

  it("skips file-name-like titles and tidies authoring-file titles", async () => {
    const [job] = await extractFile(docsPath("pdf", "pdfplumber_test_pdfs", "scotus-transcript-p1.pdf"));
    expect(job?.metadata.title).toBe("scotus-transcript-p1.pdf"); // Title field: "10811.exe"
    expect(job?.metadata.author).toBe("Supreme");
    const [agenda] = await extractFile(docsPath("pdf", "pdfplumber_test_pdfs", "cupertino_usd_4-6-16.pdf"));
    expect(agenda?.metadata.title).toBe("SPECIAL BOARD AGENDA 040616"); // Title field: "… 040616.doc"
    const [word] = await extractBytes(
      "w.pdf",
      makePdf(["x"], { Title: "Microsoft Word - Minutes 2024.docx" }),
    );
    expect(word?.metadata.title).toBe("Minutes 2024");
    const [untitled] = await extractBytes("u.pdf", makePdf(["x"], { Title: "Untitled" }));
    expect(untitled?.metadata.title).toBe("u.pdf");
    expect(untitled?.warnings).toBeUndefined();
  });
});

describe("html metadata", () => {
  const page = `<!doctype html>
<html lang="en-GB">
<head>
  <title>Depot Guide</title>
  <meta name="description" content="Opening hours &amp; contacts of every depot.">
  <meta property="og:url" content="https://fleet.example.com/guide/depots?ref=og">
  <link rel="canonical" href="https://fleet.example.com/guide/depots">
  <style>.x { font-weight: bold }</style>
  <script>window.analyticsId = "<link rel='canonical' href='wrong'>";</script>
</head>
<body>
  <nav><a href="/">Home</a> <a href="/guide">Guide</a></nav>
  <h1>Depot Guide</h1>
  <p>The north depot opens at 06:00.</p>
  <h2>Contacts</h2>
  <p>Call the duty manager.</p>
  <template><p>unrendered template body</p></template>
  <script>document.title = "x";</script>
</body>
</html>`;

  it("reads canonical URL, description and language (extractBytes)", async () => {
    const [doc] = await extractBytes("depots.html", Buffer.from(page));
    expect(doc?.metadata).toEqual({
      path: "depots.html",
      type: "html",
      title: "Depot Guide",
      canonicalUrl: "https://fleet.example.com/guide/depots",
      description: "Opening hours & contacts of every depot.",
      lang: "en-GB",
    });
    expect(doc?.text).toBe(
      "# Depot Guide\n\nThe north depot opens at 06:00.\n\n## Contacts\n\nCall the duty manager.",
    );
  });

  it("falls back to og:url, resolves a relative canonical link and leaves absent fields out", () => {
    const og = htmlToText(
      '<html><head><meta property="og:url" content="https://a.example/x"></head><body><p>t</p></body></html>',
    );
    expect(og).toEqual({ text: "t", canonicalUrl: "https://a.example/x" });
    const relative = htmlToText(
      '<head><meta property="og:url" content="https://a.example/docs/x?utm=1">' +
        '<link href="/docs/x" rel="Canonical"></head><p>t</p>',
    );
    expect(relative.canonicalUrl).toBe("https://a.example/docs/x");
    expect(htmlToText('<html xml:lang="zh-CN"><body><h2>标题</h2></body></html>')).toEqual({
      text: "## 标题",
      lang: "zh-CN",
    });
  });

  it("never leaks script, style, template or nav content, also when tags are stripped", () => {
    const deep = `<html lang="fr"><head><title>Deep</title><style>p{}</style></head><body><nav>Menu</nav>${"<div>".repeat(1500)}<h2>Part</h2><script>x()</script><p>Body</p>${"</div>".repeat(1500)}</body></html>`;
    const out = htmlToText(deep);
    expect(out).toEqual({ text: "## Part\n\nBody", title: "Deep", lang: "fr" });
  });
});

describe("markdown front matter", () => {
  it("parses lists, nested values and dates and lifts the common keys", async () => {
    const content = [
      "---",
      "title: Release notes",
      "tags: [release, fleet]",
      "authors:",
      "  - Ann Smith",
      "  - Bo Chen",
      "date: 2024-03-01",
      "description: What changed in 2.0",
      "params:",
      "  draft: false",
      "  weight: 10",
      "---",
      "",
      "# 2.0",
      "",
      "Changes.",
      "",
    ].join("\n");
    const [doc] = await extractBytes("notes.md", Buffer.from(content));
    expect(doc?.text).toBe(content);
    expect(doc?.warnings).toBeUndefined();
    expect(doc?.metadata).toEqual({
      path: "notes.md",
      type: "markdown",
      title: "Release notes",
      author: "Ann Smith, Bo Chen",
      tags: ["release", "fleet"],
      description: "What changed in 2.0",
      date: "2024-03-01",
      frontMatter: {
        title: "Release notes",
        tags: ["release", "fleet"],
        authors: ["Ann Smith", "Bo Chen"],
        date: "2024-03-01",
        description: "What changed in 2.0",
        params: { draft: false, weight: 10 },
      },
    });
    expect(JSON.parse(JSON.stringify(doc?.metadata))).toEqual(doc?.metadata);
  });

  it("keeps the text, reads the plain key: value lines and warns when the YAML is malformed", async () => {
    const content = "---\ntitle: [unclosed\nauthor: Ann\n---\n# Heading\n\nBody.\n";
    const [doc] = await extractBytes("bad.md", Buffer.from(content));
    expect(doc?.text).toBe(content);
    // Its top-level `key: value` lines are still read, as plain strings.
    expect(doc?.metadata).toEqual({
      path: "bad.md",
      type: "markdown",
      title: "[unclosed",
      author: "Ann",
      frontMatter: { title: "[unclosed", author: "Ann" },
    });
    expect(doc?.warnings).toHaveLength(1);
    expect(doc?.warnings?.[0]).toMatch(/^front matter is not valid YAML \(.*\): .+ \(line 3\)$/);
  });

  it("reads simple TOML front matter and reports the lines it skips", async () => {
    const content =
      '+++\ntitle = "Hugo page"\ntags = ["a", "b"]\ndraft = true\nmenu = { main = 1 }\n+++\nText.\n';
    const [doc] = await extractBytes("page.md", Buffer.from(content));
    expect(doc?.metadata.title).toBe("Hugo page");
    expect(doc?.metadata.tags).toEqual(["a", "b"]);
    expect(doc?.metadata.frontMatter).toEqual({ title: "Hugo page", tags: ["a", "b"], draft: true });
    expect(doc?.warnings).toEqual(["TOML front matter was only partly read: line 5 not understood"]);
  });

  it("parseFrontMatter: data, flat fields, end offset; a rule around prose is not front matter", () => {
    const text = "---\ntitle: T\nversion: 2\ntags:\n  - a\n---\nbody";
    expect(parseFrontMatter(text)).toEqual({
      format: "yaml",
      data: { title: "T", version: 2, tags: ["a"] },
      fields: { title: "T", version: "2" },
      end: text.indexOf("body"),
    });
    expect(parseFrontMatter("---\nJust a paragraph between rules.\n---\n")).toBeUndefined();
    expect(parseFrontMatter("# No front matter\n")).toBeUndefined();
  });

  it("caps the nesting of front matter values (a self-referencing alias) and warns", async () => {
    const depth = (v: unknown): number =>
      v !== null && typeof v === "object" ? 1 + Math.max(0, ...Object.values(v).map(depth)) : 0;
    for (const alias of ["loop: &x [*x]", "loop: &x { again: *x }"]) {
      const content = `---\ntitle: Loop\n${alias}\ntags: [a]\n---\n# Loop\n`;
      const [doc] = await extractBytes("loop.md", Buffer.from(content));
      const fm = doc?.metadata.frontMatter as Record<string, unknown>;
      expect(fm.title).toBe("Loop");
      expect(fm.tags).toEqual(["a"]);
      // The value itself plus at most 19 levels inside it: 20 levels in all.
      expect(depth(fm.loop)).toBe(20);
      expect(JSON.stringify(doc?.metadata).length).toBeLessThan(500);
      expect(doc?.warnings).toEqual([
        "front matter: values nested deeper than 20 levels were dropped (a self-referencing alias?)",
      ]);
    }
    // Ordinary nesting is untouched and warns about nothing.
    const nested = parseFrontMatter("---\na:\n  b:\n    c: [1, [2]]\n---\n");
    expect(nested?.data).toEqual({ a: { b: { c: [1, [2]] } } });
    expect(nested?.truncated).toBeUndefined();
  });

  it("extracts a front-matter file from disk unchanged", async () => {
    const { dir, cleanup } = tempDir();
    try {
      const path = join(dir, "post.md");
      writeFileSync(path, "---\ntitle: Post\ntags: one, two\n---\nHello\n");
      const [doc] = await extractFile(path);
      expect(doc?.metadata).toEqual({
        path,
        type: "markdown",
        title: "Post",
        tags: ["one", "two"],
        frontMatter: { title: "Post", tags: "one, two" },
      });
    } finally {
      cleanup();
    }
  });
});

describe("front matter that is not valid YAML (real file)", () => {
  it("still lifts the description of a hand-written skill file whose value holds ': '", async () => {
    const file = docsPath("code", "colinhacks+zod", ".claude", "skills", "security-advisory", "SKILL.md");
    const [doc] = await extractFile(file);
    expect(doc?.metadata.frontMatter).toMatchObject({ name: "security-advisory" });
    expect(String(doc?.metadata.description)).toMatch(/^Triage a draft security advisory in colinhacks\/zod/);
    expect(doc?.warnings?.[0]).toMatch(/^front matter is not valid YAML/);
  });
});

describe("PDF table-of-contents dot leaders", () => {
  it("collapse to an ellipsis; ordinary dots and ellipses stay", async () => {
    const { normalizePdfText } = await import("../../src/extract/index.js");
    expect(normalizePdfText("5.5.1 找出最佳 MTU . . . . . . . . 97")).toBe("5.5.1 找出最佳 MTU … 97");
    expect(normalizePdfText("Intro........12\nwait... ok a.b.c.d")).toBe("Intro … 12\nwait... ok a.b.c.d");
  });

  it("leave no leader runs in the Debian reference's contents pages", async () => {
    const [doc] = await extractFile(
      docsPath("chinese", "debian_reference_zh_cn", "debian-reference.zh-cn.pdf"),
    );
    expect(doc?.text).not.toMatch(/(\. ){4,}/);
    expect(doc?.text).toContain("5.5.1 找出最佳 MTU … 97");
    expect(doc?.metadata).toMatchObject({
      title: "Debian 参考手册",
      author: "Osamu Aoki (青木 修)",
      pageCount: 251,
    });
  });
});
