/**
 * Source-type detection: by file extension, with a content sniff for mail files
 * that carry no `.eml` extension (mbox-style files starting with a `From ` line).
 */
import { closeSync, openSync, readSync, statSync } from "node:fs";
import { basename, extname, join } from "node:path";
import type { SourceType } from "../types.js";

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
  ".html": "html",
  ".htm": "html",
  ".xhtml": "html",
  ".pdf": "pdf",
  ".eml": "email",
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
};

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
  /^(Return-Path|Received|From|To|Date|Subject|Message-ID|Delivered-To|MIME-Version|X-[A-Za-z0-9-]+):/i;

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
 * By extension: `.md .markdown .mdx` → markdown; `.txt .text .rst .log .adoc .org` →
 * text; `.html .htm .xhtml` → html; `.pdf` → pdf; `.eml` → email; source-code
 * extensions (see {@link languageForPath}) → code. A Slack export folder → slack.
 * Content sniffing (reads at most 4 KB): a `.txt` file or a file with no or an
 * unknown extension that starts with an mbox `From ` line followed by mail
 * headers, or directly with at least two RFC 5322 header lines (`Return-Path:`,
 * `Received:`, `From:` …), → email (the SpamAssassin corpus is stored this way).
 *
 * @returns the type, or `undefined` for an unsupported file (callers skip it).
 *   Never throws; an unreadable file is simply not sniffed.
 */
export function detectSourceType(path: string): SourceType | undefined {
  const ext = extname(path).toLowerCase();
  const byExt = DOCUMENT_EXTENSIONS[ext];
  if (byExt === "text") {
    if (ext === ".txt" && looksLikeEmail(readHead(path).toString("latin1"), true)) return "email";
    return "text";
  }
  if (byExt) return byExt;
  if (languageForPath(path)) return "code";
  if (isSlackExport(path)) return "slack";
  try {
    if (!statSync(path).isFile()) return undefined;
  } catch {
    return undefined;
  }
  if (looksLikeEmail(readHead(path).toString("latin1"), true)) return "email";
  return undefined;
}
