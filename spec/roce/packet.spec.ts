import { expect } from 'chai';
import { DROP_BAD_OPCODE, DROP_BAD_PAD, DROP_BAD_TVER, DROP_NONE, DROP_TRUNCATED } from '../../lib/roce/counters';
import {
  F_AETH,
  F_ATOMICACKETH,
  F_ATOMICETH,
  F_DETH,
  F_IETH,
  F_IMMDT,
  F_PAYLOAD,
  F_RETH,
  knownOpcodes,
  OPCODE_FLAGS,
  OPCODE_HEADER_BYTES,
  opcodeName,
} from '../../lib/roce/opcodes';
import { decodeTransport, encodeTransport, TransportHeaders } from '../../lib/roce/packet';
import { xorshift } from '../support/rng';

/** Fill every field of h from the RNG, in range for its width. */
function randomHeaders(next: () => number, opcode: number, payloadLen: number): TransportHeaders {
  const h = new TransportHeaders();
  h.opcode = opcode;
  h.solicited = (next() & 1) === 1;
  h.migReq = (next() & 1) === 1;
  h.pkey = next() & 0xffff;
  h.fecn = (next() & 1) === 1;
  h.becn = (next() & 1) === 1;
  h.destQp = next() & 0xffffff;
  h.ackReq = (next() & 1) === 1;
  h.psn = next() & 0xffffff;
  h.va = (next() & 0x1fffff) * 0x100000000 + next();
  h.rkey = next();
  h.dmaLen = next();
  h.syndrome = next() & 0xff;
  h.msn = next() & 0xffffff;
  h.qkey = next();
  h.srcQp = next() & 0xffffff;
  h.imm = next();
  h.invRkey = next();
  h.swapHi = next();
  h.swapLo = next();
  h.cmpHi = next();
  h.cmpLo = next();
  h.origHi = next();
  h.origLo = next();
  h.payloadLen = payloadLen;
  return h;
}

const FIELDS_BY_HEADER: ReadonlyArray<readonly [number, readonly (keyof TransportHeaders)[]]> = [
  [F_RETH, ['va', 'rkey', 'dmaLen']],
  [F_AETH, ['syndrome', 'msn']],
  [F_DETH, ['qkey', 'srcQp']],
  [F_IMMDT, ['imm']],
  [F_IETH, ['invRkey']],
  [F_ATOMICETH, ['va', 'rkey', 'swapHi', 'swapLo', 'cmpHi', 'cmpLo']],
  [F_ATOMICACKETH, ['origHi', 'origLo']],
];
const BTH_FIELDS: readonly (keyof TransportHeaders)[] = [
  'opcode',
  'solicited',
  'migReq',
  'pkey',
  'fecn',
  'becn',
  'destQp',
  'ackReq',
  'psn',
];

describe('roce/packet', () => {
  for (const op of knownOpcodes()) {
    it(`${opcodeName(op)}: every header field round-trips, with each pad count`, () => {
      const next = xorshift(0x1000 + op);
      const hasPayload = (OPCODE_FLAGS[op]! & F_PAYLOAD) !== 0;
      for (const payloadLen of hasPayload ? [0, 1, 2, 3, 4, 5, 1024] : [0]) {
        const sent = randomHeaders(next, op, payloadLen);
        const buf = Buffer.alloc(2048, 0xee);
        const n = encodeTransport(buf, 10, sent);
        expect(n).to.equal(OPCODE_HEADER_BYTES[op]);
        const pad = (4 - (payloadLen & 3)) & 3;
        const end = 10 + n + payloadLen + pad;
        const got = new TransportHeaders();
        expect(decodeTransport(buf, 10, end, got)).to.equal(DROP_NONE);
        for (const k of BTH_FIELDS) expect(got[k], k).to.equal(sent[k]);
        for (const [bit, keys] of FIELDS_BY_HEADER) {
          if (OPCODE_FLAGS[op]! & bit) for (const k of keys) expect(got[k], k).to.equal(sent[k]);
        }
        expect(got.padCount).to.equal(pad);
        expect(got.payloadOff).to.equal(10 + n);
        expect(got.payloadLen).to.equal(payloadLen);
      }
    });
  }

  it('writes the BTH bit fields where the IBTA puts them', () => {
    const h = new TransportHeaders();
    h.opcode = 0x04;
    h.solicited = true;
    h.migReq = true;
    h.pkey = 0xffff;
    h.becn = true;
    h.destQp = 0x123456;
    h.ackReq = true;
    h.psn = 0xabcdef;
    h.payloadLen = 3;
    const buf = Buffer.alloc(12);
    encodeTransport(buf, 0, h);
    // opcode, SE|M|pad 1|tver 0, P_Key, BECN, QPN, A, PSN.
    expect(buf.toString('hex')).to.equal('04d0ffff40123456' + '80abcdef');
  });

  it('refuses an opcode outside the table, a non-zero TVer, short headers and impossible pad', () => {
    const h = new TransportHeaders();
    const buf = Buffer.alloc(64);
    h.opcode = 0x11; // RC ACKNOWLEDGE: BTH + AETH, no payload
    const n = encodeTransport(buf, 0, h);
    expect(decodeTransport(buf, 0, n, h)).to.equal(DROP_NONE);
    expect(decodeTransport(buf, 0, n - 1, h)).to.equal(DROP_TRUNCATED);
    expect(decodeTransport(buf, 0, 11, h)).to.equal(DROP_TRUNCATED);
    expect(decodeTransport(buf, 0, n + 4, h), 'payload on an ACK').to.equal(DROP_BAD_PAD);
    expect(decodeTransport(buf, 0, buf.length + 1, h), 'end past the buffer').to.equal(DROP_TRUNCATED);
    buf[1] = 0x01;
    expect(decodeTransport(buf, 0, n, h)).to.equal(DROP_BAD_TVER);
    buf[1] = 0x30; // pad 3, no payload
    expect(decodeTransport(buf, 0, n, h)).to.equal(DROP_BAD_PAD);
    buf[1] = 0;
    for (const bad of [0x15, 0x18, 0x1f, 0x2c, 0x40, 0x60, 0x66, 0x81, 0xa0, 0xff]) {
      buf[0] = bad;
      expect(decodeTransport(buf, 0, n, h), `opcode 0x${bad.toString(16)}`).to.equal(DROP_BAD_OPCODE);
    }
    buf[0] = 0x04; // SEND ONLY with a payload that is not a whole number of words
    expect(decodeTransport(buf, 0, 12 + 5, h)).to.equal(DROP_BAD_PAD);
  });

  it('survives any bytes at all: random buffers decode to a reason or a packet, never an exception', () => {
    const next = xorshift(0xbad);
    const buf = Buffer.alloc(96);
    const h = new TransportHeaders();
    let ok = 0;
    for (let i = 0; i < 20000; i++) {
      for (let j = 0; j < buf.length; j++) buf[j] = next() & 0xff;
      if ((i & 3) === 0) buf[0] = knownOpcodes()[next() % 37]!;
      if ((i & 1) === 0) buf[1] &= 0xf0;
      const end = next() % (buf.length + 8);
      const r = decodeTransport(buf, next() % 4, end, h);
      if (r === DROP_NONE) {
        ok++;
        expect(h.payloadOff + h.payloadLen + h.padCount).to.be.at.most(end);
      }
    }
    expect(ok, 'some random packets decode').to.be.greaterThan(0);
  });
});
