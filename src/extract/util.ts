/**
 * Small helpers shared by the extractors: reading files, decoding bytes to text,
 * building metadata without `undefined` values.
 */
import { readFile } from "node:fs/promises";
import { basename } from "node:path";
import { ExtractionError } from "../errors.js";

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

/**
 * Decodes file bytes to a string. A UTF-8 BOM is dropped; a UTF-16 BOM (LE or BE)
 * selects UTF-16. Everything else is read as UTF-8, with invalid byte sequences
 * replaced by U+FFFD instead of throwing.
 */
export function decodeText(bytes: Uint8Array): string {
  if (bytes.length >= 2 && bytes[0] === 0xff && bytes[1] === 0xfe) {
    return new TextDecoder("utf-16le").decode(bytes);
  }
  if (bytes.length >= 2 && bytes[0] === 0xfe && bytes[1] === 0xff) {
    return new TextDecoder("utf-16be").decode(bytes);
  }
  // TextDecoder removes a leading UTF-8 BOM (ignoreBOM defaults to false).
  return new TextDecoder("utf-8", { fatal: false }).decode(bytes);
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
