/**
 * Source-type detection: by file extension, with a content sniff for mail files
 * that carry no `.eml` extension (mbox-style files starting with a `From ` line)
 * and for plain text in files without a known extension (`tang300`, `NOTES`).
 */
import { closeSync, openSync, readSync, statSync } from "node:fs";
import { basename, extname, join } from "node:path";
import type { SourceType } from "../types.js";
import { decodeLegacy } from "./util.js";

/** Extensions (lower case, with dot) of the document formats. */
const DOCUMENT_EXTENSIONS: Readonly<Record<string, SourceType>> = {
  ".md": "markdown",
  ".markdown": "markdown",
  ".mdx": "markdown",
  ".txt": "text",
  ".text": "text",
  ".rst": "text",
  ".log": "text",
  ".adoc": "text",
  ".asciidoc": "text",
  ".org": "text",
  ".csv": "text",
  ".tsv": "text",
  ".srt": "text",
  ".vtt": "text",
  ".tex": "text",
  ".ltx": "text",
  ".bib": "text",
  ".properties": "text",
  ".nfo": "text",
  ".diff": "text",
  ".patch": "text",
  ".html": "html",
  ".htm": "html",
  ".xhtml": "html",
  ".pdf": "pdf",
  ".docx": "docx",
  ".eml": "email",
  ".mbox": "email",
  ".mbx": "email",
};

/** Source-code extensions (lower case, with dot) and the language name reported for them. */
const CODE_LANGUAGES: Readonly<Record<string, string>> = {
  ".py": "python",
  ".pyi": "python",
  ".js": "javascript",
  ".mjs": "javascript",
  ".cjs": "javascript",
  ".jsx": "javascript",
  ".ts": "typescript",
  ".mts": "typescript",
  ".cts": "typescript",
  ".tsx": "typescript",
  ".go": "go",
  ".java": "java",
  ".rs": "rust",
  ".cs": "csharp",
  ".cpp": "cpp",
  ".cc": "cpp",
  ".cxx": "cpp",
  ".hpp": "cpp",
  ".hh": "cpp",
  ".hxx": "cpp",
  ".c": "c",
  ".h": "c",
  ".m": "objective-c",
  ".mm": "objective-c",
  ".rb": "ruby",
  ".php": "php",
  ".kt": "kotlin",
  ".kts": "kotlin",
  ".swift": "swift",
  ".scala": "scala",
  ".sc": "scala",
  ".groovy": "groovy",
  ".gradle": "groovy",
  ".dart": "dart",
  ".lua": "lua",
  ".pl": "perl",
  ".pm": "perl",
  ".r": "r",
  ".jl": "julia",
  ".ex": "elixir",
  ".exs": "elixir",
  ".erl": "erlang",
  ".hs": "haskell",
  ".ml": "ocaml",
  ".mli": "ocaml",
  ".fs": "fsharp",
  ".fsx": "fsharp",
  ".clj": "clojure",
  ".cljs": "clojure",
  ".zig": "zig",
  ".nim": "nim",
  ".vue": "vue",
  ".svelte": "svelte",
  ".sh": "shell",
  ".bash": "shell",
  ".zsh": "shell",
  ".fish": "shell",
  ".ps1": "powershell",
  ".sql": "sql",
  ".css": "css",
  ".scss": "scss",
  ".less": "less",
  ".proto": "protobuf",
  ".graphql": "graphql",
  ".tf": "hcl",
  ".yaml": "yaml",
  ".yml": "yaml",
  ".toml": "toml",
  ".json": "json",
  ".jsonc": "json",
  ".json5": "json",
  ".xml": "xml",
  ".ini": "ini",
  ".cfg": "ini",
  ".cnf": "ini",
  ".conf": "ini",
  ".ejs": "ejs",
  ".hbs": "handlebars",
  ".handlebars": "handlebars",
  ".mustache": "mustache",
  ".tmpl": "template",
  ".njk": "jinja",
  ".jinja": "jinja",
  ".j2": "jinja",
};

