/** `kl ingest`: extract, chunk, embed and store documents (stopped cleanly by SIGINT/SIGTERM). */

import type { Command } from "commander";
import { withKl } from "../data-dir.js";
import { formatIngestSummary, ProgressReporter } from "../format.js";
import { collect, metaOptions } from "../options.js";

/** Exit codes of a run stopped by a signal (128 + the signal's number, as shells report it). */
const SIGNAL_EXIT: Partial<Record<NodeJS.Signals, number>> & Record<"SIGINT" | "SIGTERM", number> = {
  SIGINT: 130,
  SIGTERM: 143,
};

/** Registers `kl ingest`. */
export function registerIngestCommand(program: Command): void {
  program
    .command("ingest")
    .argument(
      "<paths...>",
      "files and folders (Markdown, text, HTML, PDF, .eml, Slack export folders, source code)",
    )
    .description("extract, chunk, embed and store documents; unchanged files are skipped")
    .option("--kb <name>", "knowledge base", "default")
    .option("--no-embed", "index for keyword search only (no vectors)")
    .option(
      "--meta <key=value>",
      "user metadata on every document, kept until changed (repeatable; numbers and true/false are typed); filter on it with --where",
      collect,
      [],
    )
    .option("--unset-meta <key>", "remove a --meta key given at an earlier ingest (repeatable)", collect, [])
    .option(
      "--tag <tag>",
      'tag every document, kept until removed (repeatable); filter with --where \'{"tags":{"$contains":"t"}}\'',
      collect,
      [],
    )
    .option("--untag <tag>", "remove a tag given at an earlier ingest (repeatable)", collect, [])
    .option("--clear-meta", "forget every --meta and --tag given at earlier ingests (then apply this run's)")
    .option("--json", "print the summary as JSON")
    .action(async (paths: string[], o, command: Command) => {
      const metadata = metaOptions(o.meta, o.unsetMeta);
      const tags = o.tag.length > 0 ? (o.tag as string[]) : undefined;
      const removeTags = o.untag.length > 0 ? (o.untag as string[]) : undefined;
      // SIGINT/SIGTERM stop the run between sources and batches; a second one exits at once.
      const stop = new AbortController();
      let stoppedBy: NodeJS.Signals | undefined;
      const onSignal = (signal: NodeJS.Signals): void => {
        if (stoppedBy) {
          process.stderr.write(`\nkl ingest: ${signal} again: exiting now\n`);
          process.exit(SIGNAL_EXIT[signal]);
        }
        stoppedBy = signal;
        process.stderr.write(
          `\nkl ingest: ${signal}: stopping after the current batch (send it again to exit now)\n`,
        );
        stop.abort();
      };
      process.on("SIGINT", onSignal);
      process.on("SIGTERM", onSignal);
      try {
        await withKl(
          command,
          async (kl) => {
            const progress = ProgressReporter.forStderr(Boolean(o.json));
            try {
              const summary = await kl.ingest(paths, {
                kb: o.kb,
                embed: o.embed,
                metadata,
                tags,
                removeTags,
                replaceMetadata: o.clearMeta === true,
                onProgress: (e) => progress.update(e),
                signal: stop.signal,
              });
              progress.stop();
              if (o.json) console.log(JSON.stringify(summary, null, 2));
              else console.log(formatIngestSummary(summary));
              // Exit 1 when nothing could be ingested: every source failed, every path was
              // skipped, or the paths held no file at all (an empty folder: said on stderr).
              const ingested = summary.added + summary.updated + summary.unchanged;
              if (ingested === 0 && (summary.errors.length > 0 || summary.skipped.length > 0))
                process.exitCode = 1;
              else if (summary.files === 0 && summary.removed.length === 0 && !summary.stopped) {
                console.error(
                  `kl ingest: nothing to ingest: no files found in ${paths.map((p) => JSON.stringify(p)).join(", ")}`,
                );
                process.exitCode = 1;
              }
            } finally {
              progress.stop();
            }
          },
          { create: true },
        );
      } finally {
        process.off("SIGINT", onSignal);
        process.off("SIGTERM", onSignal);
      }
      // A stopped run exits as the signal would have: 130 (SIGINT), 143 (SIGTERM).
      if (stoppedBy) process.exitCode = SIGNAL_EXIT[stoppedBy];
    });
}
