/**
 * Email extractor for `.eml` files and mbox files (`.mbox`, or any mail file that
 * holds several messages separated by `From ` lines), built on mailparser's
 * `simpleParser`: one document per message with the body as text and the headers
 * as metadata, followed by one child document per extracted attachment.
 */
import {
  type AddressObject,
  type Attachment,
  type EmailAddress,
  type ParsedMail,
  simpleParser,
} from "mailparser";
import { ExtractionError } from "../errors.js";
import type { DocumentMetadata, ExtractedDocument } from "../types.js";
import type { ExtractContext, Extractor } from "./contract.js";
import { htmlToText } from "./html.js";
import { parseMessageIds, parseRfc5322Date, threadIds } from "./rfc5322.js";
import {
  asExtractionError,
  charsetName,
  compact,
  decodeLegacy,
  nonBlank,
  readSource,
  textCharset,
} from "./util.js";

/** An attachment as listed in `metadata.attachments`. */
export interface AttachmentInfo {
  /** File name from the MIME headers, when given. */
  filename?: string;
  /** MIME type, e.g. `application/pdf`. */
  contentType: string;
  /** Decoded size in bytes. */
  size: number;
}

const LF = 0x0a;
const CR = 0x0d;
const GT = 0x3e;
const FROM_LINE = Buffer.from("\nFrom ", "latin1");
const ESCAPED_FROM = Buffer.from(">From ", "latin1");

/**
 * An mbox separator line: `From ` + sender (or `-`) + a ctime-style date holding a
 * time and a year, e.g. `From alice@example.com  Mon Jan  1 00:00:00 2024`.
 */
const SEPARATOR = /^From \S*[ \t]+.*\b\d{1,2}:\d{2}\b.*\b\d{4}\b/;
/** A header field line (`Name: value`) as it follows a separator. */
const HEADER_FIELD = /^[!-9;-~]+:/;

/** The line of `bytes` starting at `start` (without its line break), at most `max` bytes, as Latin-1. */
function lineAt(bytes: Buffer, start: number, max = 512): string {
  let end = bytes.indexOf(LF, start);
  if (end < 0) end = bytes.length;
  end = Math.min(end, start + max);
  if (end > start && bytes[end - 1] === CR) end--;
  return bytes.toString("latin1", start, end);
}

/** True when the line at `start` is an mbox separator followed by a header line. */
function isSeparatorAt(bytes: Buffer, start: number): boolean {
  if (!SEPARATOR.test(lineAt(bytes, start))) return false;
  const eol = bytes.indexOf(LF, start);
  return eol >= 0 && HEADER_FIELD.test(lineAt(bytes, eol + 1, 200));
}

/** True when `bytes` hold only spaces, tabs and line breaks (stops at the first other byte). */
function isBlank(bytes: Buffer): boolean {
  for (const b of bytes) {
    if (b !== 0x20 && b !== 0x09 && b !== LF && b !== CR) return false;
  }
  return true;
}

/** True when the line ending just before `start` (a line start) is blank or `start` is 0. */
function followsBlankLine(bytes: Buffer, start: number): boolean {
  if (start === 0) return true;
  let i = start - 2; // skip the LF that ends the previous line
  if (i >= 0 && bytes[i] === CR) i--;
  return i < 0 || bytes[i] === LF;
}

/**
 * The messages of a mail file: byte ranges without their mbox `From ` lines.
 *
 * A file is an mbox when its name ends in `.mbox`/`.mbx`, or when its first line is
 * a separator (then every later separator must follow a blank line, as mbox
 * writers put one there, so a `From …` sentence in a body does not split it).
 * Other files are one message. Scans the bytes once for `\nFrom ` (linear time,
 * no copies: the messages are views of `bytes`).
 *
 * @throws ExtractionError when there are more than `maxMessages` messages.
 */
