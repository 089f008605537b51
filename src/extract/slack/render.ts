/**
 * Slack message rendering: markup (`<@U123>`, `<#C1|name>`, links, entities), rich-text and
 * layout blocks, attachments and file placeholders become plain text; Slack timestamps are
 * compared and formatted.
 */
import { nonBlank } from "../util.js";
import { isObject, list, str } from "./json.js";

/** The fields of a Slack message the extractor reads (all optional: input is untrusted). */
export interface SlackMessage {
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
export interface SlackUser {
  id?: unknown;
  name?: unknown;
  real_name?: unknown;
  display_name?: unknown;
  profile?: { real_name?: unknown; display_name?: unknown };
}

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
export function isoTime(ts: string): string | undefined {
  return tsDate(ts)?.toISOString();
}

/** Formats a Slack timestamp as `YYYY-MM-DD HH:MM` (UTC). */
export function formatTs(ts: string): string {
  const iso = isoTime(ts);
  return iso ? iso.slice(0, 16).replace("T", " ") : "????-??-?? ??:??";
}

/** Display name of a user: real name, else profile display name, else user name. */
export function userName(u: SlackUser): string | undefined {
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
export function messageText(m: SlackMessage, ctx: SlackContext): string {
  let text = renderSlackText(str(m.text) ?? "", ctx);
  if (text === "") text = renderBlocks(m.blocks, ctx);
  if (text === "") text = renderSlackText(attachmentText(m), ctx);
  if (text === "") text = filePlaceholders(m);
  return text;
}
