/**
 * Extraction hygiene: PDF line-end hyphens are dropped only where a typesetter
 * put them (`R-⏎help` stays `R-help`), and terminal escape sequences and other
 * control characters never reach the stored text, its metadata or JSON output,
 * whatever the format, with segment offsets still covering the same text.
 * All inputs are made here.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { cleanDocuments, extractBytes, extractFile, normalizePdfText } from "../../src/extract/index.js";
import { dehyphenate } from "../../src/extract/pdf.js";
import { stripControlSequences } from "../../src/extract/util.js";
import type { ExtractedDocument } from "../../src/types.js";
import { tempDir } from "../helpers/helpers.js";
import { serializePdf } from "../helpers/pdf-fixtures.js";

const tmp = tempDir("kl-hygiene-");
afterAll(() => tmp.cleanup());

/**
 * A one-page PDF (Helvetica 12 pt) showing each string of `lines` on its own
 * line, 14 pt apart, so the extractor sees real line ends.
 */
function pdfWithLines(lines: string[]): Buffer {
  const pdfString = (s: string) => s.replace(/[\\()]/g, (c) => `\\${c}`);
  const stream = `BT /F1 12 Tf 14 TL 72 720 Td ${lines.map((l) => `(${pdfString(l)}) Tj T*`).join(" ")} ET`;
  const objects = [
    "<< /Type /Catalog /Pages 2 0 R >>",
    "<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
    "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents 5 0 R >>",
    `<< /Length ${stream.length} >>\nstream\n${stream}\nendstream`,
  ];
  return serializePdf(objects, 1);
}

describe("PDF de-hyphenation keeps real hyphens", () => {
  it("drops a typesetter's hyphen between lower-case word parts", () => {
    expect(dehyphenate("the infor-\nmation is")).toBe("the information is");
    expect(dehyphenate("Infor-\nmation first")).toBe("Information first");
    expect(dehyphenate("Ökono-\nmie")).toBe("Ökonomie");
  });

  it("keeps the hyphen after a capital, a digit or a one-letter prefix, and before a capital or digit", () => {
    expect(dehyphenate("ask on R-\nhelp today")).toBe("ask on R-help today");
    expect(dehyphenate("the COVID-\n19 wave")).toBe("the COVID-19 wave");
    expect(dehyphenate("a B-\ntree index")).toBe("a B-tree index");
    expect(dehyphenate("send an e-\nmail now")).toBe("send an e-mail now");
    expect(dehyphenate("the x-\naxis")).toBe("the x-axis");
    expect(dehyphenate("pre-\nCOVID times")).toBe("pre-COVID times");
    expect(dehyphenate("the mid-\n1990s")).toBe("the mid-1990s");
    expect(dehyphenate("a 3-\nway merge")).toBe("a 3-way merge");
  });

  it("keeps a compound's hyphen when the page writes the compound within a line, or the line already hyphenates it", () => {
    expect(dehyphenate("a well-\nknown fact; well-known indeed")).toBe(
      "a well-known fact; well-known indeed",
    );
    expect(dehyphenate("state-of-the-\nart methods")).toBe("state-of-the-art methods");
    // Without evidence the compound loses its hyphen (no dictionary): documented limit.
    expect(dehyphenate("a well-\nknown fact")).toBe("a wellknown fact");
  });

  it("leaves a dash or bullet at a line end alone", () => {
    expect(dehyphenate("first item -\nsecond item")).toBe("first item -\nsecond item");
    expect(dehyphenate("ends with -\n- a bullet")).toBe("ends with -\n- a bullet");
  });

  it("applies in normalizePdfText and in a real PDF's text", async () => {
    expect(normalizePdfText("Ask on the R-\nhelp list for infor-\nmation.")).toBe(
      "Ask on the R-help list for information.",
    );
    const [doc] = await extractBytes(
      "lines.pdf",
      pdfWithLines(["Questions go to the R-", "help mailing list; the infor-", "mation is archived."]),
    );
    expect(doc?.text).toBe("Questions go to the R-help mailing list; the information is archived.");
  });
});

