/**
 * The one redaction of secrets in everything the library prints or sends: CLI
 * output (human and JSON), HTTP responses, MCP tool results, logs and error
 * messages. Secret fields are recognised by name ({@link isSecretKey}), at any
 * depth of any object, so a new config section with an `apiKey` is masked
 * without being listed here; credentials inside URLs and free text are masked
 * by {@link maskUrl} and {@link redactText}.
 */

/** What a secret is replaced by. */
export const MASK = "***";

/**
 * Name endings (lower case, without `-`, `_`, `.` or spaces) of fields that hold
 * secrets: `apiKey`, `api_key`, `x-api-key`, `accessToken`, `password`,
 * `clientSecret`, `authorization`, `credentials`, `connectionString`, ….
 * Bare `key` is not among them (cache keys, sort keys); `…Tokens` counts
 * (`maxBatchTokens`) are not secrets either.
 */
const SECRET_ENDINGS = [
  "apikey",
  "apikeys",
  "accesskey",
  "accesskeyid",
  "secretkey",
  "privatekey",
  "sessionkey",
  "signingkey",
  "encryptionkey",
  "masterkey",
  "secret",
  "secrets",
  "password",
  "passwd",
  "passphrase",
  "pwd",
  "token",
  "authorization",
  "auth",
  "credential",
  "credentials",
  "connectionstring",
  "connectionuri",
  "dsn",
  "cookie",
  "sessionid",
  "signature",
];

/** True when a field named `name` holds a secret (see the list above; case and separators ignored). */
export function isSecretKey(name: string): boolean {
  const n = name.toLowerCase().replace(/[-_.\s]/g, "");
  return SECRET_ENDINGS.some((end) => n.endsWith(end));
}

/** True when a URL query parameter named `name` carries a secret (`?key=`, `?api_key=`, `?token=`, `?sig=`, …). */
function isSecretParam(name: string): boolean {
  return isSecretKey(name) || /(key|sig|pass)$/.test(name.toLowerCase().replace(/[-_.\s]/g, ""));
}

/**
 * `url` with its userinfo masked (`scheme://user:***@host`, or `scheme://***@host`
 * when there is no password, since a lone username is often a token) and the values
 * of secret query parameters (`key`, `api_key`, `token`, `secret`, `password`, `sig`, …)
 * replaced by `***`, otherwise exactly as given (not re-serialised). The userinfo ends
 * at the last `@` before the first `/`, `?` or `#` after the scheme, so a malformed
 * URL (a password with an unencoded `@` or a space) is masked whole too. Any text that
 * is not a single URL goes through {@link redactText}.
 */
export function maskUrl(url: string): string {
  const m = WHOLE_URL.exec(url);
  if (m === null) return redactText(url);
  const [, scheme = "", authority = "", rest = ""] = m;
  const at = authority.lastIndexOf("@");
  const userinfo = authority.slice(0, Math.max(0, at));
  // A userinfo with spaces must look like `user:pass word` (not `host:8080 is down, mail ops`).
  if (at < 0 || (/\s/.test(userinfo) && !SPACED_USERINFO.test(userinfo))) return redactText(url);
  const head = `${maskUserinfo(userinfo)}@${authority.slice(at + 1)}`;
  return redactText(`${scheme}${head}${rest}`);
}

