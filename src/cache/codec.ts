/**
 * Serialisation shared by every cache backend and by the key builders.
 *
 * Cached values are JSON plus one extension: a `Float32Array` (a query
 * embedding) is written as `{"$kl:f32": "<base64 of its little-endian bytes>"}`.
 * Both backends store the encoded text, so a value read back is always a fresh
 * object (never shared with the caller that stored it or with another reader),
 * and the memory and Redis backends accept and return exactly the same values.
 *
 * Accepted values: `null`, booleans, finite numbers, strings, arrays, plain
 * objects (prototype `Object.prototype` or `null`) and `Float32Array`.
 * Object properties whose value is `undefined` are left out, as `JSON.stringify`
 * does. Anything else (`undefined` at the top level or in an array, `NaN`,
 * `±Infinity`, `bigint`, functions, symbols, `Date`, `Map`, `Set`, class
 * instances, other typed arrays, cycles, the reserved key `$kl:f32`) is rejected
 * with a `TypeError` naming where in the value it was found.
 */
import { Buffer } from "node:buffer";
import { endianness } from "node:os";

/** Reserved object key marking an encoded `Float32Array`. Plain objects may not use it. */
export const FLOAT32_TAG = "$kl:f32";

const LITTLE_ENDIAN = endianness() === "LE";

/** Base64 of the little-endian bytes of `array` (only its own view, not the whole buffer). */
function float32ToBase64(array: Float32Array): string {
  if (LITTLE_ENDIAN) return Buffer.from(array.buffer, array.byteOffset, array.byteLength).toString("base64");
  const bytes = Buffer.alloc(array.length * 4);
  array.forEach((x, i) => {
    bytes.writeFloatLE(x, i * 4);
  });
  return bytes.toString("base64");
}

/** Inverse of {@link float32ToBase64}; the result owns a fresh, aligned buffer. */
function base64ToFloat32(text: string, path: string): Float32Array {
  const bytes = Buffer.from(text, "base64");
  if (bytes.length % 4 !== 0)
    throw new TypeError(`cache value at ${path}: Float32Array payload is not a multiple of 4 bytes`);
  const out = new Float32Array(bytes.length / 4);
  if (LITTLE_ENDIAN) new Uint8Array(out.buffer).set(bytes);
  else for (let i = 0; i < out.length; i++) out[i] = bytes.readFloatLE(i * 4);
  return out;
}

function isPlainObject(value: object): boolean {
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (typeof value !== "object") return typeof value;
  return value.constructor?.name ?? "object";
}

/**
 * Converts `value` into a tree `JSON.stringify` writes faithfully: validates it
 * (see the module comment), encodes `Float32Array`s, and drops `undefined`
 * properties. With `sortKeys`, object keys are emitted in sorted order, which
 * makes the JSON canonical (the same for equal values, whatever the insertion order).
 * @throws TypeError for a value that is not JSON-serialisable; the message names its path (`$.a[2].b`).
 */
export function toJsonTree(value: unknown, sortKeys = false, what = "cache value"): unknown {
  const ancestors = new Set<object>();
  const visit = (v: unknown, path: string): unknown => {
    switch (typeof v) {
      case "string":
      case "boolean":
        return v;
      case "number":
        if (!Number.isFinite(v)) throw new TypeError(`${what} at ${path}: ${v} is not a finite number`);
        return v;
      case "object":
        break;
      default:
        throw new TypeError(`${what} at ${path}: ${describe(v)} is not JSON-serialisable`);
    }
    if (v === null) return null;
    if (ancestors.has(v)) throw new TypeError(`${what} at ${path}: cyclic reference`);
    if (v instanceof Float32Array) return { [FLOAT32_TAG]: float32ToBase64(v) };
    ancestors.add(v);
    try {
      if (Array.isArray(v)) {
        return v.map((item, i) => {
          if (item === undefined) throw new TypeError(`${what} at ${path}[${i}]: undefined in an array`);
          return visit(item, `${path}[${i}]`);
        });
      }
      if (!isPlainObject(v))
        throw new TypeError(`${what} at ${path}: ${describe(v)} is not JSON-serialisable`);
      const keys = Object.keys(v);
      if (sortKeys) keys.sort();
      const out: Record<string, unknown> = {};
      for (const key of keys) {
        if (key === FLOAT32_TAG)
          throw new TypeError(`${what} at ${path}: the key "${FLOAT32_TAG}" is reserved`);
        const item = (v as Record<string, unknown>)[key];
        if (item === undefined) continue;
        out[key] = visit(item, `${path}.${key}`);
      }
      return out;
    } finally {
      ancestors.delete(v);
    }
  };
  if (value === undefined) throw new TypeError(`${what}: undefined cannot be cached or hashed`);
  return visit(value, "$");
}

/**
 * Encodes a cache value as JSON text (see the module comment for what is accepted).
 * @throws TypeError for a value that is not JSON-serialisable.
 */
export function encodeValue(value: unknown): string {
  return JSON.stringify(toJsonTree(value));
}

/**
 * Decodes text written by {@link encodeValue} into a fresh value.
 * @throws SyntaxError or TypeError when the text is not a valid encoding.
 */
export function decodeValue(text: string): unknown {
  return JSON.parse(text, (key: string, value: unknown) => {
    if (value !== null && typeof value === "object" && !Array.isArray(value)) {
      const keys = Object.keys(value);
      const payload = (value as Record<string, unknown>)[FLOAT32_TAG];
      if (keys.length === 1 && typeof payload === "string") return base64ToFloat32(payload, key || "$");
    }
    return value;
  });
}

/** Size of an encoded value in bytes (UTF-8), the unit of the memory backend's `maxBytes`. */
export function encodedBytes(text: string): number {
  return Buffer.byteLength(text, "utf8");
}
