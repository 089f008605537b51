/**
 * Builds small valid PDFs for tests: pages of text lines (Helvetica), an optional
 * document information dictionary and an optional outline (bookmarks).
 */

/** A bookmark: its title, the 1-based page it points at, the top of the target (PDF units) and children. */
export interface OutlineItem {
  title: string;
  page: number;
  top?: number;
  children?: OutlineItem[];
}

/** Options of {@link buildPdf}. */
export interface PdfOptions {
  /** Document information dictionary (`Title`, `Author`…). */
  info?: Record<string, string>;
  outline?: OutlineItem[];
  /** Font size of the lines (points). Default 10. */
  fontSize?: number;
}

/** Escapes a string for a PDF literal string. */
function pdfString(s: string): string {
  return s.replace(/\\/g, "\\\\").replace(/\(/g, "\\(").replace(/\)/g, "\\)");
}

/**
 * A PDF with one Letter page (612 × 792) per entry of `pages`, each showing its lines
 * from the top (y 740) down, 14 points apart; an empty string leaves a blank line
 * (a paragraph gap). Text must be Latin-1.
 */
export function buildPdf(pages: string[][], options: PdfOptions = {}): Buffer {
  const objects: string[] = [];
  const add = (body: string): number => objects.push(body);
  const catalog = add("");
  const tree = add("");
  const font = add("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>");
  const size = options.fontSize ?? 10;
  const kids: number[] = [];
  for (const lines of pages) {
    const ops: string[] = [];
    lines.forEach((line, i) => {
      if (line === "") return;
      ops.push(`BT /F1 ${size} Tf 72 ${740 - 14 * i} Td (${pdfString(line)}) Tj ET`);
    });
    const stream = ops.join("\n");
    const contents = add(`<< /Length ${stream.length} >>\nstream\n${stream}\nendstream`);
    kids.push(
      add(
        `<< /Type /Page /Parent ${tree} 0 R /MediaBox [0 0 612 792] ` +
          `/Resources << /Font << /F1 ${font} 0 R >> >> /Contents ${contents} 0 R >>`,
      ),
    );
  }
  let outlines = "";
  if (options.outline && options.outline.length > 0) {
    const root = add("");
    const addItems = (
      items: OutlineItem[],
      parent: number,
    ): { first: number; last: number; count: number } => {
      const ids = items.map(() => add(""));
      let count = items.length;
      items.forEach((item, i) => {
        const id = ids[i] as number;
        const kidsOf = item.children && item.children.length > 0 ? addItems(item.children, id) : undefined;
        if (kidsOf) count += kidsOf.count;
        const page = kids[item.page - 1];
        const parts = [
          `/Title (${pdfString(item.title)})`,
          `/Parent ${parent} 0 R`,
          `/Dest [${page} 0 R /XYZ 0 ${item.top ?? 792} 0]`,
        ];
        if (i > 0) parts.push(`/Prev ${ids[i - 1]} 0 R`);
        if (i < ids.length - 1) parts.push(`/Next ${ids[i + 1]} 0 R`);
        if (kidsOf) parts.push(`/First ${kidsOf.first} 0 R /Last ${kidsOf.last} 0 R /Count ${kidsOf.count}`);
        objects[id - 1] = `<< ${parts.join(" ")} >>`;
      });
      return { first: ids[0] as number, last: ids[ids.length - 1] as number, count };
    };
    const top = addItems(options.outline, root);
    objects[root - 1] =
      `<< /Type /Outlines /First ${top.first} 0 R /Last ${top.last} 0 R /Count ${top.count} >>`;
    outlines = ` /Outlines ${root} 0 R`;
  }
  objects[catalog - 1] = `<< /Type /Catalog /Pages ${tree} 0 R${outlines} >>`;
  objects[tree - 1] =
    `<< /Type /Pages /Kids [${kids.map((k) => `${k} 0 R`).join(" ")}] /Count ${kids.length} >>`;
  const infoRef = add(
    `<< ${Object.entries(options.info ?? {})
      .map(([k, v]) => `/${k} (${pdfString(v)})`)
      .join(" ")} >>`,
  );
  return serializePdf(objects, catalog, infoRef);
}

/**
 * The bytes of a PDF 1.4 file holding `objects` (object n is `objects[n - 1]`) with its
 * cross-reference table; `root` is the catalog's object number, `info` the document
 * information dictionary's (none when undefined). Latin-1.
 */
export function serializePdf(objects: readonly string[], root: number, info?: number): Buffer {
  let out = "%PDF-1.4\n";
  const offsets: number[] = [];
  objects.forEach((body, i) => {
    offsets.push(out.length);
    out += `${i + 1} 0 obj\n${body}\nendobj\n`;
  });
  const xref = out.length;
  out += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`;
  for (const offset of offsets) out += `${String(offset).padStart(10, "0")} 00000 n \n`;
  const infoRef = info === undefined ? "" : ` /Info ${info} 0 R`;
  out += `trailer\n<< /Size ${objects.length + 1} /Root ${root} 0 R${infoRef} >>\nstartxref\n${xref}\n%%EOF\n`;
  return Buffer.from(out, "latin1");
}
