/**
 * One redaction for every output: secret fields of every config section are
 * masked in CLI JSON and human output, HTTP responses, MCP tool results and error
 * messages, and credentials in URLs and free text are masked.
 */
import { spawnSync } from "node:child_process";
import { join, resolve } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { formatKb } from "../src/cli/format.js";
import { defaultKbConfig, KNOWN_KEYS, type KnowledgeBaseConfig } from "../src/config.js";
import { KnowledgeLayer } from "../src/knowledge-layer.js";
import { createKnowledgeServer } from "../src/mcp/server.js";
import { errorForLog, isSecretKey, MASK, maskUrl, redactSecrets, redactText } from "../src/secrets.js";
import { internalKbName } from "../src/server/tenancy.js";
import { redactKbConfig } from "../src/store/index.js";
import { tempDir } from "./helpers.js";
import { startServer, type TestServer } from "./server-helpers.js";

const ROOT = resolve(import.meta.dirname, "..");
const tmp = tempDir("kl-secrets-");
const dataDir = join(tmp.dir, "data");

/** Every secret the config below holds; none may appear in any output. */
const SECRETS = /SECRET_[A-Z_]+/;

/** A KB config with a secret in every place a section can hold one (keys, URL passwords, URL query keys). */
function secretConfig(name: string): KnowledgeBaseConfig {
  const base = defaultKbConfig(name);
  return {
    ...base,
    extraction: { slack: { workspaceUrl: "https://acme.slack.com" } },
    embedding: {
      provider: "openai-compatible",
      model: "text-embed-1",
      batchSize: 16,
      baseUrl: "https://emb.example.com/v1?api_key=SECRET_EMB_QUERY&region=eu",
      apiKey: "SECRET_EMB_KEY",
    },
    vectorStore: {
      type: "qdrant",
      url: "https://admin:SECRET_STORE_PW@qdrant.example.com:6333",
      apiKey: "SECRET_STORE_KEY",
      collection: `kb_${name.replace(/\W/g, "_")}`,
    },
    retrieval: {
      ...base.retrieval,
      reranker: {
        type: "cohere",
        model: "rerank-v3",
        apiKey: "SECRET_RERANK_KEY",
        baseUrl: "https://rerank.example.com?token=SECRET_RERANK_QUERY",
      },
      expansionLlm: {
        baseUrl: "https://bot:SECRET_LLM_PW@llm.example.com/v1",
        model: "gpt-mini",
        apiKey: "SECRET_LLM_KEY",
      },
    },
  };
}

/** Asserts that a printed config hides every secret and keeps everything else. */
function expectMasked(config: KnowledgeBaseConfig): void {
  expect(JSON.stringify(config)).not.toMatch(SECRETS);
  const embedding = config.embedding as { apiKey?: string; baseUrl?: string };
  expect(embedding.apiKey).toBe(MASK);
  expect(embedding.baseUrl).toBe("https://emb.example.com/v1?api_key=***&region=eu");
  expect(config.embedding.model).toBe("text-embed-1");
  expect(config.vectorStore.apiKey).toBe(MASK);
  expect(config.vectorStore.url).toBe("https://admin:***@qdrant.example.com:6333");
  expect(config.retrieval.reranker).toEqual({
    type: "cohere",
    model: "rerank-v3",
    apiKey: MASK,
    baseUrl: "https://rerank.example.com?token=***",
  });
  expect(config.retrieval.expansionLlm).toEqual({
    baseUrl: "https://bot:***@llm.example.com/v1",
    model: "gpt-mini",
    apiKey: MASK,
  });
  expect(config.extraction?.slack?.workspaceUrl).toBe("https://acme.slack.com");
}

beforeAll(async () => {
  const kl = KnowledgeLayer.open({ dataDir, cache: { type: "none" } });
  kl.catalog.insertKb(secretConfig("vault"));
  await kl.close();
});

afterAll(() => tmp.cleanup());

