/**
 * A local stand-in for Pinecone: the control plane (`GET /indexes`, `GET
 * /indexes/{name}` in the 2026-04 API shape the 8.x client pins: top-level
 * `dimension`, `metric`, `vector_type`, `spec`) and one data
 * plane per index, each on its own 127.0.0.1 port as every real index has its
 * own host (built on {@link startMockServer}).
 *
 * Data plane (the vector API of https://docs.pinecone.io/reference/api):
 * `POST /vectors/upsert`, `GET /vectors/fetch?ids=…&namespace=…`, `POST
 * /query`, `POST /vectors/delete` (ids, filter or deleteAll), `POST
 * /describe_index_stats`. Scores are exact (brute force): cosine similarity,
 * dot product, or the squared euclidean distance for `euclidean` indexes
 * (ascending), as Pinecone documents. Metadata filters support `$eq $ne $gt
 * $gte $lt $lte $in $nin $exists $and $or`, with a bare value meaning `$eq`.
 * Namespaces appear on first upsert and disappear when emptied. Ties are
 * returned in descending id order, which is not the store's id order.
 *
 * Every request must carry `Api-Key: <apiKey>`. Errors use the documented
 * bodies: `{ error: { code, message }, status }` on the control plane,
 * `{ code, message, details }` on the data plane, and a plain-text 401 there.
 */
import { type MockReply, type MockRequest, type MockServer, startMockServer } from "../rerank-fixtures.js";

/** The metric names Pinecone uses. */
export type PineconeMetric = "cosine" | "euclidean" | "dotproduct";

/** An index the fake serves. */
export interface FakePineconeIndexSpec {
  name: string;
  dimension: number;
  metric: PineconeMetric;
  /** Host `describe_index` reports instead of the real one (to test host overrides). */
  advertisedHost?: string;
}

type Metadata = Record<string, unknown>;
interface StoredVector {
  values: number[];
  metadata?: Metadata;
}

/** An index held by the fake. */
export interface FakePineconeIndex extends FakePineconeIndexSpec {
  /** `http://127.0.0.1:<port>` of its data plane. */
  host: string;
  server: MockServer;
  /** Records by id, by namespace. */
  namespaces: Map<string, Map<string, StoredVector>>;
}

/** A running fake Pinecone. */
export interface FakePinecone {
  /** Control-plane URL, for `controllerHostUrl`. */
  controllerUrl: string;
  control: MockServer;
  indexes: Map<string, FakePineconeIndex>;
  /** Upsert requests received by one index, or by all. */
  upsertRequests(index?: string): number;
  close(): Promise<void>;
}

const controlError = (status: number, code: string, message: string): MockReply => ({
  status,
  body: { error: { code, message }, status },
});
// gRPC status codes: 3 INVALID_ARGUMENT, 5 NOT_FOUND, 12 UNIMPLEMENTED.
const dataError = (status: number, code: number, message: string): MockReply => ({
  status,
  body: { code, message, details: [] },
});

function scoreOf(metric: PineconeMetric, q: number[], v: number[]): number {
  let dot = 0;
  let qq = 0;
  let vv = 0;
  let d2 = 0;
  for (let i = 0; i < q.length; i++) {
    const a = q[i] ?? 0;
    const b = v[i] ?? 0;
    dot += a * b;
    qq += a * a;
    vv += b * b;
    d2 += (a - b) ** 2;
  }
  const s = metric === "euclidean" ? d2 : metric === "dotproduct" ? dot : dot / Math.sqrt(qq * vv);
  return Math.fround(s);
}

/** Whether metadata satisfies a Pinecone metadata filter. */
function matches(metadata: Metadata, filter: Metadata): boolean {
  return Object.entries(filter).every(([key, cond]) => {
    if (key === "$and") return (cond as Metadata[]).every((f) => matches(metadata, f));
    if (key === "$or") return (cond as Metadata[]).some((f) => matches(metadata, f));
    if (key.startsWith("$")) throw new Error(`unknown operator ${key}`);
    const ops =
      cond !== null && typeof cond === "object" && !Array.isArray(cond) ? (cond as Metadata) : { $eq: cond };
    const has = key in metadata;
    const value = metadata[key];
    return Object.entries(ops).every(([op, arg]) => {
      switch (op) {
        case "$eq":
          return has && (Array.isArray(value) ? value.includes(arg) : value === arg);
        case "$ne":
          return !has || (Array.isArray(value) ? !value.includes(arg) : value !== arg);
        case "$in":
          return (
            has && (arg as unknown[]).some((a) => (Array.isArray(value) ? value.includes(a) : value === a))
          );
        case "$nin":
          return (
            !has || !(arg as unknown[]).some((a) => (Array.isArray(value) ? value.includes(a) : value === a))
          );
        case "$exists":
          return has === arg;
        case "$gt":
          return typeof value === "number" && value > (arg as number);
        case "$gte":
          return typeof value === "number" && value >= (arg as number);
        case "$lt":
          return typeof value === "number" && value < (arg as number);
        case "$lte":
          return typeof value === "number" && value <= (arg as number);
        default:
          throw new Error(`unknown operator ${op}`);
      }
    });
  });
}

