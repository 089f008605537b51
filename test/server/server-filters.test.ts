/**
 * Metadata filters over HTTP: upload `meta`/`tag` fields, `/search` and
 * `/agents/:id/retrieve` field `filter` and `GET /kbs/:kb/documents?where=` (400 naming the
 * position), an attachment's fixed
 * `retrievalConfig.filter` that a request cannot lift, and the tenant's KB names in `kb`.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { client, startServer, type TestServer, waitForJob } from "../helpers/server-helpers.js";

let s: TestServer;
let api: ReturnType<typeof client>;
let key: string;

/** Uploads text files with form fields (meta, tag) and waits for the job. */
async function upload(kb: string, files: Record<string, string>, fields: [string, string][] = []) {
  const form = new FormData();
  for (const [name, value] of fields) form.append(name, value);
  for (const [name, content] of Object.entries(files)) form.append("file", new Blob([content]), name);
  const res = await fetch(`${s.base}/kbs/${kb}/documents?embed=false`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}` },
    body: form,
  });
  const body = (await res.json()) as { id: string; error?: string; field?: string };
  if (res.status !== 202) return { status: res.status, body };
  return { status: res.status, body: await waitForJob(s.base, key, body.id) };
}

beforeAll(async () => {
  s = await startServer();
  key = s.key("acme");
  api = client(s.base, key);
  expect((await api.post("/kbs", { name: "contracts", retrieval: { mode: "keyword" } })).status).toBe(201);
  expect((await api.post("/kbs", { name: "memos", retrieval: { mode: "keyword" } })).status).toBe(201);
  const a = await upload(
    "contracts",
    { "acme-msa.txt": "Master services agreement: payment terms net 30." },
    [
      ["meta", "customer=acme"],
      ["meta", '{"year": 2024}'],
      ["tag", "signed"],
    ],
  );
  expect(a.body.status).toBe("succeeded");
  const b = await upload(
    "contracts",
    { "globex-msa.txt": "Master services agreement: payment terms net 60." },
    [
      ["meta", "customer=globex"],
      ["meta", '{"year": 2023}'],
    ],
  );
  expect(b.body.status).toBe("succeeded");
  const c = await upload("memos", { "memo.txt": "Memo on payment terms for all customers." });
  expect(c.body.status).toBe("succeeded");
}, 120_000);
afterAll(async () => {
  await s.close();
});

const names = (body: { results: { source: { uri: string } }[] }) =>
  body.results.map((r) => r.source.uri).sort();

describe("filters over HTTP", () => {
  it("POST /search applies filter on user metadata, tags and the tenant's KB names", async () => {
    const all = await api.post("/search", { query: "payment terms", topK: 10 });
    expect(names(all.body)).toEqual(["acme-msa.txt", "globex-msa.txt", "memo.txt"]);
    const acme = await api.post("/search", { query: "payment terms", filter: { customer: "acme" } });
    expect(acme.status).toBe(200);
    expect(names(acme.body)).toEqual(["acme-msa.txt"]);
    expect(acme.body.results[0].source).toMatchObject({
      metadata: { customer: "acme", year: 2024 },
      tags: ["signed"],
    });
    const old = await api.post("/search", { query: "payment terms", filter: { year: { $lt: 2024 } } });
    expect(names(old.body)).toEqual(["globex-msa.txt"]);
    const memos = await api.post("/search", { query: "payment terms", filter: { kb: "memos" } });
    expect(names(memos.body)).toEqual(["memo.txt"]);
    expect(memos.body.results[0].kb).toBe("memos");
    const signed = await api.post("/search", {
      query: "payment terms",
      filter: { tags: { $contains: "signed" } },
    });
    expect(names(signed.body)).toEqual(["acme-msa.txt"]);
  });

  it("answers 400 naming the position of a bad filter", async () => {
    const r = await api.post("/search", { query: "payment", filter: { year: { $gte: "last year" } } });
    expect(r.status).toBe(400);
    expect(r.body).toEqual({
      error: 'filter.year.$gte: expected an ISO date or number, got the string "last year"',
      field: "filter.year.$gte",
    });
    const bad = await api.post("/search", { query: "payment", filter: { $and: [{ x: { $like: 1 } }] } });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatch(/^filter\.\$and\[0\]\.x\.\$like: unknown operator/);
  });

  it("an attachment's fixed filter always applies and a request's filter narrows it", async () => {
    const agent = await api.post("/agents", {
      name: "acme-only",
      kbs: [{ kb: "contracts", retrievalConfig: { filter: { customer: "acme" } } }, { kb: "memos" }],
    });
    expect(agent.status).toBe(201);
    const id = agent.body.id;
    const r = await api.post(`/agents/${id}/retrieve`, { query: "payment terms", topK: 10 });
    expect(names(r.body)).toEqual(["acme-msa.txt", "memo.txt"]);
    const lift = await api.post(`/agents/${id}/retrieve`, {
      query: "payment terms",
      topK: 10,
      filter: { $or: [{ customer: "globex" }, { customer: { $ne: "globex" } }] },
    });
    expect(names(lift.body)).toEqual(["acme-msa.txt", "memo.txt"]);
    const narrow = await api.post(`/agents/${id}/retrieve`, {
      query: "payment terms",
      filter: { kb: "contracts" },
    });
    expect(names(narrow.body)).toEqual(["acme-msa.txt"]);
    const badAttach = await api.put(`/agents/${id}/kbs/memos`, {
      retrievalConfig: { filter: { date: { $gt: [] } } },
    });
    expect(badAttach.status).toBe(400);
    expect(badAttach.body.error).toMatch(
      /^retrievalConfig\.filter\.date\.\$gt: expected an ISO date or number/,
    );
    const badRetrieve = await api.post(`/agents/${id}/retrieve`, { query: "x", filter: { a: null } });
    expect(badRetrieve.status).toBe(400);
    expect(badRetrieve.body.field).toBe("filter.a");
  });

  it("GET /kbs/:kb/documents?where lists the documents with a matching chunk, as kl docs list --where", async () => {
    const list = async (where?: unknown, extra = "") => {
      const q = where === undefined ? "" : `?where=${encodeURIComponent(JSON.stringify(where))}`;
      return api.get(`/kbs/contracts/documents${q}${extra}`);
    };
    const uris = (body: { documents: { uri: string }[] }) => body.documents.map((d) => d.uri).sort();
    const all = await list();
    expect(all.body.total).toBe(2);
    const acme = await list({ customer: "acme" });
    expect(acme.status).toBe(200);
    expect(uris(acme.body)).toEqual(["acme-msa.txt"]);
    expect(acme.body.total).toBe(1);
    // The same facade operation the CLI uses, on the catalog name of the tenant's KB.
    const direct = await s.kl.listDocuments({ kb: "acme.contracts", filter: { customer: "acme" } });
    expect(acme.body.documents.map((d: { id: number }) => d.id)).toEqual(direct.map((d) => d.id));
    expect(uris((await list({ year: { $lt: 2024 } })).body)).toEqual(["globex-msa.txt"]);
    expect(uris((await list({ tags: { $contains: "signed" } })).body)).toEqual(["acme-msa.txt"]);
    // `kb` conditions speak of the tenant's KB names.
    expect(uris((await list({ kb: "contracts" })).body)).toEqual(["acme-msa.txt", "globex-msa.txt"]);
    expect((await list({ kb: "memos" })).body).toMatchObject({ documents: [], total: 0 });
    // Paging applies to the filtered list; total counts all that match.
    const page = await list({ customer: { $in: ["acme", "globex"] } }, "&limit=1&offset=1");
    expect(page.body).toMatchObject({ total: 2, limit: 1, offset: 1 });
    expect(page.body.documents).toHaveLength(1);
  });

  it("GET /kbs/:kb/documents answers 400 naming the position of a bad where", async () => {
    const bad = await api.get(
      `/kbs/contracts/documents?where=${encodeURIComponent('{"year":{"$gte":"last year"}}')}`,
    );
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({
      error: 'where.year.$gte: expected an ISO date or number, got the string "last year"',
      field: "where.year.$gte",
    });
    const notJson = await api.get("/kbs/contracts/documents?where=%7Bcustomer");
    expect(notJson.status).toBe(400);
    expect(notJson.body.field).toBe("where");
    expect(notJson.body.error).toMatch(/^where: not valid JSON/);
    const op = await api.get(`/kbs/contracts/documents?where=${encodeURIComponent('{"x":{"$like":1}}')}`);
    expect(op.status).toBe(400);
    expect(op.body.error).toMatch(/^where\.x\.\$like: unknown operator/);
  });

  it("refuses upload metadata that names a source attribute", async () => {
    const r = await upload("memos", { "x.txt": "text" }, [["meta", "type=contract"]]);
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ field: "meta" });
    expect(r.body.error).toMatch(/^meta\.type: "type" is a source attribute/);
  });
});
