/**
 * One redaction for every output: secret fields of every config section are
 * masked in CLI JSON and human output, HTTP responses, MCP tool results and error
 * messages, and credentials in URLs and free text are masked.
 */
import { spawnSync } from "node:child_process";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join, resolve } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { formatKb } from "../src/cli/format.js";
import {
  COMMON_STORE_SETTINGS,
  defaultKbConfig,
  KNOWN_KEYS,
  type KnowledgeBaseConfig,
  VECTOR_STORES,
  validateKbConfig,
} from "../src/config.js";
import { OpenAiCompatibleEmbedder } from "../src/embed/openai-compatible.js";
import { COMMON_EMBEDDING_SETTINGS, EMBEDDING_PROVIDER_REGISTRY } from "../src/embed/registry.js";
import { ConfigError } from "../src/errors.js";
import { endpointUrl } from "../src/http.js";
import { KnowledgeLayer } from "../src/knowledge-layer.js";
import { createKnowledgeServer } from "../src/mcp/server.js";
import { CohereReranker, createReranker, RERANKERS } from "../src/rerank/index.js";
import { createLlmExpander } from "../src/retrieve/expansion.js";
import {
  errorForLog,
  isSecretKey,
  MASK,
  maskKnownSecrets,
  maskUrl,
  redactSecrets,
  redactText,
} from "../src/secrets.js";
import { internalKbName } from "../src/server/tenancy.js";
import type { Registry, Settings } from "../src/settings.js";
import { redactKbConfig } from "../src/store/index.js";
import { QdrantVectorStore } from "../src/store/qdrant.js";
import { tempDir } from "./helpers/helpers.js";
import { startServer, type TestServer } from "./helpers/server-helpers.js";

const ROOT = resolve(import.meta.dirname, "..");
const tmp = tempDir("kl-secrets-");
const dataDir = join(tmp.dir, "data");

/** Every secret the config below holds; none may appear in any output. */
const SECRETS = /SECRET_[A-Z_]+/;

/**
 * A KB config with a secret in every place a section can hold one (keys, URL passwords,
 * URL user names, URL query keys). Some of these URLs are refused today (credentials in
 * an HTTP provider's URL), so it is stored as an older version would have stored it.
 */
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
        // A token as the URL's user name (no password).
        baseUrl: "https://SECRET_RERANK_TOKEN@rerank.example.com?token=SECRET_RERANK_QUERY",
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
    baseUrl: "https://***@rerank.example.com?token=***",
  });
  expect(config.retrieval.expansionLlm).toEqual({
    baseUrl: "https://bot:***@llm.example.com/v1",
    model: "gpt-mini",
    apiKey: MASK,
  });
  expect(config.extraction?.slack?.workspaceUrl).toBe("https://acme.slack.com");
}

/** Stores a KB config without validation, as an older version may have stored it. */
function insertOld(lib: KnowledgeLayer, config: KnowledgeBaseConfig): void {
  lib.db
    .prepare("INSERT INTO kbs (name, config, created_at) VALUES (?, ?, ?)")
    .run(config.name, JSON.stringify(config), new Date().toISOString());
}

