/**
 * Slack extractor: one document per channel, messages ordered
 * thread-contiguously, one segment per message.
 *
 * Three inputs are read:
 * - an unpacked workspace export folder (`users.json`, `channels.json`,
 *   `<channel>/<YYYY-MM-DD>.json`);
 * - the same export as a `.zip` (read in memory with yauzl, entries may sit under a
 *   top-level folder; nothing is written to disk);
 * - a Slack API `conversations.history` JSON file (`{"ok": true, "messages": [...]}`)
 *   or a bare JSON array of messages (one channel per file).
 */
import { readdir, readFile, stat } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { type Entry, fromBufferPromise, getFileNameLowLevel, openPromise, type ZipFile } from "yauzl";
import { ExtractionError } from "../errors.js";
import type { ExtractedDocument, Segment } from "../types.js";
import type { ExtractContext, ExtractionLimits, Extractor, SlackExtractOptions } from "./contract.js";
import {
  asExtractionError,
  compact,
  decodeText,
  formatBytes,
  nonBlank,
  readSource,
  tooLarge,
} from "./util.js";

/** The fields of a Slack message the extractor reads (all optional: input is untrusted). */
interface SlackMessage {
  type?: unknown;
  subtype?: unknown;
  ts?: unknown;
  thread_ts?: unknown;
  deleted_ts?: unknown;
  user?: unknown;
  username?: unknown;
  bot_id?: unknown;
  text?: unknown;
  hidden?: unknown;
  edited?: { ts?: unknown };
  user_profile?: unknown;
  bot_profile?: { name?: unknown };
  attachments?: unknown;
  blocks?: unknown;
  files?: unknown;
  file?: unknown;
  message?: unknown;
}

/** A user record of `users.json` (or a message's `user_profile`). */
interface SlackUser {
  id?: unknown;
  name?: unknown;
  real_name?: unknown;
  display_name?: unknown;
  profile?: { real_name?: unknown; display_name?: unknown };
}

/** A channel record of `channels.json` (`groups.json`, `mpims.json`, `dms.json`). */
interface SlackChannel {
  id?: string;
  name?: string;
  topic?: { value?: unknown };
  purpose?: { value?: unknown };
}

/** Subtypes dropped always: they carry no content of their own (deletions, hidden events). */
const ALWAYS_DROPPED = new Set(["message_deleted", "tombstone", "message_replied"]);

/**
 * System notices (joins, leaves, topic/purpose/name changes, integrations, pins),
 * dropped unless `keepSystemMessages` is set.
 */
const SYSTEM_SUBTYPES = new Set([
  "channel_join",
  "channel_leave",
  "group_join",
  "group_leave",
  "channel_topic",
  "channel_purpose",
  "channel_name",
  "channel_archive",
  "channel_unarchive",
  "group_topic",
  "group_purpose",
  "group_name",
  "group_archive",
  "group_unarchive",
  "channel_convert_to_private",
  "channel_convert_to_public",
  "channel_posting_permissions",
  "bot_add",
  "bot_remove",
  "bot_enable",
  "bot_disable",
  "pinned_item",
  "unpinned_item",
  "reminder_add",
  "reminder_delete",
  "sh_room_created",
]);

/** Lookup tables used to render message text. */
export interface SlackContext {
  /** User id → display name. */
  users: ReadonlyMap<string, string>;
  /** Channel id → channel name. */
  channels: ReadonlyMap<string, string>;
}

const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** A JSON value's kind for error messages: `an array`, `an object`, `a string`… */
function kindOf(v: unknown): string {
  if (Array.isArray(v)) return "an array";
  if (v === null) return "null";
  return typeof v === "object" ? "an object" : `a ${typeof v}`;
}

/**
 * A file of an export (a folder file or a zip entry) over `limits.maxFileBytes`.
 * Fatal for `users.json`/`channels.json`; a day file or an optional file
 * (`groups.json`…) over the limit is skipped with a warning instead.
 */
class FileTooLarge extends ExtractionError {
  /**
   * @param source the export folder or .zip
   * @param what the file as named in the error (`general/2020-01-05.json`, `zip entry …`)
   * @param detail size and limit: `120.0 MiB (limit maxFileBytes = 100.0 MiB)`, or
   *   `more than 100.0 MiB (…)` when the limit was crossed while inflating (the real size is unknown)
   */
  constructor(
    source: string,
    what: string,
    readonly detail: string,
  ) {
    super(source, `${what} too large: ${detail}`);
  }
}

/** `120.0 MiB (limit maxFileBytes = 100.0 MiB)`; with `atLeast`, `more than 100.0 MiB (limit …)`. */
function sizeDetail(size: number, limit: number, atLeast = false): string {
  const shown = atLeast ? `more than ${formatBytes(limit)}` : formatBytes(size);
  return `${shown} (limit maxFileBytes = ${formatBytes(limit)})`;
}

/**
 * Renders Slack message markup as plain text:
 * `<@U123>` → `@Name` (or `@U123` when unknown), `<#C123|general>` → `#general`,
 * `<!here>` → `@here`, `<!subteam^S1|@team>` → `@team`, `<http://x|label>` →
 * `label (http://x)`, `<http://x>` → `http://x`, `<mailto:a@b|a@b>` → `a@b`; then
 * the entities `&lt; &gt; &amp;` are decoded (once). Line endings become `\n` and
 * trailing whitespace is trimmed. Never throws.
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
  return tidy(replaced.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&"));
}

/** Normalises line endings to `\n`, drops trailing spaces of each line and trims the text. */
function tidy(text: string): string {
  return text
    .replace(/\r\n?/g, "\n")
    .replace(/[ \t]+$/gm, "")
    .trim();
}

/**
 * Compares two Slack timestamps (`"1452837318.000002"`: epoch seconds, a dot,
 * microseconds) numerically without float loss. Returns a negative number, zero or
 * a positive number, like a sort comparator.
 */
export function compareTs(a: string, b: string): number {
  const [as = "0", af = ""] = a.split(".");
  const [bs = "0", bf = ""] = b.split(".");
  const d = Number(as) - Number(bs);
  if (d !== 0) return d;
  // Code-unit order of equal-length digit strings (no localeCompare: no locale).
  const x = af.padEnd(6, "0");
  const y = bf.padEnd(6, "0");
  return x < y ? -1 : x > y ? 1 : 0;
}