describe("secret names and text", () => {
  it("every secret-named setting of every KB config section is masked, no other setting is", () => {
    const masked: string[] = [];
    for (const [section, keys] of Object.entries(KNOWN_KEYS)) {
      const input = Object.fromEntries(keys.map((k) => [k, `value-of-${k}`]));
      const out = redactSecrets(input);
      for (const k of keys) {
        if (isSecretKey(k)) {
          expect(out[k], `${section}.${k}`).toBe(MASK);
          masked.push(`${section}.${k}`);
        } else {
          expect(out[k], `${section}.${k}`).toBe(`value-of-${k}`);
        }
      }
    }
    // The secret fields of today's sections (nested reranker/expansionLlm keys are checked below).
    expect(masked.sort()).toEqual(["embedding.apiKey", "vectorStore.apiKey"]);
    // Nested sections of retrieval: every reranker type and the expansion endpoint.
    const config = secretConfig("walk");
    expectMasked(redactSecrets(config));
    // The input is not changed, and the deprecated alias gives the same result.
    expect(config.retrieval.expansionLlm?.apiKey).toBe("SECRET_LLM_KEY");
    expect(redactKbConfig(config)).toEqual(redactSecrets(config));
  });

  it("recognises secret names in any spelling, and leaves look-alikes", () => {
    for (const k of [
      "apiKey",
      "api_key",
      "X-API-Key",
      "accessToken",
      "password",
      "clientSecret",
      "authorization",
    ])
      expect(isSecretKey(k), k).toBe(true);
    for (const k of ["credentials", "connectionString", "privateKey", "session_token", "cookie"])
      expect(isSecretKey(k), k).toBe(true);
    for (const k of ["key", "maxBatchTokens", "tokenizer", "keywordTopK", "author", "allowDownload", "model"])
      expect(isSecretKey(k), k).toBe(false);
    expect(
      redactSecrets({ a: [{ deep: { token: "SECRET_DEEP", n: 3 } }], credentials: { user: "u" } }),
    ).toEqual({
      a: [{ deep: { token: MASK, n: 3 } }],
      credentials: MASK,
    });
  });

  it("masks credentials in URLs and free text", () => {
    expect(maskUrl("postgres://kl:SECRET_PG@db:5432/kl?sslmode=require")).toBe(
      "postgres://kl:***@db:5432/kl?sslmode=require",
    );
    expect(maskUrl("https://h.example/x?key=SECRET_Q&sig=SECRET_S&page=2")).toBe(
      "https://h.example/x?key=***&sig=***&page=2",
    );
    expect(maskUrl("not a url")).toBe("not a url");
    const text = redactText(
      'connect ECONNREFUSED postgres://kl:SECRET_PG@db/kl; GET https://h/v1?api_key=SECRET_Q&n=1 failed; headers {"Authorization":"Bearer SECRET_BEARER_123"} apiKey=SECRET_ASSIGN token: SECRET_COLON key sk-SECRETabcdefabcdefabcdef',
    );
    expect(text).not.toMatch(/SECRET/);
    expect(text).toContain("postgres://kl:***@db/kl");
    expect(text).toContain("?api_key=***&n=1");
    expect(text).toContain("apiKey=***");
    // Ordinary prose is left alone.
    const prose =
      "Token limit exceeded: 9000 tokens > maxBatchTokens: 8192 (see https://docs.example/limits?page=2)";
    expect(redactText(prose)).toBe(prose);
    const logged = errorForLog(new Error("cannot reach redis://:SECRET_REDIS@cache:6379"));
    expect(JSON.stringify(logged)).not.toMatch(/SECRET/);
    expect(logged.message).toBe("cannot reach redis://:***@cache:6379");
  });
});

describe("outputs", () => {
  /** Runs the CLI from source on the test's data directory. */
  function kl(...args: string[]): { code: number | null; stdout: string; stderr: string } {
    const r = spawnSync(
      process.execPath,
      ["--import", join(ROOT, "node_modules/tsx/dist/loader.mjs"), join(ROOT, "src/cli/main.ts"), ...args],
      {
        cwd: tmp.dir,
        env: { ...process.env, KL_HOME: dataDir, KL_CACHE_URL: "none" },
        encoding: "utf8",
        timeout: 60_000,
      },
    );
    return { code: r.status, stdout: r.stdout, stderr: r.stderr };
  }

  it("kl kb show --json and kl kb list --json mask every section's secrets", () => {
    const show = kl("kb", "show", "vault", "--json");
    expect(show.code, show.stderr).toBe(0);
    expect(show.stdout).not.toMatch(SECRETS);
    expectMasked(JSON.parse(show.stdout).config);
    const list = kl("kb", "list", "--json");
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).not.toMatch(SECRETS);
    const vault = JSON.parse(list.stdout).find((k: { name: string }) => k.name === "vault");
    expectMasked(vault.config);
  });

  it("the human kb description masks them too", async () => {
    const lib = KnowledgeLayer.open({ dataDir, cache: { type: "none" }, create: false });
    try {
      const text = formatKb(lib.getKb("vault"), lib.counts("vault"));
      expect(text).not.toMatch(SECRETS);
      expect(text).toContain("store:      qdrant https://admin:***@qdrant.example.com:6333,");
      expect(text).toContain("embedding:  openai-compatible:text-embed-1");
    } finally {
      await lib.close();
    }
  });

  describe("HTTP and MCP", () => {
    let server: TestServer;
    beforeAll(async () => {
      server = await startServer();
      server.kl.catalog.insertKb(secretConfig(internalKbName("acme", "vault")));
    });
    afterAll(async () => server?.close());

    it("GET /kbs and /kbs/:kb mask every section's secrets", async () => {
      const headers = { authorization: `Bearer ${server.key("acme")}` };
      const one = await fetch(`${server.base}/kbs/vault`, { headers });
      expect(one.status).toBe(200);
      const body = await one.text();
      expect(body).not.toMatch(SECRETS);
      expectMasked({ ...JSON.parse(body).config, name: "vault" });
      const all = await fetch(`${server.base}/kbs`, { headers });
      const text = await all.text();
      expect(all.status).toBe(200);
      expect(text).not.toMatch(SECRETS);
      expect(text).toContain('"apiKey":"***"');
    });

    it("MCP tool results (listing and errors) hold no secret", async () => {
      const mcp = createKnowledgeServer(server.kl, { log: () => {} });
      const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
      await mcp.connect(serverSide);
      const client = new Client({ name: "kl-test", version: "1.0.0" });
      await client.connect(clientSide);
      try {
        const list = (await client.callTool({
          name: "list_knowledge_bases",
          arguments: {},
        })) as CallToolResult;
        expect(list.isError).toBeFalsy();
        expect(JSON.stringify(list)).toContain("acme.vault");
        expect(JSON.stringify(list)).not.toMatch(SECRETS);
        // An error message that echoes a credential-bearing input is masked.
        const missing = (await client.callTool({
          name: "get_document",
          arguments: { uri: "https://files.example.com/a.md?token=SECRET_URI_TOKEN", kb: "acme.vault" },
        })) as CallToolResult;
        expect(missing.isError).toBe(true);
        const text = JSON.stringify(missing);
        expect(text).not.toMatch(SECRETS);
        expect(text).toContain("token=***");
      } finally {
        await client.close();
        await mcp.close();
      }
    });
  });
});
