import { createChunker } from "./src/chunk/index.js";
const text = `${"a*&".repeat(130)}\n`.repeat(200);
for (let r = 0; r < 2; r++)
for (const language of ["c", "java", "javascript", "kotlin"]) {
  const d = { uri: "/test/doc.code", text, metadata: { path: "/test/doc.code", type: "code" as const, language } };
  const t0 = performance.now();
  const chunks = await createChunker({ strategy: "auto", chunkSize: 500, chunkOverlap: 0, minChunkSize: 0 }).chunk(d);
  console.log(language, chunks.length, (performance.now() - t0).toFixed(0), "ms", JSON.stringify(chunks[0]!.contextPrefix));
}
