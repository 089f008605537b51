import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { KnowledgeLayerError } from "../errors.js";
import type { KnowledgeLayer } from "../knowledge-layer.js";
import { errorText } from "../secrets.js";
import { createKnowledgeServer, type KnowledgeServerOptions } from "./server.js";

/** Options of {@link serveHttp}. */
export interface HttpMcpOptions {
  /** Interface to bind (default 127.0.0.1). */
  host?: string;
  /** Port (default 0: any free port; see the returned URL). */
  port?: number;
  /** Endpoint path (default `/mcp`). */
  path?: string;
  /** Server version reported to clients. */
  version?: string;
  /** Where request failures are logged (default stderr). */
  log?: (message: string) => void;
}

/** A running streamable HTTP MCP server. */
export interface HttpMcpServer {
  /** The endpoint URL, e.g. `http://127.0.0.1:3334/mcp`. */
  url: string;
  /** Stops accepting connections and closes open ones; the caller closes the KnowledgeLayer. */
  close(): Promise<void>;
}

const LOOPBACK = new Set(["127.0.0.1", "localhost", "::1", "[::1]"]);

/** True when `host` names the loopback interface only. */
export function isLoopback(host: string): boolean {
  return LOOPBACK.has(host) || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/**
 * Serves the knowledge-layer MCP server over the streamable HTTP transport,
 * stateless: every POST to the endpoint gets its own server and transport
 * (`sessionIdGenerator: undefined`, JSON responses) over the shared
 * KnowledgeLayer, so no session state is kept and any number of clients may
 * connect. GET and DELETE (server-initiated streams, session ends) answer 405.
 *
 * The read-only tools only: `ingest_path` is never offered over HTTP. Bound to a
 * loopback address (the default), requests whose Host or Origin header names
 * another host are refused with 403, against DNS rebinding. There is no
 * authentication: bind to another interface only behind a proxy that adds it.
 * @throws KnowledgeLayerError when the port cannot be bound.
 */
export async function serveHttp(kl: KnowledgeLayer, options: HttpMcpOptions = {}): Promise<HttpMcpServer> {
  const host = options.host ?? "127.0.0.1";
  const path = options.path ?? "/mcp";
  const log = options.log ?? ((message: string) => process.stderr.write(`kl mcp: ${message}\n`));
  const serverOptions: KnowledgeServerOptions = { allowIngest: false, version: options.version, log };
  const checkHosts = isLoopback(host);

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? "/", "http://localhost");
    if (checkHosts) {
      const refused = refusedHost(req);
      if (refused) return reply(res, 403, refused);
    }
    if (url.pathname !== path) return reply(res, 404, `not found: use ${path}`);
    if (req.method !== "POST") {
      res.setHeader("Allow", "POST");
      return reply(res, 405, "method not allowed: this stateless server accepts POST only");
    }
    const server = createKnowledgeServer(kl, serverOptions);
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
    });
    res.on("close", () => {
      void transport.close().catch(() => {});
      void server.close().catch(() => {});
    });
    await server.connect(transport);
    await transport.handleRequest(req, res);
  };

  const http = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      log(`request failed: ${errorText(err, true)}`);
      if (!res.headersSent) reply(res, 500, "internal server error");
      else res.end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    http.once("error", (err: NodeJS.ErrnoException) =>
      reject(new KnowledgeLayerError(`mcp: cannot listen on ${host}:${options.port ?? 0}: ${err.message}`)),
    );
    http.listen(options.port ?? 0, host, () => resolve());
  });
  const address = http.address() as AddressInfo;
  const shownHost = address.family === "IPv6" ? `[${address.address}]` : address.address;
  return {
    url: `http://${shownHost}:${address.port}${path}`,
    close: () =>
      new Promise<void>((resolve) => {
        http.close(() => resolve());
        http.closeAllConnections();
      }),
  };
}

/** Why a request to a loopback-bound server is refused (Host or Origin naming another host), or undefined. */
function refusedHost(req: IncomingMessage): string | undefined {
  const host = req.headers.host;
  if (!host) return "missing Host header";
  const hostname = hostnameOf(`http://${host}`);
  if (hostname === undefined || !LOOPBACK.has(hostname)) return `invalid Host: ${host}`;
  const origin = req.headers.origin;
  if (origin !== undefined) {
    const originHost = hostnameOf(origin);
    if (originHost === undefined || !LOOPBACK.has(originHost)) return `invalid Origin: ${origin}`;
  }
  return undefined;
}

function hostnameOf(url: string): string | undefined {
  try {
    return new URL(url).hostname;
  } catch {
    return undefined;
  }
}

/** A JSON-RPC error body with an HTTP status. */
function reply(res: ServerResponse, status: number, message: string): void {
  res.writeHead(status, { "Content-Type": "application/json" });
  res.end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message }, id: null }));
}
