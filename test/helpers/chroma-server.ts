/**
 * Test helper: a throwaway Chroma server, started with the CLI bundled in the
 * `chromadb` package (`chroma run`, a native binding from
 * `chromadb-js-bindings-<platform>`), on a free localhost port with a temporary
 * data directory.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort } from "./redis-server.js";

/** A running throwaway Chroma server. */
export interface ChromaServer {
  /** `http://127.0.0.1:<port>`. */
  url: string;
  port: number;
  /** The server's data directory (removed by {@link ChromaServer.stop}). */
  dir: string;
  process: ChildProcess;
  /** Stops the server (SIGTERM, SIGKILL after 3 s) and removes its directory. Idempotent. */
  stop(): Promise<void>;
}

/** How long to wait for the first heartbeat. */
const START_TIMEOUT_MS = 30_000;

/** Path of the `chroma` CLI script ($CHROMA_CLI, else the one in node_modules/chromadb). */
export function chromaCli(): string {
  return (
    process.env.CHROMA_CLI ??
    join(dirname(fileURLToPath(import.meta.url)), "..", "..", "node_modules", "chromadb", "dist", "cli.mjs")
  );
}

async function heartbeat(url: string): Promise<boolean> {
  try {
    const response = await fetch(`${url}/api/v2/heartbeat`, { signal: AbortSignal.timeout(1000) });
    await response.body?.cancel();
    return response.ok;
  } catch {
    return false;
  }
}

/** The last `max` characters of the server's output, without colour codes. */
function tail(output: string, max = 4000): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: strips ANSI colour codes
  const clean = output.replace(/\u001b\[[0-9;]*m/g, "").trim();
  return clean.length > max ? `…${clean.slice(-max)}` : clean;
}

async function startOnce(cli: string, port: number): Promise<ChromaServer> {
  const dir = mkdtempSync(join(tmpdir(), "kl-chroma-"));
  const child = spawn(
    process.execPath,
    [cli, "run", "--host", "127.0.0.1", "--port", String(port), "--path", dir],
    {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, ANONYMIZED_TELEMETRY: "False", NO_COLOR: "1" },
    },
  );
  let output = "";
  const collect = (data: Buffer) => {
    output += data.toString();
    if (output.length > 100_000) output = output.slice(-50_000);
  };
  child.stdout?.on("data", collect);
  child.stderr?.on("data", collect);
  let exited = false;
  const exit = new Promise<void>((resolve) => {
    child.once("exit", (code, signal) => {
      output += `\n[exited with ${signal ?? `code ${code}`}]`;
      exited = true;
      resolve();
    });
    child.once("error", (error) => {
      output += `\n${String(error)}`;
      exited = true;
      resolve();
    });
  });
  let stopped = false;
  const stop = async () => {
    if (!stopped) {
      stopped = true;
      if (!exited) {
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), 3000);
        await exit;
        clearTimeout(timer);
      }
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const url = `http://127.0.0.1:${port}`;
  const started = Date.now();
  while (Date.now() - started < START_TIMEOUT_MS && !exited) {
    if (await heartbeat(url)) return { url, port, dir, process: child, stop };
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const why = exited ? "it exited" : `no heartbeat within ${START_TIMEOUT_MS / 1000} s`;
  await stop();
  throw new Error(`Chroma server on port ${port} did not start (${why}). Its output:\n${tail(output)}`);
}

/**
 * Starts `chroma run` and resolves once `GET /api/v2/heartbeat` answers.
 * Without `port`, picks a free one (retrying with another if it was taken meanwhile).
 * @throws Error when the CLI is missing or the server does not come up within 30 s
 * (the message includes the server's output, e.g. a native binding that fails to load).
 */
export async function startChromaServer(options: { port?: number } = {}): Promise<ChromaServer> {
  const cli = chromaCli();
  if (!existsSync(cli))
    throw new Error(`Chroma CLI not found at ${cli} (is the chromadb package installed?)`);
  if (options.port !== undefined) return startOnce(cli, options.port);
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      return await startOnce(cli, await freePort());
    } catch (error) {
      lastError = error;
      // Retrying only helps when the port was taken; a server that cannot load will not load next time.
      if (!/address|in use|bind/i.test(String(error))) break;
    }
  }
  throw lastError;
}
