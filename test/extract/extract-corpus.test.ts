/**
 * Every file under ../shared/data/docs goes through the real ingest path
 * (discover → extract → chunk → store, no embedding): no crash, every failure a
 * named per-file error with a known reason, and the documents per type that the
 * corpus must yield. `npm run bench:extract` prints the same run's figures.
 */
import { mkdtempSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { IngestSummary } from "../../src/ingest/pipeline.js";
import { KnowledgeLayer } from "../../src/knowledge-layer.js";
import type { KbCounts } from "../../src/store/catalog.js";

// The real path: ingest reports sources by their real path, and ../shared may be a symlink.
const DOCS = realpathSync(resolve(import.meta.dirname, "..", "..", "..", "shared", "data", "docs"));

/** The reasons a file of this corpus may fail with, each a sentence a user can act on. */
const KNOWN_FAILURES: RegExp[] = [
  /^no text layer \(image-only PDF\?\)$/,
  /^no text content$/,
  /^file is empty$/,
  /^not a valid PDF: /,
  /^password-protected$/,
  /^no messages/,
];

let dataDir: string;
let kl: KnowledgeLayer;
let summary: IngestSummary;
let counts: KbCounts;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "kl-corpus-"));
  kl = KnowledgeLayer.open({ dataDir });
  summary = await kl.ingest([DOCS], { embed: false });
  counts = await kl.counts("default");
}, 600_000);

afterAll(() => {
  kl?.close();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

describe("ingesting every file under ../shared/data/docs", () => {
  it("accounts for every source: stored or failed with a named reason, never lost", () => {
    expect(summary.files).toBeGreaterThan(2000);
    expect(summary.added + summary.errors.length).toBe(summary.files);
    for (const e of summary.errors) {
      expect(e.path.startsWith(DOCS)).toBe(true);
      const known = KNOWN_FAILURES.some((re) => re.test(e.reason));
      if (!known) throw new Error(`unexpected failure reason for ${relative(DOCS, e.path)}: ${e.reason}`);
    }
  });

  it("fails exactly the files that cannot give text, each with its reason", () => {
    const reasonOf = (rel: string): string | undefined =>
      summary.errors.find((e) => e.path === join(DOCS, rel))?.reason;
    expect(reasonOf("pdf/pdfplumber_test_pdfs/password-example.pdf")).toBe("password-protected");
    expect(reasonOf("pdf/pdf-parse_npm_test_data/03-invalid.pdf")).toMatch(/^not a valid PDF: /);
    expect(reasonOf("pdf/pdfplumber_test_pdfs/empty.pdf")).toBe("file is empty");
    expect(reasonOf("code/colinhacks+zod/logo/Logo.pdf")).toBe("no text layer (image-only PDF?)");
    expect(reasonOf("slack/archlinuxjp_slacklog_json/20191201_general.json")).toBe(
      'no messages (the "messages" list is empty)',
    );
    // Mail with headers but no body is still searchable by its headers.
    expect(reasonOf("email/ruby_mail_gem_fixtures/emails/error_emails/missing_body.eml")).toBeUndefined();
  });

  it("stores the documents each format must yield", () => {
    // Exact counts: a change in detection or extraction shows up here.
    // email: 564 messages + 9 emails attached to them; the other attachments count
    // under their own types (5 text, 2 code, 1 html). pdf: the 52 readable PDFs of the
    // PDF test sets and the Chinese Debian reference. slack: 2 channels in the export folder, the same 2 in its .zip, 4 API dumps.
    // text 69: 56 by extension or name, and 13 files with no or an unknown extension sniffed as text
    // (copyright.debian, go.mod, MANIFEST.in, make.bat, ca.srl, git hooks, LICENSE.pdf-parse…).
    expect(counts.documentsByType).toEqual({
      code: 899,
      email: 573,
      html: 23,
      markdown: 462,
      pdf: 53,
      slack: 8,
      text: 69,
    });
    expect(summary.errors.length).toBe(28);
    expect(counts.chunks).toBeGreaterThan(10_000);
  });

  it("skips only files of unsupported types (images, keys, archives that are not Slack exports)", () => {
    for (const s of summary.skipped) {
      expect(s.reason, relative(DOCS, s.path)).toMatch(/^(unsupported file type|binary file)/);
    }
    const skippedJson = summary.skipped.filter((s) => s.path.endsWith(".json"));
    expect(skippedJson).toEqual([]);
  });
});