/** A Slack timestamp as a Date, or `undefined` when it is out of range. */
function tsDate(ts: string): Date | undefined {
  const [seconds = "", fraction = ""] = ts.split(".");
  const ms = Number(seconds) * 1000 + Number(fraction.padEnd(3, "0").slice(0, 3));
  const date = new Date(ms);
  return Number.isNaN(date.getTime()) ? undefined : date;
}

/** ISO 8601 UTC time of a Slack timestamp (`2016-01-15T05:55:52.000Z`), or `undefined`. */
function isoTime(ts: string): string | undefined {
  return tsDate(ts)?.toISOString();
}

/** Formats a Slack timestamp as `YYYY-MM-DD HH:MM` (UTC). */
function formatTs(ts: string): string {
  const iso = isoTime(ts);
  return iso ? iso.slice(0, 16).replace("T", " ") : "????-??-?? ??:??";
}

/** Display name of a user: real name, else profile display name, else user name. */
function userName(u: SlackUser): string | undefined {
  return (
    nonBlank(str(u.real_name)) ??
    nonBlank(str(u.profile?.real_name)) ??
    nonBlank(str(u.display_name)) ??
    nonBlank(str(u.profile?.display_name)) ??
    nonBlank(str(u.name))
  );
}

/** Text of a message's attachments (bot posts, unfurls): pretext, title, text, fields, else fallback. */
function attachmentText(m: SlackMessage): string {
  const parts: string[] = [];
  for (const a of list(m.attachments)) {
    if (!isObject(a)) continue;
    const title = str(a.title);
    const link = str(a.title_link);
    const fields = list(a.fields)
      .filter(isObject)
      .map((f) => [nonBlank(str(f.title)), nonBlank(str(f.value))].filter(Boolean).join(": "));
    const own = [str(a.pretext), title && link ? `${title} (${link})` : title, str(a.text), ...fields]
      .map((s) => nonBlank(s))
      .filter((s): s is string => s !== undefined);
    const fallback = nonBlank(str(a.fallback));
    if (own.length > 0) parts.push(own.join("\n"));
    else if (fallback) parts.push(fallback);
  }
  return parts.join("\n");
}

/** One inline element of a rich-text block (`text`, `link`, `user`, `channel`, `emoji`…). */
function renderInline(el: Record<string, unknown>, ctx: SlackContext): string {
  switch (str(el.type)) {
    case "text":
      return str(el.text) ?? "";
    case "link": {
      const url = (str(el.url) ?? "").replace(/^mailto:/, "");
      const label = nonBlank(str(el.text));
      return label && label !== url ? `${label} (${url})` : url;
    }
    case "user": {
      const id = str(el.user_id) ?? "";
      return `@${ctx.users.get(id) ?? id}`;
    }
    case "channel": {
      const id = str(el.channel_id) ?? "";
      return `#${ctx.channels.get(id) ?? id}`;
    }
    case "usergroup":
      return `@${str(el.usergroup_id) ?? ""}`;
    case "broadcast":
      return `@${str(el.range) ?? "here"}`;
    case "emoji":
      return `:${str(el.name) ?? ""}:`;
    case "date":
      return str(el.fallback) ?? "";
    case "color":
      return str(el.value) ?? "";
    default:
      return str(el.text) ?? "";
  }
}

/** One element of a `rich_text` block: a section, preformatted text, a quote or a list. */
function renderRichElement(el: Record<string, unknown>, ctx: SlackContext): string {
  const inline = (): string =>
    list(el.elements)
      .filter(isObject)
      .map((k) => renderInline(k, ctx))
      .join("");
  switch (str(el.type)) {
    case "rich_text_preformatted":
      return `\`\`\`${inline()}\`\`\``;
    case "rich_text_quote":
      return inline()
        .split("\n")
        .map((line) => `> ${line}`)
        .join("\n");
    case "rich_text_list": {
      const ordered = el.style === "ordered";
      const depth = typeof el.indent === "number" && el.indent > 0 ? Math.min(el.indent, 10) : 0;
      const indent = "  ".repeat(depth);
      return list(el.elements)
        .filter(isObject)
        .map((item, i) => `${indent}${ordered ? `${i + 1}.` : "-"} ${renderRichElement(item, ctx)}`)
        .join("\n");
    }
    default:
      return inline();
  }
}

/** A text object of a layout block: `mrkdwn` is rendered as Slack markup, `plain_text` kept. */
function renderTextObject(t: unknown, ctx: SlackContext): string {
  if (!isObject(t)) return "";
  const text = str(t.text) ?? "";
  return t.type === "mrkdwn" ? renderSlackText(text, ctx) : text;
}

/**
 * Plain text of a message's `blocks`: rich text (sections, code, quotes, lists),
 * `section` (text and fields), `header` and `context` blocks; other blocks
 * (images, dividers, actions) are skipped.
 */
function renderBlocks(blocks: unknown, ctx: SlackContext): string {
  const out: string[] = [];
  for (const block of list(blocks)) {
    if (!isObject(block)) continue;
    switch (str(block.type)) {
      case "rich_text": {
        let text = "";
        for (const el of list(block.elements)) {
          if (!isObject(el)) continue;
          const piece = renderRichElement(el, ctx);
          if (text !== "" && !text.endsWith("\n")) text += "\n";
          text += piece;
        }
        out.push(text);
        break;
      }
      case "section":
        out.push(
          renderTextObject(block.text, ctx),
          ...list(block.fields).map((f) => renderTextObject(f, ctx)),
        );
        break;
      case "header":
        out.push(renderTextObject(block.text, ctx));
        break;
      case "context":
        out.push(
          list(block.elements)
            .map((e) => renderTextObject(e, ctx))
            .filter((s) => s !== "")
            .join(" "),
        );
        break;
    }
  }
  return tidy(out.filter((s) => s.trim() !== "").join("\n"));
}

