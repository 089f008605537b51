/**
 * PostgreSQL + pgvector implementation of the {@link VectorStore} contract.
 *
 * Layout, all inside one schema (default `kl`):
 * - `schema_migrations(version, applied_at)`: the store's own migrations, applied by
 *   {@link PgVectorStore.connect} under an advisory lock.
 * - `collections(name, dimension, metric, table_name, created_at)`: the registry.
 * - one table per collection, `c_<slug>_<hash>` (a safe identifier derived from the
 *   collection name, which may be any string): `id text PRIMARY KEY`,
 *   `embedding vector(dimension)`, `payload jsonb`, with an HNSW index using the
 *   metric's operator class and a GIN index on the payload for filters.
 */
import { createHash } from "node:crypto";
import pg from "pg";
import { KnowledgeLayerError } from "../errors.js";
import { checkStoreFilter, type FilterNode, parseFilter } from "../retrieve/filter.js";
import {
  type CollectionInfo,
  METRICS,
  type Metric,
  type Payload,
  type VectorHit,
  type VectorRecord,
  type VectorSearchOptions,
  type VectorStore,
} from "./contract.js";

/** HNSW index parameters (see the pgvector documentation). */
export interface PgVectorHnswOptions {
  /** Max connections per layer when building the index (pgvector default 16). */
  m?: number;
  /** Candidate list size while building the index (pgvector default 64). */
  efConstruction?: number;
  /**
   * Candidate list size while searching (`hnsw.ef_search`, 1–1000; default 100). Each
   * search uses at least `min(topK, 1000)`, so a search can return up to topK hits.
   */
  efSearch?: number;
}

/** Options of {@link PgVectorStore}. */
export interface PgVectorStoreOptions {
  /** Connection string, e.g. `postgres://user:pass@host:5432/db`. */
  url: string;
  /** Schema holding the registry and the collection tables (created when absent). Default `kl`. */
  schema?: string;
  /** Maximum number of pooled connections. Default 4. */
  poolSize?: number;
  /** HNSW index and search parameters. */
  hnsw?: PgVectorHnswOptions;
  /** Milliseconds to wait for a connection before failing. Default 10 000. */
  connectTimeoutMs?: number;
}

/** Rows per INSERT/UPDATE statement (the contract's batch limit). */
const BATCH = 100;
/** pgvector cannot index `vector` columns with more dimensions than this; larger ones are searched exactly. */
const HNSW_MAX_DIMENSION = 2000;
/** Maximum dimension of a pgvector `vector` column. */
const MAX_DIMENSION = 16000;
/** Advisory-lock key (first int4) for the store's migrations and collection DDL. */
const LOCK_NAMESPACE = 0x6b6c7067; // "klpg"

const METRIC_SQL: Record<Metric, { operator: string; opclass: string }> = {
  cosine: { operator: "<=>", opclass: "vector_cosine_ops" },
  euclidean: { operator: "<->", opclass: "vector_l2_ops" },
  dot: { operator: "<#>", opclass: "vector_ip_ops" },
};

/** Score under the contract from pgvector's distance: cosine 1 − d, euclidean −d, dot −d (`<#>` is −inner product). */
function scoreOf(metric: Metric, distance: number): number {
  return metric === "cosine" ? 1 - distance : -distance;
}

interface Collection {
  name: string;
  dimension: number;
  metric: Metric;
  table: string;
}

type Queryable = Pick<pg.PoolClient, "query">;

/** Double-quotes an SQL identifier (any string, quotes doubled). */
export function quoteIdent(name: string): string {
  if (name.length === 0 || name.includes("\0"))
    throw new KnowledgeLayerError(`invalid SQL identifier "${name}"`);
  return `"${name.replaceAll('"', '""')}"`;
}

/**
 * Table name of a collection: `c_` + a lowercase slug of the name (at most 40
 * characters of [a-z0-9_]) + `_` + 12 hex digits of its SHA-256, so distinct names
 * never share a table and the name stays under PostgreSQL's 63-byte limit with the
 * index suffixes.
 */
