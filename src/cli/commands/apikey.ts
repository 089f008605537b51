/**
 * `kl apikey create|list|revoke`: API keys of `kl serve`, each scoped to a tenant.
 *
 * ```sh
 * kl apikey create acme            # prints a new key for tenant "acme" (shown once)
 * kl serve --port 8080             # http://127.0.0.1:8080, OpenAPI at /openapi.json
 * curl -H "Authorization: Bearer $KEY" http://127.0.0.1:8080/kbs
 * ```
 */
import type { Command } from "commander";
import { KnowledgeLayerError } from "../../errors.js";
import type { KnowledgeLayer } from "../../knowledge-layer.js";
import { openTenantScoped } from "../data-dir.js";

/** Prints a new key for `tenant`. */
export async function printNewKey(
  kl: KnowledgeLayer,
  tenant: string,
  label: string | undefined,
  json: boolean,
): Promise<void> {
  const created = await kl.createApiKey(tenant, label);
  if (json) console.log(JSON.stringify(created, null, 2));
  else {
    console.log(created.key);
    console.error(
      `kl: created API key ${created.id} for tenant "${tenant}"; it is shown only now (the data directory keeps its SHA-256)`,
    );
  }
}

/** Registers `kl apikey create|list|revoke` on the program. */
export function registerApiKeyCommands(program: Command): void {
  const apikey = program
    .command("apikey")
    .description("manage API keys of kl serve (each is scoped to a tenant)");
  apikey
    .command("create")
    .argument("<tenant>", "tenant name: 1-32 letters, digits, '_' or '-'")
    .description("create an API key for a tenant and print it (only the SHA-256 is stored)")
    .option("--label <label>", "a note to recognise the key by")
    .option("--json", "print id, tenant and key as JSON")
    .action(async (tenant: string, o, command: Command) => {
      const kl = openTenantScoped(command);
      try {
        await printNewKey(kl, tenant, o.label, Boolean(o.json));
      } finally {
        await kl.close();
      }
    });
  apikey
    .command("list")
    .description("list API keys (ids, tenants, labels; never the keys)")
    .option("--tenant <tenant>", "only this tenant's keys")
    .option("--json", "print JSON")
    .action(async (o, command: Command) => {
      const kl = openTenantScoped(command, false, false);
      try {
        const keys = await kl.listApiKeys(o.tenant);
        if (o.json) console.log(JSON.stringify(keys, null, 2));
        else
          for (const k of keys)
            console.log(`${k.id}  ${k.tenant.padEnd(20)} ${k.createdAt}  ${k.label ?? ""}`);
      } finally {
        await kl.close();
      }
    });
  apikey
    .command("revoke")
    .argument("<id>", "key id (from kl apikey list)")
    .description("delete an API key; requests with it get 401 from then on")
    .action(async (id: string, _o, command: Command) => {
      const kl = openTenantScoped(command, false, false);
      try {
        if (!(await kl.revokeApiKey(id)))
          throw new KnowledgeLayerError(`unknown API key id "${id}" (see kl apikey list)`);
        console.log(`revoked API key ${id}`);
      } finally {
        await kl.close();
      }
    });
}
