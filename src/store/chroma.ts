/**
 * Chroma vector-store adapter (`kind: "chroma"`), built on the `chromadb` client.
 *
 * - Embeddings always come from knowledge-layer: collections are created with
 *   `embeddingFunction: null` and opened with a stub that refuses to embed, so the
 *   client never loads (or downloads) an embedding model.
 * - Metrics map to Chroma spaces (cosine → `cosine`, euclidean → `l2`, dot → `ip`)
 *   through the HNSW configuration. Chroma distances become contract scores:
 *   cosine = 1 − d, euclidean = −√d (Chroma's `l2` is the *squared* distance),
 *   dot = 1 − d (Chroma's `ip` distance is 1 − u·v).
 * - The dimension, metric and original name are kept in the collection metadata
 *   (`kl:dimension`, `kl:metric`, `kl:name`).
 * - Payloads are Chroma record metadata; filters become `where` clauses.
 * - Collection names Chroma would reject are mapped to a readable prefix plus a
 *   short hash (see {@link chromaCollectionName}).
 */
import { createHash } from "node:crypto";
import type { ChromaClient, Collection, EmbeddingFunction, Metadata, Where } from "chromadb";
import { KnowledgeLayerError } from "../errors.js";
import {
  checkStoreFilter,
  type Filter,
  FilterError,
  type FilterNode,
  type FilterScalar,
  parseFilter,
  pushDownNot,
} from "../retrieve/filter.js";
import { maskKnownSecrets, maskUrl, redactText } from "../secrets.js";
import { checkCollectionSpec } from "./checks.js";
import {
  type CollectionInfo,
  METRICS,
  type Metric,
  type Payload,
  type PayloadValue,
  type VectorHit,
  type VectorRecord,
  type VectorSearchOptions,
  type VectorStore,
} from "./contract.js";

/** Options of {@link ChromaVectorStore}. */
export interface ChromaVectorStoreOptions {
  /** Server URL, e.g. `http://127.0.0.1:8000` (http or https, no path). */
  url: string;
  /** Chroma tenant; the server's default (`default_tenant`) when omitted. */
  tenant?: string;
  /** Chroma database; the server's default (`default_database`) when omitted. It must exist. */
  database?: string;
  /** Extra HTTP headers sent with every request, e.g. `{ "x-chroma-token": "…" }`. */
  headers?: Record<string, string>;
}

/** Records per write request (the contract caps server requests at 100 records). */
const BATCH = 100;
/** How long {@link ChromaVectorStore.health} waits for the heartbeat. */
const HEALTH_TIMEOUT_MS = 5000;

const META_DIMENSION = "kl:dimension";
const META_METRIC = "kl:metric";
const META_NAME = "kl:name";

type ChromaSpace = "cosine" | "l2" | "ip";

const SPACE: Record<Metric, ChromaSpace> = { cosine: "cosine", euclidean: "l2", dot: "ip" };

/** Chroma's name rule: 3–512 characters of [a-zA-Z0-9._-], alphanumeric at both ends. */
const VALID_NAME = /^[a-zA-Z0-9][a-zA-Z0-9._-]{1,510}[a-zA-Z0-9]$/;
const IPV4 = /^\d{1,3}(\.\d{1,3}){3}$/;
const PREFIX_MAX = 48;

/**
 * The Chroma collection name used for a knowledge-layer collection name.
 * Names Chroma accepts (3–512 characters of `[a-zA-Z0-9._-]`, alphanumeric at both
 * ends, no `..`, not an IPv4 address) are used unchanged; any other name becomes
 * a readable prefix (invalid characters replaced by `_`, at most 48 characters)
 * followed by `-` and 12 hex digits of its SHA-256, e.g. `c` → `c-2e7d2c03a950`.
 * Deterministic; distinct names map to distinct Chroma names (barring a hash
 * collision, which the adapter detects through the `kl:name` metadata).
 */
