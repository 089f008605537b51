/**
 * CODE strategy on tree-sitter: one realistic source per language (built from
 * segments, so every definition's exact span is known), oversized classes and
 * functions, non-BMP offsets, the fallback for unknown languages and broken
 * trees, and every file of the real code corpus (../shared/data/docs/code, read
 * in place) under the shared chunk invariants.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { Parser } from "web-tree-sitter";
import { grammarFor, languageOf, loadGrammar } from "../../src/chunk/code.js";
import { chunkCodeFallback } from "../../src/chunk/code-fallback.js";
import { type GrammarName, parseCode } from "../../src/chunk/code-grammars.js";
import { createChunker } from "../../src/chunk/index.js";
import { validateChunkingConfig } from "../../src/chunk/spans.js";
import type { ChunkingConfig } from "../../src/config.js";
import { languageForPath } from "../../src/extract/detect.js";
import { type Chunk, type ChunkType, chunkBody, type ExtractedDocument } from "../../src/types.js";
import { cfg, checkInvariants, doc, readShared, shared } from "../helpers/chunk-helpers.js";

/** Runs the CODE chunker. */
function run(d: ExtractedDocument, config: ChunkingConfig): Promise<Chunk[]> {
  return Promise.resolve(createChunker(config, "code").chunk(d));
}

const codeDoc = (text: string, language?: string, path?: string): ExtractedDocument =>
  doc(text, "code", { ...(language ? { language } : {}), ...(path ? { path } : {}) });

// ---- sources built from segments --------------------------------------------------------------

/** A definition inside a source: its text (doc comments and decorators included) is known exactly. */
interface Def {
  symbol: string;
  type: ChunkType;
  parts: Part[];
}
type Part = string | Def;

/** A definition found in a built source, with its exact span. */
interface Span {
  symbol: string;
  type: ChunkType;
  start: number;
  end: number;
  text: string;
  /** The enclosing definition's symbol. */
  parent?: string;
  /** Nested definitions (methods of a class). */
  children: Span[];
}

const def = (symbol: string, type: ChunkType, ...parts: Part[]): Def => ({ symbol, type, parts });
const fn = (symbol: string, ...parts: Part[]): Def => def(symbol, "code_function", ...parts);
const cls = (symbol: string, ...parts: Part[]): Def => def(symbol, "code_class", ...parts);

/** Concatenates parts into a source; returns it with the span of every definition. */
function build(...parts: Part[]): { text: string; defs: Span[] } {
  let text = "";
  const defs: Span[] = [];
  const add = (list: Part[], out: Span[], parent?: string): void => {
    for (const p of list) {
      if (typeof p === "string") {
        text += p;
        continue;
      }
      const start = text.length;
      const children: Span[] = [];
      add(p.parts, children, p.symbol);
      const span: Span = { symbol: p.symbol, type: p.type, start, end: text.length, text: "", children };
      span.text = text.slice(start, span.end);
      if (parent) span.parent = parent;
      out.push(span);
    }
  };
  add(parts, defs);
  return { text, defs };
}

/** One language's sample: the source, its imports (kept in a code_block) and its largest class. */
interface Sample {
  language: string;
  path?: string;
  src: { text: string; defs: Span[] };
  imports: string;
  /** Symbol of the class whose methods are checked when it is split. */
  bigClass: string;
}