beforeAll(async () => {
  const kl = KnowledgeLayer.open({ dataDir, cache: { type: "none" } });
  insertOld(kl, secretConfig("vault"));
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
    expect(masked.sort()).toEqual(["chunking.contextLlm.apiKey", "embedding.apiKey", "vectorStore.apiKey"]);
    // Nested sections of retrieval: every reranker type and the expansion endpoint.
    const config = secretConfig("walk");
    expectMasked(redactSecrets(config));
    // The input is not changed, and the deprecated alias gives the same result.
    expect(config.retrieval.expansionLlm?.apiKey).toBe("SECRET_LLM_KEY");
    expect(redactKbConfig(config)).toEqual(redactSecrets(config));
  });

  it("every setting a stage registry marks secret is masked by its name, and no other setting is", () => {
    const registries: [string, Registry, Settings][] = [
      ["vectorStore", VECTOR_STORES, COMMON_STORE_SETTINGS],
      ["embedding", EMBEDDING_PROVIDER_REGISTRY, COMMON_EMBEDDING_SETTINGS],
      ["retrieval.reranker", RERANKERS, {}],
    ];
    const secret: string[] = [];
    for (const [section, registry, common] of registries) {
      for (const [impl, schema] of Object.entries(registry)) {
        const settings = { ...common, ...schema.settings };
        const input = Object.fromEntries(Object.keys(settings).map((k) => [k, `value-of-${k}`]));
        const out = redactSecrets(input);
        for (const [name, setting] of Object.entries(settings)) {
          expect(isSecretKey(name), `${section} ${impl}.${name}`).toBe(setting.secret === true);
          expect(out[name], `${section} ${impl}.${name}`).toBe(setting.secret ? MASK : `value-of-${name}`);
          if (setting.secret) secret.push(`${section}.${name}`);
        }
      }
    }
    expect([...new Set(secret)].sort()).toEqual([
      "embedding.apiKey",
      "retrieval.reranker.apiKey",
      "vectorStore.apiKey",
    ]);
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

  it("kl kb create refuses a store URL with a space in its password, naming the field, secret masked", () => {
    const r = kl(
      "kb",
      "create",
      "spaced",
      "--store",
      "pgvector",
      "--store-url",
      "postgres://u:BAD SECRET_7@host/db",
    );
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("vectorStore.url must be a postgres or postgresql URL without spaces");
    expect(r.stderr).toContain('"postgres://u:***@host/db"');
    expect(r.stderr + r.stdout).not.toMatch(SECRETS);
  });

  it("the human kb description masks them too", async () => {
    const lib = KnowledgeLayer.open({ dataDir, cache: { type: "none" }, create: false });
    try {
      const text = formatKb(await lib.getKb("vault"), await lib.counts("vault"));
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
      insertOld(server.kl, secretConfig(internalKbName("acme", "vault")));
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

describe("URL credentials", () => {
  it("masks any URL userinfo: a lone user name (token), a password with an unencoded @ or a space", () => {
    expect(maskUrl("https://TOKEN_abc123@api.cohere.ai")).toBe("https://***@api.cohere.ai");
    expect(maskUrl("postgres://u:PA@SECRET11@host/db")).toBe("postgres://u:***@host/db");
    expect(maskUrl("postgres://u:BAD SECRET7@host/db")).toBe("postgres://u:***@host/db");
    expect(maskUrl("https://ghp_abcdefghijklmnopqrstuvwxyz0123:x-oauth-basic@github.com/a")).toBe(
      "https://***:***@github.com/a",
    );
    // The same in free text (search warnings, job reasons, logs).
    const text = redactText(
      "request to https://TOKEN_abc123@api.cohere.ai/v2/rerank failed: x; " +
        "connect postgres://u:PA@SECRET11@host/db; connect postgres://u:BAD SECRET7@host:5432/db failed",
    );
    expect(text).not.toMatch(/TOKEN|SECRET/);
    expect(text).toContain("https://***@api.cohere.ai/v2/rerank failed");
    expect(text).toContain("postgres://u:***@host/db;");
    expect(text).toContain("postgres://u:***@host:5432/db failed");
    // Stored configs of older versions: every string field that is a URL.
    expect(redactSecrets({ vectorStore: { url: "postgres://u:BAD SECRET7@host/db" } })).toEqual({
      vectorStore: { url: "postgres://u:***@host/db" },
    });
    // Masking is stable, and text that only looks close is left alone.
    for (const same of [
      "https://***@h/x",
      "postgres://kl:***@db",
      "see https://x.example:443 and mail bob@example.com",
      "https://npm.example/@scope/pkg",
      "https://u:pw@host bob@x.example",
    ]) {
      expect(redactText(redactText(same))).toBe(redactText(same));
    }
    expect(redactText("see https://x.example:443 and mail bob@example.com")).toBe(
      "see https://x.example:443 and mail bob@example.com",
    );
    expect(redactText("https://npm.example/@scope/pkg")).toBe("https://npm.example/@scope/pkg");
    const down = "http://host:8080 is down, mail ops@example.com";
    expect(redactText(down)).toBe(down);
    expect(maskUrl(down)).toBe(down);
    expect(redactSecrets({ detail: down })).toEqual({ detail: down });
    expect(redactText("https://u:pw@host bob@x.example")).toBe("https://u:***@host bob@x.example");
  });

  it("masks a provider's own secret values, but not short ones", () => {
    expect(maskKnownSecrets("Incorrect API key provided: RAWKEY42abc. Bye", ["RAWKEY42abc"])).toBe(
      "Incorrect API key provided: ***. Bye",
    );
    expect(maskKnownSecrets("the cat sat", ["cat", undefined, ""])).toBe("the cat sat");
    expect(maskKnownSecrets("k=a%2Fb%2Fcdef", ["a/b/cdef"])).toBe("k=***");
  });

  it("refuses invalid service URLs at KB create/update, naming the field, with the secret masked", () => {
    const cases: [string, (c: KnowledgeBaseConfig) => void, RegExp][] = [
      [
        "embedding.baseUrl",
        (c) => {
          c.embedding = {
            provider: "openai-compatible",
            model: "m",
            batchSize: 8,
            baseUrl: "http://user:PW_SECRET_1@h/v1",
          };
        },
        /credentials.*apiKey/,
      ],
      [
        "retrieval.reranker.baseUrl",
        (c) => {
          c.retrieval.reranker = {
            type: "cohere",
            model: "rerank-v3.5",
            baseUrl: "https://TOKEN_SECRET_2@api.cohere.ai",
          };
        },
        /credentials/,
      ],
      [
        "retrieval.expansionLlm.baseUrl",
        (c) => {
          c.retrieval.expansionLlm = { baseUrl: "ftp://bot:PW_SECRET_6@llm.example/v1", model: "m" };
        },
        /an http\(s\) URL, got "ftp:\/\/bot:\*\*\*@/,
      ],
      [
        "vectorStore.url",
        (c) => {
          c.vectorStore = { type: "pgvector", url: "postgres://u:BAD SECRET_3@host/db" };
        },
        /without spaces.*%20/,
      ],
      [
        "vectorStore.url",
        (c) => {
          c.vectorStore = { type: "pgvector", url: "postgres://u:PA@SECRET_4@host/db" };
        },
        /unencoded "@".*%40/,
      ],
    ];
    for (const [field, change, why] of cases) {
      const config = defaultKbConfig("bad");
      change(config);
      let message = "";
      try {
        validateKbConfig(config);
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        message = (err as Error).message;
      }
      expect(message, field).toContain(`${field} `);
      expect(message, field).toMatch(why);
      expect(message, field).not.toMatch(/SECRET/);
      expect(message, field).toContain("***");
    }
    // The reranker's own check says the same (a KB update over HTTP, a library caller).
    expect(() => createReranker({ type: "llm", model: "m", baseUrl: "http://a:PW_SECRET_5@h/v1" })).toThrow(
      /reranker\.baseUrl must not hold credentials.*"http:\/\/a:\*\*\*@h\/v1"/,
    );
    // Credentials the store needs (pgvector) remain allowed.
    const ok = defaultKbConfig("ok");
    ok.vectorStore = { type: "pgvector", url: "postgres://u:p%40ss%20w@host/db" };
    expect(() => validateKbConfig(ok)).not.toThrow();
  });
});

describe("provider requests", () => {
  /** A local HTTP server answering every POST with `answer(path)`; records the request paths. */
  let server: Server;
  let base = "";
  const paths: string[] = [];
  let answer: (path: string) => { status: number; body: unknown } = () => ({ status: 200, body: {} });
  beforeAll(async () => {
    server = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        paths.push(req.url ?? "");
        const { status, body } = answer(req.url ?? "");
        res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
      });
    });
    await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((done) => server.close(() => done())));

  it("endpoint paths go after the base URL's path, and its query string is kept", async () => {
    expect(endpointUrl("http://h/v1/?api-version=2024-02-01", "/embeddings")).toBe(
      "http://h/v1/embeddings?api-version=2024-02-01",
    );
    expect(endpointUrl("http://h/v1", "/v1/chat/completions", "/v1")).toBe("http://h/v1/chat/completions");
    expect(endpointUrl("http://h", "/v1/chat/completions", "/v1")).toBe("http://h/v1/chat/completions");
    answer = (path) =>
      path.startsWith("/v1/embeddings")
        ? { status: 200, body: { data: [{ index: 0, embedding: [1, 0, 0] }] } }
        : path.startsWith("/v2/rerank")
          ? {
              status: 200,
              body: {
                results: [
                  { index: 0, relevance_score: 0.5 },
                  { index: 1, relevance_score: 0.1 },
                ],
              },
            }
          : { status: 200, body: { choices: [{ message: { content: "alpha\nbeta" } }] } };
    paths.length = 0;
    const q = "?api-version=2024-02-01";
    const embedder = new OpenAiCompatibleEmbedder({ model: "m", baseUrl: `${base}/v1${q}`, maxRetries: 0 });
    await embedder.embedQuery("hello");
    const reranker = new CohereReranker({ model: "r", apiKey: "k", baseUrl: `${base}${q}`, maxRetries: 0 });
    await reranker.rerank("q", ["a", "b"]);
    const expand = createLlmExpander({ baseUrl: `${base}/v1${q}`, model: "m" }, { maxRetries: 0 });
    expect(await expand("query", 2)).toEqual(["alpha", "beta"]);
    expect(paths).toEqual([`/v1/embeddings${q}`, `/v2/rerank${q}`, `/v1/chat/completions${q}`]);
  });

  it("a key echoed back in an error body is masked in the provider's error", async () => {
    const key = "RAWKEY_0123456789abcdef";
    answer = () => ({ status: 401, body: { error: { message: `Incorrect API key provided: ${key}.` } } });
    const embedder = new OpenAiCompatibleEmbedder({
      model: "m",
      baseUrl: `${base}/v1`,
      apiKey: key,
      maxRetries: 0,
    });
    const embedError = await embedder.embedQuery("x").then(
      () => undefined,
      (e: Error) => e.message,
    );
    expect(embedError).toContain("HTTP 401");
    expect(embedError).toContain("Incorrect API key provided: ***.");
    expect(embedError).not.toContain("RAWKEY");
    const reranker = new CohereReranker({ model: "r", apiKey: key, baseUrl: base, maxRetries: 0 });
    const rerankError = await reranker.rerank("q", ["a", "b"]).then(
      () => undefined,
      (e: Error) => e.message,
    );
    expect(rerankError).toContain("Incorrect API key provided: ***.");
    expect(rerankError).not.toContain("RAWKEY");
  });

  it("a store's own key echoed back by its server is masked (qdrant)", async () => {
    const key = "QDRANT_RAWKEY_0123456789";
    answer = () => ({ status: 403, body: { status: { error: `Invalid api-key: ${key}` } } });
    const store = new QdrantVectorStore({ url: base, apiKey: key, timeoutMs: 5000 });
    const message = await store.connect().then(
      () => "",
      (e: Error) => e.message,
    );
    expect(message).toContain("authentication failed (HTTP 403: Invalid api-key: ***); check the API key");
    expect(message).not.toContain("RAWKEY");
  });

  it("a URL with credentials fails at once (no retries), with the credentials masked", async () => {
    paths.length = 0;
    let calls = 0;
    const counting: typeof fetch = (...args) => {
      calls++;
      return fetch(...args);
    };
    const authority = base.replace("http://", "");
    const reranker = new CohereReranker({
      model: "r",
      apiKey: "k",
      baseUrl: `http://TOKEN_SECRET_9@${authority}`,
      maxRetries: 3,
      fetch: counting,
    } as ConstructorParameters<typeof CohereReranker>[0]);
    const message = await reranker.rerank("q", ["a", "b"]).then(
      () => "",
      (e: Error) => e.message,
    );
    expect(message).toMatch(/holds credentials.*apiKey/);
    expect(message).toContain(`http://***@${authority}/v2/rerank`);
    expect(message).not.toContain("TOKEN_SECRET");
    expect(calls).toBe(0);
    expect(paths).toEqual([]);
  });
});
