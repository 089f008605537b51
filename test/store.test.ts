import { describe, expect, it } from "vitest";
import { blobToVector, openDatabase, vectorToBlob } from "../src/store/database.js";
import { SqliteVectorStore } from "../src/store/sqlite-vector-store.js";
import { vectorStoreConformance } from "./conformance/vector-store.js";
import { tempDir } from "./helpers.js";

vectorStoreConformance("sqlite (embedded default)", async () => {
  const { dir, cleanup } = tempDir();
  const db = openDatabase(dir);
  return {
    store: new SqliteVectorStore(db),
    cleanup: () => {
      db.close();
      cleanup();
    },
  };
});

describe("embedded database", () => {
  it("round-trips vectors through BLOBs exactly", () => {
    const a = Float32Array.from([0.1, -2.5, 3e-8, 1]);
    expect(Array.from(blobToVector(vectorToBlob(a)))).toEqual(Array.from(a));
  });
  it("rejects a file that is not a database with a clear error", async () => {
    const { dir, cleanup } = tempDir();
    const { writeFileSync } = await import("node:fs");
    writeFileSync(`${dir}/kl.db`, "this is not sqlite".repeat(100));
    expect(() => openDatabase(dir)).toThrow(/cannot open database .*kl\.db/);
    cleanup();
  });
});