export function chromaCollectionName(name: string): string {
  if (VALID_NAME.test(name) && !name.includes("..") && !IPV4.test(name)) return name;
  const hash = createHash("sha256").update(name, "utf8").digest("hex").slice(0, 12);
  const prefix = name
    .replace(/[^a-zA-Z0-9._-]/g, "_")
    .replace(/\.{2,}/g, ".")
    .replace(/^[^a-zA-Z0-9]+/, "")
    .slice(0, PREFIX_MAX)
    .replace(/[^a-zA-Z0-9]+$/, "");
  return `${prefix || "kl"}-${hash}`;
}

/** Stands in for an embedding function so the client never resolves a default one. */
const NO_EMBEDDING: EmbeddingFunction = {
  name: "knowledge-layer-external",
  generate: async () => {
    throw new KnowledgeLayerError("knowledge-layer passes its own embeddings; Chroma must not embed text");
  },
};

/** An opened collection with the settings knowledge-layer stored on it. */
interface Opened {
  collection: Collection;
  name: string;
  dimension: number;
  metric: Metric;
}

const chunks = <T>(items: T[], size = BATCH): T[][] => {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
};

const errorName = (error: unknown): string =>
  typeof error === "object" && error !== null && "name" in error ? String(error.name) : "";

const errorMessage = (error: unknown): string => (error instanceof Error ? error.message : String(error));

const isNotFound = (error: unknown) => errorName(error) === "ChromaNotFoundError";

/** Keeps the last record of each id (re-adding an id replaces it, also within one call). */
function lastPerId(records: VectorRecord[]): VectorRecord[] {
  const byId = new Map<string, VectorRecord>();
  for (const record of records) {
    byId.delete(record.id);
    byId.set(record.id, record);
  }
  return [...byId.values()];
}

function toPayload(metadata: Metadata | null | undefined): Payload {
  const payload: Payload = {};
  for (const [key, value] of Object.entries(metadata ?? {})) {
    if (typeof value === "string" || typeof value === "number" || typeof value === "boolean") {
      payload[key] = value;
    }
  }
  return payload;
}

function toMetadata(payload: Payload): Metadata | null {
  return Object.keys(payload).length === 0 ? null : { ...payload };
}

function isPayloadValue(value: unknown): value is PayloadValue {
  return (
    typeof value === "string" ||
    typeof value === "boolean" ||
    (typeof value === "number" && Number.isFinite(value))
  );
}

/**
 * What Chroma `where` clauses support: no `$exists` or `$prefix`; `$not` is pushed down;
 * whole-number values and range bounds.
 */
const CHROMA_FILTER_SUPPORT = {
  kinds: new Set<FilterNode["kind"]>(["eq", "ne", "in", "nin", "range", "contains"]),
};

/**
 * A filter as a Chroma `where` clause (`$eq $ne $in $nin $gt $gte $lt $lte $and $or`, an
 * `$and`/`$or` of one clause unwrapped as Chroma requires two or more); `$not` is pushed
 * down to the conditions ({@link pushDownNot}). Undefined for `{}`.
 */
