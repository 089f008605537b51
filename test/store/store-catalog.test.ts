/** The catalog contract (`test/conformance/catalog.ts`) run against the embedded SQLite database. */
import { openDatabase } from "../../src/store/database.js";
import { SqliteCatalogBackend } from "../../src/store/sqlite-catalog.js";
import { catalogConformance } from "../conformance/catalog.js";
import { tempDir } from "../helpers/helpers.js";

catalogConformance("sqlite", async () => {
  const { dir, cleanup } = tempDir("kl-catalog-");
  const db = openDatabase(dir);
  return {
    backend: new SqliteCatalogBackend(db),
    cleanup: () => {
      db.close();
      cleanup();
    },
  };
});
