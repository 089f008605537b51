/**
 * SLACK strategy: one segment per message; threads become one chunk when they
 * fit, otherwise clusters of whole messages; unthreaded messages are clustered
 * by size and time proximity.
 */
import type { ChunkingConfig } from "../config.js";
import type { Chunk, ExtractedDocument } from "../types.js";
import type { Chunker } from "./contract.js";
import { chunkSemantic } from "./semantic.js";
import { type ChunkLimits, defineChunker, makeChunk, type Span, trimSpan } from "./spans.js";
import { pack, spanMeasurer, splitRange } from "./split.js";

/** Largest time gap, in seconds, between consecutive unthreaded messages of one cluster. */
export const SLACK_MAX_GAP_SECONDS = 30 * 60;

/** A message unit: the message's segment plus any text up to the next message. */
interface Message extends Span {
  user?: string;
  userId?: string;
  ts?: string;
  threadTs?: string;
  isReply: boolean;
  /** Permalink of the message, when the extractor knew the workspace URL. */
  link?: string;
  /** Thread this message belongs to (the root's ts), if any. */
  thread?: string;
}

const str = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined);

/** Message units from the document's segments, or [] when there are none. */
function messagesOf(doc: ExtractedDocument): Message[] {
  const text = doc.text;
  const segs = (doc.segments ?? [])
    .filter((s) => s.end > s.start && s.start >= 0 && s.start < text.length)
    .sort((a, b) => a.start - b.start);
  const out: Message[] = [];
  segs.forEach((s, i) => {
    const from = i === 0 ? 0 : s.start;
    const to = segs[i + 1]?.start ?? text.length;
    const span = trimSpan(text, from, to);
    if (!span) return;
    const m = s.metadata;
    out.push({
      ...span,
      user: str(m.user),
      userId: str(m.userId),
      ts: str(m.ts),
      threadTs: str(m.threadTs),
      isReply: m.isReply === true,
      link: str(m.link),
    });
  });
  out.forEach((m, i) => {
    const next = out[i + 1];
    if (m.isReply) m.thread = m.threadTs;
    else if (m.ts && (m.threadTs === m.ts || (next?.isReply && next.threadTs === m.ts))) m.thread = m.ts;
  });
  return out;
}

/** Seconds between two Slack timestamps ("1463079762.000002"), or 0 when unknown. */
function gapSeconds(a: Message, b: Message): number {
  const x = Number.parseFloat(a.ts ?? "");
  const y = Number.parseFloat(b.ts ?? "");
  return Number.isFinite(x) && Number.isFinite(y) ? Math.abs(y - x) : 0;
}

/** Chunk metadata for a run of messages. */
function slackMetadata(
  doc: ExtractedDocument,
  msgs: readonly Message[],
  thread?: string,
): Record<string, unknown> {
  const meta: Record<string, unknown> = {};
  const channel = str(doc.metadata.channel);
  if (channel) meta.channel = channel;
  const names = [...new Set(msgs.map((m) => m.user ?? m.userId).filter((u): u is string => !!u))];
  const ids = [...new Set(msgs.map((m) => m.userId).filter((u): u is string => !!u))];
  meta.participants = names;
  if (ids.length > 0) meta.users = ids;
  const stamps = msgs.map((m) => m.ts).filter((t): t is string => !!t);
  if (stamps.length > 0) {
    meta.tsStart = stamps[0];
    meta.tsEnd = stamps[stamps.length - 1];
    const iso = (ts: string | undefined): string | undefined => {
      const seconds = Number.parseFloat(ts ?? "");
      return Number.isFinite(seconds) ? new Date(seconds * 1000).toISOString() : undefined;
    };
    const from = iso(meta.tsStart as string);
    const to = iso(meta.tsEnd as string);
    if (from && to) {
      meta.timeStart = from;
      meta.timeEnd = to;
    }
  }
  if (thread) meta.threadTs = thread;
  const link = msgs.find((m) => m.link)?.link;
  if (link) meta.link = link;
  meta.messageCount = msgs.length;
  return meta;
}

/**
 * Splits a Slack channel document into SLACK chunks.
 *
 * `doc.segments` holds one segment per message with metadata
 * `{ user, userId, ts, threadTs?, isReply, link? }`; a thread's messages are contiguous.
 * A thread (root + replies) of at most `limits.slack.wholeThreadUnder` units
 * (default 1,500, capped by `limits.size`) becomes one `complete_thread` chunk; a
 * longer thread becomes `message_cluster` chunks of whole messages. Unthreaded
 * messages are grouped into `message_cluster` chunks while the span fits and
 * consecutive messages are at most `limits.slack.maxGapSeconds` (default
 * {@link SLACK_MAX_GAP_SECONDS}) apart. A single message longer than `limits.size`
 * is cut at sentence/whitespace boundaries as a last resort. Text between
 * segments stays with the message before it. Sizes are in `limits.measure` units.
 *
 * Chunk metadata: `channel`, `participants` (unique user names, in order),
 * `users` (unique user ids), `tsStart`, `tsEnd` (Slack timestamps), `timeStart`,
 * `timeEnd` (ISO 8601 UTC), `threadTs` (thread chunks), `link` (permalink of the
 * first message that has one), `messageCount`. Without segments this falls back to SEMANTIC (`paragraph`).
 */
export function chunkSlack(doc: ExtractedDocument, limits: ChunkLimits): Chunk[] {
  const msgs = messagesOf(doc);
  if (msgs.length === 0) return chunkSemantic(doc, limits);
  const text = doc.text;
  const { measure } = limits;
  const size = spanMeasurer(text, measure);
  const split = (u: Span, lead: number, after: number): Span[] =>
    splitRange(text, lead, u.end, { size: limits.size, measure, after });
  const wholeThread = Math.min(limits.size, limits.slack.wholeThreadUnder);
  const chunks: Chunk[] = [];
  let i = 0;
  while (i < msgs.length) {
    const head = msgs[i] as Message;
    let j = i + 1;
    if (head.thread) while (j < msgs.length && msgs[j]?.thread === head.thread) j++;
    const isThread = head.thread !== undefined && j - i > 1;
    if (!isThread)
      while (j < msgs.length && !(msgs[j]?.thread && msgs[j + 1]?.thread === msgs[j]?.thread)) j++;
    const run = msgs.slice(i, j);
    i = j;
    const last = run[run.length - 1] as Message;
    if (isThread && size(head.start, last.end) <= wholeThread) {
      const span = { start: head.start, end: last.end };
      chunks.push(
        makeChunk(text, span, "complete_thread", { metadata: slackMetadata(doc, run, head.thread) }),
      );
      continue;
    }
    const groups = pack(run, limits.size, {
      size,
      split,
      resume: true,
      join: isThread
        ? undefined
        : (g, next) => gapSeconds(g[g.length - 1] as Message, next) <= limits.slack.maxGapSeconds,
    });
    for (const g of groups) {
      const thread = isThread ? head.thread : undefined;
      chunks.push(makeChunk(text, g, "message_cluster", { metadata: slackMetadata(doc, g.units, thread) }));
    }
  }
  return chunks;
}

/**
 * Creates the SLACK chunker (see {@link chunkSlack}).
 * @throws ConfigError for invalid chunking parameters.
 */
export function createSlackChunker(config: ChunkingConfig): Chunker {
  return defineChunker("slack", config, chunkSlack);
}
