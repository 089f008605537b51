/**
 * Option parsers and option groups shared by the `kl` commands (`commands/*.ts`): numbers,
 * retrieval modes, `--where` filters, `--meta` pairs, and the vector-store, embedding,
 * chunking and extraction options with the settings they give.
 */

import { type Command, InvalidArgumentError, Option } from "commander";
import { TOKENIZERS } from "../chunk/measure.js";
import {
  type EmbeddingSemanticOptions,
  type KnowledgeBaseConfig,
  parseRetrievalMode,
  RETRIEVAL_MODES,
  type RetrievalMode,
  VECTOR_STORE_TYPES,
  type VectorStoreConfig,
  type VectorStoreType,
} from "../config.js";
import { KnowledgeLayerError, UsageError } from "../errors.js";
import type { ExtractOptions } from "../extract/index.js";
import { typedMetaValue } from "../ingest/pipeline.js";
import { type Filter, type FilterScalar, parseFilterJson } from "../retrieve/filter.js";
import { storeSettingFlags } from "./stage-options.js";

export const int =
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

export const weight =
  (name: string) =>
  (value: string): number => {
    const n = Number(value);
    if (value.trim() === "" || !Number.isFinite(n) || n < 0)
      throw new InvalidArgumentError(`${name} must be a number >= 0`);
    return n;
  };

export const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

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

const megabytes = (value: string): number => {
  const n = Number(value);
  if (value.trim() === "" || !Number.isFinite(n) || n <= 0)
    throw new InvalidArgumentError("--max-file-mb must be a positive number of MiB");
  return Math.round(n * 1024 * 1024);
};

/** The EMBEDDING_SEMANTIC options given on the command line, or undefined when none. */
export function embeddingSemanticOptions(o: {
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

export function parseModes(value: string): RetrievalMode[] {
  return value.split(",").map((m) => parseMode(m.trim()));
}

/** One retrieval mode from the command line (`vector` is accepted for `vector_only`). */
export function parseMode(value: string): RetrievalMode {
  const mode = parseRetrievalMode(value);
  if (mode === undefined) {
    throw new InvalidArgumentError(`unknown mode "${value}"; use ${RETRIEVAL_MODES.join(", ")}`);
  }
  return mode;
}

/** The filter of `--where '<json>'` (validated; a malformed one is a FilterError, exit code 2). */
export function whereFilter(text: string | undefined): Filter | undefined {
  if (text === undefined) return undefined;
  parseFilterJson(text, "filter");
  return JSON.parse(text) as Filter;
}

/**
 * `--meta key=value` options as user metadata, typed by `typedMetaValue`; `--unset-meta key`
 * options as keys to remove (`null`).
 * @throws UsageError for a pair without `=` or a key given twice.
 */
export function metaOptions(
  pairs: string[],
  unset: string[] = [],
): Record<string, FilterScalar | null> | undefined {
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

/** Adds the vector-store options shared by `kb create` and `kb migrate` (`prefix` `store` or `to`). */
export function withStoreOptions(command: Command, prefix: "store" | "to"): Command {
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
export function storeOption(
  o: Record<string, unknown>,
  prefix: "store" | "to",
): VectorStoreConfig | undefined {
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
export function embeddingOption(o: {
  embeddingProvider?: string;
  embeddingModel?: string;
  embeddingUrl?: string;
  embeddingApiKeyEnv?: string;
  embeddingDimension?: number;
  embeddingEncoding?: string;
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
  if (o.embeddingEncoding) out.encodingFormat = o.embeddingEncoding;
  return out as Partial<KnowledgeBaseConfig["embedding"]>;
}

/** Adds the tokenizer and EMBEDDING_SEMANTIC options shared by `kb create` and `chunk`. */
export function withChunkingOptions(command: Command): Command {
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

/** Adds the extraction options shared by `kb create`, `extract` and `chunk`. */
export function withExtractionOptions(command: Command): Command {
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
export function extractionOptions(o: {
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
export function mergeExtraction(
  base: ExtractOptions | undefined,
  extra: ExtractOptions | undefined,
): ExtractOptions {
  return {
    limits: { ...base?.limits, ...extra?.limits },
    slack: { ...base?.slack, ...extra?.slack },
    email: { ...base?.email, ...extra?.email },
  };
}
