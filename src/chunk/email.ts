/**
 * EMAIL strategy: the extractor puts the message body in `doc.text` and the
 * headers in `doc.metadata`; the first chunk carries the header block as its
 * context, later ones the subject. Quoted reply text is flagged per chunk.
 */
import type { ChunkingConfig } from "../config.js";
import { type Chunk, type DocumentMetadata, type ExtractedDocument, withContext } from "../types.js";
import type { Chunker } from "./contract.js";
import { paragraphGroups } from "./semantic.js";
import {
  bodyBudget,
  type ChunkLimits,
  defineChunker,
  fitPrefix,
  makeChunk,
  type Span,
  sizeOf,
  trimSpan,
} from "./spans.js";
import { lineSpans } from "./split.js";

/** A header value as display text, or undefined when absent/empty ("undefined"/"null" count as absent). */
function headerValue(value: unknown): string | undefined {
  if (Array.isArray(value)) {
    const parts = value.map(headerValue).filter((v): v is string => v !== undefined);
    return parts.length > 0 ? parts.join(", ") : undefined;
  }
  if (typeof value !== "string") return undefined;
  const v = value.replace(/\s+/g, " ").trim();
  return v && v !== "undefined" && v !== "null" ? v : undefined;
}

/**
 * The header block used as the first chunk's context: `From: …`, `To: …`,
 * `Cc: …`, `Subject: …`, `Date: …` lines joined with `\n`, only for fields that
 * are present and non-empty (arrays are joined with `, `). Undefined when no
 * field is present.
 */
export function emailHeaderBlock(meta: Partial<DocumentMetadata>): string | undefined {
  const lines: string[] = [];
  const add = (label: string, value: unknown): void => {
    const v = headerValue(value);
    if (v !== undefined) lines.push(`${label}: ${v}`);
  };
  add("From", meta.from);
  add("To", meta.to);
  add("Cc", meta.cc);
  add("Subject", meta.subject);
  add("Date", meta.date);
  return lines.length > 0 ? lines.join("\n") : undefined;
}

/**
 * The context of an email's later chunks: subject, sender and day (`Subject: Q3
 * numbers · From: Alice <a@x.com> · Date: 2024-03-01`), each part only when the
 * message has it, the sender cut to 80 characters; undefined without any.
 */
export function laterContext(meta: Partial<DocumentMetadata>): string | undefined {
  const parts: string[] = [];
  const subject = headerValue(meta.subject);
  if (subject) parts.push(`Subject: ${subject}`);
  const from = headerValue(meta.from);
  if (from) parts.push(`From: ${from.length > 80 ? `${from.slice(0, 79).trimEnd()}…` : from}`);
  const date = headerValue(meta.date);
  if (date) parts.push(`Date: ${/^\d{4}-\d{2}-\d{2}T/.test(date) ? date.slice(0, 10) : date}`);
  return parts.length > 0 ? parts.join(" · ") : undefined;
}

const QUOTE = /^[ \t]*>/;

/**
 * The verb of a reply attribution line, followed by the rest of the line up to a
 * final colon, in the languages of {@link HEADER_LABELS}: "On … wrote:", "Am …
 * schrieb Alice <a@x>:", "Le … a écrit :", "El … escribió:", "Il … ha scritto:",
 * "Op … schreef …:", "Den … skrev …:", "W dniu … napisał(a):", "Em … escreveu:",
 * "… написал(а):", "… kirjoitti:".
 */
const VERBS =
  "(?<!\\p{L})(?:wrote|schrieb|a écrit|escribió|ha scritto|schreef|skrev|napisał(?:\\(a\\))?|escreveu|написал(?:\\(а\\))?|kirjoitti)";
const ATTRIBUTION_END = new RegExp(`${VERBS}(?!\\p{L})[^\\n]*[:：][ \\t]*$`, "iu");
/** The verb right before the final colon ("… Alice <a@x> написал(а):"). */
const VERB_LAST = new RegExp(`${VERBS}[ \\t]*[:：][ \\t]*$`, "iu");
/** First words of attribution lines ("On", "Am", "Le", "El", "Il giorno", "Op", "Den", "På", "W dniu", "Em"). */
const ATTRIBUTION_START = /^[ \t]*(?:On|Am|Le|El|Il|Op|Den|På|W dniu|Em)(?!\p{L})/u;