const SAMPLES: Sample[] = [
  {
    language: "python",
    imports: "import logging\nfrom typing import Optional",
    bigClass: "RetryPolicy",
    src: build(
      '"""Session helpers for the HTTP client."""\nimport logging\nfrom typing import Optional\n\nlog = logging.getLogger(__name__)\nDEFAULT_TIMEOUT = 30  # seconds\n\n\n',
      cls(
        "RetryPolicy",
        '# Retries are counted per host.\n@dataclass(frozen=True)\nclass RetryPolicy:\n    """How often a request is retried."""\n\n    total: int = 3\n\n    ',
        fn(
          "exhausted",
          '@property\n    def exhausted(self) -> bool:\n        """True when no retry is left."""\n        return self.total <= 0',
        ),
        "\n\n    ",
        fn(
          "decrement",
          'def decrement(self) -> "RetryPolicy":\n        # A new policy: instances are immutable.\n        return RetryPolicy(total=self.total - 1)',
        ),
        "\n\n    ",
        fn(
          "describe",
          '# Used in log lines.\n    def describe(self) -> str:\n        left = max(self.total, 0)\n        return f"{left} retries left"',
        ),
      ),
      "\n\n\n",
      fn(
        "parse_timeout",
        '@lru_cache(maxsize=None)\ndef parse_timeout(value: Optional[str]) -> float:\n    """Parse a timeout such as "2.5s"."""\n    if value is None:\n        return DEFAULT_TIMEOUT\n    return float(value.rstrip("s"))',
      ),
      '\n\n\nif __name__ == "__main__":\n    print(parse_timeout("1s"))\n',
    ),
  },
  {
    language: "javascript",
    imports: "const path = require('path');\nconst { EventEmitter } = require('events');",
    bigClass: "Router",
    src: build(
      "'use strict';\n\nconst path = require('path');\nconst { EventEmitter } = require('events');\n\n",
      fn(
        "res.json",
        "/**\n * Send a JSON response.\n * @param {object} obj\n */\nres.json = function json(obj) {\n  const body = JSON.stringify(obj);\n  this.set('Content-Type', 'application/json');\n  return this.send(body);\n};",
      ),
      "\n\n",
      cls(
        "Router",
        "// Routes are matched in order.\nclass Router extends EventEmitter {\n  ",
        fn(
          "constructor",
          "constructor(options) {\n    super();\n    this.stack = [];\n    this.caseSensitive = Boolean(options && options.caseSensitive);\n  }",
        ),
        "\n\n  ",
        fn(
          "use",
          "/** Add a route handler. */\n  use(fn) {\n    this.stack.push(fn);\n    return this;\n  }",
        ),
        "\n\n  ",
        fn(
          "handle",
          "handle(req, res) {\n    for (const layer of this.stack) layer(req, res);\n    this.emit('handled', req.url);\n  }",
        ),
        "\n}",
      ),
      "\n\n",
      fn(
        "createApp",
        "const createApp = (opts = {}) => {\n  const app = new Router(opts);\n  app.set = (k, v) => { app[k] = v; };\n  return app;\n};",
      ),
      "\n\nmodule.exports = { Router, createApp, root: path.resolve('.') };\n",
    ),
  },
  {
    language: "typescript",
    imports: 'import { z } from "zod";\nimport type { Request, Response } from "./http.js";',
    bigClass: "BodyParser",
    src: build(
      'import { z } from "zod";\nimport type { Request, Response } from "./http.js";\n\n',
      cls(
        "JSONValue",
        "/** A JSON value. */\nexport type JSONValue = string | number | boolean | null | JSONValue[] | { [key: string]: JSONValue };",
      ),
      "\n\n",
      cls(
        "HandlerOptions",
        "export interface HandlerOptions {\n  /** Maximum body size in bytes. */\n  limit: number;\n  strict?: boolean;\n}",
      ),
      "\n\n",
      cls(
        "BodyParser",
        '@Injectable({ providedIn: "root" })\nexport class BodyParser<T> {\n  private readonly schema: z.ZodType<T>;\n\n  ',
        fn(
          "constructor",
          "constructor(schema: z.ZodType<T>, private options: HandlerOptions) {\n    this.schema = schema;\n  }",
        ),
        "\n\n  ",
        fn(
          "parse",
          '/** Parse and validate a request body. */\n  @Traced()\n  parse(raw: string): T {\n    if (raw.length > this.options.limit) throw new Error("body too large");\n    return this.schema.parse(JSON.parse(raw));\n  }',
        ),
        "\n\n  ",
        fn(
          "safeParse",
          "safeParse(raw: string): T | undefined {\n    try {\n      return this.parse(raw);\n    } catch {\n      return undefined;\n    }\n  }",
        ),
        "\n}",
      ),
      "\n\n",
      fn(
        "handler",
        "export const handler = async (req: Request): Promise<Response> => {\n  const parser = new BodyParser(z.object({ id: z.string() }), { limit: 1024 });\n  return { status: 200, body: parser.parse(await req.text()) };\n};",
      ),
      "\n\n",
      fn(
        "isJSONValue",
        'export function isJSONValue(v: unknown): v is JSONValue {\n  return v === null || ["string", "number", "boolean", "object"].includes(typeof v);\n}',
      ),
      "\n",
    ),
  },
  {
    language: "typescript",
    path: "/src/components/Card.tsx",
    imports: 'import React from "react";\nimport { useState } from "react";',
    bigClass: "Counter",
    src: build(
      'import React from "react";\nimport { useState } from "react";\n\n',
      fn(
        "Card",
        '/** A titled card. */\nexport function Card({ title, children }: { title: string; children: React.ReactNode }) {\n  return (\n    <section className="card">\n      <h2>{title}</h2>\n      {children}\n    </section>\n  );\n}',
      ),
      "\n\n",
      cls(
        "Counter",
        "export class Counter extends React.Component<{ start: number }, { n: number }> {\n  state = { n: this.props.start };\n\n  ",
        fn("increment", "increment = () => {\n    this.setState(({ n }) => ({ n: n + 1 }));\n  };"),
        "\n\n  ",
        fn(
          "render",
          'render() {\n    return <button type="button" onClick={this.increment}>{this.state.n} clicks</button>;\n  }',
        ),
        "\n}",
      ),
      "\n",
    ),
  },
  {
    language: "go",
    imports: 'import (\n\t"sync"\n\t"time"\n)',
    bigClass: "",
    src: build(
      '// Package cache provides an in-memory cache.\npackage cache\n\nimport (\n\t"sync"\n\t"time"\n)\n\n// DefaultTTL is used when no TTL is given.\nconst DefaultTTL = 5 * time.Minute\n\n',
      cls(
        "Cache",
        "// Cache is a concurrency-safe map with expiry.\ntype Cache struct {\n\tmu    sync.Mutex\n\titems map[string]entry\n}",
      ),
      "\n\n",
      cls("entry", "type entry struct {\n\tvalue   any\n\texpires time.Time\n}"),
      "\n\n",
      fn(
        "New",
        "// New returns an empty cache.\nfunc New() *Cache {\n\treturn &Cache{items: make(map[string]entry)}\n}",
      ),
      "\n\n",
      fn(
        "Get",
        "// Get returns the value for key, if present and not expired.\nfunc (c *Cache) Get(key string) (any, bool) {\n\tc.mu.Lock()\n\tdefer c.mu.Unlock()\n\te, ok := c.items[key]\n\tif !ok || time.Now().After(e.expires) {\n\t\treturn nil, false\n\t}\n\treturn e.value, true\n}",
      ),
      "\n\n",
      fn(
        "Set",
        "// Set stores value under key for DefaultTTL.\nfunc (c *Cache) Set(key string, value any) {\n\tc.mu.Lock()\n\tdefer c.mu.Unlock()\n\tc.items[key] = entry{value: value, expires: time.Now().Add(DefaultTTL)}\n}",
      ),
      "\n",
    ),
  },
  {
    language: "java",
    imports: "import java.util.ArrayList;\nimport java.util.List;",
    bigClass: "OrderRepository",
    src: build(
      "package com.example.store;\n\nimport java.util.ArrayList;\nimport java.util.List;\n\n",
      cls(
        "OrderRepository",
        "/**\n * An in-memory order repository.\n */\n@Repository\npublic class OrderRepository implements Repository<Order> {\n    private final List<Order> orders = new ArrayList<>();\n\n    ",
        fn("OrderRepository", "/** Creates an empty repository. */\n    public OrderRepository() {\n    }"),
        "\n\n    ",
        fn(
          "save",
          "/**\n     * Stores an order.\n     * @param order the order\n     */\n    @Override\n    public void save(Order order) {\n        orders.add(order);\n    }",
        ),
        "\n\n    ",
        fn(
          "findAll",
          "@Override\n    public List<Order> findAll() {\n        return new ArrayList<>(orders);\n    }",
        ),
        "\n\n    ",
        fn(
          "findByCustomer",
          "/** Orders of one customer. */\n    public List<Order> findByCustomer(String customerId) {\n        List<Order> out = new ArrayList<>();\n        for (Order o : orders) {\n            if (o.customerId().equals(customerId)) out.add(o);\n        }\n        return out;\n    }",
        ),
        "\n}",
      ),
      "\n",
    ),
  },
  {
    language: "rust",
    imports: "use std::fmt;\nuse std::ops::Add;",
    bigClass: "Point",
    src: build(
      "//! A tiny geometry module.\nuse std::fmt;\nuse std::ops::Add;\n\n",
      cls(
        "Point",
        "/// A point in the plane.\n#[derive(Debug, Clone, Copy, PartialEq)]\npub struct Point {\n    pub x: f64,\n    pub y: f64,\n}",
      ),
      "\n\n",
      def(
        "Point",
        "code_class",
        "impl Point {\n    /// The origin.\n    pub const ORIGIN: Point = Point { x: 0.0, y: 0.0 };\n\n    ",
        fn(
          "distance",
          "/// Distance to another point.\n    pub fn distance(&self, other: &Point) -> f64 {\n        ((self.x - other.x).powi(2) + (self.y - other.y).powi(2)).sqrt()\n    }",
        ),
        "\n\n    ",
        fn(
          "mirror",
          "/// Mirror across the x axis.\n    #[must_use]\n    pub fn mirror(self) -> Point {\n        Point { x: self.x, y: -self.y }\n    }",
        ),
        "\n}",
      ),
      "\n\n",
      cls(
        "fmt::Display for Point",
        'impl fmt::Display for Point {\n    fn fmt(&self, f: &mut fmt::Formatter<\'_>) -> fmt::Result {\n        write!(f, "({}, {})", self.x, self.y)\n    }\n}',
      ),
      "\n\n",
      fn(
        "centroid",
        "/// The mean of many points.\npub fn centroid(points: &[Point]) -> Option<Point> {\n    if points.is_empty() {\n        return None;\n    }\n    let n = points.len() as f64;\n    let (sx, sy) = points.iter().fold((0.0, 0.0), |(a, b), p| (a + p.x, b + p.y));\n    Some(Point { x: sx / n, y: sy / n })\n}",
      ),
      "\n",
    ),
  },
  {
    language: "csharp",
    imports: "using System;\nusing System.Collections.Generic;",
    bigClass: "InvoiceCalculator",
    src: build(
      "using System;\nusing System.Collections.Generic;\n\nnamespace Shop.Billing\n{\n    ",
      cls(
        "InvoiceCalculator",
        "/// <summary>Computes invoice totals.</summary>\n    [Serializable]\n    public class InvoiceCalculator\n    {\n        private readonly decimal _taxRate;\n\n        ",
        fn(
          "InvoiceCalculator",
          "/// <summary>Creates a calculator with a tax rate.</summary>\n        public InvoiceCalculator(decimal taxRate)\n        {\n            _taxRate = taxRate;\n        }",
        ),
        "\n\n        ",
        fn(
          "Total",
          '/// <summary>Total of the lines, tax included.</summary>\n        [Obsolete("Use TotalWithTax")]\n        public decimal Total(IEnumerable<decimal> lines)\n        {\n            decimal sum = 0;\n            foreach (var line in lines) sum += line;\n            return sum * (1 + _taxRate);\n        }',
        ),
        "\n\n        ",
        fn("ToString", 'public override string ToString() => $"InvoiceCalculator({_taxRate})";'),
        "\n    }",
      ),
      "\n\n    ",
      cls("IDiscount", "public interface IDiscount\n    {\n        decimal Apply(decimal amount);\n    }"),
      "\n}\n",
    ),
  },
  {
    language: "cpp",
    imports: "#include <string>\n#include <vector>",
    bigClass: "LineBuffer",
    src: build(
      "#include <string>\n#include <vector>\n\nnamespace text {\n\n",
      fn(
        "split",
        "// Splits a string on a delimiter.\nstd::vector<std::string> split(const std::string& s, char delim) {\n    std::vector<std::string> out;\n    std::string cur;\n    for (char c : s) {\n        if (c == delim) { out.push_back(cur); cur.clear(); }\n        else cur += c;\n    }\n    out.push_back(cur);\n    return out;\n}",
      ),
      "\n\n",
      cls(
        "LineBuffer",
        "/** A bounded buffer of lines. */\nclass LineBuffer {\npublic:\n    explicit LineBuffer(size_t capacity) : capacity_(capacity) {}\n\n    ",
        fn(
          "push",
          "// Appends a line, dropping the oldest when full.\n    void push(const std::string& line) {\n        if (lines_.size() == capacity_) lines_.erase(lines_.begin());\n        lines_.push_back(line);\n    }",
        ),
        "\n\n    ",
        fn(
          "join",
          'std::string join() const {\n        std::string all;\n        for (const auto& l : lines_) all += l + "\\n";\n        return all;\n    }',
        ),
        "\n\nprivate:\n    size_t capacity_;\n    std::vector<std::string> lines_;\n};",
      ),
      "\n\n}  // namespace text\n\n",
      fn(
        "main",
        'int main() {\n    text::LineBuffer buf(2);\n    buf.push("a");\n    return static_cast<int>(buf.join().size());\n}',
      ),
      "\n",
    ),
  },
  {
    language: "ruby",
    imports: "require 'json'\nrequire_relative 'store'",
    bigClass: "OrderSerializer",
    src: build(
      "require 'json'\nrequire_relative 'store'\n\n# Serialises orders for the API.\nmodule Api\n  ",
      cls(
        "OrderSerializer",
        "# One order as JSON.\n  class OrderSerializer\n    attr_reader :order\n\n    ",
        fn("initialize", "def initialize(order)\n      @order = order\n    end"),
        "\n\n    ",
        fn(
          "to_json",
          "# The JSON document.\n    def to_json(*args)\n      { id: order.id, total: order.total }.to_json(*args)\n    end",
        ),
        "\n\n    ",
        fn("many", "def self.many(orders)\n      orders.map { |o| new(o).to_json }\n    end"),
        "\n  end",
      ),
      "\nend\n\nputs Api::OrderSerializer.many([])\n",
    ),
  },
  {
    language: "php",
    imports: "use App\\Models\\User;\nuse Illuminate\\Http\\Request;",
    bigClass: "ProfileController",
    src: build(
      "<?php\ndeclare(strict_types=1);\n\nnamespace App\\Http;\n\nuse App\\Models\\User;\nuse Illuminate\\Http\\Request;\n\n",
      cls(
        "ProfileController",
        "/**\n * Handles user profile requests.\n */\n#[Controller]\nfinal class ProfileController extends BaseController\n{\n    private UserRepository $users;\n\n    ",
        fn(
          "__construct",
          "public function __construct(UserRepository $users)\n    {\n        $this->users = $users;\n    }",
        ),
        "\n\n    ",
        fn(
          "show",
          "/**\n     * Show one profile.\n     */\n    #[Route('/users/{id}')]\n    public function show(Request $request, int $id): array\n    {\n        $user = $this->users->find($id);\n        return ['name' => $user->name, 'email' => $user->email];\n    }",
        ),
        "\n}",
      ),
      "\n\n",
      fn(
        "format_name",
        'function format_name(string $first, string $last): string\n{\n    return trim("$first $last");\n}',
      ),
      "\n",
    ),
  },
];

