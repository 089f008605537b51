/**
 * CODE chunking on a tree-sitter syntax tree.
 *
 * The document is cut at positions chosen from the tree; a chunk is the trimmed
 * text between two consecutive cuts, so every character lies in exactly one
 * chunk (blank edges aside) and offsets are exact by construction. Cuts fall
 * only at the start of a unit: a top-level definition or statement, a class
 * member, a statement of a function body, or a child of a node being split.
 * Comments, decorators and attributes directly above a unit start the unit, so
 * they stay with what they annotate.
 *
 * Units: offsets are UTF-16 code units of the document text (see
 * `code-grammars.ts` for why tree-sitter indices are already such offsets);
 * sizes are in `limits.measure` units, always measured with {@link sizeOf} on
 * the exact trimmed span.
 */
import type { Node } from "web-tree-sitter";
import type { ChunkType } from "../types.js";
import {
  CLASS_TYPES,
  COMMENT_TYPES,
  CONTAINER_TYPES,
  type DefinitionKind,
  FUNCTION_TYPES,
  FUNCTION_VALUES,
  PREFIX_TYPES,
} from "./code-grammars.js";
import {
  type ChunkLimits,
  isCodePointBoundary,
  type Span,
  sizeOf,
  skipBlankBackward,
  trimSpan,
} from "./spans.js";
import { splitRange } from "./split.js";

/** A definition found in the tree: what it declares and its name. */
export interface DefInfo {
  kind: DefinitionKind;
  symbol?: string;
}

/** A described span: the body of one chunk-to-be with its chunkType and metadata. */
export interface CodePiece extends Span {
  chunkType: ChunkType;
  metadata: Record<string, unknown>;
}

/** A unit of a sequence being packed: a node with what is attached to it. */
interface Unit {
  /** Where the unit's text begins: its first attached comment/decorator, else the node. */
  start: number;
  /** Start of the main node (equals `start` for a unit made only of comments). */
  nodeStart: number;
  /** End of the unit's own text (trailing same-line comments and closing tokens included). */
  end: number;
  /** The main node; `null` for a unit made only of comments or punctuation. */
  node: Node | null;
  /** Comments, decorators and leading tokens attached before the node, in order. */
  attached: Node[];
  /** Set when the node is a definition. */
  def?: DefInfo;
  /** A comment (a part made of one attached comment). */
  comment?: boolean;
  /** Comments or punctuation after the last child of a node: joins the group before it when it fits. */
  tail?: boolean;
}

/** A definition met while cutting, for {@link describe}. */
interface DefRecord {
  nodeStart: number;
  end: number;
  kind: DefinitionKind;
  symbol?: string;
  /** A namespace-like scope: names the definitions inside it, is never a chunk's own symbol. */
  scope?: boolean;
}

/** Recursion limit for nested splits; deeper structures are cut at line boundaries. */
const MAX_DEPTH = 120;

/** cpp/rust types that only declare something when they have a body (`struct S;` does not). */
const NEEDS_BODY = new Set([
  "class_specifier",
  "struct_specifier",
  "union_specifier",
  "enum_specifier",
  "mod_item",
  "namespace_definition",
]);

/**
 * Namespace-like scopes whose members are chunked as if they were at the level
 * of the scope itself (a C# namespace's classes, a Ruby module's classes, the
 * declarations inside an include guard), so that a class inside one is chunked
 * like a top-level class. The scope's header joins the statements before it.
 */
const SCOPE_TYPES = new Set([
  "namespace_declaration",
  "file_scoped_namespace_declaration",
  "namespace_definition",
  "internal_module",
  "module",
  "mod_item",
  "linkage_specification",
  "preproc_ifdef",
  "preproc_if",
  "preproc_else",
  "preproc_elif",
]);

/** Scopes that are not named definitions (no record). */
const ANONYMOUS_SCOPES = new Set([
  "linkage_specification",
  "preproc_ifdef",
  "preproc_if",
  "preproc_else",
  "preproc_elif",
]);

