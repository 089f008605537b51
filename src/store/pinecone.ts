import { type Index, Pinecone, type PineconeRecord, type RecordMetadata } from "@pinecone-database/pinecone";
import { KnowledgeLayerError } from "../errors.js";
import {
  checkStoreFilter,
  type Filter,
  FilterError,
  type FilterNode,
  parseFilter,
  pushDownNot,
} from "../retrieve/filter.js";
import { maskKnownSecrets, redactText } from "../secrets.js";
import { checkCollectionSpec } from "./checks.js";
import type {
  CollectionInfo,
  Metric,
  Payload,
  VectorHit,
  VectorRecord,
  VectorSearchOptions,
  VectorStore,
} from "./contract.js";

/** Options of {@link PineconeVectorStore}. */
export interface PineconeVectorStoreOptions {
  /** Pinecone API key, sent in the `Api-Key` header. */
  apiKey: string;
  /** The index holding the knowledge bases. */
  index: string;
  /**
   * Further indexes. A Pinecone index has one dimension and one metric, so a
   * collection goes to the first index (`index`, then these) whose dimension and
   * metric match the ones it is created with.
   */
  indexes?: string[];
  /** Control-plane URL (default `https://api.pinecone.io`), for tests and private deployments. */
  controllerHostUrl?: string;
  /** Data-plane host of `index` (e.g. a private endpoint), instead of the one `describeIndex` reports. */
  indexHost?: string;
  /** Prefix of every namespace this store uses (default ""). */
  namespacePrefix?: string;
  /** Per-request timeout in milliseconds (default 30000). */
  timeoutMs?: number;
  /** Retries of a request that failed with a 5xx status (default 2; the client backs off exponentially). */
  maxRetries?: number;
}

/** Records per write or fetch request (the contract allows at most 100). */
const BATCH = 100;
/** Pinecone's largest `topK` when metadata is returned. */
const MAX_TOP_K = 1000;
/**
 * Id of the marker record every collection's namespace holds. Pinecone
 * namespaces exist only while they hold records, so the marker makes an empty
 * collection distinguishable from a missing one; it is left out of counts,
 * searches and gets.
 */
export const PINECONE_MARKER_ID = "__kl_collection__";
/** Metadata field set on the marker only; searches filter on its absence. */
export const PINECONE_MARKER_KEY = "__kl_marker";

const FROM_PINECONE: Record<string, Metric> = { cosine: "cosine", euclidean: "euclidean", dotproduct: "dot" };

/**
 * Dimension and metric of a dense-vector index from its description (the
 * `dimension`, `metric` and `vectorType` fields of the client's `IndexModel`):
 * both `undefined` when the index is not a dense-vector index (a sparse index,
 * or one without a dimension).
 */
export function denseShape(model: { dimension?: number; metric?: string; vectorType?: string }): {
  dimension?: number;
  metric?: string;
} {
  const dense = model.vectorType === undefined || model.vectorType === "dense";
  if (!dense || typeof model.dimension !== "number" || typeof model.metric !== "string") return {};
  return { dimension: model.dimension, metric: model.metric };
}

/** A resolved index: its data-plane handle, dimension and metric. */
interface Target {
  name: string;
  host: string;
  dimension: number;
  metric: Metric;
  index: Index<RecordMetadata>;
}

/**
 * A {@link VectorStore} on Pinecone, through the official client. A collection
 * is a namespace (`namespacePrefix + name`) of a Pinecone index; since an index
 * has a fixed dimension and metric, the store can spread collections over
 * several indexes ({@link PineconeVectorStoreOptions.indexes}).
 *
 * Scores follow the contract: Pinecone's cosine and dotproduct scores are
 * similarities already; for euclidean indexes Pinecone returns the squared
 * distance d², which becomes −√d². Payloads are stored as metadata; filters are
 * `$eq` conditions. Writes go in batches of {@link BATCH}.
 *
 * The store remembers in which index it found or created each collection. Like
 * the service, it is eventually consistent: a write may take a moment to show
 * in searches, fetches and counts of a real index.
 */
