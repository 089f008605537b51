import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { attachSource, DEFAULT_INLINE_LIMIT, routeText } from "../../src/agent/routing.js";
import { ExtractionError, KnowledgeLayerError } from "../../src/errors.js";
import { KnowledgeLayer } from "../../src/knowledge-layer.js";
import { docsPath, tempDir } from "../helpers/helpers.js";

const rust = (f: string): string => docsPath("markdown", "rust_book_src", f);
/** Extracts to exactly 3,000 characters (the raw file is 3,000 characters too). */
const EXACT_3000 = rust("ch14-01-release-profiles.md");
/** A Go file that also extracts to exactly 3,000 characters. */
const GO_3000 = docsPath("code", "gin-gonic+gin", "debug.go");
/** 30,721 characters extracted. */
const LONG = rust("ch10-03-lifetime-syntax.md");

describe("routeText", () => {
  it("inlines up to the limit inclusive and retrieves above it", () => {
    expect(DEFAULT_INLINE_LIMIT).toBe(3000);
    expect(routeText("a".repeat(3000))).toBe("inline");
    expect(routeText("a".repeat(3001))).toBe("retrieve");
    expect(routeText("a".repeat(3000), 3000)).toBe("inline");
    expect(routeText("ab", 1)).toBe("retrieve");
    expect(routeText("a", 0)).toBe("retrieve");
    expect(routeText("a".repeat(1_000_000), Number.POSITIVE_INFINITY)).toBe("inline");
  });

  it("counts characters as UTF-16 code units", () => {
    // "€" is one code unit, "𝄞" two.
    expect(routeText("€".repeat(10), 10)).toBe("inline");
    expect(routeText("𝄞".repeat(5), 9)).toBe("retrieve");
  });

  it("rejects empty text and invalid limits", () => {
    expect(() => routeText("")).toThrow(/empty/);
    expect(() => routeText(" \n\t ")).toThrow(/empty/);
    for (const bad of [-1, 1.5, Number.NaN, Number.NEGATIVE_INFINITY]) {
      expect(() => routeText("text", bad)).toThrow(KnowledgeLayerError);
      expect(() => routeText("text", bad)).toThrow(/inlineLimit must be a non-negative integer/);
    }
  });
});