export function collectionTableName(name: string): string {
  const slug = name
    .toLowerCase()
    .replace(/[^a-z0-9_]+/g, "_")
    .replace(/^_+|_+$/g, "")
    .slice(0, 40);
  const hash = createHash("sha256").update(name, "utf8").digest("hex").slice(0, 12);
  return slug ? `c_${slug}_${hash}` : `c_${hash}`;
}

/** `[x1,x2,…]`, pgvector's text form; float32 values print exactly. */
function vectorLiteral(vector: Float32Array): string {
  return `[${vector.join(",")}]`;
}

function parseVector(text: string): Float32Array {
  return Float32Array.from(JSON.parse(text) as number[]);
}

/** `host:port` of a connection string, without credentials, for messages. */
function describeTarget(url: string): string {
  try {
    const parsed = new URL(url);
    const host = parsed.searchParams.get("host") || parsed.hostname || "localhost";
    const port = parsed.searchParams.get("port") || parsed.port || "5432";
    const db = decodeURIComponent(parsed.pathname.replace(/^\//, "")) || "(default database)";
    return `${host}:${port}/${db}`;
  } catch {
    return "(unparseable connection string)";
  }
}

function errorText(error: unknown): string {
  if (error instanceof AggregateError && error.errors.length > 0) {
    return error.errors.map(errorText).join("; ");
  }
  if (error instanceof Error) {
    const code = (error as { code?: string }).code;
    if (error.message) return error.message;
    if (code) return code;
  }
  return String(error);
}

function sqlState(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | undefined)?.code;
  return typeof code === "string" ? code : undefined;
}

/** Compares `major.minor.patch` version strings. */
function versionAtLeast(version: string, wanted: string): boolean {
  const a = version.split(".").map((x) => Number.parseInt(x, 10) || 0);
  const b = wanted.split(".").map((x) => Number.parseInt(x, 10) || 0);
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return d > 0;
  }
  return true;
}

/**
 * A vector store in PostgreSQL with the pgvector extension: one table per
 * collection, approximate nearest-neighbour search through an HNSW index (exact for
 * collections of more than 2000 dimensions, which pgvector cannot index).
 *
 * Scores follow the contract: cosine = 1 − (a <=> b), euclidean = −(a <-> b),
 * dot = −(a <#> b). Payload filters use JSONB containment (`payload @> …`), so string,
 * number and boolean equality can use the GIN index. With pgvector ≥ 0.8 searches use
 * `hnsw.iterative_scan = relaxed_order`, so filtered searches and large topK still
 * return every match (up to `hnsw.max_scan_tuples`, 20 000 by default); with older
 * pgvector a search returns at most `hnsw.ef_search` (≤ 1000) candidates before filtering.
 *
 * Errors are `KnowledgeLayerError`s naming the collection (and the record id for a bad
 * record); connection failures name the host and port, never the password. Any method
 * connects first if {@link connect} was not called.
 */
export class PgVectorStore implements VectorStore {
  readonly kind = "pgvector";
  private readonly schema: string;
  private readonly schemaSql: string;
  private pool: pg.Pool | undefined;
  private connecting: Promise<void> | undefined;
  /** Quoted schema of the vector extension, to qualify its type and operators. */
  private ext = '"public"';
  private iterativeScan = false;

  /**
   * @throws KnowledgeLayerError for an empty schema name, a non-positive pool size or
   * out-of-range HNSW parameters. Nothing is connected until {@link connect}.
   */
  constructor(private readonly options: PgVectorStoreOptions) {
    this.schema = options.schema ?? "kl";
    if (!this.schema || Buffer.byteLength(this.schema, "utf8") > 63) {
      throw new KnowledgeLayerError(`pgvector schema name must be 1–63 bytes (got "${this.schema}")`);
    }
    this.schemaSql = quoteIdent(this.schema);
    const { poolSize, hnsw } = options;
    if (poolSize !== undefined && (!Number.isInteger(poolSize) || poolSize < 1)) {
      throw new KnowledgeLayerError(`pgvector poolSize must be a positive integer (got ${poolSize})`);
    }
    const checkRange = (name: string, value: number | undefined, min: number, max: number) => {
      if (value !== undefined && (!Number.isInteger(value) || value < min || value > max)) {
        throw new KnowledgeLayerError(
          `pgvector hnsw.${name} must be an integer in ${min}–${max} (got ${value})`,
        );
      }
    };
    checkRange("m", hnsw?.m, 2, 100);
    checkRange("efConstruction", hnsw?.efConstruction, 4, 1000);
    checkRange("efSearch", hnsw?.efSearch, 1, 1000);
  }

