import { fieldLength } from "./src/retrieve/bm25.js";
import { tokenize } from "./src/retrieve/tokenizer.js";
for (const t of ["Accounts payable 1,174 1,587\nTotal 5 6", "In 2018 we spent $1,577 million on 3 things.", "(Millions) 2018 2017 2016\nNet income $ 5,363 $ 4,869 $ 5,058\nOther — net 120 256 76"]) {
  const tok = tokenize(t); console.log(tok.length, fieldLength(t, tok, (l) => tokenize(l)));
}
