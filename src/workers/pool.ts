/**
 * One worker-thread pool for every model the library runs locally (the
 * transformers.js embedder, the cross-encoder reranker, the bundled USE-lite
 * embedder), so that inference never runs on — and never blocks — the event
 * loop of the thread that asked for it.
 *
 * Worker code is plain JavaScript evaluated with `new Worker(code, { eval:
 * true })`: the same code runs whether the library is used from its
 * TypeScript sources (tests, tsx) or from `dist/`, with no worker file to
 * locate, and whatever module type the parent process defaults to (`require`
 * is provided either way). A worker source is {@link WORKER_RUNTIME} followed
 * by task code that starts loading its model into a promise `ready` and calls
 * `serve(ready, handle)`:
 *
 * ```js
 * const ready = loadMyModel(workerData.options);   // starts at once
 * serve(ready, async (body) => {
 *   const m = await ready;
 *   const out = compute(m, body);                   // a Float32Array, say
 *   return { value: out, transfer: [out.buffer] };
 * });
 * ```
 *
 * Protocol: the pool posts `{ id, body }`; the worker answers `{ id, value,
 * threadId }` or `{ id, error, fatal, threadId }`, one message at a time in
 * arrival order. `fatal` means `ready` rejected (the model could not be
 * loaded): the pool then takes every current worker out of service, so the
 * next call starts fresh workers and a fixed model folder is picked up.
 */
import { Worker } from "node:worker_threads";

/**
 * Worker-side runtime, prepended to every worker source. Defines
 * `parentPort`, `workerData`, `threadId`, `errorMessage(e)` and
 * `serve(ready, handle)`: answers each message with `handle(body)` (which
 * returns `{ value, transfer? }`), one at a time; a `{ warm: true }` body only
 * waits for `ready`. An error thrown by `handle` is sent back with `fatal` set
 * when `ready` itself rejected. A `{ close: true }` message drops the queued
 * calls and ends the thread once the running one is done.
 */
export const WORKER_RUNTIME = `
const { parentPort, workerData, threadId } = require("node:worker_threads");
const errorMessage = (e) => (e && e.message) || String(e);
function serve(ready, handle) {
  Promise.resolve(ready).catch(() => undefined);
  let chain = Promise.resolve();
  let closing = false;
  parentPort.on("message", (msg) => {
    if (msg.close === true) {
      // Skip what is queued, let the running call finish, then end the thread.
      closing = true;
      chain = chain.then(() => process.exit(0));
      return;
    }
    chain = chain.then(async () => {
      if (closing) return;
      try {
        if (msg.body && msg.body.warm === true) {
          await ready;
          parentPort.postMessage({ id: msg.id, value: null, threadId });
          return;
        }
        const out = await handle(msg.body);
        parentPort.postMessage({ id: msg.id, value: out.value, threadId }, out.transfer || []);
      } catch (e) {
        let fatal = false;
        try { await ready; } catch { fatal = true; }
        parentPort.postMessage({ id: msg.id, error: errorMessage(e), fatal, threadId });
      }
    });
  });
}
`;

/**
 * Wraps worker code so that it runs whether Node evaluates it as CommonJS
 * (the default) or as an ES module (the parent was started with
 * `--input-type=module` or `--experimental-default-type=module`, which
 * workers inherit): `require` comes from `createRequire`, so it resolves bare
 * package names from the current directory — pass absolute paths in
 * `workerData` (`require.resolve` on the calling side). Messages that arrive
 * before the code has run are queued by the port.
 */
function portable(source: string): string {
  return `import("node:module").then(({ createRequire }) => {
const require = createRequire(process.cwd() + "/");
${source}
});`;
}

/** Options of {@link WorkerPool}. */
export interface WorkerPoolOptions {
  /** Worker threads, an integer ≥ 1. */
  size: number;
  /** Worker code: {@link WORKER_RUNTIME} followed by code calling `serve(ready, handle)`. */
  source: string;
  /**
   * Structured-cloned into every worker as `workerData`; a function is
   * called when workers start (e.g. to resolve module paths lazily; what it
   * throws rejects the call).
   */
  workerData: unknown;
  /** What the workers are, for error messages, e.g. `embedding worker`, `cross-encoder worker`. */
  label: string;
}

/**
 * The worker answered a call with an error: the task code threw (`fatal`
 * false), or the worker's model failed to load (`fatal` true; the message is
 * the load error).
 */
