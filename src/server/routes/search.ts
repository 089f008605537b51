/** The search route of the HTTP API (`POST /search`): the tenant's KBs, all or some. */
import type { RetrievalMode } from "../../config.js";
import type { Filter } from "../../retrieve/filter.js";
import { schemas } from "../schemas.js";
import { ownsKb } from "../tenancy.js";
import { type RouteContext, requireKb, searchView, tenantFilter } from "./context.js";

/** Registers `POST /search`. */
export function registerSearchRoutes({ app, kl }: RouteContext): void {
  app.post<{
    Body: {
      query: string;
      kbs?: string[];
      topK?: number;
      mode?: RetrievalMode | "vector";
      minScore?: number;
      filter?: Filter;
    };
  }>("/search", { schema: schemas.search }, async (request) => {
    const { tenant } = request;
    const body = request.body;
    const kbs: string[] = [];
    if (body.kbs) for (const name of body.kbs) kbs.push((await requireKb(kl, tenant, name)).name);
    else for (const k of await kl.knowledgeBases()) if (ownsKb(tenant, k.name)) kbs.push(k.name);
    if (kbs.length === 0) {
      return {
        query: body.query,
        kbs: [],
        results: [],
        warnings: ["there are no knowledge bases to search: create one with POST /kbs"],
        tookMs: 0,
      };
    }
    const response = await kl.search(body.query, {
      kbs,
      topK: body.topK,
      mode: body.mode,
      minScore: body.minScore,
      filter: tenantFilter(tenant, body.filter),
    });
    return searchView(tenant, response);
  });
}
