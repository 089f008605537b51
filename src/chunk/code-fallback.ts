/**
 * CODE fallback splitter (regex and indentation based), used when no
 * tree-sitter grammar serves the document's language, the grammar fails to
 * load, or the tree is mostly parse errors: split source at top-level
 * definitions found per language family by regex, keep leading
 * comments/decorators with the definition they annotate, group small
 * neighbours, and split oversized definitions at nested definitions, then
 * blank lines, then line boundaries. Unknown languages split at blank lines
 * followed by an unindented line.
 *
 * Units: offsets are UTF-16 code units; sizes are in `limits.measure` units.
 */
import type { Chunk, ChunkType } from "../types.js";
import type { DefinitionKind } from "./code-grammars.js";
import { splitToFit } from "./code-tree.js";
import { type ChunkLimits, makeChunk, type Span, sizeOf, skipBlankForward, trimSpan } from "./spans.js";
import { type Line, lineSpans } from "./split.js";

interface DefRule {
  re: RegExp;
  kind: DefinitionKind;
  /** Only for indented (nested) lines. */
  nestedOnly?: boolean;
}

/** Definition, comment and decorator patterns of one language family (applied to a line without its indentation). */
interface Family {
  name: string;
  defs: DefRule[];
  comment: RegExp;
  decorator?: RegExp;
  /** Lines that continue the previous statement at the same indentation (never a boundary). */
  continuation: RegExp;
}

const ID = "[A-Za-z_$][\\w$]*";
const KEYWORDS = new Set([
  "if",
  "for",
  "while",
  "switch",
  "catch",
  "return",
  "else",
  "do",
  "new",
  "throw",
  "sizeof",
  "typeof",
  "case",
  "await",
  "yield",
  "delete",
  "elif",
  "with",
  "function",
  "super",
  "this",
]);
const BRACE_CONT = /^(?:[)\]}]|else\b|catch\b|finally\b|while\b|\.|&&|\|\||\?|:)/;
const C_COMMENT = /^(?:\/\/|\/\*|\*)/;

const PYTHON: Family = {
  name: "python",
  defs: [
    { re: /^(?:async\s+)?def\s+([A-Za-z_]\w*)/, kind: "function" },
    { re: /^class\s+([A-Za-z_]\w*)/, kind: "class" },
  ],
  comment: /^#/,
  decorator: /^@/,
  continuation: /^(?:[)\]}]|else\b|elif\b|except\b|finally\b|case\b)/,
};

const JS: Family = {
  name: "javascript",
  defs: [
    {
      re: new RegExp(
        `^(?:export\\s+(?:default\\s+)?)?(?:declare\\s+)?(?:async\\s+)?function\\b\\s*\\*?\\s*(${ID})?`,
      ),
      kind: "function",
    },
    {
      re: new RegExp(`^(?:export\\s+(?:default\\s+)?)?(?:declare\\s+)?(?:abstract\\s+)?class\\b\\s*(${ID})?`),
      kind: "class",
    },
    {
      re: new RegExp(
        `^(?:export\\s+(?:default\\s+)?)?(?:declare\\s+)?(?:const\\s+)?(?:interface|enum|namespace|module|type)\\s+(${ID})`,
      ),
      kind: "class",
    },
    {
      re: new RegExp(
        `^(?:export\\s+)?(?:const|let|var)\\s+(${ID})\\s*(?::[^=]+)?=\\s*(?:async\\s+)?(?:function\\b|\\([^)]*\\)?\\s*(?:=>|:|$|\\{)|${ID}\\s*=>|<)`,
      ),
      kind: "function",
    },
    {
      re: new RegExp(`^((?:${ID}\\.)*${ID})\\s*=\\s*(?:async\\s+)?function\\b`),
      kind: "function",
    },
    { re: new RegExp(`^export\\s+(?:default\\s+)?(?:const|let|var)\\s+(${ID})`), kind: "block" },
    { re: /^(module\.exports)\s*=/, kind: "block" },
    {
      re: new RegExp(
        `^(?:(?:public|private|protected|static|async|readonly|override|abstract|get|set)\\s+)*\\*?(#?${ID})\\s*(?:<[^>]*>)?\\([^;]*$`,
      ),
      kind: "function",
      nestedOnly: true,
    },
  ],
  comment: C_COMMENT,
  decorator: /^@/,
  continuation: BRACE_CONT,
};

