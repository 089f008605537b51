/**
 * Test helper: a throwaway PostgreSQL server (with pgvector available) on a free
 * localhost port. `initdb` writes a fresh cluster into a temporary directory, which
 * also holds the unix socket and the log; `stop()` shuts the server down and removes
 * it. As root (CI) the server runs as the `postgres` system user, because `initdb`
 * and `postgres` refuse to run as root. `scripts/install-postgres.sh` installs the
 * binaries and pgvector.
 */
import { execFileSync, spawnSync } from "node:child_process";
import {
  accessSync,
  chownSync,
  constants,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "./redis-server.js";

/** A PostgreSQL installation usable by the tests. */
export interface PostgresInstall {
  /** Directory with `initdb`, `pg_ctl` and `postgres`, e.g. `/usr/lib/postgresql/15/bin`. */
  bindir: string;
  /** Major version, e.g. 15. */
  major: number;
}

/** A running throwaway server. */
export interface PostgresServer {
  /** `postgres://postgres@127.0.0.1:<port>/postgres` (trust authentication). */
  url: string;
  port: number;
  /** The cluster directory (data, socket and log live below it). */
  dir: string;
  /** Stops the server (`pg_ctl stop -m immediate`) and removes its directory. Idempotent. */
  stop(): Promise<void>;
}

const INSTALL_HINT = "run `bash scripts/install-postgres.sh` (as root) to install PostgreSQL and pgvector";

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Why the server binaries or pgvector are missing for `bindir`, or undefined when they are all there. */
function problemWith(bindir: string, major: string): string | undefined {
  for (const tool of ["initdb", "pg_ctl", "postgres"]) {
    if (!executable(join(bindir, tool))) return `${join(bindir, tool)} is missing`;
  }
  let sharedir = `/usr/share/postgresql/${major}`;
  const pgConfig = join(bindir, "pg_config");
  if (executable(pgConfig)) {
    try {
      sharedir = execFileSync(pgConfig, ["--sharedir"], { encoding: "utf8" }).trim();
    } catch {
      // keep the Debian default
    }
  }
  const control = join(sharedir, "extension", "vector.control");
  if (!existsSync(control))
    return `pgvector is not installed for PostgreSQL ${major} (${control} is missing)`;
  return undefined;
}

/** Candidate (bindir, major) pairs: $PG_BINDIR, then /usr/lib/postgresql/NN/bin, newest first. */
function candidates(): { bindir: string; major: string }[] {
  const fromEnv = process.env.PG_BINDIR;
  if (fromEnv) {
    const match = /postgresql\/(\d+)\//.exec(`${fromEnv}/`);
    return [{ bindir: fromEnv, major: match?.[1] ?? "" }];
  }
  let majors: string[] = [];
  try {
    majors = readdirSync("/usr/lib/postgresql").filter((name) => /^\d+$/.test(name));
  } catch {
    // no Debian-style installation
  }
  return majors
    .sort((a, b) => Number(b) - Number(a))
    .map((major) => ({ bindir: `/usr/lib/postgresql/${major}/bin`, major }));
}

/**
 * Why no usable PostgreSQL + pgvector installation was found, or undefined when
 * {@link findPostgres} finds one. Meant for `describe.skip` messages.
 */
export function postgresMissingReason(): string | undefined {
  const all = candidates();
  if (all.length === 0) return `no PostgreSQL server in /usr/lib/postgresql/*/bin; ${INSTALL_HINT}`;
  const problems = all.map(({ bindir, major }) => problemWith(bindir, major));
  if (problems.some((problem) => problem === undefined)) return undefined;
  return `${problems.join("; ")}; ${INSTALL_HINT}`;
}

/**
 * The newest PostgreSQL installation whose server binaries and pgvector extension are
 * present ($PG_BINDIR, else /usr/lib/postgresql/NN/bin — preferred over copies or links
 * in /usr/local/bin), or undefined.
 */
export function findPostgres(): PostgresInstall | undefined {
  for (const { bindir, major } of candidates()) {
    if (problemWith(bindir, major) === undefined) {
      return { bindir, major: Number(major) || 0 };
    }
  }
  return undefined;
}

const isRoot = (): boolean => process.getuid?.() === 0;

/** uid and gid of the `postgres` system user. @throws when it does not exist. */
function postgresUser(): { uid: number; gid: number } {
  try {
    const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim());
    const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim());
    return { uid, gid };
  } catch {
    throw new Error(
      "running as root, and initdb refuses to run as root, but there is no `postgres` system user to run it as",
    );
  }
}