/** Statements that may wrap a scope (`export namespace`, `declare module`, a TS namespace statement). */
const SCOPE_WRAPPERS = new Set(["export_statement", "expression_statement", "ambient_declaration"]);

const DECLARATOR_WRAPPERS = new Set([
  "pointer_declarator",
  "reference_declarator",
  "parenthesized_declarator",
  "array_declarator",
  "attributed_declarator",
]);

/**
 * Splits a parsed document into described pieces (exact spans, each within
 * `limits.size` in `limits.measure` units; the caller turns them into chunks).
 * The tree is only read: parse once, then call this.
 */
export function chunkTree(text: string, root: Node, limits: ChunkLimits): CodePiece[] {
  return new TreeCutter(text, root, limits).run();
}

/**
 * With a token measure, a group is known to fit without counting its tokens
 * when the sum of its units' counts (plus one per unit for merges across
 * boundaries) is at most this share of the size; nearer the limit the exact
 * count decides. The final check in `run` measures every chunk exactly.
 */
const ESTIMATE_SHARE = 0.8;

class TreeCutter {
  private readonly records: DefRecord[] = [];
  private readonly sizes = new Map<number, number>();
  private readonly chars: boolean;

  constructor(
    private readonly text: string,
    private readonly root: Node,
    private readonly limits: ChunkLimits,
  ) {
    this.chars = limits.measure.unit === "chars";
  }

  run(): CodePiece[] {
    const text = this.text;
    const n = text.length;
    const units = this.units(this.root, 0, n, true);
    const inner = units.length > 0 ? this.cutSeq(units, 0, n, true, 0, undefined) : this.lineCuts(0, n);
    // Sorted, inside the text, on code point boundaries: the chunks partition the text.
    const cuts = [...new Set(inner)]
      .map((c) => (isCodePointBoundary(text, c) ? c : c - 1))
      .filter((c) => c > 0 && c < n)
      .sort((a, b) => a - b);
    const spans: Span[] = [];
    let prev = 0;
    for (const c of [...cuts, n]) {
      const span = trimSpan(text, prev, c);
      prev = c;
      if (!span) continue;
      // Safety net: a span over size (which the cutting should never produce) is cut at lines.
      if (this.fits(span.start, span.end)) spans.push(span);
      else spans.push(...this.hardSplit(span.start, span.end));
    }
    return describe(spans, this.records);
  }

  // ---- sizes -------------------------------------------------------------------------------

  /** Size of the trimmed span `[a, b)` (token counts are cached: the same span is asked for repeatedly). */
  private size(a: number, b: number): number {
    const span = trimSpan(this.text, a, b);
    if (!span) return 0;
    if (this.chars) return span.end - span.start;
    const key = span.start * (this.text.length + 1) + span.end;
    let n = this.sizes.get(key);
    if (n === undefined) {
      n = sizeOf(this.limits, this.text, span.start, span.end);
      this.sizes.set(key, n);
    }
    return n;
  }

  private fits(a: number, b: number): boolean {
    return this.size(a, b) <= this.limits.size;
  }

  private small(a: number, b: number): boolean {
    return this.size(a, b) < this.limits.minSize;
  }

  // ---- units ---------------------------------------------------------------------------------

