/**
 * The import rule: adapters (the CLI, the HTTP API, the MCP server and the agent
 * pieces built on the facade) use public operations of the facade
 * (`src/knowledge-layer.ts`) only. They must not
 *
 * - import a store's internals (anything under `src/store/`, the keyword index, the
 *   embedding cache, a database driver) — the facade re-exports the types they need;
 * - reach the facade's internals (`kl.db`, `kl.catalog`, `kl.store`, `kl.bm25`);
 * - use a facade member that is not an adapter operation ({@link ADAPTER_OPERATIONS}:
 *   each asynchronous, so the catalog behind it may be a database over the network; a
 *   synchronous one reads the SQLite classes), beyond the few synchronous members of
 *   {@link SYNCHRONOUS_MEMBERS} that read no catalog row; and hold the facade under
 *   another name than `kl` (so every use of it is seen);
 * - run SQL: `.prepare(`, `.pragma(`, `.transaction(`, `.exec(` on anything but a
 *   regular expression, or a string holding an SQL statement.
 *
 * So a second catalog backend (PostgreSQL) can be added without touching an adapter.
 * Checked on the syntax tree of every adapter file (TypeScript's parser, no type
 * checking: fast), so comments and prose never trip it. Biome's `noRestrictedImports`
 * could express the import part only (not SQL or facade internals), hence a test.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "..");

/** Folders whose files are adapters of the facade. */
const ADAPTER_DIRS = ["src/cli", "src/server", "src/mcp", "src/agent"];

/** Modules (paths from the repository root, or package names) adapters must not import. */
const FORBIDDEN_MODULES: { test: (target: string) => boolean; what: string }[] = [
  { test: (t) => t.startsWith("src/store/"), what: "a store's internals (src/store/)" },
  { test: (t) => t === "src/retrieve/bm25.ts", what: "the BM25 keyword index" },
  { test: (t) => t === "src/retrieve/postings.ts", what: "the keyword index's postings" },
  { test: (t) => t === "src/embed/cache.ts", what: "the persistent embedding cache" },
  {
    test: (t) => ["better-sqlite3", "sqlite-vec", "pg", "pg-pool"].includes(t),
    what: "a database driver",
  },
];

/** Facade properties that are internals (see their docstrings in `knowledge-layer.ts`). */
const FACADE_INTERNALS = new Set(["db", "catalog", "store", "bm25"]);
/** Of those, names no adapter has another use for: flagged on any receiver. */
const INTERNALS_ON_ANY_RECEIVER = new Set(["db", "catalog", "bm25"]);

/**
 * The facade operations adapters may call. Each must be declared asynchronous in
 * `knowledge-layer.ts` (`async`, or every overload returning a `Promise`): checked below.
 */
const ADAPTER_OPERATIONS = new Set([
  // knowledge bases
  "getKb",
  "findKb",
  "knowledgeBases",
  "listKbs",
  "createKb",
  "updateKb",
  "deleteKb",
  "migrateKb",
  "reembedKb",
  "counts",
  // ingest and search
  "ingest",
  "ingestDocuments",
  "search",
  "warm",
  // documents
  "listDocuments",
  "countDocuments",
  "getDocument",
  "getDocumentByUri",
  "documentsAtPath",
  "documentsOfSource",
  "documentText",
  "deleteDocuments",
  "checkHealth",
  // API keys, agents
  "createApiKey",
  "listApiKeys",
  "revokeApiKey",
  "tenantOfApiKey",
  "createAgent",
  "listAgents",
  "getAgent",
  "updateAgent",
  "deleteAgent",
  "attachKb",
  "detachKb",
  // durable ingest jobs of the HTTP API
  "createJob",
  "getJob",
  "listJobs",
  "pendingJobs",
  "activeJobs",
  "jobEvents",
  "advanceJob",
  "jobFileDocuments",
  "pruneJobs",
  "jobTenants",
  "close",
]);

