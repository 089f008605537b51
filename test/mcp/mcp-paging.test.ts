import { writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KnowledgeLayer } from "../../src/knowledge-layer.js";
import { tempDir } from "../helpers/helpers.js";

const ROOT = resolve(import.meta.dirname, "..", "..");
const tmp = tempDir("kl-mcp-paging-");
const dataDir = join(tmp.dir, "data");
/** A document dense with astral characters (emoji, ZWJ sequences, flags, math letters) at odd and even offsets. */
const emojiDoc = join(tmp.dir, "emoji.md");
const EMOJI_TEXT = [
  "# 😀 Emoji notes",
  "",
  "a😀b😀😀c 👩‍👩‍👧‍👦 family 🇫🇷🇩🇪 flags 𝕳𝖊𝖑𝖑𝖔 𝄞 music 🌍🌎🌏 end.",
  "",
  "Second paragraph: 🙂x🙂xx🙂xxx🙂.",
].join("\n");

interface Page {
  offset: number;
  text: string;
  truncated: boolean;
  nextOffset?: number;
  totalChars: number;
}

let client: Client;

/** `get_document` on the emoji document; fails the test on a tool error. */
async function page(args: { offset?: number; limit?: number }): Promise<Page> {
  const r = (await client.callTool({
    name: "get_document",
    arguments: { uri: emojiDoc, ...args },
  })) as CallToolResult;
  expect(r.isError, JSON.stringify(r.content)).toBeFalsy();
  return r.structuredContent as unknown as Page;
}

beforeAll(async () => {
  writeFileSync(emojiDoc, EMOJI_TEXT);
  const kl = KnowledgeLayer.open({ dataDir });
  await kl.ingest([emojiDoc], { embed: false });
  await kl.close();
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [
      "--import",
      join(ROOT, "node_modules/tsx/dist/loader.mjs"),
      join(ROOT, "src/cli/main.ts"),
      "mcp",
      "--data-dir",
      dataDir,
    ],
    cwd: tmp.dir,
    env: Object.fromEntries(
      Object.entries({ ...process.env, KL_CACHE_URL: "none" }).filter(
        (e): e is [string, string] => e[1] !== undefined,
      ),
    ),
    stderr: "pipe",
  });
  client = new Client({ name: "kl-test", version: "1.0.0" });
  await client.connect(transport);
});

afterAll(async () => {
  await client?.close();
  tmp.cleanup();
});

describe("kl mcp get_document paging over astral characters", () => {
  it("advances on every page with small limits, never splits a surrogate pair, and the pages rebuild the text", async () => {
    const whole = await page({});
    expect(whole.truncated).toBe(false);
    expect(whole.text).toContain("👩‍👩‍👧‍👦 family");
    expect(whole.totalChars).toBe(whole.text.length);
    for (const limit of [1, 2, 3]) {
      let offset = 0;
      let joined = "";
      let calls = 0;
      for (;;) {
        calls++;
        // A page per code point at worst: more calls would mean a page that did not advance.
        expect(calls).toBeLessThanOrEqual(whole.totalChars);
        const p = await page({ offset, limit });
        expect(p.offset).toBe(offset);
        expect(p.text.length).toBeGreaterThan(0);
        expect(p.text.length).toBeLessThanOrEqual(Math.max(limit, 2));
        // No lone surrogate: a well-formed string survives a UTF-8 round trip unchanged.
        expect(Buffer.from(p.text, "utf8").toString("utf8")).toBe(p.text);
        joined += p.text;
        if (!p.truncated) break;
        expect(p.nextOffset).toBe(offset + p.text.length);
        offset = p.nextOffset as number;
      }
      expect(joined).toBe(whole.text);
    }
  });

  it("starts a page asked for inside a surrogate pair at the pair", async () => {
    const whole = await page({});
    const at = whole.text.indexOf("😀b");
    const p = await page({ offset: at + 1, limit: 1 });
    expect(p).toMatchObject({ offset: at, text: "😀", truncated: true, nextOffset: at + 2 });
  });
});