function validMetadata(metadata: unknown): string | undefined {
  if (metadata === undefined) return undefined;
  if (metadata === null || typeof metadata !== "object" || Array.isArray(metadata))
    return "metadata must be an object";
  for (const [key, value] of Object.entries(metadata)) {
    const ok =
      typeof value === "string" ||
      typeof value === "number" ||
      typeof value === "boolean" ||
      (Array.isArray(value) && value.every((x) => typeof x === "string"));
    if (!ok) {
      return `Metadata value must be a string, number, boolean or list of strings, got '${JSON.stringify(value)}' for field '${key}'`;
    }
  }
  return undefined;
}

function dataPlane(index: FakePineconeIndex, req: MockRequest): MockReply {
  const url = new URL(req.path, "http://fake");
  const body = (req.body && typeof req.body === "object" ? req.body : {}) as Record<string, unknown>;
  const namespace = (body.namespace ?? url.searchParams.get("namespace") ?? "") as string;
  const ns = index.namespaces.get(namespace);
  const route = `${req.method} ${url.pathname}`;
  try {
    switch (route) {
      case "POST /vectors/upsert": {
        const vectors = body.vectors;
        if (!Array.isArray(vectors) || vectors.length === 0 || vectors.length > 1000) {
          return dataError(400, 3, "vectors must hold between 1 and 1000 records");
        }
        const staged: [string, StoredVector][] = [];
        for (const v of vectors as { id?: unknown; values?: unknown; metadata?: unknown }[]) {
          if (typeof v.id !== "string" || v.id.length === 0 || v.id.length > 512) {
            return dataError(400, 3, "Vector ID must be a non-empty string of at most 512 characters");
          }
          const values = v.values;
          if (!Array.isArray(values) || values.length !== index.dimension) {
            return dataError(
              400,
              3,
              `Vector dimension ${Array.isArray(values) ? values.length : 0} does not match the dimension of the index ${index.dimension}`,
            );
          }
          if (!values.some((x) => x !== 0)) {
            return dataError(400, 3, "Dense vectors must contain at least one non-zero value");
          }
          const bad = validMetadata(v.metadata);
          if (bad) return dataError(400, 3, bad);
          staged.push([
            v.id,
            { values: values.map(Math.fround), ...(v.metadata ? { metadata: v.metadata as Metadata } : {}) },
          ]);
        }
        const target = ns ?? new Map<string, StoredVector>();
        index.namespaces.set(namespace, target);
        for (const [id, v] of staged) target.set(id, v);
        return { body: { upsertedCount: staged.length } };
      }
      case "GET /vectors/fetch": {
        const ids = url.searchParams.getAll("ids");
        if (ids.length === 0 || ids.length > 1000)
          return dataError(400, 3, "ids must hold between 1 and 1000 ids");
        const vectors: Record<string, unknown> = {};
        for (const id of ids) {
          const v = ns?.get(id);
          if (v) vectors[id] = { id, values: v.values, ...(v.metadata ? { metadata: v.metadata } : {}) };
        }
        return { body: { vectors, namespace, usage: { readUnits: 1 } } };
      }
      case "POST /query": {
        const topK = body.topK;
        if (typeof topK !== "number" || !Number.isInteger(topK) || topK < 1 || topK > 10000) {
          return dataError(400, 3, "topK must be an integer between 1 and 10000");
        }
        if ((body.includeMetadata || body.includeValues) && topK > 1000) {
          return dataError(400, 3, "topK must be at most 1000 when including metadata or values");
        }
        const q = body.vector;
        if (!Array.isArray(q) || q.length !== index.dimension) {
          return dataError(
            400,
            3,
            `Vector dimension ${Array.isArray(q) ? q.length : 0} does not match the dimension of the index ${index.dimension}`,
          );
        }
        const filter = body.filter as Metadata | undefined;
        const ascending = index.metric === "euclidean";
        const scored = [...(ns ?? new Map<string, StoredVector>())]
          .filter(([, v]) => !filter || matches(v.metadata ?? {}, filter))
          .map(([id, v]) => ({ id, v, score: scoreOf(index.metric, q as number[], v.values) }))
          .sort((a, b) => (ascending ? a.score - b.score : b.score - a.score) || (a.id < b.id ? 1 : -1))
          .slice(0, topK);
        const matchesOut = scored.map(({ id, v, score }) => ({
          id,
          score,
          values: body.includeValues ? v.values : [],
          ...(body.includeMetadata && v.metadata ? { metadata: v.metadata } : {}),
        }));
        return { body: { results: [], matches: matchesOut, namespace, usage: { readUnits: 5 } } };
      }
      case "POST /vectors/delete": {
        if (!ns) return dataError(404, 5, "Namespace not found");
        if (body.deleteAll === true) index.namespaces.delete(namespace);
        else if (Array.isArray(body.ids)) {
          if (body.ids.length > 1000) return dataError(400, 3, "at most 1000 ids per delete");
          for (const id of body.ids) ns.delete(id as string);
        } else if (body.filter) {
          for (const [id, v] of ns) if (matches(v.metadata ?? {}, body.filter as Metadata)) ns.delete(id);
        } else return dataError(400, 3, "one of ids, filter or deleteAll is required");
        if (ns.size === 0) index.namespaces.delete(namespace);
        return { body: {} };
      }
      case "POST /describe_index_stats": {
        const namespaces: Record<string, { vectorCount: number }> = {};
        let total = 0;
        for (const [name, vectors] of index.namespaces) {
          namespaces[name] = { vectorCount: vectors.size };
          total += vectors.size;
        }
        return {
          body: {
            namespaces,
            dimension: index.dimension,
            indexFullness: 0,
            totalVectorCount: total,
            metric: index.metric,
            vectorType: "dense",
          },
        };
      }
      default:
        return dataError(404, 12, `no route for ${route}`);
    }
  } catch (err) {
    return dataError(400, 3, (err as Error).message);
  }
}

