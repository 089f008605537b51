/**
 * A Slack API `conversations.history` dump (or a bare array of messages): one channel per
 * file, its name from the file or the folder, `users.json` beside it when there is one.
 */
import { stat } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { ExtractionError } from "../../errors.js";
import type { ExtractedDocument } from "../../types.js";
import type { ExtractContext, ExtractionLimits } from "../contract.js";
import { compact, nonBlank, readSource } from "../util.js";
import { channelRecords, safeFolderName, userTable } from "./export.js";
import { folderFiles } from "./files.js";
import { isObject, kindOf, parseJson, str } from "./json.js";
import { channelDocument, collectMessages } from "./messages.js";
import type { SlackContext } from "./render.js";

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
export async function extractHistory(path: string, ctx: ExtractContext): Promise<ExtractedDocument[]> {
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