/** `[file: name]` placeholders for a message's files (`[file]` when a file has no name). */
function filePlaceholders(m: SlackMessage): string {
  const files = [...list(m.files), ...(m.file !== undefined ? [m.file] : [])].filter(isObject);
  return files
    .map((f) => {
      const name = nonBlank(str(f.name)) ?? nonBlank(str(f.title));
      return name ? `[file: ${name}]` : "[file]";
    })
    .join(" ");
}

/**
 * Text of a message: its `text` (markup rendered); when that is empty, its rich
 * text `blocks`, else its attachments, else placeholders for its files.
 */
function messageText(m: SlackMessage, ctx: SlackContext): string {
  let text = renderSlackText(str(m.text) ?? "", ctx);
  if (text === "") text = renderBlocks(m.blocks, ctx);
  if (text === "") text = renderSlackText(attachmentText(m), ctx);
  if (text === "") text = filePlaceholders(m);
  return text;
}

/** One message ready for layout. */
interface Message {
  ts: string;
  threadTs?: string;
  isReply: boolean;
  user: string;
  userId?: string;
  bot: boolean;
  edited: boolean;
  /** Timestamp of the last edit (`"0"` when never edited): the newest copy of a message wins. */
  editTs: string;
  /** A thread reply also sent to the channel (`thread_broadcast`). */
  broadcast: boolean;
  /** Subtype of a kept system message (`channel_join`…). */
  system?: string;
  text: string;
}

/** Names of bots announced by `bot_add` messages (`…/services/B0123|github>`). */
function botNamesFrom(messages: readonly SlackMessage[]): Map<string, string> {
  const names = new Map<string, string>();
  for (const m of messages) {
    const text = str(m.text);
    if (m.subtype !== "bot_add" || !text) continue;
    for (const match of text.matchAll(/services\/(B[A-Z0-9]+)\|([^>]+)>/g)) {
      if (match[1] && match[2]) names.set(match[1], match[2]);
    }
  }
  return names;
}

/** A Slack timestamp: epoch seconds with an optional fraction. */
const TS = /^\d{1,12}(\.\d{1,9})?$/;

/**
 * Turns a raw message into a {@link Message}, or `undefined` for deleted, hidden,
 * empty and (unless `keepSystem`) system messages. A `message_changed` event is
 * read as its new version.
 */
function toMessage(
  raw: SlackMessage,
  ctx: SlackContext,
  botNames: ReadonlyMap<string, string>,
  keepSystem: boolean,
): Message | undefined {
  const changed = raw.subtype === "message_changed" && isObject(raw.message);
  const m: SlackMessage = changed
    ? { ...(raw.message as SlackMessage), ts: str((raw.message as SlackMessage).ts) ?? raw.ts }
    : raw;
  const ts = str(m.ts);
  if (!ts || !TS.test(ts) || m.hidden === true) return undefined;
  if (m.type !== undefined && m.type !== "message") return undefined;
  const subtype = str(m.subtype);
  if (subtype && ALWAYS_DROPPED.has(subtype)) return undefined;
  const system = subtype !== undefined && SYSTEM_SUBTYPES.has(subtype);
  if (system && !keepSystem) return undefined;
  const text = messageText(m, ctx);
  if (text === "") return undefined;
  const userId = nonBlank(str(m.user));
  const botId = nonBlank(str(m.bot_id));
  const bot = subtype === "bot_message" || (botId !== undefined && (!userId || isObject(m.bot_profile)));
  const known = userId ? ctx.users.get(userId) : undefined;
  const profile = isObject(m.user_profile) ? userName(m.user_profile as SlackUser) : undefined;
  const username = nonBlank(str(m.username));
  const botName = nonBlank(str(m.bot_profile?.name)) ?? (botId ? botNames.get(botId) : undefined);
  const user = bot
    ? (username ?? botName ?? known ?? profile ?? userId ?? "bot")
    : (known ?? profile ?? username ?? userId ?? "unknown");
  const threadTs = nonBlank(str(m.thread_ts));
  const editTs = str(m.edited?.ts);
  return {
    ts,
    threadTs: threadTs && TS.test(threadTs) ? threadTs : undefined,
    isReply: threadTs !== undefined && TS.test(threadTs) && threadTs !== ts,
    user,
    userId,
    bot,
    edited: changed || isObject(m.edited),
    editTs: editTs && TS.test(editTs) ? editTs : "0",
    broadcast: subtype === "thread_broadcast",
    system: system ? subtype : undefined,
    text,
  };
}

/**
 * The messages of one channel from its raw messages (any order): system, hidden
 * and deleted messages dropped, each timestamp kept once (the most recently
 * edited copy; a reply that also appears as a `thread_broadcast` is one message).
 */
function collectMessages(raws: readonly unknown[], ctx: SlackContext, keepSystem: boolean): Message[] {
  const messages = raws.filter(isObject) as SlackMessage[];
  const botNames = botNamesFrom(messages);
  const deleted = new Set(
    messages
      .filter((m) => m.subtype === "message_deleted")
      .map((m) => str(m.deleted_ts))
      .filter((ts): ts is string => ts !== undefined),
  );
  const byTs = new Map<string, Message>();
  for (const raw of messages) {
    const msg = toMessage(raw, ctx, botNames, keepSystem);
    if (!msg || deleted.has(msg.ts)) continue;
    const prev = byTs.get(msg.ts);
    if (!prev) {
      byTs.set(msg.ts, msg);
      continue;
    }
    const keep = compareTs(msg.editTs, prev.editTs) > 0 ? msg : prev;
    byTs.set(msg.ts, {
      ...keep,
      threadTs: keep.threadTs ?? prev.threadTs ?? msg.threadTs,
      isReply: prev.isReply || msg.isReply,
      broadcast: prev.broadcast || msg.broadcast,
      edited: prev.edited || msg.edited,
    });
  }
  return [...byTs.values()];
}

/**
 * Orders messages thread-contiguously: top-level messages by time, each followed
 * by its replies by time. Replies whose parent is missing are grouped at the
 * position of their thread's root timestamp.
 */
