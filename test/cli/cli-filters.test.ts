import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cliRunner, tempDir } from "../helpers/helpers.js";

const _ROOT = resolve(import.meta.dirname, "..", "..");
const tmp = tempDir();
const env = { ...process.env, KL_HOME: join(tmp.dir, "home") };

/** Runs the CLI from source in the temporary folder. */
const kl = cliRunner(tmp.dir, env);

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

  it("kl docs rm --where lists what it selects and removes nothing without --yes; {} needs --all", () => {
    // Not on a terminal and no --yes: the selection is listed, nothing removed, exit 2.
    const ask = kl("docs", "rm", "--where", '{"customer":"globex"}');
    expect(ask.code).toBe(2);
    expect(ask.stdout).toMatch(/globex\.txt\nwould remove 1 document\n$/);
    expect(ask.stderr).toContain("add --yes to remove it (--dry-run lists them without asking)");
    // {} (or a filter that happens to match everything, such as a misspelt field with $ne) needs --all too.
    const all = kl("docs", "rm", "--where", '{"custmer":{"$ne":"x"}}', "--yes");
    expect(all.code).toBe(2);
    expect(all.stderr).toContain(
      "the filter matches every document in every knowledge base (2); to remove them all, add --all --yes",
    );
    const dry = kl("docs", "rm", "--all", "--dry-run", "--json");
    expect(dry.code).toBe(0);
    expect(JSON.parse(dry.stdout)).toMatchObject({
      dryRun: true,
      removed: 0,
      ids: [expect.any(Number), expect.any(Number)],
    });
    // Still there, with its source attributes, tags and user metadata in docs list --json.
    const list = JSON.parse(kl("docs", "list", "--json").stdout).documents as { source: object }[];
    expect(list.map((d) => d.source)[0]).toEqual({
      uri: join(tmp.dir, "a", "acme.md"),
      path: join(tmp.dir, "a", "acme.md"),
      type: "markdown",
      title: "Terms",
      tags: ["legal", "signed"],
      metadata: { customer: "acme", year: 2024 },
    });
  }, 300_000);

  it("kl docs list, show and rm select documents by filter", () => {
    const list = kl("docs", "list", "--where", '{"customer":"globex"}', "--json");
    expect(list.code).toBe(0);
    const docs = JSON.parse(list.stdout).documents as { id: number; uri: string }[];
    expect(docs.map((d) => d.uri.split("/").pop())).toEqual(["globex.txt"]);
    const show = kl("docs", "show", String(docs[0]?.id), "--json");
    expect(JSON.parse(show.stdout).metadata.meta).toEqual({ customer: "globex", year: 2023 });
    const rm = kl("docs", "rm", "--where", '{"customer":"globex"}', "--yes", "--json");
    expect(JSON.parse(rm.stdout)).toMatchObject({ removed: 1 });
    expect(uris(kl("search", "payment terms", "--mode", "keyword", "--json").stdout)).toEqual(["acme.md"]);
  });

  it("keeps --meta and --tag across plain re-ingests until changed; --meta numbers only when exact", () => {
    const source = () =>
      (JSON.parse(kl("docs", "list", "--json").stdout).documents as { source: object }[]).map(
        (d) => d.source,
      );
    expect(
      kl("ingest", "a", "--no-embed", "--meta", "id=12345678901234567890", "--meta", "n=1.50").code,
    ).toBe(0);
    expect(source()[0]).toMatchObject({
      tags: ["legal", "signed"],
      metadata: { customer: "acme", year: 2024, id: "12345678901234567890", n: 1.5 },
    });
    const changed = kl("ingest", "a", "--no-embed", "--unset-meta", "n", "--untag", "signed", "--json");
    expect(JSON.parse(changed.stdout)).toMatchObject({ updated: 1 });
    expect(source()[0]).toMatchObject({
      tags: ["legal"],
      metadata: { customer: "acme", year: 2024, id: "12345678901234567890" },
    });
  }, 300_000);

  it("exits 2 for usage errors: unknown option, missing argument, bad argument, bad --meta", () => {
    const cases: [string[], RegExp][] = [
      [["search", "q", "--bogus"], /unknown option '--bogus'/],
      [["search"], /missing required argument 'query'/],
      [["docs", "show", "x"], /value 'x' is invalid/],
      [["ingest", "a", "--meta", "novalue"], /--meta novalue: expected key=value/],
    ];
    for (const [args, message] of cases) {
      const r = kl(...args);
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.stderr).toMatch(message);
    }
    expect(kl("--version").code).toBe(0);
  }, 300_000);
});
