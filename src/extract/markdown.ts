/**
 * Markdown extractor: the file content unchanged (chunkers read headings from it),
 * with the title and the front matter (YAML `---`, or simple TOML `+++`) lifted
 * into metadata.
 */
import { parseDocument, visit } from "yaml";
import { markdownHeadings } from "../chunk/markdown-blocks.js";
import type { ExtractedDocument } from "../types.js";
import type { ExtractContext, Extractor } from "./contract.js";
import { assertNotEmpty, compact, decodeText, fileTitle, nonBlank, readSource } from "./util.js";

/** A JSON value, as front matter values are stored in metadata. */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

/** Front matter found at the top of a Markdown file. */
export interface FrontMatter {
  /** `yaml` for a `---` block, `toml` for a `+++` block. */
  format: "yaml" | "toml";
  /**
   * The parsed mapping with JSON-serialisable values: nested maps and lists as
   * objects and arrays, a date alone as `YYYY-MM-DD`, a date-time as an ISO-8601 UTC
   * string, `.inf`/`.nan` as strings.
   * `{}` when the block is empty or could not be parsed (see `error`).
   */
  data: Record<string, JsonValue>;
  /**
   * The top-level scalar entries of `data` as strings (`version: 2` → `"2"`);
   * lists and nested maps are left out. Kept for callers that want flat values.
   */
  fields: Record<string, string>;
  /** Why the block could not be parsed (`data` is then `{}`); absent when it parsed. */
  error?: string;
  /**
   * Set when values nested deeper than 20 levels ({@link MAX_FRONT_MATTER_DEPTH}) were
   * dropped from `data` (e.g. a self-referencing YAML alias): says so, for a warning.
   */
  truncated?: string;
  /** Offset (UTF-16 code units) just past the closing `---`/`...`/`+++` line; 0 when there is no front matter. */
  end: number;
}

/** A front matter block before parsing: its format, raw body and where it ends. */
interface FrontMatterBlock {
  format: "yaml" | "toml";
  body: string;
  end: number;
}

/**
 * Finds the front matter block at the very top of `text`: `---` … `---` (or `...`)
 * for YAML, `+++` … `+++` for TOML. Only an unclosed or absent block yields `undefined`.
 */
function frontMatterBlock(text: string): FrontMatterBlock | undefined {
  const open = /^(---|\+\+\+)[ \t]*\r?\n/.exec(text);
  if (!open) return undefined;
  const format = open[1] === "+++" ? "toml" : "yaml";
  const close = format === "toml" ? /^\+\+\+[ \t]*(?:\r?\n|$)/m : /^(?:---|\.\.\.)[ \t]*(?:\r?\n|$)/m;
  const rest = text.slice(open[0].length);
  const m = close.exec(rest);
  if (!m) return undefined;
  return { format, body: rest.slice(0, m.index), end: open[0].length + m.index + m[0].length };
}

/** Characters at most used from a parser message (some quote the whole offending input). */
const MAX_MESSAGE = 200;

