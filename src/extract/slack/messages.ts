/**
 * Slack messages to a channel document: system notices and edits resolved, each timestamp
 * once, thread-contiguous order (replies after their parent), one segment per message,
 * permalinks.
 */
import type { ExtractedDocument, Segment } from "../../types.js";
import type { SlackExtractOptions } from "../contract.js";
import { compact, nonBlank } from "../util.js";
import { isObject, str } from "./json.js";
import {
  compareTs,
  formatTs,
  isoTime,
  messageText,
  type SlackContext,
  type SlackMessage,
  type SlackUser,
  userName,
} from "./render.js";

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
export function collectMessages(raws: readonly unknown[], ctx: SlackContext, keepSystem: boolean): Message[] {
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
export function channelDocument(
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
