/**
 * Small helpers shared by the extractors: reading files, decoding bytes to text,
 * building metadata without `undefined` values.
 */
import { readFile, stat } from "node:fs/promises";
import { basename } from "node:path";
import { analyse } from "chardet";
import { ExtractionError } from "../errors.js";
import type { ExtractContext } from "./contract.js";

/**
 * Reads a whole file into memory.
 * @throws ExtractionError naming the file when it cannot be read (missing, a directory, no permission).
 */
export async function readBytes(path: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const reason =
      code === "ENOENT"
        ? "file not found"
        : code === "EISDIR"
          ? "is a directory, not a file"
          : code === "EACCES"
            ? "permission denied"
            : `cannot read file: ${(err as Error).message}`;
    throw new ExtractionError(path, reason, { cause: err });
  }
}

/** Formats a byte count for messages: `512 B`, `1.5 KiB`, `100.0 MiB`. */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 ** 3) return `${(n / 1024 / 1024).toFixed(1)} MiB`;
  return `${(n / 1024 ** 3).toFixed(2)} GiB`;
}

/**
 * The error for a size over a limit: `file too large: 120.0 MiB (limit maxFileBytes = 100.0 MiB)`.
 */
export function tooLarge(
  path: string,
  what: string,
  size: number,
  limitName: string,
  limit: number,
): ExtractionError {
  return new ExtractionError(
    path,
    `${what} too large: ${formatBytes(size)} (limit ${limitName} = ${formatBytes(limit)})`,
  );
}

/**
 * The content of a source: `ctx.bytes` when the caller has it in memory (an
 * attachment, an archive entry), otherwise the file at `path`, read only when its
 * size is within `limits.maxFileBytes`.
 * @throws ExtractionError naming the file when it cannot be read or is over the limit.
 */
export async function readSource(path: string, ctx: ExtractContext): Promise<Buffer> {
  const limit = ctx.options.limits.maxFileBytes;
  if (ctx.bytes) {
    if (ctx.bytes.byteLength > limit)
      throw tooLarge(path, "file", ctx.bytes.byteLength, "maxFileBytes", limit);
    return Buffer.from(ctx.bytes.buffer, ctx.bytes.byteOffset, ctx.bytes.byteLength);
  }
  const size = await stat(path).then(
    (info) => info.size,
    () => 0,
  );
  if (size > limit) throw tooLarge(path, "file", size, "maxFileBytes", limit);
  return readBytes(path);
}

/**
 * windows-1252 characters of the bytes 0x80–0x9F. The five bytes windows-1252
 * leaves unassigned (0x81, 0x8D, 0x8F, 0x90, 0x9D) stay C1 controls, as in the
 * WHATWG Encoding Standard's index-windows-1252.
 */
const CP1252_HIGH =
  "\u20ac\u0081\u201a\u0192\u201e\u2026\u2020\u2021\u02c6\u2030\u0160\u2039\u0152\u008d\u017d\u008f" +
  "\u0090\u2018\u2019\u201c\u201d\u2022\u2013\u2014\u02dc\u2122\u0161\u203a\u0153\u009d\u017e\u0178";

/**
 * Decodes bytes as windows-1252: 0x00–0x7F and 0xA0–0xFF as the same code points
 * (Latin-1), 0x80–0x9F from the windows-1252 table (`\x93` → `“`, `\x80` → `€`).
 * Done here because Node's TextDecoder("windows-1252") leaves 0x80–0x9F as C1
 * controls. Linear in the input.
 */
export function decodeWindows1252(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
    .toString("latin1")
    .replace(/[\u0080-\u009f]/g, (c) => CP1252_HIGH[c.charCodeAt(0) - 0x80] ?? c);
}

/**
 * Charset labels seen in mail and files that TextDecoder does not know, keyed by
 * the label in lower case without punctuation, with the TextDecoder name to use.
 */