/** Sets `obj[key] = value` as an own data property (also for a `__proto__` key). */
function define(obj: Record<string, JsonValue>, key: string, value: JsonValue): void {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

/**
 * Deepest nesting kept in front matter values: a value inside more than this many
 * lists/maps (counted from the top-level mapping's values, which are at depth 1) is
 * dropped. Real front matter is a few levels deep; a self-referencing alias
 * (`a: &x [*x]`) would otherwise become a huge nested value in the metadata.
 */
const MAX_FRONT_MATTER_DEPTH = 20;

/** Marks a value dropped by {@link toJson} for being nested too deeply. */
const TOO_DEEP = Symbol("too deep");

/**
 * Converts a value produced by the YAML parser into JSON: dates → ISO strings
 * (an invalid date → `null`), non-finite numbers → `"Infinity"`/`"NaN"`, bigints
 * and other objects → strings, maps → objects with string keys. `undefined` entries
 * of objects are dropped (in arrays they become `null`). Values at a depth over
 * {@link MAX_FRONT_MATTER_DEPTH} are dropped (left out of their list or map) and
 * `state.truncated` is set.
 */
function toJson(
  value: unknown,
  depth: number,
  state: { truncated: boolean },
): JsonValue | undefined | typeof TOO_DEEP {
  if (depth > MAX_FRONT_MATTER_DEPTH) {
    state.truncated = true;
    return TOO_DEEP;
  }
  if (value === null) return null;
  switch (typeof value) {
    case "string":
    case "boolean":
      return value;
    case "number":
      return Number.isFinite(value) ? value : String(value);
    case "bigint":
      return value.toString();
    case "undefined":
    case "function":
    case "symbol":
      return undefined;
  }
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? null : value.toISOString();
  if (Array.isArray(value) || value instanceof Set) {
    const items: JsonValue[] = [];
    for (const v of value as Iterable<unknown>) {
      const json = toJson(v, depth + 1, state);
      if (json !== TOO_DEEP) items.push(json ?? null);
    }
    return items;
  }
  const out: Record<string, JsonValue> = {};
  const entries = value instanceof Map ? [...value.entries()] : Object.entries(value as object);
  for (const [k, v] of entries) {
    const json = toJson(v, depth + 1, state);
    if (json !== undefined && json !== TOO_DEEP) define(out, String(k), json);
  }
  return out;
}

/**
 * The top-level `key: value` lines of front matter that is not valid YAML (e.g. an
 * unquoted `description: Use when: …`, common in hand-written files): the value is
 * the rest of the line, surrounding quotes removed; indented, list and empty-valued
 * lines are left out.
 */
function looseFields(body: string): Record<string, JsonValue> {
  const out: Record<string, JsonValue> = {};
  for (const line of body.split(/\r?\n/)) {
    const kv = /^([A-Za-z_][\w.-]*)[ \t]*:[ \t]+(.*?)[ \t]*$/.exec(line);
    if (!kv?.[1] || !kv[2] || kv[2] === "|" || kv[2] === ">") continue;
    const v = kv[2];
    const quoted = v.length >= 2 && (v[0] === '"' || v[0] === "'") && v.endsWith(v[0]);
    define(out, kv[1], quoted ? v.slice(1, -1) : v);
  }
  return out;
}

/** A parsed front matter body: see the fields of the same name in {@link FrontMatter}. */
type ParsedBody = Pick<FrontMatter, "data" | "error" | "truncated">;

/** Parses a YAML front matter body; `line0` is the file line (1-based) of its first line, for messages. */
function parseYaml(body: string, line0: number): ParsedBody {
  const doc = parseDocument(body, {
    customTags: ["timestamp"],
    uniqueKeys: false,
    prettyErrors: false,
  });
  const first = doc.errors[0];
  if (first) {
    const before = body.slice(0, first.pos[0]);
    const line = line0 + (before.match(/\n/g)?.length ?? 0);
    const message = first.message.split("\n")[0]?.slice(0, MAX_MESSAGE) ?? "parse error";
    return { data: looseFields(body), error: `${message} (line ${line})` };
  }
  // A date alone (`date: 2024-03-01`) stays a date, `YYYY-MM-DD`, not midnight UTC as a
  // date-time: equality filters on it then match what was written.
  visit(doc, {
    Scalar(_key, node) {
      if (node.value instanceof Date && /^\s*\d{4}-\d{2}-\d{2}\s*$/.test(node.source ?? "")) {
        const time = node.value.getTime();
        if (!Number.isNaN(time)) node.value = node.value.toISOString().slice(0, 10);
      }
    },
  });
  let js: unknown;
  try {
    js = doc.toJS({ maxAliasCount: 100 });
  } catch (err) {
    return { data: {}, error: (err instanceof Error ? err.message : String(err)).slice(0, MAX_MESSAGE) };
  }
  if (js === null || js === undefined) return { data: {} };
  if (typeof js !== "object" || Array.isArray(js) || js instanceof Date) {
    return { data: {}, error: "not a mapping of keys to values" };
  }
  const state = { truncated: false };
  const data = toJson(js, 0, state) as Record<string, JsonValue>;
  if (!state.truncated) return { data };
  return {
    data,
    truncated: `values nested deeper than ${MAX_FRONT_MATTER_DEPTH} levels were dropped (a self-referencing alias?)`,
  };
}

/** A TOML value in the simple subset {@link parseToml} reads; `undefined` when not understood. */
function tomlValue(raw: string): JsonValue | undefined {
  const v = raw.trim();
  if (/^"(?:[^"\\]|\\.)*"$/.test(v)) {
    try {
      return JSON.parse(v) as string;
    } catch {
      return undefined;
    }
  }
  if (/^'[^']*'$/.test(v)) return v.slice(1, -1);
  if (v === "true" || v === "false") return v === "true";
  if (/^[+-]?\d[\d_]*(?:\.\d+)?(?:[eE][+-]?\d+)?$/.test(v)) return Number(v.replace(/_/g, ""));
  if (/^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:\d{2})?)?$/.test(v)) {
    // A local date-time (no offset) is read as UTC, as YAML timestamps are, never in the host's zone.
    const local = /[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?$/.test(v);
    const date = new Date(`${v.replace(" ", "T")}${local ? "Z" : ""}`);
    return Number.isNaN(date.getTime()) ? v : /[T ]/.test(v) ? date.toISOString() : v;
  }
  if (v.startsWith("[") && v.endsWith("]")) {
    const inner = v.slice(1, -1).trim();
    if (inner === "") return [];
    const items = inner.match(/"(?:[^"\\]|\\.)*"|'[^']*'|[^,]+/g) ?? [];
    const values = items
      .map((item) => item.trim())
      .filter((item) => item !== "")
      .map(tomlValue);
    return values.every((x) => x !== undefined) ? (values as JsonValue[]) : undefined;
  }
  return undefined;
}

