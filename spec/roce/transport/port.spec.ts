import { expect } from 'chai';
import type * as sinon from 'sinon';
import {
  DROP_BAD_PKEY,
  DROP_ICRC,
  DROP_NONE,
  DROP_NOT_OUR_GID,
  DROP_OVERSIZED,
  DROP_PSN_OUT_OF_WINDOW,
  DROP_QP_STATE,
  DROP_REASON_NAMES,
  DROP_TOO_SHORT,
  DROP_UNEXPECTED_RESPONSE,
  DROP_UNKNOWN_QPN,
  DROP_WRONG_PEER,
  DROP_WRONG_TRANSPORT,
  NAK_KIND_SEQUENCE,
} from '../../../lib/roce/counters';
import { encodeFrame, type RocePath } from '../../../lib/roce/frame';
import { F_PAYLOAD, OPCODE_FLAGS } from '../../../lib/roce/opcodes';
import { TransportHeaders } from '../../../lib/roce/packet';
import { QPS_ERR, QPS_RESET, QPS_RTS, WR_SEND } from '../../../lib/roce/transport/types';
import { xorshift } from '../../support/rng';
import { ipv4Path } from '../paths';
import { connectedPair, fakeClock, settle } from './harness';

function frame(path: RocePath, fill: (h: TransportHeaders) => void, payloadLen = 0): Buffer {
  const h = new TransportHeaders();
  h.destQp = 0x22;
  fill(h);
  const buf = Buffer.alloc(9000);
  const len = encodeFrame(buf, path, h, payloadLen);
  return buf.subarray(0, len);
}

