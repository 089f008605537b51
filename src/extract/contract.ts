import type { ExtractedDocument, SourceType } from "../types.js";

/**
 * The extractor seam: turns one file (or a Slack export folder) into text with
 * source metadata. Implementations live beside this file, one per format.
 */
export interface Extractor {
  /** The source type this extractor produces. */
  readonly type: SourceType;
  /**
   * Extracts documents from `path` (absolute). Most formats yield one document;
   * a Slack export yields one per channel.
   * @throws ExtractionError naming the file and the reason (corrupt, encrypted, empty…).
   */
  extract(path: string): Promise<ExtractedDocument[]>;
}
