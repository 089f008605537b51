/**
 * DOCX extractor (placeholder until the mammoth-based extractor lands).
 */
import { ExtractionError } from "../errors.js";
import type { ExtractedDocument } from "../types.js";
import type { ExtractContext, Extractor } from "./contract.js";

/** Word .docx documents. */
export const docxExtractor: Extractor = {
  type: "docx",
  async extract(path: string, _ctx: ExtractContext): Promise<ExtractedDocument[]> {
    throw new ExtractionError(path, "DOCX extraction is not implemented yet");
  },
};
