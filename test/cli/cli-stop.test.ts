/**
 * Exit codes and side effects of the CLI: `kl ingest` stopped by SIGTERM/SIGINT
 * prints what it committed and exits 143/130 with a consistent database; read
 * commands refuse a data directory that does not exist and create nothing;
 * `kl mcp --allow-ingest` needs an explicit, narrow `--ingest-root`.
 */

import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join, resolve } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KnowledgeLayer } from "../../src/knowledge-layer.js";
import { Bm25Index } from "../../src/retrieve/bm25.js";
import { tempDir } from "../helpers/helpers.js";

const ROOT = resolve(import.meta.dirname, "..", "..");
const tmp = tempDir("kl-cli-stop-");
const env = { ...process.env, KL_CACHE_URL: "none", KL_HOME: join(tmp.dir, "unused-home") };
const corpus = join(tmp.dir, "corpus");
const FILES = 240;
/** Slows every `fs/promises.open` (extraction opens each file) so a signal lands mid-ingest. */
const slowOpen = join(tmp.dir, "slow-open.mjs");

const cliArgs = (...args: string[]): string[] => [
  "--import",
  join(ROOT, "node_modules/tsx/dist/loader.mjs"),
  "--import",
  slowOpen,
  join(ROOT, "src/cli/main.ts"),
  ...args,
];

/** Runs the CLI to completion. */
function kl(...args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, cliArgs(...args), {
    cwd: tmp.dir,
    env,
    encoding: "utf8",
    timeout: 60_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Sentences that differ per file and paragraph, so every file is its own content with several chunks. */
function fileText(i: number): string {
  const paragraphs: string[] = [`# Report ${i}`];
  for (let p = 0; p < 12; p++) {
    paragraphs.push(
      `Paragraph ${p} of report ${i} describes pump station ${i * 13 + p}, its valves, the pressure readings ` +
        `taken on day ${p + 1} and the maintenance crew's notes about corrosion near flange ${i}-${p}. ` +
        `The inspector recommended replacing gasket ${p * 7 + i} before the next cycle.`,
    );
  }
  return paragraphs.join("\n\n");
}

/** Documents in the data directory's database, or 0 while it does not exist yet. */
function committedDocuments(dataDir: string): number {
  const file = join(dataDir, "kl.db");
  if (!existsSync(file)) return 0;
  try {
    const db = new Database(file, { readonly: true, fileMustExist: true });
    try {
      return (db.prepare("SELECT count(*) AS n FROM documents").get() as { n: number }).n;
    } finally {
      db.close();
    }
  } catch {
    return 0; // the schema is being created
  }
}

interface Stopped {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * Starts `kl ingest --no-embed` (`--json` unless `json` is false) into `dataDir`, sends `signal` once
 * the first documents are committed (then `second`, right after it, when given), and waits for the exit.
 */
async function ingestAndStop(
  dataDir: string,
  signal: NodeJS.Signals,
  options: { second?: NodeJS.Signals; json?: boolean } = {},
): Promise<Stopped> {
  const { second: next, json = true } = options;
  const child: ChildProcess = spawn(
    process.execPath,
    cliArgs("--data-dir", dataDir, "ingest", corpus, "--no-embed", ...(json ? ["--json"] : [])),
    { cwd: tmp.dir, env, stdio: ["ignore", "pipe", "pipe"] },
  );
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (c: Buffer) => {
    stdout += c.toString("utf8");
  });
  child.stderr?.on("data", (c: Buffer) => {
    stderr += c.toString("utf8");
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) =>
    child.on("exit", (code, sig) => done({ code, signal: sig })),
  );
  const deadline = Date.now() + 60_000;
  let running = true;
  void exited.then(() => {
    running = false;
  });
  while (running && committedDocuments(dataDir) === 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 20));
  }
  expect(running, `ingest ended before any signal: ${stderr}`).toBe(true);
  // A second signal goes out right behind the first: a different signal, since two of the same
  // sent back to back can merge into one, and a stop can finish within milliseconds of the first.
  child.kill(signal);
  if (next) child.kill(next);
  const { code, signal: sig } = await exited;
  return { code, signal: sig, stdout, stderr };
}

/**
 * Every document has exactly the chunks it records, BM25 postings only of existing chunks,
 * and the kept statistics equal a recount.
 */
