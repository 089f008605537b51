import { isAbsolute, relative } from "node:path";
import { displayName } from "../display.js";
import type { StoredChunk } from "../store/catalog.js";

/**
 * Where a result came from, for citing it. Fields that do not apply to the
 * source type are absent.
 */
export interface Attribution {
  /** Document URI (file path, or `exportDir#channel` for Slack). */
  uri: string;
  /** Source file or folder (absolute). */
  path: string;
  /** Source type: markdown, text, html, pdf, docx, email, slack, code. */
  type: string;
  title?: string;
  /** PDF/DOCX/Markdown front matter: author. */
  author?: string;
  /** A link to the source when known: HTML canonical URL, Slack message permalink (needs the workspace URL). */
  link?: string;
  /** Code, Markdown, plain text: first and last line (1-based, inclusive) of the chunk in the file. */
  lineStart?: number;
  lineEnd?: number;
  /** Email attachment (or an mbox message): URI of the containing email and the attachment's file name. */
  parentUri?: string;
  attachmentName?: string;
  /** PDF: first and last page (1-based) the chunk spans. */
  page?: number;
  pageEnd?: number;
  /**
   * Markdown/HTML/DOCX: heading path of the chunk's section; for a chunk covering
   * several sibling sections, the path they share (possibly absent at top level).
   */
  headingPath?: string[];
  /** Markdown/HTML/DOCX: heading path of every section a chunk covers, when it covers more than one. */
  headings?: string[][];
  /** Email: sender (`Name <addr>`), recipients (`To`, `Cc`: one `Name <addr>` each), subject, ISO date. */
  from?: string;
  to?: string[];
  cc?: string[];
  subject?: string;
  date?: string;
  /** Email: thread id (first References entry, else In-Reply-To, else Message-ID). */
  threadId?: string;
  /** Slack: channel, participants (first is the first speaker), time range (Slack ts). */
  channel?: string;
  user?: string;
  participants?: string[];
  ts?: string;
  tsEnd?: string;
  /** Code: language and the symbol (function/class) if known. */
  language?: string;
  symbol?: string;
  /** Tags: front matter `tags`/`keywords` and those given at ingest (`--tag`). */
  tags?: string[];
  /** User metadata given at ingest (`--meta key=value`, upload fields, `IngestOptions.metadata`). */
  metadata?: Record<string, string | number | boolean>;
}

const str = (v: unknown): string | undefined => (typeof v === "string" && v.length > 0 ? v : undefined);
const num = (v: unknown): number | undefined => (typeof v === "number" && Number.isFinite(v) ? v : undefined);

const strings = (v: unknown): string[] | undefined =>
  Array.isArray(v) && v.length > 0 ? v.map(String) : undefined;

/** Builds the attribution of a stored chunk from its document and chunk metadata. */
export function attribute(chunk: StoredChunk): Attribution {
  return attributeParts(chunk.document, chunk.metadata);
}

/**
 * The attribution of a whole document (`kl docs list --json`): the source attributes that
 * come from the document, without the ones of a chunk (lines, pages, heading path…).
 */
export function documentAttribution(document: StoredChunk["document"]): Attribution {
  return attributeParts(document, {});
}

function attributeParts(document: StoredChunk["document"], m: Record<string, unknown>): Attribution {
  const d = document.metadata;
  const out: Attribution = { uri: document.uri, path: document.path, type: document.type };
  const set = <K extends keyof Attribution>(key: K, value: Attribution[K] | undefined): void => {
    if (value !== undefined) out[key] = value;
  };
  set("title", document.title ?? undefined);
  set("author", str(d.author));
  set("link", str(m.link) ?? str(d.canonicalUrl) ?? str(d.url));
  set("lineStart", num(m.lineStart));
  set("lineEnd", num(m.lineEnd));
  set("parentUri", str(d.parentUri));
  set("attachmentName", str(d.attachmentName));
  set("page", num(m.pageStart) ?? num(m.page));
  set("pageEnd", num(m.pageEnd));
  if (Array.isArray(m.headingPath) && m.headingPath.length > 0) out.headingPath = m.headingPath.map(String);
  if (Array.isArray(m.headings) && m.headings.length > 1 && m.headings.every(Array.isArray)) {
    out.headings = (m.headings as unknown[][]).map((p) => p.map(String));
  }
  set("from", str(d.from));
  set("to", strings(d.to));
  set("cc", strings(d.cc));
  set("subject", str(d.subject));
  set("date", str(d.date));
  set("threadId", str(d.threadId));
  set("channel", str(m.channel) ?? str(d.channel));
  if (Array.isArray(m.participants) && m.participants.length > 0) {
    out.participants = m.participants.map(String);
    out.user = out.participants[0];
  }
  set("user", str(m.user) ?? out.user);
  set("ts", str(m.tsStart) ?? str(m.ts));
  set("tsEnd", str(m.tsEnd));
  set("language", str(m.language) ?? str(d.language));
  set("symbol", str(m.symbol));
  if (Array.isArray(d.tags) && d.tags.length > 0) out.tags = d.tags.map(String);
  if (
    d.meta !== null &&
    typeof d.meta === "object" &&
    !Array.isArray(d.meta) &&
    Object.keys(d.meta).length > 0
  )
    out.metadata = { ...(d.meta as Record<string, string | number | boolean>) };
  return out;
}

