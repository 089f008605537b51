/**
 * A server readies the search indexes of its large KBs after it starts
 * (`warmInBackground`, used by `kl serve` and `kl mcp`): it says what it loaded,
 * says nothing when every KB is small, and reports a failure without throwing.
 */
import { describe, expect, it } from "vitest";
import { warmInBackground } from "../../src/cli/data-dir.js";
import { KnowledgeLayer } from "../../src/knowledge-layer.js";
import type { ExtractedDocument } from "../../src/types.js";
import { tempDir, useEnv } from "../helpers/helpers.js";

const doc = (i: number): ExtractedDocument => ({
  uri: `mem:w-${i}`,
  text: `Warm note ${i} about the lantern ${i % 7} and the harbour ${i % 11}.`,
  metadata: { path: `mem:w-${i}`, type: "text" },
});

// Small KBs are searched through the HNSW index.
useEnv("KL_ANN_MIN_RECORDS", "50");

describe("warmInBackground", () => {
  it("loads the vector index of a large KB and says so; says nothing for small KBs", async () => {
    const tmp = tempDir();
    try {
      const setup = KnowledgeLayer.open({ dataDir: tmp.dir, cache: { type: "none" } });
      await setup.createKb("big");
      await setup.ingestDocuments(
        Array.from({ length: 80 }, (_, i) => doc(i)),
        { kb: "big" },
      );
      await setup.createKb("small");
      await setup.ingestDocuments([doc(1000), doc(1001)], { kb: "small" });
      await setup.close();

      const kl = KnowledgeLayer.open({ dataDir: tmp.dir, cache: { type: "none" } });
      const said: string[] = [];
      try {
        await warmInBackground(
          kl,
          (m) => said.push(m),
          () => false,
        );
      } finally {
        await kl.close();
      }
      expect(said).toHaveLength(1);
      expect(said[0]).toMatch(/^ready for fast searches: vector index of big loaded \(\d+\.\d s\)$/);

      // Only small KBs: nothing to say.
      process.env.KL_ANN_MIN_RECORDS = "100000";
      const quiet = KnowledgeLayer.open({ dataDir: tmp.dir, cache: { type: "none" } });
      const none: string[] = [];
      try {
        await warmInBackground(
          quiet,
          (m) => none.push(m),
          () => false,
        );
      } finally {
        await quiet.close();
        process.env.KL_ANN_MIN_RECORDS = "50";
      }
      expect(none).toEqual([]);
    } finally {
      tmp.cleanup();
    }
  });

  it("reports a failure without throwing, and is silent once the server is stopping", async () => {
    const failing = {
      warm: async () => {
        throw new Error("kl-ann/kb_big.usearch: input/output error");
      },
    } as unknown as KnowledgeLayer;
    const said: string[] = [];
    await expect(
      warmInBackground(
        failing,
        (m) => said.push(m),
        () => false,
      ),
    ).resolves.toBeUndefined();
    expect(said).toEqual([
      "could not load the search indexes ahead of the first searches (kl-ann/kb_big.usearch: input/output error); searches load them themselves",
    ]);
    const stopped: string[] = [];
    await warmInBackground(
      failing,
      (m) => stopped.push(m),
      () => true,
    );
    expect(stopped).toEqual([]);
  });
});
