/**
 * Small helpers shared by the extractors: reading files, decoding bytes to text,
 * building metadata without `undefined` values.
 */
import { readFile, stat } from "node:fs/promises";
import { basename } from "node:path";
import { ExtractionError } from "../errors.js";
import type { ExtractContext } from "./contract.js";

/**
 * Reads a whole file into memory.
 * @throws ExtractionError naming the file when it cannot be read (missing, a directory, no permission).
 */
export async function readBytes(path: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const reason =
      code === "ENOENT"
        ? "file not found"
        : code === "EISDIR"
          ? "is a directory, not a file"
          : code === "EACCES"
            ? "permission denied"
            : `cannot read file: ${(err as Error).message}`;
    throw new ExtractionError(path, reason, { cause: err });
  }
}

/** Formats a byte count for messages: `512 B`, `1.5 KiB`, `100.0 MiB`. */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 ** 3) return `${(n / 1024 / 1024).toFixed(1)} MiB`;
  return `${(n / 1024 ** 3).toFixed(2)} GiB`;
}

/**
 * The error for a size over a limit: `file too large: 120.0 MiB (limit maxFileBytes = 100.0 MiB)`.
 */
export function tooLarge(
  path: string,
  what: string,
  size: number,
  limitName: string,
  limit: number,
): ExtractionError {
  return new ExtractionError(
    path,
    `${what} too large: ${formatBytes(size)} (limit ${limitName} = ${formatBytes(limit)})`,
  );
}

/**
 * The content of a source: `ctx.bytes` when the caller has it in memory (an
 * attachment, an archive entry), otherwise the file at `path`, read only when its
 * size is within `limits.maxFileBytes`.
 * @throws ExtractionError naming the file when it cannot be read or is over the limit.
 */
export async function readSource(path: string, ctx: ExtractContext): Promise<Buffer> {
  const limit = ctx.options.limits.maxFileBytes;
  if (ctx.bytes) {
    if (ctx.bytes.byteLength > limit)
      throw tooLarge(path, "file", ctx.bytes.byteLength, "maxFileBytes", limit);
    return Buffer.from(ctx.bytes.buffer, ctx.bytes.byteOffset, ctx.bytes.byteLength);
  }
  const size = await stat(path).then(
    (info) => info.size,
    () => 0,
  );
  if (size > limit) throw tooLarge(path, "file", size, "maxFileBytes", limit);
  return readBytes(path);
}

/**
 * Decodes file bytes to a string. A UTF-8 BOM is dropped; a UTF-16 BOM (LE or BE)
 * selects UTF-16. Valid UTF-8 is read as UTF-8. Invalid UTF-8 in which most
 * non-ASCII bytes fail to decode is legacy 8-bit text and is read as Latin-1
 * (ISO-8859-1); otherwise the UTF-8
 * reading is kept with U+FFFD for the bad sequences. Never throws.
 */
export function decodeText(bytes: Uint8Array): string {
  if (bytes.length >= 2 && bytes[0] === 0xff && bytes[1] === 0xfe) {
    return new TextDecoder("utf-16le").decode(bytes);
  }
  if (bytes.length >= 2 && bytes[0] === 0xfe && bytes[1] === 0xff) {
    return new TextDecoder("utf-16be").decode(bytes);
  }
  // TextDecoder removes a leading UTF-8 BOM (ignoreBOM defaults to false).
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    // Not valid UTF-8. When most high bytes fail to decode, this is legacy 8-bit text
    // (Latin-1, e.g. "caf\xe9"); otherwise it is UTF-8 with a few bad bytes.
    const utf8 = new TextDecoder("utf-8", { fatal: false }).decode(bytes);
    const highBytes = bytes.reduce((n, b) => n + (b >= 0x80 ? 1 : 0), 0);
    const replaced = (utf8.match(/\uFFFD/g) ?? []).length;
    return replaced * 2 >= highBytes
      ? Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("latin1")
      : utf8;
  }
}

/**
 * Throws when `text` is empty or whitespace only.
 * @throws ExtractionError with the reason "file is empty".
 */
export function assertNotEmpty(path: string, text: string): void {
  if (text.trim() === "") throw new ExtractionError(path, "file is empty");
}

/** The file name of `path` (last path component), used as a fallback title. */
export function fileTitle(path: string): string {
  return basename(path);
}

/**
 * Returns a copy of `obj` without the keys whose value is `undefined`, so absent
 * metadata fields are really absent (never the string "undefined").
 */
export function compact<T extends Record<string, unknown>>(obj: T): T {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(obj)) {
    if (value !== undefined) out[key] = value;
  }
  return out as T;
}

/** Returns `s` trimmed, or `undefined` when it is absent or blank. */
export function nonBlank(s: string | undefined | null): string | undefined {
  if (typeof s !== "string") return undefined;
  const t = s.trim();
  return t === "" ? undefined : t;
}

/**
 * Wraps an unexpected error from a parser in an ExtractionError naming the file.
 * An ExtractionError passes through unchanged.
 */
export function asExtractionError(path: string, err: unknown, what: string): ExtractionError {
  if (err instanceof ExtractionError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new ExtractionError(path, `${what}: ${message}`, { cause: err });
}