function splitMbox(path: string, bytes: Buffer, maxMessages: number): { messages: Buffer[]; mbox: boolean } {
  const named = /\.(?:mbox|mbx)$/i.test(path);
  const firstIsSeparator =
    bytes.length >= 5 && bytes.toString("latin1", 0, 5) === "From " && isSeparatorAt(bytes, 0);
  if (!named && !firstIsSeparator) return { messages: [bytes], mbox: false };
  const starts: number[] = firstIsSeparator ? [0] : [];
  for (let at = bytes.indexOf(FROM_LINE); at >= 0; at = bytes.indexOf(FROM_LINE, at + 1)) {
    const start = at + 1;
    if ((named || followsBlankLine(bytes, start)) && isSeparatorAt(bytes, start)) {
      starts.push(start);
      if (starts.length > maxMessages) {
        throw new ExtractionError(
          path,
          `mbox holds more than ${maxMessages} messages (limit maxMessages = ${maxMessages})`,
        );
      }
    }
  }
  const messages: Buffer[] = [];
  const preamble = bytes.subarray(0, starts[0] ?? bytes.length);
  if (!isBlank(preamble)) messages.push(preamble);
  for (let i = 0; i < starts.length; i++) {
    const start = starts[i] as number;
    const eol = bytes.indexOf(LF, start);
    const end = starts[i + 1] ?? bytes.length;
    messages.push(eol < 0 || eol >= end ? Buffer.alloc(0) : bytes.subarray(eol + 1, end));
  }
  if (messages.length > maxMessages) {
    throw new ExtractionError(
      path,
      `mbox holds more than ${maxMessages} messages (limit maxMessages = ${maxMessages})`,
    );
  }
  return { messages, mbox: true };
}

/**
 * Undoes mboxrd `From ` quoting: a line `>From …`, `>>From …` loses one `>`.
 * Returns `message` itself when there is nothing to undo (linear, one copy otherwise).
 */
function unescapeFromLines(message: Buffer): Buffer {
  const pieces: Buffer[] = [];
  let copied = 0;
  for (let at = message.indexOf(ESCAPED_FROM); at >= 0; at = message.indexOf(ESCAPED_FROM, at + 1)) {
    let lineStart = at;
    while (lineStart > 0 && message[lineStart - 1] === GT) lineStart--;
    if (lineStart > 0 && message[lineStart - 1] !== LF) continue;
    pieces.push(message.subarray(copied, lineStart));
    copied = lineStart + 1; // drop one '>'
  }
  if (pieces.length === 0) return message;
  pieces.push(message.subarray(copied));
  return Buffer.concat(pieces);
}

/**
 * Where the header block starting at `start` ends (searching before `end`):
 * `head` is the offset of the line break that ends the last header line, `body`
 * the offset of the first body byte (both `end` when there is no blank line).
 */
function headerBlockEnd(message: Buffer, start = 0, end = message.length): { head: number; body: number } {
  if (message[start] === LF) return { head: start, body: start + 1 };
  if (message[start] === CR && message[start + 1] === LF) return { head: start, body: start + 2 };
  const lf = message.indexOf("\n\n", start, "latin1");
  const crlf = message.indexOf("\n\r\n", start, "latin1");
  if (crlf >= 0 && crlf < end && (lf < 0 || crlf < lf)) return { head: crlf, body: crlf + 3 };
  if (lf >= 0 && lf < end) return { head: lf, body: lf + 2 };
  return { head: end, body: end };
}

/** Labels that cannot explain 8-bit bytes: a part so labelled, or unlabelled, is decoded by detection. */
const UNDECLARED_LABELS = /^(?:|us-?ascii|ascii|ansi_x3\.4-1968|iso646-us|us|utf-?8)$/i;

/**
 * Raw 8-bit header bytes that are not UTF-8 (`Subject: Forma\xe7\xe3o`, a Korean
 * `From:` name in EUC-KR, a Thai subject under `charset="us-ascii"`) come out of
 * mailparser as U+FFFD, since it reads header bytes as UTF-8. When the header
 * block of `message` is not valid UTF-8, it is re-encoded as UTF-8 from the first
 * charset the message declares (`charset=` in the first 64 KiB, after
 * {@link relabelTextParts}), or, when that is US-ASCII/UTF-8/unknown, from the
 * charset `detectCharset` finds in the header block (windows-1252 for short
 * Latin text). The body is left as is. Returns `message` itself when nothing needs doing.
 */
function transcodeHeaders(message: Buffer): Buffer {
  const head = message.subarray(0, headerBlockEnd(message).head);
  if (!head.some((b) => b >= 0x80)) return message;
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(head);
    return message;
  } catch {
    // Not UTF-8: decode with the declared charset below.
  }
  const declared = /charset\s*=\s*"?([\w.:-]+)/i.exec(message.toString("latin1", 0, 65536))?.[1];
  const label = declared !== undefined && UNDECLARED_LABELS.test(declared) ? undefined : declared;
  return Buffer.concat([Buffer.from(decodeLegacy(head, label), "utf8"), message.subarray(head.length)]);
}

