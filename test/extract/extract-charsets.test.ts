/**
 * Charset handling of the text, Markdown, code, HTML and email extractors for
 * files in legacy encodings without (or with a wrong) declared charset: the
 * detection in `decodeText` (BOM, UTF-8, mostly UTF-8, chardet with the rules for
 * short and Latin-script texts, windows-1252 as the WHATWG reading of Latin-1).
 *
 * The legacy bytes are literals: windows-1252/Latin-1 as `\xNN` escapes read with
 * `Buffer.from(…, "latin1")`, the CJK, Cyrillic and Thai samples as hex (made once
 * with Python's codecs; nothing here needs Python to run).
 */
import { describe, expect, it } from "vitest";
import { extractBytes, extractFile } from "../../src/extract/index.js";
import { decodeText, detectCharset } from "../../src/extract/util.js";
import type { ExtractedDocument } from "../../src/types.js";
import { docsPath } from "../helpers/helpers.js";

/** Bytes of a string whose characters are all ≤ U+00FF (one byte each). */
const latin1 = (s: string): Buffer => Buffer.from(s, "latin1");
const hex = (h: string): Buffer => Buffer.from(h, "hex");

/** The text of the single document extracted from in-memory `bytes` named `name`. */
async function textOf(name: string, bytes: Uint8Array): Promise<string> {
  const docs = await extractBytes(name, bytes);
  expect(docs).toHaveLength(1);
  return (docs[0] as ExtractedDocument).text;
}

/** `said “hi” — €5 … naïve` in windows-1252 (0x93/0x94 quotes, 0x97 dash, 0x80 euro, 0x85 ellipsis). */
const CP1252_SAMPLE = latin1("said \x93hi\x94 \x97 \x805 \x85 na\xefve");
const CP1252_TEXT = "said “hi” — €5 … naïve";

/** A few sentences per legacy charset: the expected text and its bytes. */
const SAMPLES = {
  shiftJis: {
    text: "これは日本語のテキストです。東京は日本の首都で、とても大きな都市です。毎朝、駅の近くの喫茶店でコーヒーを飲みます。",
    bytes: hex(
      "82b182ea82cd93fa967b8cea82cc8365834c8358836782c582b78142938c8b9e82cd93fa967b82cc8ef1937382c5814182c682c4" +
        "82e091e582ab82c893738e7382c582b78142968892a98141897782cc8bdf82ad82cc8b699283935882c58352815b8371815b82f0" +
        "88f982dd82dc82b78142",
    ),
  },
  eucJp: {
    text: "これは日本語のテキストです。東京は日本の首都で、とても大きな都市です。毎朝、駅の近くの喫茶店でコーヒーを飲みます。",
    bytes: hex(
      "a4b3a4eca4cfc6fccbdcb8eca4cea5c6a5ada5b9a5c8a4c7a4b9a1a3c5ecb5fea4cfc6fccbdca4cebcf3c5d4a4c7a1a2a4c8a4c6" +
        "a4e2c2e7a4ada4cac5d4bbd4a4c7a4b9a1a3cbe8c4aba1a2b1d8a4ceb6e1a4afa4ceb5cac3e3c5b9a4c7a5b3a1bca5d2a1bca4f2" +
        "b0fba4dfa4dea4b9a1a3",
    ),
  },
  gbk: {
    text: "这是一个中文文本。北京是中国的首都，也是一座历史悠久的城市。我们每天早上喝茶，然后去公司上班。",
    bytes: hex(
      "d5e2cac7d2bbb8f6d6d0cec4cec4b1bea1a3b1b1bea9cac7d6d0b9fab5c4cad7b6bca3acd2b2cac7d2bbd7f9c0facab7d3c6bec3" +
        "b5c4b3c7cad0a1a3ced2c3c7c3bfccecd4e7c9cfbac8b2e8a3acc8bbbaf3c8a5b9abcbbec9cfb0e0a1a3",
    ),
  },
  eucKr: {
    text: "이것은 한국어 텍스트입니다. 서울은 대한민국의 수도이며 아주 큰 도시입니다. 우리는 매일 아침 커피를 마십니다.",
    bytes: hex(
      "c0ccb0cdc0ba20c7d1b1b9beee20c5d8bdbac6aec0d4b4cfb4d92e20bcadbfefc0ba20b4ebc7d1b9ceb1b9c0c720bcf6b5b5c0cc" +
        "b8e720bec6c1d620c5ab20b5b5bdc3c0d4b4cfb4d92e20bfecb8aeb4c220b8c5c0cf20bec6c4a720c4bfc7c7b8a620b8b6bdcab4" +
        "cfb4d92e",
    ),
  },
  big5: {
    text: "這是一個中文文本。臺北是臺灣最大的城市，也是一座歷史悠久的城市。我們每天早上喝茶，然後去公司上班。",
    bytes: hex(
      "b36fac4fa440add3a4a4a4e5a4e5a5bba143bb4fa55fac4fbb4fc657b3cca46aaabaabb0a5aba141a45dac4fa440ae79befaa576" +
        "b179a45baabaabb0a5aba143a7daadcca843a4d1a6ada457b3dcaff9a141b54dabe1a568a4bda571a457af5aa143",
    ),
  },
  windows1251: {
    text: "Все люди рождаются свободными и равными в своем достоинстве и правах. Они наделены разумом и совестью.",
    bytes: hex(
      "c2f1e520ebfee4e820f0eee6e4e0fef2f1ff20f1e2eee1eee4edfbece820e820f0e0e2edfbece820e220f1e2eee5ec20e4eef1f2" +
        "eee8edf1f2e2e520e820eff0e0e2e0f52e20ceede820ede0e4e5ebe5edfb20f0e0e7f3eceeec20e820f1eee2e5f1f2fcfe2e",
    ),
  },
  windows874: {
    text: "มนุษย์ทั้งหลายเกิดมามีอิสระและเสมอภาคกันในเกียรติศักดิ์และสิทธิ ต่างมีเหตุผลและมโนธรรม",
    bytes: hex(
      "c1b9d8c9c2ecb7d1e9a7cbc5d2c2e0a1d4b4c1d2c1d5cdd4cac3d0e1c5d0e0cac1cdc0d2a4a1d1b9e3b9e0a1d5c2c3b5d4c8d1a1" +
        "b4d4ece1c5d0cad4b7b8d420b5e8d2a7c1d5e0cbb5d8bcc5e1c5d0c1e2b9b8c3c3c1",
    ),
  },
} as const;

