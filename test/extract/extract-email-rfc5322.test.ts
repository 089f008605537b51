/**
 * Issue 13, items 9–11, on inputs written here: RFC 5322 dates (zones, no zone,
 * obsolete forms) read the same on every host, extraction output identical under
 * different TZ/LANG values (child processes), Outlook-style and localised reply
 * blocks as quoted history, RFC 5322 §3.6.4 message ids, and JWZ threading in an mbox.
 */
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createChunker, quotedSpans } from "../../src/chunk/index.js";
import { extractBytes } from "../../src/extract/index.js";
import { parseMessageIds, parseRfc5322Date, threadIds } from "../../src/extract/rfc5322.js";
import type { Chunk } from "../../src/types.js";
import { cfg, doc } from "../helpers/chunk-helpers.js";
import { docsPath, tempDir } from "../helpers/helpers.js";

const ROOT = resolve(import.meta.dirname, "..", "..");
const tmp = tempDir();
afterAll(() => tmp.cleanup());

/** A message as CRLF text from header lines and a body. */
function message(headers: string[], body: string): string {
  return `${[...headers, "", body].join("\r\n")}\r\n`;
}

describe("RFC 5322 §3.3 dates", () => {
  it("reads numeric zones, with and without seconds, day names and comments", () => {
    expect(parseRfc5322Date("Tue, 02 Jul 2024 09:00:00 +0000")).toEqual({
      iso: "2024-07-02T09:00:00.000Z",
      time: Date.UTC(2024, 6, 2, 9),
      offset: 0,
    });
    expect(parseRfc5322Date("2 Jul 2024 09:00 +0530")?.iso).toBe("2024-07-02T03:30:00.000Z");
    expect(parseRfc5322Date("Tue, 2 Jul 2024 09:00:00 -0700 (PDT)")).toMatchObject({
      iso: "2024-07-02T16:00:00.000Z",
      offset: -420,
    });
    // CFWS anywhere (RFC 5322 §4.3), folded over lines.
    expect(parseRfc5322Date("Tue (day),\r\n 2 (x (nested)) Jul 2024\r\n 09:00:00\r\n +0200")?.iso).toBe(
      "2024-07-02T07:00:00.000Z",
    );
  });

  it("reads the obsolete zones of §4.3 and the common abbreviations of the table", () => {
    const iso = (zone: string) => parseRfc5322Date(`Mon, 1 Jan 2024 12:00:00 ${zone}`)?.iso;
    expect(iso("UT")).toBe("2024-01-01T12:00:00.000Z");
    expect(iso("GMT")).toBe("2024-01-01T12:00:00.000Z");
    expect(iso("EST")).toBe("2024-01-01T17:00:00.000Z");
    expect(iso("EDT")).toBe("2024-01-01T16:00:00.000Z");
    expect(iso("CST")).toBe("2024-01-01T18:00:00.000Z");
    expect(iso("CDT")).toBe("2024-01-01T17:00:00.000Z");
    expect(iso("MST")).toBe("2024-01-01T19:00:00.000Z");
    expect(iso("MDT")).toBe("2024-01-01T18:00:00.000Z");
    expect(iso("PST")).toBe("2024-01-01T20:00:00.000Z");
    expect(iso("PDT")).toBe("2024-01-01T19:00:00.000Z");
    expect(iso("CET")).toBe("2024-01-01T11:00:00.000Z");
    expect(iso("CEST")).toBe("2024-01-01T10:00:00.000Z");
    expect(iso("BST")).toBe("2024-01-01T11:00:00.000Z");
    expect(iso("JST")).toBe("2024-01-01T03:00:00.000Z");
    expect(iso("AEDT")).toBe("2024-01-01T01:00:00.000Z");
    expect(iso("cest")).toBe("2024-01-01T10:00:00.000Z");
    // A zone only in a comment is used when the value has none.
    expect(parseRfc5322Date("Tue, 2 Jul 2024 09:00:00 (CEST)")).toMatchObject({
      iso: "2024-07-02T07:00:00.000Z",
      offset: 120,
    });
  });

  it("reads a date without a zone, with -0000, a military letter or an ambiguous zone as UTC", () => {
    const utc = { iso: "2024-07-02T09:00:00.000Z", time: Date.UTC(2024, 6, 2, 9) };
    expect(parseRfc5322Date("Tue, 2 Jul 2024 09:00:00")).toEqual(utc);
    expect(parseRfc5322Date("Tue, 2 Jul 2024 09:00:00 -0000")).toEqual(utc);
    expect(parseRfc5322Date("Tue, 2 Jul 2024 09:00:00 A")).toEqual(utc);
    expect(parseRfc5322Date("Tue, 2 Jul 2024 09:00:00 IST")).toEqual(utc);
    expect(parseRfc5322Date("Tue, 2 Jul 2024 09:00:00 AST")).toEqual(utc);
    // An offset out of range is no zone information either.
    expect(parseRfc5322Date("Tue, 2 Jul 2024 09:00:00 +2500")).toEqual(utc);
    // Z is UTC whatever the sign confusion of the other military letters.
    expect(parseRfc5322Date("Tue, 2 Jul 2024 09:00:00 Z")).toEqual({ ...utc, offset: 0 });
  });

  it("reads obsolete years and lenient real-world forms", () => {
    expect(parseRfc5322Date("1 Jan 99 00:00 GMT")?.iso).toBe("1999-01-01T00:00:00.000Z");
    expect(parseRfc5322Date("1 Jan 49 00:00 GMT")?.iso).toBe("2049-01-01T00:00:00.000Z");
    expect(parseRfc5322Date("1 Jan 102 00:00 GMT")?.iso).toBe("2002-01-01T00:00:00.000Z");
    // The Y2K bug of 2002 mailers (SpamAssassin corpus): "0102" is 2002.
    expect(parseRfc5322Date("Tue, 27 Aug 0102 23:35:10 +0700")?.iso).toBe("2002-08-27T16:35:10.000Z");
    expect(parseRfc5322Date("Tue Jul  2 09:00:00 CEST 2024")?.iso).toBe("2024-07-02T07:00:00.000Z");
    expect(parseRfc5322Date("Tue Jul  2 09:00:00 2024")?.iso).toBe("2024-07-02T09:00:00.000Z");
    expect(parseRfc5322Date("July 2, 2024 9:00 PM EDT")?.iso).toBe("2024-07-03T01:00:00.000Z");
    expect(parseRfc5322Date("Tue, 2 Jul 2024 09:00:00 GMT+02:00")?.iso).toBe("2024-07-02T07:00:00.000Z");
    expect(parseRfc5322Date("2024-07-02T09:00:00+02:00")?.iso).toBe("2024-07-02T07:00:00.000Z");
    expect(parseRfc5322Date("2024-07-02 09:00:00")?.iso).toBe("2024-07-02T09:00:00.000Z");
    expect(parseRfc5322Date("Sat, 31 Dec 2016 23:59:60 +0000")?.iso).toBe("2016-12-31T23:59:59.000Z");
    // A garbled zone carries no zone information.
    expect(parseRfc5322Date("Sun, 25 Aug 2002 19:21:44 01800")?.iso).toBe("2002-08-25T19:21:44.000Z");
  });

  it("rejects values that are not dates", () => {
    for (const bad of [
      "",
      "Not supplied",
      "<HR>",
      "31 Feb 2024 10:00 +0000",
      "Wed, 15 Dec 2010    59:10 -0500",
      "Mon, 1 Jan 2024",
      "Pn, 29 paX 2007 21:13:00 +0100",
    ]) {
      expect(parseRfc5322Date(bad), bad).toBeUndefined();
    }
  });

  it("gives email metadata.date from the parser: CEST kept, no zone as UTC, nonsense left out", async () => {
    const date = async (value: string) => {
      const raw = message(["From: a@example.com", `Date: ${value}`, "Subject: d"], "Body.");
      const [d] = await extractBytes("d.eml", Buffer.from(raw));
      return d?.metadata.date;
    };
    expect(await date("Tue, 2 Jul 2024 09:00:00 CEST")).toBe("2024-07-02T07:00:00.000Z");
    expect(await date("Tue, 2 Jul 2024 09:00:00")).toBe("2024-07-02T09:00:00.000Z");
    expect(await date("Tue, 2 Jul 2024 09:00:00 +0200 (CEST)")).toBe("2024-07-02T07:00:00.000Z");
    expect(await date("someday")).toBeUndefined();
  });
});