export class PineconeVectorStore implements VectorStore {
  readonly kind = "pinecone";
  private readonly client: Pinecone;
  private readonly options: PineconeVectorStoreOptions;
  private readonly controller: string;
  private readonly timeoutMs: number;
  private readonly maxRetries: number;
  private readonly targets = new Map<string, Promise<Target>>();
  /** Index name of each collection found or created, by collection name. */
  private readonly located = new Map<string, string>();

  constructor(options: PineconeVectorStoreOptions) {
    if (!options.apiKey) throw new KnowledgeLayerError("pinecone: an API key is required");
    if (!options.index) throw new KnowledgeLayerError("pinecone: an index name is required");
    this.options = options;
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.maxRetries = options.maxRetries ?? 2;
    this.controller = (options.controllerHostUrl ?? "https://api.pinecone.io").replace(/\/+$/, "");
    const timeoutMs = this.timeoutMs;
    const timedFetch: typeof fetch = (input, init) => {
      const timeout = AbortSignal.timeout(timeoutMs);
      return fetch(input, {
        ...init,
        signal: init?.signal ? AbortSignal.any([init.signal, timeout]) : timeout,
      });
    };
    this.client = new Pinecone({
      apiKey: options.apiKey,
      ...(options.controllerHostUrl ? { controllerHostUrl: options.controllerHostUrl } : {}),
      fetchApi: timedFetch,
      maxRetries: this.maxRetries,
    });
  }

  /** Describes every configured index (checking the key and that they exist). */
  async connect(): Promise<void> {
    await Promise.all(this.indexNames().map((name) => this.resolve(name)));
  }

  async close(): Promise<void> {
    this.located.clear();
  }

  async createCollection(name: string, dimension: number, metric: Metric): Promise<void> {
    checkCollectionSpec(name, dimension, metric);
    const existing = await this.locate(name, true);
    if (existing) {
      if (existing.dimension !== dimension || existing.metric !== metric) {
        throw new KnowledgeLayerError(
          `collection "${name}" exists in Pinecone index "${existing.name}" with dimension ${existing.dimension} and metric ${existing.metric}, not dimension ${dimension} and metric ${metric}`,
        );
      }
      return;
    }
    const targets = await Promise.all(this.indexNames().map((n) => this.resolve(n)));
    const target = targets.find((t) => t.dimension === dimension && t.metric === metric);
    if (!target) {
      const have = targets.map((t) => `"${t.name}": dimension ${t.dimension}, metric ${t.metric}`).join("; ");
      throw new KnowledgeLayerError(
        `collection "${name}": no configured Pinecone index has dimension ${dimension} and metric ${metric} (${have}); create one and list it in the store's indexes`,
      );
    }
    const values = new Array<number>(dimension).fill(0);
    values[0] = 1;
    await this.call("create", name, target, () =>
      target.index.upsert({
        records: [{ id: PINECONE_MARKER_ID, values, metadata: { [PINECONE_MARKER_KEY]: true } }],
        namespace: this.namespace(name),
      }),
    );
    this.located.set(name, target.name);
  }

  async dropCollection(name: string): Promise<void> {
    this.located.delete(name);
    for (const indexName of this.indexNames()) {
      const target = await this.resolve(indexName);
      if (!(await this.hasMarker(name, target))) continue;
      try {
        await target.index.deleteAll({ namespace: this.namespace(name) });
      } catch (err) {
        if (!isNotFound(err)) throw this.wrap("drop", name, target, err);
      }
    }
  }

  async addBatch(collection: string, records: VectorRecord[]): Promise<void> {
    const target = await this.require(collection);
    const rows = records.map((record) => this.toRecord(collection, target, record));
    await this.upsert(collection, target, rows, "write to");
  }