  /**
   * The units of `node`'s children that start before `hi`: comments,
   * decorators and leading punctuation attach to the next named child;
   * punctuation and same-line comments after a child attach to it; comments
   * and punctuation after the last child form a tail unit. Comments that trail
   * inside a child on lines of their own (tree-sitter may nest a comment about
   * the next definition in the previous one) are moved to the next unit. With
   * `inline`, namespace-like scopes are replaced by their members.
   */
  private units(node: Node, lo: number, hi: number, inline: boolean, depth = 0): Unit[] {
    const out: Unit[] = [];
    let attached: Node[] = [];
    for (const c of node.children) {
      const s = c.startIndex;
      if (s >= hi) break;
      const e = Math.min(c.endIndex, hi);
      if (e <= s || e <= lo) continue;
      const prev = out[out.length - 1];
      if (!c.isNamed) {
        if (prev && attached.length === 0) prev.end = Math.max(prev.end, e);
        else attached.push(c);
        continue;
      }
      const type = c.type;
      if (COMMENT_TYPES.has(type)) {
        if (prev && attached.length === 0 && !hasBreak(this.text, prev.end, s))
          prev.end = Math.max(prev.end, e);
        else attached.push(c);
        continue;
      }
      if (PREFIX_TYPES.has(type)) {
        attached.push(c);
        continue;
      }
      const unit: Unit = { start: attached[0]?.startIndex ?? s, nodeStart: s, end: e, node: c, attached };
      const def = defInfo(c, this.text);
      if (def) unit.def = def;
      out.push(unit);
      attached = [];
    }
    const first = attached[0];
    const last = attached[attached.length - 1];
    if (first && last) {
      // Comments and punctuation after the last child: a tail that joins the group before it when it fits.
      const end = Math.min(last.endIndex, hi);
      const tail: Unit = { start: first.startIndex, nodeStart: first.startIndex, end, node: null, attached };
      if (out.length > 0) tail.tail = true;
      out.push(tail);
    }
    for (let i = 0; i + 1 < out.length; i++) {
      const u = out[i] as Unit;
      const next = out[i + 1] as Unit;
      if (!u.node || u.end !== Math.min(u.node.endIndex, hi)) continue;
      const h = this.trailingComments(u.node);
      if (h !== undefined && h > u.nodeStart && h < next.start) {
        next.start = h;
        u.end = skipBlankBackward(this.text, h, u.nodeStart);
      }
    }
    return inline ? this.inlineScopes(out, hi, depth) : out;
  }

  /** Replaces each namespace-like unit by its header and member units (see {@link SCOPE_TYPES}). */
  private inlineScopes(units: Unit[], hi: number, depth: number): Unit[] {
    if (depth >= 16) return units;
    const out: Unit[] = [];
    for (const u of units) {
      const inner = u.node ? this.scopeUnits(u.node, hi, depth + 1) : undefined;
      const first = inner?.[0];
      const last = inner?.[inner.length - 1];
      if (!inner || !first || !last) {
        out.push(u);
        continue;
      }
      first.start = Math.min(first.start, u.start);
      last.end = Math.max(last.end, u.end);
      out.push(...inner);
    }
    return out;
  }

  /** The units a scope (or a statement wrapping one) is inlined as, or `undefined` when `node` is none. */
  private scopeUnits(node: Node, hi: number, depth: number): Unit[] | undefined {
    if (SCOPE_WRAPPERS.has(node.type)) {
      const inner = node.namedChildren.filter((c) => !COMMENT_TYPES.has(c.type));
      const only = inner.length === 1 ? inner[0] : undefined;
      if (!only || !(isScope(only) || SCOPE_WRAPPERS.has(only.type))) return undefined;
      const list = this.units(node, node.startIndex, hi, true, depth);
      return list.some((u) => u.node?.id === only.id) ? undefined : list;
    }
    if (!isScope(node)) return undefined;
    if (!ANONYMOUS_SCOPES.has(node.type)) {
      const r: DefRecord = {
        nodeStart: node.startIndex,
        end: Math.min(node.endIndex, hi),
        kind: "class",
        scope: true,
      };
      const symbol = nameOf(this.text, node);
      if (symbol) r.symbol = symbol;
      this.records.push(r);
    }
    const list = this.units(node, node.startIndex, hi, true, depth);
    const body = node.childForFieldName("body");
    if (!body) return list;
    const k = list.findIndex((u) => u.node?.id === body.id);
    const bu = list[k];
    if (!bu) return list;
    const members = this.units(body, body.startIndex, hi, true, depth);
    const m0 = members[0];
    const mLast = members[members.length - 1];
    if (!m0 || !mLast || !members.some((m) => m.node)) return list;
    // The body's opening punctuation (`{`) stays with the header; comments above the body join its first member.
    const header = list[k - 1];
    if (header) {
      while (m0.attached[0] && !m0.attached[0].isNamed) {
        header.end = Math.max(header.end, m0.attached[0].endIndex);
        m0.attached = m0.attached.slice(1);
      }
      m0.start = m0.attached[0]?.startIndex ?? m0.nodeStart;
    }
    if (bu.attached.length > 0) m0.start = Math.min(m0.start, bu.start);
    mLast.end = Math.max(mLast.end, bu.end);
    return [...list.slice(0, k), ...members, ...list.slice(k + 1)];
  }

