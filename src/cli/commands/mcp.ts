import { type Command, InvalidArgumentError } from "commander";
import { KnowledgeLayerError } from "../../errors.js";
import { KnowledgeLayer } from "../../knowledge-layer.js";
import { isLoopback, serveHttp } from "../../mcp/http.js";
import { resolveIngestRoot } from "../../mcp/ingest-root.js";
import { serveStdio } from "../../mcp/stdio.js";
import { warmInBackground } from "../data-dir.js";

/** Default port of `kl mcp --http`. */
export const DEFAULT_MCP_PORT = 3334;

const port = (value: string): number => {
  const n = Number(value);
  if (value.trim() === "" || !Number.isInteger(n) || n < 0 || n > 65535)
    throw new InvalidArgumentError("--port must be an integer from 0 to 65535 (0 = any free port)");
  return n;
};

/** Options of `kl mcp` as commander parses them. */
interface McpCommandOptions {
  http?: boolean;
  port?: number;
  host?: string;
  allowIngest?: boolean;
  ingestRoot?: string;
}

/**
 * Registers `kl mcp` on the CLI program: a Model Context Protocol server over
 * stdio (default) or streamable HTTP (`--http`), exposing the tools
 * search_knowledge, list_knowledge_bases, get_document and, on stdio with
 * `--allow-ingest` only, ingest_path (confined to `--ingest-root`, which is then
 * required and may be neither `/` nor the home directory; usage errors exit 2). On stdio, stdout carries protocol messages only; logs go
 * to stderr. The data directory is the global `--data-dir` (or `$KL_HOME`).
 */
export function registerMcpCommand(program: Command): void {
  program
    .command("mcp")
    .description(
      "run a Model Context Protocol server (stdio, or --http) with the tools search_knowledge, list_knowledge_bases, get_document (and ingest_path with --allow-ingest)",
    )
    .option("--http", "serve the streamable HTTP transport instead of stdio (read-only tools)")
    .option("--port <n>", `HTTP port (default ${DEFAULT_MCP_PORT}; 0 = any free port)`, port)
    .option("--host <host>", "HTTP interface to bind (default 127.0.0.1; no authentication, keep it local)")
    .option("--allow-ingest", "stdio only: offer the ingest_path tool, which writes to the knowledge bases")
    .option(
      "--ingest-root <dir>",
      "required with --allow-ingest: the folder ingest_path is confined to (not / or the home directory)",
    )
    .action(async (o: McpCommandOptions, command: Command) => {
      if (o.http && o.allowIngest)
        throw new KnowledgeLayerError("mcp: --allow-ingest works over stdio only, not with --http");
      if (o.allowIngest && o.ingestRoot === undefined)
        command.error(
          "kl mcp: --allow-ingest needs --ingest-root <dir>, the folder ingest_path may read (it is not the current directory by default)",
          { exitCode: 2, code: "kl.usage" },
        );
      if (!o.http && (o.port !== undefined || o.host !== undefined))
        throw new KnowledgeLayerError("mcp: --port and --host need --http");
      if (o.ingestRoot !== undefined && !o.allowIngest)
        throw new KnowledgeLayerError("mcp: --ingest-root needs --allow-ingest");
      let ingestRoot: string | undefined;
      if (o.allowIngest && o.ingestRoot !== undefined) {
        try {
          ingestRoot = resolveIngestRoot(o.ingestRoot);
        } catch (err) {
          command.error(`kl mcp: --ingest-root: ${(err as Error).message}`, {
            exitCode: 2,
            code: "kl.usage",
          });
        }
      }
      const version = program.version();
      const { dataDir } = command.optsWithGlobals() as { dataDir?: string };
      // A server must keep answering while a model runs: inference off the main thread.
      // Read-only tools need existing data; only an ingesting server may create the data directory.
      const kl = KnowledgeLayer.open({ dataDir, offThread: true, create: Boolean(ingestRoot) });
      const log = (message: string): void => {
        process.stderr.write(`kl mcp: ${message}\n`);
      };
      let stop: () => Promise<void>;
      let stopped: Promise<void>;
      try {
        if (o.http) {
          const host = o.host ?? "127.0.0.1";
          const http = await serveHttp(kl, { host, port: o.port ?? DEFAULT_MCP_PORT, version, log });
          let resolveStopped: () => void = () => {};
          stopped = new Promise<void>((resolve) => {
            resolveStopped = resolve;
          });
          stop = async () => {
            await http.close();
            resolveStopped();
          };
          log(`listening on ${http.url} (data dir ${kl.dataDir}; read-only tools)`);
          if (!isLoopback(host))
            log(
              `warning: bound to ${host} without authentication or Host checks: anyone who can reach it can search the knowledge bases`,
            );
        } else {
          const stdio = await serveStdio(kl, { allowIngest: Boolean(ingestRoot), ingestRoot, version, log });
          stop = stdio.close;
          stopped = stdio.closed;
          log(
            `serving on stdio (data dir ${kl.dataDir}; ingest_path ${ingestRoot ? `enabled under ${ingestRoot}` : "disabled"})`,
          );
        }
      } catch (err) {
        await kl.close();
        throw err;
      }
      let stopping = false;
      void warmInBackground(kl, log, () => stopping);
      const onSignal = (): void => {
        stopping = true;
        void stop();
      };
      process.once("SIGINT", onSignal);
      process.once("SIGTERM", onSignal);
      await stopped;
      stopping = true;
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
      await kl.close();
      // Embedding worker threads may still be winding down: do not wait for them.
      setTimeout(() => process.exit(process.exitCode ?? 0), 500).unref();
    });
}