export class WorkerTaskError extends Error {
  constructor(
    message: string,
    /** The model could not be loaded; the pool restarts its workers on the next call. */
    readonly fatal: boolean,
  ) {
    super(message);
    this.name = "WorkerTaskError";
  }
}

/**
 * A worker thread died (uncaught error, out of memory, `process.exit` in the
 * worker, terminated from outside) or the pool was closed while a call was
 * waiting for it. The pool replaces a dead worker on the next call.
 */
export class WorkerCrashError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "WorkerCrashError";
  }
}

/** A successful answer and the thread that computed it. */
export interface WorkerReply<T> {
  value: T;
  /** `threadId` of the worker thread that ran the call. */
  threadId: number;
}

interface Slot {
  worker: Worker;
  threadId: number;
  pending: number;
  /** No new calls; terminated once its queued calls have been answered. */
  retired: boolean;
  /** Stopped by the pool (an exit is expected, not a crash). */
  stopping: boolean;
  /** The thread has exited. */
  exited: boolean;
  /** Settles when the thread has exited, once a stop was asked for. */
  stopped?: Promise<void>;
}

type Reply =
  | { id: number; value: unknown; threadId: number }
  | { id: number; error: string; fatal: boolean; threadId: number };

interface Call {
  resolve: (reply: WorkerReply<unknown>) => void;
  reject: (error: Error) => void;
  slot: Slot;
}

/**
 * A pool of `size` worker threads running the same worker code (see the
 * module comment). Each call goes to the least busy worker; a worker handles
 * its calls one at a time.
 *
 * - Lazy: no thread starts before the first call; idle workers do not keep
 *   the process alive (they are `unref`'d while nothing is pending).
 * - Load failures (`fatal` answers) retire every current worker; the next
 *   call starts new ones, which load the model again.
 * - Crashes: when a worker dies, its pending calls reject with a
 *   {@link WorkerCrashError} and it is removed; the next call starts a
 *   replacement, so a crash never wedges later calls.
 * - {@link close} rejects pending calls at once and ends the workers; a later
 *   call would start new workers.
 * - Stopping is graceful: a worker is never terminated while it runs a call,
 *   because ending a thread inside a native onnxruntime call aborts the whole
 *   process. It is asked to exit after its running call instead (queued
 *   calls are dropped).
 */
export class WorkerPool {
  /** Workers in service (new calls go to them). */
  private slots: Slot[] = [];
  /** Every running worker, retired ones still answering their queued calls included. */
  private readonly live = new Set<Slot>();
  private readonly calls = new Map<number, Call>();
  private nextId = 0;
  private started = 0;
  private readonly seen = new Set<number>();

  /** @throws RangeError when `size` is not an integer ≥ 1. */
  constructor(private readonly options: WorkerPoolOptions) {
    if (!Number.isInteger(options.size) || options.size < 1) {
      throw new RangeError(`${options.label} pool size must be an integer >= 1, got ${String(options.size)}`);
    }
  }

  /** Worker threads this pool has started so far, replacements included (diagnostics). */
  get workersStarted(): number {
    return this.started;
  }

  /** Thread ids of the workers that have answered calls (diagnostics). */
  get threadIds(): number[] {
    return [...this.seen];
  }

  /**
   * Runs one call in the least busy worker.
   * @param body structured-cloned to the worker's `handle(body)`.
   * @param transfer buffers of `body` to move rather than copy.
   * @throws WorkerTaskError when the task or the model load fails; WorkerCrashError when the worker dies.
   */
  async run<T>(body: unknown, transfer: readonly ArrayBuffer[] = []): Promise<WorkerReply<T>> {
    this.start();
    const slot = this.slots.reduce((a, b) => (b.pending < a.pending ? b : a));
    return this.send(slot, body, transfer) as Promise<WorkerReply<T>>;
  }

  /**
   * Starts every worker (if not yet) and waits until each has loaded its model.
   * @throws as {@link run}.
   */
  async warm(): Promise<void> {
    this.start();
    await Promise.all(this.slots.map((slot) => this.send(slot, { warm: true }, [])));
  }