function threadOrder(messages: Message[]): Message[] {
  const groups = new Map<string, Message[]>();
  for (const e of messages) {
    const key = e.isReply ? (e.threadTs as string) : e.ts;
    const group = groups.get(key);
    if (group) group.push(e);
    else groups.set(key, [e]);
  }
  const keys = [...groups.keys()].sort(compareTs);
  const out: Message[] = [];
  for (const key of keys) {
    const group = groups.get(key) ?? [];
    group.sort((a, b) => Number(a.isReply) - Number(b.isReply) || compareTs(a.ts, b.ts));
    for (const message of group) out.push(message);
  }
  return out;
}

/**
 * Permalink of a message (`workspaceUrl` without a trailing `/`):
 * `URL/archives/CHANNEL/pTSDIGITS`, plus
 * `?thread_ts=THREAD&cid=CHANNEL` for a reply.
 */
function permalink(workspaceUrl: string, channelId: string, m: Message): string {
  const base = `${workspaceUrl}/archives/${channelId}/p${m.ts.replace(".", "")}`;
  return m.isReply && m.threadTs ? `${base}?thread_ts=${m.threadTs}&cid=${channelId}` : base;
}

/** Where a channel document comes from. */
interface ChannelSource {
  /** Document `uri`. */
  uri: string;
  /** `metadata.path`: the export folder, the .zip or the history file. */
  path: string;
  channel: string;
  channelId?: string;
  format: "export" | "zip" | "history";
  /** Further document metadata (topic, purpose, page). */
  extra?: Record<string, unknown>;
  warnings?: string[];
}

/**
 * Lays out one channel: one line block per message, `[YYYY-MM-DD HH:MM] Name: text`,
 * replies prefixed `"  ↳ "`, blocks separated by `"\n"`; one segment per message.
 * With a workspace URL but no channel id, the messages get no `link` and the
 * document says so in a warning.
 */
function channelDocument(
  src: ChannelSource,
  messages: Message[],
  options: SlackExtractOptions,
): ExtractedDocument {
  const ordered = threadOrder(messages);
  const parents = new Set(ordered.filter((e) => e.isReply).map((e) => e.threadTs as string));
  const workspaceUrl = nonBlank(options.workspaceUrl)?.replace(/\/+$/, "");
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
        channel: src.channel,
        user: e.user,
        userId: e.userId,
        ts: e.ts,
        time: isoTime(e.ts),
        threadTs,
        isReply: e.isReply,
        bot: e.bot ? true : undefined,
        edited: e.edited ? true : undefined,
        broadcast: e.broadcast ? true : undefined,
        system: e.system,
        link: workspaceUrl && src.channelId ? permalink(workspaceUrl, src.channelId, e) : undefined,
      }),
    });
  }
  const stamps = messages.map((m) => m.ts).sort(compareTs);
  const first = stamps[0] as string;
  const last = stamps[stamps.length - 1] as string;
  const doc: ExtractedDocument = {
    uri: src.uri,
    text,
    metadata: compact({
      path: src.path,
      type: "slack" as const,
      title: `#${src.channel}`,
      channel: src.channel,
      channelId: src.channelId,
      workspaceUrl,
      format: src.format,
      messageCount: segments.length,
      tsStart: first,
      tsEnd: last,
      timeStart: isoTime(first),
      timeEnd: isoTime(last),
      ...src.extra,
    }),
    segments,
  };
  const warnings = [...(src.warnings ?? [])];
  if (workspaceUrl && !src.channelId) warnings.push("no permalinks: the channel id is unknown");
  if (warnings.length > 0) doc.warnings = warnings;
  return doc;
}

/** Result of parsing JSON bytes: the value, or the parser's complaint. */
type Parsed = { ok: true; value: unknown } | { ok: false; reason: string };

/** Decodes (UTF-8/UTF-16 with BOM) and parses JSON bytes. Never throws. */
function parseJson(bytes: Uint8Array): Parsed {
  try {
    return { ok: true, value: JSON.parse(decodeText(bytes)) };
  } catch (err) {
    return { ok: false, reason: `invalid JSON (${(err as Error).message})` };
  }
}

/**
 * The files of a Slack export, in a folder or a zip. Paths are relative to the
 * export root, with `/` separators.
 */
interface ExportFiles {
  /** The folder or the .zip: errors name it. */
  readonly source: string;
  readonly format: "export" | "zip";
  /**
   * Bytes of the file at `rel`, or `undefined` when there is none.
   * @throws FileTooLarge (an ExtractionError) over `maxFileBytes`; ExtractionError over
   *   `maxUnpackedBytes`, or when it cannot be read.
   */
  read(rel: string): Promise<Uint8Array | undefined>;
  /** Names of the `.json` files directly inside folder `rel`, sorted. */
  list(rel: string): Promise<string[]>;
}

/** An unpacked export folder as {@link ExportFiles}. */
function folderFiles(dir: string, limits: ExtractionLimits): ExportFiles {
  return {
    source: dir,
    format: "export",
    async read(rel) {
      const full = join(dir, ...rel.split("/"));
      const info = await stat(full).catch(() => undefined);
      if (!info?.isFile()) return undefined;
      if (info.size > limits.maxFileBytes) {
        throw new FileTooLarge(dir, rel, sizeDetail(info.size, limits.maxFileBytes));
      }
      try {
        return await readFile(full);
      } catch (err) {
        throw new ExtractionError(dir, `${rel}: cannot read (${(err as Error).message})`, { cause: err });
      }
    },
    async list(rel) {
      const names = await readdir(join(dir, ...rel.split("/"))).catch(() => [] as string[]);
      return names.filter((n) => n.toLowerCase().endsWith(".json")).sort();
    },
  };
}

/** yauzl options: entries read on demand, names decoded and checked by us, sizes checked by us. */
const ZIP_OPTIONS = {
  lazyEntries: true,
  autoClose: false,
  decodeStrings: false,
  validateEntrySizes: false,
  strictFileNames: false,
} as const;

/** Why a zip entry name is unsafe (absolute, `..` traversal, NUL), or `undefined` when it is fine. */
function unsafeEntryName(name: string): string | undefined {
  if (name.includes("\0")) return "NUL byte in the name";
  if (name.startsWith("/") || /^[A-Za-z]:/.test(name)) return "absolute path";
  if (name.split("/").includes("..")) return "path traversal with '..'";
  return undefined;
}

