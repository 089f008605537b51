/**
 * Showing names taken from the file system or from documents (file names, URIs,
 * attachment names) in one-line human output: search results, ingest summaries,
 * citations and error messages.
 */

/**
 * Characters a name cannot show as they are: C0 controls (tab, line feed and
 * carriage return included), DEL, C1 controls, the Unicode line and paragraph
 * separators, the bidirectional formatting characters (which reorder what
 * follows them on screen), the byte order mark, and lone surrogates.
 */
const UNSHOWABLE =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
  /[\u0000-\u001F\u007F-\u009F\u061C\u200E\u200F\u2028\u2029\u202A-\u202E\u2066-\u2069\uFEFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** The same as {@link UNSHOWABLE}, global, plus the quote and backslash that a quoted name escapes. */
const TO_ESCAPE = new RegExp(`${UNSHOWABLE.source}|["\\\\]`, "g");

/** Short escapes, as in JSON and JavaScript. */
const SHORT_ESCAPES: Readonly<Record<string, string>> = {
  "\n": "\\n",
  "\r": "\\r",
  "\t": "\\t",
  "\b": "\\b",
  "\f": "\\f",
  '"': '\\"',
  "\\": "\\\\",
};

/**
 * A name (file name, path, URI, attachment name) safe to print on one line: the
 * name unchanged when every character in it shows as itself, otherwise the name
 * as a double-quoted JSON string literal in which the unshowable characters are
 * escaped (`\n`, `\t`, `\u001b`, `\u202e`…) and `"` and `\` are backslashed, so
 * `report⏎2024.txt` prints as `"report\n2024.txt"` and can be read back with
 * `JSON.parse`. Ordinary names, non-ASCII letters, emoji and spaces included,
 * are never quoted.
 */
export function displayName(name: string): string {
  if (!UNSHOWABLE.test(name)) return name;
  const escaped = name.replace(
    TO_ESCAPE,
    (c) => SHORT_ESCAPES[c] ?? `\\u${(c.charCodeAt(0) as number).toString(16).padStart(4, "0")}`,
  );
  return `"${escaped}"`;
}

/** `n` and `noun`, in the plural unless `n` is 1: `1 document`, `3 documents`, `0 errors`. */
export function countOf(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? "" : "s"}`;
}
