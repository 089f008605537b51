/**
 * The email extractor on real fixtures (../shared/data/docs/email, read in place)
 * and on mboxes built here: charsets, mbox splitting, attachments as child
 * documents, header-only mail, threads, limits and bad input.
 */
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createChunker, emailHeaderBlock } from "../../src/chunk/index.js";
import { extractBytes, extractFile } from "../../src/extract/index.js";
import type { ExtractedDocument } from "../../src/types.js";
import { cfg } from "../helpers/chunk-helpers.js";
import { docsPath, extractionError, tempDir } from "../helpers/helpers.js";

const mail = (...parts: string[]): string => docsPath("email", ...parts);
const gem = (...parts: string[]): string => mail("ruby_mail_gem_fixtures", "emails", ...parts);
const spamassassin = (...parts: string[]): string => mail("spamassassin_sample", ...parts);
const VALID_PDF = docsPath("pdf", "pdf-parse_npm_test_data", "04-valid.pdf");
const INVALID_PDF = docsPath("pdf", "pdf-parse_npm_test_data", "03-invalid.pdf");

/** The single document of a one-message file without attachments. */
async function only(path: string): Promise<ExtractedDocument> {
  const docs = await extractFile(path);
  expect(docs).toHaveLength(1);
  return docs[0] as ExtractedDocument;
}

/** Base64 in 76-character lines, as MIME writes it. */
function base64Lines(bytes: Uint8Array): string {
  return (
    Buffer.from(bytes)
      .toString("base64")
      .match(/.{1,76}/g) ?? []
  ).join("\r\n");
}

describe("email charsets (real fixtures)", () => {
  it("decodes Shift_JIS, EUC-KR (ks_c_5601-1987) and ISO-2022-JP bodies", async () => {
    const sjis = await only(gem("multi_charset", "japanese_shift_jis.eml"));
    expect(sjis.text).toBe(
      "あいうえお\n\nこのメールはテスト用のメールです。\n\n今後ともよろしくお願い申し上げます！",
    );
    const korean = await only(gem("multi_charset", "ks_c_5601-1987.eml"));
    expect(korean.text).toBe("스티해");
    const jis = await only(gem("rfc2822", "example14.eml"));
    expect(jis.metadata.subject).toBe("Re: TEST  テストテスト");
  });

  it("decodes a base64 EUC-KR body and UTF-8 encoded words inside a quoted subject", async () => {
    const doc = await only(gem("plain_emails", "raw_email_with_partially_quoted_subject.eml"));
    expect(doc.metadata.subject).toBe('Re: Test: "漢字" mid "漢字" tail');
    expect(doc.text).toBe("대부분의 마찬가지로, 우리는 하나님을 믿습니다.\n\n제 이름은 Jamis입니다.");
    expect(doc.uri).toBe(gem("plain_emails", "raw_email_with_partially_quoted_subject.eml"));
  });

  it("decodes ISO-8859-1 quoted-printable bodies and encoded words", async () => {
    const doc = await only(gem("mime_emails", "raw_email_encoded_stack_level_too_deep.eml"));
    expect(doc.metadata.subject).toBe("Nicolas Fouché has accepted your invitation to Gmail");
    expect(doc.metadata.to).toEqual(["Nicolas Fouché <a.b@gmail.com>"]);
    expect(
      doc.text.startsWith("Nicolas Fouché has accepted your invitation to Gmail and has chosen the\n"),
    ).toBe(true);
  });

  it("decodes a Japanese ISO-2022-JP message with encoded-word names (SpamAssassin hard ham)", async () => {
    const doc = await only(spamassassin("hard-ham-1", "00039.b2b936a8501444b213f61f9ff193b480.txt"));
    expect(doc.metadata.subject).toBe("日本語の件名（サブジェクト）　スパムメールではありません！");
    expect(doc.metadata.from).toBe("伊東　仁 <hito@opentext.com>");
    expect(doc.text).toContain("いつもお世話になっております。\n安井@infocomです。");
    expect(doc.text).not.toContain("\uFFFD");
    expect(doc.text).not.toContain("\u001b"); // no undecoded ISO-2022-JP escape
  });

  it("reads raw 8-bit headers in the declared charset, else windows-1252", async () => {
    // Subject and sender name are raw EUC-KR bytes (the body declares ks_c_5601-1987).
    const korean = await only(spamassassin("spam-1", "00035.7ce3307b56dd90453027a6630179282e.txt"));
    expect(korean.metadata.subject).toBe("[광고] 요즘 뜨는 직종 Best 5 & 자격증 따기 열풍");
    expect(korean.metadata.from).toBe("교육팀 <master@ibd.pe.kr>");
    // Raw Latin-1 subject, no charset anywhere.
    const latin = await only(gem("error_emails", "invalid_subject_characters.eml"));
    expect(latin.metadata.subject).toBe(
      "Formação FrenetikPolis: Mega Campanha Final Verão | Cursos de Setembro",
    );
  });

  it("reads an undeclared 8-bit body as windows-1252 rather than U+FFFD", async () => {
    const doc = await only(spamassassin("easy-ham-1", "00114.240461056916c0cdd555ba9d2bc9e63e.txt"));
    expect(doc.text).toContain("Join the world’s largest e-mail service with MSN Hotmail.");
    expect(doc.text).not.toContain("\uFFFD");
  });

  it("decodes Big5 and EUC-KR built in memory (base64 body, RFC 2047 subject and name)", async () => {
    const raw = [
      "From: =?euc-kr?B?vsiz58fPvLy/5A==?= <kim@example.kr>",
      "To: team@example.tw",
      "Subject: =?big5?B?t3zEs7Nxqr4=?=",
      "Date: Mon, 01 Jan 2024 09:00:00 +0800",
      "MIME-Version: 1.0",
      "Content-Type: text/plain; charset=big5",
      "Content-Transfer-Encoding: base64",
      "",
      Buffer.from("a4a4a4e5b4fab8d5a147b66ca5f3a5bfa4e5", "hex").toString("base64"),
      "",
    ].join("\r\n");
    const [doc] = await extractBytes("notice.eml", Buffer.from(raw, "latin1"));
    expect(doc?.metadata.subject).toBe("會議通知");
    expect(doc?.metadata.from).toBe("안녕하세요 <kim@example.kr>");
    expect(doc?.text).toBe("中文測試：郵件正文");
    expect(doc?.metadata.date).toBe("2024-01-01T01:00:00.000Z");
  });
});

