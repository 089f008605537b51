/**
 * Durable ingest jobs (the HTTP API's uploads) in the embedded database: one row per
 * job, one per uploaded file (with its progress, so a resumed job skips files already
 * ingested), the documents each file's ingest committed (written in the same
 * transaction as those documents, see {@link JobStore.recordDocuments}), and the job's
 * events (so a client following it can reconnect and miss nothing). Tables
 * `ingest_jobs`, `ingest_job_files`, `ingest_job_docs` and `ingest_job_events` of
 * `kl.db` (schema 6, see `database.ts`).
 */
import type { Statement } from "better-sqlite3";
import type { FilterScalar } from "../retrieve/filter.js";
import { type Db, statementCache } from "./database.js";

/**
 * Life cycle of a job: `queued` → `running` → `succeeded` or `failed`. A job stopped by
 * a shutdown (or a crash) goes back to `queued` and resumes when the server starts again.
 */
export type JobStatus = "queued" | "running" | "succeeded" | "failed";

/** A problem with one uploaded file. */
export interface JobIssue {
  /** The upload's file name (or a child document's uri, such as `mail.eml#attachment/1/a.pdf`). */
  file: string;
  reason: string;
}

/** What a finished job did. */
export interface JobSummary {
  /** Uploaded files. */
  files: number;
  /** Files whose documents were new to the KB, replaced an earlier upload, or were unchanged. */
  added: number;
  updated: number;
  unchanged: number;
  /** Documents and chunks written. */
  documents: number;
  chunks: number;
  /** Documents an earlier upload of the same file name yielded and this one does not (removed). */
  removed: string[];
  /** Files that could not be ingested, with the reason (the job went on). */
  errors: JobIssue[];
  /** Files ingested with a degraded result (a PDF page without text, an unreadable attachment). */
  warnings: JobIssue[];
  /**
   * Texts embedded by the model, served from the embedding cache, or reused from chunking
   * (the work of the attempt that finished each file; a file redone after a crash counts once).
   */
  embedded: { computed: number; cached: number; reused: number };
  /** Time spent running, in milliseconds (summed over runs when the job was resumed). */
  durationMs: number;
}

/** What ingesting one uploaded file did (kept per file, summed into the job's summary). */
export interface JobFileResult {
  outcome: "added" | "updated" | "unchanged" | "failed";
  documents: number;
  chunks: number;
  removed: string[];
  errors: JobIssue[];
  warnings: JobIssue[];
  embedded: { computed: number; cached: number; reused: number };
}

/** Options of a job, stored with it. */
export interface JobOptions {
  /** Compute chunk vectors (false: keyword-only). */
  embed: boolean;
  /** User metadata of every document (see `UserMetadata`; `null` removes a key given earlier). */
  meta?: Record<string, FilterScalar | null>;
  tags?: string[];
  /** Keep only the documents with text (an agent attachment). */
  textOnly?: boolean;
}

/**
 * An uploaded file of a job: `pending`, `started` (its ingest began; `prior` lists the
 * uris the KB held for its name before, so a resumed attempt classifies and removes
 * exactly as the first would), or `done` (with its result; its bytes may be gone).
 */
export interface JobFileRecord {
  /** 0-based position in the upload. */
  n: number;
  name: string;
  storedPath: string;
  bytes: number;
  mimetype?: string;
  state: "pending" | "started" | "done";
  prior?: string[];
  result?: JobFileResult;
}

/** The changing part of a job: what each of its events carries. */
export interface JobState {
  status: JobStatus;
  /** Files finished. */
  done: number;
  /** The file being processed, while running. */
  current?: string;
  startedAt?: string;
  finishedAt?: string;
  error?: string;
  summary?: JobSummary;
}

/** A stored job. */
export interface JobRecord extends JobState {
  id: string;
  tenant: string;
  /** The KB's name as the tenant knows it, and its catalog name. */
  kb: string;
  internalKb: string;
  options: JobOptions;
  /** Folder holding the uploaded bytes. */
  dir: string;
  files: JobFileRecord[];
  /** Id of the job's last event (0 before the first). */
  seq: number;
  /** Running time of earlier runs, in milliseconds. */
  elapsedMs: number;
  createdAt: string;
}

