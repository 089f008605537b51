/**
 * Host-independent parsing of RFC 5322 header values: the `Date` field
 * (§3.3 date-time, with the obsolete forms of §4.3) and message identifiers
 * (§3.6.4 `Message-ID`, `In-Reply-To`, `References`), plus JWZ threading of
 * the messages of one mailbox.
 *
 * Nothing here reads the host's time zone or locale: `Date.UTC` is the only
 * date arithmetic, month and zone names are fixed English tables.
 */

/** Month names (RFC 5322 §3.3 `month`), also matched by their first three letters. */
const MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];

/**
 * Zone names and their offsets from UTC in minutes.
 *
 * RFC 5322 §4.3 (obs-zone): `UT`, `GMT` (+0000), `EST` (-0500), `EDT` (-0400),
 * `CST` (-0600), `CDT` (-0500), `MST` (-0700), `MDT` (-0600), `PST` (-0800),
 * `PDT` (-0700). The RFC says the one-letter military zones were defined with the
 * wrong sign in RFC 822 and must be read as `-0000` (unknown); only `Z` (Zulu,
 * UTC, whose sign cannot be wrong) is kept.
 *
 * Beyond the RFC, abbreviations common in real mail whose meaning is not in doubt:
 * `UTC`; Europe `WET` 0, `WEST` +1, `BST` +1 (British Summer Time), `CET`/`MET` +1,
 * `CEST`/`MEST`/`MESZ` +2, `MEZ` +1, `EET` +2, `EEST` +3, `MSK` +3; North America
 * `AKST` -9, `AKDT` -8, `HST` -10, `NST` -3:30, `NDT` -2:30; Asia/Pacific `JST`
 * +9, `KST` +9, `HKT` +8, `SGT` +8, `AWST` +8, `ACST` +9:30, `ACDT` +10:30,
 * `AEST` +10, `AEDT` +11, `NZST` +12, `NZDT` +13.
 *
 * Deliberately absent because they name several zones: `IST` (India +5:30,
 * Ireland +1, Israel +2), `AST` (Atlantic -4, Arabia +3), `CST` as China
 * Standard Time (the RFC's US Central -6 wins), `BST` as Bangladesh. A date
 * with such a zone is read as one without a zone (UTC, see {@link parseRfc5322Date}).
 */
export const ZONE_OFFSETS: Readonly<Record<string, number>> = {
  UT: 0,
  UTC: 0,
  GMT: 0,
  Z: 0,
  EST: -300,
  EDT: -240,
  CST: -360,
  CDT: -300,
  MST: -420,
  MDT: -360,
  PST: -480,
  PDT: -420,
  AKST: -540,
  AKDT: -480,
  HST: -600,
  NST: -210,
  NDT: -150,
  WET: 0,
  WEST: 60,
  BST: 60,
  CET: 60,
  MET: 60,
  MEZ: 60,
  CEST: 120,
  MEST: 120,
  MESZ: 120,
  EET: 120,
  EEST: 180,
  MSK: 180,
  JST: 540,
  KST: 540,
  HKT: 480,
  SGT: 480,
  AWST: 480,
  ACST: 570,
  ACDT: 630,
  AEST: 600,
  AEDT: 660,
  NZST: 720,
  NZDT: 780,
};

/** A parsed `Date` value. */
export interface ParsedDate {
  /** The instant as ISO 8601 UTC (`2024-07-02T07:00:00.000Z`). */
  iso: string;
  /** Milliseconds since the epoch. */
  time: number;
  /**
   * The zone offset in minutes east of UTC as written (numeric or from the zone
   * table), or `undefined` when the value has no zone, `-0000`, a military letter
   * or a zone name not in {@link ZONE_OFFSETS}: then the time was read as UTC.
   */
  offset?: number;
}

/**
 * Removes RFC 5322 §3.2.2 comments (nested, with quoted-pairs; not inside quoted
 * strings), each replaced by a space, and returns their texts. An unclosed
 * comment runs to the end of the value.
 */
