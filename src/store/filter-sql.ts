/**
 * Compiles a metadata filter ({@link FilterNode}, see `retrieve/filter.ts`) to a
 * parameterised SQLite condition. Every value, field path and list goes in as a bound
 * parameter: nothing from a filter is ever spliced into the SQL text, which is built only
 * from this module's own fragments and the column expressions its callers name.
 *
 * A JSON field is read as `column -> '$."key"'` (JSON text, `NULL` when absent), several
 * alternatives through `coalesce`, and tested with `json_each`, which yields the elements of
 * an array and a scalar itself, so "some value matches" is one `EXISTS` for both.
 */
import type { FilterNode, FilterScalar, RangeOp } from "../retrieve/filter.js";

/** A parameterised SQL fragment. */
export interface SqlFragment {
  sql: string;
  params: unknown[];
}

/** How a filter field reads in SQL. */
export type SqlField =
  /** A TEXT column (`NULL` when absent). */
  | { kind: "column"; sql: string }
  /**
   * JSON values: the first of `column -> path` that is present (a scalar, or the elements
   * of an array; an object has no values). With `member`, the values are that key of each
   * element (an array of objects); with `lowerCase`, the stored values are lower-case and
   * string operands are compared lower-cased.
   */
  | {
      kind: "json";
      sources: readonly { column: string; path: string }[];
      member?: string;
      lowerCase?: boolean;
    }
  /** The values of all these fields together: a condition holds when it holds on their union. */
  | { kind: "any"; fields: readonly SqlField[] };

/** JSON path of a top-level key (quoted, so any key is safe): `$."key"`. */
export function jsonPath(...keys: string[]): string {
  return `$${keys.map((k) => (/^\d+$/.test(k) ? `[${k}]` : `.${JSON.stringify(k)}`)).join("")}`;
}

const RANGE_SQL: Record<RangeOp, string> = { $lt: "<", $lte: "<=", $gt: ">", $gte: ">=" };

/** A predicate on one value (`val`) of SQL JSON type `typ` (json_each's type names). */
function predicate(node: FilterNode, val: string, typ: string): SqlFragment {
  const eq = (value: FilterScalar): SqlFragment => {
    if (typeof value === "boolean") return { sql: `${typ} = '${value ? "true" : "false"}'`, params: [] };
    if (typeof value === "number")
      return { sql: `(${typ} IN ('integer', 'real') AND ${val} = ?)`, params: [value] };
    return { sql: `(${typ} = 'text' AND ${val} = ?)`, params: [value] };
  };
  switch (node.kind) {
    case "eq":
    case "ne":
    case "contains":
      return eq(node.value);
    case "in":
    case "nin": {
      const parts: SqlFragment[] = [];
      const strings = node.values.filter((v) => typeof v === "string");
      const numbers = node.values.filter((v) => typeof v === "number");
      const booleans = [...new Set(node.values.filter((v) => typeof v === "boolean"))];
      if (strings.length > 0)
        parts.push({
          sql: `(${typ} = 'text' AND ${val} IN (SELECT value FROM json_each(?)))`,
          params: [JSON.stringify(strings)],
        });
      if (numbers.length > 0)
        parts.push({
          sql: `(${typ} IN ('integer', 'real') AND ${val} IN (SELECT value FROM json_each(?)))`,
          params: [JSON.stringify(numbers)],
        });
      for (const b of booleans) parts.push(eq(b));
      return { sql: `(${parts.map((p) => p.sql).join(" OR ")})`, params: parts.flatMap((p) => p.params) };
    }
    case "prefix":
      return {
        sql: `(${typ} = 'text' AND substr(${val}, 1, length(?)) = ?)`,
        params: [node.value, node.value],
      };
    case "range": {
      const op = RANGE_SQL[node.op];
      if ("number" in node.bound)
        return { sql: `(${typ} IN ('integer', 'real') AND ${val} ${op} ?)`, params: [node.bound.number] };
      return {
        sql: `(${typ} = 'text' AND ${val} GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]*' AND julianday(${val}) ${op} julianday(?))`,
        params: [node.bound.date],
      };
    }
    default:
      throw new Error(`no predicate for ${node.kind}`);
  }
}