/** A stored job event: `progress` after each step, `done` once at the end. */
export interface JobEventRecord {
  /** 1-based, increasing by one within the job (the server-sent event id). */
  seq: number;
  type: "progress" | "done";
  state: JobState;
}

/** What a new job is made of. */
export interface NewJob {
  id: string;
  tenant: string;
  kb: string;
  internalKb: string;
  options: JobOptions;
  dir: string;
  files: { name: string; storedPath: string; bytes: number; mimetype?: string }[];
}

/** One step of a job (see {@link JobStore.advance}). */
export interface JobStep {
  /** The job's state after the step (replaces the stored one whole). */
  state: JobState;
  /** New running time of earlier runs, in milliseconds. */
  elapsedMs?: number;
  /** A file's new progress. */
  file?: { n: number; state: JobFileRecord["state"]; prior?: string[]; result?: JobFileResult };
  /** The event the step is (stored with the state as it is after the step). */
  event?: JobEventRecord["type"];
}

interface JobRow {
  id: string;
  tenant: string;
  kb: string;
  internal_kb: string;
  options: string;
  dir: string;
  status: JobStatus;
  done: number;
  current: string | null;
  started_at: string | null;
  finished_at: string | null;
  error: string | null;
  summary: string | null;
  seq: number;
  elapsed_ms: number;
  created_at: string;
}

interface FileRow {
  job_id: string;
  n: number;
  name: string;
  stored_path: string;
  bytes: number;
  mimetype: string | null;
  state: JobFileRecord["state"];
  prior: string | null;
  result: string | null;
}

const ACTIVE = "status IN ('queued', 'running')";

/**
 * The jobs repository over the embedded database. Every method is synchronous and each
 * write is one transaction, so a crash leaves a job as of its last completed step.
 */
export class JobStore {
  private readonly prepare: (sql: string) => Statement;

  constructor(readonly db: Db) {
    this.prepare = statementCache(db);
  }

  /** Stores a new `queued` job with its files (one transaction); returns it. */
  create(job: NewJob): JobRecord {
    const createdAt = new Date().toISOString();
    const insertFile = this.prepare(
      "INSERT INTO ingest_job_files (job_id, n, name, stored_path, bytes, mimetype) VALUES (?, ?, ?, ?, ?, ?)",
    );
    this.db
      .transaction(() => {
        this.prepare(
          `INSERT INTO ingest_jobs (id, tenant, kb, internal_kb, options, dir, status, created_at)
           VALUES (?, ?, ?, ?, ?, ?, 'queued', ?)`,
        ).run(job.id, job.tenant, job.kb, job.internalKb, JSON.stringify(job.options), job.dir, createdAt);
        job.files.forEach((f, n) => {
          insertFile.run(job.id, n, f.name, f.storedPath, f.bytes, f.mimetype ?? null);
        });
      })
      .immediate();
    return this.get(job.id) as JobRecord;
  }

  /** A job by id, or undefined. */
  get(id: string): JobRecord | undefined {
    const row = this.prepare("SELECT * FROM ingest_jobs WHERE id = ?").get(id) as JobRow | undefined;
    if (!row) return undefined;
    const files = this.prepare("SELECT * FROM ingest_job_files WHERE job_id = ? ORDER BY n").all(
      id,
    ) as FileRow[];
    return toRecord(row, files);
  }

