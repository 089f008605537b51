/**
 * Request/answer threads on the library's own modules: the client numbers each request,
 * the worker answers it by id. Both sides live here so the chunking, keyword-search and
 * vector-index workers (`ingest/chunk-client.ts`, `retrieve/bm25-parallel.ts`,
 * `store/ann-client.ts`) share one protocol and one set of lifetime rules:
 *
 * - a worker is unreferenced while nothing is pending, so an idle worker never keeps the
 *   process alive, and referenced while a request is in flight (or while it is closing,
 *   see {@link RequestWorker.hold});
 * - when the worker fails (an `error` event, or a message that cannot be read) every
 *   pending request is rejected and the thread is terminated; when it exits, every
 *   pending request is rejected.
 *
 * Protocol: the client posts `{ ...request, id }`; the worker answers `{ id, value }`, or
 * `{ id, error }` with the message of what handling the request threw.
 */
import { type MessagePort, parentPort, type Worker } from "node:worker_threads";
import { startModuleWorker } from "./module-worker.js";

/** A worker's answer to request `id`. */
export type WorkerAnswer<T> = { id: number; value: T } | { id: number; error: string };

/** How a {@link RequestWorker} is started and how it reports failures. */
export interface RequestWorkerOptions {
  /** `workerData` of the thread. */
  workerData?: unknown;
  /** What the worker is called in error messages, e.g. "chunking worker". */
  name: string;
  /**
   * Builds the error a request is rejected with (the message names the worker and the
   * cause). Default `new Error(message)`.
   */
  error?: (message: string) => Error;
  /** Called once when the worker fails (before pending requests are rejected). */
  onFail?: (reason: string) => void;
  /** Called once the thread has exited (after pending requests are rejected). */
  onExit?: () => void;
}

interface Pending {
  resolve(value: unknown): void;
  reject(error: Error): void;
}

/**
 * Client of one worker thread running `moduleUrl` (see {@link startModuleWorker}), which
 * answers with {@link serveRequests}. Answers may come in any order. See the module
 * comment for when the thread is referenced and how failures are reported.
 */
export class RequestWorker<Req extends object, Res> {
  readonly worker: Worker;
  /** Resolves once the thread has exited (for any reason). */
  readonly exited: Promise<void>;
  private readonly pending = new Map<number, Pending>();
  private readonly error: (message: string) => Error;
  private nextId = 1;
  private held = false;
  /** Why requests cannot be answered any more (the thread failed or exited), once so. */
  private ended: string | undefined;

  /** Starts the thread (unreferenced). @throws what starting a worker throws. */
  constructor(
    moduleUrl: URL,
    private readonly options: RequestWorkerOptions,
  ) {
    this.error = options.error ?? ((message) => new Error(message));
    const worker = startModuleWorker(moduleUrl, { workerData: options.workerData });
    this.worker = worker;
    worker.unref();
    worker.on("message", (message: WorkerAnswer<Res>) => {
      const call = this.pending.get(message.id);
      if (!call) return;
      this.pending.delete(message.id);
      this.unrefIfIdle();
      if ("error" in message) call.reject(this.error(`${options.name}: ${message.error}`));
      else call.resolve(message.value);
    });
    worker.on("error", (error) => this.fail(`${options.name} failed: ${error.message}`));
    worker.on("messageerror", (error) =>
      this.fail(`${options.name} sent a message that cannot be read: ${error.message}`),
    );
    this.exited = new Promise<void>((resolve) => {
      worker.once("exit", () => {
        this.ended ??= `${options.name} exited`;
        this.rejectAll(this.error(`${options.name} exited`));
        options.onExit?.();
        resolve();
      });
    });
  }

  /** Requests in flight. */
  get pendingCount(): number {
    return this.pending.size;
  }

  /**
   * Sends `body` (with a fresh id) and resolves to the worker's answer.
   * @throws (rejects) an error naming the worker when the answer is an error, the worker
   *   fails or exits first (or already has), or `body` cannot be sent (it cannot be cloned).
   */
  request(body: Req): Promise<Res> {
    if (this.ended !== undefined) return Promise.reject(this.error(this.ended));
    const id = this.nextId++;
    return new Promise<Res>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
      if (this.pending.size === 1) this.worker.ref();
      try {
        this.worker.postMessage({ ...body, id });
      } catch (error) {
        this.pending.delete(id);
        this.unrefIfIdle();
        reject(this.error(`cannot send to the ${this.options.name}: ${(error as Error).message}`));
      }
    });
  }

  /** Keeps the thread referenced until it exits (a close in progress the process should wait for). */
  hold(): void {
    this.held = true;
    this.worker.ref();
  }

  /** Terminates the thread; pending requests are rejected. Resolves once it has exited. */
  async terminate(): Promise<void> {
    await this.worker.terminate();
    await this.exited;
  }

  private unrefIfIdle(): void {
    if (this.pending.size === 0 && !this.held) this.worker.unref();
  }

  private rejectAll(error: Error): void {
    for (const call of this.pending.values()) call.reject(error);
    this.pending.clear();
  }

  /** The first failure (or the exit) ends the worker; a later failure event has nothing left to do. */
  private fail(reason: string): void {
    if (this.ended !== undefined) return;
    this.ended = reason;
    this.options.onFail?.(reason);
    this.rejectAll(this.error(reason));
    void this.worker.terminate();
  }
}

/**
 * The worker side: answers every request posted to this thread with what `handle`
 * returns (or resolves to) as `{ id, value }` (`undefined` becomes `null`), or with
 * `{ id, error }` carrying the message of what it throws. After answering a request for
 * which `last` is true, the port is closed (the thread ends when nothing else holds it).
 * @returns the port, for work the caller does beside answering.
 * @throws Error when not running in a worker thread.
 */
export function serveRequests<Req extends { id: number }>(
  handle: (request: Req) => unknown,
  last?: (request: Req) => boolean,
): MessagePort {
  const port = parentPort;
  if (!port) throw new Error("this module runs as a worker thread");
  port.on("message", async (request: Req) => {
    try {
      const value = (await handle(request)) ?? null;
      port.postMessage({ id: request.id, value });
    } catch (error) {
      port.postMessage({ id: request.id, error: error instanceof Error ? error.message : String(error) });
    }
    if (last?.(request)) port.close();
  });
  return port;
}
