/**
 * The stage registries (`store/registry.ts`, `embed/registry.ts`, `rerank/registry.ts`)
 * are the one source of the implementations and their settings: every registered
 * vector store, embedding provider and reranker is accepted by config validation with
 * its required settings and refused without each, built by its stage's factory,
 * offered by the CLI (choices and flags) and by the HTTP API's JSON schema. So a new
 * implementation needs its file and its registry entry, nothing else.
 */
import { afterAll, describe, expect, it } from "vitest";
import {
  defaultKbConfig,
  type KnowledgeBaseConfig,
  VECTOR_STORE_SETTINGS,
  VECTOR_STORES,
  validateKbConfig,
} from "../src/config.js";
import { createEmbedder, EMBEDDING_PROVIDER_REGISTRY } from "../src/embed/index.js";
import { createReranker, RERANKERS } from "../src/rerank/index.js";
import { schemas } from "../src/server/schemas.js";
import type { SettingSchema, Settings } from "../src/settings.js";
import { cliRunner, tempDir } from "./helpers/helpers.js";

/** A valid value of a setting (a URL of one of its schemes, a name, a number). */
function sampleValue(setting: SettingSchema): unknown {
  if (setting.enum) return setting.enum[0];
  if (setting.schemes?.some((s) => s.startsWith("postgres"))) return "postgres://kl@127.0.0.1:5432/kl";
  if (setting.schemes) return "http://127.0.0.1:9";
  if (setting.type === "string") return "value";
  if (setting.type === "boolean") return true;
  return Math.max(1, setting.minimum ?? 1);
}

/** The required settings of an implementation, each with a valid value. */
function requiredOf(settings: Settings): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(settings)
      .filter(([, s]) => s.required)
      .map(([name, s]) => [name, sampleValue(s)]),
  );
}

const body = schemas.createKb.body.properties as unknown as Record<
  string,
  { properties: Record<string, { enum?: string[]; properties?: Record<string, { enum?: string[] }> }> }
>;

describe("stage registries", () => {
  const tmp = tempDir("kl-registries-");
  afterAll(() => tmp.cleanup());

  it("every vector store: valid with its required settings, refused without each, in the HTTP schema", () => {
    for (const [type, store] of Object.entries(VECTOR_STORES)) {
      const vectorStore = { type, ...requiredOf(store.settings) } as KnowledgeBaseConfig["vectorStore"];
      const config = { ...defaultKbConfig("r"), vectorStore };
      expect(() => validateKbConfig(config), type).not.toThrow();
      for (const field of Object.keys(requiredOf(store.settings))) {
        const without = { ...vectorStore, [field]: undefined };
        expect(
          () => validateKbConfig({ ...config, vectorStore: without }),
          `${type} without ${field}`,
        ).toThrow(`vectorStore.${field} is required for ${type}`);
      }
    }
    expect(body.vectorStore?.properties.type?.enum).toEqual(Object.keys(VECTOR_STORES));
    expect(Object.keys(body.vectorStore?.properties ?? {}).sort()).toEqual(
      ["type", ...Object.keys(VECTOR_STORE_SETTINGS)].sort(),
    );
  });

  it("every embedding provider: valid with its default or a given model, built by createEmbedder, in the HTTP schema", () => {
    for (const [provider, impl] of Object.entries(EMBEDDING_PROVIDER_REGISTRY)) {
      const embedding = {
        provider,
        model: impl.defaultModel ?? "some-model",
        batchSize: 8,
        apiKey: impl.offline ? undefined : "test-key",
        ...requiredOf(impl.settings),
      } as unknown as KnowledgeBaseConfig["embedding"];
      expect(() => validateKbConfig({ ...defaultKbConfig("r"), embedding }), provider).not.toThrow();
      const embedder = createEmbedder(embedding);
      expect(embedder.provider, provider).toBe(impl.aliasOf ?? provider);
      void embedder.close?.();
    }
    expect(body.embedding?.properties.provider?.enum).toEqual(Object.keys(EMBEDDING_PROVIDER_REGISTRY));
  });

  it("every reranker: valid with its required settings, refused without each, built by createReranker, in the HTTP schema", () => {
    for (const [type, impl] of Object.entries(RERANKERS)) {
      const reranker = {
        type,
        ...requiredOf(impl.settings),
        ...(impl.settings.apiKey ? { apiKey: "k" } : {}),
      };
      const config = defaultKbConfig("r");
      const withReranker = (r: object) => ({
        ...config,
        retrieval: { ...config.retrieval, reranker: r as KnowledgeBaseConfig["retrieval"]["reranker"] },
      });
      expect(() => validateKbConfig(withReranker(reranker)), type).not.toThrow();
      for (const field of Object.keys(requiredOf(impl.settings))) {
        expect(() => validateKbConfig(withReranker({ ...reranker, [field]: undefined })), type).toThrow(
          new RegExp(`retrieval\\.reranker\\.${field} is required for an? ${type} reranker`),
        );
      }
      const built = createReranker(reranker as never);
      expect(typeof built.rerank, type).toBe("function");
      void built.close?.();
    }
    expect(body.retrieval?.properties.reranker?.properties?.type?.enum).toEqual(Object.keys(RERANKERS));
  });

  it("the CLI offers every store, provider and reranker, and a flag for every store setting but secrets", () => {
    const kl = cliRunner(tmp.dir, { ...process.env, KL_HOME: tmp.dir });
    const help = kl("kb", "create", "--help").stdout.replace(/\s+/g, " ");
    for (const name of [
      ...Object.keys(VECTOR_STORES),
      ...Object.keys(EMBEDDING_PROVIDER_REGISTRY),
      ...Object.keys(RERANKERS),
    ])
      expect(help, name).toContain(`"${name}"`);
    for (const [name, setting] of Object.entries(VECTOR_STORE_SETTINGS)) {
      const flag = `--store-${name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
      if (setting.secret) expect(help, flag).not.toContain(flag);
      else expect(help, flag).toContain(flag);
    }
  }, 60_000);
});
