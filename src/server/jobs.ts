/**
 * Background ingest jobs of the HTTP API. An upload is written to the tenant's
 * uploads folder (`<dataDir>/uploads/<tenant>/<job>/<n>`: numbered files, never a
 * client-chosen path), then a job extracts each file from its bytes under its
 * upload name (so the name is the document's `uri`, `path` and citation) and
 * ingests the documents; the upload folder is removed when the job ends.
 *
 * Jobs of one KB run one at a time in submission order (a queue per KB), so
 * ingests never interleave; jobs of different KBs run concurrently. Job state is
 * kept in memory (the most recent finished jobs, see {@link JobManagerOptions}),
 * and listeners (server-sent events) get a `progress` event per step and a final
 * `done` event.
 *
 * On shutdown ({@link JobManager.close}) queued jobs end `interrupted` without
 * starting and running ones end `interrupted` after the file they are ingesting
 * (each file's documents are committed whole, so the KB holds what the job's
 * summary counts); their listeners get the final `done` event either way.
 */

import { randomUUID } from "node:crypto";
import { mkdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { ExtractionError } from "../errors.js";
import { extractBytes } from "../extract/index.js";
import type { UserMetadata } from "../ingest/pipeline.js";
import type { KnowledgeLayer } from "../knowledge-layer.js";
import { redactText } from "../secrets.js";
import type { ExtractedDocument } from "../types.js";
import { deleteDocuments, documentIdsOfSource } from "./documents.js";
import { tenantText } from "./tenancy.js";

/**
 * Life cycle of a job: `queued` → `running` → `succeeded` or `failed`, or
 * `interrupted` when the server shut down before it finished.
 */
export type JobStatus = "queued" | "running" | "succeeded" | "failed" | "interrupted";

/** True for the statuses a job ends with (no event follows). */
export function isFinished(status: JobStatus): boolean {
  return status === "succeeded" || status === "failed" || status === "interrupted";
}

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
  /** Texts embedded by the model, served from the embedding cache, or reused from chunking. */
  embedded: { computed: number; cached: number; reused: number };
  durationMs: number;
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
   * extracted to choose its route): the job ingests them instead of extracting again.
   */
  documents?: ExtractedDocument[];
}

/** A job as the API shows it. */
export interface JobView {
  id: string;
  /** The tenant's name of the KB. */
  kb: string;
  status: JobStatus;
  /** Files processed so far, of `total`. */
  done: number;
  total: number;
  /** The file being processed, while running. */
  current?: string;
  files: { name: string; bytes: number }[];
  /** Present once the job has finished (also when it failed part-way). */
  summary?: JobSummary;
  /** Why the job failed or was interrupted, when it was. */
  error?: string;
  createdAt: string;
  startedAt?: string;
  finishedAt?: string;
}

/** A job event: `progress` after each step, `done` once at the end. */
export interface JobEvent {
  /** 1-based sequence number within the job. */
  seq: number;
  type: "progress" | "done";
  job: JobView;
}

interface Job {
  id: string;
  tenant: string;
  kb: string;
  internalKb: string;
  embed: boolean;
  /** User metadata of the upload's `meta` and `tag` fields, stored on every document. */
  metadata?: UserMetadata;
  dir: string;
  files: UploadedFile[];
  status: JobStatus;
  done: number;
  current?: string;
  summary?: JobSummary;
  error?: string;
  createdAt: string;
  startedAt?: string;
  finishedAt?: string;
  seq: number;
  listeners: Set<(event: JobEvent) => void>;
}

/** Options of a {@link JobManager}. */
export interface JobManagerOptions {
  /** Folder under which each tenant's uploads are written. */
  uploadsDir: string;
  /** Finished jobs kept for `GET /jobs/:id` (oldest forgotten first). Default 1,000. */
  maxFinishedJobs?: number;
  /** Logs an unexpected failure server-side. */
  logError?: (error: unknown, message: string) => void;
}

/** Runs ingest jobs: one queue per KB, state and events per job. */
export class JobManager {
  private readonly jobs = new Map<string, Job>();
  private readonly finished: string[] = [];
  private readonly tails = new Map<string, Promise<void>>();
  private closing = false;

