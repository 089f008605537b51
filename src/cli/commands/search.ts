/** `kl search`: ranked, attributed passages from one or more knowledge bases. */

import type { Command } from "commander";
import { RETRIEVAL_MODES, type RetrievalMode } from "../../config.js";
import { MAX_TOP_K } from "../../knowledge-layer.js";
import { withKl } from "../data-dir.js";
import { formatSearchResults } from "../format.js";
import { collect, int, parseMode, weight, whereFilter } from "../options.js";

/** Registers `kl search`. */
export function registerSearchCommand(program: Command): void {
  program
    .command("search")
    .argument("<query>", "question or keywords")
    .description("retrieve ranked, attributed passages")
    .option("--kb <name>", "knowledge base (repeat to search several)", collect, [])
    .option("-k, --top-k <n>", "number of results", int("--top-k", 1, MAX_TOP_K))
    .option(
      "--mode <mode>",
      `retrieval strategy: ${RETRIEVAL_MODES.join(", ")} (default from the KB: hybrid_rerank)`,
      parseMode,
    )
    .option(
      "--min-score <s>",
      "drop results below this final score (0 = no threshold)",
      weight("--min-score"),
    )
    .option("--fallback", "when nothing passes --min-score, return the best results flagged belowThreshold")
    .option("--explain", "show per result the vector and BM25 rank/score, fused, rerank and final scores")
    .option(
      "--where <json>",
      `metadata filter, e.g. '{"type":"email","date":{"$gte":"2024-03-01"}}' (see README "Filters")`,
    )
    .option("--json", "print the stable JSON shape (see README)")
    .action(async (query: string, o, command: Command) => {
      const filter = whereFilter(o.where);
      await withKl(command, async (kl) => {
        const response = await kl.search(query, {
          filter,
          kbs: o.kb,
          topK: o.topK,
          mode: o.mode as RetrievalMode | undefined,
          minScore: o.minScore,
          fallbackBelowThreshold: o.fallback === true ? true : undefined,
          explain: o.explain === true,
        });
        if (o.json) console.log(JSON.stringify(response, null, 2));
        else console.log(formatSearchResults(response));
      });
    });
}
