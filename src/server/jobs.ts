/**
 * Background ingest jobs of the HTTP API, durable across restarts. An upload is
 * written to the tenant's uploads folder (`<dataDir>/uploads/<tenant>/<job>/<n>`:
 * numbered files, never a client-chosen path), then the job is stored in `kl.db`
 * (see `store/jobs.ts`) before the client gets its 202. A job extracts each file
 * from its bytes under its upload name (so the name is the document's `uri`, `path`
 * and citation) and ingests the documents; a file's bytes are removed once it is
 * done, the upload folder when the job ends.
 *
 * Jobs of one KB run one at a time in submission order (a queue per KB), so ingests
 * never interleave; jobs of different KBs run concurrently. Every step is a
 * transaction that updates the stored job and appends its event, and the documents
 * a file's ingest commits are recorded in their own transaction
 * (`IngestOptions.job`), so after a crash the stored job says exactly what was
 * ingested: a resumed job skips the files marked done, and redoes the file it was
 * on, where unchanged documents are skipped by content hash and the ones committed
 * before the crash are counted from the record (nothing is ingested twice or
 * counted twice).
 *
 * On shutdown ({@link JobManager.close}) no new job starts and a running job stops
 * after the file it is on, going back to `queued`; {@link JobManager.start} (server
 * start) resumes every queued or running job. Listeners (server-sent events) get a
 * `progress` event per step and a final `done` event; events are stored, so a client
 * can reconnect with the id of the last one it saw ({@link JobManager.follow}).
 */

import { randomUUID } from "node:crypto";
import { mkdir, readdir, readFile, rm } from "node:fs/promises";
import { join, resolve } from "node:path";
import { ExtractionError } from "../errors.js";
import { extractBytes } from "../extract/index.js";
import type { UserMetadata } from "../ingest/pipeline.js";
import type {
  JobFileRecord,
  JobFileResult,
  JobIssue,
  JobRecord,
  JobState,
  JobStatus,
  JobStep,
  JobSummary,
  KbRecord,
  KnowledgeLayer,
} from "../knowledge-layer.js";
import { redactText } from "../secrets.js";
import type { ExtractedDocument } from "../types.js";
import { deleteDocuments, documentIdsOfSource } from "./documents.js";
import { tenantText } from "./tenancy.js";

export type { JobIssue, JobStatus, JobSummary } from "../knowledge-layer.js";

/** True for the statuses a job ends with (no event follows). */
export function isFinished(status: JobStatus): boolean {
  return status === "succeeded" || status === "failed";
}

/** An uploaded file waiting in the uploads folder. */
export interface UploadedFile {
  /** The upload's file name (sanitised: no directories). */
  name: string;
  /** Where its bytes are stored. */
  storedPath: string;
  bytes: number;
  mimetype?: string;
  /**
   * The file's documents when they were extracted already (an agent attachment,
   * extracted to choose its route): the job's first run ingests them instead of
   * extracting again (a resumed run extracts the stored bytes).
   */
  documents?: ExtractedDocument[];
}

/** A job as the API shows it. */
export interface JobView extends JobState {
  id: string;
  /** The tenant's name of the KB. */
  kb: string;
  /** Files processed so far (`done`, see {@link JobState}), of `total`. */
  total: number;
  files: { name: string; bytes: number }[];
  createdAt: string;
}

/** A job event: `progress` after each step, `done` once at the end. */
export interface JobEvent {
  /** 1-based sequence number within the job: the server-sent event id. */
  seq: number;
  type: "progress" | "done";
  job: JobView;
}

/**
 * One client following a job ({@link JobManager.follow}): the job as it was read, the
 * stored events it asks for, then the live ones, with none missed or repeated in between.
 */
export interface JobFollower {
  /** The job when it was read. */
  job: JobView;
  /** Id of the job's last event when it was read (0 before the first). */
  seq: number;
  /** True once the job is known to have finished (read so, or a `done` event was read). */
  readonly finished: boolean;
  /**
   * The stored events after event id `afterSeq`, each with the job as it was then (exactly
   * what was sent live). Live events these cover are not delivered again.
   */
  eventsAfter(afterSeq: number): Promise<JobEvent[]>;
  /** Calls `listener` with each later event: first those that arrived since the job was read. */
  listen(listener: (event: JobEvent) => void): void;
  /** Stops following (call it also when {@link listen} was never called). */
  stop(): void;
}

