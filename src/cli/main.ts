#!/usr/bin/env node
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline/promises";
import { Command, CommanderError, InvalidArgumentError, Option } from "commander";
import { createChunker } from "../chunk/index.js";
import { TOKENIZERS } from "../chunk/measure.js";
import { validateChunkingConfig } from "../chunk/spans.js";
import {
  CHUNKING_STRATEGIES,
  type ChunkingConfig,
  type ChunkingStrategy,
  defaultKbConfig,
  type EmbeddingSemanticOptions,
  type KnowledgeBaseConfig,
  parseRetrievalMode,
  RETRIEVAL_MODES,
  type RetrievalMode,
  SIZE_UNITS,
  type SizeUnit,
  VECTOR_STORE_TYPES,
  type VectorStoreConfig,
  type VectorStoreType,
} from "../config.js";
import { displayName } from "../display.js";
import { createEmbedder, EMBEDDING_PROVIDERS } from "../embed/index.js";
import { KnowledgeLayerError, UsageError } from "../errors.js";
import { evaluateBeir } from "../eval/beir.js";
import { evaluatePages, formatPageReport } from "../eval/pages.js";
import { type ExtractOptions, extractFile } from "../extract/index.js";
import { typedMetaValue } from "../ingest/pipeline.js";
import { KnowledgeLayer, MAX_TOP_K } from "../knowledge-layer.js";
import { documentAttribution } from "../retrieve/attribution.js";
import {
  type Filter,
  FilterError,
  type FilterScalar,
  isEmptyFilter,
  parseFilterJson,
} from "../retrieve/filter.js";
import { ANALYZERS, type Analyzer } from "../retrieve/tokenizer.js";
import { errorText, redactSecrets } from "../secrets.js";
import { registerMcpCommand } from "./commands/mcp.js";
import { registerServeCommands } from "./commands/serve.js";
import {
  type ChunkedDocument,
  formatChunks,
  formatExtracted,
  formatIngestSummary,
  formatKb,
  formatSearchResults,
  ProgressReporter,
} from "./format.js";
import {
  embeddingModelHelp,
  RERANKER_TYPES,
  rerankerHelp,
  rerankerOption,
  rerankerSettingHelp,
  storeSettingFlags,
} from "./stage-options.js";

const VERSION = "0.1.0";

const int =
  (name: string, min = 1, max = Number.MAX_SAFE_INTEGER) =>
  (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(
        max === Number.MAX_SAFE_INTEGER
          ? `${name} must be an integer >= ${min}`
          : `${name} must be an integer from ${min} to ${max}`,
      );
    }
    return n;
  };

const weight =
  (name: string) =>
  (value: string): number => {
    const n = Number(value);
    if (value.trim() === "" || !Number.isFinite(n) || n < 0)
      throw new InvalidArgumentError(`${name} must be a number >= 0`);
    return n;
  };

/** Exit codes of a run stopped by a signal (128 + the signal's number, as shells report it). */
const SIGNAL_EXIT: Partial<Record<NodeJS.Signals, number>> & Record<"SIGINT" | "SIGTERM", number> = {
  SIGINT: 130,
  SIGTERM: 143,
};

const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

const cosine = (value: string): number => {
  const n = Number(value);
  if (value.trim() === "" || !Number.isFinite(n) || n < -1 || n > 1)
    throw new InvalidArgumentError("--threshold must be a cosine similarity from -1 to 1");
  return n;
};

const percentile = (value: string): number => {
  const n = Number(value);
  if (value.trim() === "" || !Number.isFinite(n) || n <= 0 || n >= 100)
    throw new InvalidArgumentError("--percentile must be a number between 0 and 100 (exclusive)");
  return n;
};

/** The EMBEDDING_SEMANTIC options given on the command line, or undefined when none. */
function embeddingSemanticOptions(o: {
  breakpoint?: string;
  threshold?: number;
  percentile?: number;
}): Partial<EmbeddingSemanticOptions> | undefined {
  const out: Partial<EmbeddingSemanticOptions> = {};
  if (o.breakpoint) out.breakpoint = o.breakpoint as EmbeddingSemanticOptions["breakpoint"];
  if (o.threshold !== undefined) out.threshold = o.threshold;
  if (o.percentile !== undefined) out.percentile = o.percentile;
  // A percentile alone means percentile mode.
  if (o.percentile !== undefined && !o.breakpoint) out.breakpoint = "percentile";
  return Object.keys(out).length > 0 ? out : undefined;
}

