/**
 * Tree-sitter grammars for the CODE strategy: which grammar parses which
 * language, loading the WebAssembly runtime and grammars (once per process,
 * cached promises), parsing, and the per-grammar node-type tables the chunker
 * uses (definitions, containers, comments).
 *
 * Grammars come from the installed `@vscode/tree-sitter-wasm` package
 * (`wasm/tree-sitter-<name>.wasm`), run by `web-tree-sitter`. Offsets: for a
 * JavaScript string input web-tree-sitter feeds the parser UTF-16 and reports
 * `startIndex`/`endIndex` in UTF-16 code units, i.e. exact JavaScript string
 * offsets (verified with non-BMP characters by `test/chunk/chunk-code.test.ts`);
 * {@link parseCode} still rejects a tree whose extent disagrees with the text.
 */
import { createRequire } from "node:module";
import { Language, type Node, Parser, type Tree } from "web-tree-sitter";

/** Grammars shipped by `@vscode/tree-sitter-wasm` that the CODE strategy uses. */
export type GrammarName =
  | "python"
  | "javascript"
  | "typescript"
  | "tsx"
  | "go"
  | "java"
  | "rust"
  | "c-sharp"
  | "cpp"
  | "ruby"
  | "php"
  | "bash";

/** Language names and file extensions (lower case) → grammar. C and C headers use the C++ grammar. */
const GRAMMAR_OF: Readonly<Record<string, GrammarName>> = {
  python: "python",
  py: "python",
  pyi: "python",
  javascript: "javascript",
  js: "javascript",
  jsx: "javascript",
  mjs: "javascript",
  cjs: "javascript",
  typescript: "typescript",
  ts: "typescript",
  mts: "typescript",
  cts: "typescript",
  tsx: "tsx",
  go: "go",
  golang: "go",
  java: "java",
  rust: "rust",
  rs: "rust",
  csharp: "c-sharp",
  "c#": "c-sharp",
  "c-sharp": "c-sharp",
  cs: "c-sharp",
  cpp: "cpp",
  "c++": "cpp",
  cc: "cpp",
  cxx: "cpp",
  hpp: "cpp",
  hh: "cpp",
  hxx: "cpp",
  c: "cpp",
  h: "cpp",
  ruby: "ruby",
  rb: "ruby",
  php: "php",
  shell: "bash",
  bash: "bash",
  sh: "bash",
};

/**
 * The grammar for a language name or file extension (case-insensitive), if one
 * is shipped. `path` refines TypeScript: a `.tsx` file uses the TSX grammar.
 */
export function grammarFor(language: string | undefined, path?: string): GrammarName | undefined {
  const grammar = language ? GRAMMAR_OF[language.toLowerCase()] : undefined;
  if (grammar === "typescript" && path && /\.tsx$/i.test(path)) return "tsx";
  return grammar;
}

const require = createRequire(import.meta.url);
let runtime: Promise<void> | undefined;
const languages = new Map<GrammarName, Promise<Language>>();
const parsers = new Map<GrammarName, Parser>();

/**
 * Loads a grammar: initialises the tree-sitter runtime once per process and
 * each grammar once (the promises are cached, so concurrent callers share one
 * load). @throws (rejects) when the runtime or the grammar's `.wasm` file cannot
 * be loaded; the rejection is cached too, so a broken grammar is not retried.
 */
export function loadGrammar(name: GrammarName): Promise<Language> {
  let language = languages.get(name);
  if (!language) {
    runtime ??= Parser.init();
    language = runtime.then(() =>
      Language.load(require.resolve(`@vscode/tree-sitter-wasm/wasm/tree-sitter-${name}.wasm`)),
    );
    languages.set(name, language);
  }
  return language;
}

/** Outcome of {@link parseCode}: a tree (the caller must `delete()` it) or why there is none. */
export type ParseResult = { tree: Tree } | { tree?: undefined; reason: string };

/**
 * Parses `text` with grammar `name`. Never throws: a grammar that fails to
 * load, a parser error, a tree whose extent does not match the text, or a tree
 * that is mostly `ERROR` nodes (over half the text at the top level) yields a
 * `reason` instead, and the caller falls back to the line-based splitter.
 */