/** Extension-less file names of plain-text documents (licences, notices, change logs). */
const TEXT_FILE_NAMES = new Set([
  "LICENSE",
  "LICENCE",
  "COPYING",
  "NOTICE",
  "AUTHORS",
  "CONTRIBUTORS",
  "CHANGELOG",
  "CHANGES",
  "README",
  "MIT-LICENSE",
  "LICENSE-MIT",
  "LICENSE-APACHE",
  "CODEOWNERS",
]);

/** Extension-less file names that are source code. */
const CODE_FILE_NAMES: Readonly<Record<string, string>> = {
  Makefile: "make",
  GNUmakefile: "make",
  Dockerfile: "dockerfile",
  Rakefile: "ruby",
  Gemfile: "ruby",
};

/**
 * Programming language of a source file from its name (`typescript`, `python`, `go`…),
 * or `undefined` when the name is not a known source-code file.
 */
export function languageForPath(path: string): string | undefined {
  const name = basename(path);
  const byName = CODE_FILE_NAMES[name];
  if (byName) return byName;
  return CODE_LANGUAGES[extname(name).toLowerCase()];
}

/**
 * Extensions never sniffed as text: keys, certificates and signatures (secrets,
 * or base64 without words to search), machine-written lock, checksum and
 * source-map files, vector graphics whose first kilobytes are text but whose
 * content is drawing commands (Illustrator, PostScript, SVG), and common binary
 * formats (images, audio, video, archives, executables, fonts, office files this
 * library does not read), so a file named as one is never read as text even when
 * its bytes happen to be (a test fixture, a truncated download).
 */
const NOT_SNIFFED_EXTENSIONS = new Set([
  ".pem",
  ".key",
  ".csr",
  ".crt",
  ".cer",
  ".der",
  ".p12",
  ".pfx",
  ".jks",
  ".keystore",
  ".gpg",
  ".pgp",
  ".asc",
  ".sig",
  ".lock",
  ".sum",
  ".map",
  ".ai",
  ".eps",
  ".ps",
  ".svg",
  ...[".jpg", ".jpeg", ".png", ".gif", ".bmp", ".tif", ".tiff", ".webp", ".ico", ".heic", ".psd"],
  ...[".mp3", ".wav", ".flac", ".ogg", ".m4a", ".mp4", ".mov", ".avi", ".mkv", ".webm"],
  ...[".gz", ".tgz", ".bz2", ".xz", ".zst", ".7z", ".rar", ".tar", ".jar", ".war", ".whl"],
  ...[".exe", ".dll", ".so", ".dylib", ".o", ".a", ".class", ".pyc", ".wasm", ".bin"],
  ...[".ttf", ".otf", ".woff", ".woff2", ".sqlite", ".db"],
  ...[".doc", ".xls", ".xlsx", ".ppt", ".pptx", ".odt", ".ods", ".odp", ".rtf"],
]);

/**
 * True when a file called `name` may be sniffed as plain text: it has no
 * extension or one not known as another format, is not a hidden file (`.env`,
 * `.netrc`, `.bash_history`: configuration and secrets more often than
 * documents) and its extension is not one of {@link NOT_SNIFFED_EXTENSIONS}.
 */
function mayBeSniffedAsText(name: string): boolean {
  if (name.startsWith(".")) return false;
  return !NOT_SNIFFED_EXTENSIONS.has(extname(name).toLowerCase());
}

/** Largest share of control characters (or U+FFFD) in a sniffed head that still counts as text. */
const MAX_CONTROL_SHARE = 0.02;

/**
 * C0 and C1 controls other than tab, line feed, vertical tab, form feed,
 * carriage return and escape (terminal colours in logs are text; extraction
 * strips them), DEL, and U+FFFD (bytes invalid in the detected charset).
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: counting control characters is the point.
const NOT_TEXT_CHARS = /[\u0000-\u0008\u000E-\u001A\u001C-\u001F\u007F-\u009F\uFFFD]/g;

/**
 * True when `head` (the first bytes of a file) is plain text: a UTF-16 byte
 * order mark; or no NUL byte, and decoded as UTF-8 when it is valid UTF-8 (a
 * character cut at the end of the head is not an error), else in the legacy
 * charset chardet finds (Latin-1, Shift_JIS, GB18030…; see `detectCharset`), at
 * most 2% of its characters are control characters or U+FFFD. A PEM private key
 * (`-----BEGIN … PRIVATE KEY-----`) is never text, nor is a PDF or PostScript
 * file (`%PDF-`, `%!PS`: text headers before binary or drawing streams). An
 * empty head is not text.
 */
