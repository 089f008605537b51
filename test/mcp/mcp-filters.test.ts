/** MCP `search_knowledge` with a metadata `filter`: applied, and a bad one is an `isError` result naming the position. */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KnowledgeLayer } from "../../src/knowledge-layer.js";
import { createKnowledgeServer } from "../../src/mcp/server.js";
import { tempDir } from "../helpers/helpers.js";

const tmp = tempDir("kl-mcp-filter-");
let kl: KnowledgeLayer;
let client: Client;

beforeAll(async () => {
  kl = KnowledgeLayer.open({ dataDir: tmp.dir });
  await kl.createKb("default", { retrieval: { mode: "keyword" } });
  const doc = (uri: string, from: string, text: string) => ({
    uri,
    text,
    metadata: { path: uri, type: "email" as const, from, subject: uri, date: "2024-05-01T00:00:00.000Z" },
  });
  await kl.ingestDocuments(
    [
      doc("/m/1.eml", "alice@x.com", "Budget approved for the launch."),
      doc("/m/2.eml", "bob@x.com", "Budget budget budget: the launch budget is late."),
    ],
    { embed: false },
  );
  const server = createKnowledgeServer(kl, { log: () => {} });
  const [a, b] = InMemoryTransport.createLinkedPair();
  await server.connect(a);
  client = new Client({ name: "test", version: "1" });
  await client.connect(b);
});
afterAll(async () => {
  await client.close();
  await kl.close();
  tmp.cleanup();
});

describe("MCP search_knowledge filter", () => {
  it("restricts the passages to the matching sources", async () => {
    const r = (await client.callTool({
      name: "search_knowledge",
      arguments: { query: "budget", top_k: 1, filter: { from: "alice@x.com" } },
    })) as CallToolResult;
    expect(r.isError).toBeUndefined();
    const results = (r.structuredContent as { results: { source: { uri: string; from: string } }[] }).results;
    expect(results.map((x) => x.source.uri)).toEqual(["/m/1.eml"]);
  });

  it("answers a malformed filter with isError naming the position", async () => {
    const r = (await client.callTool({
      name: "search_knowledge",
      arguments: { query: "budget", filter: { date: { $gte: "someday" } } },
    })) as CallToolResult;
    expect(r.isError).toBe(true);
    expect((r.content[0] as { text: string }).text).toBe(
      'Error: filter.date.$gte: expected an ISO date or number, got the string "someday"',
    );
  });
});