function parseModes(value: string): RetrievalMode[] {
  return value.split(",").map((m) => parseMode(m.trim()));
}

/** One retrieval mode from the command line (`vector` is accepted for `vector_only`). */
function parseMode(value: string): RetrievalMode {
  const mode = parseRetrievalMode(value);
  if (mode === undefined) {
    throw new InvalidArgumentError(`unknown mode "${value}"; use ${RETRIEVAL_MODES.join(", ")}`);
  }
  return mode;
}

/** The filter of `--where '<json>'` (validated; a malformed one is a FilterError, exit code 2). */
function whereFilter(text: string | undefined): Filter | undefined {
  if (text === undefined) return undefined;
  parseFilterJson(text, "filter");
  return JSON.parse(text) as Filter;
}

/**
 * `--meta key=value` options as user metadata, typed by `typedMetaValue`; `--unset-meta key`
 * options as keys to remove (`null`).
 * @throws UsageError for a pair without `=` or a key given twice.
 */
function metaOptions(pairs: string[], unset: string[] = []): Record<string, FilterScalar | null> | undefined {
  if (pairs.length === 0 && unset.length === 0) return undefined;
  const out: Record<string, FilterScalar | null> = {};
  for (const pair of pairs) {
    const eq = pair.indexOf("=");
    if (eq <= 0) throw new UsageError(`--meta ${pair}: expected key=value`);
    const key = pair.slice(0, eq).trim();
    if (Object.hasOwn(out, key)) throw new UsageError(`--meta ${key}: given twice`);
    out[key] = typedMetaValue(pair.slice(eq + 1));
  }
  for (const key of unset) {
    if (Object.hasOwn(out, key)) throw new UsageError(`--unset-meta ${key}: also given with --meta`);
    out[key] = null;
  }
  return out;
}

/**
 * Opens the data directory of `--data-dir` (or `$KL_HOME`, `./.kl`). Only commands
 * that write data pass `create`; the others refuse a missing one (see `OpenOptions.create`).
 */
function open(command: Command, create: boolean): KnowledgeLayer {
  const opts = command.optsWithGlobals() as { dataDir?: string };
  return KnowledgeLayer.open({ dataDir: opts.dataDir, create });
}

/** Runs `fn` with the data directory open (see {@link open}), closing it afterwards. */
async function withKl<T>(
  command: Command,
  fn: (kl: KnowledgeLayer) => Promise<T> | T,
  options: { create?: boolean } = {},
): Promise<T> {
  const kl = open(command, options.create === true);
  try {
    return await fn(kl);
  } finally {
    await kl.close();
  }
}

/** Adds the vector-store options shared by `kb create` and `kb migrate` (`prefix` `store` or `to`). */
function withStoreOptions(command: Command, prefix: "store" | "to"): Command {
  const typeFlag = prefix === "store" ? "--store <type>" : "--to <type>";
  command.addOption(
    new Option(
      typeFlag,
      `vector store${prefix === "store" ? " (default sqlite, the embedded one)" : ""}`,
    ).choices([...VECTOR_STORE_TYPES]),
  );
  // One flag per setting of the stores' registry (API keys come from the environment).
  for (const f of storeSettingFlags(prefix)) {
    const option = new Option(`--${prefix}-${f.flag} ${f.placeholder}`, f.help);
    command.addOption(f.parse ? option.argParser(f.parse) : option);
  }
  return command;
}

/** The vector-store config of {@link withStoreOptions}' flags, or undefined when no type is given. */
function storeOption(o: Record<string, unknown>, prefix: "store" | "to"): VectorStoreConfig | undefined {
  const type = o[prefix] as VectorStoreType | undefined;
  if (!type) return undefined;
  const key = (name: string) => `${prefix}${name}`;
  const config: Record<string, unknown> = { type };
  for (const f of storeSettingFlags(prefix)) {
    const value = o[key(f.attribute)];
    if (value !== undefined) config[f.setting] = value;
  }
  return config as unknown as VectorStoreConfig;
}