const LABEL_ALIASES: Readonly<Record<string, string>> = {
  latin1: "windows-1252",
  iso88591: "windows-1252",
  usascii: "windows-1252",
  cp1252: "windows-1252",
  windows1252: "windows-1252",
  cp949: "euc-kr",
  uhc: "euc-kr",
  euccn: "gbk",
  cp936: "gbk",
  ms936: "gbk",
  sjis: "shift_jis",
  cp932: "shift_jis",
  ms932: "shift_jis",
  windows31j: "shift_jis",
  cp950: "big5",
  cp874: "windows-874",
  utf8: "utf-8",
};

/** Multi-byte (CJK) encodings, by their TextDecoder name. */
const MULTI_BYTE = new Set(["shift_jis", "euc-jp", "euc-kr", "big5", "gb18030", "gbk"]);

/** Single-byte encodings of Latin-script languages, by their TextDecoder name. */
const LATIN_SINGLE_BYTE = new Set([
  "windows-1252",
  "iso-8859-2",
  "windows-1250",
  "windows-1254",
  "windows-1257",
  "windows-1258",
  "iso-8859-3",
  "iso-8859-4",
  "iso-8859-10",
  "iso-8859-13",
  "iso-8859-14",
  "iso-8859-15",
  "iso-8859-16",
]);

/**
 * The canonical TextDecoder name of a charset label (`"Shift_JIS"` → `shift_jis`,
 * `"ISO-8859-9"` → `windows-1254`, `"latin1"` and `"us-ascii"` → `windows-1252`, as
 * the WHATWG Encoding Standard maps them; a few common non-WHATWG labels such as
 * `cp949` and `euc-cn` too), or `undefined`
 * when Node cannot decode it. UTF-16 labels are `undefined` too: a label found
 * in ASCII text cannot be right about UTF-16, which is only taken from a byte
 * order mark.
 */
export function charsetName(label: string | undefined): string | undefined {
  const trimmed = label?.trim() ?? "";
  if (trimmed === "") return undefined;
  let name: string | undefined;
  try {
    // WHATWG labels: latin1, iso-8859-1, us-ascii, ascii… all give windows-1252.
    name = new TextDecoder(trimmed).encoding;
  } catch {
    name = LABEL_ALIASES[trimmed.toLowerCase().replace(/[^a-z0-9]/g, "")];
  }
  if (name === undefined || /^utf-16|^replacement$|^x-user-defined$/.test(name)) return undefined;
  return name;
}

/**
 * Decodes `bytes` with the charset `label` (any label {@link charsetName} knows);
 * windows-1252 and its Latin-1/ASCII aliases through {@link decodeWindows1252}.
 * Bytes invalid in that charset become U+FFFD. `undefined` when the label is unknown.
 */
export function decodeAs(bytes: Uint8Array, label: string): string | undefined {
  const name = charsetName(label);
  if (name === undefined) return undefined;
  if (name === "windows-1252") return decodeWindows1252(bytes);
  return new TextDecoder(name).decode(bytes);
}

/** Most bytes from the start of the input that charset detection looks at. */
const DETECT_SAMPLE_BYTES = 64 * 1024;

/** Options of {@link decodeText} and {@link detectCharset}. */
export interface DecodeOptions {
  /**
   * The bytes are HTML/XML: charset detection skips the markup (`<…>` tags) when
   * the sample has at least 5 tags and 100 bytes of text, as ICU does.
   */
  markup?: boolean;
}

/** How the bytes ≥ 0x80 of a sample are laid out. */
interface HighByteShape {
  /** Bytes ≥ 0x80. */
  high: number;
  /** Bytes ≥ 0x80 in runs of three or more such bytes in a row. */
  inLongRuns: number;
}

/**
 * Counts the high bytes of `sample` and how many of them stand in runs of three
 * or more. Latin-script text in a single-byte charset has its accented letters and
 * punctuation alone or in pairs (`caf\xe9`, `Gr\xfc\xdfe`); CJK text and words in
 * Cyrillic, Greek, Arabic, Hebrew or Thai form long runs.
 */
