/**
 * HTML extractor: main content as plain text with Markdown headings (via turndown),
 * so the document chunker sees the section structure.
 */
import TurndownService from "turndown";
import { firstHeadingTitle } from "../chunk/markdown-blocks.js";
import { ExtractionError } from "../errors.js";
import type { ExtractedDocument } from "../types.js";
import type { ExtractContext, Extractor } from "./contract.js";
import {
  asExtractionError,
  assertNotEmpty,
  compact,
  decodeAs,
  decodeText,
  fileTitle,
  nonBlank,
  readSource,
} from "./util.js";

/** Result of {@link htmlToText}. Absent fields are left out (never `undefined`). */
export interface HtmlText {
  /** Plain text: blocks separated by blank lines, headings as `#`…`######` lines. */
  text: string;
  /** Text of the `<title>` element, when present and not blank. */
  title?: string;
  /**
   * The page's canonical URL: `<link rel="canonical" href>`, else `<meta property="og:url">`.
   * A relative canonical href is resolved against `<base href>` or `og:url` when
   * one of them is an absolute URL, else kept as written.
   */
  canonicalUrl?: string;
  /** `<meta name="description" content>`, else `<meta property="og:description">`. */
  description?: string;
  /** Language of the page: the `lang` (or `xml:lang`) attribute of `<html>`, e.g. `en`, `zh-CN`. */
  lang?: string;
}

/** Head fields of {@link HtmlText} read from the markup. */
type HeadFields = Pick<HtmlText, "canonicalUrl" | "description" | "lang">;

/** Most characters scanned for head tags (the part before `</head>` or `<body>`). */
const HEAD_SCAN_LIMIT = 1024 * 1024;

