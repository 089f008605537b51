/**
 * The readable text content of the MCP tool results (the structured content
 * carries the same data as JSON). Written for a model to read and cite.
 */
import { countOf } from "../display.js";
import type { IngestSummary } from "../ingest/pipeline.js";
import type { SearchResponse } from "../knowledge-layer.js";

/** Numbered passages, each with its citation, source and score, then any warnings. */
export function formatSearchText(r: SearchResponse): string {
  const where = `knowledge base${r.kbs.length > 1 ? "s" : ""} ${r.kbs.join(", ")}`;
  const lines: string[] = [];
  if (r.results.length === 0) {
    lines.push(`No passages found for "${r.query}" in ${where} (${r.mode}).`);
  } else {
    lines.push(
      `${r.results.length} passage${r.results.length === 1 ? "" : "s"} for "${r.query}" from ${where} (${r.mode}), best first. Cite them by their citation.`,
    );
    for (const x of r.results) {
      const s = x.source;
      const about = [
        s.title ? `"${s.title}"` : undefined,
        s.type,
        s.page !== undefined
          ? `page ${s.page}${s.pageEnd !== undefined && s.pageEnd !== s.page ? `–${s.pageEnd}` : ""}`
          : undefined,
        s.link,
        r.kbs.length > 1 ? `kb ${x.kb}` : undefined,
        `score ${formatScore(x.score)}`,
        x.belowThreshold ? "below the score threshold" : undefined,
      ].filter((v): v is string => v !== undefined);
      lines.push("", `[${x.rank}] ${x.citation}`, `Source: ${about.join(" · ")}`, "", x.text.trim());
    }
  }
  for (const w of r.warnings) lines.push("", `Warning: ${w}`);
  return lines.join("\n");
}

/** A score with four significant decimals (BM25 scores are unbounded, the others lie in [0, 1]). */
function formatScore(score: number): string {
  return Math.abs(score) >= 10 ? score.toFixed(2) : score.toFixed(4);
}

/** The ingest summary: counts, then errors, warnings, removed and skipped sources (at most `max` each). */
export function formatIngestText(s: IngestSummary, path: string, max = 50): string {
  const lines = [
    `Ingested ${path} into knowledge base "${s.kb}": ${countOf(s.files, "source")} — ${s.added} added, ${s.updated} updated, ` +
      `${s.unchanged} unchanged, ${s.removed.length} removed, ${countOf(s.errors.length, "error")}, ${s.skipped.length} skipped.`,
    `${countOf(s.documents, "document")} and ${countOf(s.chunks, "chunk")} written; embeddings ${s.embedded.computed} computed, ` +
      `${s.embedded.cached} from cache; ${(s.durationMs / 1000).toFixed(1)} s.`,
  ];
  const list = <T>(label: string, items: T[], show: (item: T) => string): void => {
    for (const item of items.slice(0, max)) lines.push(`${label} ${show(item)}`);
    if (items.length > max) lines.push(`… and ${items.length - max} more ${label.trim()} entries`);
  };
  list("error  ", s.errors, (e) => `${e.path}: ${e.reason}`);
  list("warning", s.warnings, (e) => `${e.path}: ${e.reason}`);
  list("removed", s.removed, (p) => p);
  list("skipped", s.skipped, (e) => `${e.path}: ${e.reason}`);
  return lines.join("\n");
}
