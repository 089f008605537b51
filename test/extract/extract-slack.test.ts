/**
 * Slack extractor on real data: the slack-export-viewer test archive (folder and
 * .zip), archlinuxjp `conversations.history` dumps, the B22 case, plus small
 * synthetic exports and zips for threads, permalinks, limits and bad input.
 */
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import JSZip from "jszip";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ExtractOptions,
  extractBytes,
  extractFile,
  resolveExtractOptions,
  slackExtractor,
} from "../../src/extract/index.js";
import type { ExtractedDocument, Segment } from "../../src/types.js";
import { docsPath, extractionError, SHARED, tempDir } from "../helpers/helpers.js";

const EXPORT_DIR = docsPath("slack", "slack_export_viewer_testarchive", "export");
const EXPORT_ZIP = docsPath("slack", "slack_export_viewer_testarchive", "testarchive.zip");
const ARCH = (name: string): string => docsPath("slack", "archlinuxjp_slacklog_json", name);
const B22 = JSON.parse(readFileSync(join(SHARED, "cases", "B22.json"), "utf8")) as Record<string, unknown>;

let tmp: { dir: string; cleanup: () => void };
beforeAll(() => {
  tmp = tempDir("kl-slack-");
});
afterAll(() => tmp.cleanup());

/** A fresh folder inside the test's temp dir. */
let counter = 0;
function freshDir(): string {
  const dir = join(tmp.dir, `case-${++counter}`);
  mkdirSync(dir, { recursive: true });
  return dir;
}

/** Writes `{ "users.json": [...], "chan/day.json": [...] }` as an export folder; returns it. */
function writeExport(files: Record<string, unknown>): string {
  const dir = freshDir();
  for (const [name, content] of Object.entries(files)) {
    const path = join(dir, name);
    mkdirSync(join(path, ".."), { recursive: true });
    writeFileSync(path, typeof content === "string" ? content : JSON.stringify(content));
  }
  return dir;
}

/** Zips `{ name: content }` (strings or JSON values) into a temp .zip; returns its path. */
async function writeZip(files: Record<string, unknown>, name = "export.zip"): Promise<string> {
  const zip = new JSZip();
  for (const [entry, content] of Object.entries(files)) {
    zip.file(
      entry,
      typeof content === "string" || content instanceof Uint8Array ? content : JSON.stringify(content),
    );
  }
  const bytes = await zip.generateAsync({ type: "nodebuffer", compression: "DEFLATE" });
  const path = join(freshDir(), name);
  writeFileSync(path, bytes);
  return path;
}

/** Every file of a folder, by path relative to it (for re-zipping the real export). */
function folderContents(dir: string): Record<string, Uint8Array> {
  const out: Record<string, Uint8Array> = {};
  const walk = (d: string): void => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else out[relative(dir, p).split("\\").join("/")] = readFileSync(p);
    }
  };
  walk(dir);
  return out;
}

/**
 * Rewrites the uncompressed size that the local header (offset 22) and the central
 * directory entry (offset 24) of zip entry `entry` declare; returns how many were patched.
 */
function forgeEntrySize(path: string, entry: string, size: number): number {
  const bytes = readFileSync(path);
  const name = Buffer.from(entry);
  let patched = 0;
  for (let i = 0; i + 46 < bytes.length; i++) {
    const sig = bytes.readUInt32LE(i);
    if (sig === 0x04034b50 && bytes.subarray(i + 30, i + 30 + name.length).equals(name)) {
      bytes.writeUInt32LE(size, i + 22);
      patched++;
    } else if (sig === 0x02014b50 && bytes.subarray(i + 46, i + 46 + name.length).equals(name)) {
      bytes.writeUInt32LE(size, i + 24);
      patched++;
    }
  }
  writeFileSync(path, bytes);
  return patched;
}

const segmentText = (doc: ExtractedDocument, s: Segment | undefined): string =>
  s ? doc.text.slice(s.start, s.end) : "";
const byTs = (doc: ExtractedDocument, ts: string): Segment | undefined =>
  doc.segments?.find((s) => s.metadata.ts === ts);

/** Asserts the segments tile the text (one `\n` between messages) and counts match. */
function expectTiledSegments(doc: ExtractedDocument): void {
  const segs = doc.segments ?? [];
  expect(segs.length).toBe(doc.metadata.messageCount);
  expect(segs[0]?.start).toBe(0);
  expect(segs.at(-1)?.end).toBe(doc.text.length);
  for (let i = 1; i < segs.length; i++) expect(doc.text.slice(segs[i - 1]?.end, segs[i]?.start)).toBe("\n");
}

