/**
 * The part every HTTP embedding provider shares: batching, retries (through
 * src/http.ts), response validation, dimension checks and normalisation.
 * Subclasses only build one request and read its vectors.
 */
import { ConfigError } from "../errors.js";
import { type HttpOptions, type PostJsonHooks, postJsonWith } from "../http.js";
import { type Embedder, EmbeddingError } from "./contract.js";
import { knownDimension, type Prefixes } from "./models.js";
import { normalise, weightedMean } from "./vectors.js";

/** Which side of an asymmetric model a text is embedded for. */
export type InputKind = "document" | "query";

/** Options every remote embedder class takes (the config fields plus transport details). */
export interface RemoteEmbedderOptions extends HttpOptions {
  /** Model id sent to the service. */
  model: string;
  /** Texts per request, an integer ≥ 1. Default per provider. */
  batchSize?: number;
  /** Expected vector length; see src/embed/config.ts. */
  dimension?: number;
  /** Server root (without the endpoint path). Default per provider. */
  baseUrl?: string;
  /** API key, sent as `Authorization: Bearer …`. Default per provider from the environment. */
  apiKey?: string;
}

/** One part of an input text sent to the service; a text may be sent as several parts (long-text windows). */
export interface InputPart {
  text: string;
  /** Weight of this part in the text's mean vector (its token count). */
  weight: number;
  /** Size of the part in the provider's batch budget unit (tokens), 0 when there is no budget. */
  units: number;
}

/** What the empty string is sent as: services reject empty inputs, and a space gives a fixed, valid vector. */
export const EMPTY_TEXT_STANDIN = " ";

/** Fixed per-provider traits a subclass passes to {@link RemoteEmbedder}. */
export interface RemoteTraits {
  /** Provider name, e.g. `openai`. */
  provider: string;
  defaultBatchSize: number;
  /** Largest accepted `batchSize` (the service's own limit). Default unlimited. */
  maxBatchSize?: number;
  /** Budget of one request in {@link InputPart.units}. Default unlimited. */
  maxBatchUnits?: number;
  /** Query/document prefixes. Default none. */
  prefixes?: Prefixes;
  /**
   * Why a request cannot be sent without an API key (e.g. `set apiKey or the
   * OPENAI_API_KEY environment variable`), or undefined when a key is optional.
   */
  keyRequired?: string;
}

/**
 * An {@link Embedder} speaking to an HTTP service. Texts are sent in order,
 * `batchSize` per request (fewer when a request would exceed the provider's
 * budget), one request at a time; vectors are checked (count, numbers,
 * dimension) and L2-normalised.
 *
 * Dimension: the configured `dimension`, else the known dimension of the
 * model (src/embed/models.ts), else the length of the first vectors returned.
 * A vector of another length rejects with an {@link EmbeddingError} naming
 * provider, model, expected and actual length.
 *
 * Errors: {@link EmbeddingError} (provider and model in the message) for HTTP
 * errors (status and the service's message), exhausted retries, malformed
 * responses, wrong dimensions and a missing API key.
 */
export abstract class RemoteEmbedder implements Embedder {
  readonly provider: string;
  readonly modelId: string;
  protected readonly batchSize: number;
  protected readonly http: HttpOptions;
  protected readonly apiKey: string | undefined;
  private readonly traits: RemoteTraits;
  private expected: { value: number; source: string } | undefined;

  /** @throws ConfigError for a `batchSize` or `dimension` that is not a positive integer or above the service's limit. */
  constructor(options: RemoteEmbedderOptions, traits: RemoteTraits) {
    this.provider = traits.provider;
    this.modelId = options.model;
    this.traits = traits;
    if (typeof options.model !== "string" || options.model.trim() === "") {
      throw new ConfigError(`${traits.provider} embedder: model must be a non-empty string`);
    }
    const batchSize = options.batchSize ?? traits.defaultBatchSize;
    if (!Number.isInteger(batchSize) || batchSize < 1) {
      throw new ConfigError(
        `${traits.provider} embedder: batchSize must be an integer >= 1, got ${batchSize}`,
      );
    }
    if (traits.maxBatchSize !== undefined && batchSize > traits.maxBatchSize) {
      throw new ConfigError(
        `${traits.provider} embedder: batchSize must be at most ${traits.maxBatchSize} (the service's limit), got ${batchSize}`,
      );
    }
    this.batchSize = batchSize;
    if (options.dimension !== undefined) {
      if (!Number.isInteger(options.dimension) || options.dimension < 1) {
        throw new ConfigError(
          `${traits.provider} embedder: dimension must be a positive integer, got ${String(options.dimension)}`,
        );
      }
      this.expected = { value: options.dimension, source: "the configured dimension" };
    } else {
      const known = knownDimension(traits.provider, options.model);
      if (known !== undefined) this.expected = { value: known, source: "the known dimension of this model" };
    }
    const { model: _m, batchSize: _b, dimension: _d, baseUrl: _u, apiKey, ...http } = options;
    this.http = http;
    this.apiKey = apiKey === "" ? undefined : apiKey;
  }

  /** Vector length; `0` until known (see the class comment). */
  get dimension(): number {
    return this.expected?.value ?? 0;
  }

  /**
   * The vector length: known at once for a configured or well-known model,
   * else found by embedding one short probe text (one request).
   * @throws EmbeddingError as {@link embedTexts}.
   */
  async resolveDimension(): Promise<number> {
    if (this.expected === undefined) await this.embed(["dimension probe"], "document");
    return this.dimension;
  }

  /**
   * Embeds documents, in order.
   * @returns one unit-norm `Float32Array` of length {@link dimension} per text; `[]` for `[]` (no request).
   * @throws EmbeddingError (see the class comment).
   */
  embedTexts(texts: string[]): Promise<Float32Array[]> {
    return this.embed(texts, "document");
  }