function checkConsistent(dataDir: string): { documents: number; chunks: number } {
  const db = new Database(join(dataDir, "kl.db"), { readonly: true });
  try {
    const broken = db
      .prepare(
        "SELECT count(*) AS n FROM documents d WHERE d.chunk_count != (SELECT count(*) FROM chunks c WHERE c.document_id = d.id)",
      )
      .get() as { n: number };
    expect(broken.n).toBe(0);
    const bm25 = new Bm25Index(db);
    const chunkIds = new Set(db.prepare("SELECT id FROM chunks").pluck().all() as number[]);
    for (const kb of db.prepare("SELECT name FROM kbs").pluck().all() as string[]) {
      const orphans = [...bm25.indexedChunkIds(kb)].filter((id) => !chunkIds.has(id));
      expect(orphans).toEqual([]);
    }
    // The statistics the triggers keep (BM25 N and lengths, document counts) match a recount.
    const drift = db
      .prepare(
        `SELECT count(*) AS n FROM kb_stats s WHERE
           s.chunks != (SELECT count(*) FROM chunks c WHERE c.kb = s.kb)
           OR s.body_tokens != (SELECT coalesce(sum(token_count), 0) FROM chunks c WHERE c.kb = s.kb)
           OR s.title_tokens != (SELECT coalesce(sum(title_token_count), 0) FROM chunks c WHERE c.kb = s.kb)
           OR s.documents != (SELECT count(*) FROM documents d WHERE d.kb = s.kb)
           OR s.unembedded != (SELECT count(*) FROM documents d WHERE d.kb = s.kb AND d.embedded = 0)`,
      )
      .get() as { n: number };
    expect(drift.n).toBe(0);
    const documents = (db.prepare("SELECT count(*) AS n FROM documents").get() as { n: number }).n;
    const chunks = (db.prepare("SELECT count(*) AS n FROM chunks").get() as { n: number }).n;
    return { documents, chunks };
  } finally {
    db.close();
  }
}

beforeAll(() => {
  mkdirSync(corpus, { recursive: true });
  for (let i = 0; i < FILES; i++)
    writeFileSync(join(corpus, `report-${String(i).padStart(3, "0")}.md`), fileText(i));
  writeFileSync(
    slowOpen,
    [
      'import fsp from "node:fs/promises";',
      'import { syncBuiltinESMExports } from "node:module";',
      "const open = fsp.open;",
      "fsp.open = async (...args) => { await new Promise((r) => setTimeout(r, 15)); return open(...args); };",
      "syncBuiltinESMExports();",
    ].join("\n"),
  );
});

afterAll(() => tmp.cleanup());

describe("kl ingest stopped by a signal", () => {
  it("SIGTERM: prints the committed summary with stopped, exits 143, and the next run finishes the rest", async () => {
    const dataDir = join(tmp.dir, "term");
    const r = await ingestAndStop(dataDir, "SIGTERM");
    expect(r.code, r.stderr).toBe(143);
    expect(r.stderr).toContain("kl ingest: SIGTERM: stopping after the current batch");
    const summary = JSON.parse(r.stdout);
    expect(summary.stopped).toBe(true);
    expect(summary.added).toBeGreaterThan(0);
    expect(summary.added).toBeLessThan(FILES);
    expect(summary.files).toBe(summary.added);
    expect(summary.errors).toEqual([]);
    // What the summary says was committed is exactly what the database holds, and it is whole.
    const db = checkConsistent(dataDir);
    expect(db.documents).toBe(summary.documents);
    expect(db.chunks).toBe(summary.chunks);
    expect(db.chunks).toBeGreaterThan(db.documents);
    // The next run skips what was committed and ingests the rest.
    const lib = KnowledgeLayer.open({ dataDir, cache: { type: "none" }, create: false });
    try {
      const rest = await lib.ingest([corpus], { embed: false });
      expect(rest.stopped).toBeUndefined();
      expect(rest.unchanged).toBe(summary.added);
      expect(rest.added).toBe(FILES - summary.added);
      expect((await lib.counts("default")).documents).toBe(FILES);
    } finally {
      await lib.close();
    }
  }, 120_000);

  it("SIGINT: prints the human summary saying it stopped and exits 130", async () => {
    const dataDir = join(tmp.dir, "int");
    const r = await ingestAndStop(dataDir, "SIGINT", { json: false });
    expect(r.code, r.stderr).toBe(130);
    expect(r.stderr).toContain("kl ingest: SIGINT: stopping after the current batch");
    const m = /kb "default": (\d+) sources? — (\d+) added, 0 updated, 0 unchanged, 0 removed, 0 errors/.exec(
      r.stdout,
    );
    expect(m, r.stdout).not.toBeNull();
    expect(Number(m?.[2])).toBe(Number(m?.[1]));
    expect(r.stdout).toContain("stopped before the end: the counts above were committed");
    const docs = /(\d+) documents?, (\d+) chunks? written/.exec(r.stdout);
    const db = checkConsistent(dataDir);
    expect(db.documents).toBe(Number(docs?.[1]));
    expect(db.chunks).toBe(Number(docs?.[2]));
    expect(db.documents).toBeGreaterThan(0);
    expect(db.documents).toBeLessThan(FILES);
  }, 120_000);

  it("a second signal exits at once with the signal's code", async () => {
    const dataDir = join(tmp.dir, "twice");
    const r = await ingestAndStop(dataDir, "SIGTERM", { second: "SIGINT" });
    // Both are pending at once; the process takes them in the order the kernel delivers them.
    const second = /(SIGINT|SIGTERM) again: exiting now/.exec(r.stderr)?.[1];
    expect(second, r.stderr).toBeDefined();
    const first = second === "SIGINT" ? "SIGTERM" : "SIGINT";
    expect(r.stderr).toContain(`kl ingest: ${first}: stopping after the current batch`);
    expect(r.code, r.stderr).toBe(second === "SIGINT" ? 130 : 143);
    // Whatever was committed is whole (each source is one transaction).
    checkConsistent(dataDir);
  }, 120_000);
});

