/**
 * Files without a (known) extension: their content is sniffed, and text in UTF-8,
 * UTF-16 or a legacy charset is ingested as text (`tang300`, `song100`,
 * `NOTES.1st`), while binary content, hidden files, keys and certificates stay
 * skipped with a reason. Inputs are made here; legacy bytes are literals (the
 * GB18030 sample was encoded once with Python's codecs).
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  detectSourceType,
  detectSourceTypeOf,
  discoverSources,
  extractBytes,
  extractFile,
  looksLikeText,
} from "../../src/extract/index.js";
import { extractionError, tempDir } from "../helpers/helpers.js";

/** Two lines of Tang poems in Chinese. */
const TANG =
  "床前明月光，疑是地上霜。举头望明月，低头思故乡。\n白日依山尽，黄河入海流。欲穷千里目，更上一层楼。\n";
/** {@link TANG} in GB18030. */
const TANG_GB18030 = Buffer.from(
  "b4b2c7b0c3f7d4c2b9e2a3acd2c9cac7b5d8c9cfcbaaa1a3bed9cdb7cdfbc3f7d4c2a3acb5cdcdb7cbbcb9cacfe7a1a30a" +
    "b0d7c8d5d2c0c9bdbea1a3acbbc6bad3c8ebbaa3c1f7a1a3d3fbc7eec7a7c0efc4bfa3acb8fcc9cfd2bbb2e3c2a5a1a30a",
  "hex",
);
/** Song lyrics in Latin-1 (one byte per accented letter). */
const SONG = "Café crème, señor Muñoz: déjà vu à la plage.\nLa mer était belle, où êtes-vous?\n";

/** 4 KiB of pseudo-random bytes without a single NUL (a compressed stream, say). */
function noisyBytes(n = 4096): Buffer {
  const out = Buffer.alloc(n);
  let x = 0x2545f491;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = ((x >>> 0) % 255) + 1;
  }
  return out;
}

let dir: string;
let cleanup: () => void;
beforeEach(() => {
  ({ dir, cleanup } = tempDir("kl-sniff-"));
});
afterEach(() => cleanup());

const write = (name: string, content: string | Uint8Array): string => {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
};

describe("extension-less text files", () => {
  it("ingests UTF-8, Latin-1, GB18030 and UTF-16 text without an extension as text", async () => {
    const tang = write("tang300", TANG);
    const song = write("song100", Buffer.from(SONG, "latin1"));
    const gb = write("tang300-gb", TANG_GB18030);
    const utf16 = write(
      "MEMO",
      Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from("Memo: lunch at noon\n", "utf16le")]),
    );
    for (const path of [tang, song, gb, utf16]) expect(detectSourceType(path), path).toBe("text");

    const [tangDoc] = await extractFile(tang);
    expect(tangDoc?.text).toBe(TANG);
    expect(tangDoc?.metadata).toMatchObject({ type: "text", title: "tang300" });
    expect((await extractFile(song))[0]?.text).toBe(SONG);
    expect((await extractFile(gb))[0]?.text).toBe(TANG);
    expect((await extractFile(utf16))[0]?.text).toBe("Memo: lunch at noon\n");
  });

  it("sniffs files whose extension is unknown, and reads new text extensions by name", async () => {
    write("NOTES.1st", "Read me first: the build needs Node 20.\n");
    write("talk.srt", "1\n00:00:01,000 --> 00:00:02,000\nHello there\n");
    write("table.csv", "name,qty\napple,3\n");
    write("paper.bib", "@article{k, title={Tea}}\n");
    write("build-output", "\u001b[32mok\u001b[0m 12 tests passed\n");
    const { sources, skipped } = await discoverSources([dir]);
    expect(skipped).toEqual([]);
    expect(sources.map((s) => [s.path.slice(dir.length + 1), s.type])).toEqual([
      ["NOTES.1st", "text"],
      ["build-output", "text"],
      ["paper.bib", "text"],
      ["table.csv", "text"],
      ["talk.srt", "text"],
    ]);
  });

  it("skips binary content, hidden files, keys and vector graphics, each with a reason", async () => {
    write("image", Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48]));
    write("noise", noisyBytes());
    write("noise.dat", noisyBytes());
    write("empty", "");
    write(".env", "API_KEY=secret\n");
    write(
      "id_rsa",
      "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n",
    );
    write("server.pem", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
    write("logo.ai", "%PDF-1.5\n%\u00e2\u00e3\n1 0 obj\n<</Type/Catalog>>\n");
    write("drawing", "%!PS-Adobe-3.0\n%%BoundingBox: 0 0 10 10\nnewpath\n");
    const { sources, skipped } = await discoverSources([dir]);
    expect(sources).toEqual([]);
    expect(skipped.map((s) => [s.path.slice(dir.length + 1), s.reason])).toEqual([
      [".env", "unsupported file type (hidden file without an extension)"],
      ["drawing", "unsupported file type (no extension, and not plain text)"],
      ["empty", "unsupported file type (no extension, and not plain text)"],
      ["id_rsa", "unsupported file type (no extension, and not plain text)"],
      ["image", "unsupported file type (no extension, and not plain text)"],
      ["logo.ai", "unsupported file type (.ai)"],
      ["noise", "unsupported file type (no extension, and not plain text)"],
      ["noise.dat", "unsupported file type (.dat)"],
      ["server.pem", "unsupported file type (.pem)"],
    ]);
    const err = await extractionError(() => extractFile(join(dir, "noise")));
    expect(err.reason).toBe("unsupported file type (no extension, and not plain text)");
    expect(err.message).toContain(join(dir, "noise"));
  });
});

