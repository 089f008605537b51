/** The knowledge-layer MCP server: construction independent of transport, and the stdio and HTTP transports. */
export { type HttpMcpOptions, type HttpMcpServer, isLoopback, serveHttp } from "./http.js";
export { checkIngestPath, isInside, resolveIngestRoot } from "./ingest-root.js";
export { createKnowledgeServer, type KnowledgeServerOptions, MCP_TOOLS } from "./server.js";
export { type StdioMcpServer, serveStdio } from "./stdio.js";