/**
 * Parses the simple subset of TOML front matter that Markdown sites use: `key = value`
 * lines with strings, numbers, booleans, dates and one-line arrays, grouped under
 * `[table]` headers. Other lines (multi-line strings and arrays, inline tables…) are
 * skipped and reported in `error`.
 */
function parseToml(body: string, line0: number): ParsedBody {
  const data: Record<string, JsonValue> = {};
  let table = data;
  const skipped: number[] = [];
  body.split(/\r?\n/).forEach((line, i) => {
    const t = line.trim();
    if (t === "" || t.startsWith("#")) return;
    const header = /^\[\s*([\w.-]+)\s*\]$/.exec(t);
    if (header?.[1]) {
      table = {};
      define(data, header[1], table);
      return;
    }
    const kv = /^("?)([\w.-]+)\1\s*=\s*(.+)$/.exec(t);
    const value = kv ? tomlValue(kv[3] ?? "") : undefined;
    if (kv?.[2] && value !== undefined) define(table, kv[2], value);
    else skipped.push(line0 + i);
  });
  if (skipped.length === 0) return { data };
  const lines = skipped.length > 5 ? `${skipped.slice(0, 5).join(", ")}, …` : skipped.join(", ");
  return { data, error: `line${skipped.length > 1 ? "s" : ""} ${lines} not understood` };
}

/** The top-level scalar entries of `data` as strings. */
function scalarFields(data: Record<string, JsonValue>): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const [key, value] of Object.entries(data)) {
    if (typeof value === "string" || typeof value === "number" || typeof value === "boolean") {
      define(fields as Record<string, JsonValue>, key, String(value));
    }
  }
  return fields;
}

/**
 * Parses the front matter at the top of a Markdown text: YAML between `---` on the
 * first line and a closing `---` or `...` line (with the `yaml` package, YAML 1.2
 * core schema plus timestamps; duplicate keys keep the last value; values nested
 * deeper than {@link MAX_FRONT_MATTER_DEPTH} levels are dropped and `truncated` says
 * so), or TOML between `+++` lines (a simple subset: see `FrontMatter`). Never
 * throws: a block that does not parse gives `data: {}` and an `error` message.
 * @returns `undefined` when the text has no (closed) front matter block.
 */