/**
 * True when `line` (two lines joined, when the attribution wraps) is a reply
 * attribution: it starts with an attribution word and ends with the verb part
 * ({@link ATTRIBUTION_END}), or, in languages that start with the date, it names
 * an address (`@`) and ends with the verb and a colon.
 */
function isAttribution(line: string): boolean {
  if (ATTRIBUTION_START.test(line)) return ATTRIBUTION_END.test(line);
  // No attribution word (languages that start with the date): the verb ends the line after an address.
  return line.includes("@") && VERB_LAST.test(line);
}

/**
 * Separator lines that start a forwarded or original message (everything after
 * them is quoted history): `-----Original Message-----`, Gmail's
 * `---------- Forwarded message ---------`, their localised forms (German,
 * French, Spanish, Italian, Dutch, Portuguese, the Nordic languages, Finnish,
 * Polish, Russian) and Apple Mail's `Begin forwarded message:`.
 */
const ORIGINAL = new RegExp(
  "^[ \\t]*(?:-{2,}[ \\t]*(?:" +
    [
      "Original Message",
      "Forwarded message",
      "Ursprüngliche Nachricht",
      "Weitergeleitete Nachricht",
      "Message d'origine",
      "Message transféré",
      "Mensaje original",
      "Mensaje reenviado",
      "Messaggio originale",
      "Messaggio inoltrato",
      "Oorspronkelijk bericht",
      "Doorgestuurd bericht",
      "Mensagem original",
      "Mensagem encaminhada",
      "Opprinnelig melding",
      "Videresendt melding",
      "Oprindelig meddelelse",
      "Videresendt meddelelse",
      "Ursprungligt meddelande",
      "Vidarebefordrat meddelande",
      "Alkuperäinen viesti",
      "Välitetty viesti",
      "Wiadomość oryginalna",
      "Przekazana wiadomość",
      "Исходное сообщение",
      "Пересылаемое сообщение",
    ].join("|") +
    ")[ \\t]*-{2,}|Begin forwarded message:)",
  "iu",
);

/**
 * Header labels of a reply/forward header block as mail clients write them
 * (Outlook's `From:` / `Sent:` / `To:` / `Cc:` / `Subject:` lines and their
 * localised forms), by field. English, German, Danish/Norwegian, Swedish,
 * French, Spanish, Portuguese, Italian, Dutch, Polish, Czech, Finnish,
 * Hungarian, Turkish, Russian, Chinese, Japanese, Korean.
 */
const HEADER_LABELS: Readonly<Record<"from" | "date" | "to" | "cc" | "subject", readonly string[]>> = {
  from: [
    "From",
    "Von",
    "Fra",
    "Från",
    "De",
    "Da",
    "Van",
    "Od",
    "Lähettäjä",
    "Feladó",
    "Kimden",
    "От",
    "От кого",
    "发件人",
    "寄件者",
    "差出人",
    "보낸 사람",
  ],
  date: [
    "Sent",
    "Date",
    "Gesendet",
    "Datum",
    "Sendt",
    "Dato",
    "Skickat",
    "Envoyé",
    "Enviado",
    "Enviado el",
    "Enviada",
    "Fecha",
    "Data",
    "Inviato",
    "Verzonden",
    "Verstuurd",
    "Wysłano",
    "Odesláno",
    "Lähetetty",
    "Päivämäärä",
    "Elküldve",
    "Dátum",
    "Gönderildi",
    "Tarih",
    "Отправлено",
    "Дата",
    "发送时间",
    "日期",
    "傳送時間",
    "送信日時",
    "보낸 날짜",
  ],
  to: [
    "To",
    "An",
    "Til",
    "Till",
    "À",
    "A",
    "Para",
    "Aan",
    "Do",
    "Komu",
    "Vastaanottaja",
    "Címzett",
    "Kime",
    "Кому",
    "收件人",
    "收件者",
    "宛先",
    "받는 사람",
  ],
  cc: ["Cc", "Kopie", "Kopi", "Kopia", "Kopio", "Másolatot kap", "Bilgi", "Копия", "抄送", "副本", "참조"],
  subject: [
    "Subject",
    "Betreff",
    "Emne",
    "Ämne",
    "Objet",
    "Asunto",
    "Assunto",
    "Oggetto",
    "Onderwerp",
    "Temat",
    "Předmět",
    "Aihe",
    "Tárgy",
    "Konu",
    "Тема",
    "主题",
    "主旨",
    "件名",
    "제목",
  ],
};

