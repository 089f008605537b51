/**
 * The facade's KB lifecycle: create and update a KB's configuration, delete a KB,
 * migrate its vectors to another store (`kl kb migrate`) and re-embed it with another
 * model (`kl kb reembed`).
 */
import { createHash } from "node:crypto";
import {
  defaultKbConfig,
  embeddingConfig,
  type KnowledgeBaseConfig,
  type VectorStoreConfig,
  validateKbConfig,
} from "../config.js";
import { ConfigError, KnowledgeLayerError } from "../errors.js";
import { pipelineHash } from "../ingest/pipeline.js";
import type { KbRecord } from "../store/catalog.js";
import { collectionOf, describeStore } from "../store/index.js";
import { chunkPayload, type FillProgress, FillVerificationError, fillCollection } from "../store/migrate.js";
import {
  checkEmbedder,
  checkReranker,
  compactExtraction,
  defined,
  embeddingSlug,
  mergeExtraction,
  sameStore,
  withOwnCollection,
} from "./kb-config.js";
import type { FacadeParts } from "./parts.js";
import type { DeepPartial, KbUpdate } from "./types.js";

/** The body of `KnowledgeLayer.createKb` (documented there). */
export async function createKb(
  parts: FacadeParts,
  name: string,
  overrides: DeepPartial<Omit<KnowledgeBaseConfig, "name">> = {},
): Promise<KbRecord> {
  if (await parts.backend.kbs.get(name)) throw new ConfigError(`knowledge base "${name}" already exists`);
  const base = defaultKbConfig(name);
  const config: KnowledgeBaseConfig = {
    name,
    chunking: { ...base.chunking, ...defined(overrides.chunking) },
    embedding: embeddingConfig(defined(overrides.embedding)),
    vectorStore: withOwnCollection(name, { ...base.vectorStore, ...defined(overrides.vectorStore) }),
    retrieval: {
      ...base.retrieval,
      ...(defined(overrides.retrieval) as Partial<KnowledgeBaseConfig["retrieval"]>),
    },
  };
  const extraction = compactExtraction(overrides.extraction);
  if (extraction) config.extraction = extraction;
  if (overrides.chunking?.chunkSize !== undefined && overrides.chunking.minChunkSize === undefined) {
    config.chunking.minChunkSize = Math.min(
      config.chunking.minChunkSize,
      Math.floor(config.chunking.chunkSize / 3),
    );
  }
  if (overrides.chunking?.chunkSize !== undefined && overrides.chunking.chunkOverlap === undefined) {
    config.chunking.chunkOverlap = Math.min(
      config.chunking.chunkOverlap,
      Math.floor(config.chunking.chunkSize / 10),
    );
  }
  validateKbConfig(config);
  checkEmbedder(config);
  await checkCollectionFree(parts, config);
  checkReranker(config);
  return parts.backend.kbs.insert(config);
}

/** The body of `KnowledgeLayer.updateKb` (documented there). */
export async function updateKb(parts: FacadeParts, name: string, update: KbUpdate): Promise<KbRecord> {
  const kb = await parts.backend.kbs.get(name);
  if (!kb) throw new KnowledgeLayerError(`unknown knowledge base "${name}"`);
  const next: KnowledgeBaseConfig = { ...kb.config };
  if (update.retrieval) {
    const analyzer = update.retrieval.analyzer;
    if (analyzer !== undefined && analyzer !== kb.config.retrieval.analyzer) {
      const { documents } = await parts.backend.kbs.counts(name);
      if (documents > 0)
        throw new ConfigError(
          `knowledge base "${name}": retrieval.analyzer is fixed once documents are indexed (it has ${documents}); create a new knowledge base to change it`,
        );
    }
    next.retrieval = { ...kb.config.retrieval, ...defined(update.retrieval) };
  }
  if (update.extraction) next.extraction = mergeExtraction(name, kb.config.extraction, update.extraction);
  validateKbConfig(next);
  checkReranker(next);
  await parts.backend.kbs.updateConfig(next);
  return (await parts.backend.kbs.get(name)) as KbRecord;
}