  /**
   * Embeds one query (with the query prefix or input type where the provider has one).
   * @throws EmbeddingError (see the class comment).
   */
  async embedQuery(text: string): Promise<Float32Array> {
    const [vector] = await this.embed([text], "query");
    if (vector === undefined) throw this.error("returned no vector for the query");
    return vector;
  }

  /** Builds an {@link EmbeddingError} naming this provider and model. */
  protected error(message: string, options?: { cause?: unknown; status?: number }): EmbeddingError {
    return new EmbeddingError(this.provider, this.modelId, message, options);
  }

  /** POSTs JSON with the bearer key (when set), the transport options and retries. */
  protected post(url: string, body: unknown, hooks?: PostJsonHooks, headers: Record<string, string> = {}) {
    const all: Record<string, string> = { ...headers };
    if (this.apiKey !== undefined) all.authorization = `Bearer ${this.apiKey}`;
    return postJsonWith(
      (message, opts) => this.error(message, opts),
      url,
      body,
      all,
      this.http,
      undefined,
      hooks,
    );
  }

  /**
   * Sends one batch of input texts (prefixes applied, never empty) and
   * returns the raw vectors in input order, unvalidated.
   */
  protected abstract request(texts: string[], kind: InputKind): Promise<unknown[]>;

  /**
   * The parts a text is sent as (with its weight and budget units). Default:
   * the text itself as one part. Providers with an input limit override it.
   */
  protected split(text: string): InputPart[] {
    return [{ text, weight: 1, units: 0 }];
  }

  /** Applies the prefix of `kind` and replaces an empty input by {@link EMPTY_TEXT_STANDIN}. */
  private prepare(text: string, kind: InputKind): string {
    const prefix =
      kind === "query" ? (this.traits.prefixes?.query ?? "") : (this.traits.prefixes?.document ?? "");
    const input = prefix + text;
    return input === "" ? EMPTY_TEXT_STANDIN : input;
  }

  private async embed(texts: string[], kind: InputKind): Promise<Float32Array[]> {
    if (texts.length === 0) return [];
    if (this.apiKey === undefined && this.traits.keyRequired !== undefined) {
      throw this.error(`no API key: ${this.traits.keyRequired}`);
    }
    const owners: number[] = [];
    const parts: InputPart[] = [];
    texts.forEach((text, i) => {
      for (const part of this.split(this.prepare(text, kind))) {
        owners.push(i);
        parts.push(part);
      }
    });
    const vectors = await this.embedParts(parts, kind);
    if (parts.length === texts.length) return vectors;
    // Long texts were sent as several windows: combine them into their weighted mean.
    const groups = texts.map(() => ({ vectors: [] as Float32Array[], weights: [] as number[] }));
    owners.forEach((owner, k) => {
      const g = groups[owner] as { vectors: Float32Array[]; weights: number[] };
      g.vectors.push(vectors[k] as Float32Array);
      g.weights.push((parts[k] as InputPart).weight);
    });
    return groups.map((g) =>
      g.vectors.length === 1 ? (g.vectors[0] as Float32Array) : weightedMean(g.vectors, g.weights),
    );
  }

  /** Sends the parts in batches, in order, and returns one checked, normalised vector per part. */
  private async embedParts(parts: InputPart[], kind: InputKind): Promise<Float32Array[]> {
    const out: Float32Array[] = [];
    const budget = this.traits.maxBatchUnits ?? Number.POSITIVE_INFINITY;
    let start = 0;
    while (start < parts.length) {
      let end = start;
      let units = 0;
      while (end < parts.length && end - start < this.batchSize) {
        const u = (parts[end] as InputPart).units;
        if (end > start && units + u > budget) break;
        units += u;
        end++;
      }
      const batch = parts.slice(start, end).map((p) => p.text);
      let raw: unknown[];
      try {
        raw = await this.request(batch, kind);
      } catch (error) {
        if (error instanceof EmbeddingError) throw error;
        throw this.error(error instanceof Error ? error.message : String(error), { cause: error });
      }
      if (!Array.isArray(raw) || raw.length !== batch.length) {
        throw this.error(
          `malformed response: expected ${batch.length} vectors, got ${Array.isArray(raw) ? raw.length : "none"}`,
        );
      }
      for (const v of raw) out.push(this.check(v));
      start = end;
    }
    return out;
  }

  /** Validates one raw vector (numbers, expected length) and returns it normalised. */
  private check(raw: unknown): Float32Array {
    if (!(Array.isArray(raw) || raw instanceof Float32Array) || raw.length === 0) {
      throw this.error("malformed response: a vector is not a non-empty array of numbers");
    }
    const v = new Float32Array(raw.length);
    for (let i = 0; i < raw.length; i++) {
      const x: unknown = raw[i];
      if (typeof x !== "number" || !Number.isFinite(x)) {
        throw this.error(
          `malformed response: vector component ${i} is ${JSON.stringify(x)}, not a finite number`,
        );
      }
      v[i] = x;
    }
    if (this.expected === undefined) {
      this.expected = { value: v.length, source: "the length of the model's first vectors" };
    } else if (v.length !== this.expected.value) {
      throw this.error(
        `returned vectors of dimension ${v.length}, expected ${this.expected.value} (${this.expected.source}); ` +
          "set `dimension` to the model's real output length if this model is meant to be used",
      );
    }
    return normalise(v);
  }
}

/** `baseUrl` without trailing slashes. */
export function trimUrl(url: string): string {
  return url.replace(/\/+$/, "");
}

/** The value of environment variable `name`, or undefined when unset or empty. */
export function envKey(name: string): string | undefined {
  const v = process.env[name];
  return v === undefined || v.trim() === "" ? undefined : v.trim();
}