/**
 * Lists a zip's entries by name without inflating anything.
 * @throws ExtractionError for too many entries, an unsafe entry name or a corrupt directory.
 */
async function zipEntries(zip: ZipFile, path: string, limits: ExtractionLimits): Promise<Map<string, Entry>> {
  const max = limits.maxArchiveEntries;
  const tooMany = (n: number): ExtractionError =>
    new ExtractionError(path, `archive has too many entries: ${n} (limit maxArchiveEntries = ${max})`);
  if (zip.entryCount > max) throw tooMany(zip.entryCount);
  const entries = new Map<string, Entry>();
  let count = 0;
  try {
    for await (const entry of zip.eachEntry()) {
      if (++count > max) throw tooMany(count);
      const raw = entry.fileNameRaw ?? Buffer.alloc(0);
      const name = getFileNameLowLevel(entry.generalPurposeBitFlag, raw, entry.extraFields ?? [], false);
      const problem = unsafeEntryName(name);
      if (problem) {
        throw new ExtractionError(
          path,
          `unsafe entry name ${JSON.stringify(name)} in the archive (${problem})`,
        );
      }
      if (name.endsWith("/") || name.startsWith("__MACOSX/")) continue;
      if (!entries.has(name)) entries.set(name, entry);
    }
  } catch (err) {
    throw asExtractionError(path, err, "corrupt .zip archive");
  }
  return entries;
}

/**
 * Inflates one zip entry into memory. The declared size is checked first; then the
 * real inflated bytes are counted while streaming against `maxUnpackedBytes` (the
 * whole archive, `budget.used`) and `maxFileBytes` (this entry), so a header that
 * under-states the size cannot get past the limits. A size that differs from the
 * header's after inflating is a corrupt archive.
 * @throws ExtractionError naming the archive, the entry and the limit or problem.
 */
