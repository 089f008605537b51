/**
 * Slack workspace export extractor: one document per channel, messages ordered
 * thread-contiguously, one segment per message.
 */
import { existsSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { ExtractionError } from "../errors.js";
import type { ExtractedDocument, Segment } from "../types.js";
import type { Extractor } from "./contract.js";
import { compact, nonBlank } from "./util.js";

/** The fields of a Slack message the extractor reads. */
interface SlackMessage {
  type?: string;
  subtype?: string;
  ts?: string;
  thread_ts?: string;
  user?: string;
  username?: string;
  bot_id?: string;
  text?: string;
  hidden?: boolean;
  user_profile?: { real_name?: string; display_name?: string; name?: string };
  bot_profile?: { name?: string };
  attachments?: { pretext?: string; title?: string; title_link?: string; text?: string; fallback?: string }[];
  files?: { name?: string; title?: string }[];
  file?: { name?: string; title?: string };
  message?: SlackMessage;
}

interface SlackUser {
  id?: string;
  name?: string;
  real_name?: string;
  profile?: { real_name?: string; display_name?: string };
}

interface SlackChannel {
  id?: string;
  name?: string;
  topic?: { value?: string };
  purpose?: { value?: string };
}

/** Subtypes that carry no conversation content. */
const DROPPED_SUBTYPES = new Set([
  "channel_join",
  "channel_leave",
  "group_join",
  "group_leave",
  "message_deleted",
  "tombstone",
]);

/** Lookup tables used to render message text. */
export interface SlackContext {
  /** User id → display name. */
  users: ReadonlyMap<string, string>;
  /** Channel id → channel name. */
  channels: ReadonlyMap<string, string>;
}

/**
 * Renders Slack message markup as plain text:
 * `<@U123>` → `@Name` (or `@U123` when unknown), `<#C123|general>` → `#general`,
 * `<!here>` → `@here`, `<!subteam^S1|@team>` → `@team`, `<http://x|label>` →
 * `label (http://x)`, `<http://x>` → `http://x`, `<mailto:a@b|a@b>` → `a@b`; then
 * the entities `&lt; &gt; &amp;` are decoded (once). Line endings become `\n` and
 * trailing whitespace is trimmed.
 */
export function renderSlackText(raw: string, ctx: SlackContext): string {
  const replaced = raw.replace(/<([^<>\n]*)>/g, (_m, inner: string) => {
    const bar = inner.indexOf("|");
    const target = bar >= 0 ? inner.slice(0, bar) : inner;
    const label = bar >= 0 ? nonBlank(inner.slice(bar + 1)) : undefined;
    if (target.startsWith("@")) {
      const id = target.slice(1);
      const name = ctx.users.get(id) ?? label?.replace(/^@/, "") ?? id;
      return `@${name}`;
    }
    if (target.startsWith("#")) {
      const id = target.slice(1);
      return `#${label ?? ctx.channels.get(id) ?? id}`;
    }
    if (target.startsWith("!")) {
      const command = target.slice(1);
      if (label) return label;
      const word = command.split("^")[0] ?? command;
      return `@${word}`;
    }
    if (!label) return target.replace(/^mailto:/, "");
    if (label === target || target === `mailto:${label}` || target === `tel:${label}`) return label;
    return `${label} (${target})`;
  });
  return replaced
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&amp;/g, "&")
    .replace(/\r\n?/g, "\n")
    .replace(/[ \t]+$/gm, "")
    .trim();
}

/** Compares two Slack timestamps (`"1452837318.000002"`) numerically without float loss. */
export function compareTs(a: string, b: string): number {
  const [as = "0", af = ""] = a.split(".");
  const [bs = "0", bf = ""] = b.split(".");
  const d = Number(as) - Number(bs);
  if (d !== 0) return d;
  return af.padEnd(6, "0").localeCompare(bf.padEnd(6, "0"));
}

/** Formats a Slack timestamp as `YYYY-MM-DD HH:MM` (UTC). */
function formatTs(ts: string): string {
  const seconds = Number(ts.split(".")[0]);
  if (!Number.isFinite(seconds)) return "????-??-?? ??:??";
  return new Date(seconds * 1000).toISOString().slice(0, 16).replace("T", " ");
}