/**
 * Synchronous facade members adapters may use, with the reason each reads no catalog row.
 * A member typed as a section of the catalog contract (`store/catalog-contract.ts`) must
 * be one whose every method returns a `Promise` (checked below).
 */
const SYNCHRONOUS_MEMBERS: Record<string, string> = {
  dataDir: "the data directory's path (the HTTP API keeps uploads under it)",
  embedder: "builds (and caches) the embedder of a configuration; its embedding calls are asynchronous",
  memories: "the conversation memories: the asynchronous MemoryCatalog section of the catalog contract",
};

/** Calls that run SQL on a better-sqlite3 connection. */
const SQL_CALLS = new Set(["prepare", "pragma", "transaction", "exec"]);

/** An SQL statement in a string (upper-case keywords, as the code base writes SQL). */
const SQL_TEXT =
  /\b(SELECT\s+[\s\S]*\bFROM\b|SELECT\s+\d|INSERT\s+(OR\s+\w+\s+)?INTO\b|UPDATE\s+\w+\s+SET\b|DELETE\s+FROM\b|(CREATE|ALTER|DROP)\s+(TABLE|INDEX|TRIGGER|VIEW)\b|PRAGMA\s+\w+)/;

/**
 * Known exceptions, each with the reason it cannot go through the facade yet:
 * `"<file>: <problem>"` exactly as {@link violations} reports it. Keep it empty.
 */
const ALLOWED: string[] = [];

/** Every `.ts` file under a folder of the repository, as paths from the root. */
function tsFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith(".ts"))
    .map((e) => relative(ROOT, join(e.parentPath, e.name)))
    .sort();
}

/** An import specifier as a path from the root (`src/store/catalog.ts`), or the package name. */
function importTarget(file: string, specifier: string): string {
  if (!specifier.startsWith(".")) return specifier.split("/")[0] ?? specifier;
  return relative(ROOT, resolve(ROOT, dirname(file), specifier)).replace(/\.js$/, ".ts");
}

/** True when an expression is (a chain ending in) the facade: `kl`, `this.kl`, `options.kl`. */
function isFacade(node: ts.Expression): boolean {
  if (ts.isIdentifier(node)) return node.text === "kl";
  return ts.isPropertyAccessExpression(node) && node.name.text === "kl";
}

/**
 * The problems of one adapter's source text, as `"<file>: <problem>"`, each naming the
 * line. `file` is the path from the repository root.
 */
function violations(file: string, text: string): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const out: string[] = [];
  const report = (node: ts.Node, problem: string): void => {
    const line = source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
    out.push(`${file}:${line}: ${problem}`);
  };
  const checkImport = (node: ts.Node, specifier: ts.Expression | undefined): void => {
    if (!specifier || !ts.isStringLiteralLike(specifier)) return;
    const target = importTarget(file, specifier.text);
    const rule = FORBIDDEN_MODULES.find((r) => r.test(target));
    if (rule) report(node, `imports ${rule.what}: "${specifier.text}"`);
  };
  const visit = (node: ts.Node): void => {
    if (
      (ts.isParameter(node) || ts.isVariableDeclaration(node) || ts.isPropertyDeclaration(node)) &&
      node.type !== undefined &&
      node.type.getText(source) === "KnowledgeLayer" &&
      node.name.getText(source) !== "kl"
    ) {
      report(
        node,
        `holds the facade as "${node.name.getText(source)}" (name it kl, as the import rule expects)`,
      );
    }
    if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) {
      checkImport(node, node.moduleSpecifier);
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) {
      checkImport(node, node.moduleReference.expression);
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      checkImport(node, node.arguments[0]);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) {
      checkImport(node, node.argument.literal as ts.Expression);
    } else if (ts.isPropertyAccessExpression(node)) {
      const name = node.name.text;
      if (FACADE_INTERNALS.has(name) && (INTERNALS_ON_ANY_RECEIVER.has(name) || isFacade(node.expression)))
        report(node, `reaches the facade's internal .${name} (use a public KnowledgeLayer operation)`);
      else if (
        isFacade(node.expression) &&
        !ADAPTER_OPERATIONS.has(name) &&
        !Object.hasOwn(SYNCHRONOUS_MEMBERS, name)
      )
        report(
          node,
          `uses the facade's .${name}, which is not an adapter operation (add an asynchronous one to ADAPTER_OPERATIONS)`,
        );
    } else if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression)) {
      const { name, expression: receiver } = node.expression;
      if (
        SQL_CALLS.has(name.text) &&
        !(name.text === "exec" && receiver.kind === ts.SyntaxKind.RegularExpressionLiteral)
      )
        report(node, `calls .${name.text}( (SQL belongs in src/store/, behind the facade)`);
    }
    if (ts.isStringLiteralLike(node) || ts.isTemplateHead(node) || ts.isTemplateMiddle(node)) {
      if (SQL_TEXT.test(node.text)) report(node, `holds SQL: ${JSON.stringify(node.text.slice(0, 60))}`);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return out;
}

