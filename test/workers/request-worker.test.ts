/**
 * The request/answer worker shared by the chunking, keyword-search and vector-index
 * workers (`src/workers/request-worker.ts`), against a real worker thread.
 */
import { afterEach, describe, expect, test } from "vitest";
import { KnowledgeLayerError } from "../../src/errors.js";
import { RequestWorker } from "../../src/workers/request-worker.js";
import type { EchoRequest } from "./fixtures/echo-worker.js";

const ECHO = new URL("./fixtures/echo-worker.ts", import.meta.url);
const started: RequestWorker<Omit<EchoRequest, "id">, unknown>[] = [];

function echo(events: string[] = []): RequestWorker<Omit<EchoRequest, "id">, unknown> {
  const worker = new RequestWorker<Omit<EchoRequest, "id">, unknown>(ECHO, {
    name: "echo worker",
    error: (message) => new KnowledgeLayerError(message),
    onFail: (reason) => events.push(`fail: ${reason}`),
    onExit: () => events.push("exit"),
  });
  started.push(worker);
  return worker;
}

afterEach(async () => {
  await Promise.all(started.splice(0).map((w) => w.terminate()));
});

describe("RequestWorker", () => {
  test("answers each request by its id, in whatever order the worker finishes them", async () => {
    const w = echo();
    const slow = w.request({ op: "slow", text: "first", ms: 150 });
    const fast = w.request({ op: "echo", text: "second" });
    const order: string[] = [];
    await Promise.all([slow.then((v) => order.push(String(v))), fast.then((v) => order.push(String(v)))]);
    expect(order).toEqual(["second", "first"]);
    expect(w.pendingCount).toBe(0);
  });

  test("an error answer rejects that request only, with the client's error naming the worker", async () => {
    const w = echo();
    const bad = w.request({ op: "fail", text: "x" });
    const good = w.request({ op: "echo", text: "y" });
    await expect(bad).rejects.toThrow(KnowledgeLayerError);
    await expect(bad).rejects.toThrow("echo worker: cannot echo x");
    await expect(good).resolves.toBe("y");
  });

  test("a crash rejects every pending request, reports the failure once and ends the thread", async () => {
    const events: string[] = [];
    const w = echo(events);
    const pending = w.request({ op: "slow", text: "never", ms: 10_000 });
    const crash = w.request({ op: "crash" });
    await expect(pending).rejects.toThrow("echo worker failed: worker crashed");
    await expect(crash).rejects.toThrow("echo worker failed: worker crashed");
    await w.exited;
    expect(events).toEqual(["fail: echo worker failed: worker crashed", "exit"]);
    await expect(w.request({ op: "echo", text: "late" })).rejects.toThrow(/echo worker/);
  });

  test("a request that cannot be cloned is rejected at once; the worker goes on", async () => {
    const w = echo();
    const body = { op: "echo", text: "x", extra: () => 1 } as unknown as Omit<EchoRequest, "id">;
    await expect(w.request(body)).rejects.toThrow(/cannot send to the echo worker/);
    expect(w.pendingCount).toBe(0);
    await expect(w.request({ op: "echo", text: "ok" })).resolves.toBe("ok");
  });

  test("after the last request is answered the worker ends on its own; terminate rejects what is pending", async () => {
    const events: string[] = [];
    const w = echo(events);
    await expect(w.request({ op: "close" })).resolves.toBe("bye");
    await w.exited;
    expect(events).toEqual(["exit"]);

    const other = echo();
    const pending = other.request({ op: "slow", text: "never", ms: 10_000 });
    await other.terminate();
    await expect(pending).rejects.toThrow("echo worker exited");
  });
});