describe("extraction does not depend on the host's time zone or locale", () => {
  it("gives identical documents and chunks under TZ/LANG of New York, Tokyo, Kathmandu and UTC", () => {
    const mbox = [
      "From alice@example.com  Tue Jul  2 09:00:00 2024",
      message(
        [
          "From: Alice <alice@example.com>",
          "Date: Tue, 2 Jul 2024 09:00:00",
          "Message-ID: <z1@example.com>",
          "Subject: No zone",
        ],
        "Written without a zone.",
      ),
      "From bob@example.com  Tue Jul  2 10:00:00 2024",
      message(
        [
          "From: Bob <bob@example.com>",
          "Date: Tue, 2 Jul 2024 10:00:00 CEST",
          "Message-ID: <z2@example.com>",
          "In-Reply-To: <z1@example.com> (Alice's message of Tue, 2 Jul 2024)",
          "Subject: Re: No zone",
        ],
        "A zone name.",
      ),
    ].join("\r\n");
    const mboxPath = join(tmp.dir, "tz.mbox");
    writeFileSync(mboxPath, mbox);
    const mdPath = join(tmp.dir, "tz.md");
    writeFileSync(
      mdPath,
      '+++\ntitle = "Local"\ndate = 2024-07-02T09:00:00\n+++\n\n# Local\n\nA TOML local date-time.\n',
    );
    const slack = docsPath("slack", "slack_export_viewer_testarchive", "testarchive.zip");
    const script = join(tmp.dir, "dump.mts");
    writeFileSync(
      script,
      [
        `import { extractFile } from ${JSON.stringify(join(ROOT, "src/extract/index.ts"))};`,
        `import { createChunker } from ${JSON.stringify(join(ROOT, "src/chunk/index.ts"))};`,
        "const out = [];",
        "for (const path of process.argv.slice(2)) {",
        "  for (const d of await extractFile(path)) {",
        '    const strategy = d.metadata.type === "email" ? "email" : "fixed";',
        "    const chunks = await createChunker({ strategy, chunkSize: 400, chunkOverlap: 0 }, strategy).chunk(d);",
        "    out.push({ uri: d.uri, text: d.text, metadata: d.metadata, chunks: chunks.map((c) => c.text) });",
        "  }",
        "}",
        "process.stdout.write(JSON.stringify(out));",
      ].join("\n"),
    );
    const run = (TZ: string, LANG: string): string => {
      const r = spawnSync(
        process.execPath,
        ["--import", join(ROOT, "node_modules/tsx/dist/loader.mjs"), script, mboxPath, mdPath, slack],
        {
          env: { ...process.env, TZ, LANG, LC_ALL: LANG },
          encoding: "utf8",
          timeout: 120_000,
          maxBuffer: 1 << 28,
        },
      );
      expect(r.stderr).toBe("");
      expect(r.status).toBe(0);
      return r.stdout;
    };
    const utc = run("UTC", "C.UTF-8");
    const docs = JSON.parse(utc) as { uri: string; metadata: Record<string, unknown>; chunks: string[] }[];
    expect(docs.find((d) => d.uri === `${mboxPath}#message/1`)?.metadata.date).toBe(
      "2024-07-02T09:00:00.000Z",
    );
    expect(docs.find((d) => d.uri === `${mboxPath}#message/1`)?.chunks[0]).toContain(
      "Date: 2024-07-02T09:00:00.000Z",
    );
    expect(docs.find((d) => d.uri === `${mboxPath}#message/2`)?.metadata).toMatchObject({
      date: "2024-07-02T08:00:00.000Z",
      threadId: "<z1@example.com>",
    });
    expect(docs.find((d) => d.uri === mdPath)?.metadata.date).toBe("2024-07-02T09:00:00.000Z");
    expect(docs.some((d) => d.metadata.type === "slack")).toBe(true);
    for (const [TZ, LANG] of [
      ["America/New_York", "en_US.UTF-8"],
      ["Asia/Tokyo", "ja_JP.UTF-8"],
      ["Asia/Kathmandu", "de_DE.UTF-8"],
    ] as const) {
      expect(run(TZ, LANG), TZ).toBe(utc);
    }
  });
});