/** Asserts each reply directly follows its parent or an earlier reply of the same thread. */
function expectThreadsContiguous(doc: ExtractedDocument): void {
  const segs = doc.segments ?? [];
  segs.forEach((s, i) => {
    if (s.metadata.isReply !== true) return;
    const prev = segs[i - 1]?.metadata;
    const sameThread = prev?.threadTs === s.metadata.threadTs || prev?.ts === s.metadata.threadTs;
    expect(sameThread, `reply ${String(s.metadata.ts)} follows its thread`).toBe(true);
  });
}

describe("Slack export folder and .zip", () => {
  it("the folder and testarchive.zip give identical documents", async () => {
    const folder = await extractFile(EXPORT_DIR);
    const zip = await extractFile(EXPORT_ZIP);
    expect(folder.map((d) => d.metadata.channel)).toEqual(["enrique", "traveling-sailor"]);
    expect(zip.map((d) => d.metadata.channel)).toEqual(["enrique", "traveling-sailor"]);
    expect(zip.map((d) => d.text)).toEqual(folder.map((d) => d.text));
    expect(zip.map((d) => d.segments)).toEqual(folder.map((d) => d.segments));
    expect(folder.map((d) => d.metadata.messageCount)).toEqual([96, 51]);

    const [enrique] = zip;
    if (!enrique) throw new Error("no document");
    expect(enrique.uri).toBe(`${EXPORT_ZIP}#enrique`);
    expect(enrique.metadata).toMatchObject({
      path: EXPORT_ZIP,
      type: "slack",
      title: "#enrique",
      channel: "enrique",
      channelId: "C0JGLMMNX",
      format: "zip",
      messageCount: 96,
      tsStart: "1452837352.000006",
      timeStart: "2016-01-15T05:55:52.000Z",
      tsEnd: "1459233874.000036",
      timeEnd: "2016-03-29T06:44:34.000Z",
    });
    expect(folder[0]?.metadata.format).toBe("export");
    expect(enrique.segments?.[0]?.metadata).toEqual({
      channel: "enrique",
      user: "Hamza Faran",
      userId: "U0BMQB6JE",
      ts: "1452837352.000006",
      time: "2016-01-15T05:55:52.000Z",
      isReply: false,
    });
    expect(enrique.text).not.toContain("has joined the channel");
    expect(enrique.text).not.toContain("added an integration");
    expectTiledSegments(enrique);
  });

  it("reads a .zip whose entries sit under a top-level folder", async () => {
    const files = folderContents(EXPORT_DIR);
    const nested = Object.fromEntries(Object.entries(files).map(([k, v]) => [`slack-export/${k}`, v]));
    const path = await writeZip(nested, "nested.zip");
    const docs = await extractFile(path);
    const folder = await extractFile(EXPORT_DIR);
    expect(docs.map((d) => d.uri)).toEqual([`${path}#enrique`, `${path}#traveling-sailor`]);
    expect(docs.map((d) => d.text)).toEqual(folder.map((d) => d.text));
  });

  it("gives permalinks when workspaceUrl is set", async () => {
    const options: ExtractOptions = { slack: { workspaceUrl: "https://mesos-magellan.slack.com/" } };
    const [enrique] = await extractFile(EXPORT_DIR, undefined, options);
    expect(enrique?.metadata.workspaceUrl).toBe("https://mesos-magellan.slack.com");
    expect(enrique?.segments?.[0]?.metadata.link).toBe(
      "https://mesos-magellan.slack.com/archives/C0JGLMMNX/p1452837352000006",
    );
    // Without the option there is no link.
    const [plain] = await extractFile(EXPORT_DIR);
    expect(plain?.segments?.some((s) => "link" in s.metadata)).toBe(false);
  });
});

