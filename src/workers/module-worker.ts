/**
 * Starts a worker thread on one of the library's own modules, whether the library runs
 * from `dist/` (JavaScript: the module is loaded as is) or from its TypeScript sources
 * (tests, `tsx`: Node cannot load `.ts` in a worker by itself, and `--import` in a worker's
 * `execArgv` is not honoured, so a bootstrap registers tsx's loader in the worker first).
 *
 * Unlike the model pools (./pool.ts), whose workers are self-contained JavaScript, a module
 * worker shares its code with the rest of the library (the approximate vector index runs
 * the same class in the worker as in process).
 */
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import { Worker, type WorkerOptions } from "node:worker_threads";

/**
 * A worker running `moduleUrl` (a `.js` module, or a `.ts` one when the library runs from
 * its sources; tsx must then be installed, as it is for the sources' tests and benchmarks).
 * @param moduleUrl the module's URL, e.g. `new URL("./x.js", import.meta.url)` adjusted by
 *   {@link siblingModule}.
 */
export function startModuleWorker(moduleUrl: URL, options: WorkerOptions = {}): Worker {
  if (!moduleUrl.pathname.endsWith(".ts")) return new Worker(moduleUrl, options);
  const require = createRequire(import.meta.url);
  // tsx's ESM API (`register()`), by path: its package exports resolve the CommonJS build here.
  const api = pathToFileURL(
    require.resolve("tsx/package.json").replace(/package\.json$/, "dist/esm/api/index.mjs"),
  );
  const bootstrap = `import(${JSON.stringify(api.href)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(moduleUrl.href)}); });`;
  return new Worker(bootstrap, { ...options, eval: true });
}

/**
 * The URL of module `name` (without extension) beside the module at `importMetaUrl`, with
 * that module's own extension (`.ts` from the sources, `.js` from `dist/`).
 */
export function siblingModule(importMetaUrl: string, name: string): URL {
  const extension = new URL(importMetaUrl).pathname.endsWith(".ts") ? ".ts" : ".js";
  return new URL(`./${name}${extension}`, importMetaUrl);
}
