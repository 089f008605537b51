/**
 * `kl kb`: create, list, show and delete knowledge bases; migrate one to another vector
 * store; re-embed one with another model.
 */

import { type Command, Option } from "commander";
import {
  CHUNKING_STRATEGIES,
  type ChunkingStrategy,
  RETRIEVAL_MODES,
  type RetrievalMode,
  SIZE_UNITS,
  type SizeUnit,
  VECTOR_STORE_TYPES,
} from "../../config.js";
import { EMBEDDING_PROVIDERS } from "../../embed/index.js";
import { KnowledgeLayerError } from "../../errors.js";
import { type KnowledgeLayer, MAX_TOP_K } from "../../knowledge-layer.js";
import { ANALYZERS, type Analyzer } from "../../retrieve/tokenizer.js";
import { redactSecrets } from "../../secrets.js";
import { withKl } from "../data-dir.js";
import { formatKb, ProgressReporter } from "../format.js";
import {
  embeddingOption,
  embeddingSemanticOptions,
  extractionOptions,
  int,
  parseMode,
  storeOption,
  weight,
  withChunkingOptions,
  withExtractionOptions,
  withStoreOptions,
} from "../options.js";
import {
  embeddingModelHelp,
  RERANKER_TYPES,
  rerankerHelp,
  rerankerOption,
  rerankerSettingHelp,
} from "../stage-options.js";

