import { tokenize } from "./src/retrieve/tokenizer.js";
for (const s of process.argv.slice(2)) console.log(s, "=>", JSON.stringify(tokenize(s)));
