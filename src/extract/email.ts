/**
 * Email extractor (`.eml` and mbox-style single messages) built on mailparser's
 * `simpleParser`: the body as text, the headers as metadata.
 */
import { type AddressObject, type EmailAddress, type ParsedMail, simpleParser } from "mailparser";
import { ExtractionError } from "../errors.js";
import type { ExtractedDocument } from "../types.js";
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

/** Removes a leading mbox `From ` separator line, which is not an RFC 5322 header. */
function stripMboxLine(bytes: Buffer): Buffer {
  if (bytes.length < 5 || bytes.toString("latin1", 0, 5) !== "From ") return bytes;
  const nl = bytes.indexOf(0x0a);
  return nl < 0 ? Buffer.alloc(0) : bytes.subarray(nl + 1);
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

/** Normalises body text: LF line endings, no trailing spaces, at most one blank line in a row. */
function tidyBody(text: string): string {
  return text
    .replace(/\r\n?/g, "\n")
    .replace(/[ \t]+$/gm, "")
    .replace(/\n{3,}/g, "\n\n")
    .trim();
}

/** The message body: the text/plain content, else the HTML content converted to text. */
function bodyText(mail: ParsedMail): string {
  const plain = tidyBody(mail.text ?? "");
  if (plain !== "") return plain;
  if (typeof mail.html === "string" && mail.html.trim() !== "") return tidyBody(htmlToText(mail.html).text);
  return "";
}

/**
 * Extracts one email message.
 *
 * `text` is the body only (not the headers): the text/plain content, or when it is
 * empty or absent the HTML content converted with the HTML extractor's converter.
 * Line endings are normalised to `\n`, trailing spaces and extra blank lines are
 * removed. Charsets and transfer encodings are decoded by mailparser. A leading
 * mbox `From ` line is ignored. An email without body text but with attachments
 * gets one `[attachment: name (type)]` line per attachment as text.
 *
 * Metadata: `path`, `type: "email"`, `title` (subject, or `(no subject)`), and when
 * present: `subject`, `from` (`Name <addr>`, several joined by `, `), `to[]`, `cc[]`,
 * `date` (ISO-8601 UTC), `messageId`, `inReplyTo`, `references[]`,
 * `attachments[]` ({@link AttachmentInfo}).
 *
 * @throws ExtractionError "file is empty", "not an email message" (nothing parsed),
 *   "email has no body text" (no text, HTML or attachment), or a parse failure.
 */
export const emailExtractor: Extractor = {
  type: "email",
  async extract(path: string, ctx: ExtractContext): Promise<ExtractedDocument[]> {
    const raw = await readSource(path, ctx);
    if (raw.toString("latin1").trim() === "") throw new ExtractionError(path, "file is empty");
    let mail: ParsedMail;
    try {
      mail = await simpleParser(stripMboxLine(raw), {
        skipHtmlToText: true,
        skipTextToHtml: true,
        skipImageLinks: true,
        keepCidLinks: true,
        checksumAlgo: false,
      });
    } catch (err) {
      throw asExtractionError(path, err, "cannot parse email");
    }
    if (mail.headerLines.length === 0 && !mail.text && !mail.html) {
      throw new ExtractionError(path, "not an email message");
    }

    const attachments: AttachmentInfo[] = mail.attachments.map((a) =>
      compact({
        filename: nonBlank(a.filename),
        contentType: a.contentType,
        size: a.size ?? a.content.length,
      }),
    );
    let text = bodyText(mail);
    if (text === "" && attachments.length > 0) {
      text = attachments.map((a) => `[attachment: ${a.filename ?? "unnamed"} (${a.contentType})]`).join("\n");
    }
    if (text === "") throw new ExtractionError(path, "email has no body text");

    const subject = nonBlank(mail.subject);
    const fromList = addressList(mail.from);
    const references = typeof mail.references === "string" ? [mail.references] : mail.references;
    const metadata = compact({
      path,
      type: "email" as const,
      title: subject ?? "(no subject)",
      subject,
      from: fromList?.join(", "),
      to: addressList(mail.to),
      cc: addressList(mail.cc),
      date: messageDate(mail),
      messageId: nonBlank(mail.messageId),
      inReplyTo: nonBlank(mail.inReplyTo),
      references: references && references.length > 0 ? references : undefined,
      attachments: attachments.length > 0 ? attachments : undefined,
    });
    return [{ uri: path, text, metadata }];
  },
};