const GO: Family = {
  name: "go",
  defs: [
    { re: /^func\s+(?:\([^)]*\)\s*)?([A-Za-z_]\w*)/, kind: "function" },
    { re: /^type\s+([A-Za-z_]\w*)/, kind: "class" },
    { re: /^(?:var|const)\s+(?:\(|([A-Za-z_]\w*))/, kind: "block" },
  ],
  comment: C_COMMENT,
  continuation: BRACE_CONT,
};

const RUST: Family = {
  name: "rust",
  defs: [
    {
      re: /^(?:pub(?:\([^)]*\))?\s+)?(?:(?:const|async|unsafe|extern(?:\s+"[^"]*")?)\s+)*fn\s+([A-Za-z_]\w*)/,
      kind: "function",
    },
    {
      re: /^(?:pub(?:\([^)]*\))?\s+)?(?:unsafe\s+)?(?:struct|enum|trait|union|type|mod)\s+([A-Za-z_]\w*)/,
      kind: "class",
    },
    { re: /^(?:unsafe\s+)?impl\b(?:<[^>]*>)?\s*([^{]*?)\s*(?:\{|$)/, kind: "class" },
    { re: /^(?:pub(?:\([^)]*\))?\s+)?(?:const|static)\s+([A-Z_][\w]*)/, kind: "block" },
    { re: /^macro_rules!\s*([A-Za-z_]\w*)/, kind: "function" },
  ],
  comment: C_COMMENT,
  decorator: /^#!?\[/,
  continuation: BRACE_CONT,
};

const JVM_MODS =
  "(?:(?:public|private|protected|internal|static|final|abstract|synchronized|native|override|virtual|async|open|suspend|inline|default|sealed|partial|extern|unsafe|new|readonly)\\s+)";
const JVM: Family = {
  name: "java",
  defs: [
    {
      re: new RegExp(
        `^${JVM_MODS}*(?:data\\s+|enum\\s+|annotation\\s+|inner\\s+|value\\s+|case\\s+)?(?:class|interface|enum|record|struct|object|trait)\\s+([A-Za-z_]\\w*)`,
      ),
      kind: "class",
    },
    { re: /^(?:\w+\s+)*fun\s+(?:<[^>]+>\s+)?(?:[\w.]+\.)?([A-Za-z_]\w*)/, kind: "function" },
    { re: /^(?:\w+\s+)*def\s+([A-Za-z_]\w*)/, kind: "function" },
    {
      re: new RegExp(`^${JVM_MODS}+(?:<[^>]+>\\s+)?[\\w<>\\[\\],.?]+\\s+([A-Za-z_]\\w*)\\s*\\(`),
      kind: "function",
    },
    { re: /^[\w<>[\],.?]+\s+([A-Za-z_]\w*)\s*\([^;]*$/, kind: "function", nestedOnly: true },
    { re: /^namespace\s+([\w.]+)/, kind: "class" },
  ],
  comment: C_COMMENT,
  decorator: /^(?:@|\[[A-Z])/,
  continuation: BRACE_CONT,
};

const C: Family = {
  name: "c",
  defs: [
    {
      re: /^(?:template\s*<[^>]*>\s*)?(?:typedef\s+)?(?:class|struct|union|enum(?:\s+class)?|namespace)\s+([A-Za-z_]\w*)(?![\w\s]*;)/,
      kind: "class",
    },
    { re: /^(?:[A-Za-z_][\w:<>,]*(?:\s*[*&]+\s*|\s+))+([A-Za-z_][\w:~]*)\s*\([^;]*$/, kind: "function" },
    { re: /^#define\s+([A-Za-z_]\w*)/, kind: "block" },
  ],
  comment: C_COMMENT,
  continuation: BRACE_CONT,
};

const RUBY: Family = {
  name: "ruby",
  defs: [
    { re: /^def\s+(?:self\.)?([\w?!=[\]]+)/, kind: "function" },
    { re: /^(?:class|module)\s+([A-Z][\w:]*)/, kind: "class" },
  ],
  comment: /^#/,
  continuation: /^(?:end\b|else\b|elsif\b|rescue\b|ensure\b|when\b|[)\]}])/,
};

const PHP: Family = {
  name: "php",
  defs: [
    {
      re: /^(?:(?:public|private|protected|static|final|abstract)\s+)*function\s+&?([A-Za-z_]\w*)/,
      kind: "function",
    },
    {
      re: /^(?:(?:final|abstract|readonly)\s+)*(?:class|interface|trait|enum)\s+([A-Za-z_]\w*)/,
      kind: "class",
    },
  ],
  comment: /^(?:\/\/|#(?!\[)|\/\*|\*)/,
  decorator: /^#\[/,
  continuation: BRACE_CONT,
};

const FAMILIES: Record<string, Family> = {
  python: PYTHON,
  py: PYTHON,
  javascript: JS,
  js: JS,
  jsx: JS,
  mjs: JS,
  cjs: JS,
  typescript: { ...JS, name: "typescript" },
  ts: { ...JS, name: "typescript" },
  tsx: { ...JS, name: "typescript" },
  mts: { ...JS, name: "typescript" },
  cts: { ...JS, name: "typescript" },
  go: GO,
  golang: GO,
  rust: RUST,
  rs: RUST,
  java: JVM,
  kotlin: { ...JVM, name: "kotlin" },
  kt: { ...JVM, name: "kotlin" },
  scala: { ...JVM, name: "scala" },
  csharp: { ...JVM, name: "csharp" },
  "c#": { ...JVM, name: "csharp" },
  cs: { ...JVM, name: "csharp" },
  c: C,
  h: C,
  cpp: { ...C, name: "cpp" },
  "c++": { ...C, name: "cpp" },
  cc: { ...C, name: "cpp" },
  cxx: { ...C, name: "cpp" },
  hpp: { ...C, name: "cpp" },
  ruby: RUBY,
  rb: RUBY,
  php: PHP,
};

/** The regex language family for a language name or file extension (case-insensitive), if known. */
export function familyOf(language: string | undefined): Family | undefined {
  return language ? FAMILIES[language.toLowerCase()] : undefined;
}

/** Per-line facts used to find boundaries. */
interface CodeLine extends Line {
  indent: number;
  blank: boolean;
  comment: boolean;
  decorator: boolean;
  closer: boolean;
  /** A `*`-led line (inside a block comment). */
  star: boolean;
  def?: { kind: DefinitionKind; symbol?: string };
}

function analyse(text: string, family: Family | undefined): CodeLine[] {
  return lineSpans(text).map((l) => {
    const raw = text.slice(l.start, l.end);
    let indent = 0;
    let k = 0;
    for (; k < raw.length; k++) {
      const ch = raw[k];
      if (ch === " ") indent++;
      else if (ch === "\t") indent += 4;
      else break;
    }
    const content = raw.slice(k);
    const blank = skipBlankForward(text, l.start, l.end) >= l.end;
    const line: CodeLine = {
      start: l.start,
      end: l.end,
      next: l.next,
      indent,
      blank,
      comment: !blank && !!family?.comment.test(content),
      decorator: !blank && !!family?.decorator?.test(content),
      closer: !blank && (family?.continuation ?? BRACE_CONT).test(content),
      star: content.startsWith("*"),
    };
    // Definition headers are short; skipping long lines keeps the regexes linear.
    if (!blank && family && !line.comment && !line.decorator && content.length <= 400) {
      for (const rule of family.defs) {
        if (rule.nestedOnly && indent === 0) continue;
        const m = rule.re.exec(content);
        if (!m) continue;
        const symbol = m[1]?.trim() || undefined;
        if (symbol && KEYWORDS.has(symbol)) continue;
        if (rule.nestedOnly && /^(?:return|new|else|throw|await|yield|case)\b/.test(content)) continue;
        line.def = { kind: rule.kind, symbol };
        break;
      }
    }
    return line;
  });
}

/** A block of code between boundaries, with the definition that starts it. */
interface CodeBlock extends Span {
  /** Index of the first line of the block (after attached comments) and of its definition line. */
  firstLine: number;
  defLine: number;
  lastLine: number;
}

/**
 * Boundary line indices at indentation `level` within lines `[from, to]`:
 * definitions at that level, and (after an indented or closed block) the first
 * plain statement back at that level. Each boundary moves up over the comments,
 * decorators and blank lines directly above it.
 */
function boundariesAt(lines: CodeLine[], from: number, to: number, level: number, family?: Family): number[] {
  const out: number[] = [];
  let prevIndent = -1;
  let prevCloser = false;
  let afterDef = false;
  for (let i = from; i <= to; i++) {
    const l = lines[i] as CodeLine;
    if (l.blank) continue;
    let boundary = false;
    if (l.indent === level && !l.comment && !l.decorator) {
      if (l.def) boundary = true;
      else if (!family && prevIndent >= 0 && (lines[i - 1] as CodeLine | undefined)?.blank && !l.closer)
        boundary = true;
      else if (afterDef && !l.closer && (prevIndent > level || prevCloser)) boundary = true;
      if (l.def) afterDef = true;
    }
    if (boundary && i > from) {
      let start = i;
      const floor = Math.max(from, out[out.length - 1] ?? from);
      for (let k = i - 1; k > floor; k--) {
        const p = lines[k] as CodeLine;
        if (p.blank) continue;
        const attached =
          (p.comment || p.decorator) && (p.indent === level || (p.indent === level + 1 && p.star));
        if (!attached) break;
        start = k;
      }
      if (start > floor) out.push(start);
    }
    if (!l.comment) {
      prevIndent = l.indent;
      prevCloser = l.closer && l.indent === level;
    }
  }
  return out;
}

/** Splits lines `[from, to]` into blocks at the given boundary line indices. */
function blocksBetween(
  text: string,
  lines: CodeLine[],
  from: number,
  to: number,
  cuts: number[],
): CodeBlock[] {
  const starts = [from, ...cuts.filter((c) => c > from && c <= to)];
  const out: CodeBlock[] = [];
  starts.forEach((s, k) => {
    const e = (starts[k + 1] ?? to + 1) - 1;
    const span = trimSpan(text, (lines[s] as CodeLine).start, (lines[e] as CodeLine).end);
    if (!span) return;
    let defLine = s;
    while (defLine < e && !(lines[defLine] as CodeLine).def) defLine++;
    out.push({ ...span, firstLine: s, defLine, lastLine: e });
  });
  return out;
}

/** Line index containing offset `pos` (binary search). */
function lineAt(lines: CodeLine[], pos: number): number {
  let lo = 0;
  let hi = lines.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if ((lines[mid] as CodeLine).start <= pos) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/** A piece of a split block. */
type Piece = Span;

/**
 * Splits source `text` into CODE chunks without a parser.
 *
 * Top-level definitions are found per language family by regex (Python
 * `def`/`class`; JS/TS `function`, `class`, `interface`/`type`/`enum`, `export …`,
 * `const f = (…) =>`, `obj.f = function`; Go `func`/`type`; Rust `fn`/`struct`/
 * `enum`/`trait`/`impl`/`mod`; Java/Kotlin/C#/Scala classes and methods; C/C++
 * functions, structs, classes; Ruby `def`/`class`/`module`; PHP functions and
 * classes). Comments, doc comments, decorators and attributes directly above a
 * definition stay with it. Blocks smaller than `limits.minSize` are grouped with
 * small neighbours while the group fits `limits.size`; a block larger than
 * `limits.size` is split at its nested definitions (methods), then at blank
 * lines, then at line boundaries. Unknown languages (`language` without a
 * family) split at blank lines followed by an unindented line. Sizes are
 * measured with `limits.measure`.
 *
 * chunkType: `code_function` / `code_class` when the chunk's outermost
 * definition is a single function / class, else `code_block`. Metadata:
 * `language` (when given), `symbol` (name of that definition), `symbols` (when
 * several definitions share a chunk), `parentSymbol` (for a piece inside a larger
 * definition). Chunk indices are not set.
 */
export function chunkCodeFallback(text: string, language: string | undefined, limits: ChunkLimits): Chunk[] {
  if (!trimSpan(text, 0, text.length)) return [];
  const family = familyOf(language);
  const lines = analyse(text, family);
  const size = (s: Span): number => sizeOf(limits, text, s.start, s.end);
  const small = (s: Span): boolean => size(s) < limits.minSize;

  const splitBlock = (b: CodeBlock): Piece[] => {
    // Nested definitions strictly inside the block, at their shallowest indentation.
    let level = Number.POSITIVE_INFINITY;
    const base = (lines[b.defLine] as CodeLine).indent;
    for (let i = b.defLine + 1; i <= b.lastLine; i++) {
      const l = lines[i] as CodeLine;
      if (l.def && l.indent > base) level = Math.min(level, l.indent);
    }
    if (level !== Number.POSITIVE_INFINITY) {
      const cuts = boundariesAt(lines, b.defLine + 1, b.lastLine, level, family);
      if (cuts.length > 0) return packBlocks(blocksBetween(text, lines, b.firstLine, b.lastLine, cuts));
    }
    return splitToFit(text, b.start, b.end, limits);
  };
  /** Greedy grouping of consecutive blocks within `limits.size`; oversized blocks are split. */
  const packBlocks = (blocks: CodeBlock[]): Piece[] => {
    const out: Piece[] = [];
    let group: CodeBlock[] = [];
    const flush = (): void => {
      const first = group[0];
      const last = group[group.length - 1];
      if (first && last) out.push({ start: first.start, end: last.end });
      group = [];
    };
    for (const b of blocks) {
      if (size(b) > limits.size) {
        flush();
        out.push(...splitBlock(b));
        continue;
      }
      const first = group[0];
      const last = group[group.length - 1];
      if (first && last) {
        const joined = { start: first.start, end: b.end };
        if (!(small({ start: first.start, end: last.end }) && small(b)) || size(joined) > limits.size)
          flush();
      }
      group.push(b);
    }
    flush();
    return out;
  };

  const top = boundariesAt(lines, 0, lines.length - 1, 0, family);
  const pieces = packBlocks(blocksBetween(text, lines, 0, lines.length - 1, top));
  return pieces.map((p) => makeChunk(text, p, ...describe(lines, p, language)));
}

/** chunkType and metadata for a code span. */
function describe(
  lines: CodeLine[],
  span: Span,
  language: string | undefined,
): [ChunkType, { metadata: Record<string, unknown> }] {
  const metadata: Record<string, unknown> = {};
  if (language) metadata.language = language;
  const first = lineAt(lines, span.start);
  const defs: CodeLine[] = [];
  for (let i = first; i < lines.length && (lines[i] as CodeLine).start < span.end; i++) {
    const l = lines[i] as CodeLine;
    if (l.def && l.end > span.start) defs.push(l);
  }
  const minIndent = Math.min(...defs.map((d) => d.indent));
  const outer = defs.filter((d) => d.indent === minIndent);
  const firstIndent = (lines[first] as CodeLine).indent;
  if (firstIndent > 0 || outer.length === 0) {
    // Walk outwards through enclosing lines (bounded, so huge files stay linear).
    let threshold = firstIndent;
    for (let i = first - 1; i >= 0 && i >= first - 5000 && threshold > 0; i--) {
      const l = lines[i] as CodeLine;
      if (l.blank || l.comment || l.indent >= threshold) continue;
      if (l.def) {
        if (l.def.symbol) metadata.parentSymbol = l.def.symbol;
        break;
      }
      threshold = l.indent;
    }
  }
  if (outer.length === 1) {
    const def = (outer[0] as CodeLine).def;
    if (def?.symbol) metadata.symbol = def.symbol;
    const type: ChunkType =
      def?.kind === "function" ? "code_function" : def?.kind === "class" ? "code_class" : "code_block";
    return [type, { metadata }];
  }
  const symbols = outer.map((d) => d.def?.symbol).filter((s): s is string => !!s);
  if (symbols.length > 0) metadata.symbols = symbols;
  return ["code_block", { metadata }];
}
