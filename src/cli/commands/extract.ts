/** `kl extract`: the text and metadata extracted from a file (nothing is stored). */

import { resolve } from "node:path";
import type { Command } from "commander";
import { extractFile } from "../../extract/index.js";
import { withKl } from "../data-dir.js";
import { formatExtracted } from "../format.js";
import { extractionOptions, mergeExtraction, withExtractionOptions } from "../options.js";

/** Registers `kl extract`. */
export function registerExtractCommand(program: Command): void {
  withExtractionOptions(program.command("extract"))
    .argument("<file>", "a file (or Slack export folder or .zip) to extract")
    .description("print the text and metadata extracted from a file (nothing is stored)")
    .option("--kb <name>", "use this knowledge base's extraction settings")
    .option("--json", "print JSON: documents with uri, metadata, text, segments and warnings")
    .action(async (file: string, o, command: Command) => {
      const base = o.kb
        ? await withKl(command, async (kl) => (await kl.getKb(o.kb)).config.extraction)
        : undefined;
      const docs = await extractFile(resolve(file), undefined, mergeExtraction(base, extractionOptions(o)));
      if (o.json) {
        console.log(JSON.stringify({ file: resolve(file), documents: docs }, null, 2));
        return;
      }
      console.log(formatExtracted(docs));
    });
}