/** The body of `KnowledgeLayer.deleteKb` (documented there). */
export async function deleteKb(
  parts: FacadeParts,
  name: string,
  options: { force?: boolean } = {},
): Promise<{ warning?: string }> {
  const kb = await parts.backend.kbs.get(name);
  if (!kb) throw new KnowledgeLayerError(`unknown knowledge base "${name}"`);
  const collection = collectionOf(kb.config);
  if (kb.config.vectorStore.type === "sqlite") {
    const agents = parts.backend.agentRows();
    parts.db
      .transaction(() => {
        parts.store.dropCollectionSync(collection);
        parts.catalog.deleteKb(name);
        agents.detachEverywhere(name);
      })
      .immediate();
    return {};
  }
  // Server first: if it cannot be reached, the KB stays whole and the delete can be retried
  // (or forced, leaving the vectors on the server).
  let warning: string | undefined;
  try {
    await (await parts.vectorStore(kb.config)).dropCollection(collection);
  } catch (err) {
    if (!options.force) {
      throw new KnowledgeLayerError(
        `${(err as Error).message}; the knowledge base was not deleted (use --force to delete it here and leave collection "${collection}" on the server)`,
        { cause: err },
      );
    }
    warning = `collection "${collection}" was left on ${describeStore(kb.config.vectorStore)}: ${(err as Error).message}`;
  }
  const agents = parts.backend.agentRows();
  parts.db
    .transaction(() => {
      parts.catalog.deleteKb(name);
      agents.detachEverywhere(name);
    })
    .immediate();
  return warning ? { warning } : {};
}

/** 6 hex characters naming one KB of one data directory for its lifetime (store id, name, creation time). */
function kbTag(parts: FacadeParts, kb: KbRecord): string {
  return createHash("sha256")
    .update(`${parts.catalog.storeId()}\u0000${kb.name}\u0000${kb.createdAt}`)
    .digest("hex")
    .slice(0, 6);
}

/**
 * Refuses a KB config whose collection another KB of this data directory already
 * uses on the same store (deleting one would drop the other's vectors).
 * @throws ConfigError naming the other KB.
 */
async function checkCollectionFree(parts: FacadeParts, config: KnowledgeBaseConfig): Promise<void> {
  const collection = collectionOf(config);
  for (const other of await parts.backend.kbs.list()) {
    if (other.name === config.name) continue;
    if (
      sameStore(other.config.vectorStore, config.vectorStore) &&
      collectionOf(other.config) === collection
    ) {
      throw new ConfigError(
        `knowledge base "${config.name}": collection "${collection}" of ${describeStore(config.vectorStore)} belongs to knowledge base "${other.name}"`,
      );
    }
  }
}

/** The body of `KnowledgeLayer.migrateKb` (documented there). */
export async function migrateKb(
  parts: FacadeParts,
  name: string,
  to: VectorStoreConfig,
  options: { dropSource?: boolean; onProgress?: (p: FillProgress) => void } = {},
): Promise<FillProgress & { from: string; to: string }> {
  const kb = await parts.getKb(name);
  // Without a collection name the target's is derived from the KB (stable, so a rerun resumes).
  const target: KnowledgeBaseConfig = {
    ...kb.config,
    vectorStore: withOwnCollection(name, { ...to }, kbTag(parts, kb)),
  };
  validateKbConfig(target);
  await checkCollectionFree(parts, target);
  const sourceCollection = collectionOf(kb.config);
  const targetCollection = collectionOf(target);
  const from = describeStore(kb.config.vectorStore);
  const dest = describeStore(target.vectorStore);
  if (sameStore(kb.config.vectorStore, target.vectorStore) && sourceCollection === targetCollection) {
    throw new KnowledgeLayerError(
      `knowledge base "${name}" already uses ${dest} (collection "${targetCollection}")`,
    );
  }
  const source = await parts.vectorStore(kb.config);
  const destination = await parts.vectorStore(target);
  const info = await source.info(sourceCollection);
  const embedded = parts.catalog.embeddedChunkCount(name);
  if (!info && embedded > 0) {
    throw new KnowledgeLayerError(
      `knowledge base "${name}": ${from} has no collection "${sourceCollection}", but ${embedded} chunks should have vectors there; ` +
        `re-create them with kl kb reembed ${name} or by ingesting again`,
    );
  }
  let progress: FillProgress = { done: 0, total: 0, written: 0, skipped: 0 };
  if (info) {
    await destination.createCollection(targetCollection, info.dimension, info.metric);
    try {
      progress = await fillCollection({
        catalog: parts.catalog,
        kb: name,
        version: () => parts.catalog.dataVersion(name),
        target: destination,
        collection: targetCollection,
        onProgress: options.onProgress,
        produce: async (chunks) => {
          const records = await source.get(
            sourceCollection,
            chunks.map((c) => String(c.id)),
          );
          if (records.length !== chunks.length) {
            const have = new Set(records.map((r) => r.id));
            const lost = chunks.filter((c) => !have.has(String(c.id))).map((c) => c.id);
            throw new KnowledgeLayerError(
              `knowledge base "${name}": ${from} has no vectors for chunks ${lost.slice(0, 5).join(", ")}${lost.length > 5 ? "…" : ""}; re-ingest the KB or run kl kb reembed`,
            );
          }
          return records;
        },
      });
    } catch (err) {
      if (err instanceof FillVerificationError) {
        await destination.dropCollection(targetCollection).catch(() => {});
        throw new KnowledgeLayerError(
          `${err.message}; the partial copy was removed and the KB still uses ${from}: run kl kb migrate again`,
        );
      }
      throw err;
    }
  }
  await parts.backend.kbs.updateConfig(target);
  if (options.dropSource && info) await source.dropCollection(sourceCollection);
  return { ...progress, from, to: dest };
}