function highByteShape(sample: Uint8Array): HighByteShape {
  let high = 0;
  let inLongRuns = 0;
  let run = 0;
  for (let i = 0; i <= sample.length; i++) {
    if (i < sample.length && (sample[i] as number) >= 0x80) {
      run++;
      continue;
    }
    high += run;
    if (run >= 3) inLongRuns += run;
    run = 0;
  }
  return { high, inLongRuns };
}

/**
 * The text of an HTML/XML sample without its tags (for detection only), or the
 * sample itself when it has fewer than 5 tags or less than 100 bytes of text.
 */
function stripMarkup(sample: Uint8Array): Uint8Array {
  const out = new Uint8Array(sample.length);
  let n = 0;
  let tags = 0;
  let inTag = false;
  for (const b of sample) {
    if (inTag) {
      if (b === 0x3e /* > */) inTag = false;
    } else if (b === 0x3c /* < */) {
      inTag = true;
      tags++;
    } else {
      out[n++] = b;
    }
  }
  return tags >= 5 && n >= 100 ? out.subarray(0, n) : sample;
}

/**
 * True when `sample` decodes in `name` without an invalid sequence and without C1
 * control characters (U+0080–U+009F, which some decoders give for bytes a charset
 * leaves unassigned). A multi-byte character cut at the end of the sample is not
 * an error. With `strict` (a multi-byte candidate chardet had almost no evidence
 * for), halfwidth katakana and private-use characters also count as a failure:
 * they are what a wrong CJK decoding of a short text typically produces.
 */
function decodesCleanly(sample: Uint8Array, name: string, strict: boolean): boolean {
  if (name === "windows-1252") return true;
  let text: string;
  try {
    text = new TextDecoder(name, { fatal: true }).decode(sample, { stream: true });
  } catch {
    return false;
  }
  return !(strict ? /[\u0080-\u009f\uff61-\uff9f\ue000-\uf8ff]/ : /[\u0080-\u009f]/).test(text);
}

/** A chardet match as a TextDecoder name with its confidence (0–100). */
interface Candidate {
  name: string;
  confidence: number;
}

/** chardet's matches for `sample`, best first, as TextDecoder names (duplicates, unusable ones and zero confidence dropped). */
function candidates(sample: Uint8Array): Candidate[] {
  let matches: { name: string; confidence: number }[];
  try {
    matches = analyse(sample);
  } catch {
    return [];
  }
  const out: Candidate[] = [];
  const seen = new Set<string>();
  for (const m of matches) {
    // UTF-8 was ruled out by the caller; the 7-bit ISO-2022 charsets cannot explain high bytes.
    const name = charsetName(m.name);
    if (name === undefined || name === "utf-8" || name.startsWith("iso-2022") || seen.has(name)) continue;
    if (m.confidence <= 0) continue; // "ASCII" at 0: no evidence (windows-1252 is the last resort anyway)
    seen.add(name);
    out.push({ name, confidence: m.confidence });
  }
  return out;
}

/**
 * Detects the legacy charset of bytes that are not UTF-8 and returns its
 * TextDecoder name (`windows-1252` when nothing better is found). Looks at the
 * first 64 KiB only. Never throws. The decision, in order:
 *
 * 1. No byte ≥ 0x80: `windows-1252`.
 * 2. The high bytes stand alone or in pairs, never three or more in a row
 *    (Latin-script text: `caf\xe9`, `said \x93hi\x94`, `Gr\xfc\xdfe`): a single-byte
 *    charset, never a multi-byte one. `windows-1252`, unless chardet ranks another
 *    single-byte charset first with confidence ≥ 50 and 10 points above
 *    windows-1252/ISO-8859-1, on a sample with at least 8 high bytes (Czech in
 *    windows-1250, Turkish in windows-1254). chardet is unreliable on short texts:
 *    it reports `caf\xe9` as UTF-8, `r\xe9sum\xe9` as Shift_JIS/Big5/GB18030 and
 *    `El Ni\xf1o` as windows-1257 (75), hence this rule.
 * 3. Otherwise chardet's candidates (`analyse`), best first, and the first that
 *    decodes the sample cleanly ({@link decodesCleanly}) wins. Multi-byte
 *    candidates chardet had no evidence for (confidence ≤ 10: at most ten
 *    double-byte characters) are tried last and must also decode without
 *    halfwidth katakana or private-use characters. Exception: when most high
 *    bytes stand in runs of three or more (CJK-shaped) and chardet's best is a
 *    Latin single-byte charset (it ranks a short Big5 text ISO-8859-1 first),
 *    the multi-byte candidates are tried first.
 * 4. Last resort: `windows-1252`.
 */
