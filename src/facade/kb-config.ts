/**
 * Building and checking KB configurations for the facade: the embedder and reranker of a
 * config built (not called) to check their settings, extraction overrides merged, store
 * identities compared, collection names and embedding-model tags derived.
 */
import { createHash, randomBytes } from "node:crypto";
import type { KnowledgeBaseConfig, VectorStoreConfig } from "../config.js";
import { createEmbedder } from "../embed/index.js";
import { ConfigError } from "../errors.js";
import type { ExtractOptions } from "../extract/contract.js";
import { embeddingIdentity } from "../ingest/pipeline.js";
import { createReranker } from "../rerank/index.js";
import type { DeepPartial } from "./types.js";

/**
 * Builds (without loading or calling it) the embedder of a KB config, so its
 * settings are checked when the KB is created, not at the first ingest.
 * @throws ConfigError naming the KB and the problem.
 */
export function checkEmbedder(config: KnowledgeBaseConfig): void {
  try {
    void createEmbedder(config.embedding).close?.();
  } catch (err) {
    if (err instanceof ConfigError)
      throw new ConfigError(`knowledge base "${config.name}": embedding: ${err.message}`);
    throw err;
  }
}

/**
 * Builds (without loading or calling it) the reranker of a KB config, so its own settings
 * (URLs, model names, keys) are checked when the KB is created or changed, not at the first
 * search. `auto` and `none` need nothing.
 * @throws ConfigError naming the KB and the field (`retrieval.reranker…`).
 */
export function checkReranker(config: KnowledgeBaseConfig): void {
  const rc = config.retrieval.reranker;
  if (rc.type === "auto" || rc.type === "none") return;
  try {
    createReranker(rc, {});
  } catch (err) {
    if (err instanceof ConfigError)
      throw new ConfigError(`knowledge base "${config.name}": retrieval.${err.message}`);
    throw err;
  }
}

/**
 * `base` with the sections of `patch` laid over it, key by key.
 * @throws ConfigError naming the KB and a section that is not an object.
 */
export function mergeExtraction(
  kb: string,
  base: ExtractOptions | undefined,
  patch: DeepPartial<ExtractOptions>,
): ExtractOptions {
  const out: Record<string, unknown> = { ...base };
  for (const [section, value] of Object.entries(patch)) {
    if (typeof value !== "object" || value === null || Array.isArray(value))
      throw new ConfigError(`knowledge base "${kb}": extraction.${section} must be an object`);
    out[section] = { ...(out[section] as Record<string, unknown> | undefined), ...value };
  }
  return out as ExtractOptions;
}

/** Extraction overrides without undefined fields or empty sections; undefined when nothing is set. */
export function compactExtraction(o: DeepPartial<ExtractOptions> | undefined): ExtractOptions | undefined {
  if (!o) return undefined;
  const out: ExtractOptions = {};
  const limits = defined(o.limits);
  const slack = defined(o.slack);
  const email = defined(o.email);
  if (Object.keys(limits).length > 0) out.limits = limits as ExtractOptions["limits"];
  if (Object.keys(slack).length > 0) out.slack = slack as ExtractOptions["slack"];
  if (Object.keys(email).length > 0) out.email = email as ExtractOptions["email"];
  return Object.keys(out).length > 0 ? out : undefined;
}

/**
 * A server store config with its collection named: as given, else `kb_<name>_<6 random
 * hex>`, so KBs of two data directories (or a KB re-created under an old name) sharing a
 * server never write into each other's collection. The embedded store keeps `kb_<name>`.
 */
export function withOwnCollection(name: string, vs: VectorStoreConfig, tag?: string): VectorStoreConfig {
  if (vs.type === "sqlite" || vs.collection) return vs;
  return { ...vs, collection: `kb_${name}_${tag ?? randomBytes(3).toString("hex")}` };
}

/**
 * What identifies the server (and database or index) a store config points at: the type,
 * the URL without password, trailing slash or default port, the pgvector schema (default
 * `kl`) and the Pinecone index. Two configs written differently for the same place match.
 */
function storeIdentity(vs: VectorStoreConfig): string {
  let url = "";
  if (vs.url) {
    try {
      const u = new URL(vs.url);
      url = `${u.protocol}//${u.username}@${u.host.toLowerCase()}${u.pathname.replace(/\/+$/, "")}`;
    } catch {
      url = vs.url;
    }
  }
  const schema = vs.type === "pgvector" ? (vs.schema ?? "kl") : "";
  return JSON.stringify([vs.type, url, schema, vs.index ?? ""]);
}

/** True when two store configs point at the same server (or both at the embedded store). */
export function sameStore(a: VectorStoreConfig, b: VectorStoreConfig): boolean {
  return storeIdentity(a) === storeIdentity(b);
}

/** A collection-name-safe tag of an embedding model: `provider-model` plus a short hash of the whole config. */
export function embeddingSlug(e: KnowledgeBaseConfig["embedding"]): string {
  const readable = `${e.provider}-${e.model}`.replace(/[^A-Za-z0-9._-]+/g, "_").slice(0, 40);
  return `${readable}-${createHash("sha256")
    .update(JSON.stringify(embeddingIdentity(e)))
    .digest("hex")
    .slice(0, 8)}`;
}

/** Copies an object without its `undefined` fields, so they do not override defaults. */
export function defined<T extends object>(o: T | undefined): Partial<T> {
  return Object.fromEntries(Object.entries(o ?? {}).filter(([, v]) => v !== undefined)) as Partial<T>;
}