describe('roce/transport port: bad packets from the wire are dropped and counted', () => {
  let clock: sinon.SinonFakeTimers;
  beforeEach(() => {
    clock = fakeClock();
  });
  afterEach(() => {
    clock.restore();
  });

  it('each kind of bad packet gets its own reason, and the QP is none the worse', () => {
    const { a, b } = connectedPair((c) => {
      c.pmtu = 256;
    });
    b.mem.register(2, 0, 4096);
    b.postRecv(1, 2, 0, 4096);
    const good = () =>
      frame(
        a.path,
        (h) => {
          h.opcode = 0x04;
          h.psn = 0;
          h.ackReq = true;
        },
        8,
      );
    const cases: Array<[string, Buffer, number]> = [];
    for (let n = 0; n < 14; n++) cases.push([`${n}-byte frame`, good().subarray(0, n), DROP_TOO_SHORT]);
    const badIcrc = Buffer.from(good());
    badIcrc[badIcrc.length - 1] ^= 0xff;
    cases.push(['a wrong ICRC', badIcrc, DROP_ICRC]);
    cases.push([
      'an unknown QPN',
      frame(a.path, (h) => {
        h.opcode = 0x04;
        h.destQp = 0x999;
      }),
      DROP_UNKNOWN_QPN,
    ]);
    cases.push([
      "another host's GID",
      frame(ipv4Path(1, 9), (h) => {
        h.opcode = 0x04;
      }),
      DROP_NOT_OUR_GID,
    ]);
    cases.push([
      'a stranger as the RC peer',
      frame(ipv4Path(7, 2), (h) => {
        h.opcode = 0x04;
      }),
      DROP_WRONG_PEER,
    ]);
    cases.push([
      'a UC opcode to an RC QP',
      frame(a.path, (h) => {
        h.opcode = 0x24;
      }),
      DROP_WRONG_TRANSPORT,
    ]);
    cases.push([
      'a P_Key of another partition',
      frame(a.path, (h) => {
        h.opcode = 0x04;
        h.pkey = 0x8001;
      }),
      DROP_BAD_PKEY,
    ]);
    cases.push([
      'a payload over the path MTU',
      frame(
        a.path,
        (h) => {
          h.opcode = 0x04;
        },
        512,
      ),
      DROP_OVERSIZED,
    ]);
    cases.push([
      'an ACK for a PSN never sent',
      frame(a.path, (h) => {
        h.opcode = 0x11;
        h.psn = 500;
        h.syndrome = 0x1f;
      }),
      DROP_UNEXPECTED_RESPONSE,
    ]);
    cases.push([
      'a PSN far ahead of the window',
      frame(a.path, (h) => {
        h.opcode = 0x04;
        h.psn = 0x400000;
      }),
      DROP_PSN_OUT_OF_WINDOW,
    ]);
    cases.push([
      'a PSN just ahead',
      frame(a.path, (h) => {
        h.opcode = 0x04;
        h.psn = 1;
      }),
      DROP_PSN_OUT_OF_WINDOW,
    ]);
    for (const [what, f, reason] of cases) {
      expect(b.port.receive(f, f.length), what).to.equal(reason);
    }
    for (const [, , reason] of cases)
      expect(b.port.counters.drops[reason], DROP_REASON_NAMES[reason]).to.be.greaterThan(0);
    expect(b.port.counters.drops[DROP_TOO_SHORT]).to.equal(14);
    expect(b.port.counters.icrcErrors).to.equal(1);
    expect(
      b.port.counters.naksTx[NAK_KIND_SEQUENCE],
      'one sequence NAK for the expected PSN, not one per packet',
    ).to.equal(1);
    expect(b.qp.state).to.equal(QPS_RTS);
    expect(b.recvCqes).to.deep.equal([]);
    const f = good();
    expect(b.port.receive(f, f.length), 'the right packet still goes in').to.equal(DROP_NONE);
    expect(b.recvCqes.map((c) => c.byteLen)).to.deep.equal([8]);
    const snap = b.port.counters.snapshot();
    expect(snap.drops_too_short).to.equal(14);
    expect(snap.icrc_errors).to.equal(1);
    expect(snap.naks_tx_psn_sequence).to.equal(1);
  });

  it('a QP in RESET or ERROR takes nothing', () => {
    const { a, b } = connectedPair();
    const f = frame(a.path, (h) => {
      h.opcode = 0x04;
    });
    b.qp.modify(QPS_RESET);
    expect(b.port.receive(f, f.length)).to.equal(DROP_QP_STATE);
    b.qp.modify(QPS_ERR);
    expect(b.port.receive(f, f.length)).to.equal(DROP_QP_STATE);
  });

  it('never throws on mutated and random frames, and counts every one it drops', () => {
    const { a, b } = connectedPair((c) => {
      c.maxDestRdAtomic = 4;
    });
    a.mem.register(1, 0, 1 << 16);
    b.mem.register(2, 0, 1 << 16);
    for (let i = 0; i < 16; i++) b.postRecv(i, 2, i * 4096, 4096);
    for (let i = 0; i < 8; i++)
      a.post({ wrId: i, opcode: WR_SEND, sgl: [{ addr: 0, length: 3000, lkey: 1 }], length: 3000 });
    const seen = [...a.out];
    settle(clock, a, b);
    seen.push(...b.sent);
    const next = xorshift(0xfa11);
    let delivered = 0;
    const before = b.port.counters.drops.reduce((s, v) => s + v, 0);
    let dropped = 0;
    for (let i = 0; i < 20000; i++) {
      const base = seen[next() % seen.length]!;
      const m = Buffer.from(base);
      if (i % 5 === 0) {
        for (let j = 0; j < m.length; j++) m[j] = next() & 0xff;
      } else {
        for (let k = 1 + (next() % 4); k > 0; k--) m[12 + (next() % (m.length - 12))] ^= 1 << (next() % 8);
      }
      const len = i % 7 === 0 ? next() % (m.length + 1) : m.length;
      const r = b.port.receive(m, len);
      expect(r).to.be.within(0, DROP_REASON_NAMES.length - 1);
      if (r !== DROP_NONE) dropped++;
      delivered++;
    }
    expect(delivered).to.equal(20000);
    expect(b.port.counters.drops.reduce((s, v) => s + v, 0) - before).to.equal(dropped);
    expect(b.port.counters.icrcErrors).to.be.greaterThan(1000);
  });

  it('never throws on well-formed packets with hostile header values (right peer, good ICRC) at both ends', () => {
    const { a, b } = connectedPair((c) => {
      c.maxDestRdAtomic = 2;
      c.maxRdAtomic = 2;
      c.pmtu = 256;
    });
    a.mem.register(1, 0, 1 << 14);
    b.mem.register(2, 0, 1 << 14);
    const next = xorshift(0x0bad);
    const ops = [
      0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12,
      0x13, 0x14, 0x16, 0x17,
    ];
    const h = new TransportHeaders();
    const buf = Buffer.alloc(2048);
    let taken = 0;
    for (let i = 0; i < 20000; i++) {
      if (i % 500 === 0) {
        // Keep both QPs alive and give them work, so the hostile packets meet every state.
        for (const e of [a, b])
          if (e.qp.state !== QPS_RTS) {
            e.qp.modify(QPS_RESET);
            e.qp.modify(1);
            e.qp.modify(2);
            e.qp.modify(QPS_RTS);
          }
        b.postRecv(i, 2, (i % 8) * 1024, 1024);
        a.post({ wrId: i, opcode: WR_SEND, sgl: [{ addr: 0, length: 600, lkey: 1 }], length: 600 });
      }
      const toB = (next() & 1) === 0;
      const from = toB ? a : b;
      h.opcode = ops[next() % ops.length]!;
      h.destQp = toB ? 0x22 : 0x11;
      h.psn = next() % 8 === 0 ? next() & 0xffffff : next() % 16;
      h.ackReq = (next() & 1) === 1;
      h.pkey = 0xffff;
      h.va = next() % 4 === 0 ? (next() & 0x1fffff) * 0x100000000 + next() : next() % (1 << 15);
      h.rkey = next() % 3 === 0 ? next() : 1 + (next() & 1);
      h.dmaLen = next() % 4 === 0 ? next() : next() % 2048;
      h.syndrome = next() & 0xff;
      h.msn = next() & 0xffffff;
      h.imm = next();
      h.invRkey = next();
      h.swapHi = next();
      h.swapLo = next();
      h.cmpHi = next();
      h.cmpLo = next();
      h.origHi = next();
      h.origLo = next();
      const payload = OPCODE_FLAGS[h.opcode]! & F_PAYLOAD ? next() % 300 : 0;
      const len = encodeFrame(buf, from.path, h, payload);
      const to = toB ? b : a;
      const r = to.port.receive(buf, len);
      expect(r).to.be.within(0, DROP_REASON_NAMES.length - 1);
      if (r === DROP_NONE) taken++;
      // What they answer goes nowhere, and the clock moves on now and then.
      a.out.length = 0;
      b.out.length = 0;
      if (i % 97 === 0) clock.tick(5);
    }
    expect(taken, 'some hostile packets get past the checks into the transport').to.be.greaterThan(100);
  });
});