function inflateEntry(
  zip: ZipFile,
  entry: Entry,
  rel: string,
  path: string,
  limits: ExtractionLimits,
  budget: { used: number },
): Promise<Buffer> {
  const maxUnpacked = limits.maxUnpackedBytes;
  const maxFile = limits.maxFileBytes;
  if (entry.isEncrypted()) return Promise.reject(new ExtractionError(path, `${rel}: encrypted zip entry`));
  if (entry.uncompressedSize > maxFile) {
    return Promise.reject(
      new FileTooLarge(path, `zip entry ${rel}`, sizeDetail(entry.uncompressedSize, maxFile)),
    );
  }
  if (budget.used + entry.uncompressedSize > maxUnpacked) {
    const claimed = budget.used + entry.uncompressedSize;
    return Promise.reject(tooLarge(path, "unpacked archive", claimed, "maxUnpackedBytes", maxUnpacked));
  }
  return new Promise((resolve, reject) => {
    zip.openReadStream(entry, (err, stream) => {
      if (err || !stream) {
        reject(new ExtractionError(path, `${rel}: cannot read zip entry (${err?.message})`, { cause: err }));
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      let done = false;
      const fail = (error: ExtractionError): void => {
        if (done) return;
        done = true;
        stream.destroy();
        reject(error);
      };
      stream.on("data", (chunk: Buffer) => {
        if (done) return;
        size += chunk.length;
        budget.used += chunk.length;
        // The header under-stated the size: only a lower bound of the real size is known.
        if (budget.used > maxUnpacked) {
          fail(
            new ExtractionError(
              path,
              `unpacked archive too large: more than ${formatBytes(maxUnpacked)} (limit maxUnpackedBytes = ${formatBytes(maxUnpacked)})`,
            ),
          );
        } else if (size > maxFile) {
          fail(new FileTooLarge(path, `zip entry ${rel}`, sizeDetail(size, maxFile, true)));
        } else {
          chunks.push(chunk);
        }
      });
      stream.on("error", (e: Error) =>
        fail(new ExtractionError(path, `${rel}: corrupt zip entry (${e.message})`, { cause: e })),
      );
      stream.on("end", () => {
        if (done) return;
        if (size !== entry.uncompressedSize) {
          fail(
            new ExtractionError(
              path,
              `${rel}: inflated to ${size} bytes but its header declares ${entry.uncompressedSize} (corrupt or forged archive)`,
            ),
          );
          return;
        }
        done = true;
        resolve(Buffer.concat(chunks));
      });
    });
  });
}

/** The folder inside a zip that holds `channels.json` (nearest the top), as `""` or `"dir/"`. */
function exportRoot(entries: ReadonlyMap<string, Entry>): string | undefined {
  const found = [...entries.keys()]
    .filter((n) => n === "channels.json" || n.endsWith("/channels.json"))
    .sort((a, b) => a.split("/").length - b.split("/").length || (a < b ? -1 : a > b ? 1 : 0));
  return found[0]?.slice(0, -"channels.json".length);
}

/**
 * Opens a Slack export .zip (from `path`, or `ctx.bytes`) and runs `fn` on its
 * files; the archive is closed afterwards.
 * @throws ExtractionError when it is not a zip, has too many entries, an unsafe
 *   entry name or no `channels.json`, or an entry is over a limit.
 */
async function withZipFiles<T>(
  path: string,
  ctx: ExtractContext,
  fn: (files: ExportFiles) => Promise<T>,
): Promise<T> {
  const limits = ctx.options.limits;
  let zip: ZipFile;
  try {
    zip = ctx.bytes
      ? await fromBufferPromise(await readSource(path, ctx), ZIP_OPTIONS)
      : await openPromise(path, ZIP_OPTIONS);
  } catch (err) {
    if (err instanceof ExtractionError) throw err;
    throw new ExtractionError(path, `not a readable .zip archive (${(err as Error).message})`, {
      cause: err,
    });
  }
  try {
    const entries = await zipEntries(zip, path, limits);
    const root = exportRoot(entries);
    if (root === undefined) {
      throw new ExtractionError(path, "not a Slack export: the archive has no channels.json");
    }
    const budget = { used: 0 };
    const files: ExportFiles = {
      source: path,
      format: "zip",
      async read(rel) {
        const entry = entries.get(root + rel);
        return entry ? inflateEntry(zip, entry, rel, path, limits, budget) : undefined;
      },
      async list(rel) {
        const prefix = `${root}${rel}/`;
        return [...entries.keys()]
          .filter((n) => n.startsWith(prefix) && !n.slice(prefix.length).includes("/"))
          .map((n) => n.slice(prefix.length))
          .filter((n) => n.toLowerCase().endsWith(".json"))
          .sort();
      },
    };
    return await fn(files);
  } finally {
    zip.close();
  }
}

/**
 * A required JSON array of an export (`users.json`, `channels.json`).
 * @throws ExtractionError naming the export and the file when missing, invalid or not an array.
 */
async function requiredArray(files: ExportFiles, rel: string): Promise<unknown[]> {
  const bytes = await files.read(rel);
  if (bytes === undefined) throw new ExtractionError(files.source, `${rel} is missing`);
  const parsed = parseJson(bytes);
  if (!parsed.ok) throw new ExtractionError(files.source, `${rel}: ${parsed.reason}`);
  if (!Array.isArray(parsed.value)) {
    throw new ExtractionError(files.source, `${rel}: expected a JSON array, got ${kindOf(parsed.value)}`);
  }
  return parsed.value;
}

/**
 * Reads a file of the export that can be skipped (a day file, `groups.json`…): over
 * `maxFileBytes` it is `{ skipped: "too large: …" }` instead of an error.
 * @throws ExtractionError for the other read problems (`maxUnpackedBytes`, unreadable).
 */
async function readSkippable(
  files: ExportFiles,
  rel: string,
): Promise<Uint8Array | undefined | { skipped: string }> {
  try {
    return await files.read(rel);
  } catch (err) {
    if (err instanceof FileTooLarge) return { skipped: `too large: ${err.detail}` };
    throw err;
  }
}

/**
 * An optional JSON array of an export (`groups.json`…): `[]` when missing; a problem
 * (invalid JSON, not an array, over `maxFileBytes`) becomes a warning.
 */
async function optionalArray(files: ExportFiles, rel: string, warnings: string[]): Promise<unknown[]> {
  const bytes = await readSkippable(files, rel);
  if (bytes === undefined) return [];
  if ("skipped" in bytes) {
    warnings.push(`${rel}: ${bytes.skipped}; skipped`);
    return [];
  }
  const parsed = parseJson(bytes);
  if (!parsed.ok) {
    warnings.push(`${rel}: ${parsed.reason}; skipped`);
    return [];
  }
  if (!Array.isArray(parsed.value)) {
    warnings.push(`${rel}: expected a JSON array, got ${kindOf(parsed.value)}; skipped`);
    return [];
  }
  return parsed.value;
}

/** User id → display name from the records of `users.json`. */
function userTable(records: readonly unknown[]): Map<string, string> {
  const users = new Map<string, string>();
  for (const u of records) {
    if (!isObject(u)) continue;
    const id = str(u.id);
    const name = id ? userName(u as SlackUser) : undefined;
    if (id && name) users.set(id, name);
  }
  return users;
}

/** Channel records (id and name as strings, or absent) from a channels-like array. */
function channelRecords(records: readonly unknown[], nameFromId = false): SlackChannel[] {
  return records.filter(isObject).map((c) => {
    const id = nonBlank(str(c.id));
    const name = nonBlank(str(c.name)) ?? (nameFromId ? id : undefined);
    return {
      id,
      name,
      topic: isObject(c.topic) ? c.topic : undefined,
      purpose: isObject(c.purpose) ? c.purpose : undefined,
    };
  });
}

/** True when a channel name can be used as a folder name inside the export. */
function safeFolderName(name: string): boolean {
  return name !== "." && name !== ".." && !/[/\\\0]/.test(name);
}

/**
 * Extracts a workspace export (folder or zip): one document per channel that has
 * messages, sorted by channel name. Problems that lose only part of the content
 * (a day file that is not valid JSON, not an array or over `maxFileBytes`; an unsafe
 * channel name; a broken or oversized optional file) are document warnings.
 * @throws ExtractionError when `users.json`/`channels.json` is missing, invalid or
 *   over `maxFileBytes`, the archive is over `maxUnpackedBytes`, or no channel has messages.
 */
async function extractExport(files: ExportFiles, ctx: ExtractContext): Promise<ExtractedDocument[]> {
  const source = files.source;
  const keepSystem = ctx.options.slack.keepSystemMessages === true;
  const usersRaw = await requiredArray(files, "users.json");
  const channelsRaw = await requiredArray(files, "channels.json");
  const exportWarnings: string[] = [];
  const channelList: SlackChannel[] = [
    ...channelRecords(channelsRaw),
    ...channelRecords(await optionalArray(files, "groups.json", exportWarnings)),
    ...channelRecords(await optionalArray(files, "mpims.json", exportWarnings)),
    ...channelRecords(await optionalArray(files, "dms.json", exportWarnings), true),
  ];
  const channels = new Map<string, string>();
  for (const c of channelList) if (c.id && c.name) channels.set(c.id, c.name);
  const slackCtx: SlackContext = { users: userTable(usersRaw), channels };

  const unique = new Map<string, SlackChannel & { name: string }>();
  for (const c of channelList) {
    if (c.name !== undefined && !unique.has(c.name)) unique.set(c.name, { ...c, name: c.name });
  }
  const byName = [...unique.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));

  const docs: ExtractedDocument[] = [];
  for (const channel of byName) {
    if (!safeFolderName(channel.name)) {
      exportWarnings.push(`channel ${JSON.stringify(channel.name)} is not a safe folder name; skipped`);
      continue;
    }
    const warnings: string[] = [];
    const raw: unknown[] = [];
    for (const file of await files.list(channel.name)) {
      const rel = `${channel.name}/${file}`;
      const bytes = await readSkippable(files, rel);
      if (bytes === undefined) continue;
      if ("skipped" in bytes) {
        warnings.push(`${rel}: ${bytes.skipped}; day skipped`);
        continue;
      }
      const parsed = parseJson(bytes);
      if (!parsed.ok) warnings.push(`${rel}: ${parsed.reason}; day skipped`);
      else if (!Array.isArray(parsed.value)) {
        warnings.push(`${rel}: expected a JSON array of messages, got ${kindOf(parsed.value)}; day skipped`);
      } else for (const message of parsed.value) raw.push(message); // no spread: a day file may hold 100k+ messages
    }
    const messages = collectMessages(raw, slackCtx, keepSystem);
    if (messages.length === 0) {
      if (warnings.length > 0) exportWarnings.push(...warnings);
      continue;
    }
    docs.push(
      channelDocument(
        {
          uri: `${source}#${channel.name}`,
          path: source,
          channel: channel.name,
          channelId: channel.id,
          format: files.format,
          extra: compact({
            topic: nonBlank(str(channel.topic?.value)),
            purpose: nonBlank(str(channel.purpose?.value)),
          }),
          warnings,
        },
        messages,
        ctx.options.slack,
      ),
    );
  }
  const first = docs[0];
  if (!first) {
    const why = exportWarnings.length > 0 ? ` (${exportWarnings.join("; ")})` : "";
    throw new ExtractionError(source, `Slack export has no messages${why}`);
  }
  if (exportWarnings.length > 0) first.warnings = [...exportWarnings, ...(first.warnings ?? [])];
  return docs;
}