describe("threads, edits, broadcasts and links in a synthetic export", () => {
  const users = [
    { id: "U1", name: "alice", real_name: "Alice A" },
    { id: "U2", name: "bob" },
  ];
  const root = {
    type: "message",
    user: "U1",
    ts: "1463061780.000100",
    thread_ts: "1463061780.000100",
    text: "Deploy?",
  };
  const reply1 = {
    type: "message",
    user: "U2",
    ts: "1463062000.000300",
    thread_ts: "1463061780.000100",
    text: "yes",
  };
  const files = {
    "users.json": users,
    "channels.json": [{ id: "C1", name: "general", purpose: { value: "Deploys" } }],
    "general/2016-05-12.json": [
      root,
      { type: "message", user: "U2", ts: "1463061900.000200", text: "typo nite" },
      reply1,
      { type: "message", user: "U1", ts: "1463062100.000400", text: "to be deleted" },
      {
        type: "message",
        subtype: "message_changed",
        hidden: true,
        ts: "1463062200.000000",
        message: {
          type: "message",
          user: "U2",
          ts: "1463061900.000200",
          text: "typo note",
          edited: { user: "U2", ts: "1463062200.000000" },
        },
      },
      {
        type: "message",
        subtype: "message_deleted",
        hidden: true,
        deleted_ts: "1463062100.000400",
        ts: "1463062300.000000",
      },
      {
        type: "message",
        subtype: "channel_topic",
        user: "U1",
        ts: "1463062400.000000",
        text: "<@U1> set the channel topic: x",
      },
    ],
    "general/2016-05-13.json": [
      { type: "message", user: "U2", ts: "1463140000.000400", text: "next day" },
      // A reply in a later day file, posted to the channel too, and listed twice.
      {
        type: "message",
        subtype: "thread_broadcast",
        user: "U1",
        ts: "1463141000.000500",
        thread_ts: "1463061780.000100",
        text: "done <@U2>",
      },
      {
        type: "message",
        user: "U1",
        ts: "1463141000.000500",
        thread_ts: "1463061780.000100",
        text: "done <@U2>",
      },
    ],
  };

  it("rebuilds threads across day files, keeps edits, drops deletions and notices", async () => {
    const dir = writeExport(files);
    const [doc] = await extractFile(dir, undefined, { slack: { workspaceUrl: "https://acme.slack.com" } });
    if (!doc) throw new Error("no document");
    expect(doc.text).toBe(
      [
        "[2016-05-12 14:03] Alice A: Deploy?",
        "  ↳ [2016-05-12 14:06] bob: yes",
        "  ↳ [2016-05-13 12:03] Alice A: done @bob",
        "[2016-05-12 14:05] bob: typo note",
        "[2016-05-13 11:46] bob: next day",
      ].join("\n"),
    );
    expect(doc.text.match(/done @bob/g)).toHaveLength(1);
    expect(doc.metadata).toMatchObject({
      channel: "general",
      channelId: "C1",
      purpose: "Deploys",
      messageCount: 5,
    });
    expectTiledSegments(doc);
    expectThreadsContiguous(doc);
    expect(byTs(doc, "1463061780.000100")?.metadata).toEqual({
      channel: "general",
      user: "Alice A",
      userId: "U1",
      ts: "1463061780.000100",
      time: "2016-05-12T14:03:00.000Z",
      threadTs: "1463061780.000100",
      isReply: false,
      link: "https://acme.slack.com/archives/C1/p1463061780000100",
    });
    expect(byTs(doc, "1463141000.000500")?.metadata).toMatchObject({
      isReply: true,
      broadcast: true,
      threadTs: "1463061780.000100",
      link: "https://acme.slack.com/archives/C1/p1463141000000500?thread_ts=1463061780.000100&cid=C1",
    });
    expect(byTs(doc, "1463061900.000200")?.metadata.edited).toBe(true);
    expect(byTs(doc, "1463062000.000300")?.metadata.edited).toBeUndefined();
  });

  it("keeps system notices with keepSystemMessages", async () => {
    const dir = writeExport(files);
    const [doc] = await extractFile(dir, undefined, { slack: { keepSystemMessages: true } });
    const topic = doc && byTs(doc, "1463062400.000000");
    expect(topic?.metadata.system).toBe("channel_topic");
    expect(doc && segmentText(doc, topic)).toBe(
      "[2016-05-12 14:13] Alice A: @Alice A set the channel topic: x",
    );
    // Deleted messages stay deleted.
    expect(doc?.text).not.toContain("to be deleted");
  });

  it("reports an unreadable day file as a warning and keeps the rest", async () => {
    const dir = writeExport({ ...files, "general/2016-05-14.json": "[{ not json" });
    const [doc] = await extractFile(dir);
    expect(doc?.metadata.messageCount).toBe(5);
    expect(doc?.warnings).toEqual([
      expect.stringMatching(/^general\/2016-05-14\.json: invalid JSON .*day skipped$/),
    ]);
  });
});