  async search(collection: string, vector: Float32Array, options: VectorSearchOptions): Promise<VectorHit[]> {
    const target = await this.require(collection);
    if (vector.length !== target.dimension) {
      throw new KnowledgeLayerError(
        `query vector has dimension ${vector.length}, collection "${collection}" expects ${target.dimension}`,
      );
    }
    const topK = Math.min(MAX_TOP_K, Math.max(0, Math.floor(options.topK)));
    if (topK === 0) return [];
    // Top-level keys of a Pinecone filter are ANDed: the marker condition joins the caller's.
    const filter = { ...toPineconeFilter(options.filter), [PINECONE_MARKER_KEY]: { $exists: false } };
    const result = await this.call("search", collection, target, () =>
      target.index.query({
        vector: Array.from(vector),
        topK,
        filter,
        includeMetadata: true,
        includeValues: false,
        namespace: this.namespace(collection),
      }),
    );
    const threshold = options.scoreThreshold;
    const hits: VectorHit[] = [];
    for (const match of result.matches) {
      if (match.id === PINECONE_MARKER_ID) continue;
      const raw = match.score ?? 0;
      const score = target.metric === "euclidean" ? (raw <= 0 ? 0 : -Math.sqrt(raw)) : raw;
      if (threshold !== undefined && score < threshold) continue;
      hits.push({ id: match.id, score, payload: toPayload(match.metadata) });
    }
    return hits.sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  async get(collection: string, ids: string[]): Promise<VectorRecord[]> {
    const target = await this.require(collection);
    const found = await this.fetch(collection, target, ids);
    const out: VectorRecord[] = [];
    for (const id of ids) {
      const record = found.get(id);
      if (!record) continue;
      out.push({ id, vector: Float32Array.from(record.values ?? []), payload: toPayload(record.metadata) });
    }
    return out;
  }

  async delete(collection: string, ids: string[]): Promise<void> {
    const target = await this.require(collection);
    const unique = [...new Set(ids)].filter((id) => id && id !== PINECONE_MARKER_ID);
    for (let i = 0; i < unique.length; i += BATCH) {
      const batch = unique.slice(i, i + BATCH);
      await this.call("delete from", collection, target, () =>
        target.index.deleteMany({ ids: batch, namespace: this.namespace(collection) }),
      );
    }
  }

  async update(collection: string, records: VectorRecord[]): Promise<void> {
    const target = await this.require(collection);
    const rows = records.map((record) => this.toRecord(collection, target, record));
    const found = await this.fetch(
      collection,
      target,
      records.map((r) => r.id),
    );
    const missing = records.find((r) => !found.has(r.id));
    if (missing) {
      throw new KnowledgeLayerError(`collection "${collection}" has no record "${missing.id}" to update`);
    }
    // An upsert replaces values and metadata; Pinecone's update would merge the metadata.
    await this.upsert(collection, target, rows, "update");
  }

  async info(collection: string): Promise<CollectionInfo | undefined> {
    const target = await this.locate(collection, false);
    if (!target) return undefined;
    const stats = await this.call("count", collection, target, () => target.index.describeIndexStats());
    const stored = stats.namespaces?.[this.namespace(collection)]?.recordCount ?? 0;
    return {
      name: collection,
      dimension: target.dimension,
      metric: target.metric,
      count: Math.max(0, stored - 1),
    };
  }

  async health(): Promise<boolean> {
    try {
      const target = await this.resolve(this.options.index);
      await target.index.describeIndexStats();
      return true;
    } catch {
      return false;
    }
  }

  private indexNames(): string[] {
    return [...new Set([this.options.index, ...(this.options.indexes ?? [])])];
  }

  private namespace(collection: string): string {
    return (this.options.namespacePrefix ?? "") + collection;
  }

  /** Describes an index (once per store) and opens its data plane. */
  private resolve(name: string): Promise<Target> {
    let target = this.targets.get(name);
    if (!target) {
      target = this.describe(name);
      this.targets.set(name, target);
      target.catch(() => this.targets.delete(name));
    }
    return target;
  }

  private async describe(name: string): Promise<Target> {
    let model: Awaited<ReturnType<Pinecone["describeIndex"]>>;
    try {
      model = await this.client.describeIndex(name);
    } catch (err) {
      throw new KnowledgeLayerError(
        `pinecone: cannot describe index "${name}" at ${this.controller}: ${describeError(err, this.timeoutMs, this.maxRetries, this.options.apiKey)}`,
        { cause: err },
      );
    }
    const { dimension, metric } = denseShape(model);
    const ours = metric !== undefined ? FROM_PINECONE[metric] : undefined;
    if (dimension === undefined || !ours) {
      throw new KnowledgeLayerError(
        `pinecone: index "${name}" is not a dense-vector index with a cosine, euclidean or dotproduct metric`,
      );
    }
    const host = name === this.options.index && this.options.indexHost ? this.options.indexHost : model.host;
    return {
      name,
      host,
      dimension,
      metric: ours,
      index: this.client.index({ name, host }),
    };
  }

  /** Whether the collection's marker is in `target`. */
  private async hasMarker(collection: string, target: Target): Promise<boolean> {
    try {
      const response = await target.index.fetch({
        ids: [PINECONE_MARKER_ID],
        namespace: this.namespace(collection),
      });
      return PINECONE_MARKER_ID in response.records;
    } catch (err) {
      if (isNotFound(err)) return false;
      throw this.wrap("look up", collection, target, err);
    }
  }

  /** The index holding a collection: the remembered one unless `fresh`, else the first with its marker. */
  private async locate(collection: string, fresh: boolean): Promise<Target | undefined> {
    const known = this.located.get(collection);
    if (known && !fresh) return this.resolve(known);
    for (const name of this.indexNames()) {
      const target = await this.resolve(name);
      if (await this.hasMarker(collection, target)) {
        this.located.set(collection, name);
        return target;
      }
    }
    this.located.delete(collection);
    return undefined;
  }

  private async require(collection: string): Promise<Target> {
    const target = await this.locate(collection, false);
    if (!target) {
      throw new KnowledgeLayerError(
        `vector collection "${collection}" does not exist (pinecone indexes ${this.indexNames()
          .map((n) => `"${n}"`)
          .join(", ")})`,
      );
    }
    return target;
  }

  private toRecord(collection: string, target: Target, record: VectorRecord): PineconeRecord<RecordMetadata> {
    if (record.vector.length !== target.dimension) {
      throw new KnowledgeLayerError(
        `record "${record.id}" has dimension ${record.vector.length}, collection "${collection}" expects ${target.dimension}`,
      );
    }
    if (!record.id || record.id === PINECONE_MARKER_ID) {
      throw new KnowledgeLayerError(
        `collection "${collection}": record id "${record.id}" is reserved or empty`,
      );
    }
    if (PINECONE_MARKER_KEY in record.payload) {
      throw new KnowledgeLayerError(
        `record "${record.id}" in collection "${collection}": payload field "${PINECONE_MARKER_KEY}" is reserved`,
      );
    }
    const values = Array.from(record.vector);
    return Object.keys(record.payload).length > 0
      ? { id: record.id, values, metadata: record.payload }
      : { id: record.id, values };
  }

  private async upsert(
    collection: string,
    target: Target,
    rows: PineconeRecord<RecordMetadata>[],
    action: string,
  ): Promise<void> {
    for (let i = 0; i < rows.length; i += BATCH) {
      const batch = rows.slice(i, i + BATCH);
      await this.call(action, collection, target, () =>
        target.index.upsert({ records: batch, namespace: this.namespace(collection) }),
      );
    }
  }

  /** Stored records by id (the marker left out), fetched in batches. */
  private async fetch(
    collection: string,
    target: Target,
    ids: string[],
  ): Promise<Map<string, PineconeRecord<RecordMetadata>>> {
    const unique = [...new Set(ids)].filter((id) => id && id !== PINECONE_MARKER_ID);
    const found = new Map<string, PineconeRecord<RecordMetadata>>();
    for (let i = 0; i < unique.length; i += BATCH) {
      const batch = unique.slice(i, i + BATCH);
      const response = await this.call("read", collection, target, () =>
        target.index.fetch({ ids: batch, namespace: this.namespace(collection) }),
      );
      for (const [id, record] of Object.entries(response.records)) found.set(id, record);
    }
    return found;
  }

  private async call<T>(
    action: string,
    collection: string,
    target: Target,
    fn: () => Promise<T>,
  ): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw this.wrap(action, collection, target, err);
    }
  }

  /** A KnowledgeLayerError naming the action, the collection, the index and its host. */
  private wrap(action: string, collection: string, target: Target, err: unknown): KnowledgeLayerError {
    if (err instanceof KnowledgeLayerError) return err;
    return new KnowledgeLayerError(
      `pinecone: cannot ${action} collection "${collection}" (index "${target.name}" at ${target.host}): ${describeError(err, this.timeoutMs, this.maxRetries, this.options.apiKey)}`,
      { cause: err },
    );
  }
}

