import { writeFileSync } from "node:fs";
import { join } from "node:path";
import JSZip from "jszip";
import { describe, expect, it } from "vitest";
import { extractBytes, extractFile } from "../../src/extract/index.js";
import { extractionError, tempDir } from "../helpers/helpers.js";

const W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main";
const R = "http://schemas.openxmlformats.org/package/2006/relationships";
const REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships";

/** A paragraph; `style` is a paragraph style id (`Heading1`), `list` a numbering id (bulleted list). */
function para(text: string, options: { style?: string; list?: number } = {}): string {
  const props = [
    options.style ? `<w:pStyle w:val="${options.style}"/>` : "",
    options.list ? `<w:numPr><w:ilvl w:val="0"/><w:numId w:val="${options.list}"/></w:numPr>` : "",
  ].join("");
  return `<w:p>${props ? `<w:pPr>${props}</w:pPr>` : ""}<w:r><w:t xml:space="preserve">${text}</w:t></w:r></w:p>`;
}

/** A table of one-paragraph cells. */
function table(rows: string[][]): string {
  const tr = (cells: string[]) => `<w:tr>${cells.map((c) => `<w:tc>${para(c)}</w:tc>`).join("")}</w:tr>`;
  return `<w:tbl>${rows.map(tr).join("")}</w:tbl>`;
}

const STYLES = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:styles xmlns:w="${W}">
  <w:style w:type="paragraph" w:default="1" w:styleId="Normal"><w:name w:val="Normal"/></w:style>
  <w:style w:type="paragraph" w:styleId="Heading1"><w:name w:val="heading 1"/></w:style>
  <w:style w:type="paragraph" w:styleId="Heading2"><w:name w:val="heading 2"/></w:style>
  <w:style w:type="paragraph" w:styleId="Title"><w:name w:val="Title"/></w:style>
</w:styles>`;

const NUMBERING = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:numbering xmlns:w="${W}">
  <w:abstractNum w:abstractNumId="0"><w:lvl w:ilvl="0"><w:numFmt w:val="bullet"/><w:lvlText w:val="•"/></w:lvl></w:abstractNum>
  <w:abstractNum w:abstractNumId="1"><w:lvl w:ilvl="0"><w:start w:val="1"/><w:numFmt w:val="decimal"/><w:lvlText w:val="%1."/></w:lvl></w:abstractNum>
  <w:num w:numId="1"><w:abstractNumId w:val="0"/></w:num>
  <w:num w:numId="2"><w:abstractNumId w:val="1"/></w:num>
</w:numbering>`;

/** docProps/core.xml with the given title and creator. */
function coreXml(title: string, creator: string): string {
  return `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties"
  xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:dcterms="http://purl.org/dc/terms/"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
  <dc:title>${title}</dc:title><dc:creator>${creator}</dc:creator>
  <dcterms:created xsi:type="dcterms:W3CDTF">2024-03-01T10:00:00Z</dcterms:created>
</cp:coreProperties>`;
}

/**
 * Builds a real .docx (Office Open XML package) around `body` (the children of
 * `<w:body>`), with styles and numbering parts and, when given, docProps/core.xml.
 */
async function buildDocx(body: string, core?: string): Promise<Buffer> {
  const zip = new JSZip();
  zip.file(
    "[Content_Types].xml",
    `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">
  <Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>
  <Default Extension="xml" ContentType="application/xml"/>
  <Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>
  <Override PartName="/word/styles.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.styles+xml"/>
  <Override PartName="/word/numbering.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.numbering+xml"/>
  <Override PartName="/docProps/core.xml" ContentType="application/vnd.openxmlformats-package.core-properties+xml"/>
</Types>`,
  );
  zip.file(
    "_rels/.rels",
    `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="${R}">
  <Relationship Id="rId1" Type="${REL}/officeDocument" Target="word/document.xml"/>
  <Relationship Id="rId2" Type="http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties" Target="docProps/core.xml"/>
</Relationships>`,
  );
  zip.file(
    "word/_rels/document.xml.rels",
    `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="${R}">
  <Relationship Id="rId1" Type="${REL}/styles" Target="styles.xml"/>
  <Relationship Id="rId2" Type="${REL}/numbering" Target="numbering.xml"/>
</Relationships>`,
  );
  zip.file(
    "word/document.xml",
    `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:document xmlns:w="${W}" xmlns:r="${REL}"><w:body>${body}<w:sectPr/></w:body></w:document>`,
  );
  zip.file("word/styles.xml", STYLES);
  zip.file("word/numbering.xml", NUMBERING);
  if (core !== undefined) zip.file("docProps/core.xml", core);
  return zip.generateAsync({ type: "nodebuffer", compression: "DEFLATE" });
}

