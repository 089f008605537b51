/**
 * A local stand-in for a Qdrant server: the subset of the REST API
 * (https://api.qdrant.tech, v1.x) that `@qdrant/js-client-rest` sends for
 * `QdrantVectorStore`, over real HTTP on 127.0.0.1 (built on
 * {@link startMockServer}).
 *
 * Implemented: `GET /` (version), `GET /collections`, `GET|PUT|DELETE
 * /collections/{name}`, `GET /collections/{name}/exists`, `PUT
 * /collections/{name}/points` (upsert), `POST /collections/{name}/points`
 * (retrieve), `POST …/points/delete`, `POST …/points/count`, `POST
 * …/points/query` (nearest neighbours of a dense vector, brute force).
 *
 * Behaviour follows the documentation: responses are `{ result, status: "ok",
 * time }`, errors `{ status: { error }, time }` with 400/401/404/409; point ids
 * must be unsigned integers or UUIDs; `Cosine` collections normalise vectors
 * on upload and score by cosine similarity, `Dot` by inner product, `Euclid`
 * by L2 distance (ascending); `score_threshold` is a minimum score for Cosine
 * and Dot and a maximum distance for Euclid; filters support `must`,
 * `must_not` and `should` (nested too) with `match: { value | any }` (any element of an
 * array payload), `range` and `is_empty`. Ties are
 * returned in point-id order, which is not the store's id order.
 */
import { type MockReply, type MockRequest, type MockServer, startMockServer } from "../rerank-fixtures.js";

/** Version the fake reports. */
export const FAKE_QDRANT_VERSION = "1.16.0";

type Distance = "Cosine" | "Euclid" | "Dot";
type Json = Record<string, unknown>;

interface Point {
  id: string | number;
  vector: Float32Array;
  payload: Json;
}

/** A collection held by the fake. */
export interface FakeQdrantCollection {
  size: number;
  distance: Distance;
  /** Points by canonical id (lower-case UUID or decimal integer). */
  points: Map<string, Point>;
}

/** A running fake Qdrant server. */
export interface FakeQdrant {
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** The underlying server: request log and scripted replies. */
  server: MockServer;
  collections: Map<string, FakeQdrantCollection>;
  /** Number of upsert requests received for a collection (all collections if omitted). */
  upsertRequests(collection?: string): number;
  close(): Promise<void>;
}

