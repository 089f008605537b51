/**
 * DOCX extractor: Word documents converted to HTML by mammoth, then to plain text
 * with Markdown headings by {@link htmlToText}, so the document chunker sees the
 * section structure. Title and author come from `docProps/core.xml`.
 */
import { createRequire } from "node:module";
import mammoth from "mammoth";
import yauzl from "yauzl";
import { firstHeadingTitle } from "../chunk/markdown-blocks.js";
import { ExtractionError } from "../errors.js";
import type { ExtractedDocument } from "../types.js";
import type { ExtractContext, Extractor } from "./contract.js";
import { htmlToText } from "./html.js";
import {
  asExtractionError,
  compact,
  fileTitle,
  formatBytes,
  nonBlank,
  readSource,
  tooLarge,
} from "./util.js";

/** First bytes of an OLE compound file: an encrypted .docx, or a legacy binary .doc. */
const OLE_SIGNATURE = Buffer.from([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1]);

/** Largest `docProps/core.xml` read for title and author (bytes); a larger one is ignored. */
const MAX_CORE_XML_BYTES = 1024 * 1024;

/**
 * Style mappings added to mammoth's defaults: the Word `Title` style is a level-1
 * heading (so the chunker and the title fallback see it), `Subtitle` a paragraph.
 */
const STYLE_MAP = ["p[style-name='Title'] => h1:fresh", "p[style-name='Subtitle'] => p:fresh"];

/** What the zip listing tells about a .docx before conversion. */
interface DocxPackage {
  /** `dc:title` of `docProps/core.xml`, when present and not blank. */
  title?: string;
  /** `dc:creator` of `docProps/core.xml`, when present and not blank. */
  author?: string;
}

/** Decodes the XML character references and predefined entities of a text node. */
function decodeXml(s: string): string {
  return s
    .replace(/<!\[CDATA\[([\s\S]*?)\]\]>/g, "$1")
    .replace(
      /&#x([0-9a-f]+);|&#(\d+);|&(lt|gt|quot|apos|amp);/gi,
      (m, hex?: string, dec?: string, name?: string) => {
        if (name) return { lt: "<", gt: ">", quot: '"', apos: "'", amp: "&" }[name.toLowerCase()] ?? m;
        const cp = hex ? Number.parseInt(hex, 16) : Number(dec);
        return cp > 0 && cp <= 0x10ffff && (cp < 0xd800 || cp > 0xdfff) ? String.fromCodePoint(cp) : m;
      },
    );
}

/** The text of the first `<prefix:name>` element of an XML string (any namespace prefix), whitespace collapsed. */
function xmlElementText(xml: string, name: string): string | undefined {
  const m = new RegExp(`<(?:[\\w.-]+:)?${name}(?:\\s[^>]*)?>([\\s\\S]*?)</(?:[\\w.-]+:)?${name}\\s*>`).exec(
    xml,
  );
  return nonBlank(m?.[1] === undefined ? undefined : decodeXml(m[1]).replace(/\s+/g, " "));
}