/** `node` with its string operands lower-cased (for a field whose values are stored lower-case). */
function lowerCased(node: FilterNode): FilterNode {
  const lower = (v: FilterScalar): FilterScalar => (typeof v === "string" ? v.toLowerCase() : v);
  switch (node.kind) {
    case "eq":
    case "ne":
    case "contains":
      return { ...node, value: lower(node.value) };
    case "in":
    case "nin":
      return { ...node, values: node.values.map(lower) };
    case "prefix":
      return { ...node, value: node.value.toLowerCase() };
    default:
      return node;
  }
}

/** JSON paths of `member` keys: our own constants, checked before they go into SQL text. */
const MEMBER = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** "Some value of field `f` satisfies the (positive) condition `n`" as SQL. */
function someValue(n: FilterNode, f: SqlField): SqlFragment {
  if (f.kind === "any") {
    const parts = f.fields.map((sub) => someValue(n, sub));
    return { sql: `(${parts.map((p) => p.sql).join(" OR ")})`, params: parts.flatMap((p) => p.params) };
  }
  if (f.kind === "column") {
    if (n.kind === "exists") return { sql: `${f.sql} IS NOT NULL`, params: [] };
    const p = predicate(n, f.sql, "'text'");
    return { sql: `(${f.sql} IS NOT NULL AND ${p.sql})`, params: p.params };
  }
  const expr =
    f.sources.length === 1
      ? `${f.sources[0]?.column} -> ?`
      : `coalesce(${f.sources.map((s) => `${s.column} -> ?`).join(", ")})`;
  const exprParams = f.sources.map((s) => s.path);
  if (f.member !== undefined && !MEMBER.test(f.member)) throw new Error(`invalid member ${f.member}`);
  const val = f.member === undefined ? "j.value" : `json_extract(j.value, '$.${f.member}')`;
  const typ = f.member === undefined ? "j.type" : `coalesce(json_type(j.value, '$.${f.member}'), 'null')`;
  const cond = f.lowerCase ? lowerCased(n) : n;
  const p = cond.kind === "exists" ? { sql: `${typ} <> 'null'`, params: [] } : predicate(cond, val, typ);
  // Elements of an array (integer keys) or a scalar (no key); an object's members are not values.
  const where = f.member === undefined ? "typeof(j.key) <> 'text'" : "j.type = 'object'";
  return {
    sql: `EXISTS (SELECT 1 FROM json_each(${expr}) AS j WHERE ${where} AND ${p.sql})`,
    params: [...exprParams, ...p.params],
  };
}

/**
 * The SQL condition of a filter; `field` says how each field name reads (see
 * {@link SqlField}). `{}` compiles to `1`.
 */
export function compileSqliteFilter(node: FilterNode, field: (name: string) => SqlField): SqlFragment {
  const compile = (n: FilterNode): SqlFragment => {
    switch (n.kind) {
      case "and":
      case "or": {
        if (n.children.length === 0) return { sql: n.kind === "and" ? "1" : "0", params: [] };
        const parts = n.children.map(compile);
        return {
          sql: `(${parts.map((p) => p.sql).join(n.kind === "and" ? " AND " : " OR ")})`,
          params: parts.flatMap((p) => p.params),
        };
      }
      case "not": {
        const inner = compile(n.child);
        return { sql: `NOT ${inner.sql}`, params: inner.params };
      }
      default: {
        // "Some value satisfies" of the positive condition; $ne, $nin and $exists:false negate it.
        const positive: FilterNode =
          n.kind === "ne"
            ? { ...n, kind: "eq" }
            : n.kind === "nin"
              ? { ...n, kind: "in" }
              : n.kind === "exists"
                ? { ...n, value: true }
                : n;
        const some = someValue(positive, field(n.field));
        const negate = n.kind === "ne" || n.kind === "nin" || (n.kind === "exists" && !n.value);
        return negate ? { sql: `NOT ${some.sql}`, params: some.params } : some;
      }
    }
  };
  return compile(node);
}

const doc = (...keys: string[]) => ({ column: "d.metadata", path: jsonPath(...keys) });
const chunk = (...keys: string[]) => ({ column: "c.metadata", path: jsonPath(...keys) });