/** Hex digit value of a byte, or -1. */
function hexValue(b: number | undefined): number {
  if (b === undefined) return -1;
  if (b >= 0x30 && b <= 0x39) return b - 0x30;
  if (b >= 0x41 && b <= 0x46) return b - 0x37;
  if (b >= 0x61 && b <= 0x66) return b - 0x57;
  return -1;
}

/** Decodes a quoted-printable body (`=96` → byte 0x96, `=` at a line end joins lines). Linear. */
function decodeQuotedPrintable(body: Buffer): Buffer {
  const out = Buffer.alloc(body.length);
  let n = 0;
  for (let i = 0; i < body.length; i++) {
    const b = body[i] as number;
    if (b === 0x3d /* = */) {
      const hi = hexValue(body[i + 1]);
      const lo = hexValue(body[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out[n++] = hi * 16 + lo;
        i += 2;
        continue;
      }
      let j = i + 1;
      while (body[j] === 0x20 || body[j] === 0x09) j++;
      if (body[j] === CR && body[j + 1] === LF) j++;
      if (body[j] === LF) {
        i = j; // soft line break
        continue;
      }
    }
    out[n++] = b;
  }
  return out.subarray(0, n);
}

/** The content bytes of a part body under its Content-Transfer-Encoding, or `undefined` for an unknown one. */
function transferDecode(body: Buffer, encoding: string): Buffer | undefined {
  if (encoding === "quoted-printable") return decodeQuotedPrintable(body);
  if (encoding === "base64") return Buffer.from(body.toString("latin1"), "base64");
  return IDENTITY_ENCODINGS.has(encoding) ? body : undefined;
}

/** Transfer encodings under which the body bytes are the content bytes. */
const IDENTITY_ENCODINGS = new Set(["", "7bit", "8bit", "binary"]);

/** One change to the raw message: replace `length` bytes at `at` with `text`. */
interface Edit {
  at: number;
  length: number;
  text: string;
}

/** Deepest multipart nesting {@link relabelTextParts} walks, and most parts it relabels. */
const MAX_MIME_DEPTH = 10;
const MAX_MIME_PARTS = 1000;

/** A header field of `head` (Latin-1 text of a header block): its offset, full text (with folded lines) and value. */
function headerField(head: string, name: string): { at: number; text: string; value: string } | undefined {
  const m = new RegExp(`^${name}[ \\t]*:([^\\n]*(?:\\n[ \\t][^\\n]*)*)`, "im").exec(head);
  if (!m) return undefined;
  const text = m[0].replace(/\r$/, "");
  return { at: m.index, text, value: (m[1] ?? "").replace(/\r?\n/g, "").trim() };
}

/** A MIME parameter (`charset`, `boundary`) of a header value, unquoted. */
function mimeParam(value: string, name: string): string | undefined {
  const m = new RegExp(`;\\s*${name}\\s*=\\s*(?:"([^"]*)"|([^;\\s]*))`, "i").exec(value);
  return m ? (m[1] ?? m[2] ?? "") : undefined;
}

/**
 * Walks the MIME parts of `message[start, end)` and records in `edits` the
 * charset label changes {@link relabelTextParts} makes.
 */
function collectRelabels(message: Buffer, start: number, end: number, depth: number, edits: Edit[]): void {
  const { head, body } = headerBlockEnd(message, start, end);
  const headText = message.toString("latin1", start, Math.min(head, start + 65536));
  const contentType = headerField(headText, "content-type");
  const mime = (contentType?.value.split(";")[0] ?? "text/plain").trim().toLowerCase();
  if (mime.startsWith("multipart/")) {
    const boundary = mimeParam(contentType?.value ?? "", "boundary");
    if (!boundary || depth >= MAX_MIME_DEPTH) return;
    const delimiter = Buffer.from(`--${boundary}`, "latin1");
    let partStart = -1;
    for (let at = message.indexOf(delimiter, body); at >= 0 && at < end; ) {
      const after = at + delimiter.length;
      const follows = message[after];
      // A delimiter line: at a line start, not the prefix of a longer boundary.
      const isDelimiter =
        (at === body || message[at - 1] === LF) &&
        (follows === undefined ||
          follows === 0x2d ||
          follows === CR ||
          follows === LF ||
          follows === 0x20 ||
          follows === 0x09);
      if (isDelimiter) {
        if (partStart >= 0) {
          const partEnd = at - (message[at - 2] === CR ? 2 : 1);
          collectRelabels(message, partStart, Math.max(partStart, partEnd), depth + 1, edits);
          if (edits.length > MAX_MIME_PARTS) return;
        }
        partStart = -1;
        if (follows === 0x2d && message[after + 1] === 0x2d) return; // closing delimiter
        const eol = message.indexOf(LF, after);
        if (eol < 0 || eol >= end) return;
        partStart = eol + 1;
      }
      at = message.indexOf(delimiter, after);
    }
    // No closing delimiter: the last part runs to the end.
    if (partStart >= 0) collectRelabels(message, partStart, end, depth + 1, edits);
    return;
  }
  if (mime !== "text/plain" && mime !== "text/html") return;
  const disposition = headerField(headText, "content-disposition")?.value.toLowerCase() ?? "";
  if (disposition.startsWith("attachment")) return; // extracted as a file of its own
  const label = mimeParam(contentType?.value ?? "", "charset") ?? "";
  const latin1 =
    !UNDECLARED_LABELS.test(label) && charsetName(label) === "windows-1252" && !/1252/.test(label);
  if (!UNDECLARED_LABELS.test(label) && !latin1) return; // a real declaration wins
  const encoding = (headerField(headText, "content-transfer-encoding")?.value ?? "").toLowerCase();
  const content = transferDecode(message.subarray(body, end), encoding);
  if (!content?.some((b) => b >= 0x80)) return;
  let charset: string;
  if (latin1) {
    // Declared Latin-1: read as windows-1252 when it uses 0x80–0x9F (WHATWG).
    if (!content.some((b) => b >= 0x80 && b <= 0x9f)) return;
    charset = "windows-1252";
  } else {
    const meta =
      mime === "text/html"
        ? /<meta[^>]+charset\s*=\s*["']?([\w.:-]+)/i.exec(content.toString("latin1", 0, 4096))?.[1]
        : undefined;
    const declaredInHtml =
      meta !== undefined && !UNDECLARED_LABELS.test(meta) ? charsetName(meta) : undefined;
    charset = declaredInHtml ?? textCharset(content, { markup: mime === "text/html" });
    if (charset === "utf-8" || charset.startsWith("utf-16")) return;
  }
  edits.push(relabelEdit(start, contentType, charset, mime));
}

/**
 * The edit that makes the part whose header block starts at `start` (its
 * Content-Type field, when it has one, at `contentType.at` from there) declare
 * `charset`: the charset value replaced, `; charset=…` appended, or a
 * Content-Type field added.
 */
function relabelEdit(
  start: number,
  contentType: { at: number; text: string } | undefined,
  charset: string,
  mime: string,
): Edit {
  if (!contentType) return { at: start, length: 0, text: `Content-Type: ${mime}; charset=${charset}\r\n` };
  const m = /;\s*charset\s*=\s*(?:"([^"]*)"|([^;\s]*))/i.exec(contentType.text);
  if (!m)
    return { at: start + contentType.at + contentType.text.length, length: 0, text: `; charset=${charset}` };
  const value = m[1] ?? m[2] ?? "";
  const valueAt = m.index + m[0].length - value.length - (m[1] !== undefined ? 1 : 0);
  return { at: start + contentType.at + valueAt, length: value.length, text: charset };
}

/**
 * Makes mislabelled text parts declare the charset they are written in, so
 * mailparser decodes them right. A text/plain or text/html part (single-part
 * message or inside multipart/*, not an attachment) that declares no charset,
 * US-ASCII or UTF-8 but whose content (after quoted-printable/base64 decoding) is
 * neither valid nor mostly UTF-8 would come out with U+FFFD for every 8-bit byte
 * (`hitch =96 free` → `hitch � free`). Such a part gets the charset of an HTML
 * `<meta charset>` in it, else the one `textCharset` detects (chardet, windows-1252
 * for short Latin text): the same detection as text files. A part declared
 * ISO-8859-1 whose content has bytes 0x80–0x9F is relabelled windows-1252, as the
 * WHATWG Encoding Standard reads that label. Returns `message` itself when nothing changes.
 */
function relabelTextParts(message: Buffer): Buffer {
  const edits: Edit[] = [];
  collectRelabels(message, 0, message.length, 0, edits);
  if (edits.length === 0) return message;
  edits.sort((a, b) => a.at - b.at);
  const pieces: Buffer[] = [];
  let copied = 0;
  for (const edit of edits) {
    pieces.push(message.subarray(copied, edit.at), Buffer.from(edit.text, "latin1"));
    copied = edit.at + edit.length;
  }
  pieces.push(message.subarray(copied));
  return Buffer.concat(pieces);
}

/** Formats one mailbox as `Name <addr>` (or just the address / the name). Groups expand to members. */
function formatAddresses(entries: EmailAddress[]): string[] {
  const out: string[] = [];
  for (const entry of entries) {
    if (entry.group) {
      out.push(...formatAddresses(entry.group));
      continue;
    }
    const name = nonBlank(entry.name);
    const address = nonBlank(entry.address);
    if (name && address && name !== address) out.push(`${name} <${address}>`);
    else if (address) out.push(address);
    else if (name) out.push(name);
  }
  return out;
}

/** One mailbox of an address header, as kept in `metadata.mailboxes`. */
export interface Mailbox {
  /** Display name, when given (`Tim Chapman` of `"Tim Chapman" <timc@2ubh.com>`). */
  name?: string;
  /** The address, lower-cased (`timc@2ubh.com`); absent for a name-only entry. */
  address?: string;
}

/** The mailboxes of an address header (groups expanded), or undefined when it has none. */
function mailboxes(header: AddressObject | AddressObject[] | undefined): Mailbox[] | undefined {
  if (!header) return undefined;
  const out: Mailbox[] = [];
  const add = (entries: EmailAddress[]): void => {
    for (const entry of entries) {
      if (entry.group) {
        add(entry.group);
        continue;
      }
      const name = nonBlank(entry.name);
      const address = nonBlank(entry.address)?.toLowerCase();
      if (name || address) out.push(compact({ name: name !== entry.address ? name : undefined, address }));
    }
  };
  for (const o of Array.isArray(header) ? header : [header]) add(o.value ?? []);
  return out.length > 0 ? out : undefined;
}

/** Flattens an address header (one object or one per repeated header) to formatted strings. */
function addressList(header: AddressObject | AddressObject[] | undefined): string[] | undefined {
  if (!header) return undefined;
  const objects = Array.isArray(header) ? header : [header];
  const list = objects.flatMap((o) => formatAddresses(o.value ?? []));
  return list.length > 0 ? list : undefined;
}

/** The raw values of the header lines named `key` (lower case), without the names, unfolded. */
function rawHeaders(mail: ParsedMail, key: string): string[] {
  return mail.headerLines
    .filter((h) => h.key === key)
    .map((h) =>
      h.line
        .slice(h.line.indexOf(":") + 1)
        .replace(/\r?\n(?=[ \t])/g, "")
        .trim(),
    );
}

/**
 * ISO-8601 UTC date of the message from its first `Date` header, read by
 * {@link parseRfc5322Date} (RFC 5322 §3.3; a date without a zone, or with
 * `-0000`, is read as UTC, never in the host's zone), or `undefined` when there
 * is no `Date` header or it is not a date. mailparser's own `date` is not used:
 * it reads a zone-less date in the host's zone and substitutes the current time
 * for one it cannot parse.
 */
function messageDate(mail: ParsedMail): string | undefined {
  const raw = rawHeaders(mail, "date")[0];
  return raw === undefined ? undefined : parseRfc5322Date(raw)?.iso;
}

/**
 * The threading headers of a message (RFC 5322 §3.6.4), each id as `<left@right>`
 * ({@link parseMessageIds}: comments, quoted strings and phrases ignored):
 * `messageId` (a bare `left@right` value is accepted), `inReplyTo` (its first
 * msg-id, as JWZ threading uses; later ones are often addresses) and
 * `references` (all msg-ids of every `References` header, repeats removed).
 */
function threadHeaders(mail: ParsedMail): { messageId?: string; inReplyTo?: string; references?: string[] } {
  const messageId = parseMessageIds(rawHeaders(mail, "message-id")[0], { bare: true })[0];
  const inReplyTo = parseMessageIds(rawHeaders(mail, "in-reply-to").join(" "))[0];
  const references = parseMessageIds(rawHeaders(mail, "references").join(" "));
  return compact({ messageId, inReplyTo, references: references.length > 0 ? references : undefined });
}

/**
 * Sets `threadId` on the messages of one mail file by JWZ threading
 * ({@link threadIds}) over all of them, so that a reply naming only its parent
 * (`In-Reply-To`) gets the thread of a parent that is in the same file. Attached
 * messages (documents with a `parentUri`) keep the thread id of their own headers.
 */
function threadMessages(docs: ExtractedDocument[]): void {
  const messages = docs.filter((d) => d.metadata.type === "email" && d.metadata.parentUri === undefined);
  const ids = threadIds(
    messages.map((d) => {
      const m = d.metadata;
      return {
        messageId: typeof m.messageId === "string" ? m.messageId : undefined,
        inReplyTo: typeof m.inReplyTo === "string" ? [m.inReplyTo] : undefined,
        references: Array.isArray(m.references) ? (m.references as string[]) : undefined,
      };
    }),
  );
  for (const [i, doc] of messages.entries()) {
    const id = ids[i];
    if (id !== undefined) doc.metadata.threadId = id;
  }
}

/** Normalises body text: LF line endings, no trailing spaces, at most one blank line in a row. */
function tidyBody(text: string): string {
  return text
    .replace(/\r\n?/g, "\n")
    .replace(/[ \t]+$/gm, "")
    .replace(/\n{3,}/g, "\n\n")
    .trim();
}

/**
 * The message body: the text/plain content, else the HTML content converted to
 * text. An HTML body whose only text is its `<title>` (no `<body>` content) gives
 * that title, which `htmlToText` returns apart from the text.
 */
function bodyText(mail: Pick<ParsedMail, "text" | "html">): string {
  const plain = tidyBody(mail.text ?? "");
  if (plain !== "") return plain;
  if (typeof mail.html === "string" && mail.html.trim() !== "") {
    const converted = htmlToText(mail.html);
    return tidyBody(converted.text !== "" ? converted.text : (converted.title ?? ""));
  }
  return "";
}

/**
 * The header block of a message without body text (`From: …`, `To: …`, `Cc: …`,
 * `Subject: …`, `Date: …` lines of the fields present; lists joined with `, `),
 * the same lines the EMAIL chunker puts before a message's first chunk.
 */
function headerBlockText(meta: Pick<DocumentMetadata, "from" | "to" | "cc" | "subject" | "date">): string {
  const lines: string[] = [];
  const add = (label: string, value: string | string[] | undefined): void => {
    const v = (Array.isArray(value) ? value.join(", ") : (value ?? "")).replace(/\s+/g, " ").trim();
    if (v !== "") lines.push(`${label}: ${v}`);
  };
  add("From", meta.from);
  add("To", meta.to);
  add("Cc", meta.cc);
  add("Subject", meta.subject);
  add("Date", meta.date);
  return lines.join("\n");
}

/** True when the parsed message has at least one well-formed header field (`Name: value`). */
function hasHeaderFields(mail: ParsedMail): boolean {
  return mail.headerLines.some((h) => h.key !== "" && /^[!-9;-~]+$/.test(h.key));
}

/**
 * An attachment's file name made safe for a pseudo-path segment: no `/`, `\`, `#`,
 * `?`, `%`, control characters or white space (each run becomes `_`), at most
 * 100 characters with the extension kept; `attachment` when there is no name.
 */
function safeAttachmentName(filename: string | undefined): string {
  const cleaned = (filename ?? "")
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is removed
    .replace(/[\s/\\#?%\u0000-\u001f\u007f]+/g, "_")
    .replace(/^[._]+|_+$/g, "");
  if (cleaned === "") return "attachment";
  if (cleaned.length <= 100) return cleaned;
  const dot = cleaned.lastIndexOf(".");
  const ext = dot > 0 && cleaned.length - dot <= 10 ? cleaned.slice(dot) : "";
  return cleaned.slice(0, 100 - ext.length) + ext;
}

/** The reason of an error thrown while extracting an attachment. */
function errorReason(err: unknown): string {
  if (err instanceof ExtractionError) return err.reason;
  return err instanceof Error ? err.message : String(err);
}

/** One message's document plus the child documents of its attachments. */
async function extractAttachments(
  message: ExtractedDocument,
  attachments: Attachment[],
  ctx: ExtractContext,
): Promise<ExtractedDocument[]> {
  const children: ExtractedDocument[] = [];
  if (!ctx.options.email.attachments) return children;
  if (!ctx.extractNested) {
    // Nested too deep (an email attached to an email attached to …): listed in metadata only.
    const nonEmpty = attachments.filter((a) => a.content.length > 0).length;
    if (nonEmpty > 0) {
      message.warnings = [
        ...(message.warnings ?? []),
        `${nonEmpty} attachment${nonEmpty === 1 ? "" : "s"} nested too deep to extract (listed only)`,
      ];
    }
    return children;
  }
  const warnings = message.warnings ?? [];
  const subject = nonBlank(message.metadata.subject as string | undefined);
  for (const [index, attachment] of attachments.entries()) {
    if (attachment.content.length === 0) continue;
    const safeName = safeAttachmentName(attachment.filename);
    const shownName = nonBlank(attachment.filename) ?? safeName;
    const name = `${message.uri}#attachment/${index + 1}/${safeName}`;
    let docs: ExtractedDocument[] | undefined;
    try {
      const content = new Uint8Array(
        attachment.content.buffer,
        attachment.content.byteOffset,
        attachment.content.byteLength,
      );
      docs = await ctx.extractNested(name, content, attachment.contentType);
    } catch (err) {
      warnings.push(`attachment ${shownName}: ${errorReason(err)}`);
      continue;
    }
    for (const doc of docs ?? []) {
      // Grandchildren (attachments of an attached email) keep their own parent.
      if (doc.metadata.parentUri === undefined) {
        doc.metadata = compact({
          ...doc.metadata,
          parentUri: message.uri,
          parentSubject: subject,
          attachmentName: shownName,
        });
      }
      children.push(doc);
    }
  }
  if (warnings.length > 0) message.warnings = warnings;
  return children;
}

/** `value` without its undefined entries, or undefined when none is left. */
function compactOrUndefined<T extends Record<string, unknown>>(value: T): Partial<T> | undefined {
  const out = compact(value);
  return Object.keys(out).length > 0 ? out : undefined;
}

/** Parse options: no HTML/text conversions or image inlining, no checksums. */
const PARSE_OPTIONS = {
  skipHtmlToText: true,
  skipTextToHtml: true,
  skipImageLinks: true,
  keepCidLinks: true,
  checksumAlgo: false,
} as const;

/**
 * Extracts one message (the bytes after any `From ` line) into its document and
 * the documents of its attachments.
 * @throws ExtractionError naming `uri` when it is not an email or cannot be parsed.
 */
async function extractMessage(
  path: string,
  uri: string,
  bytes: Buffer,
  messageIndex: number | undefined,
  ctx: ExtractContext,
): Promise<ExtractedDocument[]> {
  if (isBlank(bytes)) throw new ExtractionError(uri, "file is empty");
  const parsed = transcodeHeaders(relabelTextParts(bytes));
  let mail: ParsedMail;
  try {
    mail = await simpleParser(parsed, PARSE_OPTIONS);
  } catch (err) {
    throw asExtractionError(uri, err, "cannot parse email");
  }
  if (!hasHeaderFields(mail)) throw new ExtractionError(uri, "not an email message (no header fields)");

  const attachments: AttachmentInfo[] = mail.attachments.map((a) =>
    compact({
      filename: nonBlank(a.filename),
      contentType: a.contentType,
      size: a.size ?? a.content.length,
    }),
  );
  const subject = nonBlank(mail.subject);
  const { messageId, inReplyTo, references } = threadHeaders(mail);
  const metadata: DocumentMetadata = compact({
    path,
    type: "email" as const,
    title: subject ?? "(no subject)",
    subject,
    from: addressList(mail.from)?.join(", "),
    to: addressList(mail.to),
    cc: addressList(mail.cc),
    mailboxes: compactOrUndefined({
      from: mailboxes(mail.from),
      to: mailboxes(mail.to),
      cc: mailboxes(mail.cc),
    }),
    date: messageDate(mail),
    messageId,
    inReplyTo,
    references,
    threadId: references?.[0] ?? inReplyTo ?? messageId,
    messageIndex,
    attachments: attachments.length > 0 ? attachments : undefined,
  });

  const warnings: string[] = [];
  let text = bodyText(mail);
  if (text === "" && attachments.length > 0) {
    text = attachments.map((a) => `[attachment: ${a.filename ?? "unnamed"} (${a.contentType})]`).join("\n");
  }
  if (text === "") {
    text = headerBlockText(metadata);
    if (text === "") {
      throw new ExtractionError(uri, "email has no body text and no From, To, Cc, Subject or Date header");
    }
    warnings.push("email has no body text");
  }
  const doc: ExtractedDocument = { uri, text, metadata };
  if (warnings.length > 0) doc.warnings = warnings;
  const children = await extractAttachments(doc, mail.attachments, ctx);
  return [doc, ...children];
}

/**
 * Extracts an email file: one message (`.eml`, a SpamAssassin-style file starting
 * with a `From ` line) or an mbox of many.
 *
 * **Messages.** An mbox (`.mbox`/`.mbx`, or a file whose first line is a `From `
 * separator such as `From alice@example.com  Mon Jan  1 00:00:00 2024` and which
 * holds more separators, each after a blank line and before a header line) gives
 * one document per message with `uri` `${path}#message/${n}` (1-based) and
 * `metadata.messageIndex` n; a file with one message keeps `uri` = path. mboxrd
 * quoting (`>From ` lines) is undone in files that are an mbox or start with a
 * `From ` line. More than `limits.maxMessages` messages is an error. A message of
 * a multi-message mbox that fails is skipped with a warning
 * `message N skipped: REASON` on the file's first document.
 *
 * **Text.** The body: the text/plain content, or when it is empty or absent the
 * HTML content converted with the HTML extractor's converter. Line endings are
 * normalised to `\n`, trailing spaces and extra blank lines removed. Charsets,
 * quoted-printable/base64 and RFC 2047 encoded words are decoded by mailparser.
 * A text part that declares no charset, US-ASCII or UTF-8 but is neither valid nor
 * mostly UTF-8 is read in the charset detected as for text files (`decodeText`:
 * chardet, windows-1252 for short Latin text); one declared ISO-8859-1 as
 * windows-1252. Raw 8-bit headers that are not UTF-8 are read in the message's
 * declared charset, else the detected one. An HTML body whose
 * only text is its `<title>` gives that text. A
 * message without body text but with attachments gets one
 * `[attachment: name (type)]` line per attachment; one with neither gets its
 * header block (`From: …`, `To: …`, `Cc: …`, `Subject: …`, `Date: …` lines) as
 * text and the warning `email has no body text`.
 *
 * **Metadata.** `path`, `type: "email"`, `title` (subject, or `(no subject)`), and
 * when present: `subject`, `from` (`Name <addr>`, several joined by `, `), `to[]`,
 * `cc[]`, `mailboxes` (`{ from, to, cc }`: each header's mailboxes as
 * `{ name, address }` with the address lower-cased, groups expanded; filters match
 * `from`/`to`/`cc` on them), `date` (ISO-8601 UTC from the `Date` header read as RFC 5322 §3.3
 * with zone names, a date without a zone read as UTC: the same on every host),
 * `messageId`, `inReplyTo` (its first msg-id), `references[]` (msg-ids only:
 * RFC 5322 §3.6.4, comments and phrases such as `(Member's message of …)`
 * ignored), `threadId` (JWZ threading: the first References entry, else
 * In-Reply-To, else Message-ID; in an mbox followed up through the other
 * messages, so a reply naming only its parent joins the parent's thread),
 * `messageIndex` (mbox), `attachments[]` ({@link AttachmentInfo}).
 *
 * **Attachments.** With `options.email.attachments` (default) and nesting depth
 * left, each non-empty attachment of a supported type (PDF, DOCX, HTML, text,
 * Markdown, code, attached `message/rfc822` emails…) is extracted with
 * `ctx.extractNested` under the name `${uri}#attachment/${i}/${safeName}` (i
 * 1-based); its documents follow the message's document, their metadata stamped
 * with `parentUri`, `parentSubject` and `attachmentName` (their own `type` kept).
 * Unsupported types (images…) are only listed; an attachment that cannot be
 * parsed becomes a warning `attachment NAME: REASON` on the message document.
 *
 * @throws ExtractionError naming the file: "file is empty", "not an email message"
 *   (no header fields), a message with neither body nor From/To/Cc/Subject/Date
 *   header, a parse failure, over `maxFileBytes` or `maxMessages`, or an mbox none
 *   of whose messages could be extracted (the first message's error, naming
 *   `path#message/n`).
 */
export const emailExtractor: Extractor = {
  type: "email",
  async extract(path: string, ctx: ExtractContext): Promise<ExtractedDocument[]> {
    const raw = await readSource(path, ctx);
    if (isBlank(raw)) throw new ExtractionError(path, "file is empty");
    const { messages, mbox } = splitMbox(path, raw, ctx.options.limits.maxMessages);
    if (messages.length <= 1) {
      const bytes = messages[0] ?? Buffer.alloc(0);
      return extractMessage(path, path, mbox ? unescapeFromLines(bytes) : bytes, undefined, ctx);
    }
    const out: ExtractedDocument[] = [];
    const failures: string[] = [];
    let firstError: unknown;
    for (const [i, message] of messages.entries()) {
      const n = i + 1;
      try {
        out.push(...(await extractMessage(path, `${path}#message/${n}`, unescapeFromLines(message), n, ctx)));
      } catch (err) {
        // One bad message does not cost the others; it is reported on the first document.
        firstError ??= err;
        failures.push(`message ${n} skipped: ${errorReason(err)}`);
      }
    }
    const first = out[0];
    if (!first) throw asExtractionError(path, firstError, "cannot parse mbox");
    if (failures.length > 0) first.warnings = [...(first.warnings ?? []), ...failures];
    threadMessages(out);
    return out;
  },
};