export function stripComments(value: string): { text: string; comments: string[] } {
  let out = "";
  const comments: string[] = [];
  let depth = 0;
  let comment = "";
  let quoted = false;
  for (let i = 0; i < value.length; i++) {
    const c = value[i] as string;
    if (depth === 0) {
      if (quoted) {
        out += c;
        if (c === "\\" && i + 1 < value.length) out += value[++i];
        else if (c === '"') quoted = false;
      } else if (c === '"') {
        quoted = true;
        out += c;
      } else if (c === "(") {
        depth = 1;
        comment = "";
        out += " ";
      } else out += c;
      continue;
    }
    if (c === "\\") {
      comment += value[++i] ?? "";
    } else if (c === "(") {
      depth++;
      comment += c;
    } else if (c === ")") {
      depth--;
      if (depth === 0) comments.push(comment.trim());
      else comment += c;
    } else comment += c;
  }
  // An unclosed comment runs to the end of the value (it is dropped).
  return { text: out, comments };
}

/** Days in `month` (0-based) of `year` (proleptic Gregorian). */
function daysIn(year: number, month: number): number {
  return new Date(Date.UTC(year, month + 1, 0)).getUTCDate();
}

/**
 * RFC 5322 §4.3 obs-year: two digits are 1950–2049 (00–49 → 20xx), three digits
 * add 1900 (as do four digits below 1000, `0102`, written by Y2K-era mailers).
 */
function fullYear(digits: string): number {
  const y = Number(digits);
  // "0102": a Y2K-era mailer printing years since 1900 with %04d, as obs-year's three digits.
  if (digits.length === 4 && y < 1000) return 1900 + y;
  if (digits.length === 2) return y < 50 ? 2000 + y : 1900 + y;
  if (digits.length === 3) return 1900 + y;
  return y;
}

/** Month index (0–11) of an English month name or abbreviation (`Jan`, `January`, `Sept`), or -1. */
function monthIndex(name: string): number {
  const n = name.toLowerCase().replace(/\.$/, "");
  const i = MONTHS.indexOf(n.slice(0, 3));
  if (i < 0) return -1;
  // The whole word must be a prefix of the full month name ("Mayhem" is not May).
  const full = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
  ][i] as string;
  return full.startsWith(n) ? i : -1;
}

/**
 * A zone token as minutes east of UTC: `+0200`, `-0530`, `+02:00`, `+02`, a
 * name of {@link ZONE_OFFSETS}, `GMT+2`/`UTC+05:30`. `null` for an explicit
 * unknown zone (`-0000`, military letters other than `Z`, names not in the
 * table), `undefined` when `token` is not a zone at all.
 */
function zoneOffset(token: string): number | null | undefined {
  const numeric = /^(?:(?:GMT|UTC?)(?=[+-]))?([+-])(\d{1,2})(?::?(\d{2}))?$/i.exec(token);
  if (numeric) {
    const [, sign, hh = "0", mm = "0"] = numeric;
    const h = Number(hh);
    const m = Number(mm);
    if (h > 23 || m > 59) return undefined;
    // RFC 5322 §3.3: "-0000" says the local zone is unknown (the time is UTC).
    if (sign === "-" && h === 0 && m === 0) return null;
    return (sign === "-" ? -1 : 1) * (h * 60 + m);
  }
  if (!/^[A-Za-z]{1,5}$/.test(token)) return undefined;
  const name = token.toUpperCase();
  const known = ZONE_OFFSETS[name];
  if (known !== undefined) return known;
  return null; // a military letter or an unknown/ambiguous abbreviation
}