describe("control characters and terminal escape sequences", () => {
  const ESC = "\u001b";

  it("stripControlSequences removes CSI, OSC, other escapes and C0/C1 controls but keeps tab, newline, CR and form feed", () => {
    const input =
      `${ESC}[1;31mred${ESC}[0m ${ESC}]8;;https://x.test${ESC}\\link${ESC}]8;;${ESC}\\ ${ESC}]0;title\u0007` +
      `bell\u0007 nul\u0000 del\u007f c1\u0085\u009b2K ${ESC}(B${ESC}7done\ttab\r\nline\fpage\u000bvt`;
    const { text, removed } = stripControlSequences(input);
    expect(text).toBe("red link bell nul del c1 done\ttab\r\nline\fpage\nvt");
    expect(removed).toBe(input.length - text.length);
    // An unterminated OSC loses its introducer; the rest is text.
    expect(stripControlSequences(`a${ESC}]unfinished\nb`).text).toBe("a" + "unfinished\nb");
    // Nothing to strip: the same string back.
    expect(stripControlSequences("plain — text ✓").text).toBe("plain — text ✓");
  });

  it("maps offsets of the original text onto the stripped text", () => {
    const input = `ab${ESC}[31mcd${ESC}[0mef`;
    const { text, mapOffset } = stripControlSequences(input);
    expect(text).toBe("abcdef");
    expect(input.indexOf("c")).toBe(7);
    expect(mapOffset(7)).toBe(2);
    expect(mapOffset(3)).toBe(2); // inside the first sequence: where it was
    expect(mapOffset(input.indexOf("e"))).toBe(4);
    expect(mapOffset(input.length)).toBe(6);
  });

  it("cleanDocuments remaps segments so each still covers its own text, and cleans metadata and warnings", () => {
    const seg1 = `${ESC}[1mHeader${ESC}[0m`;
    const seg2 = `Body ${ESC}[32mgreen${ESC}[0m text`;
    const raw: ExtractedDocument = {
      uri: "/x/log",
      text: `${seg1}\n\n${seg2}`,
      metadata: { path: "/x/log", type: "text", title: `T${ESC}[7mitle`, to: [`a${ESC}[1m@b.c`] },
      segments: [
        { start: 0, end: seg1.length, metadata: { part: "header" } },
        { start: seg1.length + 2, end: seg1.length + 2 + seg2.length, metadata: { part: "body" } },
      ],
      warnings: [`odd ${ESC}[5mblink`],
    };
    const [doc] = cleanDocuments("/x/log", [raw]);
    expect(doc?.text).toBe("Header\n\nBody green text");
    expect(doc?.segments?.map((s) => doc.text.slice(s.start, s.end))).toEqual(["Header", "Body green text"]);
    expect(doc?.metadata).toEqual({ path: "/x/log", type: "text", title: "Title", to: ["a@b.c"] });
    expect(doc?.warnings).toEqual(["odd blink"]);
    expect(() =>
      cleanDocuments("/x/only-escapes", [{ ...raw, text: `${ESC}[0m${ESC}[2J`, segments: [] }]),
    ).toThrow("file is empty");
  });

  it("no extractor lets an escape sequence through: text, Markdown, HTML, code, email, Slack", async () => {
    const colour = `${ESC}[31m`;
    const reset = `${ESC}[0m`;
    const inputs: [string, string][] = [
      ["build.log", `${colour}ERROR${reset} disk full\n`],
      ["notes.md", `# Ti${colour}tle${reset}\n\nSome ${colour}red${reset} words.\n`],
      [
        "page.html",
        `<html><title>Pa${colour}ge</title><body><p>Hello ${colour}there${reset}</p></body></html>`,
      ],
      ["main.py", `print("${colour}hi${reset}")\n`],
      [
        "mail.eml",
        `From: Ann <ann@example.com>\nTo: bob@example.com\nSubject: Re${colour}port\nDate: Tue, 1 Oct 2024 10:00:00 +0000\nMessage-ID: <1@example.com>\n\nThe ${colour}build${reset} failed.\n`,
      ],
      [
        "history.json",
        JSON.stringify({
          ok: true,
          messages: [
            { type: "message", user: "U1", text: `deploy ${colour}done${reset}`, ts: "1700000000.000100" },
          ],
        }),
      ],
    ];
    for (const [name, content] of inputs) {
      const path = join(tmp.dir, name);
      writeFileSync(path, content);
      const docs = await extractFile(path);
      expect(docs.length, name).toBeGreaterThan(0);
      for (const doc of docs) {
        const json = JSON.stringify({ text: doc.text, metadata: doc.metadata, warnings: doc.warnings });
        expect(json.includes("\\u001b") || json.includes(ESC), name).toBe(false);
        for (const seg of doc.segments ?? []) {
          expect(seg.start, name).toBeGreaterThanOrEqual(0);
          expect(seg.end, name).toBeLessThanOrEqual(doc.text.length);
          expect(seg.start, name).toBeLessThanOrEqual(seg.end);
        }
      }
    }
    const [email] = await extractFile(join(tmp.dir, "mail.eml"));
    expect(email?.metadata.subject).toBe("Report");
    expect(email?.text).toContain("The build failed.");
    expect((await extractFile(join(tmp.dir, "build.log")))[0]?.text).toBe("ERROR disk full\n");
    expect((await extractFile(join(tmp.dir, "notes.md")))[0]?.metadata.title).toBe("Title");
  });

  it("in-memory content (uploads) is cleaned the same way", async () => {
    const [doc] = await extractBytes("upload.txt", Buffer.from(`ok ${ESC}[1mbold${ESC}[0m\u0007?`));
    expect(doc?.text).toBe("ok bold?");
  });
});