describe("B22 case", () => {
  const must = async (options: ExtractOptions = {}): Promise<ExtractedDocument> => {
    const docs = await extractFile(writeExport(B22), undefined, options);
    expect(docs).toHaveLength(1);
    return docs[0] as ExtractedDocument;
  };

  it("renders entities, mentions, links, bots, edits and file-only messages", async () => {
    const doc = await must();
    const m2 = segmentText(doc, byTs(doc, "1715335200.000200"));
    expect(m2).toBe(
      "[2024-05-10 10:00] Ana Example: Ping @Ana Example and @U09ZZZ and @here: see incident 42 " +
        "(https://status.example.com/incidents/42) and https://example.com/runbook. Latency < 200ms & errors > 0",
    );
    for (const raw of ["&lt;", "&gt;", "&amp;", "<http", "|incident", "<@", "<!"])
      expect(m2).not.toContain(raw);
    expect(byTs(doc, "1715335300.000300")?.metadata).toEqual({
      channel: "ops",
      user: "deploybot",
      ts: "1715335300.000300",
      time: "2024-05-10T10:01:40.000Z",
      isReply: false,
      bot: true,
    });
    expect(segmentText(doc, byTs(doc, "1715335400.000400"))).toBe(
      "[2024-05-10 10:03] Ana Example: [file: diagram.png]",
    );
    expect(doc.text.match(/Rollback done/g)).toHaveLength(1);
    expect(byTs(doc, "1715335500.000500")?.metadata.edited).toBe(true);
    // should: the channel_join notice is not indexed.
    expect(doc.text).not.toContain("has joined the channel");
    expect(byTs(doc, "1715331600.000100")).toBeUndefined();
    expect(doc.metadata.messageCount).toBe(4);
  });

  it("gives the same document from a .zip and keeps the join with keepSystemMessages", async () => {
    const folder = await must();
    const [zipped] = await extractFile(await writeZip(B22));
    expect(zipped?.text).toBe(folder.text);
    const kept = await must({ slack: { keepSystemMessages: true } });
    expect(kept.metadata.messageCount).toBe(5);
    expect(byTs(kept, "1715331600.000100")?.metadata.system).toBe("channel_join");
    expect(kept.text.split("\n")[0]).toBe(
      "[2024-05-10 09:00] Ana Example: @Ana Example has joined the channel",
    );
  });
});