  /**
   * Ends the workers: pending calls reject at once with a
   * {@link WorkerCrashError}; resolves when every thread has exited (a worker
   * busy with a call exits when that call is done).
   */
  async close(): Promise<void> {
    const slots = [...this.live];
    this.slots = [];
    for (const [id, call] of this.calls) {
      this.calls.delete(id);
      call.reject(new WorkerCrashError(`the ${this.options.label}s were closed`));
    }
    await Promise.all(slots.map((s) => this.stop(s)));
  }

  private send(slot: Slot, body: unknown, transfer: readonly ArrayBuffer[]): Promise<WorkerReply<unknown>> {
    const id = this.nextId++;
    if (slot.pending++ === 0) slot.worker.ref();
    return new Promise<WorkerReply<unknown>>((resolve, reject) => {
      this.calls.set(id, { resolve, reject, slot });
      try {
        slot.worker.postMessage({ id, body }, [...transfer]);
      } catch (error) {
        this.calls.delete(id);
        this.settled(slot);
        reject(error instanceof Error ? error : new Error(String(error)));
      }
    });
  }

  /** Bookkeeping after one of `slot`'s calls is answered. */
  private settled(slot: Slot): void {
    if (--slot.pending > 0) return;
    slot.worker.unref();
    if (slot.retired) void this.stop(slot);
  }

  private onReply(reply: Reply): void {
    const call = this.calls.get(reply.id);
    if (!call) return;
    this.calls.delete(reply.id);
    this.seen.add(reply.threadId);
    if ("error" in reply) {
      // Every current worker loaded the same files: all are replaced on the next call.
      if (reply.fatal) for (const s of [...this.slots, call.slot]) this.retire(s);
      this.settled(call.slot);
      call.reject(new WorkerTaskError(reply.error, reply.fatal));
      return;
    }
    this.settled(call.slot);
    call.resolve({ value: reply.value, threadId: reply.threadId });
  }

  /** Takes a worker out of service (its queued calls are still answered). */
  private retire(slot: Slot): void {
    if (slot.retired) return;
    slot.retired = true;
    this.slots = this.slots.filter((s) => s !== slot);
    if (slot.pending === 0) void this.stop(slot);
  }

  /** Asks a worker to exit after its running call (see the class comment); settles when it has. */
  private stop(slot: Slot): Promise<void> {
    if (slot.stopped) return slot.stopped;
    slot.stopping = true;
    this.live.delete(slot);
    if (slot.exited) {
      slot.stopped = Promise.resolve();
      return slot.stopped;
    }
    slot.stopped = new Promise<void>((resolve) => slot.worker.once("exit", () => resolve()));
    // Keep the process alive until the thread is gone, so that `await close()` settles.
    slot.worker.ref();
    try {
      slot.worker.postMessage({ close: true });
    } catch {
      void slot.worker.terminate();
    }
    return slot.stopped;
  }

  /** Starts workers until there are `size` in service (first call, after a load failure or a crash). */
  private start(): void {
    const { size } = this.options;
    if (this.slots.length >= size) return;
    const source = portable(this.options.source);
    const workerData =
      typeof this.options.workerData === "function"
        ? (this.options.workerData as () => unknown)()
        : this.options.workerData;
    while (this.slots.length < size) {
      const worker = new Worker(source, { eval: true, workerData });
      const slot: Slot = {
        worker,
        threadId: worker.threadId,
        pending: 0,
        retired: false,
        stopping: false,
        exited: false,
      };
      this.started++;
      worker.unref();
      worker.on("message", (reply: Reply) => this.onReply(reply));
      worker.on("error", (error) => this.crashed(slot, error));
      worker.on("exit", (code) => {
        slot.exited = true;
        if (!slot.stopping) this.crashed(slot, new Error(`exited with code ${code}`));
      });
      this.slots.push(slot);
      this.live.add(slot);
    }
  }

  /** A worker died: reject what it owed and forget it (the next call starts a replacement). */
  private crashed(slot: Slot, error: Error): void {
    slot.stopping = true;
    this.live.delete(slot);
    this.slots = this.slots.filter((s) => s !== slot);
    for (const [id, call] of this.calls) {
      if (call.slot !== slot) continue;
      this.calls.delete(id);
      call.reject(
        new WorkerCrashError(
          `the ${this.options.label} (thread ${slot.threadId}) stopped unexpectedly: ${error.message}`,
          { cause: error },
        ),
      );
    }
    slot.pending = 0;
    slot.worker.unref();
  }
}
