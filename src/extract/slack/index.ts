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
import { stat } from "node:fs/promises";
import { ExtractionError } from "../../errors.js";
import type { ExtractedDocument } from "../../types.js";
import type { ExtractContext, Extractor } from "../contract.js";
import { extractExport } from "./export.js";
import { folderFiles, looksLikeZip, withZipFiles } from "./files.js";
import { extractHistory } from "./history.js";

export { compareTs, renderSlackText, type SlackContext } from "./render.js";

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