describe("email bodies and headers", () => {
  it("gives a header-only mail a document with its header block and a warning", async () => {
    const path = gem("error_emails", "missing_body.eml");
    const doc = await only(path);
    expect(doc.warnings).toEqual(["email has no body text"]);
    expect(doc.text).toBe(
      "From: SCS_2 <redacted@attglobal.net>\nTo: Undisclosed-Recipient:@mailman.enron.com;\nSubject: REDACTED\nDate: 2001-11-27T23:02:35.000Z",
    );
    expect(doc.text).toBe(emailHeaderBlock(doc.metadata));
    expect(doc.metadata.subject).toBe("REDACTED");
    // The EMAIL chunker gives it a chunk (a blank body would give none).
    const chunks = await createChunker(cfg(1500), "email").chunk(doc);
    expect(chunks.length).toBe(1);
    expect(chunks[0]?.text).toContain("Subject: REDACTED");
  });

  it("turns every header-only fixture into a document, subject kept", async () => {
    for (const name of [
      "bad_date_header.eml",
      "bad_date_header2.eml",
      "empty_in_reply_to.eml",
      "must_supply_encoding.eml",
    ]) {
      const doc = await only(gem("error_emails", name));
      expect(doc.warnings, name).toEqual(["email has no body text"]);
      expect(doc.text, name).toContain(`Subject: ${doc.metadata.subject}`);
    }
    const bad = await only(gem("error_emails", "bad_date_header.eml"));
    expect(bad.metadata.subject).toBe("You may_be Eligible for Legitimate_Cash from_GovAgencies!");
    expect(bad.metadata).not.toHaveProperty("date");
    // An empty In-Reply-To header is absent, not "<>".
    const empty = await only(gem("error_emails", "empty_in_reply_to.eml"));
    expect(empty.metadata).not.toHaveProperty("inReplyTo");
    expect(empty.metadata.threadId).toBe("<F194F88AF3E341A6B2B135CC17912811@articondell>");
  });

  it("reads an HTML body that is only a <title> (nodemailer htmllargecallstack)", async () => {
    const doc = await only(mail("nodemailer_mailparser_fixtures", "htmllargecallstack.eml"));
    expect(doc.warnings).toBeUndefined();
    expect(doc.metadata.subject).toBe("Kill the HTML parser");
    expect(doc.text).toContain("||Alerts||");
    expect(doc.text).not.toContain("<title>");
  });

  it("sets threadId from References, else In-Reply-To, else Message-ID", async () => {
    const reply = await only(mail("nodemailer_mailparser_fixtures", "large_text.eml"));
    const references = reply.metadata.references as string[];
    expect(references[0]).toBe("<20090529095654.29876.20294.malonedeb@gangotri.canonical.com>");
    expect(reply.metadata.threadId).toBe(references[0]);
    const plain = await only(gem("rfc2822", "example01.eml"));
    expect(plain.metadata.threadId).toBe("<1234@local.machine.example>");
    const [bounced] = (
      await extractFile(mail("nodemailer_mailparser_fixtures", "delivery-status.eml"))
    ).slice(1);
    expect(bounced?.metadata.inReplyTo).toBe("<xxxxxx@email.amazonses.com>");
    expect(bounced?.metadata.threadId).toBe("<xxxxxx@email.amazonses.com>");
  });

  it("never stores a missing subject as text", async () => {
    const doc = await only(mail("nodemailer_mailparser_fixtures", "mixed.eml"));
    expect(doc.metadata).not.toHaveProperty("subject");
    expect(doc.metadata.title).toBe("(no subject)");
    expect(JSON.stringify(doc.metadata)).not.toMatch(/undefined|null/);
  });

  it("keeps each SpamAssassin file one message (a leading From line is no mbox split)", async () => {
    let files = 0;
    for (const dir of ["easy-ham-1", "hard-ham-1", "spam-1"]) {
      for (const name of readdirSync(spamassassin(dir))) {
        const docs = await extractFile(spamassassin(dir, name));
        const messages = docs.filter((d) => d.metadata.parentUri === undefined);
        expect(
          messages.map((d) => d.uri),
          name,
        ).toEqual([spamassassin(dir, name)]);
        expect(messages[0]?.metadata).not.toHaveProperty("messageIndex");
        files++;
      }
    }
    expect(files).toBe(450);
  }, 60_000);
});

