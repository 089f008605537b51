/** The data directory of a `kl` command: opened from `--data-dir` (or `$KL_HOME`, `./.kl`). */

import type { Command } from "commander";
import { KnowledgeLayer } from "../knowledge-layer.js";
import { errorText } from "../secrets.js";
import { tenantScope } from "../server/tenancy.js";

/**
 * Opens the data directory of `--data-dir` (or `$KL_HOME`, `./.kl`). Only commands
 * that write data pass `create`; the others refuse a missing one (see `OpenOptions.create`).
 */
export function open(command: Command, create: boolean): KnowledgeLayer {
  const opts = command.optsWithGlobals() as { dataDir?: string };
  return KnowledgeLayer.open({ dataDir: opts.dataDir, create });
}

/** Runs `fn` with the data directory open (see {@link open}), closing it afterwards. */
export async function withKl<T>(
  command: Command,
  fn: (kl: KnowledgeLayer) => Promise<T> | T,
  options: { create?: boolean } = {},
): Promise<T> {
  const kl = open(command, options.create === true);
  try {
    return await fn(kl);
  } finally {
    await kl.close();
  }
}

/**
 * Opens the data directory of `--data-dir` (or `$KL_HOME`, `./.kl`) as `kl serve` and
 * `kl apikey` use it, the caches scoped by tenant; with `create` false a missing one is
 * an error and nothing is created.
 */
export function openTenantScoped(command: Command, offThread = false, create = true): KnowledgeLayer {
  const opts = command.optsWithGlobals() as { dataDir?: string };
  // Tenants never share cached embeddings: cache hits would tell one what another holds.
  return KnowledgeLayer.open({ dataDir: opts.dataDir, offThread, cacheScope: tenantScope, create });
}

/**
 * Readies the large KBs of a server's data directory for fast first searches in the
 * background ({@link KnowledgeLayer.warm}: HNSW indexes loaded, the keyword search's second
 * thread started), and says on stderr through `log` what it readied and in how many seconds,
 * or why it could not (searches then load what they need themselves). Says nothing when
 * there was nothing to ready, or when `stopping()` is true by then (a server shut down
 * meanwhile). The promise never rejects.
 */
export async function warmInBackground(
  kl: KnowledgeLayer,
  log: (message: string) => void,
  stopping: () => boolean,
): Promise<void> {
  const started = performance.now();
  try {
    const report = await kl.warm();
    if (stopping()) return;
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    const parts = [
      report.vectorIndexes.length > 0 ? `vector index of ${report.vectorIndexes.join(", ")} loaded` : "",
      report.keywordThreads.length > 0
        ? `keyword search of ${report.keywordThreads.join(", ")} on two threads`
        : "",
    ].filter(Boolean);
    if (parts.length > 0) log(`ready for fast searches: ${parts.join("; ")} (${seconds} s)`);
  } catch (error) {
    if (stopping()) return;
    log(
      `could not load the search indexes ahead of the first searches (${errorText(error)}); searches load them themselves`,
    );
  }
}
