import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { basename, join } from "node:path";
import type { FastifyInstance } from "fastify";
import { KnowledgeLayer } from "../../src/knowledge-layer.js";
import { buildServer, type ServerOptions } from "../../src/server/app.js";
import { tenantScope } from "../../src/server/tenancy.js";
import { createApiKey } from "../../src/store/api-keys.js";
import { tempDir } from "./helpers.js";

/** A running API server on an ephemeral port over a fresh data directory. */
export interface TestServer {
  kl: KnowledgeLayer;
  app: FastifyInstance;
  /** `http://127.0.0.1:PORT` */
  base: string;
  /** A new API key for `tenant`. */
  key: (tenant: string) => string;
  close: () => Promise<void>;
}

/** Starts the server (port 0) on a temporary data directory; `close` stops it and removes the directory. */
export async function startServer(options: ServerOptions = {}): Promise<TestServer> {
  const tmp = tempDir("kl-server-");
  const kl = KnowledgeLayer.open({
    dataDir: join(tmp.dir, "data"),
    cache: { type: "memory", maxEntries: 1000, maxBytes: 16 * 1024 * 1024, ttlSeconds: 3600 },
    // As `kl serve` runs it: model inference off the request thread.
    offThread: true,
    cacheScope: tenantScope,
  });
  const app = await buildServer(kl, options);
  await app.listen({ host: "127.0.0.1", port: 0 });
  const { port } = app.server.address() as AddressInfo;
  return {
    kl,
    app,
    base: `http://127.0.0.1:${port}`,
    key: (tenant) => createApiKey(kl.db, tenant).key,
    close: async () => {
      await app.close();
      await kl.close();
      tmp.cleanup();
    },
  };
}

/** An HTTP answer with its parsed JSON body (undefined when empty or not JSON). */
export interface Answer {
  status: number;
  // biome-ignore lint/suspicious/noExplicitAny: test bodies are checked field by field
  body: any;
  headers: Headers;
  text: string;
}

/** A JSON API client for one key. */
export function client(base: string, key?: string) {
  const request = async (method: string, path: string, body?: unknown, raw?: string): Promise<Answer> => {
    const headers: Record<string, string> = {};
    if (key) headers.authorization = `Bearer ${key}`;
    if (body !== undefined || raw !== undefined) headers["content-type"] = "application/json";
    const res = await fetch(base + path, {
      method,
      headers,
      body: raw ?? (body === undefined ? undefined : JSON.stringify(body)),
    });
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    return { status: res.status, body: parsed, headers: res.headers, text };
  };
  return {
    get: (path: string) => request("GET", path),
    post: (path: string, body?: unknown) => request("POST", path, body),
    patch: (path: string, body?: unknown) => request("PATCH", path, body),
    put: (path: string, body?: unknown) => request("PUT", path, body),
    delete: (path: string) => request("DELETE", path),
    raw: (method: string, path: string, raw: string) => request(method, path, undefined, raw),
    /** Uploads files (paths, or `{ name, content }`) as multipart/form-data. */
    upload: async (
      kb: string,
      files: (string | { name: string; content: string | Uint8Array })[],
      query = "",
    ) => {
      const form = new FormData();
      for (const f of files) {
        if (typeof f === "string") form.append("file", new Blob([readFileSync(f)]), basename(f));
        else form.append("file", new Blob([f.content]), f.name);
      }
      const res = await fetch(`${base}/kbs/${encodeURIComponent(kb)}/documents${query}`, {
        method: "POST",
        headers: key ? { authorization: `Bearer ${key}` } : {},
        body: form,
      });
      const text = await res.text();
      return {
        status: res.status,
        body: text ? JSON.parse(text) : undefined,
        headers: res.headers,
        text,
      } as Answer;
    },
  };
}

/** One server-sent event. */
export interface SseEvent {
  event: string;
  id?: string;
  // biome-ignore lint/suspicious/noExplicitAny: job views
  data: any;
}

/**
 * Reads a job's server-sent events until the `done` event (or the stream ends);
 * `onOpen` is called once the stream has answered (the server follows the job from then on).
 * `lastEventId` is sent as `Last-Event-ID` (a reconnect); with `stopAfter` the client
 * disconnects once it has that many events.
 */