describe("quoted history: Outlook-style and localised reply blocks", () => {
  const own = "Thanks, that works for me. I will send the figures tomorrow.";
  const blocks: Record<string, string> = {
    english:
      "From: Alice Smith <alice@example.com>\nSent: Monday, July 1, 2024 9:00 AM\nTo: Bob <bob@example.com>\nSubject: Plan",
    german:
      "Von: Alice Smith <alice@example.com>\nGesendet: Montag, 1. Juli 2024 09:00\nAn: Bob\nCc: Carol\nBetreff: Plan",
    danish: "Fra: Alice Smith\nSendt: 1. juli 2024 09:00\nTil: Bob\nEmne: Plan",
    french: "De : Alice Smith\nEnvoyé : lundi 1 juillet 2024 09:00\nÀ : Bob\nObjet : Plan",
    italian: "Da: Alice Smith\nInviato: lunedì 1 luglio 2024 09:00\nA: Bob\nOggetto: Plan",
    spanish: "De: Alice Smith\nEnviado el: lunes, 1 de julio de 2024 9:00\nPara: Bob\nAsunto: Plan",
    dutch: "Van: Alice Smith\nVerzonden: maandag 1 juli 2024 09:00\nAan: Bob\nOnderwerp: Plan",
    japanese: "差出人: Alice Smith\n送信日時: 2024年7月1日 9:00\n宛先: Bob\n件名: Plan",
    oneLine: "From: Alice Smith Sent: Monday, July 1, 2024 9:00 AM To: Bob Subject: Plan",
  };
  const old = "Can you send the figures?\n\nAlice";

  for (const [name, block] of Object.entries(blocks)) {
    it(`recognises the ${name} block and everything after it as quoted`, () => {
      const text = `${own}\n\n${block}\n\n${old}`;
      const spans = quotedSpans(text);
      expect(spans.map((s) => text.slice(s.start, s.end))).toEqual([`${block}\n\n${old}`]);
    });
  }

  it("includes Outlook's rule line and the localised Original Message separators", () => {
    const text = `${own}\n\n________________________________\n${blocks.english}\n\n${old}`;
    expect(quotedSpans(text).map((s) => text.slice(s.start, s.end))).toEqual([
      `________________________________\n${blocks.english}\n\n${old}`,
    ]);
    for (const sep of [
      "-----Original Message-----",
      "-----Ursprüngliche Nachricht-----",
      "-----Message d'origine-----",
      "-----Messaggio originale-----",
      "---------- Forwarded message ---------",
      "Begin forwarded message:",
    ]) {
      const t = `${own}\n\n${sep}\nSome old text.`;
      expect(
        quotedSpans(t).map((s) => t.slice(s.start, s.end)),
        sep,
      ).toEqual([`${sep}\nSome old text.`]);
    }
  });

  it("recognises localised attribution lines", () => {
    for (const line of [
      "Am Mo., 1. Juli 2024 um 09:00 Uhr schrieb Alice <alice@example.com>:",
      "Le lun. 1 juil. 2024 à 09:00, Alice <alice@example.com> a écrit :",
      "Op ma 1 jul. 2024 om 09:00 schreef Alice <alice@example.com>:",
      "Den mån 1 juli 2024 kl 09:00 skrev Alice <alice@example.com>:",
      "1 июля 2024 г., в 9:00, Alice <alice@example.com> написал(а):",
    ]) {
      const t = `${own}\n\n${line}\n> Can you send the figures?`;
      expect(
        quotedSpans(t).map((s) => t.slice(s.start, s.end)),
        line,
      ).toEqual([line, "> Can you send the figures?"]);
    }
  });

  it("does not take a From: line in prose, or a From/To pair, for a reply block", () => {
    for (const text of [
      "The notice read:\nFrom: the board\nand nothing more was said.",
      "Memo\nFrom: Alice\nTo: Bob\n\nPlease review the plan.",
      "Von: meiner Seite gibt es nichts mehr.\nDanke.",
      "I wrote to bob@example.com about this:\nthe plan is fine.",
    ]) {
      expect(quotedSpans(text), text).toEqual([]);
    }
  });

  it("does not take a form template (From/To/Subject without a date or an address) for a reply block", async () => {
    const templates = [
      "Please fill the label like this:\nFrom: your name\nTo: the recipient\nSubject: what is inside\n\nThat is all.",
      "Parcel slip, write it as:\nVon: Ihr Name\nAn: der Empfänger\nBetreff: der Inhalt\n\nDanke schön.",
      "Form layout\nFrom: sender's department\nTo: receiving department\nCc: archive\nSubject: short summary\nDate: (leave empty)\n\nFile it by Friday.",
    ];
    for (const text of templates) expect(quotedSpans(text), text).toEqual([]);
    // With quotedReplies "drop" the sender's own text, after the template, is all kept.
    const body = `${templates[0]}\n\n${"Ask me if anything is unclear about the parcel labels. ".repeat(3)}`;
    const d = doc(body, "email", { from: "Kim <kim@example.com>", subject: "Labels" });
    for (const size of [120, 1000]) {
      const chunks = await createChunker({ ...cfg(size), email: { quotedReplies: "drop" } }, "email").chunk(
        d,
      );
      const kept = chunks.map((c) => d.text.slice(c.start, c.end)).join("\n");
      for (const part of ["From: your name", "Subject: what is inside", "That is all.", "parcel labels"])
        expect(kept, `${size}: ${part}`).toContain(part);
      for (const c of chunks) expect(c.metadata.hasQuoted).toBe(false);
    }
    // A real block still counts: a Sent/Date line with a date, or an address in the From line.
    for (const block of [
      "From: your name\nSent: 3 March 2025 10:12\nTo: the recipient\nSubject: what is inside",
      "From: Kim <kim@example.com>\nTo: the recipient\nSubject: what is inside",
      "From: kim@example.com\nTo: Lee\nSubject: Labels",
    ]) {
      const text = `My answer first.\n\n${block}\n\nOld text.`;
      expect(
        quotedSpans(text).map((s) => text.slice(s.start, s.end)),
        block,
      ).toEqual([`${block}\n\nOld text.`]);
    }
  });

  it("keeps the old message out of the new message's first chunk", async () => {
    const body = [
      ...Array.from({ length: 4 }, (_, i) => `Paragraph ${i} of my answer explains what we decided today.`),
      "",
      blocks.german,
      "",
      ...Array.from({ length: 4 }, (_, i) => `Old paragraph ${i} of the earlier message with its question.`),
    ].join("\n\n");
    const d = doc(body, "email", { from: "Bob <bob@example.com>", subject: "AW: Plan" });
    const chunks = await createChunker(cfg(300), "email").chunk(d);
    const span = (c: Chunk): string => d.text.slice(c.start, c.end);
    expect(chunks[0]?.contextPrefix).toContain("From: Bob <bob@example.com>");
    expect(span(chunks[0] as Chunk)).not.toContain("Von:");
    expect(span(chunks[0] as Chunk)).toContain("Paragraph 0");
    const quoted = chunks.filter((c) => c.metadata.quoted === true);
    expect(span(quoted[0] as Chunk).startsWith("Von: Alice Smith")).toBe(true);
    expect(quoted.map(span).join("\n")).toContain("Old paragraph 3");
    for (const c of chunks.filter((c) => c.metadata.quoted === false))
      expect(span(c)).not.toContain("Old paragraph");
    const dropped = await createChunker({ ...cfg(300), email: { quotedReplies: "drop" } }, "email").chunk(d);
    expect(dropped.some((c) => c.text.includes("Old paragraph") || c.text.includes("Betreff"))).toBe(false);
  });
});

