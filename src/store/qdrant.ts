import { createHash } from "node:crypto";
import { QdrantClient } from "@qdrant/js-client-rest";
import { KnowledgeLayerError } from "../errors.js";
import { urlSecrets } from "../http.js";
import {
  checkStoreFilter,
  type Filter,
  type FilterNode,
  type FilterScalar,
  parseFilter,
} from "../retrieve/filter.js";
import { maskKnownSecrets, redactText } from "../secrets.js";
import { checkCollectionSpec } from "./checks.js";
import type {
  CollectionInfo,
  Metric,
  Payload,
  PayloadValue,
  VectorHit,
  VectorRecord,
  VectorSearchOptions,
  VectorStore,
} from "./contract.js";

/** Options of {@link QdrantVectorStore}. Give `url`, or `host` (and `port`). */
export interface QdrantVectorStoreOptions {
  /** Server URL, e.g. `http://localhost:6333` or `https://xyz.cloud.qdrant.io:6333`. */
  url?: string;
  /** Host name without scheme or port (alternative to `url`). */
  host?: string;
  /** Port used with `host` (default 6333). */
  port?: number;
  /** Use HTTPS with `host` (default: true when an API key is set, as the client does). */
  https?: boolean;
  /** API key, sent in the `api-key` header. */
  apiKey?: string;
  /** Per-request timeout in milliseconds (default 30000). */
  timeoutMs?: number;
  /** Prefix of every Qdrant collection name this store creates or reads (default ""). */
  prefix?: string;
}

/** Records per write request (the contract allows at most 100). */
const BATCH = 100;
/** Payload key holding the original record id; stripped on read. */
export const QDRANT_ID_KEY = "__kl_id";
/** Namespace UUID of the point ids this store derives from record ids. */
const POINT_ID_NAMESPACE = "0b5f2c6e-8d2a-4f57-9c3e-6a1d4e7b9f20";
/** Characters Qdrant accepts in a collection name without any escaping trouble. */
const SAFE_NAME = /^[A-Za-z0-9_-]{1,200}$/;

const TO_DISTANCE: Record<Metric, "Cosine" | "Euclid" | "Dot"> = {
  cosine: "Cosine",
  euclidean: "Euclid",
  dot: "Dot",
};
const FROM_DISTANCE: Record<string, Metric> = { Cosine: "cosine", Euclid: "euclidean", Dot: "dot" };

/**
 * A name-based (version 5, SHA-1) UUID as in RFC 9562 §5.5: the SHA-1 of the
 * namespace UUID's 16 bytes followed by the UTF-8 name, with the version and
 * variant bits set.
 */
