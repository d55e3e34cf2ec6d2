// A connection's header template writes the same bytes as the field-by-field
// builder (buildTcpFrame) for every segment it is used for, and its seal
// returns the complete sum a NIC would report for the frame.

import { expect } from 'chai';
import { randomBytes } from 'crypto';
import { onesComplementSum } from '../../../lib/net/checksum';
import { buildTcpFrame, TcpHeaderTemplate } from '../../../lib/net/tcp-host/wire';

describe('net: the TCP header template', () => {
  const dmac = Buffer.from([0x52, 0x54, 0, 0x12, 0x34, 0x56]);
  const smac = Buffer.from([0x02, 0x53, 192, 168, 200, 1]);
  const saddr = Buffer.from([192, 168, 200, 1]);
  const daddr = Buffer.from([192, 168, 200, 10]);

  it('writes what buildTcpFrame writes, checksums and complete sum included, across lengths, ids and sequence wrap', () => {
    const t = new TcpHeaderTemplate(dmac, smac, saddr, daddr, 9000, 40000);
    const out = Buffer.alloc(10000);
    const cases = [
      { seq: 0, ack: 1, flags: 0x10, window: 0xffff, ipId: 0, len: 0 },
      { seq: 0xffffffff, ack: 0x80000000, flags: 0x18, window: 1, ipId: 0xffff, len: 1 },
      { seq: 123456789, ack: 42, flags: 0x11, window: 4096, ipId: 7, len: 1460 },
      { seq: 0xfffffa00, ack: 5, flags: 0x10, window: 512, ipId: 0x8000, len: 8960 },
    ];
    for (const c of cases) {
      const payload = randomBytes(c.len);
      const want = buildTcpFrame({ dmac, smac, saddr, daddr, sport: 9000, dport: 40000, payload, ...c });
      const at = t.write(out, c.seq, c.ack, c.flags, c.window, c.ipId, c.len);
      payload.copy(out, at);
      const frame = out.subarray(0, at + c.len);
      const complete = t.seal(frame, frame.length);
      expect(frame.equals(want), `seq ${c.seq} len ${c.len}`).to.equal(true);
      expect(complete).to.equal(onesComplementSum(frame, 14, frame.length));
    }
  });
});