  /**
   * Start of the comments nested at the end of `node` that sit on lines of
   * their own after its last code, or `undefined`.
   */
  private trailingComments(node: Node): number | undefined {
    const trailing: Node[] = [];
    let n: Node = node;
    let core = -1;
    for (let depth = 0; depth < MAX_DEPTH; depth++) {
      const count = n.childCount;
      if (count === 0) {
        core = n.endIndex;
        break;
      }
      let i = count - 1;
      let child = n.child(i);
      const here: Node[] = [];
      while (child?.isNamed && COMMENT_TYPES.has(child.type)) {
        here.unshift(child);
        i--;
        child = i >= 0 ? n.child(i) : null;
      }
      trailing.unshift(...here);
      if (!child) return undefined;
      if (child.endIndex <= child.startIndex) {
        // A zero-width (missing) token: its position is where the code ends.
        core = child.startIndex;
        break;
      }
      n = child;
    }
    if (core < 0 || trailing.length === 0) return undefined;
    let prevEnd = core;
    for (const c of trailing) {
      if (c.startIndex >= core && hasBreak(this.text, prevEnd, c.startIndex)) return c.startIndex;
      prevEnd = c.endIndex;
    }
    return undefined;
  }

  // ---- cutting -------------------------------------------------------------------------------

  /**
   * Cuts for the region `[lo, hi)` holding `units` (the text before the first
   * unit is carried in from the enclosing group). Returns cut offsets in
   * `(lo, hi)`. With `members` (a module, class body or block) a definition
   * is a chunk of its own unless it and its neighbours are all under
   * `limits.minSize`, and consecutive statements are grouped while they fit;
   * otherwise (the parts of one node) parts are grouped greedily. A unit too
   * large for a chunk is split recursively, taking the group before it along
   * when that group holds no definition.
   */
  private cutSeq(
    units: Unit[],
    lo: number,
    hi: number,
    members: boolean,
    depth: number,
    owner: DefRecord | undefined,
  ): number[] {
    const cuts: number[] = [];
    const size = this.limits.size;
    let gStart = lo;
    let gCount = 0;
    /** Size of the open group `[gStart, start of the unit at hand)`: exact, or an upper estimate in tokens. */
    let gSize = 0;
    let gHasDef = false;
    let gComments = false;
    const isDef = (u: Unit): boolean => u.def !== undefined && u.def.kind !== "block";
    const close = (at: number): void => {
      // A group holding only carried-in text can be over size (e.g. a huge comment): cut it at lines.
      if (gCount === 0 && !this.fits(gStart, at)) cuts.push(...this.lineCuts(gStart, at));
      cuts.push(at);
      gStart = at;
      gCount = 0;
      gHasDef = false;
    };
    for (let i = 0; i < units.length; i++) {
      const u = units[i] as Unit;
      const uEnd = (units[i + 1] as Unit | undefined)?.start ?? hi;
      const record = this.record(u, owner);
      // The last part of a node (its body, or a definition after its decorators) takes a small
      // header group along into its split rather than leaving the header alone; leading comments
      // alone do not (the definition stays whole instead).
      const header = (): boolean =>
        !members &&
        i === units.length - 1 &&
        cuts.length === 0 &&
        !gHasDef &&
        !(gCount > 0 && gComments) &&
        2 * (gCount > 0 ? gSize : this.size(gStart, u.start)) <= size;
      if (gCount > 0) {
        const joinable =
          !members ||
          u.tail === true ||
          (!gHasDef && !isDef(u)) ||
          (gSize < this.limits.minSize && this.small(u.start, uEnd));
        if (joinable) {
          // The group with `u`: estimated from the parts in tokens while clearly under size.
          let joined = this.chars ? this.size(gStart, uEnd) : gSize + this.size(u.start, uEnd) + 1;
          if (!this.chars && joined > ESTIMATE_SHARE * size) joined = this.size(gStart, uEnd);
          if (joined <= size) {
            gCount++;
            gSize = joined;
            gHasDef ||= isDef(u);
            gComments &&= u.comment === true;
            continue;
          }
        }
        // A group of statements is taken into the split of an oversized statement.
        const alone = this.fits(u.start, uEnd);
        const carry = joinable && !gHasDef && !isDef(u) && (!alone || header());
        if (!carry) close(u.start);
      } else if (gStart < u.start && !this.fits(gStart, uEnd) && this.fits(u.start, uEnd) && !header()) {
        // Carried-in text (a class header) and a member that fits only alone: keep the member whole.
        close(u.start);
      }
      if (gCount === 0) gComments = gStart === u.start && u.comment === true;
      if (this.fits(gStart, uEnd)) {
        gCount = 1;
        gSize = this.size(gStart, uEnd);
        gHasDef = isDef(u);
        continue;
      }
      const sub =
        depth >= MAX_DEPTH
          ? this.lineCuts(gStart, uEnd)
          : this.splitUnit(u, gStart, uEnd, depth + 1, record ?? owner);
      cuts.push(...sub);
      gStart = sub[sub.length - 1] ?? gStart;
      gCount = 1;
      gSize = this.size(gStart, uEnd);
      gHasDef = isDef(u);
    }
    return cuts;
  }

