/**
 * The metadata filter language of every search surface (library `search(query, { filter })`,
 * `kl search --where`, HTTP `filter`, MCP `filter`, an agent attachment's fixed filter) and
 * of the vector-store contract. It is the MongoDB / Chroma / Pinecone style users already know:
 *
 * ```jsonc
 * { "type": "email" }                                   // equality
 * { "from": { "$in": ["alice@example.com", "bob@example.com"] } }
 * { "date": { "$gte": "2024-03-01", "$lt": "2024-04-01" } }  // ISO dates or numbers
 * { "path": { "$prefix": "/srv/docs/" } }
 * { "tags": { "$contains": "finance" } }               // array membership
 * { "$or": [{ "type": "pdf" }, { "author": { "$exists": true } }] }
 * { "$not": { "channel": "random" } }
 * ```
 *
 * Semantics (the same in SQL, in every store and in {@link matchesFilter}): a field has a
 * list of values: none when it is absent (or null), its elements when it is an array,
 * else the value itself. A condition on a field holds when **some** value satisfies it
 * (`{"to": "a@b.c"}` matches a mail with `a@b.c` among its recipients), except `$ne` and
 * `$nin`, which hold when **no** value equals (so they match documents without the field),
 * and `$exists`. Equality is type-strict (`"3"` ≠ `3`). Range operators compare numbers
 * with numbers and, when the bound is an ISO date (`2024-03-01`, `2024-03-01T12:00:00Z`,
 * with or without an offset), dates with dates (a date without a time is midnight UTC;
 * values that are not dates never match). Several fields, or several operators on one
 * field, must all hold. `{}` matches everything.
 *
 * Parse and validate with {@link parseFilter}: it returns a {@link FilterNode} tree and
 * throws a {@link FilterError} naming the position (`filter.date.$gte: expected an ISO
 * date or number`).
 */
import { KnowledgeLayerError } from "../errors.js";

/** A value a field can be compared with. */
export type FilterScalar = string | number | boolean;

/** Operators on one field. Several operators on one field must all hold. */
export interface FieldOperators {
  /** Some value equals. */
  $eq?: FilterScalar;
  /** No value equals (true when the field is absent). */
  $ne?: FilterScalar;
  /** Some value equals one of these (non-empty list). */
  $in?: FilterScalar[];
  /** No value equals any of these (true when the field is absent). */
  $nin?: FilterScalar[];
  /** Some value is below / at most / above / at least the bound: a number or an ISO date. */
  $lt?: number | string;
  $lte?: number | string;
  $gt?: number | string;
  $gte?: number | string;
  /** Some value is a string starting with this. */
  $prefix?: string;
  /** The field (an array, e.g. `tags`) holds this value; on a single value, the same as `$eq`. */
  $contains?: FilterScalar;
  /** The field has (true) or has no (false) value. */
  $exists?: boolean;
  /** The operators inside do not all hold. */
  $not?: FieldOperators;
}

/** A field's condition: a value (equality) or operators. */
export type FieldCondition = FilterScalar | FieldOperators;

/**
 * A metadata filter: field conditions and the logical operators `$and`, `$or` (non-empty
 * lists of filters) and `$not` (a filter), all of which must hold.
 */
export interface Filter {
  $and?: Filter[];
  $or?: Filter[];
  $not?: Filter;
  [field: string]: FieldCondition | Filter | Filter[] | undefined;
}

/** Comparison operators of a {@link FilterNode} condition. */
export type ComparisonOp = "$eq" | "$ne" | "$in" | "$nin" | "$prefix" | "$contains" | "$exists" | RangeOp;
/** Range operators. */
export type RangeOp = "$lt" | "$lte" | "$gt" | "$gte";

/** A range bound: a number, or an ISO date normalised to `YYYY-MM-DDTHH:MM:SS.sssZ`. */
export type RangeBound = { number: number } | { date: string };

/** A parsed, validated filter. `where` is the position for messages (`filter.date.$gte`). */
export type FilterNode =
  | { kind: "and"; children: FilterNode[] }
  | { kind: "or"; children: FilterNode[] }
  | { kind: "not"; child: FilterNode }
  | { kind: "eq" | "ne" | "contains"; field: string; value: FilterScalar; where: string }
  | { kind: "in" | "nin"; field: string; values: FilterScalar[]; where: string }
  | { kind: "range"; field: string; op: RangeOp; bound: RangeBound; where: string }
  | { kind: "prefix"; field: string; value: string; where: string }
  | { kind: "exists"; field: string; value: boolean; where: string };