describe("windows-1252 without a declared charset", () => {
  it("reads text, Markdown and code files as windows-1252, not ISO-8859-1", async () => {
    for (const name of ["note.txt", "note.md", "script.py"]) {
      const text = await textOf(name, CP1252_SAMPLE);
      expect(text).toBe(CP1252_TEXT);
      expect(text).not.toMatch(/[\u0080-\u009f\uFFFD]/);
    }
  });

  it("reads the same bytes in HTML without <meta charset> as windows-1252 (as browsers do)", async () => {
    const html = Buffer.concat([
      latin1("<html><head><title>Quotes</title></head><body><p>"),
      CP1252_SAMPLE,
      latin1("</p></body></html>"),
    ]);
    expect(await textOf("page.html", html)).toBe(CP1252_TEXT);
  });

  it("reads short Latin-1 text as windows-1252, never as a CJK charset", async () => {
    // chardet alone calls these UTF-8, Shift_JIS, Big5, ISO-8859-9 or windows-1257.
    const cases: [string, string][] = [
      ["caf\xe9", "café"],
      ["r\xe9sum\xe9", "résumé"],
      ["Gr\xfc\xdfe", "Grüße"],
      ["\x93hi\x94", "“hi”"],
      ["El Ni\xf1o", "El Niño"],
      ["Sm\xf8rrebr\xf8d", "Smørrebrød"],
      ["fianc\xe9e", "fiancée"],
      ["it\x92s", "it’s"],
      ["Forma\xe7\xe3o", "Formação"],
    ];
    for (const [bytes, expected] of cases) {
      expect(await textOf("short.txt", latin1(bytes))).toBe(expected);
      expect(detectCharset(latin1(bytes))).toBe("windows-1252");
    }
  });

  it("keeps the five bytes windows-1252 leaves unassigned as C1 controls (WHATWG)", () => {
    expect(decodeText(latin1("a\x81b\x8dc\x9dd \xe9t\xe9"))).toBe("a\u0081b\u008dc\u009dd été");
  });
});