/** Options of a {@link JobManager}. */
export interface JobManagerOptions {
  /** Folder under which each tenant's uploads are written. */
  uploadsDir: string;
  /** Finished jobs kept per tenant for `GET /jobs/:id` (older ones are deleted). Default 1,000. */
  maxFinishedJobs?: number;
  /** Logs an unexpected failure server-side. */
  logError?: (error: unknown, message: string) => void;
}

/** Runs durable ingest jobs: one queue per KB, state and events stored per job. */
export class JobManager {
  private readonly listeners = new Map<string, Set<(event: JobEvent) => void>>();
  private readonly tails = new Map<string, Promise<void>>();
  /** Documents extracted at upload (agent attachments), by `job/file`, for the job's first run. */
  private readonly extracted = new Map<string, ExtractedDocument[]>();
  private closing = false;

  constructor(
    private readonly kl: KnowledgeLayer,
    private readonly options: JobManagerOptions,
  ) {}

  /**
   * Resumes the stored jobs (server start): a job that was running when the server
   * stopped goes back to `queued` (an event says so), then every queued job is queued
   * again in submission order. Upload folders that belong to no queued job (an upload
   * cut off before its 202, a job that ended while its folder was being removed) are
   * removed, and each tenant's finished jobs are pruned to the newest `maxFinishedJobs`.
   * Returns the ids of the resumed jobs.
   */
  async start(): Promise<string[]> {
    const pending = await this.kl.pendingJobs();
    const keep = new Set(pending.map((j) => resolve(j.dir)));
    await removeOrphanUploads(this.options.uploadsDir, keep);
    for (const tenant of await this.kl.jobTenants()) await this.kl.pruneJobs(tenant, this.maxFinished());
    for (let job of pending) {
      if (job.status === "running")
        job = await this.step(job, {
          state: { ...stateOf(job), status: "queued", current: undefined },
          event: "progress",
        });
      this.schedule(job);
    }
    return pending.map((j) => j.id);
  }

  /** A new job id and its (created) upload folder for `tenant`. */
  async reserve(tenant: string): Promise<{ id: string; dir: string }> {
    const id = `job_${randomUUID().replace(/-/g, "").slice(0, 20)}`;
    const dir = join(this.options.uploadsDir, tenant, id);
    await mkdir(dir, { recursive: true });
    return { id, dir };
  }

  /** Removes a reserved upload folder that will not become a job (the upload failed). */
  async release(dir: string): Promise<void> {
    await rm(dir, { recursive: true, force: true });
  }

  /**
   * Stores a job ingesting uploaded files into a KB (`internalKb` is its catalog name,
   * `kb` the tenant's) and queues it: it starts when the KB's earlier jobs have
   * finished. Once this returns the job survives a restart. While the server shuts
   * down the job is stored but not started (the next start runs it).
   */
  async submit(input: {
    id: string;
    dir: string;
    tenant: string;
    kb: string;
    internalKb: string;
    files: UploadedFile[];
    embed: boolean;
    metadata?: UserMetadata;
    /** Keep only documents with text (an agent attachment). */
    textOnly?: boolean;
  }): Promise<JobView> {
    const options: JobRecord["options"] = { embed: input.embed };
    if (input.metadata?.meta && Object.keys(input.metadata.meta).length > 0)
      options.meta = input.metadata.meta;
    if (input.metadata?.tags && input.metadata.tags.length > 0) options.tags = input.metadata.tags;
    if (input.textOnly) options.textOnly = true;
    const job = await this.kl.createJob({
      id: input.id,
      tenant: input.tenant,
      kb: input.kb,
      internalKb: input.internalKb,
      options,
      dir: input.dir,
      files: input.files.map((f) => ({
        name: f.name,
        storedPath: f.storedPath,
        bytes: f.bytes,
        mimetype: f.mimetype,
      })),
    });
    if (!this.closing) {
      input.files.forEach((f, n) => {
        if (f.documents) this.extracted.set(`${job.id}/${n}`, f.documents);
      });
      this.schedule(job);
    }
    return view(job);
  }

  /** One of the tenant's jobs, or undefined (also for another tenant's job). */
  async get(tenant: string, id: string): Promise<JobView | undefined> {
    const job = await this.kl.getJob(id);
    return job && job.tenant === tenant ? view(job) : undefined;
  }

  /** The tenant's stored jobs, newest first. */
  async list(tenant: string): Promise<JobView[]> {
    return (await this.kl.listJobs(tenant)).map((j) => view(j));
  }

  /** Ids of the queued or running jobs of a KB (catalog name). */
  active(internalKb: string): Promise<string[]> {
    return this.kl.activeJobs(internalKb);
  }