/** Runs a PostgreSQL tool (as `postgres` when we are root); returns its status and output. */
function run(bin: string, args: string[], cwd: string): { ok: boolean; output: string } {
  const [command, fullArgs] = isRoot() ? ["runuser", ["-u", "postgres", "--", bin, ...args]] : [bin, args];
  const result = spawnSync(command, fullArgs, {
    cwd,
    encoding: "utf8",
    env: { ...process.env, LC_ALL: "C", LANG: "C" },
    timeout: 60_000,
  });
  const output = `${result.stdout ?? ""}${result.stderr ?? ""}${result.error ? String(result.error) : ""}`;
  return { ok: result.status === 0, output: output.trim() };
}

function readLog(path: string): string {
  try {
    return readFileSync(path, "utf8").trim();
  } catch {
    return "";
  }
}

/** Creates a fresh cluster in a temporary directory (initdb, trust authentication, no fsync). */
function initCluster(install: PostgresInstall): { dir: string; data: string } {
  const dir = mkdtempSync(join(tmpdir(), "kl-pg-"));
  if (isRoot()) {
    const { uid, gid } = postgresUser();
    chownSync(dir, uid, gid);
  }
  const data = join(dir, "data");
  const init = run(
    join(install.bindir, "initdb"),
    ["-D", data, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync"],
    dir,
  );
  if (!init.ok) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`initdb failed: ${init.output}`);
  }
  return { dir, data };
}

async function startOnce(
  install: PostgresInstall,
  dir: string,
  data: string,
  port: number,
): Promise<PostgresServer> {
  const log = join(dir, "postgres.log");
  const options = [
    `-p ${port}`,
    "-h 127.0.0.1",
    `-k ${dir}`,
    "-c fsync=off",
    "-c synchronous_commit=off",
    "-c full_page_writes=off",
    "-c max_connections=50",
  ].join(" ");
  const pgCtl = join(install.bindir, "pg_ctl");
  const started = run(pgCtl, ["-D", data, "-l", log, "-w", "-t", "30", "-o", options, "start"], dir);
  if (!started.ok) {
    run(pgCtl, ["-D", data, "-m", "immediate", "stop"], dir);
    throw new Error(`PostgreSQL on port ${port} did not start: ${started.output}\n${readLog(log)}`);
  }
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    run(pgCtl, ["-D", data, "-m", "immediate", "-w", "stop"], dir);
    rmSync(dir, { recursive: true, force: true });
  };
  return { url: `postgres://postgres@127.0.0.1:${port}/postgres`, port, dir, stop };
}

/**
 * Initialises a throwaway cluster and starts PostgreSQL on 127.0.0.1, resolving once it
 * accepts connections (`pg_ctl start -w`). Without `port`, picks a free one (retrying
 * with another if it was taken meanwhile). The `vector` extension is available but
 * not created.
 * @throws Error when the binaries or pgvector are missing, or the server does not start within 30 s.
 */
export async function startPostgresServer(
  options: { port?: number; install?: PostgresInstall } = {},
): Promise<PostgresServer> {
  const install = options.install ?? findPostgres();
  if (!install) throw new Error(postgresMissingReason() ?? `PostgreSQL not found; ${INSTALL_HINT}`);
  const { dir, data } = initCluster(install);
  try {
    if (options.port !== undefined) return await startOnce(install, dir, data, options.port);
    let lastError: unknown;
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        return await startOnce(install, dir, data, await freePort());
      } catch (error) {
        lastError = error;
      }
    }
    throw lastError;
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}
