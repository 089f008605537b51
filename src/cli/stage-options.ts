/**
 * The command-line options that name a stage's implementations and settings, derived
 * from the stage registries (vector stores in `config.ts`, embedding providers,
 * rerankers): `--store`/`--to` and their `--store-*` flags, `--embedding-model`'s help,
 * `--reranker` and `--reranker-model`/`--reranker-url`. A new implementation appears
 * here by its registry entry alone.
 */
import { InvalidArgumentError } from "commander";
import {
  COMMON_STORE_SETTINGS,
  type RerankerConfig,
  VECTOR_STORE_SETTINGS,
  VECTOR_STORES,
} from "../config.js";
import { EMBEDDING_PROVIDER_REGISTRY } from "../embed/registry.js";
import { RERANKER_TYPES, RERANKERS } from "../rerank/registry.js";

export { RERANKER_TYPES } from "../rerank/registry.js";

import { implementationsWith, orList, type Registry, type SettingSchema } from "../settings.js";

/** A `--store-<setting>` flag (or `--to-<setting>`) of a vector-store setting. */
export interface StoreSettingFlag {
  /** The setting in `vectorStore`. */
  setting: string;
  /** The flag without its prefix: `url`, `timeout-ms`. */
  flag: string;
  /** Commander's attribute name without its prefix: `Url`, `TimeoutMs`. */
  attribute: string;
  /** Help text: what the setting is for each store that takes it. */
  help: string;
  /** The value placeholder: `<url>`, `<n>`. */
  placeholder: string;
  /** Parses an integer setting's value (undefined for strings). */
  parse?: (value: string) => number;
}

/**
 * One flag per vector-store setting that is not a secret (credentials come from the
 * environment, never the command line), in the registry's order.
 */
export function storeSettingFlags(prefix: "store" | "to"): StoreSettingFlag[] {
  // The settings of particular stores first, then the ones every store takes (`collection`).
  const common = (name: string): number => (Object.hasOwn(COMMON_STORE_SETTINGS, name) ? 1 : 0);
  return Object.entries(VECTOR_STORE_SETTINGS)
    .filter(([, setting]) => !setting.secret)
    .sort(([a], [b]) => common(a) - common(b))
    .map(([setting, schema]) => {
      const flag = setting.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
      const out: StoreSettingFlag = {
        setting,
        flag,
        attribute: setting.charAt(0).toUpperCase() + setting.slice(1),
        help: Object.hasOwn(COMMON_STORE_SETTINGS, setting)
          ? schema.description
          : perImplementation(VECTOR_STORES, setting),
        placeholder: schema.type === "string" ? `<${setting === "url" ? "url" : "name"}>` : "<n>",
      };
      if (schema.type === "integer") out.parse = integer(`--${prefix}-${flag}`, schema);
      return out;
    });
}

/** The help of `--embedding-model`: each provider's models or default model. */
export function embeddingModelHelp(): string {
  const parts = Object.entries(EMBEDDING_PROVIDER_REGISTRY)
    .filter(([, p]) => p.aliasOf === undefined)
    .map(([name, p]) => {
      const own = (p.settings as Record<string, SettingSchema | undefined>).model;
      if (own) return `${name}: ${own.description}`;
      return `${name}: ${p.defaultModel ? `default ${p.defaultModel}` : "required"}`;
    });
  return `embedding model, per provider: ${parts.join("; ")}`;
}

/** The help of `--reranker`: the default and the settings each type requires. */
export function rerankerHelp(): string {
  const needs = RERANKER_TYPES.flatMap((type) => {
    const flags = Object.entries(RERANKERS[type].settings)
      .filter(([, s]) => s.required)
      .map(([setting]) => rerankerFlag(setting));
    return flags.length > 0 ? [`${type} needs ${flags.join(" and ")}`] : [];
  });
  return `reranker of hybrid_rerank/advanced (default auto; offline: ${orList(
    RERANKER_TYPES.filter((t) => RERANKERS[t].offline),
  )}); ${needs.join(", ")}`;
}

/** The help of `--reranker-model` and `--reranker-url`. */
export function rerankerSettingHelp(setting: "model" | "baseUrl"): string {
  return perImplementation(RERANKERS, setting);
}

/** The reranker config of `--reranker*` options, or undefined when no type is given. */
export function rerankerOption(o: {
  reranker?: string;
  rerankerModel?: string;
  rerankerUrl?: string;
}): RerankerConfig | undefined {
  if (!o.reranker) return undefined;
  const settings = (RERANKERS as Registry)[o.reranker]?.settings ?? {};
  const out: Record<string, unknown> = { type: o.reranker };
  const given: Record<string, string | undefined> = { model: o.rerankerModel, baseUrl: o.rerankerUrl };
  // A required setting left out becomes "" (validation names it); an optional one is set only when given.
  for (const [setting, value] of Object.entries(given)) {
    const schema = settings[setting];
    if (!schema) continue;
    if (value !== undefined) out[setting] = value;
    else if (schema.required) out[setting] = "";
  }
  return out as RerankerConfig;
}

function rerankerFlag(setting: string): string {
  return setting === "baseUrl" ? "--reranker-url" : `--reranker-${setting}`;
}

/**
 * What a setting is for the implementations that take it: `desc (a, b)` when they all
 * describe it alike, else `a: desc; b: other desc`.
 */
function perImplementation(registry: Registry, setting: string): string {
  const byDescription = new Map<string, string[]>();
  for (const [name, schema] of implementationsWith(registry, setting)) {
    if (registry[name]?.aliasOf !== undefined) continue;
    byDescription.set(schema.description, [...(byDescription.get(schema.description) ?? []), name]);
  }
  const groups = [...byDescription.entries()];
  if (groups.length === 1) {
    const [description, names] = groups[0] as [string, string[]];
    return `${description} (${names.join(", ")})`;
  }
  return groups.map(([description, names]) => `${names.join(", ")}: ${description}`).join("; ");
}

function integer(flag: string, schema: SettingSchema): (value: string) => number {
  const min = schema.minimum ?? Number.MIN_SAFE_INTEGER;
  return (value) => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min)
      throw new InvalidArgumentError(`${flag} must be an integer >= ${min}`);
    return n;
  };
}