describe("looksLikeText", () => {
  it("accepts text in any charset and refuses NULs, control noise and PDF/PostScript heads", () => {
    expect(looksLikeText(Buffer.from(TANG))).toBe(true);
    expect(looksLikeText(TANG_GB18030)).toBe(true);
    expect(looksLikeText(Buffer.from(SONG, "latin1"))).toBe(true);
    // A multi-byte character cut at the end of a 4 KB head is not an error.
    expect(looksLikeText(Buffer.from(TANG).subarray(0, 10))).toBe(true);
    expect(looksLikeText(Buffer.from("plain\u0000text"))).toBe(false);
    expect(looksLikeText(noisyBytes())).toBe(false);
    expect(looksLikeText(Buffer.from(`${"a".repeat(95)}\u0001\u0002\u0003\u0004\u0005`))).toBe(false);
    expect(looksLikeText(Buffer.from(`${"a".repeat(98)}\u0001\u0002`))).toBe(true);
    expect(looksLikeText(Buffer.from("%PDF-1.7\nhello"))).toBe(false);
    expect(looksLikeText(Buffer.alloc(0))).toBe(false);
  });
});

describe("in-memory content (uploads, attachments) without an extension", () => {
  it("is text when it looks like text, but a MIME type that names a format wins", async () => {
    expect(detectSourceTypeOf("tang300", Buffer.from(TANG))).toBe("text");
    expect(detectSourceTypeOf("page", Buffer.from("<p>Hi</p>"), "text/html")).toBe("html");
    expect(detectSourceTypeOf("blob", noisyBytes(), "application/octet-stream")).toBeUndefined();
    expect(detectSourceTypeOf("upload", Buffer.from(TANG), "application/octet-stream")).toBe("text");
    // A MIME type that names a format this library does not read is believed.
    expect(detectSourceTypeOf("attachment", Buffer.from("<bold>Hi</bold>"), "text/enriched")).toBeUndefined();
    expect(
      detectSourceTypeOf("signature.asc", Buffer.from("-----BEGIN PGP SIGNATURE-----\n")),
    ).toBeUndefined();
    const [doc] = await extractBytes("song100", Buffer.from(SONG, "latin1"));
    expect(doc?.text).toBe(SONG);
    expect(doc?.metadata.type).toBe("text");
  });
});