describe("adapters use the facade only", () => {
  const files = ADAPTER_DIRS.flatMap(tsFiles);
  let scanned: string[] | undefined;
  const scan = (): string[] => {
    scanned ??= files.flatMap((f) => violations(f, readFileSync(join(ROOT, f), "utf8")));
    return scanned;
  };

  it("finds the adapter files", () => {
    expect(files).toContain("src/cli/main.ts");
    expect(files).toContain("src/server/app.ts");
    // Subfolders too: the command and route files.
    expect(files).toContain("src/cli/commands/kb.ts");
    expect(files).toContain("src/server/routes/kbs.ts");
    expect(files).toContain("src/mcp/server.ts");
    expect(files).toContain("src/agent/memory.ts");
  });

  it("no adapter imports store internals, reaches kl.db/catalog/store/bm25 or runs SQL", () => {
    expect(scan().filter((v) => !ALLOWED.includes(v))).toEqual([]);
  });

  it("every allow-list entry is still needed", () => {
    const found = new Set(scan());
    expect(ALLOWED.filter((a) => !found.has(a))).toEqual([]);
  });

  it("catches each kind of violation (and not regular expressions or prose)", () => {
    const sample = [
      'import type { KbRecord } from "../store/catalog.js";',
      'import { Bm25Index } from "../retrieve/bm25.js";',
      'export { openDatabase } from "../store/database.js";',
      'import Database from "better-sqlite3";',
      'const m = await import("../store/index.js");',
      "type T = import('../store/agents.js').Agent;",
      "kl.db.close();",
      "this.kl.catalog.getKb('x');",
      "kl.store.info('c');",
      "other.bm25.flush('kb');",
      "db.prepare('x').get();",
      "conn.exec(schema);",
      'const q = "SELECT id FROM documents WHERE kb = ?";',
      "const t = `DELETE FROM chunks WHERE id = $" + "{id}`;",
      // Fine: a regular expression's exec, a store of one's own, prose, the facade's public API.
      "const m2 = /^Bearer (\\S+)$/i.exec(header);",
      "this.store.list('s');",
      'const msg = "select a knowledge base from the list, then delete it";',
      "kl.listDocuments({ kb: 'x' }); kl.deleteDocuments('x', [1]);",
      'import { KnowledgeLayer } from "../knowledge-layer.js";',
    ].join("\n");
    const found = violations("src/server/sample.ts", sample).map((v) => v.replace(/: .*/, ""));
    expect(found).toEqual(Array.from({ length: 14 }, (_, i) => `src/server/sample.ts:${i + 1}`));
  });
  it("every adapter operation of the facade is asynchronous, and the synchronous members read no catalog row", () => {
    expect(facadeProblems()).toEqual([]);
  });

  it("catches a facade member that is not an adapter operation, and a facade under another name", () => {
    const sample = [
      "const kb = kl.getKb('x'); await kl.search('q'); void kl.dataDir;",
      "kl.reranker(config);",
      "this.kl.vectorStore(config);",
      "function f(layer: KnowledgeLayer) {}",
      "class C { constructor(private readonly kl: KnowledgeLayer) {} }",
    ].join("\n");
    const found = violations("src/cli/sample.ts", sample).map((v) => v.replace(/: .*/, ""));
    expect(found).toEqual(["src/cli/sample.ts:2", "src/cli/sample.ts:3", "src/cli/sample.ts:4"]);
  });
});