  /** Records a definition unit for {@link describe} (not the same definition again inside its wrapper). */
  private record(u: Unit, owner: DefRecord | undefined): DefRecord | undefined {
    if (!u.def || !u.node) return undefined;
    if (owner && owner.kind === u.def.kind && owner.symbol === u.def.symbol) return undefined;
    const r: DefRecord = {
      nodeStart: u.nodeStart,
      end: skipBlankBackward(this.text, Math.min(u.node.endIndex, u.end), u.nodeStart),
      kind: u.def.kind,
    };
    if (u.def.symbol !== undefined) r.symbol = u.def.symbol;
    this.records.push(r);
    return r;
  }

  /** Cuts inside `[lead, hi)` for a unit too large for one chunk (`[lead, u.start)` is carried text). */
  private splitUnit(
    u: Unit,
    lead: number,
    hi: number,
    depth: number,
    owner: DefRecord | undefined,
  ): number[] {
    if (u.attached.length > 0) {
      // Its comments and decorators, then the node, as parts: they stay together as far as size allows.
      const parts: Unit[] = u.attached.map((c) => ({
        start: c.startIndex,
        nodeStart: c.startIndex,
        end: Math.min(c.endIndex, hi),
        node: c,
        attached: [],
        comment: COMMENT_TYPES.has(c.type),
      }));
      if (u.node)
        parts.push({ start: u.nodeStart, nodeStart: u.nodeStart, end: u.end, node: u.node, attached: [] });
      return this.cutSeq(parts, lead, hi, false, depth, owner);
    }
    if (!u.node) return this.lineCuts(lead, hi);
    return this.splitNode(u.node, lead, hi, depth, owner);
  }

  /** Cuts inside `[lead, hi)` for `node`, at its children. */
  private splitNode(
    node: Node,
    lead: number,
    hi: number,
    depth: number,
    owner: DefRecord | undefined,
  ): number[] {
    if (node.childCount === 0) return this.lineCuts(lead, hi);
    const members = CONTAINER_TYPES.has(node.type);
    const units = this.units(node, lead, hi, members);
    if (units.length === 0) return this.lineCuts(lead, hi);
    return this.cutSeq(units, lead, hi, members, depth, owner);
  }