  /**
   * Opens the connection pool, creates the `vector` extension if missing, the schema
   * and the registry (running pending migrations). Idempotent; concurrent calls share
   * one attempt, and a failed attempt can be retried.
   * @throws KnowledgeLayerError naming host and port when the server cannot be reached,
   * or explaining that pgvector is not installed or may not be created.
   */
  async connect(): Promise<void> {
    if (this.pool) return;
    this.connecting ??= this.open().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  private async open(): Promise<void> {
    const target = describeTarget(this.options.url);
    const pool = new pg.Pool({
      connectionString: this.options.url,
      max: this.options.poolSize ?? 4,
      connectionTimeoutMillis: this.options.connectTimeoutMs ?? 10_000,
    });
    // An idle connection dropped by the server must not crash the process; the next query reconnects.
    pool.on("error", () => {});
    let client: pg.PoolClient;
    try {
      client = await pool.connect();
    } catch (error) {
      await pool.end().catch(() => {});
      throw new KnowledgeLayerError(
        `pgvector store: cannot connect to PostgreSQL at ${target}: ${errorText(error)}`,
        {
          cause: error,
        },
      );
    }
    const ignore = (): void => {};
    client.on("error", ignore);
    try {
      await this.migrate(client, target);
    } catch (error) {
      client.off("error", ignore);
      client.release(true);
      await pool.end().catch(() => {});
      if (error instanceof KnowledgeLayerError) throw error;
      throw new KnowledgeLayerError(
        `pgvector store: preparing schema "${this.schema}" at ${target} failed: ${errorText(error)}`,
        { cause: error },
      );
    }
    client.off("error", ignore);
    client.release();
    this.pool = pool;
  }

  /** Creates the extension, the schema and the registry tables, under an advisory lock. */
  private async migrate(client: pg.PoolClient, target: string): Promise<void> {
    await client.query("BEGIN");
    try {
      await client.query("SELECT pg_advisory_xact_lock($1, 0)", [LOCK_NAMESPACE]);
      const existing = await client.query("SELECT 1 FROM pg_extension WHERE extname = 'vector'");
      if (existing.rowCount === 0) {
        try {
          await client.query("CREATE EXTENSION IF NOT EXISTS vector");
        } catch (error) {
          const state = sqlState(error);
          const hint =
            state === "58P01" || state === "0A000"
              ? "the pgvector extension is not installed on the server (install postgresql-NN-pgvector)"
              : state === "42501"
                ? "this user may not create the vector extension (ask an administrator to run CREATE EXTENSION vector)"
                : "CREATE EXTENSION vector failed";
          throw new KnowledgeLayerError(`pgvector store at ${target}: ${hint}: ${errorText(error)}`, {
            cause: error,
          });
        }
      }
      const ext = await client.query<{ schema: string; version: string }>(
        `SELECT n.nspname AS schema, e.extversion AS version
           FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
          WHERE e.extname = 'vector'`,
      );
      const row = ext.rows[0];
      if (!row) throw new KnowledgeLayerError(`pgvector store at ${target}: the vector extension is missing`);
      this.ext = quoteIdent(row.schema);
      this.iterativeScan = versionAtLeast(row.version, "0.8.0");
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${this.schemaSql}`);
      await client.query(
        `CREATE TABLE IF NOT EXISTS ${this.schemaSql}.schema_migrations (
           version integer PRIMARY KEY,
           applied_at timestamptz NOT NULL DEFAULT now()
         )`,
      );
      const applied = await client.query<{ version: number }>(
        `SELECT COALESCE(max(version), 0) AS version FROM ${this.schemaSql}.schema_migrations`,
      );
      const current = applied.rows[0]?.version ?? 0;
      for (const [index, statement] of this.migrations().entries()) {
        const version = index + 1;
        if (version <= current) continue;
        await client.query(statement);
        await client.query(`INSERT INTO ${this.schemaSql}.schema_migrations (version) VALUES ($1)`, [
          version,
        ]);
      }
      await client.query("COMMIT");
    } catch (error) {
      await client.query("ROLLBACK").catch(() => {});
      throw error;
    }
  }

  /** The store's migrations, in order; version = index + 1. Append only. */
  private migrations(): string[] {
    return [
      `CREATE TABLE ${this.schemaSql}.collections (
         name text PRIMARY KEY,
         dimension integer NOT NULL CHECK (dimension > 0),
         metric text NOT NULL CHECK (metric IN ('cosine', 'euclidean', 'dot')),
         table_name text NOT NULL UNIQUE,
         created_at timestamptz NOT NULL DEFAULT now()
       )`,
    ];
  }

  /** Ends the connection pool. Idempotent; the store can be connected again. */
  async close(): Promise<void> {
    if (this.connecting) await this.connecting.catch(() => {});
    const pool = this.pool;
    this.pool = undefined;
    if (pool) await pool.end();
  }

  /**
   * Creates the collection's table and indexes if absent.
   * @throws KnowledgeLayerError for a bad dimension (1–16000) or metric, or when the
   * collection exists with another dimension or metric.
   */
  async createCollection(name: string, dimension: number, metric: Metric): Promise<void> {
    if (name.length === 0 || name.includes("\0")) {
      throw new KnowledgeLayerError(`collection name must be a non-empty string without NUL characters`);
    }
    if (!Number.isInteger(dimension) || dimension <= 0 || dimension > MAX_DIMENSION) {
      throw new KnowledgeLayerError(
        `collection "${name}": dimension must be an integer in 1–${MAX_DIMENSION} (got ${dimension})`,
      );
    }
    if (!METRICS.includes(metric)) {
      throw new KnowledgeLayerError(
        `collection "${name}": unknown metric "${metric}" (use ${METRICS.join(", ")})`,
      );
    }
    await this.transaction(name, "create", async (client) => {
      await this.lockCollection(client, name);
      const existing = await this.lookup(client, name);
      if (existing) {
        if (existing.dimension !== dimension || existing.metric !== metric) {
          throw new KnowledgeLayerError(
            `collection "${name}" exists with dimension ${existing.dimension}/${existing.metric}, not ${dimension}/${metric}`,
          );
        }
        return;
      }
      const table = collectionTableName(name);
      const tableSql = this.table(table);
      const { m = 16, efConstruction = 64 } = this.options.hnsw ?? {};
      await client.query(
        `CREATE TABLE ${tableSql} (
           id text PRIMARY KEY,
           embedding ${this.ext}.vector(${dimension}) NOT NULL,
           payload jsonb NOT NULL DEFAULT '{}'::jsonb
         )`,
      );
      if (dimension <= HNSW_MAX_DIMENSION) {
        await client.query(
          `CREATE INDEX ${quoteIdent(`${table}_hnsw`)} ON ${tableSql}
             USING hnsw (embedding ${this.ext}.${METRIC_SQL[metric].opclass})
             WITH (m = ${m}, ef_construction = ${efConstruction})`,
        );
      }
      await client.query(
        `CREATE INDEX ${quoteIdent(`${table}_payload`)} ON ${tableSql} USING gin (payload jsonb_path_ops)`,
      );
      await client.query(
        `INSERT INTO ${this.schemaSql}.collections (name, dimension, metric, table_name) VALUES ($1, $2, $3, $4)`,
        [name, dimension, metric, table],
      );
    });
  }

  /** Drops the collection's table and registry entry; a missing collection is not an error. */
  async dropCollection(name: string): Promise<void> {
    await this.transaction(name, "drop", async (client) => {
      await this.lockCollection(client, name);
      const existing = await this.lookup(client, name);
      if (!existing) return;
      await client.query(`DROP TABLE IF EXISTS ${this.table(existing.table)}`);
      await client.query(`DELETE FROM ${this.schemaSql}.collections WHERE name = $1`, [name]);
    });
  }

  /**
   * Inserts or replaces records, at most 100 rows per statement, all in one
   * transaction. Every record is checked first, so nothing is written when one is bad.
   * When an id occurs twice in `records`, the later one wins.
   * @throws KnowledgeLayerError for a missing collection, or naming the record whose
   * id is empty or whose vector has the wrong dimension or a non-finite value.
   */
  async addBatch(collection: string, records: VectorRecord[]): Promise<void> {
    await this.transaction(collection, "add", async (client) => {
      const info = await this.require(client, collection);
      const rows = this.checkRecords(info, records);
      if (rows.length === 0) return;
      const tableSql = this.table(info.table);
      for (let start = 0; start < rows.length; start += BATCH) {
        const { params, values } = this.rowValues(rows.slice(start, start + BATCH));
        await client.query(
          `INSERT INTO ${tableSql} (id, embedding, payload) VALUES ${values.join(", ")}
           ON CONFLICT (id) DO UPDATE SET embedding = EXCLUDED.embedding, payload = EXCLUDED.payload`,
          params,
        );
      }
    });
  }

  /**
   * Nearest neighbours of `vector`, best first, ties by id. Filters are payload
   * equalities (all must match); hits scoring below `scoreThreshold` are dropped.
   * Runs in a transaction that sets `hnsw.ef_search` to max(configured, min(topK, 1000))
   * and, with pgvector ≥ 0.8, `hnsw.iterative_scan = relaxed_order` (the hits are
   * re-sorted exactly).
   * @throws KnowledgeLayerError for a missing collection or a query of the wrong dimension.
   */
  async search(collection: string, vector: Float32Array, options: VectorSearchOptions): Promise<VectorHit[]> {
    const topK = Math.floor(options.topK);
    if (Number.isNaN(topK)) {
      throw new KnowledgeLayerError(
        `collection "${collection}": topK must be a number (got ${options.topK})`,
      );
    }
    return this.transaction(collection, "search", async (client) => {
      const efSearch = Math.min(1000, Math.max(this.options.hnsw?.efSearch ?? 100, Math.min(topK, 1000)));
      const settings = [`set_config('hnsw.ef_search', $2, true)`];
      if (this.iterativeScan) settings.push(`set_config('hnsw.iterative_scan', 'relaxed_order', true)`);
      const found = await client.query<{ dimension: number; metric: Metric; table_name: string }>(
        `SELECT dimension, metric, table_name, ${settings.join(", ")}
           FROM ${this.schemaSql}.collections WHERE name = $1`,
        [collection, String(efSearch)],
      );
      const row = found.rows[0];
      if (!row) throw new KnowledgeLayerError(`vector collection "${collection}" does not exist`);
      if (vector.length !== row.dimension) {
        throw new KnowledgeLayerError(
          `query vector has dimension ${vector.length}, collection "${collection}" expects ${row.dimension}`,
        );
      }
      if (topK <= 0) return [];
      this.checkFinite(collection, "query vector", vector);
      const metric = row.metric;
      const operator = `OPERATOR(${this.ext}.${METRIC_SQL[metric].operator})`;
      const params: unknown[] = [vectorLiteral(vector)];
      let where = "";
      if (options.filter) {
        const node = parseFilter(options.filter);
        checkStoreFilter(node, "pgvector", PG_FILTER_SUPPORT);
        where = `WHERE ${pgFilterSql(node, (value) => {
          params.push(value);
          return `$${params.length}`;
        })}`;
      }
      params.push(Number.isFinite(topK) ? topK : null);
      const result = await client.query<{ id: string; payload: Payload; distance: number }>(
        `WITH hits AS MATERIALIZED (
           SELECT id, payload, embedding ${operator} $1::${this.ext}.vector AS distance
             FROM ${this.table(row.table_name)}
             ${where}
            ORDER BY embedding ${operator} $1::${this.ext}.vector
            LIMIT $${params.length}
         )
         SELECT id, payload, distance FROM hits ORDER BY distance ASC, id ASC`,
        params,
      );
      const threshold = options.scoreThreshold;
      const hits: VectorHit[] = [];
      for (const hit of result.rows) {
        const score = scoreOf(metric, hit.distance);
        if (threshold !== undefined && score < threshold) continue;
        hits.push({ id: hit.id, score, payload: hit.payload });
      }
      return hits;
    });
  }

  /**
   * The stored records with these ids, in the order given (an id given twice comes
   * back twice); ids not stored are left out.
   * @throws KnowledgeLayerError for a missing collection.
   */
  async get(collection: string, ids: string[]): Promise<VectorRecord[]> {
    return this.withClient(collection, "get", async (client) => {
      const info = await this.require(client, collection);
      if (ids.length === 0) return [];
      const result = await client.query<{ id: string; embedding: string; payload: Payload }>(
        `SELECT id, embedding::text AS embedding, payload FROM ${this.table(info.table)} WHERE id = ANY($1::text[])`,
        [[...new Set(ids)]],
      );
      const byId = new Map(result.rows.map((row) => [row.id, row]));
      const out: VectorRecord[] = [];
      for (const id of ids) {
        const row = byId.get(id);
        if (row) out.push({ id, vector: parseVector(row.embedding), payload: row.payload });
      }
      return out;
    });
  }

  /**
   * Deletes records by id; unknown ids are ignored.
   * @throws KnowledgeLayerError for a missing collection.
   */
  async delete(collection: string, ids: string[]): Promise<void> {
    await this.withClient(collection, "delete", async (client) => {
      const info = await this.require(client, collection);
      if (ids.length === 0) return;
      await client.query(`DELETE FROM ${this.table(info.table)} WHERE id = ANY($1::text[])`, [ids]);
    });
  }

  /**
   * Replaces the vector and payload of existing records, in one transaction.
   * @throws KnowledgeLayerError naming the collection and the first id that is not
   * stored (nothing is changed then), or a record of the wrong dimension.
   */
  async update(collection: string, records: VectorRecord[]): Promise<void> {
    await this.transaction(collection, "update", async (client) => {
      const info = await this.require(client, collection);
      const rows = this.checkRecords(info, records);
      if (rows.length === 0) return;
      const tableSql = this.table(info.table);
      const ids = rows.map((record) => record.id);
      const present = await client.query<{ id: string }>(
        `SELECT id FROM ${tableSql} WHERE id = ANY($1::text[]) FOR UPDATE`,
        [ids],
      );
      const stored = new Set(present.rows.map((row) => row.id));
      const missing = ids.filter((id) => !stored.has(id));
      if (missing.length > 0) {
        const more = missing.length > 1 ? ` (and ${missing.length - 1} more)` : "";
        throw new KnowledgeLayerError(
          `collection "${collection}" has no record "${missing[0]}" to update${more}`,
        );
      }
      for (let start = 0; start < rows.length; start += BATCH) {
        const { params, values } = this.rowValues(rows.slice(start, start + BATCH));
        await client.query(
          `UPDATE ${tableSql} AS t SET embedding = v.embedding, payload = v.payload
             FROM (VALUES ${values.join(", ")}) AS v(id, embedding, payload)
            WHERE t.id = v.id`,
          params,
        );
      }
    });
  }

  /** Describes a collection (with its record count), or `undefined` if it does not exist. */
  async info(collection: string): Promise<CollectionInfo | undefined> {
    return this.withClient(collection, "info", async (client) => {
      const info = await this.lookup(client, collection);
      if (!info) return undefined;
      const result = await client.query<{ count: string }>(
        `SELECT count(*) AS count FROM ${this.table(info.table)}`,
      );
      return {
        name: info.name,
        dimension: info.dimension,
        metric: info.metric,
        count: Number(result.rows[0]?.count ?? 0),
      };
    });
  }

  /** True when the store is connected and the server answers `SELECT 1` within 5 s. Never throws. */
  async health(): Promise<boolean> {
    const pool = this.pool;
    if (!pool) return false;
    try {
      const answer = pool.query("SELECT 1 AS ok");
      const timeout = new Promise<never>((_, reject) => {
        setTimeout(() => reject(new Error("timeout")), 5000).unref();
      });
      const result = await Promise.race([answer, timeout]);
      answer.catch(() => {});
      return result.rows[0]?.ok === 1;
    } catch {
      return false;
    }
  }

  // ---- internals ----

  /**
   * Parameters and `($1, $2::vector, $3::jsonb)` tuples of a batch of checked rows,
   * for a multi-row INSERT or UPDATE … FROM (VALUES …).
   */
  private rowValues(rows: readonly VectorRecord[]): { params: unknown[]; values: string[] } {
    const params: unknown[] = [];
    const values = rows.map((record) => {
      params.push(record.id, vectorLiteral(record.vector), JSON.stringify(record.payload));
      const n = params.length;
      return `($${n - 2}, $${n - 1}::${this.ext}.vector, $${n}::jsonb)`;
    });
    return { params, values };
  }

  private table(table: string): string {
    return `${this.schemaSql}.${quoteIdent(table)}`;
  }

  /** Serialises DDL on one collection name across stores and processes (until the transaction ends). */
  private async lockCollection(client: Queryable, name: string): Promise<void> {
    await client.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [
      LOCK_NAMESPACE,
      `${this.schema.length}:${this.schema}.${name}`,
    ]);
  }

  private async lookup(client: Queryable, name: string): Promise<Collection | undefined> {
    const result = await client.query<{
      name: string;
      dimension: number;
      metric: Metric;
      table_name: string;
    }>(`SELECT name, dimension, metric, table_name FROM ${this.schemaSql}.collections WHERE name = $1`, [
      name,
    ]);
    const row = result.rows[0];
    return row && { name: row.name, dimension: row.dimension, metric: row.metric, table: row.table_name };
  }

  private async require(client: Queryable, name: string): Promise<Collection> {
    const info = await this.lookup(client, name);
    if (!info) throw new KnowledgeLayerError(`vector collection "${name}" does not exist`);
    return info;
  }

  /** Validates every record (id, dimension, finite values); returns them with duplicate ids collapsed to the last. */
  private checkRecords(info: Collection, records: VectorRecord[]): VectorRecord[] {
    const byId = new Map<string, VectorRecord>();
    for (const record of records) {
      if (typeof record.id !== "string" || record.id.length === 0) {
        throw new KnowledgeLayerError(`collection "${info.name}": record ids must be non-empty strings`);
      }
      if (record.vector.length !== info.dimension) {
        throw new KnowledgeLayerError(
          `record "${record.id}" has dimension ${record.vector.length}, collection "${info.name}" expects ${info.dimension}`,
        );
      }
      this.checkFinite(info.name, `record "${record.id}"`, record.vector);
      byId.delete(record.id);
      byId.set(record.id, record);
    }
    return [...byId.values()];
  }

  private checkFinite(collection: string, what: string, vector: Float32Array): void {
    for (const x of vector) {
      if (!Number.isFinite(x)) {
        throw new KnowledgeLayerError(`${what} has a non-finite value (${x}), collection "${collection}"`);
      }
    }
  }

  private async getPool(): Promise<pg.Pool> {
    await this.connect();
    if (!this.pool) throw new KnowledgeLayerError("pgvector store is closed");
    return this.pool;
  }

  /** Runs `fn` with a pooled connection; database errors become KnowledgeLayerErrors naming the collection. */
  private async withClient<T>(
    collection: string,
    action: string,
    fn: (client: pg.PoolClient) => Promise<T>,
  ): Promise<T> {
    const pool = await this.getPool();
    let client: pg.PoolClient;
    try {
      client = await pool.connect();
    } catch (error) {
      throw new KnowledgeLayerError(
        `collection "${collection}": cannot reach PostgreSQL at ${describeTarget(this.options.url)}: ${errorText(error)}`,
        { cause: error },
      );
    }
    let broken = false;
    // A connection the server drops while this client is checked out emits 'error' on the client
    // (not the pool): without a listener that event would crash the process.
    const onError = (): void => {
      broken = true;
    };
    client.on("error", onError);
    try {
      return await fn(client);
    } catch (error) {
      broken ||= sqlState(error) === undefined && !(error instanceof KnowledgeLayerError);
      if (error instanceof KnowledgeLayerError) throw error;
      throw new KnowledgeLayerError(`collection "${collection}": ${action} failed: ${errorText(error)}`, {
        cause: error,
      });
    } finally {
      client.off("error", onError);
      client.release(broken);
    }
  }

  /** {@link withClient} inside BEGIN … COMMIT (ROLLBACK on error). */
  private async transaction<T>(
    collection: string,
    action: string,
    fn: (client: pg.PoolClient) => Promise<T>,
  ): Promise<T> {
    return this.withClient(collection, action, async (client) => {
      await client.query("BEGIN");
      try {
        const result = await fn(client);
        await client.query("COMMIT");
        return result;
      } catch (error) {
        await client.query("ROLLBACK").catch(() => {});
        throw error;
      }
    });
  }
}

/** What the pgvector store's filters support: every operator, numeric range bounds. */
const PG_FILTER_SUPPORT = {
  kinds: new Set<FilterNode["kind"]>([
    "eq",
    "ne",
    "in",
    "nin",
    "range",
    "contains",
    "prefix",
    "exists",
    "not",
  ]),
};

/**
 * A filter as a condition on the JSONB `payload` column; `param` binds a value and returns
 * its placeholder (nothing from the filter is spliced into the SQL). Equality uses JSONB
 * containment (`payload @> '{"k": v}'`, served by the payload's GIN index).
 */
export function pgFilterSql(node: FilterNode, param: (value: unknown) => string): string {
  switch (node.kind) {
    case "and":
    case "or":
      if (node.children.length === 0) return node.kind === "and" ? "TRUE" : "FALSE";
      return `(${node.children.map((c) => pgFilterSql(c, param)).join(node.kind === "and" ? " AND " : " OR ")})`;
    case "not":
      return `NOT ${pgFilterSql(node.child, param)}`;
    case "eq":
    case "contains":
    case "ne": {
      const sql = `payload @> ${param(JSON.stringify({ [node.field]: node.value }))}::jsonb`;
      return node.kind === "ne" ? `NOT (${sql})` : `(${sql})`;
    }
    case "in":
    case "nin": {
      const sql = `coalesce((payload -> ${param(node.field)}::text) = ANY(${param(node.values.map((v) => JSON.stringify(v)))}::jsonb[]), FALSE)`;
      return node.kind === "nin" ? `NOT ${sql}` : sql;
    }
    case "range": {
      if (!("number" in node.bound)) throw new Error("date bounds are checked out before");
      const op = { $lt: "<", $lte: "<=", $gt: ">", $gte: ">=" }[node.op];
      const key = param(node.field);
      return `(CASE WHEN jsonb_typeof(payload -> ${key}::text) = 'number' THEN (payload ->> ${key}::text)::float8 ${op} ${param(node.bound.number)}::float8 ELSE FALSE END)`;
    }
    case "prefix": {
      const key = param(node.field);
      return `(CASE WHEN jsonb_typeof(payload -> ${key}::text) = 'string' THEN starts_with(payload ->> ${key}::text, ${param(node.value)}::text) ELSE FALSE END)`;
    }
    case "exists": {
      const sql = `coalesce(jsonb_typeof(payload -> ${param(node.field)}::text), 'null') <> 'null'`;
      return node.value ? `(${sql})` : `NOT (${sql})`;
    }
  }
}