describe("email attachments (real fixtures)", () => {
  it("extracts a text attachment as a child document with parent metadata", async () => {
    const path = mail("nodemailer_mailparser_fixtures", "nodemailer.eml");
    const docs = await extractFile(path);
    const child = docs.find((d) => d.metadata.parentUri !== undefined);
    expect(child?.uri).toBe(`${path}#attachment/4/notes.txt`);
    expect(child?.text).toBe("Some notes about this e-mail");
    expect(child?.metadata).toMatchObject({
      type: "text",
      parentUri: path,
      parentSubject: docs[0]?.metadata.subject,
      attachmentName: "notes.txt",
    });
    // The images are listed, not extracted.
    const listed = docs[0]?.metadata.attachments as { contentType: string }[];
    expect(listed.filter((a) => a.contentType.startsWith("image/")).length).toBeGreaterThan(0);
    expect(docs).toHaveLength(2);
  });

  it("extracts an attached message/rfc822 as a child email; its broken PDF is its warning", async () => {
    const path = gem("attachment_emails", "attachment_message_rfc822.eml");
    const [parent, child, ...rest] = await extractFile(path);
    expect(rest).toEqual([]);
    expect(parent?.metadata.subject).toBe("testing");
    expect(child?.uri).toBe(`${path}#attachment/1/ForwardedMessage.eml`);
    expect(child?.metadata).toMatchObject({
      type: "email",
      subject: "Another PDF",
      parentUri: path,
      parentSubject: "testing",
      attachmentName: "ForwardedMessage.eml",
    });
    expect(child?.text).toContain("Just attaching another PDF, here, to see what the message looks like,");
    expect(child?.warnings).toEqual([expect.stringMatching(/^attachment broken\.pdf: not a valid PDF: /)]);
    expect(parent?.warnings).toBeUndefined();
  });

  it("lists attachments only when attachment extraction is off", async () => {
    const path = mail("nodemailer_mailparser_fixtures", "nodemailer.eml");
    const docs = await extractFile(path, undefined, { email: { attachments: false } });
    expect(docs).toHaveLength(1);
    expect((docs[0]?.metadata.attachments as unknown[] | undefined)?.length).toBeGreaterThan(1);
  });
});