export function toChromaWhere(filter: Filter | undefined): Where | undefined {
  if (!filter) return undefined;
  const node = pushDownNot(parseFilter(filter));
  checkStoreFilter(node, "chroma", CHROMA_FILTER_SUPPORT);
  const convert = (n: FilterNode): Where => {
    // Chroma truncates a fractional bound compared with whole-number metadata ({"h": 2}
    // matches {"h": {"$eq": 2.5}}): refused rather than answered wrongly.
    const values =
      "value" in n
        ? [n.value]
        : "values" in n
          ? n.values
          : "bound" in n && "number" in n.bound
            ? [n.bound.number]
            : [];
    if ("where" in n && values.some((v) => typeof v === "number" && !Number.isInteger(v)))
      throw new FilterError(`${n.where}: the chroma store compares whole numbers only`);
    switch (n.kind) {
      case "and":
      case "or": {
        const parts = n.children.map(convert);
        if (parts.length === 1) return parts[0] as Where;
        return { [n.kind === "and" ? "$and" : "$or"]: parts } as Where;
      }
      case "eq":
      case "contains":
        return { [n.field]: { $eq: n.value } } as Where;
      case "ne":
        return { [n.field]: { $ne: n.value } } as Where;
      case "in":
      case "nin": {
        // Chroma lists hold one type: a mixed list becomes one clause per type.
        const byType = new Map<string, FilterScalar[]>();
        for (const v of n.values) byType.set(typeof v, [...(byType.get(typeof v) ?? []), v]);
        const op = n.kind === "in" ? "$in" : "$nin";
        const parts = [...byType.values()].map((values) => ({ [n.field]: { [op]: values } }) as Where);
        if (parts.length === 1) return parts[0] as Where;
        return { [n.kind === "in" ? "$or" : "$and"]: parts } as Where;
      }
      case "range":
        if (!("number" in n.bound)) throw new Error("date bounds are checked out before");
        return { [n.field]: { [n.op]: n.bound.number } } as Where;
      default:
        throw new Error(`${n.kind} is checked out before`);
    }
  };
  if (node.kind === "and" && node.children.length === 0) return undefined;
  return convert(node);
}

/** Contract score (higher is closer) from a Chroma distance. */
function toScore(metric: Metric, distance: number): number {
  if (metric === "euclidean") return -Math.sqrt(Math.max(0, distance));
  return 1 - distance;
}

/**
 * A {@link VectorStore} on a Chroma server (tested against Chroma 1.x via the
 * `chromadb` 3.x client). Each knowledge-layer collection is one Chroma
 * collection in the configured tenant and database.
 *
 * Replacing a record whose stored payload has keys the new payload lacks deletes
 * the old record first (Chroma merges metadata on upsert), so such a replacement
 * is not atomic. Search is approximate (Chroma's HNSW index).
 */
export class ChromaVectorStore implements VectorStore {
  readonly kind = "chroma";
  /** The server's origin, e.g. `http://127.0.0.1:8000` (used in messages; no credentials). */
  readonly url: string;
  private readonly host: string;
  private readonly port: number;
  private readonly ssl: boolean;
  private client: ChromaClient | undefined;
  private connecting: Promise<ChromaClient> | undefined;

