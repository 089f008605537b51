/** The public routes of the HTTP API: `/health` and `/openapi.json` (no API key needed). */
import { schemas } from "../schemas.js";
import type { RouteContext } from "./context.js";

/** Registers `GET /health` and `GET /openapi.json`. */
export function registerHealthRoutes({ app, kl, version }: RouteContext): void {
  app.get("/health", { schema: schemas.health, config: { public: true } }, async () => {
    await kl.checkHealth();
    return { status: "ok", version };
  });

  app.get("/openapi.json", { schema: { hide: true }, config: { public: true } }, async () => app.swagger());
}