  /**
   * Follows one of the tenant's jobs (see {@link JobFollower}); undefined for an unknown
   * job. Live events are held from before the job is read, so an event stored while the
   * job or its stored events are being read is delivered once: by
   * {@link JobFollower.eventsAfter} or by the listener, never both, never neither.
   */
  async follow(tenant: string, id: string): Promise<JobFollower | undefined> {
    const held: JobEvent[] = [];
    let target: ((event: JobEvent) => void) | undefined;
    let last = 0;
    let finished = false;
    const relay = (event: JobEvent): void => {
      if (event.seq <= last) return;
      if (target) target(event);
      else held.push(event);
    };
    const set = this.listeners.get(id) ?? new Set();
    this.listeners.set(id, set);
    set.add(relay);
    const stop = (): void => {
      set.delete(relay);
      if (set.size === 0 && this.listeners.get(id) === set) this.listeners.delete(id);
    };
    let job: JobRecord | undefined;
    try {
      job = await this.kl.getJob(id);
    } catch (error) {
      stop();
      throw error;
    }
    if (!job || job.tenant !== tenant) {
      stop();
      return undefined;
    }
    const record = job;
    last = record.seq;
    finished = isFinished(record.status);
    return {
      job: view(record),
      seq: record.seq,
      get finished() {
        return finished;
      },
      eventsAfter: async (afterSeq) => {
        const events = (await this.kl.jobEvents(id, afterSeq)).map((e) => ({
          seq: e.seq,
          type: e.type,
          job: view(record, e.state),
        }));
        last = Math.max(last, events.at(-1)?.seq ?? 0);
        if (events.some((e) => e.type === "done")) finished = true;
        return events;
      },
      listen: (listener) => {
        target = listener;
        for (const event of held.splice(0)) if (event.seq > last) listener(event);
      },
      stop,
    };
  }

  /**
   * Stops the jobs for a shutdown: no job starts any more, and a running job stops
   * after the file it is on and goes back to `queued` (with a `progress` event);
   * queued jobs stay queued. Resolves when no job is running; the next
   * {@link start} on the data directory resumes them all.
   */
  async close(): Promise<void> {
    this.closing = true;
    await Promise.allSettled([...this.tails.values()]);
  }

  private maxFinished(): number {
    return this.options.maxFinishedJobs ?? 1000;
  }

  private schedule(job: JobRecord): void {
    const previous = this.tails.get(job.internalKb) ?? Promise.resolve();
    const run = previous.then(() => this.execute(job.id));
    this.tails.set(job.internalKb, run);
    void run.finally(() => {
      if (this.tails.get(job.internalKb) === run) this.tails.delete(job.internalKb);
    });
  }

  /** Applies and stores one step, then tells the job's listeners its event. */
  private async step(job: JobRecord, step: JobStep): Promise<JobRecord> {
    const { job: next, event } = await this.kl.advanceJob(job.id, step);
    if (event) {
      const out: JobEvent = { seq: event.seq, type: event.type, job: view(next, event.state) };
      for (const listener of this.listeners.get(job.id) ?? []) {
        try {
          listener(out);
        } catch (error) {
          this.options.logError?.(error, `job ${job.id}: event listener failed`);
        }
      }
      if (event.type === "done") this.listeners.delete(job.id);
    }
    return next;
  }

  private async finish(
    job: JobRecord,
    status: "succeeded" | "failed",
    elapsedMs: number,
    error?: string,
  ): Promise<void> {
    const state: JobState = {
      status,
      done: job.done,
      startedAt: job.startedAt,
      finishedAt: new Date().toISOString(),
      summary: summarize(job, elapsedMs),
    };
    if (error) state.error = error;
    await this.step(job, { state, elapsedMs, event: "done" });
    for (const f of job.files) this.extracted.delete(`${job.id}/${f.n}`);
    await rm(job.dir, { recursive: true, force: true }).catch(() => {});
    await this.kl.pruneJobs(job.tenant, this.maxFinished());
  }

