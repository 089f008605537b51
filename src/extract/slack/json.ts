/**
 * Reading untrusted JSON of a Slack export or API dump: typed accessors, the kind of a value
 * for messages, and a parser that never throws.
 */
import { decodeText } from "../util.js";

/** The value when it is a string, else undefined. */
export const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);
/** The value when it is an array, else an empty one. */
export const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
/** True for a plain JSON object (not null, not an array). */
export const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** A JSON value's kind for error messages: `an array`, `an object`, `a string`… */
export function kindOf(v: unknown): string {
  if (Array.isArray(v)) return "an array";
  if (v === null) return "null";
  return typeof v === "object" ? "an object" : `a ${typeof v}`;
}

/** Result of parsing JSON bytes: the value, or the parser's complaint. */
type Parsed = { ok: true; value: unknown } | { ok: false; reason: string };

/** Decodes (UTF-8/UTF-16 with BOM) and parses JSON bytes. Never throws. */
export function parseJson(bytes: Uint8Array): Parsed {
  try {
    return { ok: true, value: JSON.parse(decodeText(bytes)) };
  } catch (err) {
    return { ok: false, reason: `invalid JSON (${(err as Error).message})` };
  }
}