/**
 * An email address header as a filter field: each mailbox as results show it
 * (`Tim Chapman <timc@2ubh.com>`), its address (`timc@2ubh.com`, compared without case)
 * and its display name (`Tim Chapman`), from the extractor's `mailboxes` metadata.
 */
function mailboxField(header: "from" | "to" | "cc"): SqlField {
  return {
    kind: "any",
    fields: [
      { kind: "json", sources: [doc(header)] },
      { kind: "json", sources: [doc("mailboxes", header)], member: "address", lowerCase: true },
      { kind: "json", sources: [doc("mailboxes", header)], member: "name" },
    ],
  };
}

/**
 * Source attributes a search result carries (see `retrieve/attribution.ts`), read the way
 * `attribute()` builds them from the chunk and document rows (aliases `c` and `d`).
 */
const CATALOG_FIELDS: Record<string, SqlField> = {
  kb: { kind: "column", sql: "c.kb" },
  uri: { kind: "column", sql: "d.uri" },
  path: { kind: "column", sql: "d.path" },
  type: { kind: "column", sql: "d.type" },
  title: { kind: "column", sql: "d.title" },
  chunkType: { kind: "column", sql: "c.chunk_type" },
  author: { kind: "json", sources: [doc("author")] },
  link: { kind: "json", sources: [chunk("link"), doc("canonicalUrl"), doc("url")] },
  lineStart: { kind: "json", sources: [chunk("lineStart")] },
  lineEnd: { kind: "json", sources: [chunk("lineEnd")] },
  parentUri: { kind: "json", sources: [doc("parentUri")] },
  attachmentName: { kind: "json", sources: [doc("attachmentName")] },
  page: { kind: "json", sources: [chunk("pageStart"), chunk("page")] },
  pageEnd: { kind: "json", sources: [chunk("pageEnd")] },
  headingPath: { kind: "json", sources: [chunk("headingPath")] },
  from: mailboxField("from"),
  to: mailboxField("to"),
  cc: mailboxField("cc"),
  subject: { kind: "json", sources: [doc("subject")] },
  date: { kind: "json", sources: [doc("date")] },
  threadId: { kind: "json", sources: [doc("threadId")] },
  channel: { kind: "json", sources: [chunk("channel"), doc("channel")] },
  user: { kind: "json", sources: [chunk("user"), chunk("participants", "0")] },
  participants: { kind: "json", sources: [chunk("participants")] },
  ts: { kind: "json", sources: [chunk("tsStart"), chunk("ts")] },
  tsEnd: { kind: "json", sources: [chunk("tsEnd")] },
  language: { kind: "json", sources: [chunk("language"), doc("language")] },
  symbol: { kind: "json", sources: [chunk("symbol")] },
  tags: { kind: "json", sources: [doc("tags")] },
};

/** Names of the source attributes filters know (anything else is user metadata). */
export const SOURCE_FILTER_FIELDS: readonly string[] = Object.keys(CATALOG_FIELDS);

/**
 * How a filter field reads over `chunks c JOIN documents d`: a source attribute as
 * `attribute()` builds it, else user metadata: the document's `meta` (ingest `--meta`),
 * then its front matter, then any other document or chunk metadata field of that name
 * (the first of these that is present). A dotted name (`seo.title`) is a path into nested
 * objects (front matter `seo: {title: …}`), or a key holding the dots itself.
 */
export function catalogField(name: string): SqlField {
  const known = Object.hasOwn(CATALOG_FIELDS, name) ? CATALOG_FIELDS[name] : undefined;
  if (known) return known;
  if (!name.includes(".")) {
    return { kind: "json", sources: [doc("meta", name), doc("frontMatter", name), doc(name), chunk(name)] };
  }
  const parts = name.split(".");
  return {
    kind: "json",
    sources: [
      doc("frontMatter", name),
      doc("frontMatter", ...parts),
      doc(name),
      doc(...parts),
      chunk(name),
      chunk(...parts),
    ],
  };
}

/** How a field of a vector store's flat JSON payload (column `payload`) reads. */
export function payloadField(name: string): SqlField {
  return { kind: "json", sources: [{ column: "payload", path: jsonPath(name) }] };
}
