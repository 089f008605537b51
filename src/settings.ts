/**
 * The settings schemas of the stages' implementations. Each vector store, embedding
 * provider and reranker declares, once, in its stage's registry (`store/registry.ts`,
 * `embed/registry.ts`, `rerank/registry.ts`), the settings its configuration section
 * accepts. Everything that lists implementations or their settings reads them from
 * there: config validation (`config.ts`: the types, the known keys, required settings),
 * the CLI's choices and help, the HTTP API's JSON schemas, the MCP schemas, the offline
 * implementations a server lets tenants choose, and the redaction test (every setting
 * marked `secret` is masked by name).
 *
 * Plain data: no functions, so the schemas also document the JSON a KB config holds.
 */

/** One setting of an implementation's configuration section. */
export interface SettingSchema {
  /** JSON type of the value. */
  type: "string" | "integer" | "number" | "boolean";
  /** What the setting means, with its unit and default (help texts and API docs). */
  description: string;
  /** The implementation cannot work without it. */
  required?: boolean;
  /** Holds a credential: masked wherever configuration is shown, never a command-line flag. */
  secret?: boolean;
  /** The values accepted, when they are a fixed set. */
  enum?: readonly string[];
  /** Smallest accepted value (numbers). */
  minimum?: number;
  /** Largest accepted value (numbers). */
  maximum?: number;
  /** URL schemes accepted (`postgres:`, `http:` …), for a URL setting. */
  schemes?: readonly string[];
  /** An example value, for messages (`expects e.g. …`). */
  example?: string;
}

/** The settings of one implementation, by name (in the order help lists them). */
export type Settings = Readonly<Record<string, SettingSchema>>;

/** What a registry says about one implementation besides how to build it. */
export interface ImplementationSchema {
  /** One line for help texts and API docs. */
  summary: string;
  /** Settings of its configuration section besides the discriminator (`type`, `provider`). */
  settings: Settings;
  /**
   * Runs with no network service and no file outside the data directory: what a server
   * lets tenants choose unless it allows tenant services.
   */
  offline?: boolean;
  /** Another name of this implementation (shown after it, e.g. `litellm` of `openai-compatible`). */
  aliasOf?: string;
}

/** A stage's registry: its implementations by name, in registration order. */
export type Registry<T extends ImplementationSchema = ImplementationSchema> = Readonly<Record<string, T>>;

/**
 * Declares a stage's registry: `registry<Implementation>()({ name: {…}, … })` checks every
 * entry against the stage's implementation type and keeps the names as a literal type.
 */
export function registry<T extends ImplementationSchema>(): <K extends string>(
  entries: Record<K, T>,
) => Readonly<Record<K, T>> {
  return (entries) => entries;
}

/** The names of a registry, in registration order (aliases included). */
export function namesOf(registry: Registry): string[] {
  return Object.keys(registry);
}

/** The names of the offline implementations of a registry ({@link ImplementationSchema.offline}). */
export function offlineNamesOf(registry: Registry): string[] {
  return Object.entries(registry)
    .filter(([, impl]) => impl.offline === true)
    .map(([name]) => name);
}

/**
 * Every setting any implementation of a registry accepts (with `common` first), each
 * once, in first-seen order; a setting several implementations share keeps the first
 * declaration.
 */
export function allSettings(registry: Registry, common: Settings = {}): Record<string, SettingSchema> {
  const out: Record<string, SettingSchema> = { ...common };
  for (const impl of Object.values(registry))
    for (const [name, setting] of Object.entries(impl.settings))
      if (!Object.hasOwn(out, name)) out[name] = setting;
  return out;
}

/** The implementations of a registry that accept setting `name`, with their declaration of it. */
export function implementationsWith(registry: Registry, name: string): [string, SettingSchema][] {
  return Object.entries(registry).flatMap(([impl, schema]) => {
    const setting = schema.settings[name];
    return setting ? [[impl, setting] as [string, SettingSchema]] : [];
  });
}

/** `a, b or c` (`a` alone, `a or b`). */
export function orList(names: readonly string[]): string {
  if (names.length <= 1) return names.join("");
  return `${names.slice(0, -1).join(", ")} or ${names[names.length - 1]}`;
}

/**
 * `a` or `an` before a name as it is read aloud: `an` before a vowel and before an
 * all-consonant acronym read letter by letter whose first letter sounds like a vowel
 * (`an llm`, `an MCP`), `a` otherwise (`a cross-encoder`, `a cohere`).
 */
export function indefiniteArticle(name: string): "a" | "an" {
  if (/^[aeiou]/i.test(name)) return "an";
  if (/^[fhlmnrsx][^aeiouy]*$/i.test(name)) return "an";
  return "a";
}

/** The JSON Schema of one setting (documentation and the HTTP API's type checks). */
export function settingJsonSchema(setting: SettingSchema): Record<string, unknown> {
  const out: Record<string, unknown> = { type: setting.type, description: setting.description };
  if (setting.enum) out.enum = [...setting.enum];
  if (setting.minimum !== undefined) out.minimum = setting.minimum;
  if (setting.maximum !== undefined) out.maximum = setting.maximum;
  return out;
}

/**
 * The JSON Schema of a configuration section chosen from a registry: the discriminator
 * (`type`, `provider`) with the registry's names, and every setting of every
 * implementation, each with the implementations that accept it. Additional properties
 * are allowed: the library's validation rejects an unknown setting with a message naming
 * the field and the known ones, as it does for every other source of configuration.
 */
export function sectionJsonSchema(
  registry: Registry,
  discriminator: string,
  description: string,
  common: Settings = {},
): Record<string, unknown> {
  const properties: Record<string, unknown> = {
    [discriminator]: { type: "string", enum: namesOf(registry), description: implementationsText(registry) },
  };
  for (const [name, setting] of Object.entries(allSettings(registry, common))) {
    if (Object.hasOwn(common, name)) {
      properties[name] = settingJsonSchema(setting);
      continue;
    }
    const users = implementationsWith(registry, name).filter(
      ([impl]) => registry[impl]?.aliasOf === undefined,
    );
    const shapes = users.map(([, s]) => JSON.stringify({ ...settingJsonSchema(s), description: "" }));
    // Implementations that constrain a shared setting differently: only its JSON type is checked here.
    const schema = new Set(shapes).size === 1 ? settingJsonSchema(setting) : { type: setting.type };
    schema.description = users.map(([impl, s]) => `${impl}: ${s.description}`).join("; ");
    properties[name] = schema;
  }
  return { type: "object", additionalProperties: true, description, properties };
}

/** `name (summary)` of each implementation of a registry, aliases as `alias = name`. */
export function implementationsText(registry: Registry): string {
  return Object.entries(registry)
    .map(([name, impl]) => (impl.aliasOf ? `${name} = ${impl.aliasOf}` : `${name} (${impl.summary})`))
    .join("; ");
}