describe("mbox", () => {
  let dir: string;
  let cleanup: () => void;
  let mboxPath: string;
  let mbox: Buffer;

  beforeAll(() => {
    ({ dir, cleanup } = tempDir());
    const pdf = readFileSync(VALID_PDF);
    const brokenPdf = readFileSync(INVALID_PDF);
    const html =
      "<html><body><h1>Agenda</h1><p>Budget review at noon.</p><p>Bring the figures.</p></body></html>";
    const messages = [
      [
        "From alice@example.com  Mon Jan  1 00:00:00 2024",
        "From: Alice <alice@example.com>",
        "To: bob@example.com",
        "Subject: Kickoff",
        "Date: Mon, 01 Jan 2024 00:00:00 +0000",
        "Message-ID: <m1@example.com>",
        "",
        "Hello Bob,",
        ">From the archive: last year's notes.",
        ">>From a quoted quote.",
        "Regards",
        "",
      ],
      [
        "From bob@example.com  Tue Jan  2 10:30:00 2024",
        "From: Bob <bob@example.com>",
        "To: alice@example.com",
        "Subject: Re: Kickoff",
        "Date: Tue, 02 Jan 2024 10:30:00 +0000",
        "Message-ID: <m2@example.com>",
        "In-Reply-To: <m1@example.com>",
        "MIME-Version: 1.0",
        'Content-Type: multipart/mixed; boundary="b2"',
        "",
        "--b2",
        "Content-Type: text/plain; charset=utf-8",
        "",
        "The report is attached.",
        "--b2",
        'Content-Type: application/pdf; name="report.pdf"',
        'Content-Disposition: attachment; filename="report.pdf"',
        "Content-Transfer-Encoding: base64",
        "",
        base64Lines(pdf),
        "--b2--",
        "",
      ],
      [
        "From carol@example.com  Wed Jan  3 08:15:00 2024",
        "From: Carol <carol@example.com>",
        "To: alice@example.com, bob@example.com",
        "Cc: dave@example.com",
        "Subject: Re: Kickoff",
        "Date: Wed, 03 Jan 2024 08:15:00 +0000",
        "Message-ID: <m3@example.com>",
        "In-Reply-To: <m2@example.com>",
        "References: <m1@example.com> <m2@example.com>",
        "MIME-Version: 1.0",
        'Content-Type: multipart/mixed; boundary="b3"',
        "",
        "--b3",
        "Content-Type: text/plain; charset=utf-8",
        "",
        "Agenda and the old report attached.",
        "--b3",
        'Content-Type: text/html; charset=utf-8; name="agenda.html"',
        'Content-Disposition: attachment; filename="agenda.html"',
        "Content-Transfer-Encoding: base64",
        "",
        base64Lines(Buffer.from(html)),
        "--b3",
        'Content-Type: application/pdf; name="old report.pdf"',
        'Content-Disposition: attachment; filename="old report.pdf"',
        "Content-Transfer-Encoding: base64",
        "",
        base64Lines(brokenPdf),
        "--b3",
        'Content-Type: image/png; name="logo.png"',
        'Content-Disposition: inline; filename="logo.png"',
        "Content-Transfer-Encoding: base64",
        "",
        base64Lines(Buffer.from("\x89PNG\r\n\x1a\n not really an image", "latin1")),
        "--b3--",
        "",
      ],
    ];
    mbox = Buffer.from(messages.map((m) => m.join("\n")).join("\n"), "latin1");
    mboxPath = join(dir, "archive.mbox");
    writeFileSync(mboxPath, mbox);
  });

  afterAll(() => cleanup());

  it("gives one document per message, then each message's attachment documents", async () => {
    const docs = await extractFile(mboxPath);
    expect(docs.map((d) => d.uri)).toEqual([
      `${mboxPath}#message/1`,
      `${mboxPath}#message/2`,
      `${mboxPath}#message/2#attachment/1/report.pdf`,
      `${mboxPath}#message/3`,
      `${mboxPath}#message/3#attachment/1/agenda.html`,
    ]);
    const [m1, m2, pdf, m3, html] = docs as ExtractedDocument[];
    expect(m1?.metadata).toMatchObject({
      path: mboxPath,
      type: "email",
      messageIndex: 1,
      subject: "Kickoff",
    });
    expect(m2?.metadata.messageIndex).toBe(2);
    expect(m3?.metadata.messageIndex).toBe(3);
    expect(m3?.metadata.to).toEqual(["alice@example.com", "bob@example.com"]);
    expect(m3?.metadata.cc).toEqual(["dave@example.com"]);
    expect(m2?.text).toBe("The report is attached.");
    expect(m2?.metadata.attachments).toEqual([
      { filename: "report.pdf", contentType: "application/pdf", size: readFileSync(VALID_PDF).length },
    ]);

    expect(pdf?.metadata).toMatchObject({
      type: "pdf",
      path: `${mboxPath}#message/2#attachment/1/report.pdf`,
      parentUri: `${mboxPath}#message/2`,
      parentSubject: "Re: Kickoff",
      attachmentName: "report.pdf",
    });
    expect(pdf?.text.length).toBeGreaterThan(100);

    expect(html?.metadata).toMatchObject({
      type: "html",
      parentUri: `${mboxPath}#message/3`,
      parentSubject: "Re: Kickoff",
      attachmentName: "agenda.html",
    });
    expect(html?.text).toBe("# Agenda\n\nBudget review at noon.\n\nBring the figures.");
  });

  it("undoes mboxrd >From quoting in bodies", async () => {
    const [m1] = await extractFile(mboxPath);
    expect(m1?.text).toBe("Hello Bob,\nFrom the archive: last year's notes.\n>From a quoted quote.\nRegards");
  });

  it("reports an attachment that fails to parse as a warning; images are only listed", async () => {
    const m3 = (await extractFile(mboxPath))[3];
    expect(m3?.warnings).toEqual([expect.stringMatching(/^attachment old report\.pdf: not a valid PDF: /)]);
    const listed = ((m3?.metadata.attachments ?? []) as { filename?: string; contentType: string }[]).map(
      (a) => `${a.filename} ${a.contentType}`,
    );
    expect(listed).toEqual(["agenda.html text/html", "old report.pdf application/pdf", "logo.png image/png"]);
  });

  it("threads the messages: first References entry, else In-Reply-To, else Message-ID", async () => {
    const docs = await extractFile(mboxPath);
    const messages = docs.filter((d) => d.metadata.type === "email");
    expect(messages.map((d) => d.metadata.threadId)).toEqual([
      "<m1@example.com>",
      "<m1@example.com>",
      "<m1@example.com>",
    ]);
    expect(messages[2]?.metadata.references).toEqual(["<m1@example.com>", "<m2@example.com>"]);
    expect(messages[2]?.metadata.inReplyTo).toBe("<m2@example.com>");
  });

  it("splits the same content in memory and in a mail file named other than .mbox", async () => {
    const inMemory = await extractBytes("inbox.mbox", mbox);
    expect(inMemory.map((d) => d.uri).slice(0, 2)).toEqual(["inbox.mbox#message/1", "inbox.mbox#message/2"]);
    const emlPath = join(dir, "several.eml");
    writeFileSync(emlPath, mbox);
    const docs = await extractFile(emlPath);
    expect(docs.filter((d) => d.metadata.type === "email").map((d) => d.uri)).toEqual([
      `${emlPath}#message/1`,
      `${emlPath}#message/2`,
      `${emlPath}#message/3`,
    ]);
  });

  it("does not split at a From line inside a body (no blank line before it)", async () => {
    const raw = [
      "From alice@example.com  Mon Jan  1 00:00:00 2024",
      "From: Alice <alice@example.com>",
      "Subject: Forwarded",
      "",
      "See below:",
      "From bob@example.com  Mon Jan  1 00:00:00 2024",
      "Subject: inner",
      "",
    ].join("\n");
    const docs = await extractBytes("one.eml", Buffer.from(raw));
    expect(docs.map((d) => d.uri)).toEqual(["one.eml"]);
    expect(docs[0]?.text).toContain("From bob@example.com");
  });

  it("enforces limits.maxMessages with an error naming the file and the limit", async () => {
    const err = await extractionError(() => extractFile(mboxPath, undefined, { limits: { maxMessages: 2 } }));
    expect(err.path).toBe(mboxPath);
    expect(err.reason).toBe("mbox holds more than 2 messages (limit maxMessages = 2)");
    expect(await extractFile(mboxPath, undefined, { limits: { maxMessages: 3 } })).toHaveLength(5);
  });
});

