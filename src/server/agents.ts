/**
 * Agents as the HTTP API uses them: the per-KB search overrides of an agent's
 * attachments. Agents themselves are stored by the library and reached through
 * the facade (`KnowledgeLayer.createAgent`, `getAgent`, …).
 */
import { parseRetrievalMode } from "../config.js";
import type { Agent, Attachment, AttachmentRetrievalConfig, KnowledgeLayer } from "../knowledge-layer.js";
import { mapFilterValues } from "../retrieve/filter.js";
import type { KbRetrievalOverrides } from "../retrieve/search.js";

export type { Agent, Attachment, AttachmentRetrievalConfig } from "../knowledge-layer.js";

/**
 * Per-KB search overrides (`perKb`) from an attachment's retrieval settings; `kbName` maps
 * the tenant's KB names in the fixed filter's `kb` conditions to catalog names.
 */
export function overridesOf(
  config: AttachmentRetrievalConfig,
  kbName: (name: string) => string = (name) => name,
): KbRetrievalOverrides {
  const out: KbRetrievalOverrides = {};
  if (config.filter !== undefined) out.filter = mapFilterValues(config.filter, "kb", kbName);
  if (config.maxResults !== undefined) out.maxResults = config.maxResults;
  if (config.minScore !== undefined) out.minScore = config.minScore;
  if (config.mode !== undefined) out.mode = parseRetrievalMode(config.mode);
  return out;
}

/** The attachments of `agent` whose knowledge base still exists, in the agent's order. */
export async function attachedKbs(kl: KnowledgeLayer, agent: Agent): Promise<Attachment[]> {
  const found = await Promise.all(agent.kbs.map((a) => kl.findKb(a.kb)));
  return agent.kbs.filter((_, i) => found[i] !== undefined);
}