describe("CJK and other legacy charsets without a declared charset", () => {
  it("reads Shift_JIS, EUC-JP, GBK, EUC-KR and Big5 text files exactly", async () => {
    expect(await textOf("ja.txt", SAMPLES.shiftJis.bytes)).toBe(SAMPLES.shiftJis.text);
    expect(await textOf("ja-euc.txt", SAMPLES.eucJp.bytes)).toBe(SAMPLES.eucJp.text);
    expect(await textOf("zh.txt", SAMPLES.gbk.bytes)).toBe(SAMPLES.gbk.text);
    expect(await textOf("ko.txt", SAMPLES.eucKr.bytes)).toBe(SAMPLES.eucKr.text);
    expect(await textOf("zh-tw.txt", SAMPLES.big5.bytes)).toBe(SAMPLES.big5.text);
  });

  it("reads the user's one-sentence Shift_JIS file", async () => {
    const bytes = hex("82b182ea82cd93fa967b8cea82cc8365834c8358836782c582b78142");
    expect(await textOf("short-ja.txt", bytes)).toBe("これは日本語のテキストです。");
  });

  it("reads windows-1251 Russian and windows-874 Thai", async () => {
    expect(await textOf("ru.txt", SAMPLES.windows1251.bytes)).toBe(SAMPLES.windows1251.text);
    expect(await textOf("th.md", SAMPLES.windows874.bytes)).toBe(SAMPLES.windows874.text);
  });

  it("reads a Shift_JIS comment in a code file", async () => {
    // "# コメント: データを読み込む\nprint('hello')\n"
    const bytes = hex(
      "232083528381839383673a208366815b835e82f093c782dd8d9e82de0a7072696e74282768656c6c6f27290a",
    );
    expect(await textOf("load.py", bytes)).toBe("# コメント: データを読み込む\nprint('hello')\n");
  });

  it("reads CJK in HTML without <meta charset>", async () => {
    const html = Buffer.concat([
      latin1("<!doctype html><html><head><title>t</title></head><body><h1>x</h1><p>"),
      SAMPLES.gbk.bytes,
      latin1("</p><p>"),
      SAMPLES.gbk.bytes,
      latin1("</p></body></html>"),
    ]);
    expect(await textOf("zh.html", html)).toBe(`# x\n\n${SAMPLES.gbk.text}\n\n${SAMPLES.gbk.text}`);
  });
});

describe("declared charsets and UTF-8", () => {
  it("honours a declared HTML charset over detection", async () => {
    const page = (meta: string, body: Buffer): Buffer =>
      Buffer.concat([latin1(`<html><head>${meta}</head><body><p>`), body, latin1("</p></body></html>")]);
    expect(await textOf("ru.html", page('<meta charset="windows-1251">', SAMPLES.windows1251.bytes))).toBe(
      SAMPLES.windows1251.text,
    );
    // The declaration wins even where detection would say windows-1252.
    expect(await textOf("koi.html", page('<meta charset="koi8-r">', latin1("caf\xe9")))).toBe("cafИ");
    // iso-8859-1 is read as windows-1252 (WHATWG), so 0x93/0x94 are quotes.
    const http = '<meta http-equiv="Content-Type" content="text/html; charset=iso-8859-1">';
    expect(await textOf("latin.html", page(http, latin1("\x93caf\xe9\x94")))).toBe("“café”");
    // A declared UTF-8 page keeps U+FFFD for its invalid bytes.
    expect(await textOf("utf8.html", page('<meta charset="utf-8">', latin1("caf\xe9")))).toBe("caf\uFFFD");
  });

  it("keeps valid UTF-8 and BOMs unchanged", async () => {
    const text = "naïve café — “quoted” 日本語 中文 한국어";
    expect(await textOf("u.txt", Buffer.from(text, "utf8"))).toBe(text);
    const bom = Buffer.concat([hex("efbbbf"), Buffer.from(text, "utf8")]);
    expect(await textOf("bom.md", bom)).toBe(text);
    const utf16 = Buffer.concat([hex("fffe"), Buffer.from(text, "utf16le")]);
    expect(await textOf("u16.txt", utf16)).toBe(text);
  });

  it("keeps mostly-UTF-8 text as UTF-8 with U+FFFD for the one bad byte", async () => {
    const bytes = Buffer.concat([
      Buffer.from("Grüße aus Köln — “schön” ", "utf8"),
      latin1("\xe9"),
      Buffer.from(" 日本語のテキスト", "utf8"),
    ]);
    expect(await textOf("mixed.txt", bytes)).toBe("Grüße aus Köln — “schön” \uFFFD 日本語のテキスト");
  });
});

