/**
 * Source-code extractor: the file content, unchanged, tagged with its language.
 */
import type { ExtractedDocument } from "../types.js";
import type { ExtractContext, Extractor } from "./contract.js";
import { languageForPath } from "./detect.js";
import { assertNotEmpty, compact, decodeText, fileTitle, readSource } from "./util.js";

/**
 * Extracts a source file. `text` is the file content decoded as UTF-8 (invalid
 * bytes become U+FFFD; a BOM is dropped), otherwise unchanged.
 * Metadata: `path`, `type: "code"`, `title` = file name, `language` (e.g.
 * `typescript`, `python`, `go`; absent for an unrecognised extension).
 * @throws ExtractionError "file is empty" for a 0-byte or whitespace-only file, or when unreadable.
 */
export const codeExtractor: Extractor = {
  type: "code",
  async extract(path: string, ctx: ExtractContext): Promise<ExtractedDocument[]> {
    const text = decodeText(await readSource(path, ctx));
    assertNotEmpty(path, text);
    const metadata = compact({
      path,
      type: "code" as const,
      title: fileTitle(path),
      language: languageForPath(path),
    });
    return [{ uri: path, text, metadata }];
  },
};