/** A leading date in a history file name: `20200401_`, `2020-04-01_`, `2020-04-01-`. */
const DATE_PREFIX = /^(\d{8}|\d{4}-\d{2}-\d{2})[_-]/;

/**
 * Channel name (and page) of a history file from its name: `20200401_general.json`
 * → `general`; `20200401_general-2.json` → `general`, page 2 when
 * `20200401_general.json` sits beside it (else the name stays `general-2`); an
 * export day file `general/2016-01-14.json` → its folder name `general`
 * (`dayFile: true`).
 */
async function channelFromFileName(
  path: string,
  onDisk: boolean,
): Promise<{ name: string; page?: number; dayFile?: boolean }> {
  const base = basename(path).replace(/\.json$/i, "");
  if (/^\d{4}-\d{2}-\d{2}$/.test(base)) {
    const folder = basename(dirname(path));
    if (folder && safeFolderName(folder)) return { name: folder, dayFile: true };
  }
  const prefix = DATE_PREFIX.exec(base)?.[0] ?? "";
  const name = base.slice(prefix.length) || base;
  const paged = /^(.+)-(\d{1,4})$/.exec(name);
  if (onDisk && paged?.[1] && paged[2]) {
    const first = join(dirname(path), `${prefix}${paged[1]}.json`);
    if (
      await stat(first).then(
        (s) => s.isFile(),
        () => false,
      )
    )
      return { name: paged[1], page: Number(paged[2]) };
  }
  return { name };
}

/**
 * Users and channels of the export a day file sits in (`EXPORT/channel/day.json`),
 * when `EXPORT/users.json` exists; empty tables otherwise. Never throws.
 */
async function surroundingExport(
  path: string,
  limits: ExtractionLimits,
): Promise<SlackContext & { ids: Map<string, string> }> {
  const empty = {
    users: new Map<string, string>(),
    channels: new Map<string, string>(),
    ids: new Map<string, string>(),
  };
  const root = dirname(dirname(path));
  try {
    const files = folderFiles(root, limits);
    const usersBytes = await files.read("users.json");
    if (!usersBytes) return empty;
    const users = parseJson(usersBytes);
    const channelsBytes = await files.read("channels.json");
    const chans = channelsBytes ? parseJson(channelsBytes) : undefined;
    const records = chans?.ok && Array.isArray(chans.value) ? channelRecords(chans.value) : [];
    const channels = new Map<string, string>();
    const ids = new Map<string, string>();
    for (const c of records) {
      if (c.id && c.name) {
        channels.set(c.id, c.name);
        ids.set(c.name, c.id);
      }
    }
    return {
      users: users.ok && Array.isArray(users.value) ? userTable(users.value) : new Map(),
      channels,
      ids,
    };
  } catch {
    return empty;
  }
}

/**
 * Extracts a Slack API `conversations.history` response (`{"ok": true,
 * "messages": [...]}`) or a bare array of messages as one channel document.
 * @throws ExtractionError for invalid JSON, an API error response, a shape that is
 *   not message history, or no messages ("no messages").
 */
async function extractHistory(path: string, ctx: ExtractContext): Promise<ExtractedDocument[]> {
  const parsed = parseJson(await readSource(path, ctx));
  if (!parsed.ok) throw new ExtractionError(path, parsed.reason);
  const data = parsed.value;
  let messages: unknown[];
  let channelName: string | undefined;
  let channelId: string | undefined;
  if (Array.isArray(data)) {
    messages = data;
  } else if (isObject(data)) {
    if (data.ok === false) {
      throw new ExtractionError(path, `Slack API error response (${str(data.error) ?? "no error code"})`);
    }
    if (!Array.isArray(data.messages)) {
      throw new ExtractionError(path, 'not Slack message history: no "messages" array');
    }
    messages = data.messages;
    const channel = data.channel;
    if (isObject(channel)) {
      channelId = nonBlank(str(channel.id));
      channelName = nonBlank(str(channel.name));
    } else if (typeof channel === "string" && /^[CGD][A-Z0-9]{2,}$/.test(channel)) {
      channelId = channel;
    } else if (typeof channel === "string") {
      channelName = nonBlank(channel);
    }
    channelName ??= nonBlank(str(data.channel_name));
    channelId ??= nonBlank(str(data.channel_id));
  } else {
    throw new ExtractionError(path, `not Slack message history: the JSON is ${kindOf(data)}`);
  }
  if (messages.length === 0) throw new ExtractionError(path, 'no messages (the "messages" list is empty)');

  const onDisk = ctx.bytes === undefined;
  const fromName = await channelFromFileName(path, onDisk);
  const around =
    onDisk && fromName.dayFile
      ? await surroundingExport(path, ctx.options.limits)
      : {
          users: new Map<string, string>(),
          channels: new Map<string, string>(),
          ids: new Map<string, string>(),
        };
  const channel = channelName ?? fromName.name;
  channelId ??= around.ids.get(channel);
  const keepSystem = ctx.options.slack.keepSystemMessages === true;
  const collected = collectMessages(messages, around, keepSystem);
  if (collected.length === 0) {
    throw new ExtractionError(
      path,
      `no messages (all ${messages.length} are system notices, deleted or empty)`,
    );
  }
  return [
    channelDocument(
      {
        uri: `${path}#${channel}`,
        path,
        channel,
        channelId,
        format: "history",
        extra: compact({ page: fromName.page }),
      },
      collected,
      ctx.options.slack,
    ),
  ];
}