export function looksLikeText(head: Uint8Array): boolean {
  if (head.length === 0) return false;
  if (
    head.length >= 2 &&
    ((head[0] === 0xff && head[1] === 0xfe) || (head[0] === 0xfe && head[1] === 0xff))
  ) {
    return true;
  }
  if (head.includes(0)) return false;
  const magic = Buffer.from(head.buffer, head.byteOffset, Math.min(head.byteLength, 8)).toString("latin1");
  if (magic.startsWith("%PDF-") || magic.startsWith("%!PS")) return false;
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(head, { stream: true });
  } catch {
    text = decodeLegacy(head);
  }
  if (/-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----/.test(text)) return false;
  const bad = text.match(NOT_TEXT_CHARS)?.length ?? 0;
  return bad <= MAX_CONTROL_SHARE * text.length;
}

/**
 * Why a file called `name` has no source type, for skip lists and errors:
 * `unsupported file type (.png)`, `unsupported file type (no extension, and not
 * plain text)`, `unsupported file type (hidden file without an extension)`.
 */
export function unsupportedReason(name: string): string {
  const ext = extname(name);
  if (ext !== "") return `unsupported file type (${ext})`;
  if (name.startsWith(".")) return "unsupported file type (hidden file without an extension)";
  return "unsupported file type (no extension, and not plain text)";
}

/** Number of leading bytes read when sniffing a file's content. */
const SNIFF_BYTES = 4096;