const label = (s: Sample): string => (s.path ? `${s.language} (${s.path})` : s.language);
const all = (defs: Span[]): Span[] => defs.flatMap((d) => [d, ...all(d.children)]);
/** The chunk holding `span` entirely, if any. */
const holder = (chunks: Chunk[], span: { start: number; end: number }): Chunk | undefined =>
  chunks.find((c) => c.start <= span.start && span.end <= c.end);

describe("CODE on tree-sitter: one source per language", () => {
  test("the samples cover the ten required languages, each with a grammar", () => {
    const grammars = new Set(SAMPLES.map((s) => grammarFor(s.language, s.path)));
    for (const g of [
      "python",
      "javascript",
      "typescript",
      "tsx",
      "go",
      "java",
      "rust",
      "c-sharp",
      "cpp",
      "ruby",
      "php",
    ])
      expect(grammars.has(g as GrammarName), g).toBe(true);
  });

  test.each(SAMPLES.map((s) => [label(s), s] as const))(
    "%s: every top-level definition is exactly one chunk, with its doc comments and decorators",
    async (_name, s) => {
      const d = codeDoc(s.src.text, s.language, s.path);
      const config = cfg(1500);
      const chunks = await run(d, config);
      checkInvariants(d, chunks, config);
      for (const def of s.src.defs) {
        const c = chunks.find((x) => x.start === def.start);
        expect(c, `${def.symbol} starts a chunk`).toBeDefined();
        // It ends the chunk, but for the closing tokens of an enclosing namespace or module.
        expect(s.src.text.slice(def.end, c?.end), `${def.symbol} ends its chunk`).toMatch(
          /^(\s*(}|end|;|\/\/[^\n]*))*$/,
        );
        expect(c?.chunkType, def.symbol).toBe(def.type);
        expect(c?.metadata.symbol, def.symbol).toBe(def.symbol);
        expect(c?.metadata.language).toBe(s.language);
      }
      // Imports are kept, in a statement chunk.
      const imports = holder(chunks, {
        start: s.src.text.indexOf(s.imports),
        end: s.src.text.indexOf(s.imports) + s.imports.length,
      });
      expect(imports?.chunkType).toBe("code_block");
      // B15 rule: no chunk ends with a dangling decorator or comment line.
      for (const c of chunks) {
        const last =
          c.text
            .split("\n")
            .filter((l) => l.trim() !== "")
            .pop() ?? "";
        expect(/^\s*(@|#\[|\/\/|\/\*\*|\/\/\/)/.test(last), `${JSON.stringify(last)} ends a chunk`).toBe(
          false,
        );
      }
    },
  );

  test.each(SAMPLES.filter((s) => s.bigClass).map((s) => [label(s), s] as const))(
    "%s: an oversized class is split at method boundaries, each method whole",
    async (_name, s) => {
      const big = all(s.src.defs).find((x) => x.symbol === s.bigClass && x.children.length > 1) as Span;
      const longest = Math.max(...big.children.map((m) => m.end - m.start));
      const size = longest + 10;
      expect(size).toBeLessThan(big.end - big.start);
      const d = codeDoc(s.src.text, s.language, s.path);
      const config = cfg(size);
      const chunks = await run(d, config);
      checkInvariants(d, chunks, config);
      for (const m of big.children) {
        const c = holder(chunks, m);
        expect(c, `${m.symbol} whole`).toBeDefined();
        expect(c?.chunkType).toBe(m.type);
        expect(c?.metadata).toMatchObject({ symbol: m.symbol, parentSymbol: big.symbol });
        // No chunk boundary inside the method.
        expect(chunks.filter((x) => x.end > m.start && x.start < m.end)).toHaveLength(1);
      }
    },
  );

  test.each(SAMPLES.map((s) => [label(s), s] as const))(
    "%s: small sizes in characters and tokens keep the invariants and the definitions' text",
    async (_name, s) => {
      const d = codeDoc(s.src.text, s.language, s.path);
      const configs: ChunkingConfig[] = [cfg(60), cfg(120, 0, 40), { ...cfg(40, 0, 10), unit: "tokens" }];
      for (const config of configs) {
        const chunks = await run(d, config);
        checkInvariants(d, chunks, config);
        // Every definition's first line starts a chunk or lies inside one that holds its start.
        for (const x of all(s.src.defs))
          expect(holder(chunks, { start: x.start, end: x.start + 1 })).toBeDefined();
      }
    },
  );

  test("declarations inside a C include guard and a C++ namespace are chunked like top-level ones", async () => {
    const src = build(
      "#ifndef GEOM_H\n#define GEOM_H\n\n#include <math.h>\n\n",
      cls("Vec2", "/* A 2D vector. */\nstruct Vec2 {\n    double x, y;\n};"),
      "\n\n",
      fn(
        "dot",
        "// Dot product.\nstatic inline double dot(struct Vec2 a, struct Vec2 b) {\n    return a.x * b.x + a.y * b.y;\n}",
      ),
      "\n\n#endif\n",
    );
    const d = codeDoc(src.text, "c", "/inc/geom.h");
    const chunks = await run(d, cfg(1500));
    checkInvariants(d, chunks, cfg(1500));
    for (const x of src.defs) {
      const c = chunks.find((y) => y.start === x.start);
      expect(c?.metadata.symbol).toBe(x.symbol);
      expect(c?.chunkType).toBe(x.type);
    }
    expect(chunkBody(chunks[0] as Chunk)).toBe("#ifndef GEOM_H\n#define GEOM_H\n\n#include <math.h>");
  });

  test("tree-sitter offsets are exact JavaScript string offsets around non-BMP text", async () => {
    const src = build(
      '# 注释：表情 😀🎉 and 𝒳\ns = "😀中文😀"  # 🎉\n\n',
      fn("greet", '# 👋 says hi\ndef greet(name: str) -> str:\n    return f"👋 {name} 𝒳𝒴"'),
      "\n\n",
      cls("Emoji", 'class Emoji:\n    """🧪 test 中文"""\n    FACE = "😀"'),
      "\n",
    );
    // web-tree-sitter itself reports UTF-16 indices for a string input.
    const parser = new Parser();
    parser.setLanguage(await loadGrammar("python"));
    const tree = parser.parse(src.text);
    expect(tree?.rootNode.endIndex).toBe(src.text.length);
    const names = tree?.rootNode.descendantsOfType("identifier") ?? [];
    for (const n of names) expect(src.text.slice(n.startIndex, n.endIndex)).toBe(n.text);
    const greet = names.find((n) => n.text === "greet");
    expect(greet?.startIndex).toBe(src.text.indexOf("greet"));
    tree?.delete();
    parser.delete();

    const d = codeDoc(src.text, "python");
    for (const config of [cfg(1500), cfg(60), { ...cfg(30), unit: "tokens" as const }]) {
      const chunks = await run(d, config);
      checkInvariants(d, chunks, config);
    }
    const chunks = await run(d, cfg(1500));
    for (const x of src.defs) {
      const c = chunks.find((y) => y.start === x.start);
      expect(c && chunkBody(c)).toBe(x.text);
      expect(c?.end).toBe(x.end);
    }
    // The same in JavaScript, with astral characters in a template literal and a comment.
    const js = build(
      // biome-ignore lint/suspicious/noTemplateCurlyInString: JavaScript source text
      "const banner = `🚀 ${'中'.repeat(2)} 🚀`; // 𝄞\n\n",
      // biome-ignore lint/suspicious/noTemplateCurlyInString: JavaScript source text
      fn("tag", "/** 🏷️ tags 👍🏽 */\nfunction tag(s) {\n  return `#${s} 🔖`;\n}"),
      "\n",
    );
    const jsChunks = await run(codeDoc(js.text, "javascript"), cfg(1500));
    expect(chunkBody(jsChunks.find((c) => c.metadata.symbol === "tag") as Chunk)).toBe(js.defs[0]?.text);
  });
});