/** An invalid filter: the message starts with the position (`filter.date.$gte: …`). */
export class FilterError extends KnowledgeLayerError {
  constructor(message: string) {
    super(message);
    this.name = "FilterError";
  }
}

/**
 * Field names: a letter or `_`, then letters, digits, `_` or `-`, optionally followed by
 * `.`-separated parts of those characters (a path into nested metadata: `seo.title`); at
 * most 64 characters.
 */
export const FILTER_FIELD = /^(?=.{1,64}$)[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*$/;

/** Most values in one `$in`/`$nin` list. */
export const MAX_FILTER_LIST = 1000;
/** Most conditions in one filter, and the deepest nesting. */
const MAX_CONDITIONS = 1000;
const MAX_DEPTH = 16;

const FIELD_OPERATORS = [
  "$eq",
  "$ne",
  "$in",
  "$nin",
  "$lt",
  "$lte",
  "$gt",
  "$gte",
  "$prefix",
  "$contains",
  "$exists",
  "$not",
] as const;
const LOGICAL_OPERATORS = ["$and", "$or", "$not"] as const;

/** ISO 8601 date or date-time (calendar date, optional time, optional `Z` or offset). */
const ISO_DATE =
  /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})?)?$/;

/**
 * The ISO date `text` normalised to UTC `YYYY-MM-DDTHH:MM:SS.sssZ` (a date without a time is
 * midnight UTC, a time without an offset is UTC), or undefined when it is not one.
 */
export function normaliseIsoDate(text: string): string | undefined {
  const m = ISO_DATE.exec(text);
  if (!m) return undefined;
  const [, y, mo, d, h, mi, s, zone] = m;
  const month = Number(mo);
  const day = Number(d);
  if (month < 1 || month > 12 || day < 1 || day > 31) return undefined;
  if (h !== undefined && (Number(h) > 23 || Number(mi) > 59 || Number(s ?? 0) > 59)) return undefined;
  let iso = text.replace(" ", "T");
  if (h === undefined) iso = `${y}-${mo}-${d}T00:00:00Z`;
  else if (zone === undefined) iso += "Z";
  const ms = Date.parse(iso);
  if (!Number.isFinite(ms)) return undefined;
  const out = new Date(ms);
  // Date.parse rolls 2024-02-30 over to March: refuse it.
  if (zone === undefined || zone === "Z") {
    if (out.getUTCDate() !== day || out.getUTCMonth() + 1 !== month) return undefined;
  }
  return out.toISOString();
}