describe("RFC 5322 §3.6.4 message ids", () => {
  it("takes msg-ids only: comments (nested), quoted strings and phrases ignored", () => {
    expect(parseMessageIds("<a1@example.com> (Alice's message of Mon, 1 Jul 2024 (nested) 09:00)")).toEqual([
      "<a1@example.com>",
    ]);
    expect(parseMessageIds('Your message of "Mon, 1 Jul 2024 <x@y>" <a1@example.com>')).toEqual([
      "<a1@example.com>",
    ]);
    expect(parseMessageIds("<a1@example.com>\r\n <a2@example.com> <a1@example.com>")).toEqual([
      "<a1@example.com>",
      "<a2@example.com>",
    ]);
    expect(parseMessageIds("<a1@\r\n example.com> <> <no-at-sign> junk")).toEqual(["<a1@example.com>"]);
    expect(parseMessageIds("alice@example.com")).toEqual([]);
    expect(parseMessageIds("bare-id@example.com", { bare: true })).toEqual(["<bare-id@example.com>"]);
    expect(parseMessageIds("(only a comment)", { bare: true })).toEqual([]);
  });

  it("gives clean inReplyTo, references and threadId in extracted metadata", async () => {
    const raw = message(
      [
        "From: bob@example.com",
        "Subject: Re: Plan",
        "Message-ID: <r2@example.com> (generated)",
        'In-Reply-To: Your message of "Mon, 1 Jul 2024 09:00:00 +0200"',
        " <r1@example.com>",
        "References: <r0@example.com> (root) <r1@example.com>",
        "References: <r1@example.com> <extra@example.com>",
      ],
      "Reply.",
    );
    const [d] = await extractBytes("r.eml", Buffer.from(raw));
    expect(d?.metadata).toMatchObject({
      messageId: "<r2@example.com>",
      inReplyTo: "<r1@example.com>",
      references: ["<r0@example.com>", "<r1@example.com>", "<extra@example.com>"],
      threadId: "<r0@example.com>",
    });
  });
});