export async function followJob(
  base: string,
  key: string,
  jobId: string,
  onOpen?: () => void,
  options: { lastEventId?: string; stopAfter?: number } = {},
): Promise<SseEvent[]> {
  const headers: Record<string, string> = { authorization: `Bearer ${key}` };
  if (options.lastEventId !== undefined) headers["last-event-id"] = options.lastEventId;
  const res = await fetch(`${base}/jobs/${jobId}/events`, { headers });
  if (res.status !== 200 || !res.body)
    throw new Error(`events of ${jobId}: HTTP ${res.status} ${await res.text()}`);
  if (!res.headers.get("content-type")?.startsWith("text/event-stream"))
    throw new Error(`events of ${jobId}: content-type ${res.headers.get("content-type")}`);
  onOpen?.();
  const events: SseEvent[] = [];
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true });
    let cut = buffer.indexOf("\n\n");
    while (cut >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      cut = buffer.indexOf("\n\n");
      const e: SseEvent = { event: "message", data: undefined };
      const data: string[] = [];
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) continue;
        const i = line.indexOf(":");
        const field = i < 0 ? line : line.slice(0, i);
        const value = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
        if (field === "event") e.event = value;
        else if (field === "id") e.id = value;
        else if (field === "data") data.push(value);
      }
      if (data.length === 0) continue;
      e.data = JSON.parse(data.join("\n"));
      events.push(e);
      if (e.event === "done") return events;
      // Leaving the loop cancels the body, which closes the connection.
      if (options.stopAfter !== undefined && events.length >= options.stopAfter) return events;
    }
  }
  return events;
}

/** Polls `GET /jobs/:id` until the job has finished. */
export async function waitForJob(base: string, key: string, jobId: string, timeoutMs = 60_000) {
  const api = client(base, key);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await api.get(`/jobs/${jobId}`);
    if (["succeeded", "failed"].includes(r.body?.status)) return r.body;
    if (Date.now() > deadline) throw new Error(`job ${jobId} did not finish: ${r.text}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** A `kl serve` child process (from source) on a data directory, port 0, logging nothing. */
export function spawnServe(
  root: string,
  dataDir: string,
  cwd: string,
  extraEnv: Record<string, string> = {},
): { child: ChildProcessWithoutNullStreams; serve: ServeOutput; exited: Promise<number | null> } {
  const child = spawn(
    process.execPath,
    [
      "--import",
      join(root, "node_modules/tsx/dist/loader.mjs"),
      join(root, "src/cli/main.ts"),
      "serve",
      "--data-dir",
      dataDir,
      "--port",
      "0",
      "--log-level",
      "silent",
    ],
    { cwd, env: { ...process.env, KL_CACHE_URL: "none", ...extraEnv } },
  );
  const serve = watchServe(child);
  const exited = new Promise<number | null>((done) => child.on("exit", (code) => done(code)));
  // A start that fails is seen through `serve.base`; keep the rejection from going unhandled meanwhile.
  serve.base.catch(() => {});
  return { child, serve, exited };
}

/** Stderr of a spawned `kl serve`, collected as it arrives, and the base URL it announces. */
export interface ServeOutput {
  /** Resolves with the `http://host:port` the server says it listens on; rejects when it exits first or after 30 s. */
  base: Promise<string>;
  /** Everything written to stderr so far. */
  stderr: () => string;
}

/** Watches a spawned `kl serve` for its "listening on URL" line (one copy for the CLI tests). */
export function watchServe(child: ChildProcessWithoutNullStreams): ServeOutput {
  let stderr = "";
  const base = new Promise<string>((done, fail) => {
    const timer = setTimeout(() => fail(new Error(`kl serve did not start: ${stderr}`)), 30_000);
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
      const m = /listening on (http:\/\/\S+) /.exec(stderr);
      if (m?.[1]) {
        clearTimeout(timer);
        done(m[1]);
      }
    });
    child.on("exit", () => fail(new Error(`kl serve exited: ${stderr}`)));
  });
  return { base, stderr: () => stderr };
}

/**
 * Holds the `n`th call of `kl.ingestDocuments` (1-based) until `release` is called:
 * `before` it ingests anything, or `after` it has committed (before the job records the
 * file as done). `reached` resolves when that point is reached. Never releasing it
 * stands for a crash at that point.
 */
export function gateIngest(
  kl: KnowledgeLayer,
  n: number,
  when: "before" | "after" = "before",
): { reached: Promise<void>; release: () => void } {
  const original = kl.ingestDocuments.bind(kl);
  let calls = 0;
  let reachedResolve = (): void => {};
  let release = (): void => {};
  const reached = new Promise<void>((done) => {
    reachedResolve = done;
  });
  const gate = new Promise<void>((done) => {
    release = done;
  });
  kl.ingestDocuments = async (...args: Parameters<KnowledgeLayer["ingestDocuments"]>) => {
    calls++;
    const mine = calls === n;
    if (mine && when === "before") {
      reachedResolve();
      await gate;
    }
    const summary = await original(...args);
    if (mine && when === "after") {
      reachedResolve();
      await gate;
    }
    return summary;
  };
  return { reached, release };
}