/** The embedding settings of `--embedding-*` flags (keys come from the environment, not flags). */
function embeddingOption(o: {
  embeddingProvider?: string;
  embeddingModel?: string;
  embeddingUrl?: string;
  embeddingApiKeyEnv?: string;
  embeddingDimension?: number;
}): Partial<KnowledgeBaseConfig["embedding"]> {
  const out: Record<string, unknown> = {};
  if (o.embeddingProvider) out.provider = o.embeddingProvider;
  if (o.embeddingModel) out.model = o.embeddingModel;
  if (o.embeddingUrl) out.baseUrl = o.embeddingUrl;
  if (o.embeddingApiKeyEnv) {
    const key = process.env[o.embeddingApiKeyEnv];
    if (!key) throw new KnowledgeLayerError(`--embedding-api-key-env: $${o.embeddingApiKeyEnv} is not set`);
    out.apiKey = key;
  }
  if (o.embeddingDimension !== undefined) out.dimension = o.embeddingDimension;
  return out as Partial<KnowledgeBaseConfig["embedding"]>;
}

/** Adds the tokenizer and EMBEDDING_SEMANTIC options shared by `kb create` and `chunk`. */
function withChunkingOptions(command: Command): Command {
  return command
    .addOption(
      new Option(
        "--tokenizer <name>",
        "tokenizer for token sizes; implies --unit tokens (default o200k_base)",
      ).choices([...TOKENIZERS]),
    )
    .addOption(
      new Option(
        "--breakpoint <mode>",
        "embedding_semantic: cut below a cosine threshold or above a distance percentile",
      ).choices(["threshold", "percentile"]),
    )
    .option(
      "--threshold <cosine>",
      "embedding_semantic: neighbour cosine below which to cut (default 0.75)",
      cosine,
    )
    .option(
      "--percentile <p>",
      "embedding_semantic: distance percentile above which to cut (default 95)",
      percentile,
    );
}

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

const megabytes = (value: string): number => {
  const n = Number(value);
  if (value.trim() === "" || !Number.isFinite(n) || n <= 0)
    throw new InvalidArgumentError("--max-file-mb must be a positive number of MiB");
  return Math.round(n * 1024 * 1024);
};

/** Adds the extraction options shared by `kb create`, `extract` and `chunk`. */
function withExtractionOptions(command: Command): Command {
  return command
    .option("--max-file-mb <n>", "largest file to read, in MiB (default 100)", megabytes)
    .option("--max-pages <n>", "refuse PDFs with more pages (default 2000)", int("--max-pages", 1))
    .option(
      "--slack-workspace-url <url>",
      "Slack workspace URL (https://acme.slack.com): message permalinks in metadata and citations",
    )
    .option("--keep-system-messages", "Slack: keep join/leave/topic messages (dropped by default)")
    .option("--no-attachments", "email: list attachments but do not extract them as documents");
}

/** The extraction options given on the command line, or undefined when none. */
function extractionOptions(o: {
  maxFileMb?: number;
  maxPages?: number;
  slackWorkspaceUrl?: string;
  keepSystemMessages?: boolean;
  attachments?: boolean;
}): ExtractOptions | undefined {
  const out: ExtractOptions = {};
  if (o.maxFileMb !== undefined || o.maxPages !== undefined) {
    out.limits = {};
    if (o.maxFileMb !== undefined) out.limits.maxFileBytes = o.maxFileMb;
    if (o.maxPages !== undefined) out.limits.maxPages = o.maxPages;
  }
  if (o.slackWorkspaceUrl !== undefined || o.keepSystemMessages) {
    out.slack = {};
    if (o.slackWorkspaceUrl !== undefined) out.slack.workspaceUrl = o.slackWorkspaceUrl.replace(/\/+$/, "");
    if (o.keepSystemMessages) out.slack.keepSystemMessages = true;
  }
  if (o.attachments === false) out.email = { attachments: false };
  return Object.keys(out).length > 0 ? out : undefined;
}