describe("Slack API conversations.history dumps (archlinuxjp)", () => {
  it("orders newest-first history by time, threads contiguous, Japanese intact, joins dropped", async () => {
    const path = ARCH("20200401_general.json");
    const [doc] = await extractFile(path);
    if (!doc) throw new Error("no document");
    expect(doc.uri).toBe(`${path}#general`);
    expect(doc.metadata).toMatchObject({
      path,
      type: "slack",
      title: "#general",
      channel: "general",
      format: "history",
      // 200 messages, 10 of them channel_join notices.
      messageCount: 190,
      tsStart: "1586222743.043700",
      tsEnd: "1588110358.235000",
    });
    expect(doc.metadata.channelId).toBeUndefined();
    expectTiledSegments(doc);
    expectThreadsContiguous(doc);
    expect(doc.text).toContain(
      "[2020-04-28 21:45] yutakatay: あれ？そうなんですね。昨日初めて気がついた。ありがとうございます！",
    );
    expect(doc.text).not.toContain("チャンネルに参加しました");
    expect(doc.text).not.toContain("\uFFFD");
    // Top-level messages ascend in time.
    const top = (doc.segments ?? [])
      .filter((s) => s.metadata.isReply !== true)
      .map((s) => String(s.metadata.ts));
    expect(top).toEqual([...top].sort());

    // The thread_broadcast reply comes right after its parent, once.
    const segs = doc.segments ?? [];
    const parent = segs.findIndex((s) => s.metadata.ts === "1587613691.203000");
    const reply = segs[parent + 1];
    expect(reply?.metadata).toMatchObject({
      ts: "1587953140.229000",
      threadTs: "1587613691.203000",
      isReply: true,
      broadcast: true,
      user: "yutakatay",
      userId: "yutakatay",
    });
    expect(segs[parent]?.metadata.threadTs).toBe("1587613691.203000");
    expect(segmentText(doc, reply)).toMatch(
      /^ {2}↳ \[2020-04-27 02:05\] yutakatay: これまだちょいちょい発生しますね/,
    );
    expect(doc.text.match(/これまだちょいちょい発生しますね/g)).toHaveLength(1);
    expect(segs.filter((s) => s.metadata.broadcast === true)).toHaveLength(4);

    // Bot posts (incoming webhook) are marked and named.
    const bot = byTs(doc, "1586883665.171200");
    expect(bot?.metadata).toMatchObject({ bot: true, user: "webhookbot", threadTs: "1586883665.171200" });
    expect(segmentText(doc, bot)).toContain("zn_poly 0.9.2-2 update requires manual intervention");
    // Edited messages are marked; a message with text and a file shows its text.
    expect(segs.filter((s) => s.metadata.edited === true)).toHaveLength(9);
    expect(segmentText(doc, byTs(doc, "1586228286.056300"))).toBe(
      "[2020-04-07 02:58] sherwyn.sen: この問題に遭ったときに写真とれた",
    );
    // Without users.json a mention keeps the raw user name.
    expect(segmentText(doc, byTs(doc, "1586315086.114300"))).toMatch(
      /^\[2020-04-08 03:04\] sherwyn\.sen: @yutakatayええー、ぼくのthinkpadもそうみたいなんですよ$/,
    );
  });

  it("names the continuation page after its channel and marks the page", async () => {
    const [doc] = await extractFile(ARCH("20200401_general-2.json"));
    expect(doc?.metadata).toMatchObject({ channel: "general", title: "#general", page: 2, messageCount: 29 });
    expect(doc && byTs(doc, "1585934612.029400")?.metadata).toMatchObject({
      isReply: true,
      broadcast: true,
      edited: true,
    });
    const [random] = await extractFile(ARCH("20200401_random.json"));
    expect(random?.metadata.channel).toBe("random");
    expect(random?.metadata.page).toBeUndefined();
  });

  it("refuses the empty monthly dumps with 'no messages'", async () => {
    for (const name of [
      "20191201_general.json",
      "20191201_random.json",
      "20200101_general.json",
      "20200201_random.json",
      "20200301_general.json",
    ]) {
      const err = await extractionError(() => extractFile(ARCH(name)));
      expect(err.path).toBe(ARCH(name));
      expect(err.reason).toMatch(/^no messages/);
    }
  });

  it("links history messages when the JSON names the channel", async () => {
    const path = join(freshDir(), "history.json");
    writeFileSync(
      path,
      JSON.stringify({
        ok: true,
        channel: { id: "C9", name: "dev" },
        messages: [
          {
            type: "message",
            user: "U2",
            ts: "1700000100.000200",
            thread_ts: "1700000000.000100",
            text: "reply",
          },
          {
            type: "message",
            user: "U1",
            ts: "1700000000.000100",
            text: "",
            blocks: [
              {
                type: "rich_text",
                elements: [
                  {
                    type: "rich_text_section",
                    elements: [
                      { type: "text", text: "see " },
                      { type: "link", url: "https://x.example/a", text: "doc" },
                      { type: "text", text: " " },
                      { type: "user", user_id: "U2" },
                    ],
                  },
                  { type: "rich_text_preformatted", elements: [{ type: "text", text: "ls -la" }] },
                  {
                    type: "rich_text_list",
                    style: "bullet",
                    elements: [{ type: "rich_text_section", elements: [{ type: "text", text: "one" }] }],
                  },
                ],
              },
            ],
          },
          {
            type: "message",
            subtype: "channel_join",
            user: "U3",
            ts: "1699999999.000000",
            text: "<@U3> joined",
          },
        ],
      }),
    );
    const [doc] = await extractFile(path, undefined, { slack: { workspaceUrl: "https://acme.slack.com" } });
    expect(doc?.uri).toBe(`${path}#dev`);
    expect(doc?.text).toBe(
      [
        "[2023-11-14 22:13] U1: see doc (https://x.example/a) @U2",
        "```ls -la```",
        "- one",
        "  ↳ [2023-11-14 22:15] U2: reply",
      ].join("\n"),
    );
    expect(doc?.segments?.map((s) => s.metadata.link)).toEqual([
      "https://acme.slack.com/archives/C9/p1700000000000100",
      "https://acme.slack.com/archives/C9/p1700000100000200?thread_ts=1700000000.000100&cid=C9",
    ]);
  });

  it("warns that there are no permalinks when a workspace URL is set but the dump has no channel id", async () => {
    const path = ARCH("20200401_general.json");
    const [plain] = await extractFile(path);
    expect(plain?.warnings).toBeUndefined();
    const [doc] = await extractFile(path, undefined, {
      slack: { workspaceUrl: "https://archlinuxjp.slack.com" },
    });
    expect(doc?.metadata.channelId).toBeUndefined();
    expect(doc?.segments?.every((s) => s.metadata.link === undefined)).toBe(true);
    expect(doc?.warnings).toEqual(["no permalinks: the channel id is unknown"]);
    // The same for an export channel whose channels.json record has no id.
    const dir = writeExport({ ...B22, "channels.json": [{ name: "ops" }] });
    const [exported] = await extractFile(dir, undefined, {
      slack: { workspaceUrl: "https://acme.slack.com" },
    });
    expect(exported?.metadata.messageCount).toBe(4);
    expect(exported?.warnings).toEqual(["no permalinks: the channel id is unknown"]);
  });

  it("reads an export day file on its own, with the export's names", async () => {
    const [doc] = await extractFile(join(EXPORT_DIR, "enrique", "2016-01-14.json"), undefined, {
      slack: { workspaceUrl: "https://mesos-magellan.slack.com" },
    });
    // Four join notices dropped, two messages kept.
    expect(doc?.metadata).toMatchObject({
      channel: "enrique",
      channelId: "C0JGLMMNX",
      format: "history",
      messageCount: 2,
    });
    expect(doc?.text.split("\n")[0]).toBe(
      "[2016-01-15 05:55] Hamza Faran: @Harry Potter: Created an issue for a setup.py so that it can be installed to a standard place",
    );
    expect(doc?.segments?.[0]?.metadata.link).toBe(
      "https://mesos-magellan.slack.com/archives/C0JGLMMNX/p1452837352000006",
    );
  });
});