/** Builds the result from UTC fields and an offset (minutes east of UTC, or null/undefined for unknown). */
function instant(
  year: number,
  month: number,
  day: number,
  hour: number,
  minute: number,
  second: number,
  millis: number,
  offset: number | null | undefined,
): ParsedDate | undefined {
  if (year < 1000 || year > 9999 || month < 0 || month > 11) return undefined;
  if (day < 1 || day > daysIn(year, month)) return undefined;
  if (hour > 23 || minute > 59 || second > 60) return undefined;
  // A leap second (…:60) is the last moment of its minute.
  const s = Math.min(second, 59);
  const shift = offset ?? 0;
  const time = Date.UTC(year, month, day, hour, minute, s, millis) - shift * 60_000;
  if (!Number.isFinite(time)) return undefined;
  const iso = new Date(time).toISOString();
  return offset === null || offset === undefined ? { iso, time } : { iso, time, offset };
}

/** `hh:mm[:ss[.fff]]` as `[hour, minute, second, millisecond]`, or undefined. */
function timeOfDay(token: string): [number, number, number, number] | undefined {
  const m = /^(\d{1,2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?$/.exec(token);
  if (!m) return undefined;
  const millis = m[4] ? Number(m[4].padEnd(3, "0").slice(0, 3)) : 0;
  return [Number(m[1]), Number(m[2]), Number(m[3] ?? 0), millis];
}

/** ISO 8601 / RFC 3339 forms: `2024-07-02`, `2024-07-02T09:00:00Z`, `2024-07-02 09:00:00 +0200`. */
function parseIso(text: string): ParsedDate | undefined {
  const m =
    /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}:\d{2}(?::\d{2}(?:[.,]\d{1,9})?)?)\s*(Z|[+-]\d{2}(?::?\d{2})?|[A-Za-z]{1,5})?)?$/i.exec(
      text,
    );
  if (!m) return undefined;
  const [h, min, s, ms] = m[4] ? (timeOfDay(m[4]) ?? [-1, 0, 0, 0]) : [0, 0, 0, 0];
  if (h < 0) return undefined;
  const offset = m[5] ? zoneOffset(m[5]) : null;
  if (offset === undefined) return undefined;
  return instant(Number(m[1]), Number(m[2]) - 1, Number(m[3]), h, min, s, ms, offset);
}

/**
 * Parses an email `Date` value (RFC 5322 §3.3 `date-time`) without reference
 * to the host's time zone or locale.
 *
 * Accepted: `[day-of-week ","] day month year hour ":" minute [":" second] zone`
 * with the obsolete forms of §4.3 (two- and three-digit years, CFWS anywhere,
 * named zones `UT`, `GMT`, `EST`…`PDT`); comments such as `(CEST)` are ignored,
 * except that a value with no zone takes a zone name from a comment. Lenient
 * forms seen in real mail are read too: full or dotted month names, the month
 * before the day (`Jul 2, 2024`), `ctime`/`date(1)` output
 * (`Tue Jul  2 09:00:00 CEST 2024`), missing seconds, `+02:00`, `GMT+2`, and
 * ISO 8601 (`2024-07-02T09:00:00Z`). Zone names are read with the table
 * {@link ZONE_OFFSETS} (ambiguous ones such as `IST` are not in it).
 *
 * **No zone means UTC.** A value without a zone, with `-0000` (which RFC 5322
 * §3.3 defines as "no information about the local time zone"), a military
 * letter (§4.3: to be read as `-0000`) or an unknown zone name is read as UTC
 * and `offset` is left out — never as the host's local time, so the result is
 * the same on every machine.
 *
 * @returns the instant, or `undefined` when `value` is not a date (an
 *   impossible day such as 31 February, an hour over 23, a year outside
 *   1000–9999, no time of day in an RFC-style value…).
 */
