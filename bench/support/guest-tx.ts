// The guest model's TX path at full rate, as the frame benchmarks drive it:
// batches of descriptors (one doorbell a batch, as ionic.ko's xmit_more
// does), waiting for each batch's last completion (MSI-X) before the next.

import { IonicGuest } from '../../spec/support/ionic/guest';

/** Descriptors a batch (one doorbell). */
export const TX_BATCH = 128;

/** Frames per second for `n` copies of `f` sent by `g` on its first TX queue. */
export async function txRate(g: IonicGuest, f: Buffer, n: number): Promise<number> {
  const t0 = process.hrtime.bigint();
  for (let sent = 0; sent < n;) {
    let last: Promise<unknown> | null = null;
    for (let i = 0; i < TX_BATCH && sent < n; i++, sent++) last = g.postFrame(f, { ring: i === TX_BATCH - 1 || sent === n - 1 }).done;
    await last;
  }
  return n / (Number(process.hrtime.bigint() - t0) / 1e9);
}