/** The body of `KnowledgeLayer.reembedKb` (documented there). */
export async function reembedKb(
  parts: FacadeParts,
  name: string,
  settings: Partial<KnowledgeBaseConfig["embedding"]>,
  options: { keepOld?: boolean; onProgress?: (p: FillProgress) => void } = {},
): Promise<FillProgress & { collection: string; dimension: number }> {
  const kb = await parts.getKb(name);
  const old = kb.config;
  const embedding = embeddingConfig(defined(settings));
  // The KB's collection name without an earlier model tag: deterministic, so a rerun resumes.
  const collection = `${collectionOf(old).split("@")[0]}@${embeddingSlug(embedding)}`;
  const target: KnowledgeBaseConfig = {
    ...old,
    embedding: { ...embedding },
    vectorStore: { ...old.vectorStore, collection },
  };
  validateKbConfig(target);
  checkEmbedder(target);
  if (collection === collectionOf(old) || embeddingSlug(embedding) === embeddingSlug(old.embedding)) {
    throw new KnowledgeLayerError(
      `knowledge base "${name}" is already embedded with ${embedding.provider}:${embedding.model}`,
    );
  }
  const store = await parts.vectorStore(target);
  const embedder = parts.embedder(target);
  const dimension = await embedder.resolveDimension();
  await store.createCollection(collection, dimension, "cosine");
  let progress: FillProgress;
  try {
    progress = await fillCollection({
      catalog: parts.catalog,
      kb: name,
      version: () => parts.catalog.dataVersion(name),
      target: store,
      collection,
      onProgress: options.onProgress,
      produce: async (chunks) => {
        const vectors = await embedder.embedTexts(chunks.map((c) => c.text));
        return chunks.map((c, i) => ({
          id: String(c.id),
          vector: vectors[i] as Float32Array,
          payload: chunkPayload(c),
        }));
      },
    });
  } catch (err) {
    if (err instanceof FillVerificationError) {
      await store.dropCollection(collection).catch(() => {});
      throw new KnowledgeLayerError(
        `${err.message}; the partial collection was removed and the KB keeps its current model: run kl kb reembed again`,
      );
    }
    // Nothing written yet (a bad key, an unreachable endpoint): leave no empty collection behind.
    if (((await store.info(collection).catch(() => undefined))?.count ?? 1) === 0) {
      await store.dropCollection(collection).catch(() => {});
    }
    throw err;
  }
  parts.db
    .transaction(() => {
      parts.catalog.updateKbConfig(target);
      parts.catalog.relabelPipeline(name, pipelineHash(old), pipelineHash(target));
    })
    .immediate();
  if (!options.keepOld) {
    const oldStore = await parts.vectorStore(old);
    await oldStore.dropCollection(collectionOf(old));
  }
  return { ...progress, collection, dimension };
}