describe("email bad input", () => {
  it("refuses empty content and content without mail headers, naming the file", async () => {
    const empty = await extractionError(() => extractBytes("empty.eml", Buffer.from(" \r\n\r\n")));
    expect(empty.message).toBe("empty.eml: file is empty");
    const prose = await extractionError(() =>
      extractBytes("note.eml", Buffer.from("hello world\njust text\n")),
    );
    expect(prose.path).toBe("note.eml");
    expect(prose.reason).toMatch(/^not an email message/);
  });

  it("refuses a file over limits.maxFileBytes", async () => {
    const path = gem("rfc2822", "example01.eml");
    const err = await extractionError(() => extractFile(path, undefined, { limits: { maxFileBytes: 100 } }));
    expect(err.path).toBe(path);
    expect(err.reason).toMatch(/^file too large: .* \(limit maxFileBytes = 100 B\)$/);
  });

  it("skips a bad message of an mbox with a warning on the first document", async () => {
    const raw = [
      "From a@example.com  Mon Jan  1 00:00:00 2024",
      "Subject: good",
      "",
      "fine",
      "",
      "From b@example.com  Mon Jan  1 00:00:01 2024",
      "X-Only: header",
      "",
    ].join("\n");
    const docs = await extractBytes("two.mbox", Buffer.from(raw));
    expect(docs.map((d) => d.uri)).toEqual(["two.mbox#message/1"]);
    expect(docs[0]?.warnings).toEqual([
      "message 2 skipped: email has no body text and no From, To, Cc, Subject or Date header",
    ]);
  });
});