  /** A tenant's jobs, newest first (their files without `prior` and `result`: {@link get} has them). */
  list(tenant: string): JobRecord[] {
    const rows = this.prepare("SELECT * FROM ingest_jobs WHERE tenant = ? ORDER BY rowid DESC").all(
      tenant,
    ) as JobRow[];
    const files = this.prepare(
      `SELECT f.job_id, f.n, f.name, f.stored_path, f.bytes, f.mimetype, f.state, NULL AS prior, NULL AS result
       FROM ingest_job_files f JOIN ingest_jobs j ON j.id = f.job_id WHERE j.tenant = ? ORDER BY f.job_id, f.n`,
    ).all(tenant) as FileRow[];
    const byJob = new Map<string, FileRow[]>();
    for (const f of files) {
      const list = byJob.get(f.job_id) ?? [];
      byJob.set(f.job_id, list);
      list.push(f);
    }
    return rows.map((r) => toRecord(r, byJob.get(r.id) ?? []));
  }

  /** Jobs queued or running (of every tenant), in submission order. */
  pending(): JobRecord[] {
    const ids = this.prepare(`SELECT id FROM ingest_jobs WHERE ${ACTIVE} ORDER BY rowid`)
      .pluck()
      .all() as string[];
    return ids.map((id) => this.get(id) as JobRecord);
  }

  /** Ids of the jobs queued or running on a KB (catalog name), in submission order. */
  active(internalKb: string): string[] {
    return this.prepare(`SELECT id FROM ingest_jobs WHERE internal_kb = ? AND ${ACTIVE} ORDER BY rowid`)
      .pluck()
      .all(internalKb) as string[];
  }

  /** A job's events after event id `afterSeq`, in order. */
  events(id: string, afterSeq = 0): JobEventRecord[] {
    const rows = this.prepare(
      "SELECT seq, type, state FROM ingest_job_events WHERE job_id = ? AND seq > ? ORDER BY seq",
    ).all(id, afterSeq) as { seq: number; type: JobEventRecord["type"]; state: string }[];
    return rows.map((r) => ({ seq: r.seq, type: r.type, state: JSON.parse(r.state) as JobState }));
  }

  /**
   * Applies one step to a job in one transaction: its new state, optionally a file's
   * progress and running time, and the event the step is (numbered after the job's last).
   * Returns the job as it is now and the stored event.
   * @throws Error when the job does not exist (it was pruned or never stored).
   */
  advance(id: string, step: JobStep): { job: JobRecord; event?: JobEventRecord } {
    let event: JobEventRecord | undefined;
    this.db
      .transaction(() => {
        const seq = this.prepare("SELECT seq FROM ingest_jobs WHERE id = ?").pluck().get(id) as
          | number
          | undefined;
        if (seq === undefined) throw new Error(`ingest job ${id} does not exist`);
        const s = step.state;
        const next = step.event ? seq + 1 : seq;
        this.prepare(
          `UPDATE ingest_jobs SET status = ?, done = ?, current = ?, started_at = ?, finished_at = ?, error = ?,
             summary = ?, seq = ?, elapsed_ms = coalesce(?, elapsed_ms) WHERE id = ?`,
        ).run(
          s.status,
          s.done,
          s.current ?? null,
          s.startedAt ?? null,
          s.finishedAt ?? null,
          s.error ?? null,
          s.summary ? JSON.stringify(s.summary) : null,
          next,
          step.elapsedMs ?? null,
          id,
        );
        if (step.file) {
          const f = step.file;
          this.prepare(
            "UPDATE ingest_job_files SET state = ?, prior = coalesce(?, prior), result = coalesce(?, result) WHERE job_id = ? AND n = ?",
          ).run(
            f.state,
            f.prior ? JSON.stringify(f.prior) : null,
            f.result ? JSON.stringify(f.result) : null,
            id,
            f.n,
          );
        }
        if (step.event) {
          event = { seq: next, type: step.event, state: stateOf(s) };
          this.prepare("INSERT INTO ingest_job_events (job_id, seq, type, state) VALUES (?, ?, ?, ?)").run(
            id,
            next,
            step.event,
            JSON.stringify(event.state),
          );
        }
      })
      .immediate();
    return { job: this.get(id) as JobRecord, event };
  }

