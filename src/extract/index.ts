/**
 * Extraction stage entry points: find the sources under some paths
 * ({@link discoverSources}) and turn one source into documents ({@link extractFile}).
 */
import { lstat, open, readdir, readFile, realpath, stat } from "node:fs/promises";
import { basename, extname, join, relative, resolve, sep } from "node:path";
import ignore, { type Ignore } from "ignore";
import { displayName } from "../display.js";
import { ExtractionError, KnowledgeLayerError } from "../errors.js";
import type { ExtractedDocument, SourceType } from "../types.js";
import { codeExtractor } from "./code.js";
import {
  type ExtractContext,
  type ExtractOptions,
  type Extractor,
  type ResolvedExtractOptions,
  resolveExtractOptions,
} from "./contract.js";
import { detectSourceType, detectSourceTypeOf, isSlackExport, unsupportedReason } from "./detect.js";
import { docxExtractor } from "./docx.js";
import { emailExtractor } from "./email.js";
import { htmlExtractor } from "./html.js";
import { markdownExtractor } from "./markdown.js";
import { pdfExtractor } from "./pdf.js";
import { slackExtractor } from "./slack/index.js";
import { textExtractor } from "./text.js";
import { stripControlSequences } from "./util.js";

export { codeExtractor } from "./code.js";
export {
  DEFAULT_EXTRACTION_LIMITS,
  type EmailExtractOptions,
  type ExtractContext,
  type ExtractionLimits,
  type ExtractOptions,
  type Extractor,
  type ResolvedExtractOptions,
  resolveExtractOptions,
  type SlackExtractOptions,
} from "./contract.js";
export {
  detectSourceType,
  detectSourceTypeOf,
  isSlackExport,
  isSlackExportZip,
  languageForPath,
  looksLikeEmail,
  looksLikeSlackHistory,
  looksLikeText,
  unsupportedReason,
} from "./detect.js";
export { docxExtractor } from "./docx.js";
export { type AttachmentInfo, emailExtractor } from "./email.js";
export { type HtmlText, htmlExtractor, htmlToText } from "./html.js";
export {
  type FrontMatter,
  frontMatterTags,
  markdownExtractor,
  markdownTitle,
  parseFrontMatter,
} from "./markdown.js";
export { normalizePdfText, pdfExtractor } from "./pdf.js";
export { compareTs, renderSlackText, type SlackContext, slackExtractor } from "./slack/index.js";
export { textExtractor } from "./text.js";

/** The extractor for each source type. */
export const EXTRACTORS: Readonly<Record<SourceType, Extractor>> = {
  markdown: markdownExtractor,
  text: textExtractor,
  html: htmlExtractor,
  pdf: pdfExtractor,
  docx: docxExtractor,
  email: emailExtractor,
  slack: slackExtractor,
  code: codeExtractor,
};

/** Source types whose files are binary containers (not refused by the NUL-byte sniff). */
const BINARY_FORMATS: ReadonlySet<SourceType> = new Set(["pdf", "docx", "slack"]);

/** How deep attachments nest (an email attached to an email attached to …) before they are only listed. */
const MAX_NESTING = 3;

/** Deepest metadata nesting (front matter objects) whose strings are cleaned. */
const MAX_CLEAN_DEPTH = 32;

