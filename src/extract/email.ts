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
import { asExtractionError, compact, nonBlank, readSource } from "./util.js";

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
 * Where the header block of a message ends: `head` is the offset of the line break
 * that ends the last header line, `body` the offset of the first body byte (both
 * the message length when there is no blank line).
 */
function headerBlockEnd(message: Buffer): { head: number; body: number } {
  const lf = message.indexOf("\n\n", 0, "latin1");
  const crlf = message.indexOf("\n\r\n", 0, "latin1");
  if (crlf >= 0 && (lf < 0 || crlf < lf)) return { head: crlf, body: crlf + 3 };
  if (lf >= 0) return { head: lf, body: lf + 2 };
  return { head: message.length, body: message.length };
}

/** A charset label TextDecoder knows, other than UTF-8/ASCII (which cannot explain invalid UTF-8). */
function legacyDecoder(label: string | undefined): InstanceType<typeof TextDecoder> | undefined {
  if (!label || /^(?:utf-?8|us-?ascii|ascii)$/i.test(label)) return undefined;
  try {
    return new TextDecoder(label);
  } catch {
    return undefined;
  }
}

/** windows-1252 characters of the bytes 0x80–0x9F (the five unassigned bytes stay C1 controls, as in WHATWG). */
const CP1252_HIGH =
  "\u20ac\u0081\u201a\u0192\u201e\u2026\u2020\u2021\u02c6\u2030\u0160\u2039\u0152\u008d\u017d\u008f" +
  "\u0090\u2018\u2019\u201c\u201d\u2022\u2013\u2014\u02dc\u2122\u0161\u203a\u0153\u009d\u017e\u0178";

/**
 * Decodes legacy 8-bit bytes with the charset `label` when TextDecoder knows it,
 * else as windows-1252. windows-1252 (and its aliases latin1/iso-8859-1) is decoded
 * here, as Node's TextDecoder leaves 0x80–0x9F as C1 controls (`\x92` is not `’`).
 */
function decodeLegacy(bytes: Uint8Array, label?: string): string {
  const decoder = legacyDecoder(label);
  if (decoder && decoder.encoding !== "windows-1252") return decoder.decode(bytes);
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
    .toString("latin1")
    .replace(/[\u0080-\u009f]/g, (c) => CP1252_HIGH[c.charCodeAt(0) - 0x80] ?? c);
}

/**
 * Raw 8-bit header bytes that are not UTF-8 (`Subject: Forma\xe7\xe3o`, a Korean
 * `From:` name in EUC-KR) come out of mailparser as U+FFFD, since it reads header
 * bytes as UTF-8. When the header block of `message` is not valid UTF-8, it is
 * re-encoded as UTF-8 from the first charset the message declares (`charset=`
 * in the first 64 KiB), or from windows-1252 when none is usable. The body is
 * left as is. Returns `message` itself when nothing needs doing.
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
  return Buffer.concat([Buffer.from(decodeLegacy(head, declared), "utf8"), message.subarray(head.length)]);
}

/** Transfer encodings under which the body bytes are the content bytes. */
const IDENTITY_ENCODINGS = new Set(["", "7bit", "8bit", "binary"]);

/**
 * The body of a single-part text message that declares no charset (or
 * US-ASCII/UTF-8) but is written in a legacy 8-bit charset, which mailparser
 * decodes as UTF-8 with U+FFFD for every such byte (`It\x92s` → `It�s`). When most
 * high bytes of the raw body are not UTF-8, they are decoded as windows-1252 (or
 * the charset of an HTML `<meta charset>`). `undefined` when this does not apply.
 */
