/**
 * The shared worker pool (src/workers/pool.ts) on small worker sources written
 * here: lazy start, answers from other threads, task errors, load failures
 * (workers replaced), crashes (calls fail, later calls work), graceful close.
 */
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { threadId } from "node:worker_threads";
import { afterEach, describe, expect, it } from "vitest";
import { WORKER_RUNTIME, WorkerCrashError, WorkerPool, WorkerTaskError } from "../../src/workers/pool.js";

/** Task code: echoes, fails, crashes, exits or keeps its thread busy, as the call asks. */
const TASK = `
const ready = workerData.failLoad
  ? Promise.reject(new Error("cannot load the test model"))
  : new Promise((resolve) => setTimeout(() => resolve("loaded"), 10));
serve(ready, async (body) => {
  await ready;
  if (body.fail) throw new Error("task failed: " + body.fail);
  if (body.crash) {
    setImmediate(() => { throw new Error("uncaught in the worker"); });
    await new Promise((resolve) => setTimeout(resolve, 10000));
  }
  if (body.exit !== undefined) process.exit(body.exit);
  if (body.busyMs) { const end = Date.now() + body.busyMs; while (Date.now() < end); }
  return { value: { echo: body.echo } };
});
`;

const open: WorkerPool[] = [];
function pool(size = 1, workerData: unknown = {}): WorkerPool {
  const p = new WorkerPool({ size, label: "test worker", source: WORKER_RUNTIME + TASK, workerData });
  open.push(p);
  return p;
}
afterEach(async () => {
  await Promise.all(open.splice(0).map((p) => p.close()));
});

describe("WorkerPool", () => {
  it("starts nothing before the first call, then answers from worker threads", async () => {
    const p = pool(2);
    expect(p.workersStarted).toBe(0);
    const replies = await Promise.all([1, 2, 3, 4].map((echo) => p.run<{ echo: number }>({ echo })));
    expect(replies.map((r) => r.value.echo)).toEqual([1, 2, 3, 4]);
    expect(p.workersStarted).toBe(2);
    expect(p.threadIds).toHaveLength(2);
    expect(p.threadIds).not.toContain(threadId);
  });

  it("rejects a failing task with a WorkerTaskError and keeps the worker", async () => {
    const p = pool();
    const error = await p.run({ fail: "bad input" }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WorkerTaskError);
    expect((error as WorkerTaskError).fatal).toBe(false);
    expect((error as Error).message).toBe("task failed: bad input");
    await expect(p.run({ echo: 1 })).resolves.toMatchObject({ value: { echo: 1 } });
    expect(p.workersStarted).toBe(1);
  });

  it("replaces its workers after a load failure, so a fixed model is picked up", async () => {
    let starts = 0;
    const p = pool(2, () => ({ failLoad: starts++ === 0 }));
    const error = await p.run({ echo: 1 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WorkerTaskError);
    expect((error as WorkerTaskError).fatal).toBe(true);
    expect((error as Error).message).toBe("cannot load the test model");
    await expect(p.warm()).resolves.toBeUndefined();
    await expect(p.run({ echo: 2 })).resolves.toMatchObject({ value: { echo: 2 } });
    expect(p.workersStarted).toBe(4);
  });

  it("fails the calls of a worker that dies, and the next call starts a new one", async () => {
    const p = pool();
    await p.warm();
    const crashing = p.run({ crash: true }).catch((e: unknown) => e);
    const queued = p.run({ echo: "queued" }).catch((e: unknown) => e);
    const crash = await crashing;
    expect(crash).toBeInstanceOf(WorkerCrashError);
    expect((crash as Error).message).toMatch(
      /^the test worker \(thread \d+\) stopped unexpectedly: .*uncaught/,
    );
    // A call that was queued on the dead worker fails too; nothing hangs.
    expect(await queued).toBeInstanceOf(WorkerCrashError);
    const exit = await p.run({ exit: 3 }).catch((e: unknown) => e);
    expect((exit as Error).message).toMatch(/stopped unexpectedly: exited with code 3/);
    const exit0 = await p.run({ exit: 0 }).catch((e: unknown) => e);
    expect(exit0).toBeInstanceOf(WorkerCrashError);
    await expect(p.run({ echo: "after" })).resolves.toMatchObject({ value: { echo: "after" } });
    expect(p.workersStarted).toBe(4);
  });

  it("close() rejects pending calls at once, lets the running call finish, and ends the threads", async () => {
    const p = pool();
    await p.warm();
    const running = p.run({ busyMs: 300 }).catch((e: unknown) => e);
    const queued = p.run({ echo: "never" }).catch((e: unknown) => e);
    await new Promise((resolve) => setTimeout(resolve, 50));
    const t0 = performance.now();
    const closing = p.close();
    expect(await running).toBeInstanceOf(WorkerCrashError);
    expect((await queued) as Error).toMatchObject({ message: "the test workers were closed" });
    expect(performance.now() - t0).toBeLessThan(150);
    await closing;
    // The busy call was not cut short: ending a thread inside native code can abort the process.
    expect(performance.now() - t0).toBeGreaterThan(150);
    // Usable again: a later call starts a new worker.
    await expect(p.run({ echo: 3 })).resolves.toMatchObject({ value: { echo: 3 } });
  });

  it("close() settles even when nothing else keeps the process alive", async () => {
    const module = fileURLToPath(new URL("../../src/workers/pool.ts", import.meta.url));
    const script = `
      import { WORKER_RUNTIME, WorkerPool } from ${JSON.stringify(module)};
      const p = new WorkerPool({ size: 1, label: "w", source: WORKER_RUNTIME + ${JSON.stringify(TASK)}, workerData: {} });
      console.log((await p.run({ echo: "answered" })).value.echo);
      await p.close();
      console.log("closed");
    `;
    const { stdout } = await promisify(execFile)(process.execPath, [
      "--import",
      "tsx",
      "--input-type=module",
      "-e",
      script,
    ]);
    expect(stdout.trim().split("\n")).toEqual(["answered", "closed"]);
  });

  it("rejects a size that is not a positive integer", () => {
    expect(() => new WorkerPool({ size: 0, label: "x", source: "", workerData: {} })).toThrow(RangeError);
  });
});
