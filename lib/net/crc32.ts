// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320) over a byte range of a
// buffer, with the running state exposed so a caller can feed several pieces
// (the RoCEv2 ICRC covers a masked copy of the headers, then the packet's own
// bytes). zlib.crc32 computes the same function but only over a whole buffer,
// so a range would need a new view per packet; this walks the range in place,
// eight bytes a step (slicing-by-8), allocating nothing.

const POLY = 0xedb88320;
const SLICES = 8;

/** SLICES tables of 256: table k maps a byte to its CRC contribution k bytes further on. */
const TABLE = buildTable();

function buildTable(): Uint32Array {
  const t = new Uint32Array(256 * SLICES);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? POLY ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  for (let n = 0; n < 256; n++) {
    let c = t[n]!;
    for (let s = 1; s < SLICES; s++) {
      c = t[c & 0xff]! ^ (c >>> 8);
      t[s * 256 + n] = c >>> 0;
    }
  }
  return t;
}

/** The state a CRC-32 starts from (all ones). */
export const CRC32_INIT = 0xffffffff;

/**
 * Feed buf[start, end) into a running CRC-32 state (not yet inverted). Start
 * from CRC32_INIT; the finished CRC is crc32Finish(state).
 */
export function crc32Update(state: number, buf: Uint8Array, start: number, end: number): number {
  let c = state >>> 0;
  let i = start;
  const t = TABLE;
  for (; i + SLICES <= end; i += SLICES) {
    const lo = (c ^ (buf[i]! | (buf[i + 1]! << 8) | (buf[i + 2]! << 16) | (buf[i + 3]! << 24))) >>> 0;
    c =
      t[7 * 256 + (lo & 0xff)]! ^
      t[6 * 256 + ((lo >>> 8) & 0xff)]! ^
      t[5 * 256 + ((lo >>> 16) & 0xff)]! ^
      t[4 * 256 + (lo >>> 24)]! ^
      t[3 * 256 + buf[i + 4]!]! ^
      t[2 * 256 + buf[i + 5]!]! ^
      t[256 + buf[i + 6]!]! ^
      t[buf[i + 7]!]!;
  }
  for (; i < end; i++) c = t[(c ^ buf[i]!) & 0xff]! ^ (c >>> 8);
  return c >>> 0;
}

/** The CRC-32 of a finished state (its ones' complement). */
export function crc32Finish(state: number): number {
  return ~state >>> 0;
}