/** A whole string that is one URL: scheme, authority (up to the first `/`, `?`, `#`), the rest; one line. */
const WHOLE_URL = /^([a-z][a-z0-9+.-]*:\/\/)([^/?#\r\n]*)([^\r\n]*)$/i;

/** `user:pass word`: a password with at most 4 spaces, not a `host:port` followed by text. */
const SPACED_USERINFO = /^[^\s/?#@:]*:(?!\d+\s)\S*(?:[ \t]+\S+){1,4}$/;

/** True when a string looks like a credential rather than a user name (long, or a known key shape). */
function looksLikeToken(s: string): boolean {
  return s.length >= 20 || new RegExp(KEY_SHAPES.source).test(s);
}

/** The userinfo of a URL masked: `user:***`, `:***`, or `***` for a lone user name (often a token). */
function maskUserinfo(userinfo: string): string {
  if (userinfo === MASK || userinfo === "") return userinfo;
  const colon = userinfo.indexOf(":");
  if (colon < 0) return MASK;
  const user = userinfo.slice(0, colon);
  return `${looksLikeToken(user) ? MASK : user}:${MASK}`;
}

/**
 * `scheme://userinfo@` in free text: the userinfo runs to the last `@` before
 * whitespace or the first `/`, `?`, `#` (so a password holding an unencoded `@`
 * is masked whole).
 */
const URL_USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)([^\s/?#<>"']*)@/gi;
/**
 * A malformed `scheme://user:pass word@host` in free text: a password with spaces
 * (at most 4 words, on one line, without `/?#@`). `host:port …` is not taken for one.
 */
const URL_USERINFO_SPACES =
  /\b([a-z][a-z0-9+.-]*:\/\/)([^\s/?#@:<>"']*:(?!\d+\s)[^\s/?#@<>"']*(?:[ \t]+[^\s/?#@<>"']+){1,4})@(?=[A-Za-z0-9[])/gi;
/** `?key=value` / `&api_key=value` with a secret parameter name. */
const URL_QUERY = /([?&;])([^\s=&#;?]+)=([^\s&#;"'<>]+)/g;
/** `Bearer abc…`, and `Basic`/`Token` followed by something with a digit or `=` (not a word). */
const BEARER =
  /\b(Bearer\s+[A-Za-z0-9._~+/=-]{6,}|(?:Basic|Token)\s+(?=[A-Za-z._~+/-]*[0-9=])[A-Za-z0-9._~+/=-]{8,})/g;
/** `apiKey: "v"`, `"api_key":"v"`, `password=v`, `token: v` in free text. */
const ASSIGNMENT = /(["']?)([A-Za-z][\w.-]*)\1(\s*[:=]\s*)("[^"]*"|'[^']*'|[^\s,;&"'}\]]+)/g;
/** Well-known key formats: OpenAI/Anthropic `sk-…`, Cohere/Pinecone-style `pcsk_…`, GitHub `ghp_…`, AWS `AKIA…`. */
const KEY_SHAPES =
  /\b(sk-[A-Za-z0-9_-]{16,}|pcsk_[A-Za-z0-9_]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|AKIA[0-9A-Z]{16})\b/g;

/**
 * Free text (an error message, a log line) with credentials masked: URL userinfo
 * (`user:***@`, `***@` for a lone user name, also when a password holds an
 * unencoded `@` or spaces; see {@link maskUrl}), secret query parameters,
 * `Bearer`/`Basic` credentials, `name: value` and `name=value` pairs whose name is
 * a secret ({@link isSecretKey}), and API keys of well-known shapes (`sk-…`,
 * `ghp_…`, `AKIA…`). Values known to be secret (a provider's own key) are masked
 * by {@link maskKnownSecrets}.
 */
export function redactText(text: string): string {
  return text
    .replace(URL_USERINFO_SPACES, (_m, scheme: string, info: string) => `${scheme}${maskUserinfo(info)}@`)
    .replace(URL_USERINFO, (_m, scheme: string, info: string) => `${scheme}${maskUserinfo(info)}@`)
    .replace(URL_QUERY, (m, sep: string, name: string, value: string) =>
      isSecretParam(name) && value !== MASK ? `${sep}${name}=${MASK}` : m,
    )
    .replace(BEARER, (m: string) => `${m.split(/\s+/)[0]} ${MASK}`)
    .replace(ASSIGNMENT, (m, quote: string, name: string, sep: string, value: string) => {
      if (!isSecretKey(name) || /^["']?(\*\*\*|(Bearer|Basic|Token)["']?$)/.test(value)) return m;
      const q = value.startsWith('"') ? '"' : value.startsWith("'") ? "'" : "";
      return `${quote}${name}${quote}${sep}${q}${MASK}${q}`;
    })
    .replace(KEY_SHAPES, MASK);
}

/**
 * A deep copy of `value` fit to print or send: every field whose name is a secret
 * ({@link isSecretKey}) holding anything but an empty value becomes `***`, and every
 * other string has the credentials of URLs and free text masked ({@link redactText}). Arrays and nested objects are
 * walked; the input is not changed. Use it on configurations and error details,
 * not on document text.
 */
export function redactSecrets<T>(value: T): T {
  return walk(value, undefined, new WeakSet()) as T;
}

function walk(value: unknown, key: string | undefined, seen: WeakSet<object>): unknown {
  if (key !== undefined && isSecretKey(key) && value !== undefined && value !== null && value !== "") {
    return MASK;
  }
  if (typeof value === "string") return maskUrl(value);
  if (typeof value !== "object" || value === null) return value;
  if (seen.has(value)) return "[circular]";
  seen.add(value);
  if (Array.isArray(value)) return value.map((v) => walk(v, undefined, seen));
  if (value instanceof Date) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = walk(v, k, seen);
  return out;
}

/** An error's message with credentials masked ({@link redactText}); non-errors are stringified. */
export function errorText(error: unknown, withStack = false): string {
  if (error instanceof Error) return redactText(withStack ? (error.stack ?? error.message) : error.message);
  return redactText(String(error));
}

/**
 * An error as a log record (the shape of pino's `err` serializer: type, message,
 * stack, code) with credentials masked; for the `serializers.err` of a logger.
 */
export function errorForLog(error: unknown): {
  type: string;
  message: string;
  stack: string;
  [key: string]: unknown;
} {
  if (!(error instanceof Error)) return { type: typeof error, message: redactText(String(error)), stack: "" };
  const out: { type: string; message: string; stack: string; [key: string]: unknown } = {
    type: error.name,
    message: redactText(error.message),
    stack: redactText(error.stack ?? ""),
  };
  const code = (error as { code?: unknown }).code;
  if (code !== undefined) out.code = code;
  return out;
}

/** Known secrets shorter than this are not masked in free text (it would mangle ordinary words). */
export const MIN_KNOWN_SECRET_LENGTH = 6;

/**
 * `text` with every occurrence of the given secret values (an API key, a password
 * from the caller's own config) replaced by `***`, for errors whose text comes from
 * elsewhere (a server echoing the key it rejected: `Incorrect API key provided: …`).
 * Values shorter than {@link MIN_KNOWN_SECRET_LENGTH} characters, empty or
 * undefined are skipped; their URL-encoded forms are masked too.
 */
export function maskKnownSecrets(text: string, secrets: readonly (string | undefined | null)[]): string {
  let out = text;
  const values = new Set<string>();
  for (const s of secrets) {
    if (typeof s !== "string") continue;
    const v = s.trim();
    if (v.length < MIN_KNOWN_SECRET_LENGTH) continue;
    values.add(v);
    values.add(encodeURIComponent(v));
  }
  // Longest first, so a secret containing another is masked whole.
  for (const v of [...values].sort((a, b) => b.length - a.length)) out = out.split(v).join(MASK);
  return out;
}