export async function parseCode(text: string, name: GrammarName): Promise<ParseResult> {
  let language: Language;
  try {
    language = await loadGrammar(name);
  } catch (err) {
    return { reason: `grammar ${name} failed to load: ${(err as Error).message}` };
  }
  let tree: Tree | null = null;
  try {
    let parser = parsers.get(name);
    if (!parser) {
      parser = new Parser();
      parser.setLanguage(language);
      parsers.set(name, parser);
    }
    tree = parser.parse(text);
    if (!tree) return { reason: "parser returned no tree" };
    const root = tree.rootNode;
    if (root.startIndex < 0 || root.endIndex > text.length) {
      tree.delete();
      return { reason: "tree extent does not match the text" };
    }
    if (root.hasError && errorShare(root, text) > 0.5) {
      tree.delete();
      return { reason: "mostly unparsable" };
    }
    return { tree };
  } catch (err) {
    tree?.delete();
    return { reason: `parse failed: ${(err as Error).message}` };
  }
}

/** Share of the text's length covered by top-level `ERROR` nodes (1 when the root itself is one). */
function errorShare(root: Node, text: string): number {
  if (root.isError) return 1;
  let errors = 0;
  for (const child of root.children) {
    if (child.isError) errors += child.endIndex - child.startIndex;
  }
  return text.length === 0 ? 0 : errors / text.length;
}

/** What a definition declares. `block` is a named top-level statement (e.g. `export const x = …`). */
export type DefinitionKind = "function" | "class" | "block";

const set = (...types: string[]): ReadonlySet<string> => new Set(types);

/** Node types that declare a function or method (all grammars; names do not clash across them). */
export const FUNCTION_TYPES = set(
  "function_definition", // python, cpp, php, bash
  "function_declaration", // js/ts, go
  "generator_function_declaration",
  "function_signature", // ts overloads
  "method_definition", // js/ts classes and objects
  "method_signature",
  "abstract_method_signature",
  "method_declaration", // go, java, c#, php
  "constructor_declaration", // java, c#
  "compact_constructor_declaration",
  "destructor_declaration",
  "operator_declaration",
  "conversion_operator_declaration",
  "local_function_statement",
  "function_item", // rust
  "function_signature_item",
  "macro_definition",
  "method", // ruby
  "singleton_method",
);

/** Node types that declare a class-like type or a namespace (all grammars). */
export const CLASS_TYPES = set(
  "class_definition", // python
  "class_declaration", // js/ts, java, c#, php
  "class", // js class expression, ruby
  "abstract_class_declaration",
  "interface_declaration",
  "enum_declaration",
  "type_alias_declaration",
  "internal_module", // ts namespace
  "module", // ts `declare module`, ruby
  "type_declaration", // go
  "record_declaration",
  "record_struct_declaration",
  "struct_declaration",
  "annotation_type_declaration",
  "namespace_declaration",
  "file_scoped_namespace_declaration",
  "trait_declaration",
  "struct_item", // rust
  "enum_item",
  "union_item",
  "trait_item",
  "impl_item",
  "mod_item",
  "type_item",
  "class_specifier", // cpp
  "struct_specifier",
  "union_specifier",
  "enum_specifier",
  "namespace_definition",
  "singleton_class",
);

/**
 * Node types whose children are members or statements (module, class body,
 * block): inside them definitions get chunks of their own, while statements are
 * grouped. Any other node is split as a sequence of parts, greedily.
 */
export const CONTAINER_TYPES = set(
  "program",
  "source_file",
  "translation_unit",
  "compilation_unit",
  "block",
  "statement_block",
  "statement_list",
  "class_body",
  "interface_body",
  "enum_body_declarations",
  "declaration_list",
  "field_declaration_list",
  "body_statement",
  "compound_statement",
  "constructor_body",
  "file_scoped_namespace_declaration",
  "preproc_ifdef",
  "preproc_if",
  "preproc_else",
  "preproc_elif",
  "do_block",
);

/** Comment node types: attached to the definition or statement that follows them. */
export const COMMENT_TYPES = set("comment", "line_comment", "block_comment");

/** Annotations written as siblings before what they annotate (TS class-member decorators, Rust attributes). */
export const PREFIX_TYPES = set("decorator", "attribute_item", "inner_attribute_item");

/** Values that make an assignment or variable declaration a function definition. */
export const FUNCTION_VALUES = set("function_expression", "function", "arrow_function", "generator_function");