/** Reads a zip entry completely; yauzl checks the data against the declared size. */
async function readEntry(zip: yauzl.ZipFile, entry: yauzl.Entry): Promise<Buffer> {
  const stream = await zip.openReadStreamPromise(entry);
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/**
 * Opens the .docx as a zip and checks it before conversion: the entry count
 * (`maxArchiveEntries`), the total uncompressed size declared by the entries
 * (`maxUnpackedBytes`, against zip bombs), no zip-level encryption, a Word main
 * document. The XML parts mammoth will parse are inflated once here, so a size
 * that lies about the data is caught (yauzl compares the data with the declared
 * size). Reads title and author from `docProps/core.xml`.
 * @throws ExtractionError "not a valid DOCX: …", "password-protected …", or a limit error.
 */
async function inspectPackage(path: string, bytes: Buffer, ctx: ExtractContext): Promise<DocxPackage> {
  const { maxUnpackedBytes, maxArchiveEntries } = ctx.options.limits;
  let zip: yauzl.ZipFile;
  try {
    zip = await yauzl.fromBufferPromise(bytes, {
      lazyEntries: true,
      autoClose: false,
      strictFileNames: false,
    });
  } catch (err) {
    throw new ExtractionError(path, `not a valid DOCX: ${(err as Error).message}`, { cause: err });
  }
  try {
    if (zip.entryCount > maxArchiveEntries) {
      throw new ExtractionError(
        path,
        `too many archive entries: ${zip.entryCount} (limit maxArchiveEntries = ${maxArchiveEntries})`,
      );
    }
    const entries: yauzl.Entry[] = [];
    let declared = 0;
    for await (const entry of zip.eachEntry()) {
      entries.push(entry);
      declared += entry.uncompressedSize;
      if (declared > maxUnpackedBytes) {
        throw tooLarge(path, "unpacked DOCX", declared, "maxUnpackedBytes", maxUnpackedBytes);
      }
    }
    const names = new Set(entries.map((e) => e.fileName));
    if (!names.has("word/document.xml") && !names.has("_rels/.rels")) {
      throw new ExtractionError(path, "not a valid DOCX: a ZIP archive without word/document.xml");
    }
    if (entries.some((e) => e.isEncrypted())) {
      throw new ExtractionError(path, "password-protected (encrypted ZIP entries)");
    }
    let core: string | undefined;
    for (const entry of entries) {
      if (!/\.(?:xml|rels)$/i.test(entry.fileName)) continue;
      const data = await readEntry(zip, entry);
      if (entry.fileName === "docProps/core.xml" && data.length <= MAX_CORE_XML_BYTES) {
        core = data.toString("utf8");
      }
    }
    return compact({
      title: core === undefined ? undefined : xmlElementText(core, "title"),
      author: core === undefined ? undefined : xmlElementText(core, "creator"),
    });
  } catch (err) {
    if (err instanceof ExtractionError) throw err;
    throw new ExtractionError(path, `not a valid DOCX: ${(err as Error).message}`, { cause: err });
  } finally {
    zip.close();
  }
}

/**
 * The problem named by an XML parser error of mammoth (xmldom), on one line:
 * `warning: [xmldom warning]\tunclosed xml attribute\n@#[line:…]` → `unclosed xml attribute`.
 * `undefined` when the message is not an XML parser error.
 */
function xmlProblem(message: string): string | undefined {
  const m = /\[xmldom (?:warning|error|fatalError)\][ \t]*([^\n]*)/.exec(message);
  if (!m) return undefined;
  return nonBlank(m[1]?.replace(/\s+/g, " ")) ?? "parse error";
}

/** The XML parse function mammoth itself uses (same parser, same messages), when it can be loaded. */
function mammothXmlParser(): ((xml: string) => unknown) | undefined {
  try {
    const mod = createRequire(import.meta.url)("mammoth/lib/xml/xmldom.js") as { parseFromString?: unknown };
    const parse = mod.parseFromString;
    return typeof parse === "function" ? (xml: string) => parse(xml) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Name of the part of the package (`word/document.xml`…) whose XML fails to parse
 * with exactly the error `message` mammoth reported (mammoth does not name the part),
 * or `undefined` when none is found. Only `.xml`/`.rels` parts are read; the package
 * was already checked against the size limits by {@link inspectPackage}. Never throws.
 */
async function malformedPart(bytes: Buffer, message: string): Promise<string | undefined> {
  const parse = mammothXmlParser();
  if (!parse) return undefined;
  let zip: yauzl.ZipFile | undefined;
  try {
    zip = await yauzl.fromBufferPromise(bytes, {
      lazyEntries: true,
      autoClose: false,
      strictFileNames: false,
    });
    for await (const entry of zip.eachEntry()) {
      if (!/\.(?:xml|rels)$/i.test(entry.fileName)) continue;
      // Decoded like mammoth does: UTF-8, a byte order mark dropped.
      const xml = (await readEntry(zip, entry)).toString("utf8").replace(/^\uFEFF/, "");
      try {
        parse(xml);
      } catch (err) {
        if (err instanceof Error && err.message === message) return entry.fileName;
      }
    }
  } catch {
    // Attribution is best effort: the error is reported without the part name.
  } finally {
    zip?.close();
  }
  return undefined;
}

/**
 * Mammoth messages that mean content was lost (not merely unstyled): ignored
 * elements, unsupported symbols and broken table structure. Messages about styles
 * and images are dropped (styles do not change the text; images are not extracted).
 */
function lostContentWarnings(messages: { type: string; message: string }[]): string[] {
  const counts = new Map<string, number>();
  for (const { type, message } of messages) {
    if (/image|style/i.test(message)) continue;
    if (type !== "error" && !/ignored|unsupported|incorrect/i.test(message)) continue;
    const key = message.replace(/\s+/g, " ").trim();
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return [...counts].map(([message, n]) => `DOCX content dropped: ${message}${n > 1 ? ` (${n} times)` : ""}`);
}

/** Mammoth's footnote/endnote/comment back-links (`↑`), which are not text. */
const BACK_LINK = /<a href="#(?:footnote|endnote|comment)-ref-[^"]*">[^<]*<\/a>/g;

/** Word segmenter with a fixed locale (not the host's), so counts are the same on every machine. */
const WORDS = new Intl.Segmenter("en", { granularity: "word" });

/**
 * Number of words in the converted `text`, list numbers added by the conversion
 * (`1. `) left out. Unicode word segmentation, so CJK text counts words, not characters.
 */
function countWords(text: string): number {
  const words = text.replace(/^( *)\d+\. /gm, "$1");
  let n = 0;
  for (const segment of WORDS.segment(words)) {
    if (segment.isWordLike) n++;
  }
  return n;
}

/**
 * Extracts a Word .docx file (Office Open XML).
 *
 * The document body (with footnotes and endnotes; headers, footers, comments and
 * images are left out) is converted to HTML by mammoth and then to text by
 * {@link htmlToText}: Heading 1–6 (and the Title style) become `#`…`######` lines,
 * paragraphs are separated by blank lines, list items become `- `/`1. ` lines and
 * table rows become lines with ` | ` between cells, the first row followed by a `--- | ---`
 * delimiter row (a GFM table whose header DOCUMENT chunking repeats in every chunk of it).
 *
 * Metadata: `path`, `type: "docx"`, `title` (`dc:title` of `docProps/core.xml`,
 * else the first heading, else the file name), `author` (`dc:creator`, when
 * present), `wordCount` (words of the extracted text, Unicode word segmentation).
 * `warnings`: converter messages that mean content was lost (ignored elements,
 * unsupported symbols, broken table structure).
 *
 * @throws ExtractionError "password-protected or legacy .doc (OLE) file" (an
 *   encrypted .docx or a binary .doc renamed), "not a valid DOCX: …" (not a zip,
 *   corrupt, no Word document inside; malformed XML gives one line naming the part
 *   when it can be found and the parser's complaint: "not a valid DOCX: malformed
 *   XML in word/document.xml: unclosed xml attribute"), "no text content" (an empty document),
 *   "unpacked DOCX too large: … (limit maxUnpackedBytes = …)", "too many archive
 *   entries: …", or "file too large" over `maxFileBytes`.
 */
export const docxExtractor: Extractor = {
  type: "docx",
  async extract(path: string, ctx: ExtractContext): Promise<ExtractedDocument[]> {
    const bytes = await readSource(path, ctx);
    if (bytes.length === 0) throw new ExtractionError(path, "file is empty");
    if (bytes.subarray(0, OLE_SIGNATURE.length).equals(OLE_SIGNATURE)) {
      throw new ExtractionError(path, "password-protected or legacy .doc (OLE) file");
    }
    if (bytes[0] !== 0x50 || bytes[1] !== 0x4b) {
      throw new ExtractionError(path, `not a valid DOCX: not a ZIP archive (${formatBytes(bytes.length)})`);
    }
    const pkg = await inspectPackage(path, bytes, ctx);
    let result: Awaited<ReturnType<typeof mammoth.convertToHtml>>;
    try {
      result = await mammoth.convertToHtml(
        { buffer: bytes },
        {
          styleMap: STYLE_MAP,
          includeEmbeddedStyleMap: false,
          externalFileAccess: false,
          // Images are not extracted: never read or inline their data.
          convertImage: mammoth.images.imgElement(async () => ({ src: "" })),
        },
      );
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      const problem = xmlProblem(message);
      if (problem === undefined) throw asExtractionError(path, err, "not a valid DOCX");
      const part = await malformedPart(bytes, message);
      const where = part ? ` in ${part}` : "";
      throw new ExtractionError(path, `not a valid DOCX: malformed XML${where}: ${problem}`, { cause: err });
    }
    let text: string;
    try {
      text = htmlToText(result.value.replace(BACK_LINK, "")).text;
    } catch (err) {
      throw asExtractionError(path, err, "cannot convert DOCX");
    }
    if (text === "") throw new ExtractionError(path, "no text content");
    const metadata = compact({
      path,
      type: "docx" as const,
      title: pkg.title ?? firstHeadingTitle(text) ?? fileTitle(path),
      author: pkg.author,
      wordCount: countWords(text),
    });
    const doc: ExtractedDocument = { uri: path, text, metadata };
    const warnings = lostContentWarnings(result.messages);
    if (warnings.length > 0) doc.warnings = warnings;
    return [doc];
  },
};