function legacyBody(message: Buffer, mail: ParsedMail): { text?: string; html?: string } | undefined {
  const decoded = `${mail.text ?? ""}${typeof mail.html === "string" ? mail.html : ""}`;
  if (!decoded.includes("\uFFFD")) return undefined;
  const type = mail.headers.get("content-type") as
    | { value?: string; params?: Record<string, string> }
    | undefined;
  const mime = (type?.value ?? "text/plain").toLowerCase();
  if (mime !== "text/plain" && mime !== "text/html") return undefined;
  if (legacyDecoder(type?.params?.charset)) return undefined;
  const encoding = String(mail.headers.get("content-transfer-encoding") ?? "")
    .trim()
    .toLowerCase();
  if (!IDENTITY_ENCODINGS.has(encoding)) return undefined;
  const body = message.subarray(headerBlockEnd(message).body);
  const highBytes = body.reduce((n, b) => n + (b >= 0x80 ? 1 : 0), 0);
  const replaced = (body.toString("utf8").match(/\uFFFD/g) ?? []).length;
  if (highBytes === 0 || replaced * 2 < highBytes) return undefined;
  const meta =
    mime === "text/html"
      ? /<meta[^>]+charset\s*=\s*["']?([\w.:-]+)/i.exec(body.toString("latin1", 0, 4096))
      : null;
  const content = decodeLegacy(body, meta?.[1]);
  return mime === "text/html" ? { html: content } : { text: content };
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

/** Flattens an address header (one object or one per repeated header) to formatted strings. */
function addressList(header: AddressObject | AddressObject[] | undefined): string[] | undefined {
  if (!header) return undefined;
  const objects = Array.isArray(header) ? header : [header];
  const list = objects.flatMap((o) => formatAddresses(o.value ?? []));
  return list.length > 0 ? list : undefined;
}

/** The raw value of the first header line named `key` (lower case), without the name. */
function rawHeader(mail: ParsedMail, key: string): string | undefined {
  const line = mail.headerLines.find((h) => h.key === key)?.line;
  if (line === undefined) return undefined;
  return line.slice(line.indexOf(":") + 1).trim();
}

/**
 * ISO-8601 date of the message, or `undefined` when there is no `Date` header or it
 * cannot be parsed (mailparser substitutes the current time in that case).
 */
function messageDate(mail: ParsedMail): string | undefined {
  const raw = rawHeader(mail, "date");
  if (raw === undefined || !mail.date || Number.isNaN(mail.date.getTime())) return undefined;
  if (Number.isNaN(Date.parse(raw)) && Math.abs(mail.date.getTime() - Date.now()) < 5 * 60_000) {
    return undefined;
  }
  return mail.date.toISOString();
}

/** Message ids of a `References` header, without blanks. */
function referenceList(mail: ParsedMail): string[] | undefined {
  const raw = mail.references;
  const list = (typeof raw === "string" ? [raw] : (raw ?? []))
    .map((r) => nonBlank(r))
    .filter((r): r is string => r !== undefined && r !== "<>");
  return list.length > 0 ? list : undefined;
}

/** A message id header value, or `undefined` when blank (mailparser turns blank into `<>`-ish values). */
function messageIdValue(value: string | undefined): string | undefined {
  const v = nonBlank(value);
  return v === undefined || v === "<>" ? undefined : v;
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
  if (!ctx.options.email.attachments || !ctx.extractNested) return children;
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
  const parsed = transcodeHeaders(bytes);
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
  const references = referenceList(mail);
  const inReplyTo = messageIdValue(mail.inReplyTo);
  const messageId = messageIdValue(mail.messageId);
  const metadata: DocumentMetadata = compact({
    path,
    type: "email" as const,
    title: subject ?? "(no subject)",
    subject,
    from: addressList(mail.from)?.join(", "),
    to: addressList(mail.to),
    cc: addressList(mail.cc),
    date: messageDate(mail),
    messageId,
    inReplyTo,
    references,
    threadId: references?.[0] ?? inReplyTo ?? messageId,
    messageIndex,
    attachments: attachments.length > 0 ? attachments : undefined,
  });

  const warnings: string[] = [];
  let text = bodyText(legacyBody(parsed, mail) ?? mail);
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
 * quoted-printable/base64 and RFC 2047 encoded words are decoded by mailparser;
 * raw 8-bit headers and undeclared 8-bit single-part bodies that are not UTF-8 are
 * read in the message's declared charset, else windows-1252. An HTML body whose
 * only text is its `<title>` gives that text. A
 * message without body text but with attachments gets one
 * `[attachment: name (type)]` line per attachment; one with neither gets its
 * header block (`From: …`, `To: …`, `Cc: …`, `Subject: …`, `Date: …` lines) as
 * text and the warning `email has no body text`.
 *
 * **Metadata.** `path`, `type: "email"`, `title` (subject, or `(no subject)`), and
 * when present: `subject`, `from` (`Name <addr>`, several joined by `, `), `to[]`,
 * `cc[]`, `date` (ISO-8601 UTC), `messageId`, `inReplyTo`, `references[]`,
 * `threadId` (first References entry, else In-Reply-To, else Message-ID),
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
    return out;
  },
};