  /** @throws KnowledgeLayerError when `url` is not an http(s) URL without a path. */
  constructor(private readonly options: ChromaVectorStoreOptions) {
    let parsed: URL;
    try {
      parsed = new URL(options.url);
    } catch {
      throw new KnowledgeLayerError(
        `Chroma: invalid url "${maskUrl(options.url)}" (expected e.g. http://127.0.0.1:8000)`,
      );
    }
    if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
      throw new KnowledgeLayerError(
        `Chroma: url "${maskUrl(options.url)}" must start with http:// or https://`,
      );
    }
    if (parsed.pathname !== "/" || parsed.search || parsed.hash) {
      throw new KnowledgeLayerError(
        `Chroma: url "${maskUrl(options.url)}" must not have a path or query (the client addresses /api/v2 itself)`,
      );
    }
    // The origin only: credentials in the URL must not end up in error messages.
    this.url = parsed.origin;
    this.ssl = parsed.protocol === "https:";
    this.host = parsed.hostname;
    this.port = parsed.port ? Number(parsed.port) : this.ssl ? 443 : 80;
  }

  /** Where this store points: URL, tenant and database, for messages. */
  private get location(): string {
    const { tenant, database } = this.options;
    const scope = [tenant && `tenant "${tenant}"`, database && `database "${database}"`].filter(Boolean);
    return `Chroma at ${this.url}${scope.length ? ` (${scope.join(", ")})` : ""}`;
  }

  /**
   * Creates the client, checks that the server answers and that the database
   * exists. Idempotent; the other methods call it when needed.
   * @throws KnowledgeLayerError naming the URL when the server cannot be reached.
   */
  async connect(): Promise<void> {
    await this.api();
  }

  /** Forgets the client (the client keeps no open connections of its own). */
  async close(): Promise<void> {
    this.client = undefined;
    this.connecting = undefined;
  }

  async createCollection(name: string, dimension: number, metric: Metric): Promise<void> {
    checkCollectionSpec(name, dimension, metric);
    const check = (existing: Opened) => {
      if (existing.dimension !== dimension || existing.metric !== metric) {
        throw new KnowledgeLayerError(
          `collection "${name}" exists with dimension ${existing.dimension}/metric ${existing.metric}, not dimension ${dimension}/metric ${metric} (${this.location})`,
        );
      }
    };
    const existing = await this.open(name);
    if (existing) {
      check(existing);
      return;
    }
    const client = await this.api();
    try {
      await client.createCollection({
        name: chromaCollectionName(name),
        embeddingFunction: null,
        configuration: { hnsw: { space: SPACE[metric] } },
        metadata: { [META_DIMENSION]: dimension, [META_METRIC]: metric, [META_NAME]: name },
      });
    } catch (error) {
      if (errorName(error) !== "ChromaUniqueError") throw this.wrap(error, "create collection", name);
      // Created concurrently by someone else: it must match.
      const raced = await this.open(name);
      if (!raced) throw this.wrap(error, "create collection", name);
      check(raced);
    }
  }

  async dropCollection(name: string): Promise<void> {
    const existing = await this.open(name);
    if (!existing) return;
    const client = await this.api();
    try {
      await client.deleteCollection({ name: existing.collection.name });
    } catch (error) {
      if (!isNotFound(error)) throw this.wrap(error, "drop collection", name);
    }
  }

  async addBatch(collection: string, records: VectorRecord[]): Promise<void> {
    const opened = await this.require(collection);
    this.validate(opened, records);
    for (const batch of chunks(lastPerId(records))) {
      const stored = await this.storedMetadata(
        opened,
        batch.map((r) => r.id),
      );
      await this.write(opened, batch, stored);
    }
  }

  async update(collection: string, records: VectorRecord[]): Promise<void> {
    const opened = await this.require(collection);
    this.validate(opened, records);
    const unique = lastPerId(records);
    const stored = new Map<string, Metadata | null>();
    for (const batch of chunks(unique)) {
      for (const [id, metadata] of await this.storedMetadata(
        opened,
        batch.map((r) => r.id),
      )) {
        stored.set(id, metadata);
      }
    }
    const missing = unique.find((r) => !stored.has(r.id));
    if (missing) {
      throw new KnowledgeLayerError(`collection "${collection}" has no record "${missing.id}" to update`);
    }
    for (const batch of chunks(unique)) await this.write(opened, batch, stored);
  }

  async search(collection: string, vector: Float32Array, options: VectorSearchOptions): Promise<VectorHit[]> {
    const opened = await this.require(collection);
    if (vector.length !== opened.dimension) {
      throw new KnowledgeLayerError(
        `query vector has dimension ${vector.length}, collection "${collection}" expects ${opened.dimension}`,
      );
    }
    const where = toChromaWhere(options.filter);
    const topK = Math.max(0, Math.floor(options.topK));
    if (topK === 0) return [];
    const query = (nResults: number) =>
      opened.collection.query({
        queryEmbeddings: [Array.from(vector)],
        nResults,
        where,
        include: ["distances", "metadatas"],
      });
    let result: Awaited<ReturnType<typeof query>>;
    try {
      result = await query(topK);
    } catch (error) {
      // Some Chroma versions reject n_results above the number of records: retry capped.
      const count = await opened.collection.count().catch(() => undefined);
      if (count === undefined || count >= topK) throw this.wrap(error, "search", collection);
      if (count === 0) return [];
      try {
        result = await query(count);
      } catch (retryError) {
        throw this.wrap(retryError, "search", collection);
      }
    }
    const ids = result.ids[0] ?? [];
    const distances = result.distances[0] ?? [];
    const metadatas = result.metadatas[0] ?? [];
    const threshold = options.scoreThreshold;
    const hits: VectorHit[] = [];
    ids.forEach((id, i) => {
      const distance = distances[i];
      if (distance === null || distance === undefined) return;
      const score = toScore(opened.metric, distance);
      if (threshold !== undefined && score < threshold) return;
      hits.push({ id, score, payload: toPayload(metadatas[i]) });
    });
    hits.sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    return hits.slice(0, topK);
  }

  async get(collection: string, ids: string[]): Promise<VectorRecord[]> {
    const opened = await this.require(collection);
    const found = new Map<string, VectorRecord>();
    for (const batch of chunks([...new Set(ids)])) {
      try {
        const result = await opened.collection.get({ ids: batch, include: ["embeddings", "metadatas"] });
        result.ids.forEach((id, i) => {
          found.set(id, {
            id,
            vector: Float32Array.from(result.embeddings[i] ?? []),
            payload: toPayload(result.metadatas[i]),
          });
        });
      } catch (error) {
        throw this.wrap(error, "get records from", collection);
      }
    }
    return ids.flatMap((id) => {
      const record = found.get(id);
      return record ? [record] : [];
    });
  }

  async delete(collection: string, ids: string[]): Promise<void> {
    const opened = await this.require(collection);
    for (const batch of chunks([...new Set(ids)])) {
      try {
        await opened.collection.delete({ ids: batch });
      } catch (error) {
        throw this.wrap(error, "delete records from", collection);
      }
    }
  }

  async info(collection: string): Promise<CollectionInfo | undefined> {
    const opened = await this.open(collection);
    if (!opened) return undefined;
    try {
      const count = await opened.collection.count();
      return { name: collection, dimension: opened.dimension, metric: opened.metric, count };
    } catch (error) {
      throw this.wrap(error, "count records of", collection);
    }
  }

  /** True when `GET /api/v2/heartbeat` answers within 5 s. Never throws. */
  async health(): Promise<boolean> {
    try {
      const response = await fetch(`${this.url}/api/v2/heartbeat`, {
        headers: this.options.headers,
        signal: AbortSignal.timeout(HEALTH_TIMEOUT_MS),
      });
      await response.body?.cancel();
      return response.ok;
    } catch {
      return false;
    }
  }

  /** The connected client, connecting first if needed. */
  private async api(): Promise<ChromaClient> {
    if (this.client) return this.client;
    this.connecting ??= this.createClient().catch((error) => {
      this.connecting = undefined;
      throw error;
    });
    this.client = await this.connecting;
    return this.client;
  }

  private async createClient(): Promise<ChromaClient> {
    const { ChromaClient, AdminClient } = await import("chromadb");
    const { tenant, database, headers } = this.options;
    const connection = { host: this.host, port: this.port, ssl: this.ssl, headers };
    const client = new ChromaClient({ ...connection, tenant, database });
    try {
      await client.heartbeat();
    } catch (error) {
      throw this.wrap(error, "connect");
    }
    // A missing database would otherwise surface later as "collection not found".
    const path = { tenant: client.tenant ?? "default_tenant", name: client.database ?? "default_database" };
    try {
      await new AdminClient(connection).getDatabase(path);
    } catch (error) {
      if (isNotFound(error)) {
        throw new KnowledgeLayerError(
          `Chroma at ${this.url}: database "${path.name}" does not exist in tenant "${path.tenant}" (create it first)`,
          { cause: error },
        );
      }
      // Other failures (e.g. a token not allowed to read databases) are left to the data calls.
    }
    return client;
  }

  /** The collection and its stored settings, or undefined when it does not exist. */
  private async open(name: string): Promise<Opened | undefined> {
    const client = await this.api();
    const chromaName = chromaCollectionName(name);
    let collection: Collection;
    try {
      collection = await client.getCollection({ name: chromaName, embeddingFunction: NO_EMBEDDING });
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw this.wrap(error, "open collection", name);
    }
    const metadata = collection.metadata ?? {};
    const storedName = metadata[META_NAME];
    if (typeof storedName === "string" && storedName !== name) {
      throw new KnowledgeLayerError(
        `collection "${name}" maps to Chroma collection "${chromaName}", which belongs to collection "${storedName}" (${this.location})`,
      );
    }
    const dimension = metadata[META_DIMENSION];
    const metric = metadata[META_METRIC];
    if (typeof dimension !== "number" || !METRICS.includes(metric as Metric)) {
      throw new KnowledgeLayerError(
        `collection "${name}" (Chroma collection "${chromaName}", ${this.location}) was not created by knowledge-layer: its metadata lacks ${META_DIMENSION}/${META_METRIC}`,
      );
    }
    return { collection, name, dimension, metric: metric as Metric };
  }

  private async require(name: string): Promise<Opened> {
    const opened = await this.open(name);
    if (!opened)
      throw new KnowledgeLayerError(`vector collection "${name}" does not exist (${this.location})`);
    return opened;
  }

  /** Checks every record before anything is written. */
  private validate(opened: Opened, records: VectorRecord[]): void {
    for (const record of records) {
      if (typeof record.id !== "string" || record.id === "") {
        throw new KnowledgeLayerError(`collection "${opened.name}": record ids must be non-empty strings`);
      }
      if (record.vector.length !== opened.dimension) {
        throw new KnowledgeLayerError(
          `record "${record.id}" has dimension ${record.vector.length}, collection "${opened.name}" expects ${opened.dimension}`,
        );
      }
      if (!record.vector.every(Number.isFinite)) {
        throw new KnowledgeLayerError(
          `record "${record.id}" of collection "${opened.name}" has a non-finite vector component`,
        );
      }
      for (const [key, value] of Object.entries(record.payload)) {
        if (!isPayloadValue(value)) {
          throw new KnowledgeLayerError(
            `record "${record.id}" of collection "${opened.name}": payload field "${key}" must be a string, finite number or boolean`,
          );
        }
      }
    }
  }

  /** The stored metadata of those of `ids` that exist (null for an empty payload). */
  private async storedMetadata(opened: Opened, ids: string[]): Promise<Map<string, Metadata | null>> {
    const stored = new Map<string, Metadata | null>();
    if (ids.length === 0) return stored;
    try {
      const result = await opened.collection.get({ ids, include: ["metadatas"] });
      result.ids.forEach((id, i) => {
        stored.set(id, result.metadatas[i] ?? null);
      });
    } catch (error) {
      throw this.wrap(error, "read records of", opened.name);
    }
    return stored;
  }

  /**
   * Upserts one batch (≤ 100 records). Chroma merges metadata on upsert, so a
   * stored record with keys the new payload lacks is deleted first.
   */
  private async write(opened: Opened, batch: VectorRecord[], stored: Map<string, Metadata | null>) {
    const stale = batch
      .filter((record) => {
        const before = stored.get(record.id);
        return before && Object.keys(before).some((key) => !(key in record.payload));
      })
      .map((record) => record.id);
    try {
      if (stale.length > 0) await opened.collection.delete({ ids: stale });
      await opened.collection.upsert({
        ids: batch.map((r) => r.id),
        embeddings: batch.map((r) => Array.from(r.vector)),
        metadatas: batch.map((r) => toMetadata(r.payload)) as Metadata[],
      });
    } catch (error) {
      throw this.wrap(error, "write records to", opened.name);
    }
  }

  /** A KnowledgeLayerError naming the operation, collection and server. */
  private wrap(error: unknown, operation: string, collection?: string): KnowledgeLayerError {
    if (error instanceof KnowledgeLayerError) return error;
    const target = collection === undefined ? "" : ` collection "${collection}"`;
    const reason =
      errorName(error) === "ChromaConnectionError"
        ? "cannot reach the server (is it running, and is the URL right?)"
        : errorMessage(error);
    // The server may echo a credential it rejected: this store's header values are masked.
    const message = `${this.location}: ${operation}${target} failed: ${reason}`;
    return new KnowledgeLayerError(
      redactText(maskKnownSecrets(message, Object.values(this.options.headers ?? {}))),
      { cause: error },
    );
  }
}
