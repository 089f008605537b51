/**
 * Test helper: a throwaway `redis-server` on a free localhost port, with no
 * persistence (`--save "" --appendonly no`) and a temporary working directory.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { accessSync, constants, mkdtempSync, rmSync } from "node:fs";
import { createConnection, createServer } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";

/** A running throwaway server. */
export interface RedisServer {
  /** `redis://127.0.0.1:<port>`. */
  url: string;
  port: number;
  process: ChildProcess;
  /** Stops the server (SIGTERM, SIGKILL after 2 s) and removes its directory. Idempotent. */
  stop(): Promise<void>;
}

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Path of `redis-server` ($REDIS_SERVER, then PATH, then /usr/bin and /usr/local/bin), or undefined. */
export function findRedisServer(): string | undefined {
  const fromEnv = process.env.REDIS_SERVER;
  if (fromEnv) return executable(fromEnv) ? fromEnv : undefined;
  const dirs = [...(process.env.PATH ?? "").split(delimiter).filter(Boolean), "/usr/bin", "/usr/local/bin"];
  return dirs.map((dir) => join(dir, "redis-server")).find(executable);
}

/** A port that was free a moment ago (bound to 0, then released). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** True when a server on `port` answers `PING` with `+PONG`. */
function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: "127.0.0.1", port });
    let reply = "";
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.once("error", () => done(false));
    socket.once("connect", () => socket.write("PING\r\n"));
    socket.on("data", (data) => {
      reply += data.toString("latin1");
      if (reply.includes("\r\n")) done(reply.startsWith("+PONG"));
    });
  });
}

async function startOnce(bin: string, port: number): Promise<RedisServer> {
  const dir = mkdtempSync(join(tmpdir(), "kl-redis-"));
  const child = spawn(
    bin,
    [
      "--port",
      String(port),
      "--bind",
      "127.0.0.1",
      "--save",
      "",
      "--appendonly",
      "no",
      "--dir",
      dir,
      "--daemonize",
      "no",
      "--loglevel",
      "warning",
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let output = "";
  child.stdout?.on("data", (d: Buffer) => {
    output += d.toString();
  });
  child.stderr?.on("data", (d: Buffer) => {
    output += d.toString();
  });
  let exited = false;
  const exit = new Promise<void>((resolve) => {
    child.once("exit", () => {
      exited = true;
      resolve();
    });
    child.once("error", (error) => {
      output += String(error);
      exited = true;
      resolve();
    });
  });
  const stop = async () => {
    if (!exited) {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 2000);
      await exit;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 5000;
  while (Date.now() < deadline) {
    if (exited) break;
    if (await ping(port)) {
      return { url: `redis://127.0.0.1:${port}`, port, process: child, stop };
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  await stop();
  throw new Error(
    `redis-server on port ${port} did not answer PING within 5 s${exited ? " (it exited)" : ""}: ${output.trim()}`,
  );
}

/**
 * Starts `redis-server` and resolves once it answers `PING`.
 * Without `port`, picks a free one (retrying with another if it was taken meanwhile).
 * @throws Error when the binary is missing or the server does not come up within 5 s.
 */
export async function startRedisServer(options: { port?: number; bin?: string } = {}): Promise<RedisServer> {
  const bin = options.bin ?? findRedisServer();
  if (!bin) throw new Error("redis-server not found (install it: apt-get install -y redis-server)");
  if (options.port !== undefined) return startOnce(bin, options.port);
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      return await startOnce(bin, await freePort());
    } catch (error) {
      lastError = error;
    }
  }
  throw lastError;
}
