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
  /** JSON values: the first of `column -> path` that is present. */
  | { kind: "json"; sources: readonly { column: string; path: string }[] };

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
        const f = field(n.field);
        let some: SqlFragment;
        if (f.kind === "column") {
          some =
            n.kind === "exists"
              ? { sql: `${f.sql} IS NOT NULL`, params: [] }
              : (() => {
                  const p = predicate(n, f.sql, "'text'");
                  return { sql: `(${f.sql} IS NOT NULL AND ${p.sql})`, params: p.params };
                })();
        } else {
          const expr =
            f.sources.length === 1
              ? `${f.sources[0]?.column} -> ?`
              : `coalesce(${f.sources.map((s) => `${s.column} -> ?`).join(", ")})`;
          const exprParams = f.sources.map((s) => s.path);
          const p =
            n.kind === "exists" ? { sql: "j.type <> 'null'", params: [] } : predicate(n, "j.value", "j.type");
          some = {
            sql: `EXISTS (SELECT 1 FROM json_each(${expr}) AS j WHERE ${p.sql})`,
            params: [...exprParams, ...p.params],
          };
        }
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
  from: { kind: "json", sources: [doc("from")] },
  to: { kind: "json", sources: [doc("to")] },
  cc: { kind: "json", sources: [doc("cc")] },
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
 * then its front matter, then any other document or chunk metadata field of that name.
 */
export function catalogField(name: string): SqlField {
  return (
    (Object.hasOwn(CATALOG_FIELDS, name) ? CATALOG_FIELDS[name] : undefined) ?? {
      kind: "json",
      sources: [doc("meta", name), doc("frontMatter", name), doc(name), chunk(name)],
    }
  );
}

/** How a field of a vector store's flat JSON payload (column `payload`) reads. */
export function payloadField(name: string): SqlField {
  return { kind: "json", sources: [{ column: "payload", path: jsonPath(name) }] };
}