function toPayload(metadata: RecordMetadata | undefined): Payload {
  const payload: Payload = {};
  for (const [key, value] of Object.entries(metadata ?? {})) {
    if (key === PINECONE_MARKER_KEY) continue;
    if (typeof value === "string" || typeof value === "number" || typeof value === "boolean") {
      payload[key] = value;
    }
  }
  return payload;
}

function isNotFound(err: unknown): boolean {
  return (err as { name?: unknown } | null)?.name === "PineconeNotFoundError";
}

/** A short explanation of a client error, with the store's API key masked (a server may echo it). */
function describeError(err: unknown, timeoutMs: number, maxRetries: number, apiKey?: string): string {
  return redactText(maskKnownSecrets(explainError(err, timeoutMs, maxRetries), [apiKey]));
}

function explainError(err: unknown, timeoutMs: number, maxRetries: number): string {
  if (!(err instanceof Error)) return String(err);
  for (let e: unknown = err; e instanceof Error; e = e.cause) {
    if (e.name === "TimeoutError" || e.name === "AbortError") return `no answer within ${timeoutMs} ms`;
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && /^E[A-Z]+/.test(code)) return `cannot connect (${code})`;
  }
  if (err.name === "PineconeAuthorizationError") return "the API key was rejected (HTTP 401)";
  if (err.name === "PineconeNotFoundError") return "not found (HTTP 404)";
  if (err.name === "PineconeMaxRetriesExceededError") {
    return `server error (HTTP 5xx), still failing after ${maxRetries} ${maxRetries === 1 ? "retry" : "retries"}`;
  }
  return err.message;
}