export function detectCharset(bytes: Uint8Array, options: DecodeOptions = {}): string {
  const head = bytes.subarray(0, DETECT_SAMPLE_BYTES);
  const sample = options.markup ? stripMarkup(head) : head;
  const shape = highByteShape(sample);
  if (shape.high === 0) return "windows-1252";
  const found = candidates(sample);
  const weak = (c: Candidate): boolean => MULTI_BYTE.has(c.name) && c.confidence <= 10;
  if (shape.inLongRuns === 0) {
    const latin1 = found.find((c) => c.name === "windows-1252")?.confidence ?? 0;
    const best = found.find((c) => !MULTI_BYTE.has(c.name));
    const confident =
      best !== undefined &&
      best.name !== "windows-1252" &&
      best.confidence >= 50 &&
      best.confidence >= latin1 + 10 &&
      shape.high >= 8;
    return confident && decodesCleanly(sample, best.name, false) ? best.name : "windows-1252";
  }
  const cjkShaped = shape.inLongRuns * 2 > shape.high;
  const ordered =
    cjkShaped && found[0] !== undefined && LATIN_SINGLE_BYTE.has(found[0].name)
      ? [...found.filter((c) => MULTI_BYTE.has(c.name)), ...found.filter((c) => !MULTI_BYTE.has(c.name))]
      : [...found.filter((c) => !weak(c)), ...found.filter(weak)];
  for (const c of ordered) {
    if (decodesCleanly(sample, c.name, weak(c))) return c.name;
  }
  return "windows-1252";
}

/**
 * True when chardet, on the first 64 KiB, ranks a multi-byte (CJK) charset first
 * with confidence ≥ 50 and the sample decodes cleanly in it: legacy CJK text that
 * happens to contain many valid UTF-8 sequences (EUC-JP kanji often do).
 */
function isMultiByteLegacy(bytes: Uint8Array, options: DecodeOptions): boolean {
  const head = bytes.subarray(0, DETECT_SAMPLE_BYTES);
  const sample = options.markup ? stripMarkup(head) : head;
  let top: { name: string; confidence: number } | undefined;
  try {
    top = analyse(sample)[0];
  } catch {
    return false;
  }
  const name = charsetName(top?.name);
  return (
    top !== undefined &&
    name !== undefined &&
    MULTI_BYTE.has(name) &&
    top.confidence >= 50 &&
    decodesCleanly(sample, name, false)
  );
}

/**
 * Decodes bytes known not to be UTF-8 (or declared in a legacy charset): with
 * the charset `label` when it is given and Node can decode it (Latin-1/ASCII
 * labels as windows-1252), else with the charset {@link detectCharset} finds.
 * UTF-8 and the 7-bit ISO-2022 labels are ignored: they cannot explain bytes
 * that are not UTF-8. Never throws.
 */
export function decodeLegacy(bytes: Uint8Array, label?: string, options: DecodeOptions = {}): string {
  const declared = charsetName(label);
  const usable = declared !== undefined && declared !== "utf-8" && !declared.startsWith("iso-2022");
  const name = usable ? declared : detectCharset(bytes, options);
  return decodeAs(bytes, name) ?? decodeWindows1252(bytes);
}

/**
 * The charset of bytes of unknown charset and, when finding it already decoded
 * them, their text. See {@link decodeText} for the decision order.
 */
