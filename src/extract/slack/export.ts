/**
 * A Slack workspace export (folder or zip): users, channels (`channels.json`, `groups.json`,
 * `mpims.json`, `dms.json`) and their day files, one document per channel.
 */
import { ExtractionError } from "../../errors.js";
import type { ExtractedDocument } from "../../types.js";
import type { ExtractContext } from "../contract.js";
import { compact, nonBlank } from "../util.js";
import { type ExportFiles, optionalArray, readSkippable, requiredArray } from "./files.js";
import { isObject, kindOf, parseJson, str } from "./json.js";
import { channelDocument, collectMessages } from "./messages.js";
import { type SlackContext, type SlackUser, userName } from "./render.js";

/** A channel record of `channels.json` (`groups.json`, `mpims.json`, `dms.json`). */
interface SlackChannel {
  id?: string;
  name?: string;
  topic?: { value?: unknown };
  purpose?: { value?: unknown };
}

/** User id → display name from the records of `users.json`. */
export function userTable(records: readonly unknown[]): Map<string, string> {
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
export function channelRecords(records: readonly unknown[], nameFromId = false): SlackChannel[] {
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
export function safeFolderName(name: string): boolean {
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
export async function extractExport(files: ExportFiles, ctx: ExtractContext): Promise<ExtractedDocument[]> {
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