/**
 * Problems of the facade's side of the rule, as `"<member>: <problem>"`: an adapter
 * operation that is missing from the `KnowledgeLayer` class or declared synchronous, a
 * synchronous member that is missing, or one typed as a catalog-contract section with a
 * synchronous method.
 */
function facadeProblems(): string[] {
  const parse = (file: string): ts.SourceFile =>
    ts.createSourceFile(file, readFileSync(join(ROOT, file), "utf8"), ts.ScriptTarget.Latest, true);
  const facade = parse("src/knowledge-layer.ts");
  const contract = parse("src/store/catalog-contract.ts");
  const cls = facade.statements.find(
    (s): s is ts.ClassDeclaration => ts.isClassDeclaration(s) && s.name?.text === "KnowledgeLayer",
  );
  if (!cls) return ["KnowledgeLayer: class not found in src/knowledge-layer.ts"];
  const members = new Map<string, ts.ClassElement[]>();
  for (const m of cls.members) {
    const name = m.name && ts.isIdentifier(m.name) ? m.name.text : undefined;
    if (name) members.set(name, [...(members.get(name) ?? []), m]);
  }
  // Constructor parameter properties (`readonly dataDir: string`).
  const ctor = cls.members.find(ts.isConstructorDeclaration);
  for (const p of ctor?.parameters ?? [])
    if (ts.isIdentifier(p.name) && p.modifiers?.length) members.set(p.name.text, []);
  const sections = new Map<string, ts.InterfaceDeclaration>();
  for (const s of contract.statements) if (ts.isInterfaceDeclaration(s)) sections.set(s.name.text, s);
  const returnsPromise = (type: ts.TypeNode | undefined): boolean =>
    type !== undefined && ts.isTypeReferenceNode(type) && type.typeName.getText() === "Promise";
  const out: string[] = [];
  for (const name of ADAPTER_OPERATIONS) {
    const declarations = members.get(name);
    if (!declarations?.length) {
      out.push(`${name}: not a method of KnowledgeLayer`);
      continue;
    }
    for (const d of declarations) {
      const isAsync =
        ts.canHaveModifiers(d) && ts.getModifiers(d)?.some((m) => m.kind === ts.SyntaxKind.AsyncKeyword);
      if (!ts.isMethodDeclaration(d) || !(isAsync || returnsPromise(d.type)))
        out.push(`${name}: an adapter operation must be asynchronous (async, or returning a Promise)`);
    }
  }
  for (const name of Object.keys(SYNCHRONOUS_MEMBERS)) {
    const declarations = members.get(name);
    if (!declarations) {
      out.push(`${name}: not a member of KnowledgeLayer`);
      continue;
    }
    for (const d of declarations) {
      const type = ts.isGetAccessorDeclaration(d) || ts.isPropertyDeclaration(d) ? d.type : undefined;
      const section =
        type && ts.isTypeReferenceNode(type) ? sections.get(type.typeName.getText()) : undefined;
      for (const m of section?.members ?? [])
        if (ts.isMethodSignature(m) && !returnsPromise(m.type))
          out.push(
            `${name}: ${section?.name.text}.${m.name.getText()} of the catalog contract is synchronous`,
          );
    }
  }
  return out;
}