/** `value` with control sequences stripped from every string in it (arrays and plain objects walked). */
function cleanValue(value: unknown, depth = 0): unknown {
  if (typeof value === "string") return stripControlSequences(value).text;
  if (depth >= MAX_CLEAN_DEPTH || value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.map((v) => cleanValue(v, depth + 1));
  if (Object.getPrototypeOf(value) !== Object.prototype) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = cleanValue(v, depth + 1);
  return out;
}

/**
 * Removes terminal escape sequences and other control characters (see
 * `stripControlSequences`) from what every extractor returns, in one place: the
 * text (segment bounds are remapped so they still cover the same text, and a
 * segment left empty is dropped), the string values of the metadata and the
 * warnings. The `uri` is an identity and is left alone. A document whose text was
 * only control characters is dropped.
 * @throws ExtractionError "file is empty" naming `name` when no document is left.
 */
export function cleanDocuments(name: string, docs: ExtractedDocument[]): ExtractedDocument[] {
  const out: ExtractedDocument[] = [];
  for (const doc of docs) {
    const stripped = stripControlSequences(doc.text);
    if (stripped.text.trim() === "" && doc.text.trim() !== "") continue;
    const clean: ExtractedDocument = {
      ...doc,
      text: stripped.text,
      metadata: cleanValue(doc.metadata) as ExtractedDocument["metadata"],
    };
    if (doc.segments) {
      clean.segments = [];
      for (const seg of doc.segments) {
        const start = stripped.mapOffset(seg.start);
        const end = stripped.mapOffset(seg.end);
        if (end > start || seg.end <= seg.start) clean.segments.push({ ...seg, start, end });
      }
    }
    if (doc.warnings) clean.warnings = doc.warnings.map((w) => stripControlSequences(w).text);
    out.push(clean);
  }
  if (out.length === 0 && docs.length > 0) throw new ExtractionError(name, "file is empty");
  return out;
}

/** Runs the extractor for `type` on `name` and cleans its documents ({@link cleanDocuments}). */
async function runExtractor(
  type: SourceType,
  name: string,
  ctx: ExtractContext,
): Promise<ExtractedDocument[]> {
  return cleanDocuments(name, await EXTRACTORS[type].extract(name, ctx));
}

/** The context for a source at nesting `depth`: options plus the nested-file extractor. */
function contextFor(options: ResolvedExtractOptions, depth: number, bytes?: Uint8Array): ExtractContext {
  const ctx: ExtractContext = { options, bytes };
  if (depth < MAX_NESTING) {
    ctx.extractNested = async (name, nestedBytes, contentType) => {
      const type = detectSourceTypeOf(name, nestedBytes, contentType);
      if (type === undefined || type === "slack") return undefined;
      if (!BINARY_FORMATS.has(type) && isBinaryBytes(nestedBytes)) return undefined;
      return runExtractor(type, name, contextFor(options, depth + 1, nestedBytes));
    };
  }
  return ctx;
}

/**
 * Extracts the documents of in-memory content (an upload, an attachment) with the
 * extractor for its type.
 *
 * @param name file name or pseudo-path; it becomes the document `uri` and
 *   `metadata.path` and names the content in errors. Its extension chooses the type.
 * @param bytes the file content.
 * @param type source type; detected from `name`, the first bytes and `contentType` when omitted.
 * @param options limits and per-format options (see {@link ExtractOptions}).
 * Terminal escape sequences and other control characters are removed from the
 * text and metadata of every document ({@link cleanDocuments}).
 * @throws ExtractionError naming `name` when the type is unsupported, the content is
 *   binary, over a limit or cannot be parsed.
 */
export async function extractBytes(
  name: string,
  bytes: Uint8Array,
  type?: SourceType,
  options: ExtractOptions = {},
  contentType?: string,
): Promise<ExtractedDocument[]> {
  const resolvedOptions = resolveExtractOptions(options);
  const resolved = type ?? detectSourceTypeOf(name, bytes, contentType);
  if (resolved === undefined) {
    throw new ExtractionError(
      name,
      `unsupported file type (${extname(name) || contentType || "no extension"})`,
    );
  }
  if (resolved === "slack" && !/\.(json|zip)$/i.test(name)) {
    throw new ExtractionError(name, "Slack content in memory must be a .zip export or a .json history file");
  }
  if (!BINARY_FORMATS.has(resolved) && isBinaryBytes(bytes)) {
    throw new ExtractionError(
      name,
      "binary file (a NUL byte in the first 8 KB and no UTF-16 byte order mark)",
    );
  }
  return runExtractor(resolved, name, contextFor(resolvedOptions, 0, bytes));
}

/**
 * Extracts the documents of one source: a file, a Slack export folder or .zip.
 *
 * @param path file or Slack export folder; made absolute (document `uri`s and
 *   `metadata.path` are absolute).
 * @param type source type; detected with {@link detectSourceType} when omitted.
 * @param options limits (file size, archive size, pages, messages) and per-format
 *   options (Slack workspace URL, email attachments); see {@link ExtractOptions}.
 * @returns one document for most files; one per channel for a Slack export, one per
 *   message for an mbox, plus one per extracted attachment for an email; terminal
 *   escape sequences and other control characters removed ({@link cleanDocuments}).
 * @throws ExtractionError naming the file when it does not exist, has an
 *   unsupported type, is binary (see `discoverSources`) or not a regular file, is
 *   over a limit, or cannot be parsed (corrupt, encrypted, empty…).
 */
export async function extractFile(
  path: string,
  type?: SourceType,
  options: ExtractOptions = {},
): Promise<ExtractedDocument[]> {
  const resolvedOptions = resolveExtractOptions(options);
  const abs = resolve(path);
  let info: Awaited<ReturnType<typeof stat>>;
  try {
    info = await stat(abs);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const reason =
      code === "ELOOP" ? "symbolic link loop" : code === "EACCES" ? "permission denied" : "file not found";
    throw new ExtractionError(abs, reason, { cause: err });
  }
  if (info.isDirectory() && type === undefined && !isSlackExport(abs)) {
    throw new ExtractionError(
      abs,
      "is a directory (and not a Slack export with channels.json and users.json)",
    );
  }
  const resolved = type ?? detectSourceType(abs);
  if (resolved === undefined) {
    throw new ExtractionError(abs, unsupportedReason(basename(abs)));
  }
  if (!info.isDirectory() && !info.isFile()) {
    throw new ExtractionError(abs, "not a regular file (a pipe, socket or device)");
  }
  if (!BINARY_FORMATS.has(resolved) && info.isFile() && (await isBinaryFile(abs))) {
    throw new ExtractionError(
      abs,
      "binary file (a NUL byte in the first 8 KB and no UTF-16 byte order mark)",
    );
  }
  return runExtractor(resolved, abs, contextFor(resolvedOptions, 0));
}

/** {@link isBinaryFile} for content in memory. */
function isBinaryBytes(bytes: Uint8Array): boolean {
  const head = bytes.subarray(0, BINARY_SNIFF_BYTES);
  const utf16 =
    head.length >= 2 && ((head[0] === 0xff && head[1] === 0xfe) || (head[0] === 0xfe && head[1] === 0xff));
  return !utf16 && head.includes(0);
}

/** A source found by {@link discoverSources}. */
export interface DiscoveredSource {
  /** Absolute path of the file, or of the Slack export folder. */
  path: string;
  type: SourceType;
}

/** A file {@link discoverSources} did not select, with the reason. */
export interface SkippedPath {
  /** Absolute path. */
  path: string;
  /** Why it was skipped, e.g. `binary file`, `unsupported file type (.png)`, `ignored by .gitignore`. */
  reason: string;
}

/** Result of {@link discoverSources}. Both lists are sorted by path. */
export interface Discovery {
  sources: DiscoveredSource[];
  skipped: SkippedPath[];
}

/** Folder names never descended into. */
const ALWAYS_SKIPPED_DIRS = new Set([".git", "node_modules", ".kl"]);

/** Bytes inspected for a NUL byte when deciding whether a file is binary. */
const BINARY_SNIFF_BYTES = 8192;

/**
 * True when the first 8 KB of the file contain a NUL byte and the file does not
 * start with a UTF-16 byte order mark (UTF-16 text is full of NULs and is decoded
 * by `decodeText`). Unreadable files count as not binary.
 */
async function isBinaryFile(path: string): Promise<boolean> {
  let handle: Awaited<ReturnType<typeof open>> | undefined;
  try {
    handle = await open(path, "r");
    const buf = Buffer.alloc(BINARY_SNIFF_BYTES);
    const { bytesRead } = await handle.read(buf, 0, BINARY_SNIFF_BYTES, 0);
    return isBinaryBytes(buf.subarray(0, bytesRead));
  } catch {
    return false;
  } finally {
    await handle?.close();
  }
}

/** `.gitignore` rules of one folder. */
interface IgnoreScope {
  dir: string;
  rules: Ignore;
}

/** Loads `dir/.gitignore`, if any. */
async function loadGitignore(dir: string): Promise<IgnoreScope | undefined> {
  let content: string;
  try {
    content = await readFile(join(dir, ".gitignore"), "utf8");
  } catch {
    return undefined;
  }
  return { dir, rules: ignore().add(content) };
}

/** True when `path` is ignored by any of the `.gitignore` scopes above it. */
function isIgnored(path: string, isDir: boolean, scopes: IgnoreScope[]): boolean {
  for (const scope of scopes) {
    const rel = relative(scope.dir, path);
    if (rel === "" || rel.startsWith("..")) continue;
    const posix = rel.split(sep).join("/");
    if (scope.rules.ignores(isDir ? `${posix}/` : posix)) return true;
  }
  return false;
}

/** Classifies one file into `sources` or `skipped`. */
async function classifyFile(path: string, out: Discovery): Promise<void> {
  const type = detectSourceType(path);
  if (type === undefined) {
    out.skipped.push({ path, reason: unsupportedReason(basename(path)) });
    return;
  }
  if (!BINARY_FORMATS.has(type) && (await isBinaryFile(path))) {
    out.skipped.push({ path, reason: "binary file" });
    return;
  }
  out.sources.push({ path, type });
}

/** Reason given for entries that are not regular files or folders. */
const NOT_REGULAR = "not a regular file (a pipe, socket or device)";

/** True when `path` is `root` or inside it (both real paths). */
function isInside(path: string, root: string): boolean {
  return path === root || path.startsWith(root.endsWith(sep) ? root : root + sep);
}

/**
 * Walks a folder depth-first, honouring `.gitignore` files and the always-skipped
 * folders. Symbolic links are followed only while they stay inside `root` (the
 * real path of the folder given by the user): a link out of it (to `/etc`, `~/.ssh`)
 * is listed as skipped, never read.
 */
async function walk(
  dir: string,
  root: string,
  scopes: IgnoreScope[],
  visited: Set<string>,
  out: Discovery,
): Promise<void> {
  let real: string;
  try {
    real = await realpath(dir);
  } catch {
    return;
  }
  if (visited.has(real)) return;
  visited.add(real);
  const own = await loadGitignore(dir);
  const active = own ? [...scopes, own] : scopes;
  let entries: string[];
  try {
    entries = (await readdir(dir)).sort();
  } catch (err) {
    out.skipped.push({ path: dir, reason: `cannot read folder: ${(err as Error).message}` });
    return;
  }
  for (const name of entries) {
    const path = join(dir, name);
    let link: Awaited<ReturnType<typeof lstat>>;
    try {
      link = await lstat(path);
    } catch {
      out.skipped.push({
        path,
        reason: name.includes("\uFFFD")
          ? "file name is not valid UTF-8 (it cannot be opened by name)"
          : "unreadable",
      });
      continue;
    }
    if (link.isSymbolicLink()) {
      const target = await realpath(path).catch(() => undefined);
      if (target === undefined) {
        out.skipped.push({ path, reason: "broken symbolic link (or a link loop)" });
        continue;
      }
      if (!isInside(target, root)) {
        out.skipped.push({ path, reason: `symbolic link to ${target}, outside the folder (not followed)` });
        continue;
      }
      const targetInfo = await stat(target).catch(() => undefined);
      if (targetInfo?.isFile()) {
        // The file itself is in the folder and is found under its own name.
        out.skipped.push({ path, reason: `symbolic link to ${target} (indexed once, under its own name)` });
        continue;
      }
    }
    let info: Awaited<ReturnType<typeof stat>>;
    try {
      info = link.isSymbolicLink() ? await stat(path) : link; // `visited` breaks cycles
    } catch {
      out.skipped.push({ path, reason: "broken symbolic link (or a link loop)" });
      continue;
    }
    if (info.isDirectory()) {
      if (ALWAYS_SKIPPED_DIRS.has(name)) continue;
      if (isIgnored(path, true, active)) {
        out.skipped.push({ path, reason: "ignored by .gitignore" });
        continue;
      }
      if (isSlackExport(path)) {
        out.sources.push({ path, type: "slack" });
        continue;
      }
      await walk(path, root, active, visited, out);
    } else if (info.isFile()) {
      if (name === ".gitignore") continue;
      if (isIgnored(path, false, active)) {
        out.skipped.push({ path, reason: "ignored by .gitignore" });
        continue;
      }
      await classifyFile(path, out);
    } else {
      out.skipped.push({ path, reason: NOT_REGULAR });
    }
  }
}

/**
 * Finds the ingestible sources under `paths` (files and/or folders).
 *
 * Folders are walked recursively. A Slack export folder (see
 * {@link isSlackExport}) is one source of type `slack` and is not descended into.
 * `.gitignore` files in walked folders are honoured (for the folder and below);
 * `.git`, `node_modules` and `.kl` folders are always skipped silently. Files with
 * an unsupported type, binary files (a NUL byte in the first 8 KB; PDFs exempt)
 * and gitignored paths are reported in `skipped` with a reason, as are pipes,
 * sockets and devices (never opened, so a FIFO cannot hang the walk), broken
 * symbolic links, names that are not valid UTF-8, and symbolic links that lead
 * outside the folder given (not followed: a link to `/etc` in a repository does
 * not pull `/etc` in). A path given explicitly is classified the same way, but
 * `.gitignore` does not apply to it.
 *
 * @returns absolute paths, each listed once, both lists sorted by path.
 * @throws KnowledgeLayerError naming the path when one of `paths` does not exist.
 */
export async function discoverSources(paths: string[]): Promise<Discovery> {
  const out: Discovery = { sources: [], skipped: [] };
  const visited = new Set<string>();
  for (const p of paths) {
    // The real path, so a file reached through a symlink is the same source as the file itself.
    const abs = await realpath(resolve(p)).catch(() => resolve(p));
    let info: Awaited<ReturnType<typeof stat>>;
    try {
      info = await stat(abs);
    } catch (err) {
      throw new KnowledgeLayerError(`path not found: ${displayName(abs)}`, { cause: err });
    }
    if (info.isDirectory()) {
      if (isSlackExport(abs)) out.sources.push({ path: abs, type: "slack" });
      else await walk(abs, abs, [], visited, out);
    } else if (info.isFile()) {
      await classifyFile(abs, out);
    } else {
      out.skipped.push({ path: abs, reason: NOT_REGULAR });
    }
  }
  const bySource = new Map(out.sources.map((s) => [s.path, s]));
  const sources = [...bySource.values()].sort((a, b) => compareStrings(a.path, b.path));
  const taken = new Set(bySource.keys());
  const bySkipped = new Map(out.skipped.filter((s) => !taken.has(s.path)).map((s) => [s.path, s]));
  const skipped = [...bySkipped.values()].sort((a, b) => compareStrings(a.path, b.path));
  return { sources, skipped };
}

/** Code-unit order, independent of locale. */
function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