/** Field of each lower-cased label of {@link HEADER_LABELS}. */
const LABEL_FIELD = new Map<string, string>(
  Object.entries(HEADER_LABELS).flatMap(([field, labels]) => labels.map((l) => [l.toLowerCase(), field])),
);

/** Alternation of every label, longest first (so "Od" does not win over "Odesláno"). */
const LABELS = [...LABEL_FIELD.keys()]
  .sort((a, b) => b.length - a.length)
  .map((l) => l.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
  .join("|");

/** A header line: optional `*`/`_` emphasis, a label, `:` (or full-width `：`). */
const HEADER_LINE = new RegExp(`^[ \\t]*[*_]{0,2}(${LABELS})[*_]{0,2}[ \\t]*[:：]`, "iu");
/** A label inside a line ("From: A Sent: Monday To: B Subject: C" run together). */
const INLINE_LABEL = new RegExp(`(?:^|[ \\t])[*_]{0,2}(${LABELS})[*_]{0,2}[ \\t]*[:：]`, "giu");
/** A rule line Outlook puts above its header block (`________`, `-----`, `=====`). */
const RULE = /^[ \t]*(?:_{5,}|-{5,}|={5,})[ \t]*$/;

/** An address-like value: an `@`, or a `<…>` part (`Alice <alice@example.com>`, `Alice <alice>`). */
const ADDRESS_LIKE = /@|<[^<>\s][^<>]*>/;
/** A date value has a digit (`Monday, July 1, 2024 9:00 AM`, `2024年7月1日`, `1. juli 2024`). */
const HAS_DIGIT = /\p{Nd}/u;

/**
 * True when the line at `lines[i]` opens a reply header block: a From line
 * (any language of {@link HEADER_LABELS}) followed, in the next lines up to a
 * blank line (at most 12, wrapped recipient lists allowed), by header lines of
 * at least two other fields (Sent/Date, To, Cc, Subject), and which looks like a
 * real header block: a Sent/Date field (localised) whose value has a digit, or
 * an address-like From value (an `@` or a `<…>` part). So a single `From:` in
 * prose, a `From:`/`To:` pair in a memo, or a form template (`From: your name` /
 * `To: the recipient` / `Subject: what is inside`) is not quoted history;
 * Outlook's From/Sent/To/Subject block is. The fields may also stand on one line
 * (`From: A Sent: Monday To: B Subject: C`).
 */
function opensHeaderBlock(text: string, lines: Span[], i: number): boolean {
  const first = lines[i] as Span;
  const line = text.slice(first.start, first.end);
  const from = HEADER_LINE.exec(line);
  if (!from || LABEL_FIELD.get((from[1] as string).toLowerCase()) !== "from") return false;
  const fields = new Set<string>();
  let dated = false;
  const dateValue = (value: string): void => {
    if (HAS_DIGIT.test(value)) dated = true;
  };
  // Run together on one line: only near its start (a long paragraph naming fields is prose).
  const head = line.slice(0, 240);
  const inline = [...head.matchAll(INLINE_LABEL)];
  inline.forEach((m, k) => {
    const field = LABEL_FIELD.get((m[1] as string).toLowerCase());
    if (field === undefined) return;
    fields.add(field);
    if (field === "date") dateValue(head.slice((m.index ?? 0) + m[0].length, inline[k + 1]?.index));
  });
  // The From value: up to the next label run together on the line, else the whole rest of it.
  const afterFrom = line.slice(from[0].length);
  const nextLabel = inline.find((m) => (m.index ?? 0) >= from[0].length)?.index;
  const fromValue = nextLabel === undefined ? afterFrom : line.slice(from[0].length, nextLabel);
  for (let j = i + 1; j < lines.length && j <= i + 12 && !(fields.size >= 3 && dated); j++) {
    const l = lines[j] as Span;
    const t = text.slice(l.start, l.end);
    if (t.trim() === "") break;
    const m = HEADER_LINE.exec(t);
    const field = m ? LABEL_FIELD.get((m[1] as string).toLowerCase()) : undefined;
    if (field === undefined) continue;
    fields.add(field);
    if (field === "date") dateValue(t.slice((m as RegExpExecArray)[0].length));
  }
  fields.delete("from");
  return fields.size >= 2 && (dated || ADDRESS_LIKE.test(fromValue));
}

/**
 * Spans of quoted-reply lines in an email body: lines starting with `>`,
 * attribution lines (`On … wrote:` and localised forms, also wrapped over two
 * lines), and everything from the start of an earlier message on: an
 * `-----Original Message-----` / forwarded-message marker ({@link ORIGINAL}),
 * or an Outlook-style header block (From/Sent/To/Subject lines, localised such
 * as `Von:`/`Gesendet:`/`An:`/`Betreff:`, `Fra:`/`Sendt:`/`Til:`/`Emne:`,
 * `De:`/`Envoyé:`/`À:`/`Objet:`, `Da:`/`Inviato:`/`A:`/`Oggetto:`), together
 * with a rule line right above it.
 */
export function quotedSpans(text: string): Span[] {
  const lines = lineSpans(text);
  const out: Span[] = [];
  for (let i = 0; i < lines.length; i++) {
    const l = lines[i] as Span;
    const t = text.slice(l.start, l.end);
    if (ORIGINAL.test(t) || opensHeaderBlock(text, lines, i)) {
      let start = l.start;
      // Outlook's rule above the block (possibly a blank line between) belongs to it.
      for (let j = i - 1; j >= 0 && j >= i - 2; j--) {
        const above = lines[j] as Span;
        const a = text.slice(above.start, above.end);
        if (RULE.test(a)) {
          start = above.start;
          break;
        }
        if (a.trim() !== "") break;
      }
      out.push({ start, end: text.length });
      break;
    }
    const next = lines[i + 1];
    if (QUOTE.test(t) || isAttribution(t)) {
      out.push({ start: l.start, end: l.end });
    } else if (
      next &&
      ATTRIBUTION_START.test(t) &&
      isAttribution(`${t} ${text.slice(next.start, next.end)}`)
    ) {
      out.push({ start: l.start, end: next.end });
      i++;
    }
  }
  return out;
}

/** `{ hasQuoted, quotedRatio }` for a span: the share (0–1, 3 decimals) of its characters on quoted lines. */
function quoteStats(span: Span, quoted: Span[]): { hasQuoted: boolean; quotedRatio: number } {
  let chars = 0;
  for (const q of quoted) {
    if (q.start >= span.end) break;
    chars += Math.max(0, Math.min(q.end, span.end) - Math.max(q.start, span.start));
  }
  const ratio = chars / Math.max(1, span.end - span.start);
  return { hasQuoted: chars > 0, quotedRatio: Math.round(ratio * 1000) / 1000 };
}

/**
 * Alternating runs of own text and quoted text covering `[all.start, all.end)`:
 * quoted spans that are only whitespace apart are joined into one run.
 */
function quoteRuns(text: string, all: Span, quoted: Span[]): { span: Span; quoted: boolean }[] {
  const runs: { span: Span; quoted: boolean }[] = [];
  let pos = all.start;
  for (const q of quoted) {
    const own = trimSpan(text, pos, q.start);
    const last = runs[runs.length - 1];
    if (own) runs.push({ span: own, quoted: false });
    else if (last?.quoted) {
      last.span = { start: last.span.start, end: Math.max(last.span.end, q.end) };
      pos = Math.max(pos, q.end);
      continue;
    }
    const t = trimSpan(text, q.start, Math.min(q.end, all.end));
    if (t) runs.push({ span: t, quoted: true });
    pos = Math.max(pos, q.end);
  }
  const tail = trimSpan(text, pos, all.end);
  if (tail) runs.push({ span: tail, quoted: false });
  return runs;
}

/**
 * Splits an email body into EMAIL chunks.
 *
 * The first chunk (`email_start`) has `contextPrefix` = {@link emailHeaderBlock}
 * (From, To, Cc, Subject, Date); later chunks are `email_body` with the prefix
 * `Subject: … · From: … · Date: YYYY-MM-DD` (the parts the message has, see
 * {@link laterContext}). A body of at most
 * `limits.email.wholeUnder` units stays one chunk as long as it fits
 * `limits.size` together with its header block (chunkSize is the hard cap; raise
 * it above wholeUnder to keep such messages whole). A longer body is cut into runs
 * of own text and quoted reply text ({@link quotedSpans}), each run split
 * paragraph-aware (see `paragraphGroups`) with budgets that leave room for the
 * prefix, so a chunk is either own text or quoted text.
 *
 * Metadata: `hasQuoted` (boolean), `quotedRatio` (0–1, share of the body on
 * quoted lines) and, for split bodies, `quoted` (true for a quoted-reply chunk).
 * With `limits.email.quotedReplies === "drop"` quoted runs give no chunks (the
 * header block then travels with the first own-text chunk); a message that is
 * entirely quoted keeps its text rather than vanish.
 *
 * An empty or blank body yields zero chunks even when headers are present (the
 * ingest reports such a document as empty). The email extractor gives a message
 * without body text the header block as its text; that chunk has no prefix (the
 * header block is not repeated).
 */
export function chunkEmail(doc: ExtractedDocument, limits: ChunkLimits): Chunk[] {
  const text = doc.text;
  const all = trimSpan(text, 0, text.length);
  if (!all) return [];
  // A header-only message (no body) has the header block as its text: no prefix to repeat it.
  const headerBlock = emailHeaderBlock(doc.metadata);
  const header = headerBlock !== undefined && text.trim() === headerBlock ? undefined : headerBlock;
  const later = laterContext(doc.metadata);
  // The header block given as the text of a body-less message is not a quoted reply.
  const quoted = headerBlock !== undefined && header === undefined ? [] : quotedSpans(text);
  const drop = limits.email.quotedReplies === "drop";
  const size = (span: Span): number => sizeOf(limits, text, span.start, span.end);
  let runs = quoteRuns(text, all, quoted);
  if (drop && runs.some((r) => !r.quoted)) runs = runs.filter((r) => !r.quoted);
  // Kept whole: the entire body, or with dropped quotes the one remaining run.
  const whole = !drop ? all : runs.length === 1 ? (runs[0]?.span ?? null) : null;
  if (
    whole &&
    size(whole) <= limits.email.wholeUnder &&
    limits.measure.count(withContext(header, text.slice(whole.start, whole.end))) <= limits.size
  ) {
    // A message that fits is never split; its header context is kept in full.
    return [makeChunk(text, whole, "email_start", { prefix: header, metadata: quoteStats(whole, quoted) })];
  }
  const chunks: Chunk[] = [];
  for (const run of runs) {
    let from = run.span.start;
    if (chunks.length === 0) {
      const first = paragraphGroups(text, from, run.span.end, bodyBudget(limits, header), {
        measure: limits.measure,
      })[0];
      if (!first) continue;
      chunks.push(makeEmailChunk(text, first, "email_start", header, quoted, run.quoted, limits));
      from = first.end;
    }
    const groups = paragraphGroups(text, from, run.span.end, bodyBudget(limits, later), {
      minSize: limits.minSize,
      measure: limits.measure,
    });
    for (const g of groups)
      chunks.push(makeEmailChunk(text, g, "email_body", later, quoted, run.quoted, limits));
  }
  return chunks;
}

function makeEmailChunk(
  text: string,
  span: Span,
  type: "email_start" | "email_body",
  prefix: string | undefined,
  quoted: Span[],
  isQuoted: boolean,
  limits: ChunkLimits,
): Chunk {
  return makeChunk(text, span, type, {
    prefix: fitPrefix(limits, prefix, text.slice(span.start, span.end)),
    metadata: { ...quoteStats(span, quoted), quoted: isQuoted },
  });
}

/**
 * Creates the EMAIL chunker (see {@link chunkEmail}).
 * @throws ConfigError for invalid chunking parameters.
 */
export function createEmailChunker(config: ChunkingConfig): Chunker {
  return defineChunker("email", config, chunkEmail);
}
