/** `kl ingest --meta/--tag`, `kl search --where` (exit 2 on a bad filter) and `kl docs list|show|rm`. */
import { spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tempDir } from "./helpers.js";

const ROOT = resolve(import.meta.dirname, "..");
const tmp = tempDir();
const env = { ...process.env, KL_HOME: join(tmp.dir, "home") };

function kl(...args: string[]): { code: number; stdout: string; stderr: string } {
  const r = spawnSync(
    process.execPath,
    ["--import", join(ROOT, "node_modules/tsx/dist/loader.mjs"), join(ROOT, "src/cli/main.ts"), ...args],
    { cwd: tmp.dir, env, encoding: "utf8", timeout: 120_000 },
  );
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

beforeAll(() => {
  mkdirSync(join(tmp.dir, "a"));
  mkdirSync(join(tmp.dir, "b"));
  writeFileSync(
    join(tmp.dir, "a", "acme.md"),
    "---\ntags: [legal]\n---\n# Terms\n\nPayment terms are net 30.\n",
  );
  writeFileSync(join(tmp.dir, "b", "globex.txt"), "Payment terms are net 60 days.\n");
  expect(
    kl("ingest", "a", "--no-embed", "--meta", "customer=acme", "--meta", "year=2024", "--tag", "signed").code,
  ).toBe(0);
  expect(kl("ingest", "b", "--no-embed", "--meta", "customer=globex", "--meta", "year=2023").code).toBe(0);
});
afterAll(() => tmp.cleanup());

const uris = (stdout: string): string[] =>
  (JSON.parse(stdout) as { results: { source: { uri: string } }[] }).results.map(
    (r) => r.source.uri.split("/").pop() as string,
  );

describe("kl filters", () => {
  it("kl search --where filters on user metadata, typed numbers, tags and front matter", () => {
    const search = (where: string) =>
      kl("search", "payment terms", "--mode", "keyword", "--json", "--where", where);
    expect(uris(search('{"customer":"acme"}').stdout)).toEqual(["acme.md"]);
    expect(uris(search('{"year":{"$lt":2024}}').stdout)).toEqual(["globex.txt"]);
    expect(uris(search('{"tags":{"$contains":"signed"}}').stdout)).toEqual(["acme.md"]);
    expect(uris(search('{"tags":{"$contains":"legal"},"type":"markdown"}').stdout)).toEqual(["acme.md"]);
    expect(uris(search('{"$not":{"type":"markdown"}}').stdout)).toEqual(["globex.txt"]);
  });

  it("exits 2 with the position of a malformed filter", () => {
    const bad = kl("search", "payment", "--where", '{"year":{"$gte":"later"}}');
    expect(bad.code).toBe(2);
    expect(bad.stderr.trim()).toBe(
      'kl: filter.year.$gte: expected an ISO date or number, got the string "later"',
    );
    const json = kl("search", "payment", "--where", "{year: 1}");
    expect(json.code).toBe(2);
    expect(json.stderr).toMatch(/^kl: filter: not valid JSON/);
  });

  it("kl docs list, show and rm select documents by filter", () => {
    const list = kl("docs", "list", "--where", '{"customer":"globex"}', "--json");
    expect(list.code).toBe(0);
    const docs = JSON.parse(list.stdout).documents as { id: number; uri: string }[];
    expect(docs.map((d) => d.uri.split("/").pop())).toEqual(["globex.txt"]);
    const show = kl("docs", "show", String(docs[0]?.id), "--json");
    expect(JSON.parse(show.stdout).metadata.meta).toEqual({ customer: "globex", year: 2023 });
    const rm = kl("docs", "rm", "--where", '{"customer":"globex"}', "--json");
    expect(JSON.parse(rm.stdout)).toMatchObject({ removed: 1 });
    expect(uris(kl("search", "payment terms", "--mode", "keyword", "--json").stdout)).toEqual(["acme.md"]);
  });
});
