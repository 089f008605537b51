/**
 * The knowledge-base routes of the HTTP API (`/kbs`, `/kbs/:kb`): create, list, show,
 * change and delete a tenant's KBs, and the check of the settings a tenant may choose.
 */
import { type KnowledgeBaseConfig, VECTOR_STORES } from "../../config.js";
import { EMBEDDING_PROVIDER_REGISTRY } from "../../embed/registry.js";
import { DEFAULT_EXTRACTION_LIMITS } from "../../extract/contract.js";
import type { DeepPartial, KbRecord, KbUpdate } from "../../knowledge-layer.js";
import { RERANKERS } from "../../rerank/registry.js";
import { redactSecrets } from "../../secrets.js";
import { offlineNamesOf, type Registry } from "../../settings.js";
import { HttpError } from "../errors.js";
import { schemas } from "../schemas.js";
import { internalKbName, kbNameProblem, ownsKb, tenantKbName } from "../tenancy.js";
import { type RouteContext, requireKb } from "./context.js";

type ConfigOverrides = DeepPartial<Omit<KnowledgeBaseConfig, "name">>;
type Obj = Record<string, unknown>;

/** Registers the `/kbs` routes. */
export function registerKbRoutes({ app, kl, jobs, allowServices }: RouteContext): void {
  const kbView = async (tenant: string, kb: KbRecord) => ({
    name: tenantKbName(tenant, kb.name),
    createdAt: kb.createdAt,
    config: redactSecrets({ ...kb.config, name: tenantKbName(tenant, kb.name) }),
    counts: await kl.counts(kb.name),
    activeJobs: await jobs.active(kb.name),
  });

  app.post<{ Body: { name: string } & ConfigOverrides }>(
    "/kbs",
    { schema: schemas.createKb },
    async (request, reply) => {
      const { tenant } = request;
      const { name, ...overrides } = request.body;
      const problem = kbNameProblem(tenant, name);
      if (problem) throw new HttpError(400, problem, "name");
      checkTenantSettings(overrides as Obj, allowServices);
      const internal = internalKbName(tenant, name);
      if (await kl.findKb(internal))
        throw new HttpError(409, `knowledge base "${name}" already exists`, "name");
      const record = await kl.createKb(internal, overrides);
      return reply
        .code(201)
        .header("location", `/kbs/${encodeURIComponent(name)}`)
        .send(await kbView(tenant, record));
    },
  );

  app.get("/kbs", { schema: schemas.listKbs }, async (request) => {
    const { tenant } = request;
    return {
      kbs: await Promise.all(
        (await kl.knowledgeBases()).filter((k) => ownsKb(tenant, k.name)).map((k) => kbView(tenant, k)),
      ),
    };
  });

  app.get<{ Params: { kb: string } }>("/kbs/:kb", { schema: schemas.getKb }, async (request) =>
    kbView(request.tenant, await requireKb(kl, request.tenant, request.params.kb)),
  );

  app.patch<{ Params: { kb: string }; Body: { retrieval?: Obj; extraction?: Obj } }>(
    "/kbs/:kb",
    { schema: schemas.updateKb },
    async (request) => {
      const { tenant } = request;
      const kb = await requireKb(kl, tenant, request.params.kb);
      const { retrieval, extraction } = request.body;
      checkTenantSettings({ retrieval, extraction }, allowServices);
      return kbView(tenant, await kl.updateKb(kb.name, { retrieval, extraction } as KbUpdate));
    },
  );

  app.delete<{ Params: { kb: string } }>("/kbs/:kb", { schema: schemas.deleteKb }, async (request, reply) => {
    const kb = await requireKb(kl, request.tenant, request.params.kb);
    const active = await jobs.active(kb.name);
    if (active.length > 0) {
      throw new HttpError(
        409,
        `knowledge base "${request.params.kb}" has ingest jobs queued or running (${active.join(", ")}); delete it when they have finished`,
      );
    }
    await kl.deleteKb(kb.name);
    return reply.code(204).send();
  });
}

const isObject = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