/** Registers `kl kb create|list|show|delete|migrate|reembed`. */
export function registerKbCommands(program: Command): void {
  const kb = program.command("kb").description("manage knowledge bases");

  withStoreOptions(withExtractionOptions(withChunkingOptions(kb.command("create"))), "store")
    .argument("<name>", "knowledge base name")
    .description("create a knowledge base with its own chunking, embedding and retrieval settings")
    .addOption(new Option("--strategy <strategy>", "chunking strategy").choices([...CHUNKING_STRATEGIES]))
    .option("--chunk-size <n>", "maximum chunk size in --unit (default 1500)", int("--chunk-size"))
    .option(
      "--chunk-overlap <n>",
      "overlap between chunks in --unit (default 150)",
      int("--chunk-overlap", 0),
    )
    .option("--min-chunk-size <n>", "minimum chunk size in --unit (default 500)", int("--min-chunk-size", 0))
    .addOption(new Option("--unit <unit>", "unit of chunk sizes (default chars)").choices([...SIZE_UNITS]))
    .addOption(
      new Option(
        "--embedding-provider <name>",
        "embedding provider (default bundled, the offline model)",
      ).choices([...EMBEDDING_PROVIDERS]),
    )
    .option("--embedding-model <model>", embeddingModelHelp())
    .option("--embedding-url <url>", "embedding endpoint base URL (openai-compatible, TEI, proxies)")
    .option(
      "--embedding-api-key-env <name>",
      "environment variable holding the endpoint's API key (read now and stored with the KB, masked in output)",
    )
    .option(
      "--embedding-dimension <n>",
      "expected vector length (also sent to models that accept it)",
      int("--embedding-dimension"),
    )
    .addOption(
      new Option(
        "--embedding-encoding <format>",
        "openai, openai-compatible: encoding_format of the requests (default float; base64 where the server supports it)",
      ).choices(["float", "base64"]),
    )
    .option("--mode <mode>", `default retrieval strategy: ${RETRIEVAL_MODES.join(", ")}`, parseMode)
    .option("--top-k <n>", "results returned by default (default 5)", int("--top-k", 1, MAX_TOP_K))
    .addOption(
      new Option(
        "--fusion <how>",
        "hybrid fusion: weighted (default: min-max normalised scores) or rrf (reciprocal rank fusion)",
      ).choices(["rrf", "weighted"]),
    )
    .addOption(new Option("--reranker <type>", rerankerHelp()).choices([...RERANKER_TYPES]))
    .option("--reranker-model <model>", rerankerSettingHelp("model"))
    .option("--reranker-url <url>", rerankerSettingHelp("baseUrl"))
    .option(
      "--min-score <s>",
      "default minimum final score of results (0 = no threshold)",
      weight("--min-score"),
    )
    .option(
      "--vector-weight <w>",
      "weight of the vector list in hybrid fusion (default 0.15; 0 ignores it)",
      weight("--vector-weight"),
    )
    .option(
      "--keyword-weight <w>",
      "weight of the BM25 list in hybrid fusion (default 1; 0 ignores it)",
      weight("--keyword-weight"),
    )
    .addOption(
      new Option(
        "--analyzer <name>",
        "BM25 analyzer (default english: stop words + Porter stemming)",
      ).choices([...ANALYZERS]),
    )
    .option("--json", "print the configuration as JSON")
    .action(async (name: string, o, command: Command) => {
      await withKl(
        command,
        async (kl) => {
          const record = await kl.createKb(name, {
            extraction: extractionOptions(o),
            chunking: {
              strategy: o.strategy as ChunkingStrategy | undefined,
              chunkSize: o.chunkSize,
              chunkOverlap: o.chunkOverlap,
              minChunkSize: o.minChunkSize,
              unit: (o.unit ?? (o.tokenizer ? "tokens" : undefined)) as SizeUnit | undefined,
              tokenizer: o.tokenizer,
              embeddingSemantic: embeddingSemanticOptions(o),
            },
            embedding: embeddingOption(o),
            vectorStore: storeOption(o, "store"),
            retrieval: {
              mode: o.mode as RetrievalMode | undefined,
              topK: o.topK,
              analyzer: o.analyzer as Analyzer | undefined,
              vectorWeight: o.vectorWeight,
              keywordWeight: o.keywordWeight,
              fusion: o.fusion as "rrf" | "weighted" | undefined,
              minScore: o.minScore,
              reranker: rerankerOption(o),
            },
          });
          if (o.json) console.log(JSON.stringify(redactSecrets(record.config), null, 2));
          else console.log(`created knowledge base "${name}"\n${formatKb(record, await kl.counts(name))}`);
        },
        { create: true },
      );
    });

  kb.command("list")
    .description("list knowledge bases with document and chunk counts")
    .option("--json", "print JSON")
    .action(async (o, command: Command) => {
      await withKl(command, async (kl) => {
        const kbs = await kl.listKbs();
        if (o.json) {
          console.log(
            JSON.stringify(
              kbs.map((k) => ({
                name: k.name,
                createdAt: k.createdAt,
                ...k.counts,
                config: redactSecrets(k.config),
              })),
              null,
              2,
            ),
          );
          return;
        }
        for (const k of kbs) {
          const c = k.config.chunking;
          console.log(
            `${k.name.padEnd(20)} ${String(k.counts.documents).padStart(6)} docs ${String(k.counts.chunks).padStart(7)} chunks  ${c.strategy}/${c.chunkSize}  ${k.config.embedding.provider}:${k.config.embedding.model}  ${k.config.retrieval.mode}`,
          );
        }
      });
    });

  kb.command("show")
    .argument("[name]", "knowledge base name", "default")
    .description("show a knowledge base's configuration and counts")
    .option("--json", "print JSON")
    .action(async (name: string, o, command: Command) => {
      await withKl(command, async (kl) => {
        const record = await kl.getKb(name);
        const counts = await kl.counts(name);
        if (o.json)
          console.log(JSON.stringify({ ...record, config: redactSecrets(record.config), counts }, null, 2));
        else console.log(formatKb(record, counts));
      });
    });

  kb.command("delete")
    .argument("<name>", "knowledge base name")
    .description(
      "delete a knowledge base with its documents, chunks and vectors (the embedding cache is kept)",
    )
    .option("--force", "delete it even when its vector store cannot be reached (its collection stays there)")
    .action(async (name: string, _o, command: Command) => {
      await withKl(command, async (kl) => {
        const counts = await kl.counts(name);
        const { warning } = await kl.deleteKb(name, { force: Boolean(_o.force) });
        if (warning) console.error(`warning: ${warning}`);
        console.log(
          `deleted knowledge base "${name}" (${counts.documents} documents, ${counts.chunks} chunks)`,
        );
      });
    });

  withStoreOptions(kb.command("migrate"), "to")
    .argument("<name>", "knowledge base name")
    .description(
      "copy a KB's vectors to another vector store without re-embedding, verify the count, then switch the KB to it (resumable: run again after an interruption)",
    )
    .option("--drop-source", "delete the old collection after the switch")
    .option("--json", "print the result as JSON")
    .action(async (name: string, o, command: Command) => {
      const to = storeOption(o, "to");
      if (!to)
        throw new KnowledgeLayerError(
          `kb migrate: --to <type> is required (${VECTOR_STORE_TYPES.join(", ")})`,
        );
      await withKl(command, async (kl) => {
        const progress = ProgressReporter.forStderr(Boolean(o.json));
        let result: Awaited<ReturnType<KnowledgeLayer["migrateKb"]>>;
        try {
          result = await kl.migrateKb(name, to, {
            dropSource: Boolean(o.dropSource),
            onProgress: (p) =>
              progress.update({ phase: "vectors", label: "migrate", done: p.done, total: p.total }),
          });
        } finally {
          progress.stop();
        }
        if (o.json) console.log(JSON.stringify(result, null, 2));
        else
          console.log(
            `migrated knowledge base "${name}" from ${result.from} to ${result.to}: ${result.done} vectors verified (${result.written} copied, ${result.skipped} already there)`,
          );
      });
    });

  kb.command("reembed")
    .argument("<name>", "knowledge base name")
    .description(
      "embed a KB's chunks with another model into a new collection, verify, switch the KB to it and drop the old collection (resumable)",
    )
    .requiredOption("--embedding-provider <name>", `embedding provider: ${EMBEDDING_PROVIDERS.join(", ")}`)
    .option("--embedding-model <model>", "model (default per provider)")
    .option("--embedding-url <url>", "endpoint base URL (openai-compatible, TEI, proxies)")
    .option("--embedding-api-key-env <name>", "environment variable holding the endpoint's API key")
    .option("--embedding-dimension <n>", "expected vector length", int("--embedding-dimension"))
    .addOption(
      new Option(
        "--embedding-encoding <format>",
        "openai, openai-compatible: encoding_format of the requests",
      ).choices(["float", "base64"]),
    )
    .option("--keep-old", "keep the old model's collection")
    .option("--json", "print the result as JSON")
    .action(async (name: string, o, command: Command) => {
      if (!(EMBEDDING_PROVIDERS as readonly string[]).includes(o.embeddingProvider)) {
        throw new KnowledgeLayerError(
          `kb reembed: unknown --embedding-provider "${o.embeddingProvider}"; use one of ${EMBEDDING_PROVIDERS.join(", ")}`,
        );
      }
      await withKl(command, async (kl) => {
        const progress = ProgressReporter.forStderr(Boolean(o.json));
        let result: Awaited<ReturnType<KnowledgeLayer["reembedKb"]>>;
        try {
          result = await kl.reembedKb(name, embeddingOption(o), {
            keepOld: Boolean(o.keepOld),
            onProgress: (p) =>
              progress.update({ phase: "vectors", label: "reembed", done: p.done, total: p.total }),
          });
        } finally {
          progress.stop();
        }
        if (o.json) console.log(JSON.stringify(result, null, 2));
        else {
          const e = (await kl.getKb(name)).config.embedding;
          console.log(
            `re-embedded knowledge base "${name}" with ${e.provider}:${e.model} (${result.dimension}-d) into collection "${result.collection}": ${result.done} vectors verified (${result.written} embedded, ${result.skipped} already there)`,
          );
        }
      });
    });
}