/** `filter.date.$gte`, `filter["odd key"]`, `filter.$and[1]`. */
function at(where: string, key: string): string {
  return /^[A-Za-z_$][A-Za-z0-9_$-]*$/.test(key) ? `${where}.${key}` : `${where}[${JSON.stringify(key)}]`;
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object") return "an object";
  if (typeof value === "string")
    return `the string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`;
  return `${typeof value} ${String(value)}`;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function isScalar(value: unknown): value is FilterScalar {
  return (
    typeof value === "string" ||
    typeof value === "boolean" ||
    (typeof value === "number" && Number.isFinite(value))
  );
}

/**
 * Validates `input` as a {@link Filter} and returns its tree (`{}` gives an empty `and`,
 * which matches everything).
 * @param root the name of the input in messages (`filter`, `where`, `retrievalConfig.filter`).
 * @throws FilterError naming the position and the problem: not an object, an unknown
 *   operator, a bad field name, a value of the wrong type, an empty `$in`/`$and`/`$or`.
 */
export function parseFilter(input: unknown, root = "filter"): FilterNode {
  let count = 0;
  const fail = (where: string, message: string): never => {
    throw new FilterError(`${where}: ${message}`);
  };
  const scalar = (value: unknown, where: string): FilterScalar => {
    if (!isScalar(value)) {
      fail(
        where,
        value === null
          ? 'expected a string, number or boolean (null is not a value; use {"$exists": false})'
          : `expected a string, number or boolean, got ${describe(value)}`,
      );
    }
    return value as FilterScalar;
  };
  const list = (value: unknown, where: string): FilterScalar[] => {
    if (!Array.isArray(value)) return fail(where, `expected a list of values, got ${describe(value)}`);
    if (value.length === 0) fail(where, "expected a non-empty list of values");
    if (value.length > MAX_FILTER_LIST)
      fail(where, `at most ${MAX_FILTER_LIST} values (got ${value.length})`);
    return value.map((v, i) => scalar(v, `${where}[${i}]`));
  };
  const field = (name: string, cond: unknown, where: string, depth: number): FilterNode => {
    if (!FILTER_FIELD.test(name)) {
      fail(
        where,
        `invalid field name (letters, digits, "_" and "-", starting with a letter or "_", parts of a nested name joined by ".", at most 64 characters)`,
      );
    }
    if (!isPlainObject(cond)) {
      count++;
      return { kind: "eq", field: name, value: scalar(cond, where), where };
    }
    const parts: FilterNode[] = [];
    const entries = Object.entries(cond);
    if (entries.length === 0) fail(where, "expected a value or at least one operator, got an empty object");
    for (const [op, arg] of entries) {
      const w = at(where, op);
      if (++count > MAX_CONDITIONS) fail(root, `at most ${MAX_CONDITIONS} conditions`);
      switch (op) {
        case "$eq":
        case "$ne":
        case "$contains":
          parts.push({
            kind: op === "$eq" ? "eq" : op === "$ne" ? "ne" : "contains",
            field: name,
            value: scalar(arg, w),
            where: w,
          });
          break;
        case "$in":
        case "$nin":
          parts.push({ kind: op === "$in" ? "in" : "nin", field: name, values: list(arg, w), where: w });
          break;
        case "$lt":
        case "$lte":
        case "$gt":
        case "$gte": {
          let bound: RangeBound | undefined;
          if (typeof arg === "number" && Number.isFinite(arg)) bound = { number: arg };
          else if (typeof arg === "string") {
            const date = normaliseIsoDate(arg.trim());
            if (date !== undefined) bound = { date };
          }
          if (!bound) return fail(w, `expected an ISO date or number, got ${describe(arg)}`);
          parts.push({ kind: "range", field: name, op, bound, where: w });
          break;
        }
        case "$prefix":
          if (typeof arg !== "string" || arg.length === 0)
            fail(w, `expected a non-empty string, got ${describe(arg)}`);
          parts.push({ kind: "prefix", field: name, value: arg as string, where: w });
          break;
        case "$exists":
          if (typeof arg !== "boolean") fail(w, `expected true or false, got ${describe(arg)}`);
          parts.push({ kind: "exists", field: name, value: arg as boolean, where: w });
          break;
        case "$not":
          if (depth >= MAX_DEPTH) fail(w, `nested more than ${MAX_DEPTH} levels deep`);
          if (!isPlainObject(arg)) fail(w, `expected an object of operators, got ${describe(arg)}`);
          parts.push({ kind: "not", child: field(name, arg, w, depth + 1) });
          break;
        default:
          fail(
            w,
            op.startsWith("$")
              ? `unknown operator "${op}"; use one of ${FIELD_OPERATORS.join(", ")}`
              : `expected an operator (${FIELD_OPERATORS.join(", ")}), got the key ${JSON.stringify(op)}; a field's value cannot be an object`,
          );
      }
    }
    return parts.length === 1 ? (parts[0] as FilterNode) : { kind: "and", children: parts };
  };
  const node = (value: unknown, where: string, depth: number): FilterNode => {
    if (depth > MAX_DEPTH) fail(where, `nested more than ${MAX_DEPTH} levels deep`);
    if (!isPlainObject(value)) return fail(where, `expected an object, got ${describe(value)}`);
    const children: FilterNode[] = [];
    for (const [key, arg] of Object.entries(value)) {
      const w = at(where, key);
      if (key === "$and" || key === "$or") {
        if (!Array.isArray(arg)) fail(w, `expected a list of filters, got ${describe(arg)}`);
        const items = arg as unknown[];
        if (items.length === 0) fail(w, "expected a non-empty list of filters");
        const sub = items.map((f, i) => node(f, `${w}[${i}]`, depth + 1));
        children.push(
          sub.length === 1 ? (sub[0] as FilterNode) : { kind: key === "$and" ? "and" : "or", children: sub },
        );
      } else if (key === "$not") {
        children.push({ kind: "not", child: node(arg, w, depth + 1) });
      } else if (key.startsWith("$")) {
        fail(w, `unknown operator "${key}"; use one of ${LOGICAL_OPERATORS.join(", ")} or a field name`);
      } else {
        children.push(field(key, arg, w, depth));
      }
    }
    return children.length === 1 ? (children[0] as FilterNode) : { kind: "and", children };
  };
  return node(input, root, 0);
}

/**
 * Parses JSON text as a filter (`kl search --where '<json>'`).
 * @throws FilterError for text that is not JSON (`where: not valid JSON: …`) or not a valid filter.
 */
export function parseFilterJson(text: string, root = "filter"): FilterNode {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new FilterError(`${root}: not valid JSON: ${(error as Error).message}`);
  }
  return parseFilter(value, root);
}