  private async execute(id: string): Promise<void> {
    let job = await this.kl.getJob(id);
    if (job?.status !== "queued" || this.closing) return;
    const runStarted = Date.now();
    const before = job.elapsedMs;
    const elapsed = (): number => before + (Date.now() - runStarted);
    job = await this.step(job, {
      state: { status: "running", done: job.done, startedAt: job.startedAt ?? new Date().toISOString() },
      event: "progress",
    });
    try {
      for (const file of job.files) {
        if (file.state === "done") continue;
        if (this.closing) {
          // Shutting down: stop between files (each file's documents were committed whole);
          // the job resumes from here at the next start.
          await this.step(job, {
            state: { ...stateOf(job), status: "queued", current: undefined },
            elapsedMs: elapsed(),
            event: "progress",
          });
          return;
        }
        // Looked up per file: a KB deleted meanwhile stops the job.
        const kb = await this.kl.findKb(job.internalKb);
        if (!kb) {
          await this.finish(
            job,
            "failed",
            elapsed(),
            `knowledge base "${job.kb}" was deleted while the job was running`,
          );
          return;
        }
        // What the KB held for this name before the job touched it (kept from a first attempt).
        const prior =
          file.prior ?? (await documentIdsOfSource(this.kl, job.internalKb, file.name)).map((d) => d.uri);
        job = await this.step(job, {
          state: { ...stateOf(job), current: file.name },
          file: { n: file.n, state: "started", prior },
          event: "progress",
        });
        const result = await this.ingestFile(job, file, prior, kb);
        job = await this.step(job, {
          state: { ...stateOf(job), done: job.done + 1 },
          elapsedMs: elapsed(),
          file: { n: file.n, state: "done", result },
          event: "progress",
        });
        await rm(file.storedPath, { force: true }).catch(() => {});
      }
      const results = job.files.map((f) => f.result);
      if (job.files.length > 0 && results.every((r) => r?.outcome === "failed")) {
        await this.finish(job, "failed", elapsed(), "no file could be ingested (see summary.errors)");
      } else {
        await this.finish(job, "succeeded", elapsed());
      }
    } catch (error) {
      this.options.logError?.(error, `job ${job.id} failed`);
      try {
        const latest = await this.kl.getJob(id);
        if (latest)
          await this.finish(
            latest,
            "failed",
            elapsed(),
            "internal error while ingesting (details are in the server log)",
          );
      } catch (again) {
        // The database is gone (closed under the job): the job stays as stored and resumes at the next start.
        this.options.logError?.(again, `job ${job.id}: cannot record the failure`);
      }
    }
  }

  /**
   * Ingests one file of a job (a first attempt, or a redo after a crash) and says what
   * the file did: documents and chunks from the record of committed documents (so a redo
   * counts what the crashed attempt committed), added/updated from `prior`.
   */
  private async ingestFile(
    job: JobRecord,
    file: JobFileRecord,
    prior: string[],
    kb: KbRecord,
  ): Promise<JobFileResult> {
    const errors: JobIssue[] = [];
    const warnings: JobIssue[] = [];
    const embedded = { computed: 0, cached: 0, reused: 0 };
    let failed = false;
    const key = `${job.id}/${file.n}`;
    let docs: ExtractedDocument[] | undefined;
    try {
      docs = this.extracted.get(key);
      if (!docs) {
        const bytes = await readFile(file.storedPath);
        docs = await extractBytes(file.name, bytes, undefined, kb.config.extraction ?? {}, file.mimetype);
        if (job.options.textOnly) docs = docs.filter((d) => d.text.trim() !== "");
      }
    } catch (error) {
      const gone = (error as NodeJS.ErrnoException).code === "ENOENT";
      errors.push({
        file: file.name,
        reason: gone
          ? "the uploaded bytes are gone from the server's uploads folder; upload the file again"
          : reasonOf(error, job.tenant),
      });
      failed = true;
    } finally {
      this.extracted.delete(key);
    }
    let removed: string[] = [];
    if (docs) {
      try {
        const s = await this.kl.ingestDocuments(docs, {
          kb: job.internalKb,
          embed: job.options.embed,
          metadata: job.options.meta,
          tags: job.options.tags,
          job: { id: job.id, file: file.n },
        });
        for (const e of s.errors) errors.push({ file: e.path, reason: tenantText(e.reason, job.tenant) });
        for (const w of s.warnings) warnings.push({ file: w.path, reason: tenantText(w.reason, job.tenant) });
        embedded.computed = s.embedded.computed;
        embedded.cached = s.embedded.cached;
        embedded.reused = s.embedded.reused;
        failed = s.errors.length >= docs.length;
        // Documents an earlier upload of this name yielded and this one does not.
        const uris = new Set(docs.map((d) => d.uri));
        const stale = (await documentIdsOfSource(this.kl, job.internalKb, file.name)).filter(
          (d) => !uris.has(d.uri),
        );
        if (stale.length > 0)
          await deleteDocuments(
            this.kl,
            kb,
            stale.map((d) => d.id),
          );
        removed = prior.filter((u) => !uris.has(u));
      } catch (error) {
        errors.push({ file: file.name, reason: reasonOf(error, job.tenant) });
        failed = true;
      }
    }
    // What this job committed for the file, in this attempt or one a crash cut short.
    const written = await this.kl.jobFileDocuments(job.id, file.n);
    const seen = new Set(warnings.map((w) => `${w.file}\u0000${w.reason}`));
    for (const d of written)
      for (const w of d.warnings) {
        const issue = { file: w.file, reason: tenantText(w.reason, job.tenant) };
        const k = `${issue.file}\u0000${issue.reason}`;
        if (!seen.has(k)) {
          seen.add(k);
          warnings.push(issue);
        }
      }
    const priorSet = new Set(prior);
    const outcome: JobFileResult["outcome"] = failed
      ? "failed"
      : written.length === 0 && errors.length === 0
        ? "unchanged"
        : written.some((d) => priorSet.has(d.uri))
          ? "updated"
          : "added";
    return {
      outcome,
      documents: written.length,
      chunks: written.reduce((n, d) => n + d.chunks, 0),
      removed,
      errors,
      warnings,
      embedded,
    };
  }
}