/**
 * One-line human-readable citation, e.g.
 * `docs/guide.md › Install › Linux (chunk 2/5, chars 1200–2650)`,
 * `paper.pdf p. 3–4 (…)`, `email "Subject" from a@b.c, 2002-08-22 (…)`, `#general @alice 2016-05-12 14:03 (…)`.
 * Paths are shown relative to `cwd` when inside it; with `cwd` null they stay
 * absolute (stable output, as in `--json`). The path and attachment name go
 * through `displayName`, so a name with a line break or an escape sequence is
 * shown quoted and escaped and the citation stays one line.
 */
export function formatCitation(
  a: Attribution,
  chunk: Pick<StoredChunk, "chunkIndex" | "totalChunks" | "start" | "end">,
  cwd: string | null = process.cwd(),
): string {
  const rel = cwd === null ? "" : relative(cwd, a.path);
  const shown = rel && !rel.startsWith("..") && !isAbsolute(rel) ? rel : a.path;
  let head =
    a.attachmentName !== undefined
      ? `${displayName(shown)} › attachment ${displayName(a.attachmentName)}`
      : displayName(shown);
  if (a.lineStart !== undefined && a.type === "code") {
    head +=
      a.lineEnd !== undefined && a.lineEnd !== a.lineStart
        ? `:${a.lineStart}-${a.lineEnd}`
        : `:${a.lineStart}`;
  }
  if (a.type === "pdf" && a.page !== undefined) {
    head += a.pageEnd !== undefined && a.pageEnd !== a.page ? ` p. ${a.page}–${a.pageEnd}` : ` p. ${a.page}`;
  } else if (a.type === "email") {
    head += ` — "${a.subject ?? "(no subject)"}"${a.from ? ` from ${a.from}` : ""}${a.date ? `, ${a.date.slice(0, 10)}` : ""}`;
  } else if (a.type === "slack") {
    head += ` — #${a.channel ?? "?"}${a.user ? ` @${a.user}` : ""}${a.ts ? ` ${slackTime(a.ts)}` : ""}`;
  } else if (a.headings) {
    head += ` › ${headingsLabel(a.headings)}`;
  } else if (a.headingPath) {
    head += ` › ${a.headingPath.join(" › ")}`;
  } else if (a.symbol) {
    head += ` › ${a.symbol}`;
  }
  return `${head} (chunk ${chunk.chunkIndex + 1}/${chunk.totalChunks}, chars ${chunk.start}–${chunk.end})`;
}

/**
 * The sections a chunk covers, for a citation: their common path, then each
 * section's own part joined by ` | ` (`Guide › Install | Upgrade`; top-level
 * siblings: `Install | Upgrade`).
 */
export function headingsLabel(headings: readonly string[][]): string {
  let n = headings[0]?.length ?? 0;
  for (const p of headings) {
    let k = 0;
    while (k < n && k < p.length && p[k] === headings[0]?.[k]) k++;
    n = k;
  }
  // Keep at least one part of each path, so a section equal to the common path still shows.
  const shared = Math.min(n, ...headings.map((p) => Math.max(0, p.length - 1)));
  const own = headings.map((p) => p.slice(shared).join(" › ")).filter((x) => x.length > 0);
  const common = headings[0]?.slice(0, shared) ?? [];
  return [...common, own.join(" | ")].filter((x) => x.length > 0).join(" › ");
}

/** Formats a Slack `ts` (epoch seconds with a fraction) as `YYYY-MM-DD HH:MM` UTC. */
export function slackTime(ts: string): string {
  const ms = Number.parseFloat(ts) * 1000;
  if (!Number.isFinite(ms)) return ts;
  return new Date(ms).toISOString().slice(0, 16).replace("T", " ");
}