describe("JWZ threading", () => {
  it("follows parent chains: a reply with only In-Reply-To joins its parent's thread", () => {
    expect(
      threadIds([
        { messageId: "<1@x>", references: ["<0@x>"] },
        { messageId: "<2@x>", inReplyTo: ["<1@x>"] },
        { messageId: "<3@x>", inReplyTo: ["<2@x>"] },
        { messageId: "<4@x>" },
        { messageId: "<5@x>", references: ["<4@x>"], inReplyTo: ["<4@x>"] },
        { inReplyTo: ["<3@x>"] },
        {},
      ]),
    ).toEqual(["<0@x>", "<0@x>", "<0@x>", "<4@x>", "<4@x>", "<0@x>", undefined]);
  });

  it("does not loop on references that form a cycle", () => {
    expect(
      threadIds([
        { messageId: "<a@x>", inReplyTo: ["<b@x>"] },
        { messageId: "<b@x>", inReplyTo: ["<a@x>"] },
      ]),
    ).toEqual(["<b@x>", "<b@x>"]);
  });

  it("threads an mbox: replies by In-Reply-To only, with junk after the id, join the root", async () => {
    const mbox = [
      "From a@example.com  Mon Jul  1 09:00:00 2024",
      message(
        [
          "From: a@example.com",
          "Subject: Plan",
          "Date: Mon, 1 Jul 2024 09:00:00 +0000",
          "Message-ID: <p2@example.com>",
          "References: <p1@example.com>",
        ],
        "Second in a thread whose root is not here.",
      ),
      "From b@example.com  Mon Jul  1 10:00:00 2024",
      message(
        [
          "From: b@example.com",
          "Subject: Re: Plan",
          "Message-ID: <p3@example.com>",
          "In-Reply-To: <p2@example.com> (a@example.com's message of Mon, 1 Jul 2024 09:00:00 +0000)",
        ],
        "Reply naming only its parent.",
      ),
      "From c@example.com  Mon Jul  1 11:00:00 2024",
      message(
        [
          "From: c@example.com",
          "Subject: Re: Plan",
          "Message-ID: <p4@example.com>",
          "In-Reply-To: <p3@example.com>",
        ],
        "Reply to the reply.",
      ),
      "From d@example.com  Mon Jul  1 12:00:00 2024",
      message(["From: d@example.com", "Subject: Other", "Message-ID: <q1@example.com>"], "A new thread."),
    ].join("\r\n");
    const docs = await extractBytes("thread.mbox", Buffer.from(mbox));
    expect(docs.map((d) => d.metadata.threadId)).toEqual([
      "<p1@example.com>",
      "<p1@example.com>",
      "<p1@example.com>",
      "<q1@example.com>",
    ]);
    expect(docs[1]?.metadata.inReplyTo).toBe("<p2@example.com>");
  });
});
