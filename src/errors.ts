import { displayName } from "./display.js";

/**
 * Error raised for invalid user input or configuration: a bad parameter, an
 * unknown knowledge base, an unreadable file. The message names the input and
 * the problem; the CLI prints it without a stack trace.
 */
export class KnowledgeLayerError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "KnowledgeLayerError";
  }
}

/** Raised when a configuration value is out of range or inconsistent. */
export class ConfigError extends KnowledgeLayerError {
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
}

/**
 * Raised when a file cannot be parsed into text. `path` names the file (as
 * given); the message shows it with {@link displayName}, so a name holding a
 * line break or an escape sequence stays on one line.
 */
export class ExtractionError extends KnowledgeLayerError {
  constructor(
    readonly path: string,
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super(`${displayName(path)}: ${reason}`, options);
    this.name = "ExtractionError";
  }
}

/**
 * Raised when a named resource (an agent, a document, an attachment) does not exist or
 * is not visible to the caller. The HTTP API answers 404.
 */
export class NotFoundError extends KnowledgeLayerError {
  constructor(message: string) {
    super(message);
    this.name = "NotFoundError";
  }
}

/**
 * Raised when a write conflicts with what exists (a name already taken). The HTTP API
 * answers 409; `field` names the input at fault (dotted path), when there is one.
 */
export class ConflictError extends KnowledgeLayerError {
  constructor(
    message: string,
    readonly field?: string,
  ) {
    super(message);
    this.name = "ConflictError";
  }
}

/**
 * A command line used wrongly: options that do not go together, a required option
 * missing, an argument of the wrong form. The CLI prints the message and exits 2 (as
 * for commander's own usage errors: unknown option, missing argument).
 */
export class UsageError extends KnowledgeLayerError {
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}
