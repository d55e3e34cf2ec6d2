// Views reused while they cover the same bytes.
//
// A Buffer view is an object, and making one per message makes garbage, and
// garbage makes scavenges: pauses in the middle of a vCPU's MMIO access. The
// transport hands out small payloads from one staging buffer, so "the data
// bytes of this REGION_WRITE" are the same bytes message after message; this
// cache returns the view it made last time when it still matches.

/** Longest view kept (longer ones are made per call). */
const MAX_CACHED = 64;

export class ViewCache {
  /** By length: the last view of that length. */
  readonly #views: (Buffer | null)[] = new Array<Buffer | null>(MAX_CACHED + 1).fill(null);

  /** `parent.subarray(start, start + length)`, reused if the last view of that length covers the same bytes. */
  get(parent: Buffer, start: number, length: number): Buffer {
    if (length > MAX_CACHED) return parent.subarray(start, start + length);
    const v = this.#views[length]!;
    if (v !== null && v.buffer === parent.buffer && v.byteOffset === parent.byteOffset + start) return v;
    const made = parent.subarray(start, start + length);
    this.#views[length] = made;
    return made;
  }
}