/** `base` with `extra` laid over it, section by section. */
function mergeExtraction(
  base: ExtractOptions | undefined,
  extra: ExtractOptions | undefined,
): ExtractOptions {
  return {
    limits: { ...base?.limits, ...extra?.limits },
    slack: { ...base?.slack, ...extra?.slack },
    email: { ...base?.email, ...extra?.email },
  };
}

const kb = program.command("kb").description("manage knowledge bases");

withStoreOptions(withExtractionOptions(withChunkingOptions(kb.command("create"))), "store")
  .argument("<name>", "knowledge base name")
  .description("create a knowledge base with its own chunking, embedding and retrieval settings")
  .addOption(new Option("--strategy <strategy>", "chunking strategy").choices([...CHUNKING_STRATEGIES]))
  .option("--chunk-size <n>", "maximum chunk size in --unit (default 1500)", int("--chunk-size"))
  .option("--chunk-overlap <n>", "overlap between chunks in --unit (default 150)", int("--chunk-overlap", 0))
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
    new Option("--analyzer <name>", "BM25 analyzer (default english: stop words + Porter stemming)").choices([
      ...ANALYZERS,
    ]),
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
  .description("delete a knowledge base with its documents, chunks and vectors (the embedding cache is kept)")
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
      throw new KnowledgeLayerError(`kb migrate: --to <type> is required (${VECTOR_STORE_TYPES.join(", ")})`);
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
            // Exit 1 when nothing could be ingested: every source failed, or every path was skipped.
            const ingested = summary.added + summary.updated + summary.unchanged;
            if (ingested === 0 && (summary.errors.length > 0 || summary.skipped.length > 0))
              process.exitCode = 1;
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
  .option("--min-score <s>", "drop results below this final score (0 = no threshold)", weight("--min-score"))
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
    const embedder = chunking.strategy === "embedding_semantic" ? createEmbedder(base.embedding) : undefined;
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

const evalCmd = program.command("eval").description("evaluate retrieval quality");
evalCmd
  .command("beir")
  .argument("<dir>", "BEIR-layout folder: corpus.jsonl, queries.jsonl, qrels/test.tsv")
  .description("run a BEIR benchmark through ingest and search; print nDCG@10, Recall@100, MRR@10 per mode")
  .option("--mode <modes>", "comma-separated modes", parseModes, [
    "keyword",
    "vector_only",
    "hybrid",
    "hybrid_rerank",
  ] as RetrievalMode[])
  .option("--kb <name>", "knowledge base to use (default beir-<dataset>)")
  .option("--chunk-size <chars>", "chunk size of a newly created KB (default 10000)", int("--chunk-size"))
  .addOption(
    new Option("--analyzer <name>", "BM25 analyzer of a newly created KB (default english)").choices([
      ...ANALYZERS,
    ]),
  )
  .option("--limit <n>", "evaluate only the first n queries", int("--limit"))
  .option("--split <name>", "qrels split (default test, else dev)")
  .option("--json", "print JSON")
  .action(async (dir: string, o, command: Command) => {
    await withKl(
      command,
      async (kl) => {
        const progress = ProgressReporter.forStderr(Boolean(o.json));
        const report = await evaluateBeir(kl, dir, {
          split: o.split,
          modes: o.mode,
          kb: o.kb,
          chunkSize: o.chunkSize,
          limit: o.limit,
          analyzer: o.analyzer as Analyzer | undefined,
          onProgress: (e) => progress.update(e),
        });
        progress.stop();
        if (o.json) {
          console.log(JSON.stringify(report, null, 2));
          return;
        }
        const ing = report.ingest[0];
        if (ing) {
          console.log(
            `ingest: ${report.documents} documents, ${ing.added + ing.updated} (re)indexed, ${ing.unchanged} unchanged, ` +
              `${ing.embedded.computed} embedded, ${ing.embedded.cached} from cache, ${(ing.durationMs / 1000).toFixed(1)} s`,
          );
        }
        console.log(`dataset ${report.dataset} (kb ${report.kb})`);
        console.log(
          "mode          queries  nDCG@10  Recall@100  MRR@10  ms/query  p50 ms  p95 ms  cached p50/p95 ms",
        );
        for (const r of report.results) {
          console.log(
            `${r.mode.padEnd(13)} ${String(r.queries).padStart(7)}  ${r.ndcg10.toFixed(4)}  ${r.recall100.toFixed(4).padStart(10)}  ${r.mrr10.toFixed(4)}  ${r.msPerQuery.toFixed(1).padStart(8)}  ${r.latency.p50.toFixed(1).padStart(6)}  ${r.latency.p95.toFixed(1).padStart(6)}  ${r.latency.warmP50.toFixed(2)}/${r.latency.warmP95.toFixed(2)}`,
          );
        }
      },
      { create: true },
    );
  });