function indexModel(index: FakePineconeIndex): object {
  return {
    name: index.name,
    host: index.advertisedHost ?? index.host,
    dimension: index.dimension,
    metric: index.metric,
    vector_type: "dense",
    deletion_protection: "disabled",
    spec: { serverless: { cloud: "aws", region: "us-east-1" } },
    status: { ready: true, state: "Ready" },
    tags: null,
  };
}

/** Starts a fake Pinecone project with the given indexes and API key. */
export async function startFakePinecone(options: {
  apiKey: string;
  indexes: FakePineconeIndexSpec[];
}): Promise<FakePinecone> {
  const indexes = new Map<string, FakePineconeIndex>();
  for (const spec of options.indexes) {
    const index = { ...spec, namespaces: new Map() } as FakePineconeIndex;
    index.server = await startMockServer((req) =>
      req.headers["api-key"] === options.apiKey
        ? dataPlane(index, req)
        : { status: 401, headers: { "content-type": "text/plain" }, body: "Unauthorized: invalid Api-Key" },
    );
    index.host = index.server.url;
    indexes.set(spec.name, index);
  }
  const control = await startMockServer((req) => {
    if (req.headers["api-key"] !== options.apiKey) {
      return controlError(401, "UNAUTHENTICATED", "Invalid API Key");
    }
    const path = new URL(req.path, "http://fake").pathname;
    const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
    if (req.method === "GET" && parts.length === 1 && parts[0] === "indexes") {
      return { body: { indexes: [...indexes.values()].map(indexModel) } };
    }
    if (req.method === "GET" && parts.length === 2 && parts[0] === "indexes") {
      const index = indexes.get(parts[1] ?? "");
      if (!index) return controlError(404, "NOT_FOUND", `Resource ${parts[1]} not found`);
      return { body: indexModel(index) };
    }
    return controlError(404, "NOT_FOUND", `no route for ${req.method} ${path}`);
  });
  return {
    controllerUrl: control.url,
    control,
    indexes,
    upsertRequests: (name?: string) =>
      [...indexes.values()]
        .filter((index) => name === undefined || index.name === name)
        .reduce(
          (n, index) =>
            n +
            index.server.requests.filter((r) => r.method === "POST" && r.path === "/vectors/upsert").length,
          0,
        ),
    close: async () => {
      await control.close();
      for (const index of indexes.values()) await index.server.close();
    },
  };
}
