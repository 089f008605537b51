/** `kl docs`: list, show and remove documents. */

import { createInterface } from "node:readline/promises";
import type { Command } from "commander";
import { countOf, displayName } from "../../display.js";
import { KnowledgeLayerError, UsageError } from "../../errors.js";
import { documentAttribution } from "../../retrieve/attribution.js";
import { type Filter, isEmptyFilter, parseFilterJson } from "../../retrieve/filter.js";
import { withKl } from "../data-dir.js";
import { int, whereFilter } from "../options.js";

/** Registers `kl docs list|show|rm`. */
export function registerDocsCommands(program: Command): void {
  const docs = program.command("docs").description("list, show and remove documents");

  docs
    .command("list")
    .description(
      "list documents (id, KB, type, chunks, source; --json adds source attributes and user metadata)",
    )
    .option("--kb <name>", "knowledge base (default: every KB)")
    .option("--where <json>", "only documents with a chunk matching this metadata filter")
    .option("--json", "print JSON")
    .action(async (o, command: Command) => {
      const filter = whereFilter(o.where);
      await withKl(command, async (kl) => {
        if (o.kb !== undefined) await kl.getKb(o.kb);
        const list = await kl.listDocuments({ kb: o.kb, filter, metadata: true });
        if (o.json) {
          // Each document with its source attributes (as search results show them, without
          // the chunk-level ones), which include its tags and user metadata.
          const documents = list.map(({ metadata, ...d }) => ({
            ...d,
            source: documentAttribution({ uri: d.uri, path: d.path, type: d.type, title: d.title, metadata }),
          }));
          console.log(JSON.stringify({ documents }, null, 2));
        } else {
          for (const d of list)
            console.log(
              `${String(d.id).padStart(6)}  ${d.kb}  ${d.type.padEnd(8)} ${String(d.chunkCount).padStart(4)} chunks  ${displayName(d.uri)}`,
            );
          console.log(countOf(list.length, "document"));
        }
      });
    });

  docs
    .command("show")
    .argument("<id>", "document id (from docs list)", int("<id>", 1, Number.MAX_SAFE_INTEGER))
    .description("show a document: source, metadata, chunk count")
    .option("--json", "print JSON")
    .action(async (id: number, o, command: Command) => {
      await withKl(command, async (kl) => {
        const doc = await kl.getDocument(id);
        if (!doc) throw new KnowledgeLayerError(`no document with id ${id}`);
        if (o.json) console.log(JSON.stringify(doc, null, 2));
        else {
          console.log(`document ${doc.id} in knowledge base "${doc.kb}"`);
          console.log(`  uri:      ${displayName(doc.uri)}`);
          console.log(`  type:     ${doc.type}${doc.title ? `   title: ${doc.title}` : ""}`);
          console.log(`  chunks:   ${doc.chunkCount}${doc.embedded ? "" : " (no vectors)"}`);
          console.log(`  ingested: ${doc.ingestedAt}`);
          console.log(`  metadata: ${JSON.stringify(doc.metadata)}`);
        }
      });
    });

  docs
    .command("rm")
    .argument("[ids...]", "document ids (from docs list)")
    .description(
      "remove documents (chunks, keyword postings and vectors) by id, or by --where after showing what matches",
    )
    .option("--kb <name>", "knowledge base (default: every KB)")
    .option("--where <json>", "remove every document with a chunk matching this metadata filter")
    .option(
      "--all",
      "remove every document in scope (--kb, else every KB); also needed when --where matches them all",
    )
    .option("--dry-run", "only list what would be removed")
    .option("-y, --yes", "remove without asking (required for --where when not on a terminal)")
    .option("--json", "print JSON")
    .action(async (ids: string[], o, command: Command) => {
      // --all alone means every document in scope (--where '{}').
      const text: string | undefined = o.where ?? (o.all && ids.length === 0 ? "{}" : undefined);
      const where = text === undefined ? undefined : parseFilterJson(text, "filter");
      const filter = text === undefined ? undefined : (JSON.parse(text) as Filter);
      if ((ids.length === 0) === (filter === undefined))
        throw new UsageError("docs rm: give document ids, --where or --all (ids do not go with the others)");
      const wanted = ids.map((x) => {
        const n = Number(x);
        if (!/^\d+$/.test(x) || !Number.isSafeInteger(n) || n < 1)
          throw new UsageError(`docs rm: "${x}" is not a document id`);
        return n;
      });
      await withKl(command, async (kl) => {
        if (o.kb !== undefined) await kl.getKb(o.kb);
        const targets = filter
          ? await kl.listDocuments({ kb: o.kb, filter })
          : (await Promise.all(wanted.map((id) => kl.getDocument(id, { kb: o.kb })))).filter(
              (d): d is NonNullable<typeof d> => d !== undefined,
            );
        const missing = wanted.filter((id) => !targets.some((d) => d.id === id));
        const scope = o.kb === undefined ? "every knowledge base" : `knowledge base "${o.kb}"`;
        // A filter that selects everything (`{}`, or a typo such as {"custmer": {"$ne": "x"}})
        // removes a whole KB: that takes --all besides --yes.
        let everything = false;
        if (where !== undefined) {
          const inScope = (await kl.listKbs())
            .filter((k) => o.kb === undefined || k.name === o.kb)
            .reduce((n, k) => n + k.counts.documents, 0);
          everything = isEmptyFilter(where) || (targets.length > 0 && targets.length === inScope);
        }
        const preview = (): void => {
          if (o.json) return;
          const shown = targets.slice(0, 20);
          for (const d of shown)
            console.log(`${String(d.id).padStart(6)}  ${d.kb}  ${d.type.padEnd(8)} ${displayName(d.uri)}`);
          if (targets.length > shown.length) console.log(`… and ${targets.length - shown.length} more`);
        };
        const report = (removed: number, dryRun: boolean): void => {
          if (o.json) {
            console.log(
              JSON.stringify(
                {
                  ...(dryRun ? { dryRun: true } : {}),
                  removed,
                  ids: targets.map((d) => d.id),
                  documents: targets.map((d) => ({ id: d.id, kb: d.kb, uri: d.uri, type: d.type })),
                  missing,
                },
                null,
                2,
              ),
            );
          } else if (dryRun) {
            preview();
            console.log(
              `would remove ${countOf(targets.length, "document")}${everything ? ` (every document in ${scope})` : ""}`,
            );
          } else {
            console.log(`removed ${countOf(removed, "document")}`);
          }
          if (missing.length > 0 && !o.json) console.log(`not found: ${missing.join(", ")}`);
          if (missing.length > 0) process.exitCode = 1;
        };
        if (o.dryRun) {
          report(0, true);
          return;
        }
        if (where !== undefined && targets.length > 0) {
          if (everything && !o.all) {
            report(0, true);
            throw new UsageError(
              `docs rm: the filter matches every document in ${scope} (${targets.length}); ` +
                `to remove them all, add --all --yes${o.kb === undefined ? " (or remove a KB with kl kb delete NAME)" : ""}`,
            );
          }
          if (!o.yes) {
            if (!process.stdin.isTTY || !process.stderr.isTTY || o.json) {
              report(0, true);
              throw new UsageError(
                `docs rm: --where selects ${countOf(targets.length, "document")}; ` +
                  `add --yes to remove ${targets.length === 1 ? "it" : "them"} (--dry-run lists them without asking)`,
              );
            }
            preview();
            if (
              !(await confirm(
                `remove ${targets.length === 1 ? "this document" : `these ${targets.length} documents`} from ${scope}? [y/N] `,
              ))
            ) {
              console.log("nothing removed");
              return;
            }
          }
        }
        const byKb = new Map<string, number[]>();
        for (const d of targets) byKb.set(d.kb, [...(byKb.get(d.kb) ?? []), d.id]);
        let removed = 0;
        for (const [kb, list] of byKb) removed += await kl.deleteDocuments(kb, list);
        report(removed, false);
      });
    });
}

/** Asks a yes/no question on the terminal (stderr); true only for an answer starting with y. */
async function confirm(question: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return /^\s*y/i.test(await rl.question(question));
  } finally {
    rl.close();
  }
}
