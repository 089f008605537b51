#!/usr/bin/env node
/**
 * The `kl` command: the program with its global options, each command group registered
 * from `commands/*.ts` (options shared between them in `options.ts`, the data directory
 * in `data-dir.ts`, output in `format.ts`), and the exit codes of errors.
 */
import { Command, CommanderError } from "commander";
import { KnowledgeLayerError, UsageError } from "../errors.js";
import { FilterError } from "../retrieve/filter.js";
import { errorText } from "../secrets.js";
import { registerApiKeyCommands } from "./commands/apikey.js";
import { registerChunkCommand } from "./commands/chunk.js";
import { registerDocsCommands } from "./commands/docs.js";
import { registerEvalCommands } from "./commands/eval.js";
import { registerExtractCommand } from "./commands/extract.js";
import { registerIngestCommand } from "./commands/ingest.js";
import { registerKbCommands } from "./commands/kb.js";
import { registerMcpCommand } from "./commands/mcp.js";
import { registerSearchCommand } from "./commands/search.js";
import { registerServeCommand } from "./commands/serve.js";

const VERSION = "0.1.0";

const program = new Command()
  .name("kl")
  .description("knowledge-layer: ingest documents into knowledge bases and retrieve attributed passages")
  .version(VERSION)
  .option("--data-dir <dir>", "data directory (default: $KL_HOME or ./.kl)")
  .showHelpAfterError()
  // Commander's usage errors (unknown option or command, missing argument, an option value
  // its parser refuses) are thrown instead of exiting 1; the handler at the end exits 2.
  // Set before any subcommand is made: subcommands inherit it.
  .exitOverride();

// The commands, in the order `kl --help` lists them (`commands/*.ts`).
registerKbCommands(program);
registerIngestCommand(program);
registerSearchCommand(program);
registerExtractCommand(program);
registerChunkCommand(program);
registerEvalCommands(program);
registerDocsCommands(program);
registerServeCommand(program);
registerApiKeyCommands(program);

registerMcpCommand(program);

// `kl chunk FILE | head` closes stdout early: end quietly instead of crashing on EPIPE.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code === "EPIPE") process.exit(0);
  throw error;
});

program.parseAsync(process.argv).catch((error: unknown) => {
  if (error instanceof CommanderError) {
    // Commander has printed the message (and the help hint). `--help` and `--version` end
    // with code 0; every other commander error is a usage error: exit 2.
    process.exitCode = error.exitCode === 0 ? 0 : 2;
    return;
  }
  if (error instanceof KnowledgeLayerError) {
    console.error(`kl: ${errorText(error)}`);
  } else {
    console.error(errorText(error, true));
  }
  // A malformed filter or a misused command line is a usage error.
  process.exitCode = error instanceof FilterError || error instanceof UsageError ? 2 : 1;
});