describe("attachSource on real files", () => {
  const tmp = tempDir();
  let kl: KnowledgeLayer;
  const count = (sql: string): number => (kl.db.prepare(sql).get() as { n: number }).n;
  const indexed = (): Promise<{ documents: number; chunks: number }> => kl.counts("default");
  const raw3000 = readFileSync(EXACT_3000, "utf8");
  /** The same Markdown with one character more: "!" before the final newline. */
  const raw3001 = raw3000.replace(/\n$/, "!\n");

  beforeAll(() => {
    kl = KnowledgeLayer.open({ dataDir: join(tmp.dir, "data"), cache: { type: "none" } });
  });
  afterAll(async () => {
    await kl.close();
    tmp.cleanup();
  });

  it("inlines a file of exactly 3,000 characters and indexes nothing", async () => {
    expect(raw3000.length).toBe(3000);
    const result = await attachSource(kl, { path: EXACT_3000 });
    expect(result.route).toBe("inline");
    if (result.route !== "inline") return;
    expect(result.chars).toBe(3000);
    expect(result.text).toHaveLength(3000);
    expect(result.text.startsWith("## Customizing Builds with Release Profiles")).toBe(true);
    expect(result.documents).toHaveLength(1);
    expect(result.documents[0]?.uri).toBe(EXACT_3000);
    expect(result.limit).toBe(3000);

    const go = await attachSource(kl, { path: GO_3000 });
    expect(go.route).toBe("inline");
    expect(go.chars).toBe(3000);
    expect(go.route === "inline" && go.documents[0]?.metadata.language).toBe("go");

    // Nothing was chunked, embedded or stored.
    expect(await indexed()).toMatchObject({ documents: 0, chunks: 0 });
    expect(count("SELECT COUNT(*) AS n FROM documents")).toBe(0);
    expect(count("SELECT COUNT(*) AS n FROM embedding_cache")).toBe(0);
  });

  it("inlines 3,000 characters given as bytes and retrieves 3,001", async () => {
    const bytes3000 = new TextEncoder().encode(raw3000);
    const inline = await attachSource(kl, { name: "release-profiles.md", bytes: bytes3000 });
    expect(inline).toMatchObject({ route: "inline", chars: 3000 });
    expect((await indexed()).documents).toBe(0);

    const bytes3001 = new TextEncoder().encode(raw3001);
    const result = await attachSource(kl, { name: "release-profiles.md", bytes: bytes3001 });
    expect(result.route).toBe("retrieve");
    if (result.route !== "retrieve") return;
    expect(result.chars).toBe(3001);
    expect(result.kb).toBe("default");
    expect(result.uris).toEqual(["release-profiles.md"]);
    expect(result.summary).toMatchObject({ added: 1, documents: 1, errors: [] });
    expect(result.summary.chunks).toBeGreaterThan(0);
    expect(result.summary.embedded.computed).toBeGreaterThan(0);
    expect(await indexed()).toMatchObject({ documents: 1, chunks: result.summary.chunks });

    const { results } = await kl.search("What are the default opt-level settings for dev and release?", {
      topK: 3,
    });
    expect(results[0]?.source.uri).toBe("release-profiles.md");
    expect(results.some((r) => r.text.includes("opt-level"))).toBe(true);

    // The same content again: already indexed, nothing to do.
    const again = await attachSource(kl, { name: "release-profiles.md", bytes: bytes3001 });
    expect(again.route === "retrieve" && again.summary).toMatchObject({ unchanged: 1, added: 0 });
  });

  it("retrieves a file of 3,001 characters on disk, and respects a custom limit", async () => {
    const path = join(tmp.dir, "release-profiles-3001.md");
    writeFileSync(path, raw3001);
    const result = await attachSource(kl, { path }, { kb: "profiles", inlineLimit: 3000 }).catch(
      (e: unknown) => e,
    );
    // An unknown KB is refused before anything is extracted or indexed.
    expect(result).toBeInstanceOf(KnowledgeLayerError);
    expect(String(result)).toMatch(/unknown knowledge base "profiles"/);

    await kl.createKb("profiles");
    const attached = await attachSource(kl, { path }, { kb: "profiles" });
    expect(attached).toMatchObject({ route: "retrieve", kb: "profiles", chars: 3001, uris: [path] });
    expect((await kl.counts("profiles")).documents).toBe(1);

    // The boundary follows the limit: 3,001 characters inline at 3,001, 3,000 retrieve at 2,999.
    expect(await attachSource(kl, { path }, { inlineLimit: 3001 })).toMatchObject({ route: "inline" });
    const before = (await kl.counts("default")).documents;
    const small = await attachSource(kl, { path: EXACT_3000 }, { inlineLimit: 2999, kb: "profiles" });
    expect(small).toMatchObject({ route: "retrieve", chars: 3000, limit: 2999 });
    expect((await kl.counts("profiles")).documents).toBe(2);
    expect((await kl.counts("default")).documents).toBe(before);
  });

  it("indexes a long file and finds its passages", async () => {
    const result = await attachSource(kl, { path: LONG });
    expect(result).toMatchObject({ route: "retrieve", chars: 30721 });
    if (result.route !== "retrieve") return;
    expect(result.summary.chunks).toBeGreaterThan(10);
    const { results } = await kl.search("what does the 'static lifetime mean?", { topK: 3 });
    expect(results[0]?.source.path).toBe(LONG);
  });

  it("refuses empty sources and invalid limits with clear errors", async () => {
    const empty = join(tmp.dir, "empty.md");
    writeFileSync(empty, "");
    const err = await attachSource(kl, { path: empty }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ExtractionError);
    expect(String(err)).toMatch(/file is empty/);
    const blank = await attachSource(kl, {
      name: "blank.txt",
      bytes: new TextEncoder().encode("  \n\n  "),
    }).catch((e: unknown) => e);
    expect(blank).toBeInstanceOf(KnowledgeLayerError);
    expect(String(blank)).toMatch(/blank\.txt: .*empty/);
    await expect(attachSource(kl, { path: EXACT_3000 }, { inlineLimit: -5 })).rejects.toThrow(
      /inlineLimit must be a non-negative integer/,
    );
    await expect(attachSource(kl, { path: join(tmp.dir, "missing.md") })).rejects.toThrow(/file not found/);
  });
});