/** True when a filter tree matches everything (`{}`). */
export function isEmptyFilter(node: FilterNode): boolean {
  return node.kind === "and" && node.children.length === 0;
}

/**
 * Filters that must all hold, as one: `undefined` when none is given, the filter itself
 * when one is, else `{ $and: [...] }` (an agent's fixed filter ANDed with the caller's).
 */
export function andFilters(...filters: (Filter | undefined)[]): Filter | undefined {
  const given = filters.filter((f): f is Filter => f !== undefined && Object.keys(f).length > 0);
  if (given.length === 0) return undefined;
  if (given.length === 1) return given[0];
  return { $and: given };
}

/** Fields named anywhere in a filter tree. */
export function filterFields(node: FilterNode, into = new Set<string>()): Set<string> {
  if (node.kind === "and" || node.kind === "or") for (const c of node.children) filterFields(c, into);
  else if (node.kind === "not") filterFields(node.child, into);
  else into.add(node.field);
  return into;
}

/** The values of a field for matching: none when absent or null, the elements of an array, else the value. */
function valuesOf(value: unknown): unknown[] {
  if (value === undefined || value === null) return [];
  return Array.isArray(value) ? value.filter((v) => v !== null && v !== undefined) : [value];
}

/** Milliseconds of an ISO date value, or undefined when the value is not a date string. */
function dateValue(value: unknown): number | undefined {
  if (typeof value !== "string") return undefined;
  const iso = normaliseIsoDate(value);
  return iso === undefined ? undefined : Date.parse(iso);
}

function inRange(op: RangeOp, a: number, b: number): boolean {
  return op === "$lt" ? a < b : op === "$lte" ? a <= b : op === "$gt" ? a > b : a >= b;
}

/**
 * Whether a record matches a parsed filter ({@link parseFilter}), with the language's
 * semantics (see the module comment). `get` returns a field's value (a scalar, an array or undefined); a plain
 * object is read by key.
 */
export function matchesFilter(
  node: FilterNode,
  get: ((field: string) => unknown) | Record<string, unknown>,
): boolean {
  const read = typeof get === "function" ? get : (f: string) => (Object.hasOwn(get, f) ? get[f] : undefined);
  const test = (n: FilterNode): boolean => {
    switch (n.kind) {
      case "and":
        return n.children.every(test);
      case "or":
        return n.children.some(test);
      case "not":
        return !test(n.child);
      default: {
        const values = valuesOf(read(n.field));
        switch (n.kind) {
          case "eq":
          case "contains":
            return values.some((v) => v === n.value);
          case "ne":
            return !values.some((v) => v === n.value);
          case "in":
            return values.some((v) => n.values.includes(v as FilterScalar));
          case "nin":
            return !values.some((v) => n.values.includes(v as FilterScalar));
          case "prefix":
            return values.some((v) => typeof v === "string" && v.startsWith(n.value));
          case "exists":
            return values.length > 0 === n.value;
          case "range":
            return values.some((v) => {
              if ("number" in n.bound) return typeof v === "number" && inRange(n.op, v, n.bound.number);
              const ms = dateValue(v);
              return ms !== undefined && inRange(n.op, ms, Date.parse(n.bound.date));
            });
        }
      }
    }
  };
  return test(node);
}

/**
 * Checks that a filter uses only what a vector store can apply natively; `supports` says
 * which condition kinds it can (range bounds are numbers only unless `dates` is set).
 * @throws FilterError naming the position of the first condition the store cannot apply.
 */