const REPORT_BODY = [
  para("Quarterly Report", { style: "Heading1" }),
  para("Revenue grew in every region this quarter."),
  para("Regions", { style: "Heading2" }),
  table([
    ["Region", "Amount"],
    ["North", "9021"],
    ["South Harbour", "12"],
  ]),
  para("Next steps", { style: "Heading2" }),
  para("Hire two analysts", { list: 1 }),
  para("Open the Lakeside office", { list: 1 }),
  para("中文摘要", { style: "Heading2" }),
  para("机器学习改变了我们的工作方式。"),
].join("");

const REPORT_TEXT = [
  "# Quarterly Report",
  "",
  "Revenue grew in every region this quarter.",
  "",
  "## Regions",
  "",
  "Region | Amount",
  "--- | ---",
  "North | 9021",
  "South Harbour | 12",
  "",
  "## Next steps",
  "",
  "- Hire two analysts",
  "- Open the Lakeside office",
  "",
  "## 中文摘要",
  "",
  "机器学习改变了我们的工作方式。",
].join("\n");

describe("docx", () => {
  it("extracts headings as Markdown, tables row by row, lists and Chinese text (extractFile)", async () => {
    const { dir, cleanup } = tempDir();
    try {
      const path = join(dir, "report.docx");
      writeFileSync(path, await buildDocx(REPORT_BODY, coreXml("Q3 Report &amp; Outlook", "Ann Smith")));
      const [doc, ...rest] = await extractFile(path);
      expect(rest).toEqual([]);
      expect(doc?.uri).toBe(path);
      expect(doc?.text).toBe(REPORT_TEXT);
      expect(doc?.metadata).toEqual({
        path,
        type: "docx",
        title: "Q3 Report & Outlook",
        author: "Ann Smith",
        wordCount: expect.any(Number),
      });
      // 26 English words and numbers, plus the words of the two Chinese lines.
      expect(doc?.metadata.wordCount).toBeGreaterThan(26);
      expect(doc?.warnings).toBeUndefined();
      expect(JSON.stringify(doc?.metadata)).not.toMatch(/undefined|null/);
    } finally {
      cleanup();
    }
  });

  it("extracts in-memory bytes the same way (extractBytes)", async () => {
    const bytes = await buildDocx(REPORT_BODY, coreXml("Q3 Report", "Ann Smith"));
    const [doc] = await extractBytes("mail.eml#attachment/1/report.docx", new Uint8Array(bytes));
    expect(doc?.uri).toBe("mail.eml#attachment/1/report.docx");
    expect(doc?.text).toBe(REPORT_TEXT);
    expect(doc?.metadata.type).toBe("docx");
    expect(doc?.metadata.path).toBe("mail.eml#attachment/1/report.docx");
    expect(doc?.metadata.title).toBe("Q3 Report");
  });

  it("takes the title from the first heading without core properties, and counts words", async () => {
    const body = [
      para("Release Plan", { style: "Title" }),
      para("Milestones", { style: "Heading1" }),
      para("Freeze the API", { list: 2 }),
      para("Ship the beta", { list: 2 }),
    ].join("");
    const [doc] = await extractBytes("plan.docx", await buildDocx(body));
    expect(doc?.text).toBe("# Release Plan\n\n# Milestones\n\n1. Freeze the API\n2. Ship the beta");
    expect(doc?.metadata).toEqual({ path: "plan.docx", type: "docx", title: "Release Plan", wordCount: 9 });
  });

  it("falls back to the file name when there is neither a core title nor a heading", async () => {
    const [doc] = await extractBytes("notes.docx", await buildDocx(para("Just a line of text.")));
    expect(doc?.text).toBe("Just a line of text.");
    expect(doc?.metadata.title).toBe("notes.docx");
    expect(doc?.metadata).not.toHaveProperty("author");
  });

  it("reports content the converter dropped as a warning", async () => {
    const body = `${para("Kept text")}<w:p><w:r><w:t>More</w:t></w:r><w:r><w:sym w:font="NoSuchFont" w:char="0041"/></w:r></w:p>`;
    const [doc] = await extractBytes("sym.docx", await buildDocx(body));
    expect(doc?.text).toBe("Kept text\n\nMore");
    expect(doc?.warnings).toEqual([
      "DOCX content dropped: A w:sym element with an unsupported character was ignored: char 0041 in font NoSuchFont",
    ]);
  });

  it("rejects encrypted/legacy, non-zip, non-Word and empty documents with a clear reason", async () => {
    const ole = Buffer.concat([
      Buffer.from([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1]),
      Buffer.alloc(504),
    ]);
    const encrypted = await extractionError(() => extractBytes("secret.docx", ole));
    expect(encrypted.message).toBe("secret.docx: password-protected or legacy .doc (OLE) file");

    const notZip = await extractionError(() => extractBytes("fake.docx", Buffer.from("just some text")));
    expect(notZip.reason).toMatch(/^not a valid DOCX: not a ZIP archive/);

    const truncated = (await buildDocx(para("x"))).subarray(0, 200);
    const corrupt = await extractionError(() => extractBytes("cut.docx", truncated));
    expect(corrupt.reason).toMatch(/^not a valid DOCX: /);

    const other = new JSZip();
    other.file("content.xml", "<office:document-content/>");
    const odt = await other.generateAsync({ type: "nodebuffer" });
    const notWord = await extractionError(() => extractBytes("renamed.docx", odt));
    expect(notWord.reason).toBe("not a valid DOCX: a ZIP archive without word/document.xml");

    const empty = await extractionError(async () =>
      extractBytes("empty.docx", await buildDocx("<w:p/>", coreXml("Empty", "Ann"))),
    );
    expect(empty.reason).toBe("no text content");

    const zeroBytes = await extractionError(() => extractBytes("zero.docx", new Uint8Array(0)));
    expect(zeroBytes.reason).toBe("file is empty");
  });

  it("reports malformed XML inside the package on one line naming the part", async () => {
    // Mismatched end tags in the body.
    const broken = await buildDocx("<w:p><w:r><w:t>Hi</w:r></w:p>");
    const err = await extractionError(() => extractBytes("broken.docx", broken));
    expect(err.reason).toMatch(/^not a valid DOCX: malformed XML in word\/document\.xml: \S[^\n]*$/);
    expect(err.reason).not.toMatch(/xmldom|undefined|@#/);
    // A broken part other than the body is named too.
    const zip = await JSZip.loadAsync(await buildDocx(para("Fine")));
    zip.file("word/styles.xml", `<w:styles xmlns:w="${W}"><w:style w:styleId=Normal/></w:styles>`);
    const styles = await zip.generateAsync({ type: "nodebuffer", compression: "DEFLATE" });
    const stylesErr = await extractionError(() => extractBytes("styles.docx", styles));
    expect(stylesErr.reason).toMatch(/^not a valid DOCX: malformed XML in word\/styles\.xml: \S[^\n]*$/);
  });

  it("refuses a package whose unpacked size is over maxUnpackedBytes (zip bomb)", async () => {
    const bomb = await buildDocx(para("a".repeat(200_000)));
    expect(bomb.length).toBeLessThan(20_000);
    const err = await extractionError(() =>
      extractBytes("bomb.docx", bomb, undefined, { limits: { maxUnpackedBytes: 100_000 } }),
    );
    expect(err.reason).toMatch(/^unpacked DOCX too large: .* \(limit maxUnpackedBytes = 97\.7 KiB\)$/);
    const [doc] = await extractBytes("bomb.docx", bomb, undefined, {
      limits: { maxUnpackedBytes: 1_000_000 },
    });
    expect(doc?.text).toBe("a".repeat(200_000));
  });

  it("refuses a package whose entries lie about their unpacked size", async () => {
    const zip = await buildDocx(para("b".repeat(200_000)));
    // Declare 1 KiB for word/document.xml in its local and central directory headers.
    const name = Buffer.from("word/document.xml");
    for (const [signature, sizeAt, nameAt] of [
      [0x04034b50, 22, 30],
      [0x02014b50, 24, 46],
    ] as const) {
      for (
        let at = zip.indexOf(Buffer.from([0x50, 0x4b]));
        at >= 0;
        at = zip.indexOf(Buffer.from([0x50, 0x4b]), at + 1)
      ) {
        if (zip.readUInt32LE(at) !== signature) continue;
        if (!zip.subarray(at + nameAt, at + nameAt + name.length).equals(name)) continue;
        zip.writeUInt32LE(1024, at + sizeAt);
      }
    }
    const err = await extractionError(() =>
      extractBytes("liar.docx", zip, undefined, { limits: { maxUnpackedBytes: 100_000 } }),
    );
    expect(err.reason).toMatch(/^not a valid DOCX: .*too many bytes/);
  });

  it("reads a .docx file from disk through extractFile and rejects a renamed binary .doc", async () => {
    const { dir, cleanup } = tempDir();
    try {
      const legacy = join(dir, "old.docx");
      writeFileSync(legacy, Buffer.concat([Buffer.from("d0cf11e0a1b11ae1", "hex"), Buffer.alloc(1024)]));
      const err = await extractionError(() => extractFile(legacy));
      expect(err.path).toBe(legacy);
      expect(err.reason).toBe("password-protected or legacy .doc (OLE) file");
    } finally {
      cleanup();
    }
  });
});
