import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect } from "vitest";
import { ExtractionError } from "../../src/errors.js";

/** Absolute path of the shared data folder (`../shared` beside the repository). */
const sharedGuess = resolve(dirname(fileURLToPath(import.meta.url)), "../../../shared");
/** Ingest stores real paths (symlinks resolved), so tests compare against real paths too. */
export const SHARED = existsSync(sharedGuess) ? realpathSync(sharedGuess) : sharedGuess;

/** Path inside `../shared/data/docs`. */
export const docsPath = (...parts: string[]): string => join(SHARED, "data", "docs", ...parts);

/**
 * Sets environment variable `name` to `value` for the tests of the calling file (or
 * `describe` block), restoring its previous value (or absence) after them.
 */
export function useEnv(name: string, value: string): void {
  let previous: string | undefined;
  beforeAll(() => {
    previous = process.env[name];
    process.env[name] = value;
  });
  afterAll(() => {
    if (previous === undefined) delete process.env[name];
    else process.env[name] = previous;
  });
}

/** Creates a temporary directory; returns it and a cleanup function. */
export function tempDir(prefix = "kl-test-"): { dir: string; cleanup: () => void } {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), prefix)));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Runs `fn` and returns the ExtractionError it throws (fails when it does not throw one). */
export async function extractionError(fn: () => Promise<unknown>): Promise<ExtractionError> {
  try {
    await fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ExtractionError);
    return err as ExtractionError;
  }
  throw new Error("expected an ExtractionError");
}

/** Counts event-loop turns and the longest gap between them while `run` runs. */
export async function watchEventLoop<T>(run: () => Promise<T>): Promise<{
  result: T;
  ticks: number;
  longestGap: number;
  elapsed: number;
}> {
  let ticks = 0;
  let longestGap = 0;
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    longestGap = Math.max(longestGap, now - last);
    last = now;
    ticks++;
  }, 2);
  const t0 = performance.now();
  try {
    const result = await run();
    const end = performance.now();
    longestGap = Math.max(longestGap, end - last);
    return { result, ticks, longestGap, elapsed: end - t0 };
  } finally {
    clearInterval(timer);
  }
}

/** What a CLI run gave: exit code (-1 when killed), stdout and stderr. */
export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * A runner of the `kl` CLI from source (the same code `dist/cli/main.js` is built from), in
 * `cwd` with `env`, synchronously, killed after two minutes.
 */
export function cliRunner(cwd: string, env: NodeJS.ProcessEnv): (...args: string[]) => CliRun {
  const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
  return (...args) => {
    const r = spawnSync(
      process.execPath,
      ["--import", join(root, "node_modules/tsx/dist/loader.mjs"), join(root, "src/cli/main.ts"), ...args],
      { cwd, env, encoding: "utf8", timeout: 120_000 },
    );
    return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
  };
}
