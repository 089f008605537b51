import { extractFile } from "./src/extract/index.js";
const [file, ...pages] = process.argv.slice(2);
const [d] = await extractFile("/work/shared/data/ir/financebench_dev/pdfs/" + file);
for (const p of pages) {
  const s = d.segments!.find((x) => x.metadata.page === Number(p))!;
  console.log(`===== page ${p}`);
  console.log(d.text.slice(s.start, s.end));
}
