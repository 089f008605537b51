/**
 * Block-compressed posting lists for the embedded keyword index.
 *
 * A posting is (chunk id, term frequency, field length in tokens). A term's list is kept
 * sorted by chunk id and cut into blocks of at most {@link BLOCK_POSTINGS} postings, one
 * SQLite row per block (`kw_seg_blocks`, keyed by the block's last chunk id so the block holding
 * an id is the first with `last_id ≥ id`). Inside a block every posting is three unsigned
 * LEB128 varints: the gap to the previous chunk id (the first one's gap is from 0), tf and
 * length — the delta + variable-byte layout of classic inverted indexes (Witten, Moffat &
 * Bell, "Managing Gigabytes", 1999, ch. 3; Zobel & Moffat 2006, "Inverted files for text
 * search engines"). A block also records its largest tf and smallest length, an upper bound
 * of any of its postings' BM25 term score (block-max, Ding & Suel 2011).
 */

/** Postings per block. */
export const BLOCK_POSTINGS = 128;

/** Postings as three parallel arrays, sorted by chunk id ascending. */
export interface PostingList {
  ids: number[];
  tfs: number[];
  lens: number[];
}

/** An empty {@link PostingList}. */
export function emptyList(): PostingList {
  return { ids: [], tfs: [], lens: [] };
}

/** Appends `v` (an integer in [0, 2^53)) as an unsigned LEB128 varint at `at`; returns the next offset. */
function putVarint(out: Uint8Array, at: number, v: number): number {
  let value = v;
  let i = at;
  while (value >= 0x80) {
    out[i++] = (value % 0x80) | 0x80;
    value = Math.floor(value / 0x80);
  }
  out[i++] = value;
  return i;
}

/**
 * Encodes postings `from` … `to − 1` of `list` as one block; ids are gaps from `base`
 * (the previous posting's id, 0 for a block's first posting). Chunk ids are ≥ 1.
 * @throws RangeError when ids are not strictly increasing from `base`.
 */
export function encodeBlock(list: PostingList, from: number, to: number, base = 0): Buffer {
  const out = new Uint8Array((to - from) * 24);
  let at = 0;
  let previous = base;
  for (let i = from; i < to; i++) {
    const id = list.ids[i] as number;
    if (!(id > previous)) {
      throw new RangeError(`posting ids must increase (${id} after ${previous})`);
    }
    at = putVarint(out, at, id - previous);
    at = putVarint(out, at, list.tfs[i] as number);
    at = putVarint(out, at, list.lens[i] as number);
    previous = id;
  }
  return Buffer.from(out.buffer, 0, at);
}

/** Decodes a block written by {@link encodeBlock} (with base 0), appending its postings to `into`. */
export function decodeBlock(data: Uint8Array, into: PostingList): PostingList {
  let id = 0;
  let field = 0;
  let value = 0;
  let scale = 1;
  for (let i = 0; i < data.length; i++) {
    const byte = data[i] as number;
    value += (byte & 0x7f) * scale;
    if (byte & 0x80) {
      scale *= 0x80;
      continue;
    }
    if (field === 0) {
      id += value;
      into.ids.push(id);
    } else if (field === 1) into.tfs.push(value);
    else into.lens.push(value);
    field = field === 2 ? 0 : field + 1;
    value = 0;
    scale = 1;
  }
  return into;
}

/** Largest tf and smallest length of postings `from` … `to − 1` (the block-max statistics). */
export function blockBounds(list: PostingList, from: number, to: number): { maxTf: number; minLen: number } {
  let maxTf = 0;
  let minLen = Number.POSITIVE_INFINITY;
  for (let i = from; i < to; i++) {
    if ((list.tfs[i] as number) > maxTf) maxTf = list.tfs[i] as number;
    if ((list.lens[i] as number) < minLen) minLen = list.lens[i] as number;
  }
  return { maxTf, minLen: Number.isFinite(minLen) ? minLen : 0 };
}

/**
 * Merges two posting lists sorted by id into one; a posting of `b` replaces one of `a`
 * with the same id.
 */
export function mergeLists(a: PostingList, b: PostingList): PostingList {
  const out = emptyList();
  let i = 0;
  let j = 0;
  while (i < a.ids.length || j < b.ids.length) {
    const x = i < a.ids.length ? (a.ids[i] as number) : Number.POSITIVE_INFINITY;
    const y = j < b.ids.length ? (b.ids[j] as number) : Number.POSITIVE_INFINITY;
    if (y <= x) {
      out.ids.push(y);
      out.tfs.push(b.tfs[j] as number);
      out.lens.push(b.lens[j] as number);
      j++;
      if (x === y) i++;
    } else {
      out.ids.push(x);
      out.tfs.push(a.tfs[i] as number);
      out.lens.push(a.lens[i] as number);
      i++;
    }
  }
  return out;
}

/** Appends every posting of `from` to `into` (in order); returns `into`. */
export function appendPostings(into: PostingList, from: PostingList | undefined): PostingList {
  if (!from) return into;
  for (let i = 0; i < from.ids.length; i++) {
    into.ids.push(from.ids[i] as number);
    into.tfs.push(from.tfs[i] as number);
    into.lens.push(from.lens[i] as number);
  }
  return into;
}

/** One `kw_seg_blocks` row of a posting list: its last chunk id, size, block-max statistics and data. */
export interface BlockRow {
  lastId: number;
  n: number;
  maxTf: number;
  minLen: number;
  data: Buffer;
}

/** Cuts postings `from`… of `list` into new blocks of at most {@link BLOCK_POSTINGS}. */
export function* blockRows(list: PostingList, from = 0): Generator<BlockRow> {
  for (let i = from; i < list.ids.length; i += BLOCK_POSTINGS) {
    const to = Math.min(i + BLOCK_POSTINGS, list.ids.length);
    const { maxTf, minLen } = blockBounds(list, i, to);
    yield { lastId: list.ids[to - 1] as number, n: to - i, maxTf, minLen, data: encodeBlock(list, i, to) };
  }
}