const UUID = /^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$/i;
const FORBIDDEN_NAME = /[<>:"/\\|?*\0]/;

const ok = (result: unknown): MockReply => ({ body: { result, status: "ok", time: 0.0001 } });
const fail = (status: number, error: string): MockReply => ({
  status,
  body: { status: { error }, time: 0.0001 },
});

/** Canonical key of a point id, or undefined when Qdrant would reject it. */
function pointKey(id: unknown): string | undefined {
  if (typeof id === "number" && Number.isSafeInteger(id) && id >= 0) return String(id);
  if (typeof id === "string" && UUID.test(id)) {
    const hex = id.replace(/-/g, "").toLowerCase();
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  }
  return undefined;
}

function norm(v: Float32Array): Float32Array {
  let s = 0;
  for (const x of v) s += x * x;
  const n = Math.sqrt(s);
  return n > 0 ? v.map((x) => x / n) : v;
}

function score(distance: Distance, q: Float32Array, v: Float32Array): number {
  let s = 0;
  if (distance === "Euclid") {
    for (let i = 0; i < q.length; i++) s += ((q[i] ?? 0) - (v[i] ?? 0)) ** 2;
    return Math.fround(Math.sqrt(s));
  }
  for (let i = 0; i < q.length; i++) s += (q[i] ?? 0) * (v[i] ?? 0);
  return Math.fround(s);
}

/** Whether a payload satisfies one condition. */
function condition(payload: Json, c: Json): boolean {
  if ("must" in c || "should" in c || "must_not" in c) return matches(payload, c);
  const empty = c.is_empty as Json | undefined;
  if (empty) {
    // Qdrant: the field is absent, null or an empty array.
    const value = payload[empty.key as string];
    return value === undefined || value === null || (Array.isArray(value) && value.length === 0);
  }
  const key = c.key;
  if (typeof key !== "string") throw new Error("condition without key");
  const value = payload[key];
  const match = c.match as Json | undefined;
  if (match) {
    // Qdrant matches an array payload when any element matches.
    const values = Array.isArray(value) ? value : [value];
    if ("value" in match) return values.some((x) => x === match.value);
    if (Array.isArray(match.any)) return values.some((x) => (match.any as unknown[]).includes(x));
    throw new Error(`unsupported match ${JSON.stringify(match)}`);
  }
  const range = c.range as Record<string, number> | undefined;
  if (range) {
    if (typeof value !== "number") return false;
    return (
      (range.gte === undefined || value >= range.gte) &&
      (range.gt === undefined || value > range.gt) &&
      (range.lte === undefined || value <= range.lte) &&
      (range.lt === undefined || value < range.lt)
    );
  }
  throw new Error(`unsupported condition ${JSON.stringify(c)}`);
}

/** Whether a payload satisfies a Qdrant filter. */
function matches(payload: Json, filter: Json | undefined | null): boolean {
  if (!filter) return true;
  const list = (x: unknown): Json[] => (Array.isArray(x) ? x : x ? [x] : []) as Json[];
  if (!list(filter.must).every((c) => condition(payload, c))) return false;
  if (list(filter.must_not).some((c) => condition(payload, c))) return false;
  const should = list(filter.should);
  return should.length === 0 || should.some((c) => condition(payload, c));
}

function vectorOf(raw: unknown, size: number): Float32Array | string {
  if (!Array.isArray(raw) || !raw.every((x) => typeof x === "number"))
    return "Wrong input: vector must be a list of numbers";
  if (raw.length !== size)
    return `Wrong input: Vector dimension error: expected dim: ${size}, got ${raw.length}`;
  return Float32Array.from(raw);
}

function withParts(point: Point, body: Json): Json {
  const out: Json = { id: point.id };
  if (body.with_payload !== false) out.payload = point.payload;
  if (body.with_vector === true) out.vector = Array.from(point.vector);
  return out;
}

/** Starts a fake Qdrant server; requests must carry `api-key: <apiKey>` when one is given. */
export async function startFakeQdrant(options: { apiKey?: string } = {}): Promise<FakeQdrant> {
  const collections = new Map<string, FakeQdrantCollection>();

  const respond = (req: MockRequest): MockReply => {
    if (options.apiKey !== undefined && req.headers["api-key"] !== options.apiKey) {
      return fail(401, "Unauthorized: invalid API key");
    }
    const url = new URL(req.path, "http://fake");
    const parts = url.pathname.split("/").filter(Boolean).map(decodeURIComponent);
    const body = (req.body && typeof req.body === "object" ? req.body : {}) as Json;
    try {
      if (parts.length === 0 && req.method === "GET") {
        return { body: { title: "qdrant - vector search engine (fake)", version: FAKE_QDRANT_VERSION } };
      }
      if (parts[0] !== "collections") return fail(404, `Not found: ${url.pathname}`);
      if (parts.length === 1 && req.method === "GET") {
        return ok({ collections: [...collections.keys()].map((name) => ({ name })) });
      }
      const name = parts[1] ?? "";
      const collection = collections.get(name);
      const rest = parts.slice(2).join("/");
      const missing = () => fail(404, `Not found: Collection \`${name}\` doesn't exist!`);

      if (rest === "" && req.method === "PUT") {
        if (!name || name.length > 255 || FORBIDDEN_NAME.test(name)) {
          return fail(
            400,
            `Validation error in path parameters: [name: collection name "${name}" is invalid]`,
          );
        }
        if (collection) return fail(409, `Wrong input: Collection \`${name}\` already exists!`);
        const vectors = body.vectors as { size?: unknown; distance?: unknown } | undefined;
        if (
          typeof vectors?.size !== "number" ||
          !Number.isInteger(vectors.size) ||
          vectors.size < 1 ||
          !["Cosine", "Euclid", "Dot"].includes(vectors.distance as string)
        ) {
          return fail(400, "Format error in JSON body: vectors: expected { size, distance }");
        }
        collections.set(name, {
          size: vectors.size,
          distance: vectors.distance as Distance,
          points: new Map(),
        });
        return ok(true);
      }
      if (rest === "" && req.method === "DELETE") return ok(collections.delete(name));
      if (rest === "exists" && req.method === "GET") return ok({ exists: collection !== undefined });
      if (!collection) return missing();

      if (rest === "" && req.method === "GET") {
        return ok({
          status: "green",
          optimizer_status: "ok",
          indexed_vectors_count: 0,
          points_count: collection.points.size,
          segments_count: 1,
          config: {
            params: {
              vectors: { size: collection.size, distance: collection.distance },
              shard_number: 1,
              replication_factor: 1,
              write_consistency_factor: 1,
              on_disk_payload: true,
            },
            hnsw_config: { m: 16, ef_construct: 100, full_scan_threshold: 10000 },
            optimizer_config: { deleted_threshold: 0.2, vacuum_min_vector_number: 1000 },
            wal_config: { wal_capacity_mb: 32, wal_segments_ahead: 0 },
          },
          payload_schema: {},
        });
      }
      if (rest === "points" && req.method === "PUT") {
        if (!Array.isArray(body.points))
          return fail(400, "Format error in JSON body: missing field `points`");
        const staged: [string, Point][] = [];
        for (const p of body.points as Json[]) {
          const key = pointKey(p.id);
          if (key === undefined) {
            return fail(
              400,
              `Format error in JSON body: value ${JSON.stringify(p.id)} is not a valid point ID, valid values are either an unsigned integer or a UUID`,
            );
          }
          const vector = vectorOf(p.vector, collection.size);
          if (typeof vector === "string") return fail(400, vector);
          const payload = (p.payload ?? {}) as Json;
          staged.push([
            key,
            {
              id: p.id as string | number,
              vector: collection.distance === "Cosine" ? norm(vector) : vector,
              payload,
            },
          ]);
        }
        for (const [key, point] of staged) collection.points.set(key, point);
        return ok({
          operation_id: 1,
          status: url.searchParams.get("wait") === "true" ? "completed" : "acknowledged",
        });
      }
      if (rest === "points" && req.method === "POST") {
        if (!Array.isArray(body.ids)) return fail(400, "Format error in JSON body: missing field `ids`");
        const out: Json[] = [];
        for (const id of body.ids) {
          const key = pointKey(id);
          if (key === undefined)
            return fail(400, `Format error in JSON body: invalid point ID ${JSON.stringify(id)}`);
          const point = collection.points.get(key);
          if (point) out.push(withParts(point, body));
        }
        return ok(out);
      }
      if (rest === "points/delete" && req.method === "POST") {
        if (Array.isArray(body.points)) {
          for (const id of body.points) {
            const key = pointKey(id);
            if (key !== undefined) collection.points.delete(key);
          }
        } else if (body.filter) {
          for (const [key, point] of collection.points) {
            if (matches(point.payload, body.filter as Json)) collection.points.delete(key);
          }
        } else return fail(400, "Format error in JSON body: expected `points` or `filter`");
        return ok({ operation_id: 2, status: "completed" });
      }
      if (rest === "points/count" && req.method === "POST") {
        let count = 0;
        for (const point of collection.points.values()) {
          if (matches(point.payload, body.filter as Json | undefined)) count++;
        }
        return ok({ count });
      }
      if (rest === "points/query" && req.method === "POST") {
        let q = vectorOf(body.query, collection.size);
        if (typeof q === "string") return fail(400, q);
        if (collection.distance === "Cosine") q = norm(q);
        const limit = typeof body.limit === "number" ? body.limit : 10;
        const threshold = typeof body.score_threshold === "number" ? body.score_threshold : undefined;
        const ascending = collection.distance === "Euclid";
        const scored: { key: string; point: Point; score: number }[] = [];
        for (const [key, point] of collection.points) {
          if (!matches(point.payload, body.filter as Json | undefined)) continue;
          const s = score(collection.distance, q, point.vector);
          if (threshold !== undefined && (ascending ? s > threshold : s < threshold)) continue;
          scored.push({ key, point, score: s });
        }
        scored.sort(
          (a, b) => (ascending ? a.score - b.score : b.score - a.score) || (a.key < b.key ? -1 : 1),
        );
        const points = scored
          .slice(0, limit)
          .map(({ point, score: s }) => ({ ...withParts(point, body), version: 1, score: s }));
        return ok({ points });
      }
      return fail(404, `Not found: ${req.method} ${url.pathname}`);
    } catch (err) {
      return fail(400, `Wrong input: ${(err as Error).message}`);
    }
  };

  const server = await startMockServer(respond);
  return {
    url: server.url,
    server,
    collections,
    upsertRequests: (collection?: string) =>
      server.requests.filter(
        (r) =>
          r.method === "PUT" &&
          /^\/collections\/[^/]+\/points(\?|$)/.test(r.path) &&
          (collection === undefined ||
            r.path.startsWith(`/collections/${encodeURIComponent(collection)}/points`)),
      ).length,
    close: () => server.close(),
  };
}