describe("read commands on a data directory that does not exist", () => {
  const missing = join(tmp.dir, "no-such-data");
  const cases: string[][] = [
    ["search", "pump pressure"],
    ["kb", "show", "--json"],
    ["apikey", "list"],
    ["mcp"],
  ];
  for (const args of cases) {
    it(`kl ${args.join(" ")} exits 1 naming the path and creates nothing`, () => {
      const r = kl("--data-dir", missing, ...args);
      expect(r.code).toBe(1);
      expect(r.stdout).toBe("");
      expect(r.stderr).toContain(`no knowledge-layer data at ${missing}: the folder does not exist`);
      expect(existsSync(missing)).toBe(false);
    });
  }

  it("$KL_HOME pointing nowhere is refused the same way; a folder without kl.db too", () => {
    const home = join(tmp.dir, "no-such-home");
    const r = spawnSync(process.execPath, cliArgs("search", "x"), {
      cwd: tmp.dir,
      env: { ...env, KL_HOME: home },
      encoding: "utf8",
      timeout: 60_000,
    });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(`no knowledge-layer data at ${home}`);
    expect(existsSync(home)).toBe(false);
    const empty = join(tmp.dir, "empty-dir");
    mkdirSync(empty);
    const e = kl("--data-dir", empty, "kb", "list", "--json");
    expect(e.code).toBe(1);
    expect(e.stderr).toContain(`no knowledge-layer data at ${empty}: it holds no kl.db`);
    expect(existsSync(join(empty, "kl.db"))).toBe(false);
  });

  it("commands that create data still create the directory", () => {
    const fresh = join(tmp.dir, "fresh");
    const r = kl("--data-dir", fresh, "kb", "create", "notes", "--json");
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).name).toBe("notes");
    expect(existsSync(join(fresh, "kl.db"))).toBe(true);
    const list = kl("--data-dir", fresh, "kb", "list", "--json");
    expect(list.code).toBe(0);
    expect(JSON.parse(list.stdout).map((k: { name: string }) => k.name)).toEqual(["default", "notes"]);
  });
});

describe("kl mcp --allow-ingest", () => {
  const dataDir = join(tmp.dir, "mcp-data");
  it("requires --ingest-root (exit 2) and refuses / and the home directory", () => {
    const none = kl("--data-dir", dataDir, "mcp", "--allow-ingest");
    expect(none.code).toBe(2);
    expect(none.stderr).toContain("--allow-ingest needs --ingest-root <dir>");
    expect(none.stdout).toBe("");
    const slash = kl("--data-dir", dataDir, "mcp", "--allow-ingest", "--ingest-root", "/");
    expect(slash.code).toBe(2);
    expect(slash.stderr).toContain("refusing ingest root /: it is the filesystem root");
    const home = kl("--data-dir", dataDir, "mcp", "--allow-ingest", "--ingest-root", homedir());
    expect(home.code).toBe(2);
    expect(home.stderr).toContain(`refusing ingest root ${homedir()}: it is the home directory`);
    // Nothing was served, so nothing was created.
    expect(existsSync(dataDir)).toBe(false);
  });
});
