import { ConfigError } from "../errors.js";
import type { ExtractedDocument, SourceType } from "../types.js";

/**
 * Limits that protect the process from oversized or hostile input. Exceeding one
 * is an `ExtractionError` naming the file and the limit (never a crash or an
 * out-of-memory). Sizes are in bytes.
 */
export interface ExtractionLimits {
  /** Largest file read (bytes). Default 100 MiB. */
  maxFileBytes: number;
  /** Largest total decompressed size of an archive (a Slack export .zip) (bytes). Default 512 MiB. */
  maxUnpackedBytes: number;
  /** Most entries read from an archive. Default 100,000. */
  maxArchiveEntries: number;
  /** Most PDF pages extracted; a longer PDF is refused. Default 2,000. */
  maxPages: number;
  /** Most messages read from one mbox file. Default 100,000. */
  maxMessages: number;
}

/** Default {@link ExtractionLimits}. */
export const DEFAULT_EXTRACTION_LIMITS: Readonly<ExtractionLimits> = Object.freeze({
  maxFileBytes: 100 * 1024 * 1024,
  maxUnpackedBytes: 512 * 1024 * 1024,
  maxArchiveEntries: 100_000,
  maxPages: 2_000,
  maxMessages: 100_000,
});

/** Slack extraction options. */
export interface SlackExtractOptions {
  /**
   * Workspace URL (e.g. `https://acme.slack.com`); when set, every message segment
   * gets a permalink-style `link` (`URL/archives/CHANNEL_ID/pTS`, with
   * `?thread_ts=…&cid=…` for replies). Default: none.
   */
  workspaceUrl?: string;
  /** Keep join/leave/topic/purpose system messages (dropped by default). */
  keepSystemMessages?: boolean;
}

/** Email extraction options. */
export interface EmailExtractOptions {
  /**
   * Extract attachments of a supported format (PDF, DOCX, HTML, text, Markdown,
   * code, nested .eml) as child documents. Default `true`.
   */
  attachments?: boolean;
}

/** Options for extraction; every field is optional and has a default. */
export interface ExtractOptions {
  limits?: Partial<ExtractionLimits>;
  slack?: SlackExtractOptions;
  email?: EmailExtractOptions;
}

/** {@link ExtractOptions} with the defaults filled in. */
export interface ResolvedExtractOptions {
  limits: ExtractionLimits;
  slack: SlackExtractOptions;
  email: Required<EmailExtractOptions>;
}

/**
 * What an extractor gets besides the path. `bytes` is set when the content is
 * already in memory (an email attachment, an archive entry); the extractor then
 * must not read `path`, which is only a name (for `uri`, `metadata.path`, errors).
 */
export interface ExtractContext {
  options: ResolvedExtractOptions;
  bytes?: Uint8Array;
  /**
   * Extracts a nested file (an email attachment) with the extractor for its type.
   * `name` is the child's pseudo-path (`parent.eml#attachment/2/report.pdf`).
   * @returns `undefined` when the type is not supported (the caller just lists it).
   * @throws ExtractionError when the child is supported but cannot be parsed.
   */
  extractNested?: (
    name: string,
    bytes: Uint8Array,
    contentType?: string,
  ) => Promise<ExtractedDocument[] | undefined>;
}

/**
 * The extractor seam: turns one file (or a Slack export folder) into text with
 * source metadata. Implementations live beside this file, one per format.
 */
export interface Extractor {
  /** The source type this extractor produces. */
  readonly type: SourceType;
  /**
   * Extracts documents from `path` (absolute), or from `ctx.bytes` when given.
   * Most formats yield one document; a Slack export yields one per channel, an
   * mbox one per message, an email with attachments one per attachment too.
   * @throws ExtractionError naming the file and the reason (corrupt, encrypted, empty, too large…).
   */
  extract(path: string, ctx: ExtractContext): Promise<ExtractedDocument[]>;
}

/**
 * Fills in the defaults of {@link ExtractOptions}; a Slack workspace URL loses its trailing `/`.
 * @throws ConfigError for a limit that is not a positive integer or a workspace URL
 *   that is not an http(s) URL (`javascript:…` and bare names are refused).
 */
export function resolveExtractOptions(options: ExtractOptions = {}): ResolvedExtractOptions {
  const limits = { ...DEFAULT_EXTRACTION_LIMITS, ...stripUndefined(options.limits ?? {}) };
  for (const [key, value] of Object.entries(limits)) {
    if (!Number.isInteger(value) || value <= 0) {
      throw new ConfigError(`limits.${key} must be a positive integer (got ${String(value)})`);
    }
  }
  const workspaceUrl = options.slack?.workspaceUrl;
  if (workspaceUrl !== undefined && !/^https?:\/\/[^\s/?#]+(\/[^\s?#]*)?$/.test(workspaceUrl)) {
    throw new ConfigError(
      `slack.workspaceUrl must be an http(s) URL such as https://acme.slack.com (got "${workspaceUrl}")`,
    );
  }
  return {
    limits,
    slack: { ...options.slack, ...(workspaceUrl ? { workspaceUrl: workspaceUrl.replace(/\/+$/, "") } : {}) },
    email: { attachments: options.email?.attachments ?? true },
  };
}

function stripUndefined<T extends object>(obj: T): Partial<T> {
  return Object.fromEntries(Object.entries(obj).filter(([, v]) => v !== undefined)) as Partial<T>;
}
