/** `kl chunk`: the chunks a file would be split into (nothing is stored). */

import { resolve } from "node:path";
import { type Command, Option } from "commander";
import { createChunker } from "../../chunk/index.js";
import { validateChunkingConfig } from "../../chunk/spans.js";
import {
  CHUNKING_STRATEGIES,
  type ChunkingConfig,
  type ChunkingStrategy,
  defaultKbConfig,
  SIZE_UNITS,
  type SizeUnit,
} from "../../config.js";
import { createEmbedder } from "../../embed/index.js";
import { extractFile } from "../../extract/index.js";
import { withKl } from "../data-dir.js";
import { type ChunkedDocument, formatChunks } from "../format.js";
import {
  embeddingSemanticOptions,
  extractionOptions,
  int,
  mergeExtraction,
  withChunkingOptions,
  withExtractionOptions,
} from "../options.js";

/** Registers `kl chunk`. */
export function registerChunkCommand(program: Command): void {
  withExtractionOptions(withChunkingOptions(program.command("chunk")))
    .argument("<file>", "a file (or Slack export folder) to extract and chunk")
    .description("print the chunks a file would be split into (nothing is stored)")
    .addOption(
      new Option("--strategy <strategy>", "chunking strategy (default: the KB's, auto)").choices([
        ...CHUNKING_STRATEGIES,
      ]),
    )
    .option("--chunk-size <n>", "maximum chunk size in --unit", int("--chunk-size"))
    .option("--overlap <n>", "overlap between FIXED chunks in --unit", int("--overlap", 0))
    .option("--min-size <n>", "minimum chunk size in --unit", int("--min-size", 0))
    .addOption(new Option("--unit <unit>", "unit of sizes (default chars)").choices([...SIZE_UNITS]))
    .option("--kb <name>", "start from this knowledge base's chunking settings")
    .option("--json", "print JSON: documents with their chunks (text, body, start, end, …)")
    .action(async (file: string, o, command: Command) => {
      const base = o.kb
        ? await withKl(command, async (kl) => (await kl.getKb(o.kb)).config)
        : defaultKbConfig();
      const chunking: ChunkingConfig = { ...base.chunking };
      if (o.strategy) chunking.strategy = o.strategy as ChunkingStrategy;
      if (o.chunkSize !== undefined) chunking.chunkSize = o.chunkSize;
      if (o.overlap !== undefined) chunking.chunkOverlap = o.overlap;
      if (o.minSize !== undefined) chunking.minChunkSize = o.minSize;
      if (o.unit) chunking.unit = o.unit as SizeUnit;
      if (o.tokenizer) {
        chunking.tokenizer = o.tokenizer;
        // A tokenizer only means something for token sizes.
        if (!o.unit) chunking.unit = "tokens";
      }
      const es = embeddingSemanticOptions(o);
      if (es) chunking.embeddingSemantic = { ...chunking.embeddingSemantic, ...es };
      // A new --chunk-size scales the default overlap and minimum as `kl kb create` does.
      if (o.chunkSize !== undefined && o.overlap === undefined)
        chunking.chunkOverlap = Math.min(chunking.chunkOverlap, Math.floor(chunking.chunkSize / 10));
      if (o.chunkSize !== undefined && o.minSize === undefined)
        chunking.minChunkSize = Math.min(chunking.minChunkSize, Math.floor(chunking.chunkSize / 3));
      validateChunkingConfig(chunking);
      const embedder =
        chunking.strategy === "embedding_semantic" ? createEmbedder(base.embedding) : undefined;
      const chunker = createChunker(chunking, undefined, { embedder, batchSize: base.embedding.batchSize });
      const docs = await extractFile(
        resolve(file),
        undefined,
        mergeExtraction(base.extraction, extractionOptions(o)),
      );
      const out: ChunkedDocument[] = [];
      for (const doc of docs) out.push({ doc, chunks: await chunker.chunk(doc) });
      if (o.json) {
        console.log(
          JSON.stringify(
            {
              file: resolve(file),
              chunking,
              documents: out.map(({ doc, chunks }) => ({
                uri: doc.uri,
                type: doc.metadata.type,
                title: doc.metadata.title,
                characters: doc.text.length,
                chunks: chunks.map((c) => ({
                  text: c.text,
                  body: doc.text.slice(c.start, c.end),
                  start: c.start,
                  end: c.end,
                  chunkIndex: c.chunkIndex,
                  totalChunks: c.totalChunks,
                  chunkType: c.chunkType,
                  contextPrefix: c.contextPrefix,
                  size: chunker.limits.measure.count(c.text),
                  metadata: c.metadata,
                })),
              })),
            },
            null,
            2,
          ),
        );
      } else {
        console.log(formatChunks(out, chunker.limits.measure));
      }
    });
}