export function parseFrontMatter(text: string): FrontMatter | undefined {
  const block = frontMatterBlock(text);
  if (!block) return undefined;
  const parsed = block.format === "toml" ? parseToml(block.body, 2) : parseYaml(block.body, 2);
  // A `---` rule around prose is not front matter: no error without a `key:` line.
  if (parsed.error !== undefined && !/^\s*["']?[\w.-]+["']?\s*[:=]/m.test(block.body)) return undefined;
  return compact({
    format: block.format,
    data: parsed.data,
    fields: scalarFields(parsed.data),
    error: parsed.error,
    truncated: parsed.truncated,
    end: block.end,
  });
}

/** A front matter value as a non-blank string (numbers and dates too); lists are joined with ", ". */
function textValue(value: JsonValue | undefined): string | undefined {
  if (typeof value === "string") return nonBlank(value);
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  if (Array.isArray(value)) {
    const parts = value.map((v) => textValue(v)).filter((v): v is string => v !== undefined);
    return parts.length > 0 ? parts.join(", ") : undefined;
  }
  if (value && typeof value === "object") return textValue(value.name);
  return undefined;
}

/** Front matter `tags` (or `keywords`) as a list of strings: a list, or a comma-separated string. */
function tagList(value: JsonValue | undefined): string[] | undefined {
  const list = Array.isArray(value)
    ? value.map((v) => textValue(v))
    : typeof value === "string"
      ? value.split(",").map((v) => nonBlank(v))
      : [];
  const tags = list.filter((v): v is string => v !== undefined);
  return tags.length > 0 ? tags : undefined;
}

/**
 * The tags front matter gives a document: `tags`, else `keywords` (a list, or a
 * comma-separated string), as strings; undefined when there are none.
 */
export function frontMatterTags(data: Record<string, unknown>): string[] | undefined {
  return tagList(data.tags as JsonValue | undefined) ?? tagList(data.keywords as JsonValue | undefined);
}

/** The metadata fields lifted from front matter: `title`, `author`, `tags`, `description`, `date`. */
function liftedFields(data: Record<string, JsonValue>): Record<string, unknown> {
  return {
    title: textValue(data.title),
    author: textValue(data.author) ?? textValue(data.authors),
    tags: frontMatterTags(data),
    description: textValue(data.description),
    date: textValue(data.date),
  };
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
 * The first level-1 heading of a Markdown text, as CommonMark 0.31.2 reads it
 * (see `parseMarkdownBlocks` in src/chunk/markdown-blocks.ts, the detection the
 * DOCUMENT chunker uses): ATX `# Title` (§4.2, closing `#`s stripped) or a setext
 * heading (§4.3, paragraph lines underlined with `=`, several lines joined by a
 * space). Headings inside fenced or indented code, in front matter, and `#tag`
 * lines are ignored. Inline Markdown is stripped.
 * @returns the heading text, or `undefined` when there is no H1.
 */
export function markdownTitle(text: string): string | undefined {
  for (const h of markdownHeadings(text.slice(frontMatterBlock(text)?.end ?? 0))) {
    if (h.level !== 1) continue;
    const title = nonBlank(plainHeading(h.title ?? ""));
    if (title) return title;
  }
  return undefined;
}

/**
 * Extracts a Markdown file. `text` is the file content unchanged (decoded as UTF-8,
 * invalid bytes → U+FFFD, BOM dropped), so offsets map into the file and the
 * document chunker can read headings from it. Front matter stays in the text (the
 * DOCUMENT chunker leaves it out of chunks: it is metadata here).
 *
 * Metadata: `path`, `type: "markdown"`, `title` (front matter `title`, else the
 * first H1, else the file name), `frontMatter` (the parsed front matter, JSON
 * values, when it has entries), and when the front matter has them: `author`
 * (`author` or `authors`, a list joined with ", "), `tags` (string list, from
 * `tags` or `keywords`, a list or a comma-separated string), `description`, `date`
 * (a YAML or TOML date alone as `YYYY-MM-DD`; a date-time as an ISO-8601 UTC string,
 * one without an offset read as UTC as YAML 1.1 timestamps are, never in the host's
 * time zone; any other value as written). Front matter dates are stored the same way.
 * Front matter that does not parse adds a warning
 * ("front matter is not valid YAML: …") and is otherwise ignored; values nested
 * deeper than {@link MAX_FRONT_MATTER_DEPTH} levels are dropped with a warning
 * ("front matter: values nested deeper than 20 levels were dropped …").
 * @throws ExtractionError "file is empty" for a 0-byte or whitespace-only file, or when unreadable.
 */
export const markdownExtractor: Extractor = {
  type: "markdown",
  async extract(path: string, ctx: ExtractContext): Promise<ExtractedDocument[]> {
    const text = decodeText(await readSource(path, ctx));
    assertNotEmpty(path, text);
    const fm = parseFrontMatter(text);
    const data = fm?.data ?? {};
    const frontMatter = Object.keys(data).length > 0 ? data : undefined;
    const lifted = liftedFields(data);
    const title = (lifted.title as string | undefined) ?? markdownTitle(text) ?? fileTitle(path);
    const metadata = compact({ path, type: "markdown" as const, ...lifted, title, frontMatter });
    const doc: ExtractedDocument = { uri: path, text, metadata };
    if (fm?.error !== undefined) {
      const what =
        fm.format === "toml"
          ? "TOML front matter was only partly read"
          : "front matter is not valid YAML (its top-level key: value lines were read as plain text)";
      doc.warnings = [`${what}: ${fm.error}`];
    }
    if (fm?.truncated !== undefined)
      doc.warnings = [...(doc.warnings ?? []), `front matter: ${fm.truncated}`];
    return [doc];
  },
};
