/**
 * The ingest-job routes of the HTTP API (`/jobs`): a tenant's jobs, one job, and its
 * progress as server-sent events (resumable with `Last-Event-ID`).
 */
import { HttpError } from "../errors.js";
import { schemas } from "../schemas.js";
import type { RouteContext } from "./context.js";

/** Registers the `/jobs` routes. */
export function registerJobRoutes({ app, jobs, streams }: RouteContext): void {
  app.get("/jobs", { schema: schemas.listJobs }, async (request) => ({
    jobs: await jobs.list(request.tenant),
  }));

  app.get<{ Params: { id: string } }>("/jobs/:id", { schema: schemas.getJob }, async (request) => {
    const job = await jobs.get(request.tenant, request.params.id);
    if (!job) throw new HttpError(404, `job "${request.params.id}" not found`);
    return job;
  });

  app.get<{ Params: { id: string } }>(
    "/jobs/:id/events",
    { schema: schemas.jobEvents },
    async (request, reply) => {
      const { tenant } = request;
      // Live events are held from here on, so none falls between the stored ones and the subscription.
      const follower = await jobs.follow(tenant, request.params.id);
      if (!follower) throw new HttpError(404, `job "${request.params.id}" not found`);
      const { job, seq } = follower;
      // A reconnecting client (EventSource sends it by itself) gets every stored event after the last it saw.
      const header = request.headers["last-event-id"];
      const lastId = Array.isArray(header) ? header[0] : header;
      if (lastId !== undefined && !/^\d{1,9}$/.test(lastId.trim())) {
        follower.stop();
        throw new HttpError(400, `Last-Event-ID must be an event id of this job (a number), not "${lastId}"`);
      }
      const after = lastId === undefined ? undefined : Number(lastId.trim());
      let missed: Awaited<ReturnType<typeof follower.eventsAfter>>;
      try {
        missed = after === undefined ? [] : await follower.eventsAfter(after);
      } catch (error) {
        follower.stop();
        throw error;
      }
      const finished = follower.finished;
      // Nothing after the client's last event of a finished job: 204 tells EventSource not to reconnect.
      if (after !== undefined && finished && missed.length === 0) {
        follower.stop();
        return reply.code(204).send();
      }
      reply.hijack();
      const res = reply.raw;
      res.writeHead(200, {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache, no-transform",
        connection: "keep-alive",
        "x-accel-buffering": "no",
      });
      const write = (event: string, data: unknown, id?: number): void => {
        res.write(
          `${id === undefined ? "" : `id: ${id}\n`}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`,
        );
      };
      if (after === undefined) {
        // The job as of its last event: a client reconnecting after this sends that id and gets what follows.
        write("status", job, finished ? undefined : seq);
        if (finished) {
          follower.stop();
          write("done", job);
          res.end();
          return;
        }
      } else {
        for (const e of missed) write(e.type, e.job, e.seq);
        if (finished) {
          follower.stop();
          res.end();
          return;
        }
      }
      streams.add(res);
      const keepAlive = setInterval(() => res.write(": keep-alive\n\n"), 15_000);
      const stop = (): void => {
        clearInterval(keepAlive);
        follower.stop();
        streams.delete(res);
      };
      res.on("close", stop);
      follower.listen((event) => {
        write(event.type, event.job, event.seq);
        if (event.type === "done") {
          stop();
          res.end();
        }
      });
    },
  );
}