describe("email bodies in legacy charsets", () => {
  it("reads an undeclared GBK body exactly", async () => {
    const body = hex(
      "c4fabac3a3a1d5e2cac7d2bbb7e2b2e2cad4d3cabcfea1a3bbe1d2e9bdabd4dac3f7ccecc9cfcee7caaeb5e3bed9d0d0a3acc7eb" +
        "d7bccab1b2cebcd3a1a3d0bbd0bba3a1",
    );
    const raw = Buffer.concat([
      latin1(
        [
          "From: li@example.cn",
          "To: team@example.cn",
          "Subject: meeting",
          "Date: Mon, 01 Jan 2024 09:00:00 +0800",
          "MIME-Version: 1.0",
          "Content-Type: text/plain",
          "Content-Transfer-Encoding: 8bit",
          "",
          "",
        ].join("\r\n"),
      ),
      body,
      latin1("\r\n"),
    ]);
    expect(await textOf("gbk.eml", raw)).toBe(
      "您好！这是一封测试邮件。会议将在明天上午十点举行，请准时参加。谢谢！",
    );
  });

  it("reads a quoted-printable part mislabelled us-ascii inside multipart (SpamAssassin spam 00022)", async () => {
    const docs = await extractFile(
      docsPath("email", "spamassassin_sample", "spam-1", "00022.8203cdf03888f656dc0381701148f73d.txt"),
    );
    const text = (docs[0] as ExtractedDocument).text;
    // =96 is the windows-1252 en dash.
    expect(text).toContain("successful and hitch – free transaction.");
    expect(text).not.toContain("\uFFFD");
  });

  it("reads Thai mislabelled us-ascii, body and raw subject (SpamAssassin spam 00072)", async () => {
    const docs = await extractFile(
      docsPath("email", "spamassassin_sample", "spam-1", "00072.d519a73b92f487519c2bc5ba45f5eb2c.txt"),
    );
    const doc = docs[0] as ExtractedDocument;
    expect(doc.metadata.subject).toBe("future business สำหรับคุณ!");
    expect(doc.text).toContain("“ตื่นตัว กับโลกธุรกิจบนอินเตอร์เน็ต”");
    expect(doc.text).toContain("สามารถมีรายได้ 8,000 – 50,000 บาท/เดือน");
  });

  it("reads a body declared iso-8859-1 that uses 0x80–0x9F as windows-1252", async () => {
    const raw = latin1(
      [
        "From: a@example.com",
        "Subject: quotes",
        "Content-Type: text/plain; charset=iso-8859-1",
        "Content-Transfer-Encoding: quoted-printable",
        "",
        "He said =93caf=E9=94 =96 it=92s =8010.",
        "",
      ].join("\r\n"),
    );
    expect(await textOf("latin.eml", raw)).toBe("He said “café” – it’s €10.");
  });

  it("reads a base64 Shift_JIS text/plain part without a charset next to a declared UTF-8 part", async () => {
    const raw = latin1(
      [
        "From: a@example.jp",
        "Subject: parts",
        "MIME-Version: 1.0",
        'Content-Type: multipart/alternative; boundary="b1"',
        "",
        "--b1",
        "Content-Type: text/plain",
        "Content-Transfer-Encoding: base64",
        "",
        SAMPLES.shiftJis.bytes.toString("base64"),
        "--b1",
        "Content-Type: text/html; charset=utf-8",
        "",
        "<p>ignored</p>",
        "--b1--",
        "",
      ].join("\r\n"),
    );
    expect(await textOf("sjis.eml", raw)).toBe(SAMPLES.shiftJis.text);
  });
});

describe("performance", () => {
  it("decodes multi-megabyte legacy files in linear time", async () => {
    const cp1252 = Buffer.concat(Array.from({ length: 200_000 }, () => CP1252_SAMPLE)); // ~4.4 MB
    const sjis = Buffer.concat(Array.from({ length: 30_000 }, () => SAMPLES.shiftJis.bytes)); // ~3.4 MB
    const start = performance.now();
    const text = decodeText(cp1252);
    const ja = decodeText(sjis);
    const elapsed = performance.now() - start;
    expect(text.length).toBe(CP1252_TEXT.length * 200_000);
    expect(text.startsWith(CP1252_TEXT + CP1252_TEXT)).toBe(true);
    expect(ja.length).toBe(SAMPLES.shiftJis.text.length * 30_000);
    expect(ja.endsWith(SAMPLES.shiftJis.text)).toBe(true);
    expect(elapsed).toBeLessThan(3000);
  });
});
