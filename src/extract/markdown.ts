/**
 * Markdown extractor: the file content unchanged (chunkers read headings from it),
 * with the title and YAML front matter lifted into metadata.
 */
import type { ExtractedDocument } from "../types.js";
import type { ExtractContext, Extractor } from "./contract.js";
import { assertNotEmpty, compact, decodeText, fileTitle, nonBlank, readSource } from "./util.js";

/** Front matter found at the top of a Markdown file. */
export interface FrontMatter {
  /** `key: value` pairs (values unquoted, trimmed); nested and list entries are not parsed. */
  fields: Record<string, string>;
  /** Offset (UTF-16 code units) just past the closing `---` line; 0 when there is no front matter. */
  end: number;
}

/**
 * Parses YAML front matter (`---` on the first line, closed by `---` or `...`) in a
 * simple way: top-level `key: value` lines only, surrounding quotes removed. Keys
 * without a scalar value (nested maps, lists) are left out.
 * @returns `undefined` when the text has no (closed) front matter block.
 */
export function parseFrontMatter(text: string): FrontMatter | undefined {
  const open = /^---[ \t]*\r?\n/.exec(text);
  if (!open) return undefined;
  const close = /^(?:---|\.\.\.)[ \t]*(?:\r?\n|$)/m;
  const body = text.slice(open[0].length);
  const m = close.exec(body);
  if (!m) return undefined;
  const block = body.slice(0, m.index);
  const fields: Record<string, string> = {};
  for (const line of block.split(/\r?\n/)) {
    const kv = /^([A-Za-z_][\w.-]*)[ \t]*:[ \t]*(.*?)[ \t]*$/.exec(line);
    if (!kv?.[1]) continue;
    let value = kv[2] ?? "";
    if (value === "" || value === "|" || value === ">") continue;
    if (
      value.length >= 2 &&
      ((value.startsWith('"') && value.endsWith('"')) || (value.startsWith("'") && value.endsWith("'")))
    ) {
      value = value.slice(1, -1);
    }
    fields[kv[1]] = value;
  }
  return { fields, end: open[0].length + m.index + m[0].length };
}

/** Removes inline Markdown from a heading: `{#id}` attributes, code ticks, links, images, emphasis, HTML tags. */
function plainHeading(s: string): string {
  return s
    .replace(/\s*\{\s*[#.][^{}]*\}\s*$/, "")
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/<[^>]+>/g, "")
    .replace(/`+([^`]*)`+/g, "$1")
    .replace(/(\*\*|__)(.+?)\1/g, "$2")
    .replace(/(^|\W)[*_](.+?)[*_](?=\W|$)/g, "$1$2")
    .replace(/\s+/g, " ")
    .trim();
}

/**
 * The first level-1 heading of a Markdown text: ATX (`# Title`, optional closing
 * `#`s) or Setext (`Title` underlined with `===`). Headings inside fenced code
 * blocks and inside front matter are ignored. Inline Markdown is stripped.
 * @returns the heading text, or `undefined` when there is no H1.
 */
export function markdownTitle(text: string): string | undefined {
  const fm = parseFrontMatter(text);
  const lines = text.slice(fm?.end ?? 0).split(/\r?\n/);
  let fence: string | undefined;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? "";
    const fenceMatch = /^ {0,3}(`{3,}|~{3,})/.exec(line);
    if (fenceMatch?.[1]) {
      const marker = fenceMatch[1];
      if (fence === undefined) fence = marker;
      else if (marker[0] === fence[0] && marker.length >= fence.length) fence = undefined;
      continue;
    }
    if (fence !== undefined) continue;
    const atx = /^ {0,3}#(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/.exec(line);
    if (atx) {
      const title = nonBlank(plainHeading(atx[1] ?? ""));
      if (title) return title;
      continue;
    }
    const next = lines[i + 1];
    if (
      next !== undefined &&
      /^ {0,3}=+[ \t]*$/.test(next) &&
      line.trim() !== "" &&
      !/^ {0,3}([-*+>]|\d+[.)])\s/.test(line) &&
      !/^( {4}|\t)/.test(line)
    ) {
      const title = nonBlank(plainHeading(line));
      if (title) return title;
    }
  }
  return undefined;
}

/**
 * Extracts a Markdown file. `text` is the file content unchanged (decoded as UTF-8,
 * invalid bytes → U+FFFD, BOM dropped), so offsets map into the file and the
 * document chunker can read headings from it. Front matter stays in the text.
 * Metadata: `path`, `type: "markdown"`, `title` (front matter `title`, else the
 * first H1, else the file name), `frontMatter` (`key: value` map, when present).
 * @throws ExtractionError "file is empty" for a 0-byte or whitespace-only file, or when unreadable.
 */
export const markdownExtractor: Extractor = {
  type: "markdown",
  async extract(path: string, ctx: ExtractContext): Promise<ExtractedDocument[]> {
    const text = decodeText(await readSource(path, ctx));
    assertNotEmpty(path, text);
    const fm = parseFrontMatter(text);
    const frontMatter = fm && Object.keys(fm.fields).length > 0 ? fm.fields : undefined;
    const title = nonBlank(frontMatter?.title) ?? markdownTitle(text) ?? fileTitle(path);
    const metadata = compact({ path, type: "markdown" as const, title, frontMatter });
    return [{ uri: path, text, metadata }];
  },
};