  constructor(
    private readonly kl: KnowledgeLayer,
    private readonly options: JobManagerOptions,
  ) {}

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
   * Queues an ingest of uploaded files into a KB (`internalKb` is its catalog name,
   * `kb` the tenant's). The job starts when the KB's earlier jobs have finished.
   */
  submit(input: {
    id: string;
    dir: string;
    tenant: string;
    kb: string;
    internalKb: string;
    files: UploadedFile[];
    embed: boolean;
    metadata?: UserMetadata;
  }): JobView {
    const job: Job = {
      ...input,
      status: "queued",
      done: 0,
      createdAt: new Date().toISOString(),
      seq: 0,
      listeners: new Set(),
    };
    this.jobs.set(job.id, job);
    if (this.closing) {
      void this.finish(
        job,
        "interrupted",
        "the server is shutting down: upload the files again once it is back",
      );
      return view(job);
    }
    const previous = this.tails.get(job.internalKb) ?? Promise.resolve();
    const run = previous.then(() => this.execute(job));
    this.tails.set(job.internalKb, run);
    void run.finally(() => {
      if (this.tails.get(job.internalKb) === run) this.tails.delete(job.internalKb);
    });
    return view(job);
  }

  /** One of the tenant's jobs, or undefined (also for another tenant's job). */
  get(tenant: string, id: string): JobView | undefined {
    const job = this.jobs.get(id);
    return job && job.tenant === tenant ? view(job) : undefined;
  }

  /** The tenant's known jobs, newest first. */
  list(tenant: string): JobView[] {
    return [...this.jobs.values()]
      .filter((j) => j.tenant === tenant)
      .reverse()
      .map(view);
  }

  /** Queued or running jobs of a KB (catalog name). */
  active(internalKb: string): JobView[] {
    return [...this.jobs.values()]
      .filter((j) => j.internalKb === internalKb && (j.status === "queued" || j.status === "running"))
      .map(view);
  }

  /**
   * Calls `listener` with each later event of the tenant's job; returns the
   * unsubscribe function, or undefined for an unknown job.
   */
  subscribe(tenant: string, id: string, listener: (event: JobEvent) => void): (() => void) | undefined {
    const job = this.jobs.get(id);
    if (!job || job.tenant !== tenant) return undefined;
    job.listeners.add(listener);
    return () => job.listeners.delete(listener);
  }

  /**
   * Stops the jobs for a shutdown: no new job starts, queued jobs end
   * `interrupted` at once (their uploads are removed), running ones end
   * `interrupted` after their current file (what they committed stays, and the
   * error names the files left). Every job's listeners get its final `done`
   * event before this resolves, when no job is running any more.
   */
  async close(): Promise<void> {
    this.closing = true;
    for (const job of this.jobs.values()) {
      if (job.status === "queued")
        await this.finish(
          job,
          "interrupted",
          "the server shut down before the job started: upload the files again once it is back",
        );
    }
    await Promise.allSettled([...this.tails.values()]);
  }

  private emit(job: Job, type: JobEvent["type"]): void {
    job.seq++;
    const event: JobEvent = { seq: job.seq, type, job: view(job) };
    for (const listener of job.listeners) {
      try {
        listener(event);
      } catch (error) {
        this.options.logError?.(error, `job ${job.id}: event listener failed`);
      }
    }
  }

  private async finish(
    job: Job,
    status: "succeeded" | "failed" | "interrupted",
    error?: string,
  ): Promise<void> {
    job.status = status;
    job.current = undefined;
    if (error) job.error = error;
    job.finishedAt = new Date().toISOString();
    await rm(job.dir, { recursive: true, force: true }).catch(() => {});
    this.emit(job, "done");
    job.listeners.clear();
    this.finished.push(job.id);
    const max = this.options.maxFinishedJobs ?? 1000;
    while (this.finished.length > max) {
      const old = this.finished.shift();
      if (old) this.jobs.delete(old);
    }
  }

  private async execute(job: Job): Promise<void> {
    if (job.status !== "queued") return;
    const started = Date.now();
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
      durationMs: 0,
    };
    job.status = "running";
    job.startedAt = new Date().toISOString();
    job.summary = undefined;
    this.emit(job, "progress");
    try {
      const failed = new Set<string>();
      for (const file of job.files) {
        if (this.closing) {
          // Shutting down: stop between files (each file's documents were committed whole).
          summary.durationMs = Date.now() - started;
          job.summary = summary;
          const left = job.files.slice(job.done).map((f) => f.name);
          await this.finish(
            job,
            "interrupted",
            `the server shut down after ${job.done} of ${job.files.length} files; not ingested: ${listNames(left)} (upload them again once it is back)`,
          );
          return;
        }
        job.current = file.name;
        this.emit(job, "progress");
        // Looked up per file: a KB deleted meanwhile stops the job.
        const kb = this.kl.findKb(job.internalKb);
        if (!kb) {
          job.summary = { ...summary, durationMs: Date.now() - started };
          await this.finish(
            job,
            "failed",
            `knowledge base "${job.kb}" was deleted while the job was running`,
          );
          return;
        }
        let docs: ExtractedDocument[] | undefined;
        try {
          if (file.documents) docs = file.documents;
          else {
            const bytes = await readFile(file.storedPath);
            docs = await extractBytes(file.name, bytes, undefined, kb.config.extraction ?? {}, file.mimetype);
          }
        } catch (error) {
          summary.errors.push({ file: file.name, reason: reasonOf(error, job.tenant) });
          failed.add(file.name);
        } finally {
          file.documents = undefined;
          await rm(file.storedPath, { force: true }).catch(() => {});
        }
        if (docs) {
          try {
            const uris = new Set(docs.map((d) => d.uri));
            const stale = documentIdsOfSource(this.kl, job.internalKb, file.name).filter(
              (d) => !uris.has(d.uri),
            );
            const s = await this.kl.ingestDocuments(docs, {
              kb: job.internalKb,
              embed: job.embed,
              metadata: job.metadata?.meta,
              tags: job.metadata?.tags,
            });
            for (const e of s.errors)
              summary.errors.push({ file: e.path, reason: tenantText(e.reason, job.tenant) });
            for (const w of s.warnings)
              summary.warnings.push({ file: w.path, reason: tenantText(w.reason, job.tenant) });
            if (s.errors.length >= docs.length) failed.add(file.name);
            else if (s.unchanged === s.files) summary.unchanged++;
            else if (s.updated > 0) summary.updated++;
            else summary.added++;
            summary.documents += s.documents;
            summary.chunks += s.chunks;
            summary.embedded.computed += s.embedded.computed;
            summary.embedded.cached += s.embedded.cached;
            summary.embedded.reused += s.embedded.reused;
            if (stale.length > 0) {
              await deleteDocuments(
                this.kl,
                kb,
                stale.map((d) => d.id),
              );
              summary.removed.push(...stale.map((d) => d.uri));
            }
          } catch (error) {
            summary.errors.push({ file: file.name, reason: reasonOf(error, job.tenant) });
            failed.add(file.name);
          }
        }
        job.done++;
        this.emit(job, "progress");
      }
      summary.durationMs = Date.now() - started;
      job.summary = summary;
      if (job.files.length > 0 && failed.size === job.files.length) {
        await this.finish(job, "failed", "no file could be ingested (see summary.errors)");
      } else {
        await this.finish(job, "succeeded");
      }
    } catch (error) {
      this.options.logError?.(error, `job ${job.id} failed`);
      summary.durationMs = Date.now() - started;
      job.summary = summary;
      await this.finish(job, "failed", "internal error while ingesting (details are in the server log)");
    }
  }
}

/** Up to 10 quoted names, then how many more. */
function listNames(names: string[]): string {
  const shown = names.slice(0, 10).map((n) => JSON.stringify(n));
  return names.length > 10 ? `${shown.join(", ")} and ${names.length - 10} more` : shown.join(", ");
}

/** A failure reason fit for the client: an extraction error's reason, else the message; secrets masked. */
function reasonOf(error: unknown, tenant: string): string {
  if (error instanceof ExtractionError) return redactText(error.reason);
  return redactText(tenantText(error instanceof Error ? error.message : String(error), tenant));
}

function view(job: Job): JobView {
  const out: JobView = {
    id: job.id,
    kb: job.kb,
    status: job.status,
    done: job.done,
    total: job.files.length,
    files: job.files.map((f) => ({ name: f.name, bytes: f.bytes })),
    createdAt: job.createdAt,
  };
  if (job.current !== undefined) out.current = job.current;
  if (job.summary) out.summary = job.summary;
  if (job.error) out.error = job.error;
  if (job.startedAt) out.startedAt = job.startedAt;
  if (job.finishedAt) out.finishedAt = job.finishedAt;
  return out;
}
