import { Writable } from "node:stream";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import type { KnowledgeLayer } from "../knowledge-layer.js";
import { createKnowledgeServer, type KnowledgeServerOptions } from "./server.js";

/** A running stdio MCP server. */
export interface StdioMcpServer {
  /**
   * Settles when the server has closed: after {@link close}, or once the client
   * has closed stdin and every request read before was answered.
   */
  closed: Promise<void>;
  /** Closes the server and gives stdout back; the caller closes the KnowledgeLayer. */
  close(): Promise<void>;
}

/**
 * Serves the knowledge-layer MCP server on this process's stdin and stdout.
 *
 * Stdout carries protocol messages only: while the server runs, every other
 * write to `process.stdout` (`console.log` of any library, progress output) is
 * sent to stderr instead, and the transport writes through the original stream.
 * Output a native library writes to file descriptor 1 directly cannot be caught;
 * none of knowledge-layer's does.
 */
export async function serveStdio(
  kl: KnowledgeLayer,
  options: KnowledgeServerOptions = {},
): Promise<StdioMcpServer> {
  const stdout = process.stdout;
  const originalWrite = stdout.write;
  const protocolOut = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      (originalWrite as (chunk: Buffer, cb: (err?: Error | null) => void) => boolean).call(
        stdout,
        chunk,
        (err) => callback(err ?? null),
      );
    },
  });
  // A client gone away (EPIPE) ends the server like a closed stdin.
  protocolOut.on("error", () => void close());
  stdout.write = ((chunk: unknown, ...rest: unknown[]) =>
    (process.stderr.write as (...args: unknown[]) => boolean)(chunk, ...rest)) as typeof stdout.write;

  const server = createKnowledgeServer(kl, options);
  const transport = new StdioServerTransport(process.stdin, protocolOut);
  let resolveClosed: () => void = () => {};
  const closed = new Promise<void>((resolve) => {
    resolveClosed = resolve;
  });
  let closing = false;
  const close = (): Promise<void> => {
    // Flagged before anything runs: server.close() calls back here through transport.onclose.
    if (closing) return closed;
    closing = true;
    void (async () => {
      process.stdin.off("end", onEnd);
      try {
        await server.close();
      } catch {
        // already closed
      }
      if (!protocolOut.destroyed && !protocolOut.writableEnded)
        await new Promise<void>((resolve) => protocolOut.end(() => resolve()));
      stdout.write = originalWrite;
      resolveClosed();
    })();
    return closed;
  };
  // Stdin closed: answer the requests already read (`printf '…' | kl mcp` works), then close.
  let inFlight = 0;
  let draining = false;
  const onEnd = (): void => {
    draining = true;
    if (inFlight === 0) void close();
  };
  process.stdin.on("end", onEnd);
  transport.onclose = () => void close();
  await server.connect(transport);
  const receive = transport.onmessage;
  transport.onmessage = (message) => {
    if ("method" in message && "id" in message) inFlight += 1;
    receive?.(message);
  };
  const send = transport.send.bind(transport);
  transport.send = async (message) => {
    try {
      await send(message);
    } finally {
      if ("id" in message && ("result" in message || "error" in message)) {
        inFlight = Math.max(0, inFlight - 1);
        if (draining && inFlight === 0) void close();
      }
    }
  };
  return { closed, close };
}