  /** Cuts splitting `[a, b)` at line (then word, then character) boundaries into pieces that fit. */
  private lineCuts(a: number, b: number): number[] {
    return this.hardSplit(a, b)
      .slice(1)
      .map((p) => p.start);
  }

  private hardSplit(a: number, b: number): Span[] {
    return splitToFit(this.text, a, b, this.limits);
  }
}

/**
 * Pieces of `text.slice(start, end)` (trimmed, in order, disjoint) within
 * `limits.size` in `limits.measure` units: {@link splitRange} in `lines` mode
 * (line, then word, then grapheme boundaries), and any piece still measuring
 * over size (token counts are not additive) halved again until it fits. Only a
 * single code point that alone measures over size can remain over.
 */
export function splitToFit(text: string, start: number, end: number, limits: ChunkLimits): Span[] {
  const { size, measure } = limits;
  const out: Span[] = [];
  const todo = splitRange(text, start, end, { size, mode: "lines", measure }).reverse();
  while (todo.length > 0) {
    const p = todo.pop() as Span;
    const len = p.end - p.start;
    if (len <= 1 || sizeOf(limits, text, p.start, p.end) <= size) {
      out.push(p);
      continue;
    }
    const halves = splitRange(text, p.start, p.end, { size: Math.ceil(len / 2), mode: "lines" });
    if (halves.length < 2) out.push(p);
    else todo.push(...halves.reverse());
  }
  return out;
}

/** True for a namespace-like scope node (with a body where its type needs one). */
function isScope(node: Node): boolean {
  return (
    SCOPE_TYPES.has(node.type) && (!NEEDS_BODY.has(node.type) || node.childForFieldName("body") !== null)
  );
}

/** True when `text.slice(a, b)` contains a line break. */
function hasBreak(text: string, a: number, b: number): boolean {
  for (let p = a; p < b; p++) {
    const c = text.charCodeAt(p);
    if (c === 10 || c === 13) return true;
  }
  return false;
}

// ---- definitions -----------------------------------------------------------------------------

/** Collapses white space and caps length, so a symbol is one short line. */
function clean(name: string): string | undefined {
  const s = name.replace(/\s+/g, " ").trim();
  if (!s) return undefined;
  return s.length > 200 ? `${s.slice(0, 199)}…` : s;
}

function textOf(text: string, node: Node | null | undefined): string | undefined {
  return node ? clean(text.slice(node.startIndex, node.endIndex)) : undefined;
}

/** Name of a C/C++ declarator: the identifier inside pointer/reference/function declarators. */
function declaratorName(text: string, declarator: Node): string | undefined {
  let d: Node | null = declarator;
  for (let i = 0; d && i < 16; i++) {
    if (d.type === "function_declarator") return textOf(text, d.childForFieldName("declarator"));
    if (!DECLARATOR_WRAPPERS.has(d.type)) return textOf(text, d);
    d = d.childForFieldName("declarator") ?? d.namedChildren[d.namedChildCount - 1] ?? null;
  }
  return undefined;
}

/** The declared name of a definition node, when it has one. */
function nameOf(text: string, node: Node): string | undefined {
  switch (node.type) {
    case "impl_item": {
      const type = textOf(text, node.childForFieldName("type"));
      const trait = textOf(text, node.childForFieldName("trait"));
      return trait && type ? `${trait} for ${type}` : type;
    }
    case "type_declaration": {
      const names = node.namedChildren
        .filter((c) => c.type === "type_spec" || c.type === "type_alias")
        .map((c) => textOf(text, c.childForFieldName("name")))
        .filter((s): s is string => !!s);
      return names.length > 0 ? clean(names.join(", ")) : undefined;
    }
  }
  const name = node.childForFieldName("name");
  if (name) return textOf(text, name);
  const declarator = node.childForFieldName("declarator");
  return declarator ? declaratorName(text, declarator) : undefined;
}