  /**
   * Records the documents one ingest of file `n` of a job wrote (replacing an earlier
   * record of the same uri). Call it inside the transaction that writes them (see
   * `IngestContext.onUnitWritten`), so the record commits or rolls back with them.
   */
  recordDocuments(
    id: string,
    n: number,
    documents: readonly { uri: string; chunks: number }[],
    warnings: readonly JobIssue[],
  ): void {
    const insert = this.prepare(
      "INSERT OR REPLACE INTO ingest_job_docs (job_id, n, uri, chunks, warnings) VALUES (?, ?, ?, ?, ?)",
    );
    for (const d of documents) {
      const mine = warnings.filter((w) => w.file === d.uri);
      insert.run(id, n, d.uri, d.chunks, JSON.stringify(mine));
    }
  }

  /** The documents file `n` of a job wrote so far (see {@link recordDocuments}), by uri. */
  documents(id: string, n: number): { uri: string; chunks: number; warnings: JobIssue[] }[] {
    const rows = this.prepare(
      "SELECT uri, chunks, warnings FROM ingest_job_docs WHERE job_id = ? AND n = ? ORDER BY uri",
    ).all(id, n) as { uri: string; chunks: number; warnings: string }[];
    return rows.map((r) => ({
      uri: r.uri,
      chunks: r.chunks,
      warnings: JSON.parse(r.warnings) as JobIssue[],
    }));
  }

  /**
   * Deletes a tenant's finished jobs but the newest `keep` (with their files, documents
   * record and events); returns how many were deleted.
   */
  prune(tenant: string, keep: number): number {
    const cut = this.prepare(
      "SELECT rowid FROM ingest_jobs WHERE tenant = ? AND finished_at IS NOT NULL ORDER BY rowid DESC LIMIT 1 OFFSET ?",
    )
      .pluck()
      .get(tenant, Math.max(0, Math.floor(keep))) as number | undefined;
    if (cut === undefined) return 0;
    return this.db
      .transaction(
        () =>
          this.prepare(
            "DELETE FROM ingest_jobs WHERE tenant = ? AND finished_at IS NOT NULL AND rowid <= ?",
          ).run(tenant, cut).changes,
      )
      .immediate();
  }

  /** Tenants that have jobs. */
  tenants(): string[] {
    return this.prepare("SELECT DISTINCT tenant FROM ingest_jobs").pluck().all() as string[];
  }
}

function stateOf(s: JobState): JobState {
  const out: JobState = { status: s.status, done: s.done };
  if (s.current !== undefined) out.current = s.current;
  if (s.startedAt !== undefined) out.startedAt = s.startedAt;
  if (s.finishedAt !== undefined) out.finishedAt = s.finishedAt;
  if (s.error !== undefined) out.error = s.error;
  if (s.summary !== undefined) out.summary = s.summary;
  return out;
}

function toRecord(r: JobRow, files: FileRow[]): JobRecord {
  const state: JobState = {
    status: r.status,
    done: r.done,
    current: r.current ?? undefined,
    startedAt: r.started_at ?? undefined,
    finishedAt: r.finished_at ?? undefined,
    error: r.error ?? undefined,
    summary: r.summary ? (JSON.parse(r.summary) as JobSummary) : undefined,
  };
  return {
    ...stateOf(state),
    id: r.id,
    tenant: r.tenant,
    kb: r.kb,
    internalKb: r.internal_kb,
    options: JSON.parse(r.options) as JobOptions,
    dir: r.dir,
    files: files.map((f) => {
      const out: JobFileRecord = {
        n: f.n,
        name: f.name,
        storedPath: f.stored_path,
        bytes: f.bytes,
        state: f.state,
      };
      if (f.mimetype !== null) out.mimetype = f.mimetype;
      if (f.prior !== null) out.prior = JSON.parse(f.prior) as string[];
      if (f.result !== null) out.result = JSON.parse(f.result) as JobFileResult;
      return out;
    }),
    seq: r.seq,
    elapsedMs: r.elapsed_ms,
    createdAt: r.created_at,
  };
}