export function parseRfc5322Date(value: string): ParsedDate | undefined {
  const { text, comments } = stripComments(value);
  const flat = text.replace(/\s+/g, " ").trim();
  if (flat === "") return undefined;
  const iso = parseIso(flat);
  if (iso) return iso;
  // Tokens: words, numbers, times and zones; commas and stray dots separate.
  const tokens = flat
    .replace(/,/g, " ")
    .split(" ")
    .filter((t) => t !== "");
  let day: number | undefined;
  let month: number | undefined;
  let year: number | undefined;
  let clock: [number, number, number, number] | undefined;
  let offset: number | null | undefined;
  let zoneSeen = false;
  for (const token of tokens) {
    // A time with a zone glued on: "09:00:00+0200", "09:00:00Z".
    const glued = /^(\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?)(Z|[+-]\d{2}:?\d{2})$/i.exec(token);
    const time = timeOfDay(glued ? (glued[1] as string) : token);
    if (time && clock === undefined) {
      clock = time;
      if (glued) {
        offset = zoneOffset(glued[2] as string);
        zoneSeen = true;
      }
      continue;
    }
    if (/^\d{1,4}$/.test(token)) {
      if (token.length <= 2 && day === undefined) day = Number(token);
      else if (year === undefined) year = fullYear(token);
      else return undefined;
      continue;
    }
    const mi = /^[A-Za-z]+\.?$/.test(token) ? monthIndex(token) : -1;
    if (mi >= 0 && month === undefined) {
      month = mi;
      continue;
    }
    if (clock !== undefined && /^[AP]\.?M\.?$/i.test(token) && clock[0] >= 1 && clock[0] <= 12) {
      // A 12-hour clock: "10:00 PM".
      clock[0] = (clock[0] % 12) + (/^p/i.test(token) ? 12 : 0);
      continue;
    }
    if (clock !== undefined && !zoneSeen) {
      const z = zoneOffset(token);
      if (z !== undefined) {
        offset = z;
        zoneSeen = true;
        continue;
      }
    }
    // Day names (`Tue`, `Tuesday`) and other words are ignored.
    if (/^[A-Za-z]+\.?$/.test(token)) continue;
    if (clock !== undefined && !zoneSeen) {
      // A garbled zone ("01800"): no zone information.
      offset = null;
      zoneSeen = true;
      continue;
    }
    return undefined;
  }
  if (day === undefined || month === undefined || year === undefined || clock === undefined) return undefined;
  if (!zoneSeen) {
    // "Tue, 2 Jul 2024 09:00:00 (CEST)": the zone only in a comment.
    for (const c of comments) {
      const z = zoneOffset(c.trim());
      if (z !== undefined && z !== null) {
        offset = z;
        break;
      }
    }
  }
  const [h, min, s, ms] = clock;
  return instant(year, month, day, h, min, s, ms, offset ?? null);
}

/**
 * The message identifiers in a `Message-ID`, `In-Reply-To` or `References`
 * value, in order, each as `<id-left@id-right>` (RFC 5322 §3.6.4 `msg-id`).
 *
 * Only text in angle brackets counts: comments (nested, RFC 5322 §3.2.2) and
 * quoted strings are skipped, so `<a@b> (Member's message of Mon, 1 Jul)`
 * gives `<a@b>` and `Your message of "Mon, 1 Jul" <a@b>` gives `<a@b>`;
 * phrases and addresses outside brackets (obs-in-reply-to, §4.5.4) are
 * ignored. White space inside the brackets (folding, obs-id CFWS) is removed;
 * an id without `@` or with nothing between the brackets is dropped, as are
 * repeats. With `bare`, a value holding no bracketed id but exactly one
 * `left@right` word gives that word in brackets (Message-IDs written without
 * brackets by some mailers).
 */