/** Reranker types that run offline on the bundled model (from the rerankers' registry). */
const OFFLINE_RERANKERS = offlineNamesOf(RERANKERS);
/** Embedding providers, and their models, that run offline (from the providers' registry). */
const OFFLINE_EMBEDDING_PROVIDERS = offlineNamesOf(EMBEDDING_PROVIDER_REGISTRY);
const OFFLINE_EMBEDDING_MODELS: readonly unknown[] = OFFLINE_EMBEDDING_PROVIDERS.flatMap(
  (p) => (EMBEDDING_PROVIDER_REGISTRY as Registry)[p]?.settings.model?.enum ?? [],
);
/** Vector stores in the data directory (from the stores' registry). */
const OFFLINE_VECTOR_STORES = offlineNamesOf(VECTOR_STORES);

/**
 * Refuses settings that make the server call other services or read its files,
 * unless `allow`: embedding providers other than the bundled model, vector stores
 * other than the embedded one, cross-encoder/Cohere/LLM rerankers and LLM query
 * expansion. A vector-store collection is never accepted (it could name another
 * KB's collection).
 * @throws HttpError 400 naming the field.
 */
export function checkTenantSettings(settings: Obj, allow: boolean): void {
  const { embedding, vectorStore, retrieval } = settings;
  if (isObject(vectorStore) && vectorStore.collection !== undefined) {
    throw new HttpError(
      400,
      "vectorStore.collection cannot be set through the API (each knowledge base gets its own)",
      "vectorStore.collection",
    );
  }
  // Extraction limits protect the server (zip bombs, huge PDFs): a tenant may lower them, never raise them.
  const extraction = settings.extraction;
  const limits = isObject(extraction) ? extraction.limits : undefined;
  if (isObject(limits)) {
    for (const [key, value] of Object.entries(limits)) {
      const cap = (DEFAULT_EXTRACTION_LIMITS as unknown as Record<string, number>)[key];
      if (cap !== undefined && typeof value === "number" && value > cap) {
        throw new HttpError(
          400,
          `extraction.limits.${key} cannot exceed the server's limit ${cap} (got ${value})`,
          `extraction.limits.${key}`,
        );
      }
    }
  }
  if (allow) return;
  const hint =
    "this server lets tenants use only offline services (start kl serve with --allow-tenant-services)";
  if (isObject(embedding)) {
    for (const [key, value] of Object.entries(embedding)) {
      const ok =
        (key === "provider" && OFFLINE_EMBEDDING_PROVIDERS.includes(String(value))) ||
        (key === "model" && OFFLINE_EMBEDDING_MODELS.includes(value));
      if (!ok) throw new HttpError(400, `embedding.${key} cannot be set: ${hint}`, `embedding.${key}`);
    }
  } else if (embedding !== undefined) throw new HttpError(400, "embedding must be an object", "embedding");
  if (isObject(vectorStore)) {
    for (const [key, value] of Object.entries(vectorStore)) {
      if (!(key === "type" && OFFLINE_VECTOR_STORES.includes(String(value))))
        throw new HttpError(400, `vectorStore.${key} cannot be set: ${hint}`, `vectorStore.${key}`);
    }
  } else if (vectorStore !== undefined)
    throw new HttpError(400, "vectorStore must be an object", "vectorStore");
  if (isObject(settings.chunking) && settings.chunking.contextLlm !== undefined)
    throw new HttpError(400, `chunking.contextLlm cannot be set: ${hint}`, "chunking.contextLlm");
  if (isObject(retrieval)) {
    if (retrieval.expansionLlm !== undefined)
      throw new HttpError(400, `retrieval.expansionLlm cannot be set: ${hint}`, "retrieval.expansionLlm");
    const reranker = retrieval.reranker;
    if (reranker !== undefined) {
      const type = isObject(reranker) ? reranker.type : undefined;
      if (!OFFLINE_RERANKERS.includes(String(type))) {
        throw new HttpError(
          400,
          `retrieval.reranker.type must be one of ${OFFLINE_RERANKERS.join(", ")} (got ${JSON.stringify(type)}): ${hint}`,
          "retrieval.reranker.type",
        );
      }
    }
  }
}
