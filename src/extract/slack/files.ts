/**
 * The files of a Slack workspace export, from an unpacked folder or a `.zip` read in memory
 * (yauzl; entry names, counts and inflated sizes checked against the extraction limits), with
 * the size and JSON checks of required and optional files.
 */
import { readdir, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { type Entry, fromBufferPromise, getFileNameLowLevel, openPromise, type ZipFile } from "yauzl";
import { ExtractionError } from "../../errors.js";
import type { ExtractContext, ExtractionLimits } from "../contract.js";
import { asExtractionError, formatBytes, readSource, tooLarge } from "../util.js";
import { kindOf, parseJson } from "./json.js";

/**
 * A file of an export (a folder file or a zip entry) over `limits.maxFileBytes`.
 * Fatal for `users.json`/`channels.json`; a day file or an optional file
 * (`groups.json`…) over the limit is skipped with a warning instead.
 */
class FileTooLarge extends ExtractionError {
  /**
   * @param source the export folder or .zip
   * @param what the file as named in the error (`general/2020-01-05.json`, `zip entry …`)
   * @param detail size and limit: `120.0 MiB (limit maxFileBytes = 100.0 MiB)`, or
   *   `more than 100.0 MiB (…)` when the limit was crossed while inflating (the real size is unknown)
   */
  constructor(
    source: string,
    what: string,
    readonly detail: string,
  ) {
    super(source, `${what} too large: ${detail}`);
  }
}

/** `120.0 MiB (limit maxFileBytes = 100.0 MiB)`; with `atLeast`, `more than 100.0 MiB (limit …)`. */
function sizeDetail(size: number, limit: number, atLeast = false): string {
  const shown = atLeast ? `more than ${formatBytes(limit)}` : formatBytes(size);
  return `${shown} (limit maxFileBytes = ${formatBytes(limit)})`;
}

/**
 * The files of a Slack export, in a folder or a zip. Paths are relative to the
 * export root, with `/` separators.
 */
export interface ExportFiles {
  /** The folder or the .zip: errors name it. */
  readonly source: string;
  readonly format: "export" | "zip";
  /**
   * Bytes of the file at `rel`, or `undefined` when there is none.
   * @throws FileTooLarge (an ExtractionError) over `maxFileBytes`; ExtractionError over
   *   `maxUnpackedBytes`, or when it cannot be read.
   */
  read(rel: string): Promise<Uint8Array | undefined>;
  /** Names of the `.json` files directly inside folder `rel`, sorted. */
  list(rel: string): Promise<string[]>;
}

/** An unpacked export folder as {@link ExportFiles}. */
export function folderFiles(dir: string, limits: ExtractionLimits): ExportFiles {
  return {
    source: dir,
    format: "export",
    async read(rel) {
      const full = join(dir, ...rel.split("/"));
      const info = await stat(full).catch(() => undefined);
      if (!info?.isFile()) return undefined;
      if (info.size > limits.maxFileBytes) {
        throw new FileTooLarge(dir, rel, sizeDetail(info.size, limits.maxFileBytes));
      }
      try {
        return await readFile(full);
      } catch (err) {
        throw new ExtractionError(dir, `${rel}: cannot read (${(err as Error).message})`, { cause: err });
      }
    },
    async list(rel) {
      const names = await readdir(join(dir, ...rel.split("/"))).catch(() => [] as string[]);
      return names.filter((n) => n.toLowerCase().endsWith(".json")).sort();
    },
  };
}

/** yauzl options: entries read on demand, names decoded and checked by us, sizes checked by us. */
const ZIP_OPTIONS = {
  lazyEntries: true,
  autoClose: false,
  decodeStrings: false,
  validateEntrySizes: false,
  strictFileNames: false,
} as const;

/** Why a zip entry name is unsafe (absolute, `..` traversal, NUL), or `undefined` when it is fine. */
function unsafeEntryName(name: string): string | undefined {
  if (name.includes("\0")) return "NUL byte in the name";
  if (name.startsWith("/") || /^[A-Za-z]:/.test(name)) return "absolute path";
  if (name.split("/").includes("..")) return "path traversal with '..'";
  return undefined;
}

/**
 * Lists a zip's entries by name without inflating anything.
 * @throws ExtractionError for too many entries, an unsafe entry name or a corrupt directory.
 */
async function zipEntries(zip: ZipFile, path: string, limits: ExtractionLimits): Promise<Map<string, Entry>> {
  const max = limits.maxArchiveEntries;
  const tooMany = (n: number): ExtractionError =>
    new ExtractionError(path, `archive has too many entries: ${n} (limit maxArchiveEntries = ${max})`);
  if (zip.entryCount > max) throw tooMany(zip.entryCount);
  const entries = new Map<string, Entry>();
  let count = 0;
  try {
    for await (const entry of zip.eachEntry()) {
      if (++count > max) throw tooMany(count);
      const raw = entry.fileNameRaw ?? Buffer.alloc(0);
      const name = getFileNameLowLevel(entry.generalPurposeBitFlag, raw, entry.extraFields ?? [], false);
      const problem = unsafeEntryName(name);
      if (problem) {
        throw new ExtractionError(
          path,
          `unsafe entry name ${JSON.stringify(name)} in the archive (${problem})`,
        );
      }
      if (name.endsWith("/") || name.startsWith("__MACOSX/")) continue;
      if (!entries.has(name)) entries.set(name, entry);
    }
  } catch (err) {
    throw asExtractionError(path, err, "corrupt .zip archive");
  }
  return entries;
}

/**
 * Inflates one zip entry into memory. The declared size is checked first; then the
 * real inflated bytes are counted while streaming against `maxUnpackedBytes` (the
 * whole archive, `budget.used`) and `maxFileBytes` (this entry), so a header that
 * under-states the size cannot get past the limits. A size that differs from the
 * header's after inflating is a corrupt archive.
 * @throws ExtractionError naming the archive, the entry and the limit or problem.
 */
function inflateEntry(
  zip: ZipFile,
  entry: Entry,
  rel: string,
  path: string,
  limits: ExtractionLimits,
  budget: { used: number },
): Promise<Buffer> {
  const maxUnpacked = limits.maxUnpackedBytes;
  const maxFile = limits.maxFileBytes;
  if (entry.isEncrypted()) return Promise.reject(new ExtractionError(path, `${rel}: encrypted zip entry`));
  if (entry.uncompressedSize > maxFile) {
    return Promise.reject(
      new FileTooLarge(path, `zip entry ${rel}`, sizeDetail(entry.uncompressedSize, maxFile)),
    );
  }
  if (budget.used + entry.uncompressedSize > maxUnpacked) {
    const claimed = budget.used + entry.uncompressedSize;
    return Promise.reject(tooLarge(path, "unpacked archive", claimed, "maxUnpackedBytes", maxUnpacked));
  }
  return new Promise((resolve, reject) => {
    zip.openReadStream(entry, (err, stream) => {
      if (err || !stream) {
        reject(new ExtractionError(path, `${rel}: cannot read zip entry (${err?.message})`, { cause: err }));
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      let done = false;
      const fail = (error: ExtractionError): void => {
        if (done) return;
        done = true;
        stream.destroy();
        reject(error);
      };
      stream.on("data", (chunk: Buffer) => {
        if (done) return;
        size += chunk.length;
        budget.used += chunk.length;
        // The header under-stated the size: only a lower bound of the real size is known.
        if (budget.used > maxUnpacked) {
          fail(
            new ExtractionError(
              path,
              `unpacked archive too large: more than ${formatBytes(maxUnpacked)} (limit maxUnpackedBytes = ${formatBytes(maxUnpacked)})`,
            ),
          );
        } else if (size > maxFile) {
          fail(new FileTooLarge(path, `zip entry ${rel}`, sizeDetail(size, maxFile, true)));
        } else {
          chunks.push(chunk);
        }
      });
      stream.on("error", (e: Error) =>
        fail(new ExtractionError(path, `${rel}: corrupt zip entry (${e.message})`, { cause: e })),
      );
      stream.on("end", () => {
        if (done) return;
        if (size !== entry.uncompressedSize) {
          fail(
            new ExtractionError(
              path,
              `${rel}: inflated to ${size} bytes but its header declares ${entry.uncompressedSize} (corrupt or forged archive)`,
            ),
          );
          return;
        }
        done = true;
        resolve(Buffer.concat(chunks));
      });
    });
  });
}

/** The folder inside a zip that holds `channels.json` (nearest the top), as `""` or `"dir/"`. */
function exportRoot(entries: ReadonlyMap<string, Entry>): string | undefined {
  const found = [...entries.keys()]
    .filter((n) => n === "channels.json" || n.endsWith("/channels.json"))
    .sort((a, b) => a.split("/").length - b.split("/").length || (a < b ? -1 : a > b ? 1 : 0));
  return found[0]?.slice(0, -"channels.json".length);
}

/**
 * Opens a Slack export .zip (from `path`, or `ctx.bytes`) and runs `fn` on its
 * files; the archive is closed afterwards.
 * @throws ExtractionError when it is not a zip, has too many entries, an unsafe
 *   entry name or no `channels.json`, or an entry is over a limit.
 */
export async function withZipFiles<T>(
  path: string,
  ctx: ExtractContext,
  fn: (files: ExportFiles) => Promise<T>,
): Promise<T> {
  const limits = ctx.options.limits;
  let zip: ZipFile;
  try {
    zip = ctx.bytes
      ? await fromBufferPromise(await readSource(path, ctx), ZIP_OPTIONS)
      : await openPromise(path, ZIP_OPTIONS);
  } catch (err) {
    if (err instanceof ExtractionError) throw err;
    throw new ExtractionError(path, `not a readable .zip archive (${(err as Error).message})`, {
      cause: err,
    });
  }
  try {
    const entries = await zipEntries(zip, path, limits);
    const root = exportRoot(entries);
    if (root === undefined) {
      throw new ExtractionError(path, "not a Slack export: the archive has no channels.json");
    }
    const budget = { used: 0 };
    const files: ExportFiles = {
      source: path,
      format: "zip",
      async read(rel) {
        const entry = entries.get(root + rel);
        return entry ? inflateEntry(zip, entry, rel, path, limits, budget) : undefined;
      },
      async list(rel) {
        const prefix = `${root}${rel}/`;
        return [...entries.keys()]
          .filter((n) => n.startsWith(prefix) && !n.slice(prefix.length).includes("/"))
          .map((n) => n.slice(prefix.length))
          .filter((n) => n.toLowerCase().endsWith(".json"))
          .sort();
      },
    };
    return await fn(files);
  } finally {
    zip.close();
  }
}

/**
 * A required JSON array of an export (`users.json`, `channels.json`).
 * @throws ExtractionError naming the export and the file when missing, invalid or not an array.
 */
export async function requiredArray(files: ExportFiles, rel: string): Promise<unknown[]> {
  const bytes = await files.read(rel);
  if (bytes === undefined) throw new ExtractionError(files.source, `${rel} is missing`);
  const parsed = parseJson(bytes);
  if (!parsed.ok) throw new ExtractionError(files.source, `${rel}: ${parsed.reason}`);
  if (!Array.isArray(parsed.value)) {
    throw new ExtractionError(files.source, `${rel}: expected a JSON array, got ${kindOf(parsed.value)}`);
  }
  return parsed.value;
}

/**
 * Reads a file of the export that can be skipped (a day file, `groups.json`…): over
 * `maxFileBytes` it is `{ skipped: "too large: …" }` instead of an error.
 * @throws ExtractionError for the other read problems (`maxUnpackedBytes`, unreadable).
 */
export async function readSkippable(
  files: ExportFiles,
  rel: string,
): Promise<Uint8Array | undefined | { skipped: string }> {
  try {
    return await files.read(rel);
  } catch (err) {
    if (err instanceof FileTooLarge) return { skipped: `too large: ${err.detail}` };
    throw err;
  }
}

/**
 * An optional JSON array of an export (`groups.json`…): `[]` when missing; a problem
 * (invalid JSON, not an array, over `maxFileBytes`) becomes a warning.
 */
export async function optionalArray(files: ExportFiles, rel: string, warnings: string[]): Promise<unknown[]> {
  const bytes = await readSkippable(files, rel);
  if (bytes === undefined) return [];
  if ("skipped" in bytes) {
    warnings.push(`${rel}: ${bytes.skipped}; skipped`);
    return [];
  }
  const parsed = parseJson(bytes);
  if (!parsed.ok) {
    warnings.push(`${rel}: ${parsed.reason}; skipped`);
    return [];
  }
  if (!Array.isArray(parsed.value)) {
    warnings.push(`${rel}: expected a JSON array, got ${kindOf(parsed.value)}; skipped`);
    return [];
  }
  return parsed.value;
}

/** True when the bytes start like a zip archive (`PK\x03\x04`, or an empty zip's `PK\x05\x06`). */
export function looksLikeZip(bytes: Uint8Array): boolean {
  return bytes[0] === 0x50 && bytes[1] === 0x4b && (bytes[2] === 0x03 || bytes[2] === 0x05);
}