function sniff(bytes: Uint8Array, options: DecodeOptions): { charset: string; text?: string } {
  if (bytes.length >= 2 && bytes[0] === 0xff && bytes[1] === 0xfe) return { charset: "utf-16le" };
  if (bytes.length >= 2 && bytes[0] === 0xfe && bytes[1] === 0xff) return { charset: "utf-16be" };
  // TextDecoder removes a leading UTF-8 BOM (ignoreBOM defaults to false).
  try {
    return { charset: "utf-8", text: new TextDecoder("utf-8", { fatal: true }).decode(bytes) };
  } catch {
    // Not valid UTF-8: mostly UTF-8 with a few bad bytes, or a legacy charset.
  }
  const hasBom = bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf;
  const utf8 = new TextDecoder("utf-8").decode(bytes);
  if (hasBom || (isMostlyUtf8(bytes, utf8) && !isMultiByteLegacy(bytes, options))) {
    return { charset: "utf-8", text: utf8 };
  }
  return { charset: detectCharset(bytes, options) };
}

/**
 * The charset {@link decodeText} reads `bytes` in: `utf-8`, `utf-16le`,
 * `utf-16be`, or the TextDecoder name of a legacy charset (`windows-1252`,
 * `shift_jis`, `gb18030`…). Never throws.
 */
export function textCharset(bytes: Uint8Array, options: DecodeOptions = {}): string {
  return sniff(bytes, options).charset;
}

/**
 * Decodes file bytes of unknown charset to a string. Never throws; linear in the
 * input (detection looks at the first 64 KiB only). The decision, in order:
 *
 * 1. A byte order mark wins: UTF-16LE (`FF FE`), UTF-16BE (`FE FF`), UTF-8
 *    (`EF BB BF`, dropped; invalid bytes after it become U+FFFD).
 * 2. Valid UTF-8 is read as UTF-8 (ASCII included).
 * 3. "Mostly UTF-8": invalid UTF-8 in which fewer than half of the high bytes
 *    fail to decode (a UTF-8 file with a few stray bytes) is read as UTF-8 with
 *    U+FFFD for the bad sequences, unless chardet finds a multi-byte CJK charset
 *    that decodes it cleanly (see {@link isMultiByteLegacy}).
 * 4. Otherwise legacy text: the charset of {@link detectCharset} (chardet with
 *    the rules for short and Latin-script texts described there), `windows-1252`
 *    as the last resort. Latin-1/ASCII results are decoded as windows-1252, as the
 *    WHATWG Encoding Standard does for those labels.
 */
export function decodeText(bytes: Uint8Array, options: DecodeOptions = {}): string {
  const { charset, text } = sniff(bytes, options);
  if (text !== undefined) return text;
  if (charset === "utf-16le" || charset === "utf-16be") return new TextDecoder(charset).decode(bytes);
  return decodeAs(bytes, charset) ?? decodeWindows1252(bytes);
}

/**
 * True when fewer than half of the bytes ≥ 0x80 of `bytes` failed to decode in
 * `utf8` (its UTF-8 reading with U+FFFD for each bad sequence).
 */
export function isMostlyUtf8(bytes: Uint8Array, utf8: string): boolean {
  let high = 0;
  for (const b of bytes) if (b >= 0x80) high++;
  let replaced = 0;
  for (let at = utf8.indexOf("\uFFFD"); at >= 0; at = utf8.indexOf("\uFFFD", at + 1)) replaced++;
  return replaced * 2 < high;
}

/**
 * Throws when `text` is empty or whitespace only.
 * @throws ExtractionError with the reason "file is empty".
 */
export function assertNotEmpty(path: string, text: string): void {
  if (text.trim() === "") throw new ExtractionError(path, "file is empty");
}

/** The file name of `path` (last path component), used as a fallback title. */
export function fileTitle(path: string): string {
  return basename(path);
}

/**
 * Returns a copy of `obj` without the keys whose value is `undefined`, so absent
 * metadata fields are really absent (never the string "undefined").
 */
export function compact<T extends Record<string, unknown>>(obj: T): T {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(obj)) {
    if (value !== undefined) out[key] = value;
  }
  return out as T;
}

/** Returns `s` trimmed, or `undefined` when it is absent or blank. */
export function nonBlank(s: string | undefined | null): string | undefined {
  if (typeof s !== "string") return undefined;
  const t = s.trim();
  return t === "" ? undefined : t;
}

