// The guest model's TX path at full rate, as the frame benchmarks drive it:
// batches of descriptors (one doorbell a batch, as ionic.ko's xmit_more
// does), waiting for each batch's last completion (MSI-X) before the next.

import { IonicGuest, txCmd } from '../../spec/support/ionic/guest';

const TX_OPCODE_TSO = 3;
const TSO_SOT = 0x4;
const TSO_EOT = 0x8;

/** Descriptors a batch (one doorbell). */
export const TX_BATCH = 128;

/** Frames per second for `n` copies of `f` sent by `g` on its first TX queue. */
export async function txRate(g: IonicGuest, f: Buffer, n: number): Promise<number> {
  const t0 = process.hrtime.bigint();
  for (let sent = 0; sent < n;) {
    let last: Promise<unknown> | null = null;
    for (let i = 0; i < TX_BATCH && sent < n; i++, sent++)
      last = g.postFrame(f, { ring: i === TX_BATCH - 1 || sent === n - 1 }).done;
    await last;
  }
  return n / (Number(process.hrtime.bigint() - t0) / 1e9);
}

/**
 * TCP super-frames per second for `n` copies of `frame` (a TSO-seeded TCP
 * frame, headers hdrLen) sent as the driver sends them: one descriptor per
 * MSS-sized segment, SOT on the first, EOT on the last, one doorbell a run.
 */
export async function tsoRate(g: IonicGuest, frame: Buffer, hdrLen: number, mss: number, n: number): Promise<number> {
  const base = g.alloc(frame.length);
  frame.copy(g.mem(base, frame.length));
  const run: { desc: Buffer }[] = [];
  for (let off = 0; off < frame.length;) {
    const take = Math.min(frame.length - off, off === 0 ? hdrLen + mss : mss);
    const d = Buffer.alloc(16);
    const flags = (off === 0 ? TSO_SOT : 0) | (off + take >= frame.length ? TSO_EOT : 0);
    d.writeBigUInt64LE(txCmd(TX_OPCODE_TSO, flags, 0, base + off), 0);
    d.writeUInt16LE(take, 8);
    d.writeUInt16LE(hdrLen, 12);
    d.writeUInt16LE(mss, 14);
    run.push({ desc: d });
    off += take;
  }
  const runsPerBatch = Math.max(1, Math.floor((TX_BATCH * 6) / run.length));
  const t0 = process.hrtime.bigint();
  for (let sent = 0; sent < n;) {
    let last: Promise<unknown> | null = null;
    for (let i = 0; i < runsPerBatch && sent < n; i++, sent++) last = g.postTxRun(0, run);
    await last;
  }
  return n / (Number(process.hrtime.bigint() - t0) / 1e9);
}