evalCmd
  .command("pages")
  .argument("<dir>", "page benchmark folder: pdfs/*.pdf, queries.jsonl, qrels/test.tsv (<file>.pdf#page=N)")
  .description(
    "ingest a folder of PDFs and score page- and document-level hit@1/5/10 and MRR per question type",
  )
  .option("--mode <modes>", "comma-separated modes (default: the KB's, hybrid_rerank)", parseModes)
  .option("--keyword-only", "ingest without vectors and evaluate keyword search only")
  .option("--kb <name>", "knowledge base to use (default pages-<dataset>)")
  .option("--limit <n>", "evaluate only the first n questions", int("--limit"))
  .option("--split <name>", "qrels split (default test)")
  .option("--json", "print JSON (with each question's ranks and top results)")
  .action(async (dir: string, o, command: Command) => {
    const modes = o.keywordOnly ? ["keyword" as RetrievalMode] : (o.mode as RetrievalMode[] | undefined);
    if (o.keywordOnly && o.mode && (o.mode as RetrievalMode[]).some((m) => m !== "keyword"))
      command.error("kl eval pages: --keyword-only evaluates keyword search only; drop --mode", {
        exitCode: 2,
      });
    // Without --data-dir the filings go to a temporary data directory, removed afterwards.
    const given = (command.optsWithGlobals() as { dataDir?: string }).dataDir;
    const dataDir = given ?? mkdtempSync(join(tmpdir(), "kl-eval-pages-"));
    const kl = KnowledgeLayer.open({ dataDir, create: true });
    try {
      const progress = ProgressReporter.forStderr(Boolean(o.json));
      const report = await evaluatePages(kl, dir, {
        modes,
        embed: o.keywordOnly ? false : undefined,
        kb: o.kb,
        limit: o.limit,
        split: o.split,
        onProgress: (e) => progress.update(e),
      });
      progress.stop();
      if (o.json) {
        console.log(JSON.stringify(report, null, 2));
        return;
      }
      const ing = report.ingest;
      console.log(
        `ingest: ${ing.files} files, ${ing.added + ing.updated} (re)indexed, ${ing.unchanged} unchanged, ${ing.chunks} chunks, ` +
          `${ing.embedded.computed} embedded, ${ing.embedded.cached} from cache, ${(ing.durationMs / 1000).toFixed(1)} s`,
      );
      console.log(formatPageReport(report));
    } finally {
      await kl.close();
      if (given === undefined) rmSync(dataDir, { recursive: true, force: true });
    }
  });

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
        console.log(`${list.length} document${list.length === 1 ? "" : "s"}`);
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
            `would remove ${targets.length} document${targets.length === 1 ? "" : "s"}${everything ? ` (every document in ${scope})` : ""}`,
          );
        } else {
          console.log(`removed ${removed} document${removed === 1 ? "" : "s"}`);
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
              `docs rm: --where selects ${targets.length === 1 ? "1 document" : `${targets.length} documents`}; ` +
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

/** Asks a yes/no question on the terminal (stderr); true only for an answer starting with y. */
async function confirm(question: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return /^\s*y/i.test(await rl.question(question));
  } finally {
    rl.close();
  }
}

registerServeCommands(program);

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
