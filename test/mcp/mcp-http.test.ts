import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { request } from "node:http";
import { join, resolve } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KnowledgeLayer } from "../../src/knowledge-layer.js";
import { docsPath, tempDir } from "../helpers/helpers.js";

const ROOT = resolve(import.meta.dirname, "..", "..");
const tmp = tempDir("kl-mcp-http-");
const dataDir = join(tmp.dir, "data");
const profiles = docsPath("markdown", "rust_book_src", "ch14-01-release-profiles.md");
const comments = docsPath("markdown", "rust_book_src", "ch03-04-comments.md");
const env = { ...process.env, KL_CACHE_URL: "none" };
const cliArgs = (...args: string[]): string[] => [
  "--import",
  join(ROOT, "node_modules/tsx/dist/loader.mjs"),
  join(ROOT, "src/cli/main.ts"),
  "--data-dir",
  dataDir,
  ...args,
];

let server: ChildProcess;
let stderr = "";
let url: URL;
let client: Client;

/** Calls a tool and returns its result. */
async function call(name: string, args: Record<string, unknown> = {}): Promise<CallToolResult> {
  return (await client.callTool({ name, arguments: args })) as CallToolResult;
}

/** A raw HTTP request to the server, with the given headers; resolves to the status and body. */
function raw(
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string,
): Promise<{ status: number; body: string }> {
  return new Promise((done, fail) => {
    const req = request({ host: url.hostname, port: url.port, method, path, headers }, (res) => {
      let text = "";
      res.on("data", (c: Buffer) => {
        text += c.toString("utf8");
      });
      res.on("end", () => done({ status: res.statusCode ?? 0, body: text }));
    });
    req.on("error", fail);
    req.end(body);
  });
}

beforeAll(async () => {
  // Keyword-only data (no model load): two real documents.
  const kl = KnowledgeLayer.open({ dataDir });
  await kl.ingest([profiles, comments], { embed: false });
  await kl.close();
  server = spawn(process.execPath, cliArgs("mcp", "--http", "--port", "0"), {
    cwd: tmp.dir,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  url = await new Promise<URL>((done, fail) => {
    const timer = setTimeout(() => fail(new Error(`no URL on stderr: ${stderr}`)), 60_000);
    server.stderr?.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8");
      const m = /listening on (http:\/\/\S+)/.exec(stderr);
      if (m?.[1]) {
        clearTimeout(timer);
        done(new URL(m[1]));
      }
    });
    server.once("exit", (code) => fail(new Error(`kl mcp --http exited with ${code}: ${stderr}`)));
  });
  client = new Client({ name: "kl-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(url));
});

afterAll(async () => {
  await client?.close();
  if (server && server.exitCode === null) {
    const exited = new Promise((done) => server.once("exit", done));
    server.kill("SIGTERM");
    await exited;
  }
  tmp.cleanup();
});

describe("kl mcp --http (streamable HTTP)", () => {
  it("binds to localhost and prints the endpoint URL on stderr", () => {
    expect(url.hostname).toBe("127.0.0.1");
    expect(url.pathname).toBe("/mcp");
    expect(Number(url.port)).toBeGreaterThan(0);
  });

  it("offers the read-only tools only: never ingest_path", async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([
      "get_document",
      "list_knowledge_bases",
      "search_knowledge",
    ]);
    const refused = await call("ingest_path", { path: "." });
    expect(refused.isError).toBe(true);
  });

  it("searches with attribution", async () => {
    const r = await call("search_knowledge", {
      query: "opt-level release profile",
      mode: "keyword",
      top_k: 3,
    });
    expect(r.isError).toBeFalsy();
    const s = r.structuredContent as {
      results: { rank: number; citation: string; source: { uri: string } }[];
    };
    expect(s.results[0]).toMatchObject({ rank: 1, source: { uri: profiles } });
    expect(s.results[0]?.citation).toContain("ch14-01-release-profiles.md");
    const text = r.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");
    expect(text).toContain("[1] ");
    const unknown = await call("search_knowledge", { query: "x", kbs: ["nope"] });
    expect(unknown.isError).toBe(true);
  });

  it("lists knowledge bases with counts", async () => {
    const r = await call("list_knowledge_bases");
    const [kb] = (r.structuredContent as { knowledgeBases: Record<string, unknown>[] }).knowledgeBases;
    expect(kb).toMatchObject({ name: "default", documents: 2, embeddedDocuments: 0 });
    expect(kb?.chunks as number).toBeGreaterThanOrEqual(2);
  });

  it("refuses foreign Host and Origin headers and non-POST methods", async () => {
    const init = JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "x", version: "1" } },
    });
    const headers = { "Content-Type": "application/json", Accept: "application/json, text/event-stream" };
    const ok = await raw("POST", "/mcp", headers, init);
    expect(ok.status).toBe(200);
    const rebinding = await raw("POST", "/mcp", { ...headers, Host: `evil.example:${url.port}` }, init);
    expect(rebinding.status).toBe(403);
    expect(rebinding.body).toContain("invalid Host");
    const crossSite = await raw("POST", "/mcp", { ...headers, Origin: "https://evil.example" }, init);
    expect(crossSite.status).toBe(403);
    expect((await raw("GET", "/mcp", { Accept: "text/event-stream" })).status).toBe(405);
    expect((await raw("POST", "/other", headers, init)).status).toBe(404);
  });

  it("kl mcp refuses --allow-ingest with --http, and --port without --http", () => {
    const r = spawnSync(process.execPath, cliArgs("mcp", "--http", "--allow-ingest"), {
      cwd: tmp.dir,
      env,
      encoding: "utf8",
      timeout: 60_000,
    });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain("--allow-ingest works over stdio only");
    expect(r.stdout).toBe("");
    const port = spawnSync(process.execPath, cliArgs("mcp", "--port", "1234"), {
      cwd: tmp.dir,
      env,
      encoding: "utf8",
      timeout: 60_000,
    });
    expect(port.status).toBe(1);
    expect(port.stderr).toContain("--port and --host need --http");
  });

  it("stops cleanly on SIGTERM", async () => {
    await client.close();
    const exited = new Promise<number | null>((done) => server.once("exit", (code) => done(code)));
    server.kill("SIGTERM");
    expect(await exited).toBe(0);
  });
});