describe("CODE: oversized functions and statements", () => {
  const statements = (n: number, line: (i: number) => string): string =>
    Array.from({ length: n }, (_, i) => line(i)).join("\n");
  const cases: [string, string, string, string][] = [
    [
      "python",
      'def total(rows):\n    """Sum of the rows."""\n',
      statements(14, (i) => `    acc_${i} = rows[${i}] * ${i + 1} + helper(rows, ${i})`),
      "\n    return acc_0",
    ],
    [
      "javascript",
      "/** Sum of the rows. */\nfunction total(rows) {\n",
      statements(14, (i) => `  const acc${i} = rows[${i}] * ${i + 1} + helper(rows, ${i});`),
      "\n  return acc0;\n}",
    ],
    [
      "go",
      "// total sums the rows.\nfunc total(rows []int) int {\n",
      statements(14, (i) => `\tacc${i} := rows[${i}]*${i + 1} + helper(rows, ${i})`),
      "\n\treturn acc0\n}",
    ],
    [
      "java",
      "class T {\n    /** Sum of the rows. */\n    int total(int[] rows) {\n",
      statements(14, (i) => `        int acc${i} = rows[${i}] * ${i + 1} + helper(rows, ${i});`),
      "\n        return acc0;\n    }\n}",
    ],
    [
      "rust",
      "/// Sum of the rows.\nfn total(rows: &[i64]) -> i64 {\n",
      statements(14, (i) => `    let acc${i} = rows[${i}] * ${i + 1} + helper(rows, ${i});`),
      "\n    acc0\n}",
    ],
  ];
  test.each(cases)(
    "%s: a function larger than a chunk is split between statements",
    async (language, head, body, tail) => {
      const text = `${head}${body}${tail}\n`;
      const d = codeDoc(text, language);
      const config = cfg(260);
      const chunks = await run(d, config);
      checkInvariants(d, chunks, config);
      expect(chunks.length).toBeGreaterThan(2);
      // Every statement line lies whole in one chunk: cuts fall only between statements.
      for (const line of body.split("\n")) {
        const start = text.indexOf(line.trim());
        expect(holder(chunks, { start, end: start + line.trim().length }), line).toBeDefined();
      }
      // The first piece is the function's head with its doc comment, named after it.
      expect(chunks[0]?.start).toBe(0);
      expect(chunks[0]?.metadata.symbol ?? chunks[0]?.metadata.parentSymbol).toMatch(/total|T/);
      for (const c of chunks.slice(1, -1)) expect(c.metadata.parentSymbol).toMatch(/total|T/);
    },
  );

  test("an oversized loop inside a function is split at its own statements", async () => {
    const inner = statements(12, (i) => `        out.append(transform(item, ${i}) + offset_${i})`);
    const text = `def run(items):\n    out = []\n    for item in items:\n${inner}\n    return out\n`;
    const d = codeDoc(text, "python");
    const config = cfg(200);
    const chunks = await run(d, config);
    checkInvariants(d, chunks, config);
    for (const line of inner.split("\n")) {
      const start = text.indexOf(line.trim());
      expect(holder(chunks, { start, end: start + line.trim().length })).toBeDefined();
    }
  });

  test("a string literal larger than a chunk is cut at line boundaries, within size", async () => {
    const lines = Array.from({ length: 60 }, (_, i) => `line ${i} of a long embedded document 😀`);
    const text = `TEMPLATE = """\n${lines.join("\n")}\n"""\n\n\ndef render():\n    return TEMPLATE\n`;
    const d = codeDoc(text, "python");
    for (const config of [cfg(300), { ...cfg(80), unit: "tokens" as const }]) {
      const chunks = await run(d, config);
      checkInvariants(d, chunks, config);
      for (const c of chunks) {
        expect(c.end === text.length || /[\n"]/.test(text.charAt(c.end)) || text.charAt(c.end) === "\n").toBe(
          true,
        );
      }
      expect(chunkBody(chunks.find((c) => c.metadata.symbol === "render") as Chunk)).toBe(
        "def render():\n    return TEMPLATE",
      );
    }
  });

  test("statements and imports are kept and grouped while they fit; small definitions group below minChunkSize", async () => {
    const imports = Array.from({ length: 6 }, (_, i) => `import mod_${i}`).join("\n");
    const consts = Array.from({ length: 6 }, (_, i) => `LIMIT_${i} = ${i * 10}`).join("\n");
    const text = `${imports}\n\n${consts}\n\n\ndef a():\n    return 1\n\n\ndef b():\n    return 2\n`;
    const d = codeDoc(text, "python");
    const chunks = await run(d, cfg(1500));
    expect(chunkBody(chunks[0] as Chunk)).toBe(`${imports}\n\n${consts}`);
    expect(chunks.map((c) => c.metadata.symbol)).toEqual([undefined, "a", "b"]);
    const grouped = await run(d, cfg(1500, 0, 100));
    checkInvariants(d, grouped, cfg(1500, 0, 100));
    expect(grouped).toHaveLength(1);
    // With a small chunk size the statements split into several chunks, none over size, nothing lost.
    const small = await run(d, cfg(40));
    checkInvariants(d, small, cfg(40));
    expect(small.filter((c) => c.text.includes("import")).length).toBeGreaterThan(1);
  });
});

describe("CODE: fallback", () => {
  test("an unknown language splits at blank lines", async () => {
    const blocks = ["block one line\nmore one", "block two line\nmore two", "block three"];
    const d = codeDoc(blocks.join("\n\n"), "cobol");
    const chunks = await run(d, cfg(30));
    expect(chunks.map(chunkBody)).toEqual(blocks);
    expect(chunks.every((c) => c.chunkType === "code_block" && c.metadata.language === "cobol")).toBe(true);
    // No language and an unknown extension: the same.
    const bare = await run(doc(blocks.join("\n\n"), "code", { path: "/x/notes.zzz" }), cfg(30));
    expect(bare.map(chunkBody)).toEqual(blocks);
  });

  test("languages without a grammar use the regex families (Kotlin)", async () => {
    const text =
      'package demo\n\n/** Greets. */\nfun greet(name: String): String {\n    return "Hi $name"\n}\n\nclass Box(val v: Int) {\n    fun get() = v\n}\n';
    const d = codeDoc(text, "kotlin");
    const chunks = await run(d, cfg(1500));
    checkInvariants(d, chunks, cfg(1500));
    expect(
      chunkBody(chunks.find((c) => c.metadata.symbol === "greet") as Chunk).startsWith("/** Greets. */"),
    ).toBe(true);
    expect(chunks.find((c) => c.metadata.symbol === "Box")?.chunkType).toBe("code_class");
  });

  test("a tree that is mostly errors falls back to the line splitter", async () => {
    const text = `${"a*& <<< )) ]] {{ :: ;; ?? \n".repeat(40)}\n\n${"@@ ## !! (( >> \n".repeat(40)}`;
    for (const language of ["python", "cpp", "java", "javascript"]) {
      const parsed = await parseCode(text, grammarFor(language) as GrammarName);
      const d = codeDoc(text, language);
      const chunks = await run(d, cfg(200));
      checkInvariants(d, chunks, cfg(200));
      if (!parsed.tree) {
        const limits = validateChunkingConfig(cfg(200));
        const expected = chunkCodeFallback(text, language, limits).map((c) => [c.start, c.end]);
        expect(chunks.map((c) => [c.start, c.end])).toEqual(expected);
      } else {
        parsed.tree.delete();
      }
    }
  });

  test("a grammar that cannot be loaded is reported, not thrown", async () => {
    const result = await parseCode("x = 1", "no-such-grammar" as GrammarName);
    expect(result.tree).toBeUndefined();
    expect("reason" in result && result.reason).toMatch(/failed to load/);
  });

  test("language detection: metadata, extensions, TSX and C via the C++ grammar", () => {
    expect(languageOf(doc("x", "code", { path: "/a/b.py" }))).toBe("python");
    expect(languageOf(doc("x", "code", { path: "/a/b.tsx" }))).toBe("typescript");
    expect(languageOf(doc("x", "code", { language: "Go", path: "/a/b.py" }))).toBe("go");
    expect(grammarFor("typescript", "/a/b.tsx")).toBe("tsx");
    expect(grammarFor("typescript", "/a/b.ts")).toBe("typescript");
    expect(grammarFor("c")).toBe("cpp");
    expect(grammarFor("csharp")).toBe("c-sharp");
    expect(grammarFor("cobol")).toBeUndefined();
  });

  test("JSX in a TypeScript document without a .tsx path is parsed as TSX", async () => {
    const src = build(
      'import React from "react";\n\n',
      fn("App", 'export function App(): JSX.Element {\n  return <div className="app">{1 + 1}</div>;\n}'),
      "\n",
    );
    const chunks = await run(codeDoc(src.text, "typescript"), cfg(1500));
    expect(chunkBody(chunks.find((c) => c.metadata.symbol === "App") as Chunk)).toBe(src.defs[0]?.text);
  });
});

describe("CODE: shared cases and real code", () => {
  test("B15: comments and decorators stay with their definition", async () => {
    const text = readShared("cases/B15.py");
    const expected = JSON.parse(readShared("cases/B15.expect.json")) as { params: { maxChars: number } };
    const config = cfg(expected.params.maxChars);
    const d = codeDoc(text, "python");
    const chunks = await run(d, config);
    checkInvariants(d, chunks, config);
    const find = (s: string) => chunks.find((c) => c.text.includes(s)) as Chunk;
    expect(find("class RetryPolicy").text).toContain("# TODO(ops): retry budget is too low for batch jobs");
    expect(find("def list_jobs").text).toContain('@router.get("/jobs")');
    expect(find("def list_jobs").text).toContain("@requires_auth");
    expect(find("def legacy_list").text).toContain("# Helper kept for backwards compatibility.");
    for (const c of chunks) {
      const lines = c.text.split("\n").filter((l) => l.trim() !== "");
      expect(/^[@#]/.test(lines[lines.length - 1] ?? "")).toBe(false);
    }
    expect(find("class RetryPolicy")).toMatchObject({
      chunkType: "code_class",
      metadata: { symbol: "RetryPolicy", language: "python" },
    });
    expect(find("def list_jobs")).toMatchObject({
      chunkType: "code_function",
      metadata: { symbol: "list_jobs" },
    });
  });

  test("express and gin: doc comments open the chunk of the function they document", async () => {
    const js = readShared("data/docs/code/expressjs+express/lib/response.js");
    const jsChunks = await run(codeDoc(js, "javascript"), cfg(1500));
    const send = jsChunks.find((c) => c.text.includes("res.send = function send(body)")) as Chunk;
    expect(send.metadata).toMatchObject({ symbol: "res.send", language: "javascript" });
    expect(chunkBody(send).startsWith("/**")).toBe(true);
    const go = readShared("data/docs/code/gin-gonic+gin/context.go");
    const goChunks = await run(codeDoc(go, "go"), cfg(1500));
    const copy = goChunks.find((c) => c.text.includes("func (c *Context) Copy() *Context {")) as Chunk;
    expect(copy).toMatchObject({ chunkType: "code_function", metadata: { symbol: "Copy" } });
    expect(chunkBody(copy).startsWith("// Copy returns a copy")).toBe(true);
  });

  test("zod util.ts: small neighbouring types are grouped below minChunkSize and listed", async () => {
    const ts = readShared("data/docs/code/colinhacks+zod/packages/zod/src/v4/core/util.ts");
    const d = doc(ts, "code", { path: "/x/util.ts" });
    const chunks = await run(d, cfg(1500, 0, 500));
    checkInvariants(d, chunks, cfg(1500, 0, 500));
    expect(chunks.every((c) => c.metadata.language === "typescript")).toBe(true);
    expect(
      chunks.some((c) => ((c.metadata.symbols as string[] | undefined) ?? []).includes("JSONType")),
    ).toBe(true);
  });

  test("chunking is deterministic", async () => {
    const text = readShared("data/docs/code/psf+requests/src/requests/sessions.py");
    const d = codeDoc(text, "python");
    expect(await run(d, cfg(500, 0, 100))).toEqual(await run(d, cfg(500, 0, 100)));
  });

  /** Every text file of the real code corpus (requests, express, zod, gin), as the extractor would tag it. */
  function corpus(): ExtractedDocument[] {
    const root = shared("data/docs/code");
    const out: ExtractedDocument[] = [];
    const walk = (dir: string): void => {
      for (const name of readdirSync(dir).sort()) {
        const p = join(dir, name);
        if (statSync(p).isDirectory()) {
          walk(p);
          continue;
        }
        const bytes = readFileSync(p);
        if (bytes.includes(0)) continue; // binary (certificates, PDFs)
        const language = languageForPath(p);
        out.push(doc(bytes.toString("utf8"), "code", { path: p, ...(language ? { language } : {}) }));
      }
    };
    walk(root);
    return out;
  }

  const FUNCTION_NODES = new Set([
    "function_definition",
    "function_declaration",
    "generator_function_declaration",
    "method_definition",
    "method_declaration",
  ]);

  test("every file of the real code corpus keeps the invariants; functions that fit stay whole", async () => {
    const docs = corpus();
    expect(docs.length).toBeGreaterThan(900);
    const languages = new Set(docs.map((d) => d.metadata.language));
    for (const l of ["python", "javascript", "typescript", "go"]) expect(languages.has(l)).toBe(true);
    const parsers = new Map<GrammarName, Parser>();
    for (const config of [cfg(1500, 0, 500), cfg(400)]) {
      let fitting = 0;
      let whole = 0;
      for (const d of docs) {
        const chunks = await run(d, config);
        checkInvariants(d, chunks, config);
        const grammar = grammarFor(d.metadata.language as string | undefined, d.metadata.path as string);
        if (!grammar) continue;
        let parser = parsers.get(grammar);
        if (!parser) {
          parser = new Parser();
          parser.setLanguage(await loadGrammar(grammar));
          parsers.set(grammar, parser);
        }
        const tree = parser.parse(d.text);
        if (!tree) continue;
        const stack = [tree.rootNode];
        while (stack.length > 0) {
          const n = stack.pop();
          if (!n) continue;
          if (FUNCTION_NODES.has(n.type) && n.endIndex - n.startIndex <= config.chunkSize) {
            fitting++;
            if (holder(chunks, { start: n.startIndex, end: n.endIndex })) whole++;
          }
          stack.push(...n.children);
        }
        tree.delete();
      }
      expect(fitting).toBeGreaterThan(1000);
      expect(whole / fitting, `${whole}/${fitting} functions whole at ${config.chunkSize}`).toBeGreaterThan(
        0.97,
      );
    }
    for (const p of parsers.values()) p.delete();
  });

  test("the real code corpus in tokens keeps the invariants", async () => {
    const config: ChunkingConfig = { ...cfg(256, 0, 64), unit: "tokens" };
    const docs = corpus().filter((d) => /\.(py|js|go)$/.test(String(d.metadata.path)));
    expect(docs.length).toBeGreaterThan(200);
    for (const d of docs) checkInvariants(d, await run(d, config), config);
  });
});