describe("EMAIL chunking of a header-only message", () => {
  it("indexes the header block once, without repeating it as a prefix", async () => {
    const file = docsPath("email", "ruby_mail_gem_fixtures", "emails", "error_emails", "missing_body.eml");
    const [doc] = await extractFile(file);
    if (!doc) throw new Error("no document");
    expect(doc.warnings).toEqual(["email has no body text"]);
    const chunks = await createChunker({
      strategy: "email",
      chunkSize: 1500,
      chunkOverlap: 0,
      minChunkSize: 0,
    }).chunk(doc);
    expect(chunks).toHaveLength(1);
    expect(chunks[0]?.contextPrefix).toBeUndefined();
    expect(chunks[0]?.text).toBe(doc.text.trim());
    expect(doc.text).toMatch(/^From: /);
  });
});

describe("attachments nested deeper than three levels", () => {
  it("are listed with a warning, not dropped silently", async () => {
    const leaf = [
      "From: d@example.com",
      "Subject: level 4",
      "Content-Type: text/plain",
      "",
      "deepest text",
    ].join("\r\n");
    let message = leaf;
    for (let level = 3; level >= 0; level--) {
      message = [
        `From: l${level}@example.com`,
        `Subject: level ${level}`,
        "MIME-Version: 1.0",
        `Content-Type: multipart/mixed; boundary="b${level}"`,
        "",
        `--b${level}`,
        "Content-Type: text/plain",
        "",
        `body of level ${level}`,
        `--b${level}`,
        "Content-Type: message/rfc822",
        `Content-Disposition: attachment; filename="level${level + 1}.eml"`,
        "",
        message,
        `--b${level}--`,
        "",
      ].join("\r\n");
    }
    const docs = await extractBytes("outer.eml", Buffer.from(message));
    const subjects = docs.map((d) => d.metadata.subject);
    expect(subjects).toEqual(["level 0", "level 1", "level 2", "level 3"]);
    const deepest = docs.find((d) => d.metadata.subject === "level 3");
    expect(deepest?.warnings).toEqual(["1 attachment nested too deep to extract (listed only)"]);
  });
});