/** Decodes the character references that occur in attribute values. */
function decodeEntities(s: string): string {
  return s
    .replace(/&#x([0-9a-f]+);/gi, (m, hex: string) => safeCodePoint(Number.parseInt(hex, 16)) ?? m)
    .replace(/&#(\d+);/g, (m, dec: string) => safeCodePoint(Number(dec)) ?? m)
    .replace(
      /&(quot|apos|lt|gt|nbsp|amp);/gi,
      (_m, name: string) => NAMED_ENTITIES[name.toLowerCase()] ?? "",
    );
}

const NAMED_ENTITIES: Readonly<Record<string, string>> = {
  quot: '"',
  apos: "'",
  lt: "<",
  gt: ">",
  nbsp: " ",
  amp: "&",
};

/** The attributes of one start tag (`<meta name="x" content='y'>`), names lower-cased, values decoded. */
function attributes(tag: string): Map<string, string> {
  const attrs = new Map<string, string>();
  const body = tag.replace(/^<[a-zA-Z][\w:-]*/, "").replace(/\/?>$/, "");
  for (const m of body.matchAll(/([^\s"'>/=]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+)))?/g)) {
    const name = (m[1] ?? "").toLowerCase();
    if (!attrs.has(name)) attrs.set(name, decodeEntities(m[2] ?? m[3] ?? m[4] ?? ""));
  }
  return attrs;
}

/** `href` resolved against `base` when `href` is relative and `base` an absolute http(s) URL. */
function resolveUrl(href: string, base: string | undefined): string {
  if (/^[a-z][a-z\d+.-]*:/i.test(href) || base === undefined || !/^https?:\/\//i.test(base)) return href;
  try {
    return new URL(href, base).href;
  } catch {
    return href;
  }
}

/**
 * Reads `canonicalUrl`, `description` and `lang` from the markup before `<body>`
 * (comments, scripts and styles skipped). The first occurrence of each tag wins.
 */
function headFields(html: string): HeadFields {
  const bodyAt = html.search(/<\/head\s*>|<body[\s>]/i);
  const head = html
    .slice(0, Math.min(bodyAt >= 0 ? bodyAt : html.length, HEAD_SCAN_LIMIT))
    .replace(/<!--[\s\S]*?-->/g, " ")
    .replace(/<(script|style|template|noscript)\b[\s\S]*?<\/\1\s*>/gi, " ");
  let canonical: string | undefined;
  let ogUrl: string | undefined;
  let base: string | undefined;
  let description: string | undefined;
  let ogDescription: string | undefined;
  let lang: string | undefined;
  for (const m of head.matchAll(/<(html|link|meta|base)\b[^>]*>/gi)) {
    const attrs = attributes(m[0]);
    const tag = (m[1] ?? "").toLowerCase();
    if (tag === "html") {
      lang ??= nonBlank(attrs.get("lang")) ?? nonBlank(attrs.get("xml:lang"));
    } else if (tag === "base") {
      base ??= nonBlank(attrs.get("href"));
    } else if (tag === "link") {
      const rel = (attrs.get("rel") ?? "").toLowerCase().split(/\s+/);
      if (rel.includes("canonical")) canonical ??= nonBlank(attrs.get("href"));
    } else {
      const key = (attrs.get("property") ?? attrs.get("name") ?? "").toLowerCase().trim();
      const content = nonBlank(attrs.get("content")?.replace(/\s+/g, " "));
      if (key === "og:url") ogUrl ??= content;
      else if (key === "description") description ??= content;
      else if (key === "og:description") ogDescription ??= content;
    }
  }
  const canonicalUrl = canonical !== undefined ? resolveUrl(canonical, base ?? ogUrl) : ogUrl;
  return compact({ canonicalUrl, description: description ?? ogDescription, lang });
}

/** Elements whose content is never text a reader sees. */
const DROPPED_TAGS = [
  "script",
  "style",
  "nav",
  "template",
  "noscript",
  "iframe",
  "object",
  "embed",
  "svg",
  "canvas",
  "button",
  "select",
  "head",
  "meta",
  "link",
] as const;

/** class/id tokens and roles that mark navigation chrome rather than content. */
const CHROME_TOKENS = new Set(["navheader", "navfooter", "navbar", "breadcrumb", "breadcrumbs", "skip-link"]);
const CHROME_ROLES = new Set(["navigation", "banner", "contentinfo", "search"]);

/** A minimal view of the DOM node turndown passes to filters and replacements. */
interface DomNode {
  nodeName: string;
  textContent: string | null;
  getAttribute(name: string): string | null;
  parentNode: DomNode | null;
  childNodes: ArrayLike<DomNode>;
}

function isChrome(node: DomNode): boolean {
  const role = node.getAttribute("role");
  if (role && CHROME_ROLES.has(role.toLowerCase())) return true;
  if (node.getAttribute("aria-hidden") === "true") return true;
  if (node.getAttribute("hidden") !== null) return true;
  const tokens = `${node.getAttribute("class") ?? ""} ${node.getAttribute("id") ?? ""}`.toLowerCase();
  for (const token of tokens.split(/\s+/)) {
    if (CHROME_TOKENS.has(token)) return true;
  }
  return false;
}

/** True when `row` is the first `<tr>` of its own `<table>` (rows of nested tables are not counted). */
function isFirstRow(row: DomNode): boolean {
  let table = row.parentNode;
  while (table && table.nodeName !== "TABLE") table = table.parentNode;
  if (!table) return false;
  const first = (node: DomNode): DomNode | undefined => {
    for (const child of Array.from(node.childNodes)) {
      if (child.nodeName === "TR") return child;
      if (child.nodeName === "TABLE") continue;
      const found = first(child);
      if (found) return found;
    }
    return undefined;
  };
  return first(table) === row;
}

function isMainNode(node: DomNode): boolean {
  return node.nodeName === "MAIN" || node.getAttribute("role")?.toLowerCase() === "main";
}

/** Collapses inline whitespace (turndown keeps text nodes' spacing mostly as is). */
function inline(content: string): string {
  return content.replace(/\s+/g, " ").trim();
}

/**
 * Builds a turndown service producing plain text: headings as ATX Markdown,
 * lists as `- ` / `1. ` lines, fenced code blocks, table rows as lines with cells
 * separated by ` | `, and no emphasis, link or escape syntax. `capture` receives the
 * converted `<main>` and `<title>` content.
 */
function createService(capture: { main?: string; title?: string }): TurndownService {
  const service = new TurndownService({
    headingStyle: "atx",
    codeBlockStyle: "fenced",
    bulletListMarker: "-",
    hr: "",
  });
  // Plain text out: do not backslash-escape Markdown characters.
  service.escape = (s: string) => s;
  service.remove([...DROPPED_TAGS] as unknown as TurndownService.TagName[]);
  service.addRule("chrome", {
    filter: (node) => isChrome(node as unknown as DomNode),
    replacement: () => "",
  });
  service.addRule("title", {
    filter: ["title"],
    replacement: (_content, node) => {
      const t = nonBlank(inline((node as unknown as DomNode).textContent ?? ""));
      if (t && capture.title === undefined) capture.title = t;
      return "";
    },
  });
  service.addRule("main", {
    filter: (node) => isMainNode(node as unknown as DomNode),
    replacement: (content) => {
      if (capture.main === undefined && content.trim() !== "") capture.main = content;
      return `\n\n${content}\n\n`;
    },
  });
  service.addRule("plainInline", {
    filter: [
      "a",
      "b",
      "strong",
      "em",
      "i",
      "u",
      "s",
      "del",
      "strike",
      "mark",
      "small",
      "span",
      "abbr",
      "cite",
    ],
    replacement: (content) => content,
  });
  service.addRule("preformatted", {
    filter: ["pre"],
    replacement: (_content, node) => {
      const code = ((node as unknown as DomNode).textContent ?? "").replace(/^\n+|\s+$/g, "");
      if (code === "") return "";
      const fence = code.includes("```") ? "~~~" : "```";
      return `\n\n${fence}\n${code}\n${fence}\n\n`;
    },
  });
  service.addRule("inlineCode", {
    filter: (node) => node.nodeName === "CODE" && (node as unknown as DomNode).parentNode?.nodeName !== "PRE",
    replacement: (content) => content,
  });
  service.addRule("image", {
    filter: ["img"],
    replacement: () => "",
  });
  service.addRule("lineBreak", {
    filter: ["br"],
    replacement: () => "\n",
  });
  service.addRule("listItem", {
    filter: ["li"],
    replacement: (content, node) => {
      const li = node as unknown as DomNode;
      const parent = li.parentNode;
      let prefix = "- ";
      if (parent?.nodeName === "OL") {
        const start = Number(parent.getAttribute("start") ?? "1");
        let index = 0;
        for (const child of Array.from(parent.childNodes)) {
          if (child === li) break;
          if (child.nodeName === "LI") index++;
        }
        prefix = `${(Number.isFinite(start) ? start : 1) + index}. `;
      }
      const body = content.replace(/^\n+|\n+$/g, "").replace(/\n/g, `\n${" ".repeat(prefix.length)}`);
      return `${prefix}${body}\n`;
    },
  });
  service.addRule("tableCell", {
    filter: ["td", "th"],
    replacement: (content) => ` ${inline(content)} |`,
  });
  service.addRule("tableRow", {
    filter: ["tr"],
    replacement: (content, node) => {
      const cells = content
        .split("|")
        .map((c) => c.trim())
        .filter((c) => c !== "");
      if (cells.length === 0) return "";
      // The first row of a table of two or more columns is its header: a GFM delimiter row after
      // it makes the rows a table for DOCUMENT chunking, which repeats the header in every chunk.
      const header =
        cells.length > 1 && isFirstRow(node as unknown as DomNode)
          ? `\n${cells.map(() => "---").join(" | ")}`
          : "";
      return `\n${cells.join(" | ")}${header}\n`;
    },
  });
  service.addRule("definitionTerm", {
    filter: ["dt"],
    replacement: (content) => `\n${inline(content)}\n`,
  });
  service.addRule("definition", {
    filter: ["dd"],
    replacement: (content) => `\n${content.trim()}\n`,
  });
  return service;
}

/** Tidies converter output: no trailing spaces, at most one blank line in a row. */
function tidy(text: string): string {
  return text
    .replace(/\r\n?/g, "\n")
    .replace(/\u00a0/g, " ")
    .replace(/[ \t]+$/gm, "")
    .replace(/\n{3,}/g, "\n\n")
    .trim();
}

/** The character for a code point, or `undefined` when it is not a valid scalar value. */
function safeCodePoint(cp: number): string | undefined {
  if (!Number.isInteger(cp) || cp <= 0 || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return undefined;
  return String.fromCodePoint(cp);
}

/**
 * Last-resort conversion when the DOM converter fails (e.g. pathological nesting):
 * non-content elements are dropped, headings still become `#` lines, block ends
 * become line breaks and the remaining tags are removed.
 */
function stripTags(html: string): string {
  return html
    .replace(/<!--[\s\S]*?-->/g, " ")
    .replace(
      /<(script|style|template|noscript|title|head|nav|svg|iframe|object|canvas|button|select)\b[\s\S]*?<\/\1\s*>/gi,
      " ",
    )
    .replace(/<h([1-6])\b[^>]*>/gi, (_m, level: string) => `\n\n${"#".repeat(Number(level))} `)
    .replace(/<\/h[1-6]\s*>/gi, "\n\n")
    .replace(/<(br|\/p|\/div|\/li|\/tr|\/table)\b[^>]*>/gi, "\n")
    .replace(/<[^>]*>/g, " ")
    .replace(/&nbsp;/g, " ")
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&quot;/g, '"')
    .replace(/&#x([0-9a-f]+);/gi, (m, hex: string) => safeCodePoint(Number.parseInt(hex, 16)) ?? m)
    .replace(/&#(\d+);/g, (m, dec: string) => safeCodePoint(Number(dec)) ?? m)
    .replace(/&amp;/g, "&")
    .replace(/[ \t]+/g, " ")
    .replace(/^ /gm, "");
}

/** Elements that never have a closing tag. */
const VOID_TAGS = new Set([
  "area",
  "base",
  "br",
  "col",
  "embed",
  "hr",
  "img",
  "input",
  "link",
  "meta",
  "source",
  "track",
  "wbr",
]);

/** Nesting depth beyond which the DOM converter is not used (its cost grows quadratically). */
const MAX_NESTING = 1000;

/** True when the tag nesting of `html` exceeds `limit` (approximate, linear scan). */
function nestsDeeperThan(html: string, limit: number): boolean {
  let depth = 0;
  for (const m of html.matchAll(/<(\/?)([a-zA-Z][\w:-]*)[^>]*?(\/?)>/g)) {
    const name = (m[2] ?? "").toLowerCase();
    if (VOID_TAGS.has(name) || m[3] === "/") continue;
    depth += m[1] === "/" ? -1 : 1;
    if (depth > limit) return true;
    if (depth < 0) depth = 0;
  }
  return false;
}

/**
 * Converts an HTML string to plain text for indexing.
 *
 * Drops `script`, `style`, `nav`, `template`, `noscript` (and other non-content
 * elements: iframes, SVG, forms controls, navigation chrome by role/class). When
 * the page has a `<main>` element (or `role="main"`), only its content is kept.
 * Headings become `# `…`###### ` lines, paragraphs and other blocks are separated
 * by blank lines (so words of adjacent blocks are never glued), list items become
 * `- ` lines, table rows become lines with ` | ` between cells (after a table's first
 * row of two or more cells, a `--- | ---` delimiter row, so the rows read as a GFM
 * table with that row as its header), `<br>` a newline,
 * and entities are decoded once. Links keep only their text; emphasis markers
 * are not added. HTML nested more than 1000 levels deep (or that the converter
 * cannot handle) is reduced by stripping tags instead. Besides the text: the
 * `<title>`, the canonical URL, the meta description and the `<html lang>`
 * (see {@link HtmlText}). Never throws.
 */
export function htmlToText(html: string): HtmlText {
  const capture: { main?: string; title?: string } = {};
  let text: string;
  let title: string | undefined;
  try {
    if (nestsDeeperThan(html, MAX_NESTING)) throw new Error("HTML nested too deeply");
    const full = createService(capture).turndown(html);
    text = capture.main ?? full;
    title = capture.title;
  } catch {
    // Pathological input (e.g. nesting deep enough to overflow the stack): strip tags.
    text = stripTags(html);
    title = /<title[^>]*>([\s\S]*?)<\/title>/i.exec(html)?.[1];
  }
  return compact({ text: tidy(text), title: nonBlank(title?.replace(/\s+/g, " ")), ...headFields(html) });
}

/**
 * The charset label of a `<meta charset>`, `<meta http-equiv="Content-Type"
 * content="…; charset=…">` or `<?xml encoding>` declaration in the first 2 KiB,
 * lower-cased; `undefined` when there is none.
 */
function declaredCharset(bytes: Uint8Array): string | undefined {
  const head = Buffer.from(bytes.buffer, bytes.byteOffset, Math.min(bytes.byteLength, 2048)).toString(
    "latin1",
  );
  const m =
    /<meta[^>]+charset\s*=\s*["']?([\w.:-]+)/i.exec(head) ??
    /<\?xml[^>]+encoding\s*=\s*["']([\w.:-]+)/i.exec(head);
  return m?.[1]?.toLowerCase();
}

/**
 * Decodes HTML bytes, as browsers do (WHATWG Encoding Standard / HTML encoding
 * sniffing), in this order:
 *
 * 1. A byte order mark (UTF-8, UTF-16LE, UTF-16BE) wins.
 * 2. A declared charset (`<meta charset>`, `http-equiv` Content-Type, `<?xml
 *    encoding>`) that Node can decode wins: UTF-8 with U+FFFD for invalid bytes,
 *    `iso-8859-1`/`us-ascii` as windows-1252, a UTF-16 label (impossible in an
 *    ASCII-compatible declaration) as UTF-8.
 * 3. Undeclared (or an unknown label): {@link decodeText} with markup skipped for
 *    detection: valid or mostly UTF-8 as UTF-8, else the charset chardet detects,
 *    windows-1252 as the last resort (the browsers' default for Western pages).
 */
function decodeHtml(bytes: Uint8Array): string {
  if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf)
    return new TextDecoder("utf-8").decode(bytes);
  if (bytes[0] === 0xff && bytes[1] === 0xfe) return new TextDecoder("utf-16le").decode(bytes);
  if (bytes[0] === 0xfe && bytes[1] === 0xff) return new TextDecoder("utf-16be").decode(bytes);
  const label = declaredCharset(bytes);
  if (label !== undefined && /^utf-?16/.test(label)) return new TextDecoder("utf-8").decode(bytes);
  const declared = label === undefined ? undefined : decodeAs(bytes, label);
  return declared ?? decodeText(bytes, { markup: true });
}

/**
 * Extracts an HTML file with {@link htmlToText}.
 * Metadata: `path`, `type: "html"`, `title` (`<title>`, else the first level-1 heading (CommonMark),
 * else the file name); when the page declares them: `canonicalUrl`
 * (`<link rel="canonical">`, else `og:url`), `description` (meta description),
 * `lang` (`<html lang>`).
 * @throws ExtractionError "file is empty" for a blank file, "no text content" when
 *   nothing readable remains after conversion, or when unreadable.
 */
export const htmlExtractor: Extractor = {
  type: "html",
  async extract(path: string, ctx: ExtractContext): Promise<ExtractedDocument[]> {
    const html = decodeHtml(await readSource(path, ctx));
    assertNotEmpty(path, html);
    let converted: HtmlText;
    try {
      converted = htmlToText(html);
    } catch (err) {
      throw asExtractionError(path, err, "cannot convert HTML");
    }
    if (converted.text === "") throw new ExtractionError(path, "no text content");
    const title = converted.title ?? firstHeadingTitle(converted.text, 1) ?? fileTitle(path);
    const metadata = compact({
      path,
      type: "html" as const,
      title,
      canonicalUrl: converted.canonicalUrl,
      description: converted.description,
      lang: converted.lang,
    });
    return [{ uri: path, text: converted.text, metadata }];
  },
};
