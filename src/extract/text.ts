/**
 * Plain-text extractor (`.txt`, `.rst`, `.log`…): the file content, unchanged.
 */
import type { ExtractedDocument } from "../types.js";
import type { ExtractContext, Extractor } from "./contract.js";
import { assertNotEmpty, decodeText, fileTitle, readSource } from "./util.js";

/**
 * Extracts a plain-text file. `text` is the file content decoded as UTF-8 (invalid
 * bytes become U+FFFD; a BOM is dropped), otherwise unchanged (line endings kept).
 * Metadata: `path`, `type: "text"`, `title` = file name.
 * @throws ExtractionError "file is empty" for a 0-byte or whitespace-only file, or when unreadable.
 */
export const textExtractor: Extractor = {
  type: "text",
  async extract(path: string, ctx: ExtractContext): Promise<ExtractedDocument[]> {
    const text = decodeText(await readSource(path, ctx));
    assertNotEmpty(path, text);
    return [{ uri: path, text, metadata: { path, type: "text", title: fileTitle(path) } }];
  },
};