/** What Pinecone metadata filters support: no `$prefix`; `$not` is pushed down; numeric range bounds. */
const PINECONE_FILTER_SUPPORT = {
  kinds: new Set<FilterNode["kind"]>(["eq", "ne", "in", "nin", "range", "contains", "exists"]),
};

/**
 * A filter as a Pinecone metadata filter (`$eq $ne $in $nin $gt $gte $lt $lte $exists $and
 * $or`); `$not` is pushed down to the conditions ({@link pushDownNot}).
 */
export function toPineconeFilter(filter: Filter | undefined): object | undefined {
  if (!filter) return undefined;
  const node = pushDownNot(parseFilter(filter));
  checkStoreFilter(node, "pinecone", PINECONE_FILTER_SUPPORT);
  const convert = (n: FilterNode): object => {
    if ("field" in n && n.field === PINECONE_MARKER_KEY)
      throw new FilterError(`${n.where}: reserved field name`);
    switch (n.kind) {
      case "and":
      case "or":
        return { [n.kind === "and" ? "$and" : "$or"]: n.children.map(convert) };
      case "eq":
      case "contains":
        return { [n.field]: { $eq: n.value } };
      case "ne":
        return { [n.field]: { $ne: n.value } };
      case "in":
      case "nin":
        return { [n.field]: { [n.kind === "in" ? "$in" : "$nin"]: n.values } };
      case "range":
        if (!("number" in n.bound)) throw new Error("date bounds are checked out before");
        return { [n.field]: { [n.op]: n.bound.number } };
      case "exists":
        return { [n.field]: { $exists: n.value } };
      default:
        throw new Error(`${n.kind} is checked out before`);
    }
  };
  return node.kind === "and" && node.children.length === 0 ? undefined : convert(node);
}
