// What the S3 store's XML reader and writer share: one scratch buffer for
// decoding and escaping, and the rule that documents larger than a step are
// read and written one at a time through the pacer (../../pace.ts).

import { Pacer, Serial } from '../../pace';

/** A buffer reused for decoding and escaping: its contents are copied out at once (no buffer per token). */
let scratchBuf = Buffer.allocUnsafe(64 * 1024);

export function scratch(n: number): Buffer {
  if (n > scratchBuf.length) scratchBuf = Buffer.allocUnsafe(Math.max(n, scratchBuf.length * 2));
  return scratchBuf;
}

/**
 * Documents larger than a step are read and written one at a time: the
 * pacer's share of each turn goes to one until it is done, so only one
 * document's strings (1,000 keys of up to 1 KiB) are alive at once, and the
 * young generation's scavenges, which copy what is alive, stay short.
 */
const bigDocuments = new Serial();

/** `step` once now; what remains, after the big documents before it, through the pacer. */
export async function paced(step: () => boolean, p: Pacer): Promise<void> {
  if (step()) return;
  await bigDocuments.run(() => p.run(step));
}
