import { realpathSync, statSync } from "node:fs";
import { realpath } from "node:fs/promises";
import { homedir } from "node:os";
import { isAbsolute, parse, relative, resolve, sep } from "node:path";
import { KnowledgeLayerError } from "../errors.js";

/**
 * Resolves the ingest root of an MCP server (symbolic links resolved). A
 * filesystem root (`/`, `C:\\`) and the home directory are refused: a client could
 * then ingest (and read back through search) every file of the machine or the
 * user, keys and mail included.
 * @throws KnowledgeLayerError when it does not exist, is not a folder, or is `/` or the home directory.
 */
export function resolveIngestRoot(dir: string): string {
  let real: string;
  try {
    real = realpathSync(resolve(dir));
  } catch {
    throw new KnowledgeLayerError(`ingest root does not exist: ${dir}`);
  }
  if (!statSync(real).isDirectory()) throw new KnowledgeLayerError(`ingest root is not a folder: ${dir}`);
  if (parse(real).root === real)
    throw new KnowledgeLayerError(
      `refusing ingest root ${dir}: it is the filesystem root; give the folder of the documents to ingest`,
    );
  if (real === realHome())
    throw new KnowledgeLayerError(
      `refusing ingest root ${dir}: it is the home directory; give the folder of the documents to ingest`,
    );
  return real;
}

/** The home directory with links resolved (as given when it cannot be resolved). */
function realHome(): string {
  const home = homedir();
  try {
    return realpathSync(home);
  } catch {
    return resolve(home);
  }
}

/** True when `path` is `root` or lies under it (both absolute, normalised). */
export function isInside(root: string, path: string): boolean {
  const rel = relative(root, path);
  return rel === "" || (rel !== ".." && !rel.startsWith(`..${sep}`) && !isAbsolute(rel));
}

/**
 * Resolves a path an MCP client asked to ingest: relative to `root`, symbolic
 * links resolved, and required to lie inside `root` (itself a real path, see
 * {@link resolveIngestRoot}). Folders are then walked by ingest, which does not
 * follow links leading out of them.
 * @returns the real path to ingest.
 * @throws KnowledgeLayerError when the path does not exist or lies outside the root.
 */
export async function checkIngestPath(input: string, root: string): Promise<string> {
  const requested = resolve(root, input);
  let real: string;
  try {
    real = await realpath(requested);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new KnowledgeLayerError(
      code === "ENOENT"
        ? `path does not exist: ${requested}`
        : `cannot read ${requested}: ${(err as Error).message}`,
    );
  }
  if (!isInside(root, real)) {
    const via = real === requested ? "" : ` (it resolves to ${real})`;
    throw new KnowledgeLayerError(
      `refusing to ingest ${requested}${via}: it is outside the ingest root ${root} (start the server with --ingest-root to change it)`,
    );
  }
  return real;
}