/** True when the bytes start like a zip archive (`PK\x03\x04`, or an empty zip's `PK\x05\x06`). */
function looksLikeZip(bytes: Uint8Array): boolean {
  return bytes[0] === 0x50 && bytes[1] === 0x4b && (bytes[2] === 0x03 || bytes[2] === 0x05);
}

/**
 * Extracts Slack conversations, one document per channel. `path` is one of:
 * - an unpacked workspace export folder (`channels.json`, `users.json`,
 *   `<channel>/<YYYY-MM-DD>.json`; `groups.json`, `mpims.json`, `dms.json` are read
 *   too when present); documents are sorted by channel name;
 * - the same export as a `.zip` (also from `ctx.bytes`), entries possibly under one
 *   top-level folder. Read in memory, nothing is written to disk. Refused with an
 *   ExtractionError: more entries than `limits.maxArchiveEntries`, more inflated
 *   bytes than `limits.maxUnpackedBytes` (counted while inflating, not taken from
 *   the headers), `users.json` or `channels.json` over `limits.maxFileBytes`, an
 *   entry name that is absolute or uses `..`, an encrypted entry, no `channels.json`;
 * - a Slack API `conversations.history` JSON file (`{"ok": true, "messages": [...]}`,
 *   optionally with `channel` {id,name}, `channel_name`, `channel_id`) or a bare
 *   array of messages; the channel name otherwise comes from the file name
 *   (`20200401_general.json` → `general`; `20200401_general-2.json` → `general`
 *   with `page: 2` when `20200401_general.json` is beside it; `chan/2016-01-14.json`
 *   → `chan`, reading `../users.json` when there is one).
 *
 * Text layout: one line block per message, `[YYYY-MM-DD HH:MM] Name: text` (UTC;
 * multi-line messages keep their newlines), blocks separated by `"\n"`. Messages
 * are ordered thread-contiguously: each top-level message is followed immediately
 * by its replies (found by `thread_ts`, across day files and without `replies`
 * arrays), replies prefixed `"  ↳ "`; replies whose parent is absent are grouped at
 * their thread's time. Each timestamp appears once (a reply also posted as
 * `thread_broadcast`, a `message_changed` copy: the most recently edited text
 * wins); `message_deleted` removes its message. Join/leave/topic/purpose/
 * integration/pin notices are dropped unless `ctx.options.slack.keepSystemMessages`.
 * Markup is rendered by {@link renderSlackText}; a message with empty `text` shows
 * its rich-text `blocks`, else its attachments' text, else `[file: name]`.
 * Names: users.json real name, else the message's `user_profile`, else the raw id
 * (`@U09ZZZ` in mentions); bots: `username`, else `bot_profile.name`, else the
 * name from a `bot_add` notice.
 *
 * `segments`: one per message; `text.slice(start, end)` is exactly that message's
 * line(s) including the prefix. Metadata: `channel`, `user` (display name),
 * `userId?` (raw `user` field), `ts`, `time` (ISO 8601 UTC), `threadTs?` (on
 * replies and on parents that have replies in the document), `isReply`, `bot?:
 * true`, `edited?: true`, `broadcast?: true` (thread_broadcast), `system?`
 * (subtype of a kept notice), `link?` (permalink
 * `WORKSPACE/archives/CHANNEL_ID/pTSDIGITS`, plus `?thread_ts=…&cid=…` on replies;
 * only when `ctx.options.slack.workspaceUrl` is set and the channel id is known).
 *
 * Document: `uri` = `<path>#<channel>`; metadata `path` (the folder, zip or file),
 * `type: "slack"`, `title` = `#channel`, `channel`, `channelId?`, `workspaceUrl?`,
 * `format` (`export` | `zip` | `history`), `messageCount`, `tsStart`/`tsEnd`
 * (Slack ts) and `timeStart`/`timeEnd` (ISO) of the earliest and latest message,
 * `topic?`, `purpose?`, `page?`. `warnings` lists skipped day files and channels
 * (a day file or an optional `groups.json`/`mpims.json`/`dms.json` that is not valid
 * JSON, not an array, or over `limits.maxFileBytes` — in a folder or a zip, where a
 * header that under-states the size is caught while inflating and reported as
 * `more than …` — is skipped with a warning, the rest of the export is kept), and
 * "no permalinks: the channel id is unknown" when `workspaceUrl` is set but the
 * channel id is not known (a history dump without a channel id).
 *
 * @throws ExtractionError naming the file and the problem: a required
 *   `users.json`/`channels.json` missing, not valid JSON, not an array or over
 *   `maxFileBytes` (these stay fatal: without them names and channels are unknown);
 *   a history file that is not valid JSON, not message history or over
 *   `maxFileBytes`; no messages; the zip limits and refusals above.
 */
export const slackExtractor: Extractor = {
  type: "slack",
  async extract(path: string, ctx: ExtractContext): Promise<ExtractedDocument[]> {
    if (ctx.bytes) {
      if (looksLikeZip(ctx.bytes)) return withZipFiles(path, ctx, (files) => extractExport(files, ctx));
      return extractHistory(path, ctx);
    }
    const info = await stat(path).catch(() => undefined);
    if (!info) throw new ExtractionError(path, "file not found");
    if (info.isDirectory()) return extractExport(folderFiles(path, ctx.options.limits), ctx);
    if (path.toLowerCase().endsWith(".zip")) {
      return withZipFiles(path, ctx, (files) => extractExport(files, ctx));
    }
    return extractHistory(path, ctx);
  },
};
