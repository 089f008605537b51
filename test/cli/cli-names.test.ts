import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { displayName } from "../../src/display.js";
import { ExtractionError } from "../../src/errors.js";
import { cliRunner, tempDir } from "../helpers/helpers.js";

const _ROOT = resolve(import.meta.dirname, "..", "..");
const tmp = tempDir("kl-names-");
const env = { ...process.env, KL_HOME: join(tmp.dir, "home") };
afterAll(() => tmp.cleanup());

/** Runs the CLI from source in the temporary folder. */
const kl = cliRunner(tmp.dir, env);

const ESC = "\u001b";

describe("displayName", () => {
  it("leaves ordinary names alone, non-ASCII and spaces included", () => {
    for (const name of [
      "report.txt",
      "/srv/docs/Quarterly report 2024.pdf",
      "résumé ✓ 東京.md",
      "a\\b.txt",
      "👩‍💻.md",
    ]) {
      expect(displayName(name)).toBe(name);
    }
  });

  it("quotes and escapes a name with a control, separator or bidi character, readable back as JSON", () => {
    const cases: [string, string][] = [
      ["report\n2024.txt", '"report\\n2024.txt"'],
      ["tab\there\r.md", '"tab\\there\\r.md"'],
      [`evil${ESC}]0;pwned\u0007.txt`, '"evil\\u001b]0;pwned\\u0007.txt"'],
      ["c1\u0085.txt", '"c1\\u0085.txt"'],
      ["invoice\u202Etxt.exe", '"invoice\\u202etxt.exe"'],
      ["line\u2028sep", '"line\\u2028sep"'],
      ['say "hi"\n.txt', '"say \\"hi\\"\\n.txt"'],
      ["lone\uD800.txt", '"lone\\ud800.txt"'],
    ];
    for (const [name, shown] of cases) {
      expect(displayName(name)).toBe(shown);
      expect(JSON.parse(displayName(name))).toBe(name);
    }
  });

  it("is how ExtractionError names the file, while `path` keeps the real name", () => {
    const err = new ExtractionError("/d/bad\nname.pdf", "file is empty");
    expect(err.message).toBe('"/d/bad\\nname.pdf": file is empty');
    expect(err.path).toBe("/d/bad\nname.pdf");
  });
});

describe("kl with hostile file names", () => {
  const docs = join(tmp.dir, "docs");
  mkdirSync(docs, { recursive: true });
  const newline = join(docs, "report\n2024.txt");
  const hostile = join(docs, `evil${ESC}]0;pwned\u0007.txt`);
  const empty = join(docs, "empty\nfile.txt");
  writeFileSync(newline, "The zanzibar quarterly figures rose sharply in the spring.\n");
  writeFileSync(hostile, "Marmalade recipes from the zanzibar archive.\n");
  writeFileSync(empty, "");

  it("ingest names a failing file on one line", () => {
    const ingest = kl("ingest", docs, "--no-embed");
    expect(ingest.stdout).toContain(`  error   ${displayName(empty)}: file is empty`);
    expect(ingest.stdout).toMatch(/2 added/);
    expect(ingest.stdout).not.toContain(ESC);
  });

  it("search shows each result's file on its citation line; --json keeps the real names", () => {
    const human = kl("search", "zanzibar", "--mode", "keyword");
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).not.toContain(ESC);
    expect(human.stdout).not.toContain("\u0007");
    const citations = human.stdout.split("\n").filter((line) => /^\d+\. \[/.test(line));
    expect(citations).toHaveLength(2);
    expect(citations.some((l) => l.includes('"docs/report\\n2024.txt" (chunk 1/1'))).toBe(true);
    expect(citations.some((l) => l.includes('"docs/evil\\u001b]0;pwned\\u0007.txt" (chunk 1/1'))).toBe(true);
    // No line of the output is a fragment of a name cut by its line break.
    expect(human.stdout.split("\n").some((line) => line.startsWith("2024.txt"))).toBe(false);

    const json = JSON.parse(kl("search", "zanzibar", "--mode", "keyword", "--json").stdout);
    const paths = json.results.map((r: { source: { path: string } }) => r.source.path).sort();
    expect(paths).toEqual([hostile, newline].sort());
  });

  it("extract shows the name escaped in its header, and the error for an empty file on one stderr line", () => {
    const shown = kl("extract", newline);
    expect(shown.code).toBe(0);
    expect(shown.stdout.split("\n")[0]).toBe(`── ${displayName(newline)} (59 chars) ──`);
    const failed = kl("extract", empty);
    expect(failed.code).toBe(1);
    const lines = failed.stderr.trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`${displayName(empty)}: file is empty`);
  });
});
