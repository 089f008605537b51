/**
 * Test helpers for the chunking stage: the shared invariant checker, document
 * builders shaped like extractor output, and paths into ../shared (read in place).
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { expect } from "vitest";
import { createMeasure } from "../../src/chunk/measure.js";
import type { ChunkingConfig } from "../../src/config.js";
import {
  type Chunk,
  CONTEXT_SEPARATOR,
  chunkBody,
  type ExtractedDocument,
  type Segment,
} from "../../src/types.js";

const here = path.dirname(fileURLToPath(import.meta.url));

/** Absolute path of a file under the shared folder (`../shared` from the project root). */
export function shared(...parts: string[]): string {
  return path.resolve(here, "../../../shared", ...parts);
}

/** Reads a shared file as UTF-8. */
export function readShared(...parts: string[]): string {
  return readFileSync(shared(...parts), "utf8");
}

/** Chunking config with `auto` strategy. */
export function cfg(chunkSize: number, chunkOverlap = 0, minChunkSize = 0): ChunkingConfig {
  return { strategy: "auto", chunkSize, chunkOverlap, minChunkSize };
}

/** A document of the given type. */
export function doc(
  text: string,
  type: ExtractedDocument["metadata"]["type"] = "text",
  extra: Record<string, unknown> = {},
  segments?: Segment[],
): ExtractedDocument {
  const d: ExtractedDocument = {
    uri: `/test/doc.${type}`,
    text,
    metadata: { path: `/test/doc.${type}`, type, ...extra },
  };
  if (segments) d.segments = segments;
  return d;
}

/** A Slack message for {@link slackDoc}. */
export interface SlackMessage {
  user: string;
  userId?: string;
  ts: string;
  text: string;
  threadTs?: string;
}

/**
 * A Slack channel document shaped like the extractor output: one line block per
 * message (`user: text`), one segment per message with `{ user, userId, ts, threadTs?, isReply }`.
 * Messages must already be ordered with each thread contiguous.
 */
export function slackDoc(channel: string, messages: SlackMessage[]): ExtractedDocument {
  let text = "";
  const segments: Segment[] = [];
  for (const m of messages) {
    const start = text.length;
    text += `${m.user}: ${m.text}`;
    const metadata: Record<string, unknown> = {
      user: m.user,
      userId: m.userId ?? `U_${m.user}`,
      ts: m.ts,
      isReply: m.threadTs !== undefined && m.threadTs !== m.ts,
    };
    if (m.threadTs) metadata.threadTs = m.threadTs;
    segments.push({ start, end: text.length, metadata });
    text += "\n";
  }
  return doc(text, "slack", { channel, title: `#${channel}` }, segments);
}

const BLANK = /[\p{White_Space}\u200b]/u;

/**
 * True when the character at `i` is blank as the chunkers define it (`isBlank` in
 * src/chunk/spans.ts): Unicode White_Space, or U+200B ZERO WIDTH SPACE (blank per
 * conformance case B13). Other format characters (ZWJ, ZWNJ, U+2060, BOM,
 * variation selectors) are not blank: every one of them must lie in a chunk.
 */
export function isBlankChar(text: string, i: number): boolean {
  return BLANK.test(text.charAt(i));
}

/**
 * Asserts the chunk invariants shared by every strategy: exact spans
 * (INV-OFFSETS), non-blank bodies with trimmed edges (INV-NONEMPTY), well-formed
 * UTF-16 (INV-WELLFORMED), the chunk text (prefix included) ≤ chunkSize in the
 * configured unit (INV-SIZE), every non-blank
 * character covered (INV-COVERAGE), ordering, indices, and — with overlap 0 —
 * disjoint spans; with overlap, no chunk inside its predecessor.
 */
export function checkInvariants(d: ExtractedDocument, chunks: Chunk[], config: ChunkingConfig) {
  const text = d.text;
  const measure = createMeasure(config.unit ?? "chars", config.tokenizer);
  const covered = new Uint8Array(text.length);
  chunks.forEach((c, i) => {
    const where = `chunk ${i} [${c.start},${c.end})`;
    expect(c.chunkIndex, where).toBe(i);
    expect(c.totalChunks, where).toBe(chunks.length);
    const body = chunkBody(c);
    expect(text.slice(c.start, c.end), where).toBe(body);
    if (c.contextPrefix !== undefined) {
      expect(c.contextPrefix.length, where).toBeGreaterThan(0);
      expect(c.text, where).toBe(`${c.contextPrefix}${CONTEXT_SEPARATOR}${body}`);
    } else {
      expect(c.text, where).toBe(body);
    }
    expect(body.length, where).toBeGreaterThan(0);
    expect(isBlankChar(body, 0), `${where} starts blank`).toBe(false);
    expect(isBlankChar(body, body.length - 1), `${where} ends blank`).toBe(false);
    expect(body.isWellFormed(), `${where} well-formed body`).toBe(true);
    expect(c.text.isWellFormed(), `${where} well-formed text`).toBe(true);
    // INV-SIZE: the whole chunk text (context prefix included), in the configured unit.
    expect(measure.count(c.text), `${where} size`).toBeLessThanOrEqual(config.chunkSize);
    if (i > 0) {
      const prev = chunks[i - 1] as Chunk;
      expect(c.start, `${where} ordered`).toBeGreaterThanOrEqual(prev.start);
      if (config.chunkOverlap === 0) expect(c.start, `${where} disjoint`).toBeGreaterThanOrEqual(prev.end);
      else expect(c.end, `${where} not inside predecessor`).toBeGreaterThan(prev.end);
    }
    covered.fill(1, c.start, c.end);
  });
  for (let i = 0; i < text.length; i++) {
    if (!covered[i] && !isBlankChar(text, i)) {
      throw new Error(
        `character ${JSON.stringify(text.charAt(i))} at ${i} is in no chunk: …${text.slice(i - 20, i + 20)}…`,
      );
    }
  }
}

/** Number of non-blank characters of a string. */
export function nonBlankCount(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) if (!isBlankChar(s, i)) n++;
  return n;
}