export function uuidV5(name: string, namespace: string): string {
  const ns = Buffer.from(namespace.replace(/-/g, ""), "hex");
  if (ns.length !== 16) throw new KnowledgeLayerError(`"${namespace}" is not a UUID`);
  const h = createHash("sha1").update(ns).update(name, "utf8").digest();
  h[6] = ((h[6] ?? 0) & 0x0f) | 0x50;
  h[8] = ((h[8] ?? 0) & 0x3f) | 0x80;
  const hex = h.subarray(0, 16).toString("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/**
 * The Qdrant point id of a record id. Qdrant accepts only unsigned integers and
 * UUIDs as point ids, so every record id maps to a deterministic UUID v5; the
 * original id travels in the payload under {@link QDRANT_ID_KEY}.
 */
export function qdrantPointId(id: string): string {
  return uuidV5(id, POINT_ID_NAMESPACE);
}

/**
 * The Qdrant collection name of a collection: `prefix + name` when that uses
 * only letters, digits, `_` and `-`; otherwise the other characters become `_`
 * and a hash of the original name is appended, so distinct names never collide.
 */
export function qdrantCollectionName(name: string, prefix = ""): string {
  const full = prefix + name;
  if (SAFE_NAME.test(full)) return full;
  const hash = createHash("sha1").update(full, "utf8").digest("hex").slice(0, 10);
  return `${full.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 180)}-${hash}`;
}

interface Meta {
  dimension: number;
  metric: Metric;
}

interface QdrantPoint {
  id: string | number;
  payload?: Record<string, unknown> | null;
  vector?: unknown;
  score?: number;
}

/**
 * A {@link VectorStore} on a Qdrant server, through the official REST client.
 *
 * Each collection is a Qdrant collection with one unnamed vector (metric
 * cosine → `Cosine`, euclidean → `Euclid`, dot → `Dot`). Record ids map to UUID
 * point ids ({@link qdrantPointId}); payloads are stored as Qdrant payloads.
 * Scores follow the contract: Qdrant's `Cosine` and `Dot` scores are
 * similarities already, `Euclid` returns the distance, which becomes −distance.
 * Note that Qdrant normalises vectors of `Cosine` collections on upload, so
 * {@link get} returns unit-length vectors there.
 *
 * Writes go in batches of {@link BATCH} points with `wait=true`. Ties in search
 * results are ordered by id among the hits the server returned.
 */
export class QdrantVectorStore implements VectorStore {
  readonly kind = "qdrant";
  /** The server URL, for messages. */
  readonly url: string;
  private readonly client: QdrantClient;
  private readonly prefix: string;
  private readonly timeoutMs: number;
  /** Dimension and metric of the collections seen, by collection name. */
  private readonly metas = new Map<string, Meta>();

  /** The API key and URL password, masked in error messages. */
  private readonly secrets: string[];

  constructor(options: QdrantVectorStoreOptions) {
    this.secrets = [options.apiKey ?? "", ...urlSecrets(options.url)];
    if (!options.url && !options.host) {
      throw new KnowledgeLayerError("qdrant: give the server `url` or `host`");
    }
    if (options.url && options.host) {
      throw new KnowledgeLayerError("qdrant: give either `url` or `host`, not both");
    }
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.prefix = options.prefix ?? "";
    const https = options.https ?? options.apiKey !== undefined;
    this.url = (
      options.url ?? `${https ? "https" : "http"}://${options.host}:${options.port ?? 6333}`
    ).replace(/\/+$/, "");
    try {
      this.client = new QdrantClient({
        ...(options.url ? { url: options.url } : { host: options.host, port: options.port ?? 6333, https }),
        apiKey: options.apiKey,
        timeout: this.timeoutMs,
        checkCompatibility: false,
      });
    } catch (err) {
      throw new KnowledgeLayerError(
        redactText(`qdrant: invalid server address ${this.url}: ${(err as Error).message}`),
        {
          cause: err,
        },
      );
    }
  }

  /** Checks that the server answers (and accepts the API key). */
  async connect(): Promise<void> {
    await this.call("connect to the server", undefined, () => this.client.getCollections());
  }

  async close(): Promise<void> {
    this.metas.clear();
  }

  async createCollection(name: string, dimension: number, metric: Metric): Promise<void> {
    checkCollectionSpec(name, dimension, metric);
    const existing = await this.fetchMeta(name);
    if (existing) return this.checkSame(name, existing, dimension, metric);
    try {
      await this.client.createCollection(this.qname(name), {
        vectors: { size: dimension, distance: TO_DISTANCE[metric] },
      });
    } catch (err) {
      // Lost a race with another writer? Then the collection exists now.
      const now = await this.fetchMeta(name).catch(() => undefined);
      if (!now) throw this.wrap("create", name, err);
      return this.checkSame(name, now, dimension, metric);
    }
    this.metas.set(name, { dimension, metric });
  }

  async dropCollection(name: string): Promise<void> {
    this.metas.delete(name);
    try {
      await this.client.deleteCollection(this.qname(name));
    } catch (err) {
      if (statusOf(err) !== 404) throw this.wrap("drop", name, err);
    }
  }

  async addBatch(collection: string, records: VectorRecord[]): Promise<void> {
    const meta = await this.requireMeta(collection);
    const points = records.map((record) => this.toPoint(collection, meta, record));
    for (let i = 0; i < points.length; i += BATCH) {
      const batch = points.slice(i, i + BATCH);
      await this.call("write to", collection, () =>
        this.client.upsert(this.qname(collection), { wait: true, points: batch }),
      );
    }
  }

  async search(collection: string, vector: Float32Array, options: VectorSearchOptions): Promise<VectorHit[]> {
    const meta = await this.requireMeta(collection);
    if (vector.length !== meta.dimension) {
      throw new KnowledgeLayerError(
        `query vector has dimension ${vector.length}, collection "${collection}" expects ${meta.dimension}`,
      );
    }
    const limit = Math.max(0, Math.floor(options.topK));
    if (limit === 0) return [];
    const threshold = options.scoreThreshold;
    // Qdrant's score_threshold is a minimum similarity for Cosine and Dot, but a
    // maximum distance for Euclid; the euclidean threshold is applied here instead.
    const serverThreshold = threshold !== undefined && meta.metric !== "euclidean" ? threshold : undefined;
    const result = await this.call("search", collection, () =>
      this.client.query(this.qname(collection), {
        query: Array.from(vector),
        limit,
        filter: toQdrantFilter(options.filter),
        with_payload: true,
        with_vector: false,
        ...(serverThreshold !== undefined ? { score_threshold: serverThreshold } : {}),
      }),
    );
    const hits: VectorHit[] = [];
    for (const point of result.points as QdrantPoint[]) {
      const raw = point.score ?? 0;
      const score = meta.metric === "euclidean" ? (raw === 0 ? 0 : -raw) : raw;
      if (threshold !== undefined && score < threshold) continue;
      const { id, payload } = fromPayload(collection, point);
      hits.push({ id, score, payload });
    }
    return hits.sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  async get(collection: string, ids: string[]): Promise<VectorRecord[]> {
    await this.requireMeta(collection);
    const found = await this.retrieve(collection, ids, true);
    const out: VectorRecord[] = [];
    for (const id of ids) {
      const point = found.get(id);
      if (!point) continue;
      out.push({ id, vector: toVector(collection, point), payload: fromPayload(collection, point).payload });
    }
    return out;
  }

  async delete(collection: string, ids: string[]): Promise<void> {
    await this.requireMeta(collection);
    const points = [...new Set(ids)].map(qdrantPointId);
    for (let i = 0; i < points.length; i += BATCH) {
      const batch = points.slice(i, i + BATCH);
      await this.call("delete from", collection, () =>
        this.client.delete(this.qname(collection), { wait: true, points: batch }),
      );
    }
  }

  async update(collection: string, records: VectorRecord[]): Promise<void> {
    const meta = await this.requireMeta(collection);
    const points = records.map((record) => this.toPoint(collection, meta, record));
    const found = await this.retrieve(
      collection,
      records.map((r) => r.id),
      false,
    );
    const missing = records.find((r) => !found.has(r.id));
    if (missing) {
      throw new KnowledgeLayerError(`collection "${collection}" has no record "${missing.id}" to update`);
    }
    for (let i = 0; i < points.length; i += BATCH) {
      const batch = points.slice(i, i + BATCH);
      await this.call("update", collection, () =>
        this.client.upsert(this.qname(collection), { wait: true, points: batch }),
      );
    }
  }

  async info(collection: string): Promise<CollectionInfo | undefined> {
    const meta = await this.fetchMeta(collection);
    if (!meta) return undefined;
    const { count } = await this.call("count", collection, () =>
      this.client.count(this.qname(collection), { exact: true }),
    );
    return { name: collection, dimension: meta.dimension, metric: meta.metric, count };
  }

  async health(): Promise<boolean> {
    try {
      await this.client.versionInfo();
      return true;
    } catch {
      return false;
    }
  }

  /** The Qdrant collection name of `name`. */
  private qname(name: string): string {
    return qdrantCollectionName(name, this.prefix);
  }

  /** Dimension and metric from the server, or undefined when the collection does not exist. */
  private async fetchMeta(name: string): Promise<Meta | undefined> {
    let info: Awaited<ReturnType<QdrantClient["getCollection"]>>;
    try {
      info = await this.client.getCollection(this.qname(name));
    } catch (err) {
      if (statusOf(err) === 404) {
        this.metas.delete(name);
        return undefined;
      }
      throw this.wrap("read", name, err);
    }
    const vectors = info.config.params.vectors as { size?: unknown; distance?: unknown } | undefined;
    const metric = typeof vectors?.distance === "string" ? FROM_DISTANCE[vectors.distance] : undefined;
    if (typeof vectors?.size !== "number" || !metric) {
      throw new KnowledgeLayerError(
        `qdrant collection "${this.qname(name)}" at ${this.url} is not a single-vector collection with a cosine, euclid or dot distance`,
      );
    }
    const meta = { dimension: vectors.size, metric };
    this.metas.set(name, meta);
    return meta;
  }

  private async requireMeta(name: string): Promise<Meta> {
    const meta = this.metas.get(name) ?? (await this.fetchMeta(name));
    if (!meta)
      throw new KnowledgeLayerError(`vector collection "${name}" does not exist (qdrant at ${this.url})`);
    return meta;
  }

  private checkSame(name: string, existing: Meta, dimension: number, metric: Metric): void {
    if (existing.dimension !== dimension || existing.metric !== metric) {
      throw new KnowledgeLayerError(
        `collection "${name}" exists with dimension ${existing.dimension} and metric ${existing.metric}, not dimension ${dimension} and metric ${metric}`,
      );
    }
  }

  private toPoint(
    collection: string,
    meta: Meta,
    record: VectorRecord,
  ): { id: string; vector: number[]; payload: Record<string, PayloadValue> } {
    if (record.vector.length !== meta.dimension) {
      throw new KnowledgeLayerError(
        `record "${record.id}" has dimension ${record.vector.length}, collection "${collection}" expects ${meta.dimension}`,
      );
    }
    if (QDRANT_ID_KEY in record.payload) {
      throw new KnowledgeLayerError(
        `record "${record.id}" in collection "${collection}": payload field "${QDRANT_ID_KEY}" is reserved`,
      );
    }
    return {
      id: qdrantPointId(record.id),
      vector: Array.from(record.vector),
      payload: { ...record.payload, [QDRANT_ID_KEY]: record.id },
    };
  }

  /** Stored points by record id, read in batches. */
  private async retrieve(
    collection: string,
    ids: string[],
    withVector: boolean,
  ): Promise<Map<string, QdrantPoint>> {
    const unique = [...new Set(ids)];
    const found = new Map<string, QdrantPoint>();
    for (let i = 0; i < unique.length; i += BATCH) {
      const batch = unique.slice(i, i + BATCH);
      const points = (await this.call("read", collection, () =>
        this.client.retrieve(this.qname(collection), {
          ids: batch.map(qdrantPointId),
          with_payload: true,
          with_vector: withVector,
        }),
      )) as QdrantPoint[];
      for (const point of points) {
        const id = point.payload?.[QDRANT_ID_KEY];
        if (typeof id === "string") found.set(id, point);
      }
    }
    return found;
  }

  private async call<T>(action: string, collection: string | undefined, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw this.wrap(action, collection, err);
    }
  }

  /** A KnowledgeLayerError naming the action, the collection and the server. */
  private wrap(action: string, collection: string | undefined, err: unknown): KnowledgeLayerError {
    if (err instanceof KnowledgeLayerError) return err;
    const what = collection === undefined ? "" : ` collection "${collection}"`;
    // The server may echo the key it rejected: this store's own secrets are masked.
    const message = `qdrant: cannot ${action}${what} at ${this.url}: ${describeError(err, this.timeoutMs)}`;
    return new KnowledgeLayerError(redactText(maskKnownSecrets(message, this.secrets)), { cause: err });
  }
}

/** What Qdrant filters support: every operator but `$prefix`, numeric range bounds. */
const QDRANT_FILTER_SUPPORT = {
  kinds: new Set<FilterNode["kind"]>(["eq", "ne", "in", "nin", "range", "contains", "exists", "not"]),
};

/**
 * A filter as a Qdrant payload filter: `match` (value / any) for equality and lists (a
 * non-integer number as a closed `range`, since `match` takes only integers), `range`,
 * `is_empty` for `$exists`, nested `must` / `should` / `must_not` for `$and` / `$or` / `$not`,
 * `$ne` and `$nin` (so they match points without the field).
 */
export function toQdrantFilter(filter: Filter | undefined): object | undefined {
  if (!filter) return undefined;
  const node = parseFilter(filter);
  checkStoreFilter(node, "qdrant", QDRANT_FILTER_SUPPORT);
  const eq = (key: string, value: FilterScalar): object =>
    typeof value === "number" && !Number.isInteger(value)
      ? { key, range: { gte: value, lte: value } }
      : { key, match: { value } };
  const oneOf = (key: string, values: FilterScalar[]): object => {
    const strings = values.filter((v) => typeof v === "string");
    const integers = values.filter((v) => typeof v === "number" && Number.isInteger(v));
    const others = values.filter(
      (v) => typeof v === "boolean" || (typeof v === "number" && !Number.isInteger(v)),
    );
    const conditions: object[] = [];
    if (strings.length > 0) conditions.push({ key, match: { any: strings } });
    if (integers.length > 0) conditions.push({ key, match: { any: integers } });
    for (const v of others) conditions.push(eq(key, v));
    return conditions.length === 1 ? (conditions[0] as object) : { should: conditions };
  };
  const condition = (n: FilterNode): object => {
    switch (n.kind) {
      case "and":
        return { must: n.children.map(condition) };
      case "or":
        return { should: n.children.map(condition) };
      case "not":
        return { must_not: [condition(n.child)] };
      case "eq":
      case "contains":
        return eq(n.field, n.value);
      case "ne":
        return { must_not: [eq(n.field, n.value)] };
      case "in":
        return oneOf(n.field, n.values);
      case "nin":
        return { must_not: [oneOf(n.field, n.values)] };
      case "range":
        if (!("number" in n.bound)) throw new Error("date bounds are checked out before");
        return { key: n.field, range: { [n.op.slice(1)]: n.bound.number } };
      case "exists":
        return n.value ? { must_not: [{ is_empty: { key: n.field } }] } : { is_empty: { key: n.field } };
      case "prefix":
        throw new Error("$prefix is checked out before");
    }
  };
  const top = condition(node);
  return "must" in top || "should" in top || "must_not" in top ? top : { must: [top] };
}

function fromPayload(collection: string, point: QdrantPoint): { id: string; payload: Payload } {
  const { [QDRANT_ID_KEY]: id, ...payload } = point.payload ?? {};
  if (typeof id !== "string") {
    throw new KnowledgeLayerError(
      `qdrant collection "${collection}" holds point ${String(point.id)} without a "${QDRANT_ID_KEY}" payload field (not written by this store)`,
    );
  }
  return { id, payload: payload as Payload };
}

function toVector(collection: string, point: QdrantPoint): Float32Array {
  if (!Array.isArray(point.vector)) {
    throw new KnowledgeLayerError(
      `qdrant collection "${collection}" returned point ${point.id} without a vector`,
    );
  }
  return Float32Array.from(point.vector as number[]);
}

/** HTTP status of a client error, if it carries one. */
function statusOf(err: unknown): number | undefined {
  const status = (err as { status?: unknown } | null)?.status;
  return typeof status === "number" ? status : undefined;
}

/** A short explanation of a client error. */
function describeError(err: unknown, timeoutMs: number): string {
  const status = statusOf(err);
  if (status !== undefined) {
    const data = (err as { data?: unknown }).data;
    const detail =
      (data as { status?: { error?: unknown } } | undefined)?.status?.error ??
      (typeof data === "string" && data ? data : (err as Error).message);
    if (status === 401 || status === 403) {
      return `authentication failed (HTTP ${status}${detail ? `: ${String(detail)}` : ""}); check the API key`;
    }
    return `HTTP ${status}${detail ? `: ${String(detail)}` : ""}`;
  }
  if (err instanceof Error) {
    if (err.name === "QdrantClientTimeoutError" || err.name === "AbortError" || err.name === "TimeoutError") {
      return `no answer within ${timeoutMs} ms`;
    }
    const code = (err.cause as { code?: unknown } | undefined)?.code;
    if (typeof code === "string") return `cannot connect (${code})`;
    const cause = err.cause instanceof Error ? `: ${err.cause.message}` : "";
    return `${err.message}${cause}`;
  }
  return String(err);
}
