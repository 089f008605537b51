/**
 * Conformance: every chunking strategy keeps the shared chunk invariants on real
 * documents (../shared/data/docs, read in place), synthetic email/Slack documents
 * shaped like extractor output, and edge inputs, at several sizes and overlaps.
 */
import { readdirSync } from "node:fs";
import { describe, expect, test } from "vitest";
import { type ConcreteStrategy, createChunker } from "../../src/chunk/index.js";
import type { ChunkingConfig } from "../../src/config.js";
import type { ExtractedDocument } from "../../src/types.js";
import {
  cfg,
  checkInvariants,
  doc,
  readShared,
  type SlackMessage,
  shared,
  slackDoc,
} from "../helpers/chunk-helpers.js";

const STRATEGIES: (ConcreteStrategy | "auto")[] = [
  "fixed",
  "semantic",
  "document",
  "email",
  "slack",
  "code",
  "auto",
];

const CONFIGS: ChunkingConfig[] = [
  cfg(200, 0, 0),
  cfg(200, 50, 100),
  cfg(500, 0, 200),
  cfg(500, 50, 0),
  cfg(1500, 0, 500),
  cfg(1500, 150, 500),
  { ...cfg(60, 0, 20), unit: "tokens" },
  { ...cfg(120, 30, 0), unit: "tokens", tokenizer: "cl100k_base" },
  { ...cfg(100, 10, 40), unit: "tokens", tokenizer: "use-lite" },
];

function realEmail(): ExtractedDocument {
  const raw = readShared(
    "data/docs/email/spamassassin_sample/easy-ham-1/00001.7c53336b37003a9286aba55d2945844c.txt",
  );
  const sep = raw.indexOf("\n\n");
  const headers = raw.slice(0, sep);
  const header = (name: string) => new RegExp(`^${name}:\\s*(.*)$`, "mi").exec(headers)?.[1]?.trim();
  return doc(raw.slice(sep + 2), "email", {
    from: header("From"),
    to: header("To") ? [header("To")] : [],
    subject: header("Subject"),
    date: header("Date"),
  });
}

function syntheticEmail(): ExtractedDocument {
  const para = (n: number) =>
    `Paragraph ${n}: the quarterly numbers are attached. Revenue grew 12.5% to $3.2 million, e.g. in the U.S. office. ` +
    "Please review the figures before Friday and send comments to the finance list.";
  const body = [
    "Hi team,",
    para(1),
    para(2),
    para(3),
    "On Tue, 2 Jul 2024 at 09:00, Ops Desk <ops@example.com> wrote:",
    "> The database will be offline from 22:00 to 23:00 UTC.\n> Plan accordingly.\n>\n> -- Ops",
    "Thanks,\nAlice",
  ].join("\n\n");
  return doc(body, "email", {
    from: "Alice <alice@example.com>",
    to: ["team@example.com", "ops@example.com"],
    cc: [],
    subject: "Re: Maintenance window",
    date: "2024-07-02T10:00:00.000Z",
  });
}

function realSlack(): ExtractedDocument {
  const data = JSON.parse(readShared("data/docs/slack/archlinuxjp_slacklog_json/20200401_general.json")) as {
    messages: { user?: string; ts: string; thread_ts?: string; text?: string }[];
  };
  const msgs = [...data.messages]
    .filter((m) => m.text)
    .sort((a, b) => Number.parseFloat(a.ts) - Number.parseFloat(b.ts))
    .map(
      (m): SlackMessage => ({
        user: m.user ?? "unknown",
        ts: m.ts,
        text: m.text ?? "",
        threadTs: m.thread_ts,
      }),
    );
  return slackDoc("general", msgs);
}

function syntheticSlack(): ExtractedDocument {
  const base = 1463079762;
  const ts = (s: number) => `${base + s}.000${String(s % 1000).padStart(3, "0")}`;
  const msgs: SlackMessage[] = [
    { user: "alice", ts: ts(0), text: "Morning! Is the deploy still on for today?" },
    { user: "bob", ts: ts(60), text: "Yes, after lunch. I'll post the checklist." },
    { user: "carol", ts: ts(120), text: "Checklist draft:", threadTs: ts(120) },
  ];
  for (let i = 1; i <= 12; i++) {
    msgs.push({
      user: i % 2 ? "alice" : "bob",
      ts: ts(120 + i * 30),
      text: `Step ${i}: verify the ${i}th service is healthy 👍🏽 and the dashboards show no errors before moving on.`,
      threadTs: ts(120),
    });
  }
  msgs.push({ user: "dave", ts: ts(9000), text: "Deploy finished. ".repeat(40).trim() });
  msgs.push({ user: "erin", ts: ts(9060), text: "🎉🎉🎉" });
  return slackDoc("deploys", msgs);
}

