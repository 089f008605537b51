import { spawn, spawnSync } from "node:child_process";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { tempDir } from "../helpers/helpers.js";
import { client, watchServe } from "../helpers/server-helpers.js";

const ROOT = resolve(import.meta.dirname, "..", "..");
const tmp = tempDir();
const env = { ...process.env, KL_HOME: join(tmp.dir, "home") };
const args = (...rest: string[]): string[] => [
  "--import",
  join(ROOT, "node_modules/tsx/dist/loader.mjs"),
  join(ROOT, "src/cli/main.ts"),
  ...rest,
];

/** Runs the CLI from source. */
function kl(...rest: string[]): { code: number; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, args(...rest), {
    cwd: tmp.dir,
    env,
    encoding: "utf8",
    timeout: 60_000,
  });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

afterAll(() => tmp.cleanup());

describe("kl serve and kl apikey", () => {
  let key: string;
  let keyId: string;

  it("creates, lists and revokes API keys", () => {
    const created = kl("apikey", "create", "acme", "--label", "ci", "--json");
    expect(created.code).toBe(0);
    const info = JSON.parse(created.stdout);
    expect(info).toMatchObject({ tenant: "acme", label: "ci" });
    expect(info.key).toMatch(/^kl_[A-Za-z0-9_-]{40,}$/);
    key = info.key;
    keyId = info.id;
    const plain = kl("serve", "--create-key", "globex");
    expect(plain.code).toBe(0);
    expect(plain.stdout.trim()).toMatch(/^kl_\S+$/);
    expect(plain.stderr).toContain('for tenant "globex"');
    const list = kl("apikey", "list", "--json");
    const keys = JSON.parse(list.stdout) as { id: string; tenant: string }[];
    expect(keys.map((k) => k.tenant).sort()).toEqual(["acme", "globex"]);
    expect(list.stdout).not.toContain(key);
    const bad = kl("apikey", "create", "no.dots");
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('invalid tenant "no.dots"');
  });

  it("serves the API on the given port until SIGTERM", async () => {
    const child = spawn(process.execPath, args("serve", "--port", "0", "--log-level", "silent"), {
      cwd: tmp.dir,
      env,
    });
    const serve = watchServe(child);
    const exited = new Promise<number | null>((done) => child.on("exit", (code) => done(code)));
    try {
      const base = await serve.base;
      expect((await client(base).get("/health")).status).toBe(200);
      expect((await client(base).get("/kbs")).status).toBe(401);
      const api = client(base, key);
      expect((await api.post("/kbs", { name: "docs" })).status).toBe(201);
      expect((await api.get("/kbs")).body.kbs.map((k: { name: string }) => k.name)).toEqual(["docs"]);
      expect(kl("apikey", "revoke", keyId).code).toBe(0);
      expect((await api.get("/kbs")).status).toBe(401);
    } finally {
      child.kill("SIGTERM");
    }
    expect(await exited).toBe(0);
    expect(serve.stderr()).toContain("SIGTERM");
  });
});
