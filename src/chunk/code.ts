/**
 * CODE strategy: source code chunked along its syntax tree (tree-sitter).
 *
 * Whole functions and classes become chunks; decorators, doc comments and
 * comments directly above a definition stay with it; imports and other
 * top-level statements are kept as chunks of their own, grouped with
 * neighbouring statements while they fit. A class too large for one chunk is
 * split at its members (each method whole when it fits), a function at its
 * statements, a statement at its parts, and only what has no structure left
 * (a huge string or comment) at line boundaries. Languages without a grammar,
 * a grammar that fails to load, or a tree that is mostly parse errors use the
 * regex/indentation splitter of `code-fallback.ts`.
 *
 * Units: offsets are UTF-16 code units of the document text; sizes are in the
 * configured measure (characters or tokens).
 */
import type { ChunkingConfig } from "../config.js";
import type { Chunk, ExtractedDocument } from "../types.js";
import { chunkCodeFallback, familyOf } from "./code-fallback.js";
import { type GrammarName, grammarFor, type ParseResult, parseCode } from "./code-grammars.js";
import { chunkTree } from "./code-tree.js";
import type { Chunker } from "./contract.js";
import { type ChunkLimits, defineChunker, makeChunk, trimSpan } from "./spans.js";

export type { DefinitionKind, GrammarName } from "./code-grammars.js";
export { grammarFor, loadGrammar } from "./code-grammars.js";

/** Canonical language names for file extensions the extractor may leave unnamed. */
const LANGUAGE_OF_GRAMMAR: Readonly<Record<GrammarName, string>> = {
  python: "python",
  javascript: "javascript",
  typescript: "typescript",
  tsx: "typescript",
  go: "go",
  java: "java",
  rust: "rust",
  "c-sharp": "csharp",
  cpp: "cpp",
  ruby: "ruby",
  php: "php",
  bash: "shell",
};

/**
 * Language of a code document (lower case): `metadata.language`, else the
 * language of `metadata.path`'s extension when a grammar or regex family knows
 * it, else `undefined`.
 */
export function languageOf(doc: ExtractedDocument): string | undefined {
  const lang = doc.metadata.language;
  if (typeof lang === "string" && lang) return lang.toLowerCase();
  const ext = /\.([A-Za-z0-9+#]+)$/.exec(String(doc.metadata.path ?? ""))?.[1]?.toLowerCase();
  const grammar = grammarFor(ext);
  if (grammar) return LANGUAGE_OF_GRAMMAR[grammar];
  return familyOf(ext)?.name;
}

/**
 * Parses `text` with `grammar`; TypeScript that does not parse cleanly is
 * tried again as TSX (JSX in a `.ts`-named or path-less document).
 */
async function parse(text: string, grammar: GrammarName): Promise<ParseResult> {
  const first = await parseCode(text, grammar);
  if (grammar !== "typescript" || !first.tree?.rootNode.hasError) return first;
  const tsx = await parseCode(text, "tsx");
  if (tsx.tree && !tsx.tree.rootNode.hasError) {
    first.tree.delete();
    return tsx;
  }
  tsx.tree?.delete();
  return first;
}

/**
 * Splits `doc.text` (source code) into CODE chunks.
 *
 * The language is `doc.metadata.language` (else `metadata.path`'s extension);
 * Python, JavaScript, TypeScript/TSX, Go, Java, Rust, C#, C/C++ (C++ grammar),
 * Ruby, PHP and shell are parsed with tree-sitter (grammars load on first use,
 * once per process). Each chunk is one whole definition (with its decorators
 * and leading comments), a group of consecutive statements, or a piece of a
 * definition larger than `limits.size`: classes split between members,
 * functions between statements, down to line boundaries only for text without
 * structure. Definitions and statements all smaller than `limits.minSize` are
 * grouped while they fit. Every chunk's text is at most `limits.size` in
 * `limits.measure` units (a lone code point that alone measures more is the
 * only exception). `chunkOverlap` is not used. Other languages, or a parse
 * that fails or is mostly errors, use {@link chunkCodeFallback}.
 *
 * chunkType: `code_function` / `code_class` for a chunk holding exactly one
 * whole outermost function / class (or the head of one continued in the next
 * chunk), else `code_block`. Metadata: `language` (when known), `symbol` (that
 * definition's name; `code_block` chunks carry it for a named statement such as
 * `export const x = …`), `symbols` (names, when several definitions share a
 * chunk), `parentSymbol` (the enclosing definition, e.g. the class of a method).
 * Chunk indices are set by the chunker ({@link createCodeChunker}).
 *
 * Never rejects for a parse problem (it falls back instead); deterministic.
 */
export async function chunkCode(doc: ExtractedDocument, limits: ChunkLimits): Promise<Chunk[]> {
  const text = doc.text;
  if (!trimSpan(text, 0, text.length)) return [];
  const language = languageOf(doc);
  const path = typeof doc.metadata.path === "string" ? doc.metadata.path : undefined;
  const grammar = grammarFor(language, path);
  const parsed = grammar ? await parse(text, grammar) : undefined;
  if (!parsed?.tree) return chunkCodeFallback(text, language, limits);
  try {
    return chunkTree(text, parsed.tree.rootNode, limits).map((p) => {
      const metadata = language ? { language, ...p.metadata } : p.metadata;
      return makeChunk(text, p, p.chunkType, { metadata });
    });
  } finally {
    parsed.tree.delete();
  }
}

/**
 * Creates the CODE chunker (see {@link chunkCode}); its `chunk()` returns a promise.
 * @throws ConfigError for invalid chunking parameters.
 */
export function createCodeChunker(config: ChunkingConfig): Chunker {
  return defineChunker("code", config, chunkCode);
}
