/** The data directory of a `kl` command: opened from `--data-dir` (or `$KL_HOME`, `./.kl`). */

import type { Command } from "commander";
import { KnowledgeLayer } from "../knowledge-layer.js";
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