/** A JS/TS assignment `a.b = function …` / `= class …` / `module.exports = …`. */
function assignmentDef(text: string, node: Node): DefInfo | undefined {
  const left = node.childForFieldName("left");
  const right = node.childForFieldName("right");
  if (!left || !right) return undefined;
  const symbol = textOf(text, left);
  const with_ = (kind: DefinitionKind): DefInfo => (symbol ? { kind, symbol } : { kind });
  if (FUNCTION_VALUES.has(right.type)) return with_("function");
  if (right.type === "class") return with_("class");
  if (symbol === "module.exports" || symbol?.startsWith("exports.")) return with_("block");
  return undefined;
}

/** A JS/TS `const f = () => …` (function), `const C = class …` (class), or exported `const x = …` (block). */
function variableDef(text: string, node: Node, exported: boolean): DefInfo | undefined {
  const declarators = node.namedChildren.filter((c) => c.type === "variable_declarator");
  const names = declarators.map((d) => textOf(text, d.childForFieldName("name"))).filter((s) => !!s);
  const one = declarators.length === 1 ? declarators[0] : undefined;
  const value = one?.childForFieldName("value");
  const symbol = names.length > 0 ? clean(names.join(", ")) : undefined;
  const with_ = (kind: DefinitionKind): DefInfo => (symbol ? { kind, symbol } : { kind });
  if (value && FUNCTION_VALUES.has(value.type)) return with_("function");
  if (value && value.type === "class") return with_("class");
  return exported && names.length > 0 ? with_("block") : undefined;
}

/**
 * What `node` defines, looking through wrappers (decorators, `export`,
 * `declare`, `template <…>`, an expression statement holding a namespace or an
 * assignment of a function), or `undefined` for a plain statement.
 */
export function defInfo(node: Node, text: string, exported = false, depth = 0): DefInfo | undefined {
  if (depth > 4 || !node.isNamed) return undefined;
  const type = node.type;
  const named = (kind: DefinitionKind, symbol: string | undefined): DefInfo =>
    symbol ? { kind, symbol } : { kind };
  if (FUNCTION_TYPES.has(type)) return named("function", nameOf(text, node));
  if (CLASS_TYPES.has(type)) {
    if (NEEDS_BODY.has(type) && !node.childForFieldName("body")) return undefined;
    return named("class", nameOf(text, node));
  }
  const inner = (child: Node | null | undefined, exp = exported): DefInfo | undefined =>
    child ? defInfo(child, text, exp, depth + 1) : undefined;
  switch (type) {
    case "decorated_definition":
      return inner(node.childForFieldName("definition"));
    case "export_statement":
      return inner(node.childForFieldName("declaration") ?? node.childForFieldName("value"), true);
    case "ambient_declaration":
      return inner(node.namedChildren.find((c) => !COMMENT_TYPES.has(c.type)));
    case "template_declaration":
      return inner(node.namedChildren[node.namedChildCount - 1]);
    case "expression_statement": {
      const e = node.namedChildren.filter((c) => !COMMENT_TYPES.has(c.type));
      const only = e.length === 1 ? e[0] : undefined;
      if (!only) return undefined;
      if (only.type === "assignment_expression") return assignmentDef(text, only);
      return only.type === "internal_module" || only.type === "module" ? inner(only) : undefined;
    }
    case "lexical_declaration":
    case "variable_declaration":
      return variableDef(text, node, exported);
    case "public_field_definition":
    case "field_definition": {
      // A class field holding a function: `handle = () => {…}`.
      const value = node.childForFieldName("value");
      if (!value || !FUNCTION_VALUES.has(value.type)) return undefined;
      return named(
        "function",
        textOf(text, node.childForFieldName("name") ?? node.childForFieldName("property")),
      );
    }
    case "const_item":
    case "static_item":
    case "preproc_def":
    case "preproc_function_def":
      return named("block", nameOf(text, node));
    case "const_declaration":
    case "var_declaration": {
      const specs = node.descendantsOfType(type === "const_declaration" ? "const_spec" : "var_spec");
      const spec = specs.length === 1 ? specs[0] : undefined;
      return spec ? named("block", textOf(text, spec.childForFieldName("name"))) : undefined;
    }
    case "type_definition": {
      const t = node.childForFieldName("type");
      if (!t || !CLASS_TYPES.has(t.type) || !t.childForFieldName("body")) return undefined;
      const declarator = node.childForFieldName("declarator");
      return named("class", declarator ? declaratorName(text, declarator) : undefined);
    }
  }
  return undefined;
}