async function readJson(path: string, exportDir: string): Promise<unknown> {
  let raw: string;
  try {
    raw = await readFile(path, "utf8");
  } catch (err) {
    throw new ExtractionError(exportDir, `cannot read ${path}: ${(err as Error).message}`, { cause: err });
  }
  try {
    return JSON.parse(raw);
  } catch (err) {
    throw new ExtractionError(exportDir, `invalid JSON in ${path}: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

async function readOptionalJsonArray(path: string, exportDir: string): Promise<unknown[]> {
  if (!existsSync(path)) return [];
  const data = await readJson(path, exportDir);
  return Array.isArray(data) ? data : [];
}

/** Display name of a user: real name, else profile display name, else user name. */
function userName(u: SlackUser): string | undefined {
  return (
    nonBlank(u.real_name) ??
    nonBlank(u.profile?.real_name) ??
    nonBlank(u.profile?.display_name) ??
    nonBlank(u.name)
  );
}

/** Text of a message's attachments (bot posts, unfurls): pretext, title, text, else fallback. */
function attachmentText(m: SlackMessage): string {
  const parts: string[] = [];
  for (const a of m.attachments ?? []) {
    const own = [a.pretext, a.title && a.title_link ? `${a.title} (${a.title_link})` : a.title, a.text]
      .map((s) => nonBlank(s))
      .filter((s): s is string => s !== undefined);
    if (own.length > 0) parts.push(own.join("\n"));
    else if (nonBlank(a.fallback)) parts.push(a.fallback as string);
  }
  return parts.join("\n");
}

/** One message ready for layout. */
interface Entry {
  ts: string;
  threadTs?: string;
  isReply: boolean;
  user: string;
  userId?: string;
  bot: boolean;
  text: string;
}

/** Names of bots announced by `bot_add` messages (`…/services/B0123|github>`). */
function botNamesFrom(messages: SlackMessage[]): Map<string, string> {
  const names = new Map<string, string>();
  for (const m of messages) {
    if (m.subtype !== "bot_add" || !m.text) continue;
    for (const match of m.text.matchAll(/services\/(B[A-Z0-9]+)\|([^>]+)>/g)) {
      if (match[1] && match[2]) names.set(match[1], match[2]);
    }
  }
  return names;
}

/** Turns a raw message into an entry, or `undefined` for system/empty messages. */
function toEntry(raw: SlackMessage, ctx: SlackContext, botNames: Map<string, string>): Entry | undefined {
  const m =
    raw.subtype === "message_changed" && raw.message ? { ...raw.message, ts: raw.message.ts ?? raw.ts } : raw;
  if (!m.ts || m.hidden || (m.subtype && DROPPED_SUBTYPES.has(m.subtype))) return undefined;
  if (m.type !== undefined && m.type !== "message") return undefined;
  let text = renderSlackText(m.text ?? "", ctx);
  if (text === "") text = renderSlackText(attachmentText(m), ctx);
  if (text === "") {
    const files = [...(m.files ?? []), ...(m.file ? [m.file] : [])];
    const names = files.map((f) => nonBlank(f.name) ?? nonBlank(f.title)).filter((s): s is string => !!s);
    if (names.length > 0) text = names.map((n) => `[file: ${n}]`).join(" ");
  }
  if (text === "") return undefined;
  const bot = m.subtype === "bot_message" || (!m.user && m.bot_id !== undefined);
  const userId = nonBlank(m.user);
  const user =
    (userId ? (ctx.users.get(userId) ?? userName(m.user_profile ?? {})) : undefined) ??
    nonBlank(m.username) ??
    nonBlank(m.bot_profile?.name) ??
    (m.bot_id ? botNames.get(m.bot_id) : undefined) ??
    userId ??
    (bot ? "bot" : "unknown");
  const threadTs = nonBlank(m.thread_ts);
  return {
    ts: m.ts,
    threadTs,
    isReply: threadTs !== undefined && threadTs !== m.ts,
    user,
    userId,
    bot,
    text,
  };
}

/**
 * Orders entries thread-contiguously: top-level messages by time, each followed
 * by its replies by time. Replies whose parent is missing are grouped at the
 * position of their thread's root timestamp.
 */
function threadOrder(entries: Entry[]): Entry[] {
  const groups = new Map<string, Entry[]>();
  for (const e of entries) {
    const key = e.isReply ? (e.threadTs as string) : e.ts;
    const group = groups.get(key);
    if (group) group.push(e);
    else groups.set(key, [e]);
  }
  const keys = [...groups.keys()].sort(compareTs);
  const out: Entry[] = [];
  for (const key of keys) {
    const group = groups.get(key) ?? [];
    group.sort((a, b) => Number(a.isReply) - Number(b.isReply) || compareTs(a.ts, b.ts));
    out.push(...group);
  }
  return out;
}

/** Day files of a channel folder, sorted by name (date). */
async function dayFiles(dir: string): Promise<string[]> {
  try {
    const names = await readdir(dir);
    return names.filter((n) => n.toLowerCase().endsWith(".json")).sort();
  } catch {
    return [];
  }
}

/**
 * Extracts an unpacked Slack export folder (`channels.json`, `users.json`,
 * `<channel>/<YYYY-MM-DD>.json`; `groups.json`, `mpims.json`, `dms.json` are read
 * too when present). Yields one document per channel that has messages, sorted by
 * channel name.
 *
 * Text layout: one line per message, `[YYYY-MM-DD HH:MM] Name: text` (UTC time;
 * multi-line messages keep their newlines), messages separated by `"\n"`. Messages
 * are ordered thread-contiguously: each top-level message is followed immediately
 * by its replies (found by `thread_ts`, across day files), and replies are
 * prefixed with `"  ↳ "`. Join/leave and deleted messages are dropped; a message
 * with no text shows its attachments' text or `[file: name]`. Markup is rendered
 * by {@link renderSlackText}. Duplicate timestamps are kept once.
 *
 * `segments`: one per message, `text.slice(start, end)` is exactly that message's
 * line(s) including the prefix; metadata `{ user, userId?, ts, threadTs?, isReply,
 * bot? }` (`threadTs` is set on replies and on thread parents, `bot: true` on bot posts).
 *
 * Document: `uri` = `<exportDir>#<channel>`; metadata `path` (the export folder),
 * `type: "slack"`, `title` = `#channel`, `channel`, `channelId`, `messageCount`,
 * and `topic` / `purpose` when set.
 *
 * @throws ExtractionError when `channels.json`/`users.json` are missing or not
 *   valid JSON, a day file is not valid JSON, or no channel has any message.
 */
export const slackExtractor: Extractor = {
  type: "slack",
  async extract(exportDir: string): Promise<ExtractedDocument[]> {
    const usersRaw = await readJson(join(exportDir, "users.json"), exportDir);
    const channelsRaw = await readJson(join(exportDir, "channels.json"), exportDir);
    if (!Array.isArray(usersRaw) || !Array.isArray(channelsRaw)) {
      throw new ExtractionError(exportDir, "users.json and channels.json must be JSON arrays");
    }
    const users = new Map<string, string>();
    for (const u of usersRaw as SlackUser[]) {
      const name = u?.id ? userName(u) : undefined;
      if (u?.id && name) users.set(u.id, name);
    }
    const channelList: SlackChannel[] = [
      ...(channelsRaw as SlackChannel[]),
      ...((await readOptionalJsonArray(join(exportDir, "groups.json"), exportDir)) as SlackChannel[]),
      ...((await readOptionalJsonArray(join(exportDir, "mpims.json"), exportDir)) as SlackChannel[]),
      ...((await readOptionalJsonArray(join(exportDir, "dms.json"), exportDir)) as SlackChannel[]).map(
        (c) => ({
          ...c,
          name: c.name ?? c.id,
        }),
      ),
    ];
    const channels = new Map<string, string>();
    for (const c of channelList) if (c?.id && c.name) channels.set(c.id, c.name);
    const ctx: SlackContext = { users, channels };

    const unique = new Map<string, SlackChannel & { name: string }>();
    for (const c of channelList) {
      if (typeof c?.name === "string" && c.name !== "" && !unique.has(c.name))
        unique.set(c.name, { ...c, name: c.name });
    }
    const byName = [...unique.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));

    const docs: ExtractedDocument[] = [];
    for (const channel of byName) {
      const dir = join(exportDir, channel.name);
      const raw: SlackMessage[] = [];
      for (const file of await dayFiles(dir)) {
        const data = await readJson(join(dir, file), exportDir);
        if (Array.isArray(data)) raw.push(...(data as SlackMessage[]));
      }
      const botNames = botNamesFrom(raw);
      const byTs = new Map<string, Entry>();
      for (const m of raw) {
        const entry = m && typeof m === "object" ? toEntry(m, ctx, botNames) : undefined;
        if (entry && !byTs.has(entry.ts)) byTs.set(entry.ts, entry);
      }
      if (byTs.size === 0) continue;
      const ordered = threadOrder([...byTs.values()]);
      const parents = new Set(ordered.filter((e) => e.isReply).map((e) => e.threadTs as string));

      let text = "";
      const segments: Segment[] = [];
      for (const e of ordered) {
        if (text !== "") text += "\n";
        const start = text.length;
        text += `${e.isReply ? "  ↳ " : ""}[${formatTs(e.ts)}] ${e.user}: ${e.text}`;
        const threadTs = e.isReply ? e.threadTs : parents.has(e.ts) ? e.ts : undefined;
        segments.push({
          start,
          end: text.length,
          metadata: compact({
            user: e.user,
            userId: e.userId,
            ts: e.ts,
            threadTs,
            isReply: e.isReply,
            bot: e.bot ? true : undefined,
          }),
        });
      }
      docs.push({
        uri: `${exportDir}#${channel.name}`,
        text,
        metadata: compact({
          path: exportDir,
          type: "slack" as const,
          title: `#${channel.name}`,
          channel: channel.name,
          channelId: channel.id,
          messageCount: segments.length,
          topic: nonBlank(channel.topic?.value),
          purpose: nonBlank(channel.purpose?.value),
        }),
        segments,
      });
    }
    if (docs.length === 0) throw new ExtractionError(exportDir, "Slack export has no messages");
    return docs;
  },
};