/**
 * Wraps an unexpected error from a parser in an ExtractionError naming the file.
 * An ExtractionError passes through unchanged.
 */
export function asExtractionError(path: string, err: unknown, what: string): ExtractionError {
  if (err instanceof ExtractionError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new ExtractionError(path, `${what}: ${message}`, { cause: err });
}

/**
 * Terminal control sequences and other control characters, in the order tried:
 * 1. string sequences (OSC `ESC ]`, DCS `ESC P`, SOS `ESC X`, PM `ESC ^`, APC
 *    `ESC _`, or their 8-bit forms) up to BEL or ST (`ESC \` or U+009C) on the
 *    same line, e.g. a hyperlink or window title;
 * 2. CSI sequences (`ESC [` or U+009B, parameters, intermediates, a final byte),
 *    e.g. colours `ESC[1;31m` and cursor moves `ESC[2K`;
 * 3. any other escape sequence (`ESC (B`, `ESC 7`), or the introducer of an
 *    unterminated one;
 * 4. any other C0 or C1 control character, DEL included, except tab, line feed,
 *    vertical tab, form feed and carriage return.
 */
const CONTROL_SEQUENCE = new RegExp(
  [
    "(?:\\u001B[\\]PX^_]|[\\u0090\\u0098\\u009D\\u009E\\u009F])[^\\u0007\\u001B\\u009C\\n]*(?:\\u0007|\\u001B\\\\|\\u009C)",
    "(?:\\u001B\\[|\\u009B)[\\u0030-\\u003F]*[\\u0020-\\u002F]*[\\u0040-\\u007E]",
    "\\u001B[\\u0020-\\u002F]*[\\u0030-\\u007E]",
    "[\\u0000-\\u0008\\u000E-\\u001F\\u007F-\\u009F]",
  ].join("|"),
  "g",
);

/** True when `text` holds a character {@link stripControlSequences} may remove or replace. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const HAS_CONTROL = /[\u0000-\u0008\u000B\u000E-\u001F\u007F-\u009F]/;

/** The result of {@link stripControlSequences}. */
export interface StrippedText {
  /** The text without control sequences. */
  text: string;
  /** Maps an offset into the original text to the offset of the same place in `text`. */
  mapOffset: (offset: number) => number;
  /** Code units removed. */
  removed: number;
}

/**
 * Removes terminal escape sequences (colours `ESC[…m`, cursor moves, OSC
 * hyperlinks and titles) and every other C0/C1 control character except tab,
 * line feed, form feed and carriage return from `text`; a vertical tab becomes a
 * line feed (so the words it separates stay apart). See {@link CONTROL_SEQUENCE}
 * for what counts as a sequence. `mapOffset` maps offsets of the original text
 * (segment bounds) to the stripped text: an offset inside a removed sequence
 * maps to where the sequence was. Linear in the input.
 */
export function stripControlSequences(text: string): StrippedText {
  if (!HAS_CONTROL.test(text)) return { text, mapOffset: (o) => o, removed: 0 };
  const starts: number[] = [];
  const ends: number[] = [];
  /** Code units removed before the end of each removed range. */
  const cumulative: number[] = [];
  let removed = 0;
  const stripped = text
    .replace(CONTROL_SEQUENCE, (match: string, offset: number) => {
      starts.push(offset);
      ends.push(offset + match.length);
      removed += match.length;
      cumulative.push(removed);
      return "";
    })
    .replaceAll("\v", "\n");
  const mapOffset = (offset: number): number => {
    // The last removed range starting before `offset`.
    let lo = 0;
    let hi = starts.length - 1;
    let found = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if ((starts[mid] as number) < offset) {
        found = mid;
        lo = mid + 1;
      } else {
        hi = mid - 1;
      }
    }
    if (found < 0) return offset;
    const before = (cumulative[found] as number) - ((ends[found] as number) - (starts[found] as number));
    const inside = Math.min(offset, ends[found] as number) - (starts[found] as number);
    return offset - before - inside;
  };
  return { text: stripped, mapOffset, removed };
}