/** Reads up to `SNIFF_BYTES` from the start of a file; an empty buffer if it cannot be read. */
function readHead(path: string): Buffer {
  let fd: number | undefined;
  try {
    fd = openSync(path, "r");
    const buf = Buffer.alloc(SNIFF_BYTES);
    const n = readSync(fd, buf, 0, SNIFF_BYTES, 0);
    return buf.subarray(0, n);
  } catch {
    return Buffer.alloc(0);
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

const HEADER_LINE = /^[A-Za-z0-9][A-Za-z0-9-]*:[ \t]?/;
const MAIL_FIRST_HEADERS =
  /^(Return-Path|Received|From|To|Cc|Bcc|Sender|Reply-To|Date|Subject|Message-ID|In-Reply-To|References|Delivered-To|MIME-Version|Content-Type|Content-Transfer-Encoding|DKIM-Signature|Authentication-Results|ARC-[A-Za-z-]+|Thread-[A-Za-z]+|X-[A-Za-z0-9-]+):/i;

/**
 * True when `head` (the start of a file) looks like a mail message: an mbox
 * `From ` separator line followed by header lines, or (when `allowBareHeaders`)
 * a message that starts directly with RFC 5322 header lines.
 */
export function looksLikeEmail(head: string, allowBareHeaders = false): boolean {
  const lines = head.split(/\r?\n/, 12);
  const first = lines[0] ?? "";
  let rest: string[];
  if (/^From \S+/.test(first)) {
    rest = lines.slice(1);
  } else if (allowBareHeaders && MAIL_FIRST_HEADERS.test(first)) {
    rest = lines;
  } else {
    return false;
  }
  // The header block: header lines and their folded continuations, until a blank line.
  let headers = 0;
  for (const line of rest) {
    if (line === "") break;
    if (HEADER_LINE.test(line)) headers++;
    else if (!/^[ \t]/.test(line)) return false;
  }
  return headers >= 2;
}

/**
 * True when `dir` is an unpacked Slack workspace export: a folder holding both
 * `channels.json` and `users.json`. Never throws (a missing folder is `false`).
 */
export function isSlackExport(dir: string): boolean {
  try {
    return (
      statSync(dir).isDirectory() &&
      statSync(join(dir, "channels.json")).isFile() &&
      statSync(join(dir, "users.json")).isFile()
    );
  } catch {
    return false;
  }
}

/**
 * Detects the source type of `path`.
 *
 * By extension: `.md .markdown .mdx` → markdown; `.txt .text .rst .log .adoc .org` (and
 * licence/notice files such as `LICENSE`, `NOTICE`, `AUTHORS`) →
 * text; `.html .htm .xhtml` → html; `.pdf` → pdf; `.eml` → email; source-code
 * extensions (see {@link languageForPath}; JSON, XML, INI and template files too) → code;
 * `.docx` → docx; `.mbox` → email. A Slack export folder, a `.zip` holding one, or a
 * `.json` file of Slack message history (API `conversations.history`) → slack.
 * Content sniffing (reads at most 4 KB): a `.txt` file or a file with no or an
 * unknown extension that starts with an mbox `From ` line followed by mail
 * headers, or directly with at least two RFC 5322 header lines (`Return-Path:`,
 * `Received:`, `From:` …), → email (the SpamAssassin corpus is stored this way).
 * Any other file with no or an unknown extension whose head is text (see
 * {@link looksLikeText}) → text, except hidden files (`.env`) and keys,
 * certificates, lock, checksum and source-map files (`.pem`, `.lock`, `.sum`, `.map`).
 *
 * @returns the type, or `undefined` for an unsupported file (callers skip it).
 *   Never throws; an unreadable file is simply not sniffed.
 */
export function detectSourceType(path: string): SourceType | undefined {
  const ext = extname(path).toLowerCase();
  if (isSlackExport(path)) return "slack";
  if (ext === ".zip") return isSlackExportZip(path) ? "slack" : undefined;
  let isFile = false;
  try {
    isFile = statSync(path).isFile();
  } catch {
    isFile = false;
  }
  return detectFromHead(basename(path), () => (isFile ? readHead(path) : Buffer.alloc(0)));
}

/**
 * Detects the source type of in-memory content (an email attachment, an upload)
 * from its file name, its first bytes and, when the name says nothing, its MIME
 * type. Rules as in {@link detectSourceType} (a `.zip` is Slack when its central
 * directory names `channels.json` and `users.json`); the MIME type is consulted
 * before the plain-text sniff, which runs only when the MIME type is absent or
 * `application/octet-stream` (a named format such as `text/enriched` or
 * `application/pgp-signature` is not read as plain text).
 * @returns the type, or `undefined` when unsupported. Never throws.
 */
export function detectSourceTypeOf(
  name: string,
  bytes: Uint8Array,
  contentType?: string,
): SourceType | undefined {
  const head = Buffer.from(bytes.buffer, bytes.byteOffset, Math.min(bytes.byteLength, SNIFF_BYTES));
  if (extname(name).toLowerCase() === ".zip") {
    const all = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const read = (position: number, length: number): Buffer => all.subarray(position, position + length);
    return zipLooksLikeSlack(read, all.length) ? "slack" : undefined;
  }
  const byName = detectFromHead(name, () => head, false);
  if (byName) return byName;
  const mime = (contentType ?? "").toLowerCase().split(";")[0]?.trim() ?? "";
  const byMime = MIME_TYPES[mime];
  if (byMime) return byMime;
  // A MIME type naming a format (application/pgp-signature, image/png, text/enriched) is believed:
  // only content of no or the generic type is sniffed.
  const mimeAllowsText = mime === "" || mime === "application/octet-stream";
  return mimeAllowsText && mayBeSniffedAsText(name) && looksLikeText(head) ? "text" : undefined;
}

/** MIME types of the supported formats, for content without a telling file name. */
const MIME_TYPES: Readonly<Record<string, SourceType>> = {
  "text/plain": "text",
  "text/markdown": "markdown",
  "text/html": "html",
  "application/xhtml+xml": "html",
  "application/pdf": "pdf",
  "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
  "message/rfc822": "email",
};

/**
 * Type from a file name and (lazily read) first bytes; see {@link detectSourceType}.
 * `sniffText`: a file with no or an unknown extension whose head is text is `text`.
 */
function detectFromHead(name: string, head: () => Buffer, sniffText = true): SourceType | undefined {
  const ext = extname(name).toLowerCase();
  const byExt = DOCUMENT_EXTENSIONS[ext];
  if (byExt === "text") {
    if (ext === ".txt" && looksLikeEmail(head().toString("latin1"), true)) return "email";
    return "text";
  }
  if (byExt) return byExt;
  if (ext === ".json" && looksLikeSlackHistory(head().toString("utf8"))) return "slack";
  if (languageForPath(name)) return "code";
  if (TEXT_FILE_NAMES.has(name)) return "text";
  const bytes = head();
  if (bytes.length === 0) return undefined;
  if (looksLikeEmail(bytes.toString("latin1"), true)) return "email";
  if (sniffText && mayBeSniffedAsText(name) && looksLikeText(bytes)) return "text";
  return undefined;
}

/**
 * True when `head` (the start of a `.json` file) looks like Slack message history:
 * a Slack API `conversations.history` response (`{"ok": true, … "messages": [`) or
 * an array of message objects (`[{"type": "message", … "ts": "…"`).
 */
export function looksLikeSlackHistory(head: string): boolean {
  const t = head.trimStart();
  if (t.startsWith("{")) {
    return /"messages"\s*:\s*\[/.test(t) && (/"ok"\s*:\s*true/.test(t) || /"ts"\s*:\s*"\d+\.\d+"/.test(t));
  }
  if (t.startsWith("[")) {
    return /^\[\s*\{/.test(t) && /"type"\s*:\s*"message"/.test(t) && /"ts"\s*:\s*"\d+\.\d+"/.test(t);
  }
  return false;
}

/** Bytes read from the end of a .zip when its central directory cannot be located. */
const ZIP_TAIL_BYTES = 4 * 1024 * 1024;

/** Largest central directory read when sniffing a .zip (64 MiB: about a million entries). */
const ZIP_MAX_DIRECTORY_BYTES = 64 * 1024 * 1024;

/**
 * Locates a zip's central directory from its End of Central Directory record
 * (PKWARE APPNOTE 4.3.16; the record is in the last 65,557 bytes): `[offset, size]`,
 * or `undefined` when there is no record or the zip is ZIP64 (fields 0xFFFFFFFF).
 */
function centralDirectory(
  read: (position: number, length: number) => Buffer,
  size: number,
): [number, number] | undefined {
  const tailLength = Math.min(size, 65_557);
  const tail = read(size - tailLength, tailLength);
  const at = tail.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
  if (at < 0 || at + 22 > tail.length) return undefined;
  const dirSize = tail.readUInt32LE(at + 12);
  const dirOffset = tail.readUInt32LE(at + 16);
  if (dirSize === 0xffffffff || dirOffset === 0xffffffff || dirOffset + dirSize > size) return undefined;
  return [dirOffset, dirSize];
}

/** True when a zip's central directory bytes name both `channels.json` and `users.json`. */
function namesSlackFiles(directory: Buffer): boolean {
  const names = directory.toString("latin1");
  return names.includes("channels.json") && names.includes("users.json");
}

/**
 * True when a zip (its bytes read through `read`) names both `channels.json` and
 * `users.json` in its central directory (read whole, up to 64 MiB, wherever the
 * entries sit), else in its last 4 MiB.
 */
function zipLooksLikeSlack(read: (position: number, length: number) => Buffer, size: number): boolean {
  const dir = centralDirectory(read, size);
  if (dir && dir[1] <= ZIP_MAX_DIRECTORY_BYTES) return namesSlackFiles(read(dir[0], dir[1]));
  const n = Math.min(size, ZIP_TAIL_BYTES);
  return namesSlackFiles(read(size - n, n));
}

/**
 * True when the `.zip` at `path` looks like a Slack workspace export: its central
 * directory names both `channels.json` and `users.json`. A cheap sniff that reads
 * only the directory; the Slack extractor checks properly. Never throws.
 */
export function isSlackExportZip(path: string): boolean {
  let fd: number | undefined;
  try {
    const size = statSync(path).size;
    const handle = openSync(path, "r");
    fd = handle;
    const read = (position: number, length: number): Buffer => {
      const buf = Buffer.alloc(length);
      const n = readSync(handle, buf, 0, length, position);
      return buf.subarray(0, n);
    };
    return zipLooksLikeSlack(read, size);
  } catch {
    return false;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}