// ---- description -----------------------------------------------------------------------------

/**
 * chunkType and metadata per span, from the definitions met while cutting:
 * a span holding exactly one whole outermost definition is that definition
 * (`code_function` / `code_class`, or `code_block` for a named statement) with
 * its `symbol`; several make a `code_block` listing `symbols`; a span that holds
 * the start of a definition continued in the next chunk is that definition;
 * anything else is a `code_block`. `parentSymbol` names the innermost named
 * definition enclosing the span's start.
 */
function describe(spans: Span[], records: DefRecord[]): CodePiece[] {
  const sorted = [...records].sort((a, b) => a.nodeStart - b.nodeStart || b.end - a.end);
  const stack: DefRecord[] = [];
  let ri = 0;
  return spans.map((span) => {
    while (ri < sorted.length && (sorted[ri] as DefRecord).nodeStart < span.start) {
      const r = sorted[ri++] as DefRecord;
      while (stack.length > 0 && (stack[stack.length - 1] as DefRecord).end <= r.nodeStart) stack.pop();
      stack.push(r);
    }
    while (stack.length > 0 && (stack[stack.length - 1] as DefRecord).end <= span.start) stack.pop();
    const inside: DefRecord[] = [];
    for (let j = ri; j < sorted.length && (sorted[j] as DefRecord).nodeStart < span.end; j++) {
      inside.push(sorted[j] as DefRecord);
    }
    const outer: DefRecord[] = [];
    let outerEnd = -1;
    let partial: DefRecord | undefined;
    for (const r of inside) {
      if (r.scope) continue;
      if (r.end > span.end) {
        partial = r;
        continue;
      }
      if (r.nodeStart >= outerEnd) {
        outer.push(r);
        outerEnd = r.end;
      }
    }
    const metadata: Record<string, unknown> = {};
    let chunkType: ChunkType = "code_block";
    const subject = outer.length === 1 ? outer[0] : outer.length === 0 ? partial : undefined;
    // The enclosing definition: one begun in this span around the subject (a class header
    // followed by its first method), else the innermost one begun before the span.
    const around =
      subject && partial && subject !== partial && partial.nodeStart < subject.nodeStart
        ? partial
        : undefined;
    const parent = around?.symbol ? around : [...stack].reverse().find((r) => r.symbol !== undefined);
    if (parent?.symbol) metadata.parentSymbol = parent.symbol;
    if (subject) {
      chunkType = typeOf(subject.kind);
      // A named statement is the chunk's symbol only when it is most of the chunk.
      const most = subject.kind !== "block" || 2 * (subject.end - subject.nodeStart) >= span.end - span.start;
      if (subject.symbol && most) metadata.symbol = subject.symbol;
      else if (subject.symbol) metadata.symbols = [subject.symbol];
    } else if (outer.length > 1) {
      const symbols = [...new Set(outer.map((r) => r.symbol).filter((s): s is string => !!s))];
      if (symbols.length > 0) metadata.symbols = symbols;
    }
    return { ...span, chunkType, metadata };
  });
}

function typeOf(kind: DefinitionKind): ChunkType {
  return kind === "function" ? "code_function" : kind === "class" ? "code_class" : "code_block";
}
