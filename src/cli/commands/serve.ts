/**
 * `kl serve`: the HTTP API (its API keys, scoped to a tenant, come from `kl apikey`: `apikey.ts`).
 *
 * ```sh
 * kl apikey create acme            # prints a new key for tenant "acme" (shown once)
 * kl serve --port 8080             # http://127.0.0.1:8080, OpenAPI at /openapi.json
 * curl -H "Authorization: Bearer $KEY" http://127.0.0.1:8080/kbs
 * ```
 */
import { type Command, InvalidArgumentError, Option } from "commander";
import { KnowledgeLayerError } from "../../errors.js";
import { errorForLog, errorText } from "../../secrets.js";
import {
  buildServer,
  DEFAULT_BODY_LIMIT,
  DEFAULT_MAX_FILE_BYTES,
  DEFAULT_MAX_FILES,
} from "../../server/app.js";
import { openTenantScoped, warmInBackground } from "../data-dir.js";
import { printNewKey } from "./apikey.js";

const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;

const positive =
  (flag: string, integer: boolean) =>
  (value: string): number => {
    const n = Number(value);
    if (value.trim() === "" || !Number.isFinite(n) || n <= 0 || (integer && !Number.isInteger(n)))
      throw new InvalidArgumentError(`${flag} must be a positive ${integer ? "integer" : "number"}`);
    return n;
  };

const port = (value: string): number => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535)
    throw new InvalidArgumentError("--port must be from 0 to 65535");
  return n;
};

/** Registers `kl serve` on the program. */
export function registerServeCommand(program: Command): void {
  program
    .command("serve")
    .description(
      "run the HTTP API (knowledge bases, uploads, jobs, agents, search; OpenAPI at /openapi.json); keys come from kl apikey create",
    )
    .option("--host <host>", "interface to listen on (0.0.0.0 for every interface)", "127.0.0.1")
    .option("--port <n>", "port (0 picks a free one)", port, 8080)
    .option(
      "--max-file-mb <n>",
      `largest uploaded file in MiB (default ${DEFAULT_MAX_FILE_BYTES / 1024 / 1024})`,
      positive("--max-file-mb", false),
    )
    .option(
      "--max-files <n>",
      `most files per upload request (default ${DEFAULT_MAX_FILES})`,
      positive("--max-files", true),
    )
    .option(
      "--body-limit-kb <n>",
      `largest JSON request body in KiB (default ${DEFAULT_BODY_LIMIT / 1024})`,
      positive("--body-limit-kb", true),
    )
    .option(
      "--allow-tenant-services",
      "let API keys configure embedding providers, vector stores, rerankers and query expansion that call other services or read server files",
    )
    .addOption(
      new Option("--log-level <level>", "request log level (JSON lines on stdout)")
        .choices([...LOG_LEVELS])
        .default("info"),
    )
    .option("--create-key <tenant>", "print a new API key for TENANT and exit (same as kl apikey create)")
    .option("--key-label <label>", "label of the key made by --create-key")
    .action(async (o, command: Command) => {
      // A server must keep answering while a model runs: inference off the main thread.
      const kl = openTenantScoped(command, o.createKey === undefined);
      if (o.createKey !== undefined) {
        try {
          await printNewKey(kl, o.createKey, o.keyLabel, false);
        } finally {
          await kl.close();
        }
        return;
      }
      let app: Awaited<ReturnType<typeof buildServer>>;
      try {
        app = await buildServer(kl, {
          maxFileBytes: o.maxFileMb === undefined ? undefined : Math.floor(o.maxFileMb * 1024 * 1024),
          maxFiles: o.maxFiles,
          bodyLimit: o.bodyLimitKb === undefined ? undefined : o.bodyLimitKb * 1024,
          allowTenantServices: Boolean(o.allowTenantServices),
          logger: o.logLevel === "silent" ? false : { level: o.logLevel, serializers: { err: errorForLog } },
        });
        const address = await app.listen({ host: o.host, port: o.port });
        console.error(
          `kl serve: listening on ${address} (data directory ${kl.dataDir}; OpenAPI at ${address}/openapi.json)`,
        );
      } catch (error) {
        await kl.close();
        if ((error as NodeJS.ErrnoException).code === "EADDRINUSE")
          throw new KnowledgeLayerError(
            `kl serve: ${o.host}:${o.port} is already in use; choose another --port`,
          );
        throw error;
      }
      if ((await kl.listApiKeys()).length === 0)
        console.error("kl serve: no API keys yet; create one with: kl apikey create TENANT");
      let stopping = false;
      void warmInBackground(
        kl,
        (message) => console.error(`kl serve: ${message}`),
        () => stopping,
      );
      await new Promise<void>((resolve) => {
        const stop = (signal: NodeJS.Signals): void => {
          if (stopping) process.exit(1);
          stopping = true;
          console.error(
            `kl serve: ${signal}: stopping; a running ingest job stops after its current file and, like queued ones, resumes when kl serve starts again on this data directory (send ${signal} again to stop now; jobs resume after that too)`,
          );
          void app
            .close()
            .catch((error: unknown) => console.error(`kl serve: error while stopping: ${errorText(error)}`))
            .finally(() => kl.close().finally(resolve));
        };
        process.on("SIGINT", stop);
        process.on("SIGTERM", stop);
      });
    });
}