describe("in-memory content", () => {
  it("extracts a history file and an export .zip from bytes", async () => {
    const [history] = await extractBytes(
      "20200401_general-2.json",
      readFileSync(ARCH("20200401_general-2.json")),
    );
    expect(history?.uri).toBe("20200401_general-2.json#general-2");
    expect(history?.metadata.messageCount).toBe(29);
    const docs = await slackExtractor.extract("upload.zip", {
      options: resolveExtractOptions(),
      bytes: readFileSync(EXPORT_ZIP),
    });
    const folder = await extractFile(EXPORT_DIR);
    expect(docs.map((d) => d.uri)).toEqual(["upload.zip#enrique", "upload.zip#traveling-sailor"]);
    expect(docs.map((d) => d.text)).toEqual(folder.map((d) => d.text));
  });
});

describe("bad input and limits", () => {
  it("names the file and the problem for malformed history JSON and API errors", async () => {
    const dir = freshDir();
    const bad = join(dir, "20200401_x.json");
    writeFileSync(bad, '{"ok": true, "messages": [');
    expect((await extractionError(() => extractFile(bad, "slack"))).reason).toMatch(/^invalid JSON/);
    const failed = join(dir, "failed.json");
    writeFileSync(failed, '{"ok": false, "error": "channel_not_found"}');
    expect((await extractionError(() => extractFile(failed, "slack"))).reason).toBe(
      "Slack API error response (channel_not_found)",
    );
    const other = join(dir, "other.json");
    writeFileSync(other, '{"ok": true, "items": []}');
    expect((await extractionError(() => extractFile(other, "slack"))).reason).toMatch(/no "messages" array/);
  });

  it("respects maxFileBytes for a history file", async () => {
    const err = await extractionError(() =>
      extractFile(ARCH("20200401_general.json"), undefined, { limits: { maxFileBytes: 10_000 } }),
    );
    expect(err.reason).toMatch(/too large: .* \(limit maxFileBytes = 9\.8 KiB\)/);
  });

  it("refuses an export whose users.json is not an array", async () => {
    const dir = writeExport({ ...B22, "users.json": { members: [] } });
    const err = await extractionError(() => extractFile(dir));
    expect(err.path).toBe(dir);
    expect(err.reason).toBe("users.json: expected a JSON array, got an object");
    const broken = writeExport({ ...B22, "channels.json": "[{" });
    expect((await extractionError(() => extractFile(broken))).reason).toMatch(
      /^channels\.json: invalid JSON/,
    );
  });

  it("refuses a zip without channels.json", async () => {
    const path = await writeZip({ "users.json": [], "ops/2024-05-10.json": [] }, "nochannels.zip");
    const err = await extractionError(() => extractFile(path, "slack"));
    expect(err.path).toBe(path);
    expect(err.reason).toBe("not a Slack export: the archive has no channels.json");
  });

  it("refuses a zip with a ../ entry name", async () => {
    const path = await writeZip({ ...B22, "../evil.json": [] }, "evil.zip");
    const err = await extractionError(() => extractFile(path, "slack"));
    expect(err.path).toBe(path);
    expect(err.reason).toMatch(/^unsafe entry name "\.\.\/(evil\.json)?" in the archive \(path traversal/);
  });

  it("refuses a zip over maxUnpackedBytes or maxArchiveEntries", async () => {
    const big = Array.from({ length: 2000 }, (_, i) => ({
      type: "message",
      user: "U01AAA",
      ts: `1715340000.${String(i).padStart(6, "0")}`,
      text: "the same words again and again to compress well",
    }));
    const path = await writeZip({ ...B22, "ops/2024-05-11.json": big }, "big.zip");
    expect(statSync(path).size).toBeLessThan(50_000);
    const err = await extractionError(() =>
      extractFile(path, "slack", { limits: { maxUnpackedBytes: 100_000 } }),
    );
    expect(err.path).toBe(path);
    expect(err.reason).toMatch(/^unpacked archive too large: .* \(limit maxUnpackedBytes = 97\.7 KiB\)$/);
    const entries = await extractionError(() =>
      extractFile(path, "slack", { limits: { maxArchiveEntries: 3 } }),
    );
    expect(entries.reason).toBe("archive has too many entries: 5 (limit maxArchiveEntries = 3)");
    // Within the limits the same zip extracts.
    const [doc] = await extractFile(path);
    expect(doc?.metadata.messageCount).toBe(2004);
  });

  it("counts the real inflated bytes, not the sizes the headers claim", async () => {
    const big = JSON.stringify(
      Array.from({ length: 4000 }, (_, i) => ({
        type: "message",
        user: "U1",
        ts: `1.${i}`,
        text: "lie ".repeat(20),
      })),
    );
    const path = await writeZip({ ...B22, "ops/2024-05-12.json": big }, "forged.zip");
    // Forge the entry's uncompressed size (local header offset 22, central directory offset 24) to 100 bytes.
    const bytes = readFileSync(path);
    const name = Buffer.from("ops/2024-05-12.json");
    let patched = 0;
    for (let i = 0; i + 46 < bytes.length; i++) {
      const sig = bytes.readUInt32LE(i);
      if (sig === 0x04034b50 && bytes.subarray(i + 30, i + 30 + name.length).equals(name)) {
        bytes.writeUInt32LE(100, i + 22);
        patched++;
      } else if (sig === 0x02014b50 && bytes.subarray(i + 46, i + 46 + name.length).equals(name)) {
        bytes.writeUInt32LE(100, i + 24);
        patched++;
      }
    }
    expect(patched).toBe(2);
    writeFileSync(path, bytes);
    const err = await extractionError(() =>
      extractFile(path, "slack", { limits: { maxUnpackedBytes: 50_000 } }),
    );
    expect(err.reason).toMatch(/^unpacked archive too large: .* \(limit maxUnpackedBytes = 48\.8 KiB\)$/);
    // Within the limit, the forged size is still caught.
    const forged = await extractionError(() => extractFile(path, "slack"));
    expect(forged.reason).toMatch(
      /^ops\/2024-05-12\.json: inflated to \d+ bytes but its header declares 100/,
    );
  });

  it("refuses a .zip that is not a zip", async () => {
    const path = join(freshDir(), "garbage.zip");
    writeFileSync(path, "channels.json users.json but not a zip at all");
    const err = await extractionError(() => extractFile(path, "slack"));
    expect(err.reason).toMatch(/^not a readable \.zip archive/);
  });
});

describe("files over maxFileBytes inside an export", () => {
  const limits = { maxFileBytes: 2000 };
  /** A day file of about 5 KB, over the 2,000-byte limit (B22's own files are under 1 KB). */
  const bigDay = JSON.stringify(
    Array.from({ length: 60 }, (_, i) => ({
      type: "message",
      user: "U01AAA",
      ts: `1715430000.${String(i).padStart(6, "0")}`,
      text: "a day file over the limit",
    })),
  );
  const TOO_LARGE =
    /^ops\/2024-05-11\.json: too large: \d+\.\d KiB \(limit maxFileBytes = 2\.0 KiB\); day skipped$/;

  it("skips an oversized day file with a warning, in a folder and a zip, like an invalid one", async () => {
    expect(bigDay.length).toBeGreaterThan(4000);
    const files = { ...B22, "ops/2024-05-11.json": bigDay, "ops/2024-05-12.json": "[{ not json" };
    const [folder, ...more] = await extractFile(writeExport(files), undefined, { limits });
    expect(more).toHaveLength(0);
    expect(folder?.metadata.messageCount).toBe(4);
    expect(folder?.warnings).toEqual([
      expect.stringMatching(TOO_LARGE),
      expect.stringMatching(/^ops\/2024-05-12\.json: invalid JSON .*; day skipped$/),
    ]);
    const [zipped] = await extractFile(await writeZip(files, "oversized-day.zip"), undefined, { limits });
    expect(zipped?.text).toBe(folder?.text);
    expect(zipped?.warnings).toEqual(folder?.warnings);
    // An optional groups.json over the limit is skipped too.
    const groups = writeExport({
      ...B22,
      "groups.json": JSON.stringify([{ id: "G1", name: "x".repeat(3000) }]),
    });
    const [withGroups] = await extractFile(groups, undefined, { limits });
    expect(withGroups?.warnings).toEqual([
      expect.stringMatching(/^groups\.json: too large: .* \(limit maxFileBytes = 2\.0 KiB\); skipped$/),
    ]);
  });

  it("still refuses users.json or channels.json over the limit", async () => {
    const users = [{ id: "U01AAA", real_name: "x".repeat(3000) }];
    const dir = writeExport({ ...B22, "users.json": users });
    const err = await extractionError(() => extractFile(dir, undefined, { limits }));
    expect(err.path).toBe(dir);
    expect(err.reason).toMatch(/^users\.json too large: 3\.0 KiB \(limit maxFileBytes = 2\.0 KiB\)$/);
    const zip = await writeZip({ ...B22, "channels.json": [{ id: "C1", name: "x".repeat(3000) }] });
    const zipErr = await extractionError(() => extractFile(zip, undefined, { limits }));
    expect(zipErr.reason).toMatch(
      /^zip entry channels\.json too large: .* \(limit maxFileBytes = 2\.0 KiB\)$/,
    );
  });

  it("reports an entry whose header under-states its size as 'more than' the limit", async () => {
    const path = await writeZip({ ...B22, "ops/2024-05-11.json": bigDay }, "forged-day.zip");
    expect(forgeEntrySize(path, "ops/2024-05-11.json", 100)).toBe(2);
    const [doc] = await extractFile(path, undefined, { limits });
    expect(doc?.metadata.messageCount).toBe(4);
    expect(doc?.warnings).toEqual([
      "ops/2024-05-11.json: too large: more than 2.0 KiB (limit maxFileBytes = 2.0 KiB); day skipped",
    ]);
    // A required file forged the same way is refused, with the same wording.
    const users = await writeZip(
      { ...B22, "users.json": [{ id: "U01AAA", real_name: "x".repeat(3000) }] },
      "forged-users.zip",
    );
    expect(forgeEntrySize(users, "users.json", 50)).toBe(2);
    const err = await extractionError(() => extractFile(users, undefined, { limits }));
    expect(err.reason).toBe(
      "zip entry users.json too large: more than 2.0 KiB (limit maxFileBytes = 2.0 KiB)",
    );
  });
});

describe("a busy channel", () => {
  it("reads a day file of 130,000 messages (no argument spread that overflows the stack)", async () => {
    const { dir, cleanup } = tempDir();
    try {
      mkdirSync(join(dir, "general"));
      writeFileSync(join(dir, "channels.json"), JSON.stringify([{ id: "C1", name: "general" }]));
      writeFileSync(join(dir, "users.json"), JSON.stringify([{ id: "U1", name: "ann" }]));
      const messages = Array.from({ length: 130_000 }, (_, i) => ({
        type: "message",
        user: "U1",
        text: `message ${i}`,
        ts: `${1_600_000_000 + i}.000100`,
      }));
      writeFileSync(join(dir, "general", "2020-09-13.json"), JSON.stringify(messages));
      const [doc] = await extractFile(dir);
      expect(doc?.segments).toHaveLength(130_000);
      expect(doc?.text).toContain("message 129999");
    } finally {
      cleanup();
    }
  }, 60_000);
});