export function parseMessageIds(value: string | undefined, options: { bare?: boolean } = {}): string[] {
  if (value === undefined) return [];
  const { text } = stripComments(value);
  const ids: string[] = [];
  const seen = new Set<string>();
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === "\\") i++;
      else if (c === '"') quoted = false;
      continue;
    }
    if (c === '"') {
      quoted = true;
      continue;
    }
    if (c !== "<") continue;
    const close = text.indexOf(">", i + 1);
    if (close < 0) break;
    const inner = text.slice(i + 1, close).replace(/\s+/g, "");
    i = close;
    // A second "<" inside means the first one was stray: restart from it.
    const restart = inner.lastIndexOf("<");
    const id = restart >= 0 ? inner.slice(restart + 1) : inner;
    if (!/^[^@<>]+@[^@<>]+$/.test(id)) continue;
    const msgId = `<${id}>`;
    if (!seen.has(msgId)) {
      seen.add(msgId);
      ids.push(msgId);
    }
  }
  if (ids.length === 0 && options.bare) {
    const words = text
      .replace(/"(?:[^"\\]|\\.)*"/g, " ")
      .trim()
      .split(/\s+/);
    const [word] = words;
    if (words.length === 1 && word !== undefined && /^[^@<>\s]+@[^@<>\s]+$/.test(word)) ids.push(`<${word}>`);
  }
  return ids;
}

/** The threading headers of one message, as {@link parseMessageIds} gives them. */
export interface ThreadHeaders {
  messageId?: string;
  inReplyTo?: string[];
  references?: string[];
}

/**
 * The parent chain JWZ threading uses for one message: its `References` ids,
 * with the first `In-Reply-To` id appended when it is not among them ("If both
 * headers exist, take the first thing in the In-Reply-To header that looks like
 * a Message-ID, and append it to the References header"); the own id removed.
 */
function referenceChain(m: ThreadHeaders): string[] {
  const chain = [...(m.references ?? [])];
  const reply = m.inReplyTo?.[0];
  if (reply !== undefined && !chain.includes(reply)) chain.push(reply);
  return chain.filter((id) => id !== m.messageId);
}

/**
 * Thread ids for the messages of one mailbox, by the first step of Jamie
 * Zawinski's threading algorithm (https://www.jwz.org/doc/threading.html):
 * one container per message id (seen as a Message-ID or referenced); for each
 * message, consecutive ids of its reference chain (`References`, then the first
 * `In-Reply-To` id) are linked parent → child unless that would make a loop
 * or the child already has a parent, and the message's own container gets the
 * last id of its chain as its parent (replacing an earlier guess, unless that
 * makes a loop). A message's thread id is the id of the root of its container's
 * tree: the first `References` id, else the `In-Reply-To` id, else its own
 * Message-ID — followed up through the other messages, so a reply that names
 * only its parent (`In-Reply-To`) joins the parent's thread.
 *
 * JWZ's later steps (pruning empty containers, grouping by subject) are not
 * done: messages are grouped only by their ids. A message without any id gets
 * `undefined`.
 */
export function threadIds(messages: readonly ThreadHeaders[]): (string | undefined)[] {
  const parent = new Map<string, string | undefined>();
  const isAncestor = (candidate: string, of: string): boolean => {
    // True when `candidate` is `of` or one of its ancestors (linking would loop).
    const seen = new Set<string>();
    for (let at: string | undefined = of; at !== undefined && !seen.has(at); at = parent.get(at)) {
      if (at === candidate) return true;
      seen.add(at);
    }
    return false;
  };
  const ensure = (id: string): void => {
    if (!parent.has(id)) parent.set(id, undefined);
  };
  for (const m of messages) {
    const chain = referenceChain(m);
    for (const id of chain) ensure(id);
    for (let i = 1; i < chain.length; i++) {
      const p = chain[i - 1] as string;
      const c = chain[i] as string;
      if (parent.get(c) === undefined && !isAncestor(c, p)) parent.set(c, p);
    }
    if (m.messageId === undefined) continue;
    ensure(m.messageId);
    const last = chain[chain.length - 1];
    if (last !== undefined && !isAncestor(m.messageId, last)) parent.set(m.messageId, last);
  }
  const root = (id: string): string => {
    const seen = new Set<string>();
    let at = id;
    for (let p = parent.get(at); p !== undefined && !seen.has(p); p = parent.get(at)) {
      seen.add(at);
      at = p;
    }
    return at;
  };
  return messages.map((m) => {
    const start = m.messageId ?? referenceChain(m).at(-1);
    return start === undefined ? undefined : root(start);
  });
}