export function checkStoreFilter(
  node: FilterNode,
  store: string,
  supports: { kinds: ReadonlySet<FilterNode["kind"]>; dates?: boolean },
): void {
  const walk = (n: FilterNode): void => {
    if (n.kind === "and" || n.kind === "or") n.children.forEach(walk);
    else if (n.kind === "not") {
      if (!supports.kinds.has("not"))
        throw new FilterError(`${whereOf(n)}: $not is not supported by the ${store} store`);
      walk(n.child);
    } else if (n.field.includes(".")) {
      // Payloads are flat; some stores would read a dotted name as a nested path, others as a key.
      throw new FilterError(`${n.where}: nested field names are not supported by the ${store} store`);
    } else if (!supports.kinds.has(n.kind)) {
      throw new FilterError(`${n.where}: not supported by the ${store} store`);
    } else if (n.kind === "range" && "date" in n.bound && !supports.dates) {
      throw new FilterError(`${n.where}: the ${store} store compares numbers only`);
    }
  };
  walk(node);
}

/** The position of the first condition under a node, for messages. */
function whereOf(node: FilterNode): string {
  if (node.kind === "and" || node.kind === "or")
    return node.children[0] ? whereOf(node.children[0]) : "filter";
  if (node.kind === "not") return whereOf(node.child);
  return node.where;
}

const COMPLEMENT: Record<RangeOp, RangeOp> = { $lt: "$gte", $lte: "$gt", $gt: "$lte", $gte: "$lt" };

/**
 * The same filter without `not` nodes, for stores whose filters have no negation (Pinecone,
 * Chroma): negations are pushed down to the conditions (`$eq` ↔ `$ne`, `$in` ↔ `$nin`,
 * `$exists` flipped, De Morgan over `$and`/`$or`); a negated range becomes "absent, or the
 * complementary range", exact when the field holds one number (as a flat payload does).
 * A negated `$prefix` stays a `not` node (stores without negation reject it).
 */
export function pushDownNot(node: FilterNode, negate = false): FilterNode {
  switch (node.kind) {
    case "and":
    case "or": {
      const children = node.children.map((c) => pushDownNot(c, negate));
      const kind = (node.kind === "and") !== negate ? "and" : "or";
      return { kind, children };
    }
    case "not":
      return pushDownNot(node.child, !negate);
    default:
      if (!negate) return node;
      switch (node.kind) {
        case "eq":
        case "contains":
          return { kind: "ne", field: node.field, value: node.value, where: node.where };
        case "ne":
          return { kind: "eq", field: node.field, value: node.value, where: node.where };
        case "in":
          return { ...node, kind: "nin" };
        case "nin":
          return { ...node, kind: "in" };
        case "exists":
          return { ...node, value: !node.value };
        case "range":
          return {
            kind: "or",
            children: [
              { kind: "exists", field: node.field, value: false, where: node.where },
              { ...node, op: COMPLEMENT[node.op] },
            ],
          };
        default:
          return { kind: "not", child: node };
      }
  }
}

/**
 * A copy of a (valid) filter with the values compared with `field` passed through `map`
 * (`$eq $ne $in $nin $contains $prefix`, shorthand equality, under `$and`/`$or`/`$not`):
 * how the HTTP API turns a tenant's KB names into catalog names in `{"kb": …}`.
 */
export function mapFilterValues(filter: Filter, field: string, map: (value: string) => string): Filter {
  const value = (v: unknown): unknown => (typeof v === "string" ? map(v) : v);
  const ops = (cond: unknown): unknown => {
    if (!isPlainObject(cond)) return value(cond);
    const out: Record<string, unknown> = {};
    for (const [op, arg] of Object.entries(cond)) {
      if (op === "$in" || op === "$nin") out[op] = Array.isArray(arg) ? arg.map(value) : arg;
      else if (op === "$not") out[op] = ops(arg);
      else if (op === "$eq" || op === "$ne" || op === "$contains" || op === "$prefix") out[op] = value(arg);
      else out[op] = arg;
    }
    return out;
  };
  const walk = (f: unknown): unknown => {
    if (!isPlainObject(f)) return f;
    const out: Record<string, unknown> = {};
    for (const [key, arg] of Object.entries(f)) {
      if (key === "$and" || key === "$or") out[key] = Array.isArray(arg) ? arg.map(walk) : arg;
      else if (key === "$not") out[key] = walk(arg);
      else if (key === field) out[key] = ops(arg);
      else out[key] = arg;
    }
    return out;
  };
  return walk(filter) as Filter;
}