/** The job's summary from its finished files' results. */
function summarize(job: JobRecord, durationMs: number): JobSummary {
  const summary: JobSummary = {
    files: job.files.length,
    added: 0,
    updated: 0,
    unchanged: 0,
    documents: 0,
    chunks: 0,
    removed: [],
    errors: [],
    warnings: [],
    embedded: { computed: 0, cached: 0, reused: 0 },
    durationMs,
  };
  for (const f of job.files) {
    const r = f.result;
    if (!r) continue;
    if (r.outcome === "added") summary.added++;
    else if (r.outcome === "updated") summary.updated++;
    else if (r.outcome === "unchanged") summary.unchanged++;
    summary.documents += r.documents;
    summary.chunks += r.chunks;
    summary.removed.push(...r.removed);
    summary.errors.push(...r.errors);
    summary.warnings.push(...r.warnings);
    summary.embedded.computed += r.embedded.computed;
    summary.embedded.cached += r.embedded.cached;
    summary.embedded.reused += r.embedded.reused;
  }
  return summary;
}

/** Removes the job folders under `uploadsDir/<tenant>/` that are not in `keep` (resolved paths). */
async function removeOrphanUploads(uploadsDir: string, keep: ReadonlySet<string>): Promise<void> {
  let tenants: string[];
  try {
    tenants = await readdir(uploadsDir);
  } catch {
    return;
  }
  for (const tenant of tenants) {
    const tenantDir = join(uploadsDir, tenant);
    let dirs: string[];
    try {
      dirs = await readdir(tenantDir);
    } catch {
      // A stray file, not a tenant folder.
      await rm(tenantDir, { force: true }).catch(() => {});
      continue;
    }
    for (const d of dirs) {
      const dir = join(tenantDir, d);
      if (!keep.has(resolve(dir))) await rm(dir, { recursive: true, force: true });
    }
  }
}

/** A failure reason fit for the client: an extraction error's reason, else the message; secrets masked. */
function reasonOf(error: unknown, tenant: string): string {
  if (error instanceof ExtractionError) return redactText(error.reason);
  return redactText(tenantText(error instanceof Error ? error.message : String(error), tenant));
}

/** The changing part of a stored job. */
function stateOf(job: JobState): JobState {
  const out: JobState = { status: job.status, done: job.done };
  if (job.current !== undefined) out.current = job.current;
  if (job.startedAt !== undefined) out.startedAt = job.startedAt;
  if (job.finishedAt !== undefined) out.finishedAt = job.finishedAt;
  if (job.error !== undefined) out.error = job.error;
  if (job.summary !== undefined) out.summary = job.summary;
  return out;
}

/** The API's view of a job, as it is or (`state`) as one of its events saw it. */
function view(job: JobRecord, state: JobState = job): JobView {
  const out: JobView = {
    id: job.id,
    kb: job.kb,
    status: state.status,
    done: state.done,
    total: job.files.length,
    files: job.files.map((f) => ({ name: f.name, bytes: f.bytes })),
    createdAt: job.createdAt,
  };
  if (state.current !== undefined) out.current = state.current;
  if (state.summary) out.summary = state.summary;
  if (state.error) out.error = state.error;
  if (state.startedAt) out.startedAt = state.startedAt;
  if (state.finishedAt) out.finishedAt = state.finishedAt;
  return out;
}