const MD = (f: string) => readShared("data/docs/markdown", f);
const CODE = (f: string) => readShared("data/docs/code", f);

/** Documents every strategy is run on. */
const DOCS: [string, () => ExtractedDocument][] = [
  ["rust_book installation", () => doc(MD("rust_book_src/ch01-01-installation.md"), "markdown")],
  ["rust_book operators (tables)", () => doc(MD("rust_book_src/appendix-02-operators.md"), "markdown")],
  ["rust_book guessing game", () => doc(MD("rust_book_src/ch02-00-guessing-game-tutorial.md"), "markdown")],
  ["fastapi zh body", () => doc(MD("fastapi_docs_zh/tutorial/body.md"), "markdown")],
  ["fastapi zh python-types", () => doc(MD("fastapi_docs_zh/python-types.md"), "markdown")],
  [
    "debian reference zh text (first 40k chars)",
    () =>
      doc(
        readShared("data/docs/chinese/debian_reference_zh_cn/debian-reference.zh-cn.txt").slice(0, 40_000),
        "text",
      ),
  ],
  [
    "requests sessions.py",
    () => doc(CODE("psf+requests/src/requests/sessions.py"), "code", { language: "python" }),
  ],
  [
    "express response.js",
    () => doc(CODE("expressjs+express/lib/response.js"), "code", { language: "javascript" }),
  ],
  [
    "zod util.ts",
    () => doc(CODE("colinhacks+zod/packages/zod/src/v4/core/util.ts"), "code", { language: "typescript" }),
  ],
  ["gin context.go", () => doc(CODE("gin-gonic+gin/context.go"), "code", { language: "go" })],
  ["real email body", realEmail],
  ["synthetic email", syntheticEmail],
  ["real slack channel", realSlack],
  ["synthetic slack threads", syntheticSlack],
  ["empty", () => doc("")],
  ["whitespace only", () => doc("   \n\t  \r\n")],
  ["nbsp + zwsp", () => doc("\u00a0\u200b\u00a0")],
  ["leading delimiters", () => doc("\n\n\n\nHello world")],
  ["one long token", () => doc(`start ${"x".repeat(3333)} end`)],
  ["long url token (B14)", () => doc(readShared("cases/B14.txt"))],
  ["emoji run", () => doc("😀".repeat(1000))],
  ["emoji clusters", () => doc("👨‍👩‍👧‍👦👍🏽🇯🇵".repeat(120))],
  ["mixed emoji prose", () => doc(Array.from({ length: 300 }, (_, i) => `word${i}😀`).join(""))],
  [
    "CRLF markdown",
    () => doc(MD("rust_book_src/ch01-01-installation.md").replace(/\n/g, "\r\n"), "markdown"),
  ],
  ["CRLF paragraphs (B06)", () => doc(JSON.parse(readShared("cases/B06.json")).paragraphs as string)],
  ["B04 boundary_drop", () => doc(JSON.parse(readShared("cases/B04.json")).boundary_drop as string)],
  [
    "fence longer than chunk",
    () => doc(`# Code\n\n\`\`\`rust\n${"let x = 1;\n".repeat(300)}\`\`\`\n\nAfter.`, "markdown"),
  ],
  [
    "unclosed fence with headings",
    () => doc(`# A\n\ntext\n\n~~~~\n# not a heading\n${"y\n".repeat(500)}`, "markdown"),
  ],
];

describe.each(STRATEGIES)("strategy %s keeps the chunk invariants", (strategy) => {
  test.each(DOCS)("%s", async (_name, make) => {
    const d = make();
    for (const config of CONFIGS) {
      const list = await createChunker(config, strategy === "auto" ? undefined : strategy).chunk(d);
      expect(list).toBeInstanceOf(Array);
      checkInvariants(d, list, config);
      if (d.text.trim() === "" || /^[\s\u200b]*$/.test(d.text)) expect(list).toEqual([]);
    }
  });
});

describe("every markdown file of two real doc sets", () => {
  const sets = ["rust_book_src", "fastapi_docs_zh/tutorial"];
  test.each(sets)("%s with DOCUMENT at 300 and 1500 characters and 256 tokens", async (set) => {
    const dir = shared("data/docs/markdown", set);
    const files = readdirSync(dir).filter((f) => f.endsWith(".md"));
    expect(files.length).toBeGreaterThan(10);
    for (const f of files) {
      const d = doc(MD(`${set}/${f}`), "markdown");
      const tokens: ChunkingConfig = { ...cfg(256, 0, 64), unit: "tokens" };
      for (const config of [cfg(300, 0, 0), cfg(1500, 0, 500), tokens]) {
        checkInvariants(d, await createChunker(config, "document").chunk(d), config);
      }
    }
  });
});
