import { expect } from 'chai';
import {
  DROP_BAD_OPCODE,
  DROP_ICRC,
  DROP_IP_CHECKSUM,
  DROP_IP_HEADER,
  DROP_IP_LENGTH,
  DROP_NONE,
  DROP_NOT_IP,
  DROP_NOT_ROCE_PORT,
  DROP_NOT_UDP,
  DROP_TOO_SHORT,
  DROP_UDP_LENGTH,
} from '../../lib/roce/counters';
import {
  decodeFrame,
  encodeFrame,
  frameBytes,
  frameHeaderBytes,
  isRoceV2,
  RoceFrame,
  RocePath,
  gidEquals,
} from '../../lib/roce/frame';
import { computeIcrc } from '../../lib/roce/icrc';
import { F_PAYLOAD, knownOpcodes, OPCODE_FLAGS, opcodeName } from '../../lib/roce/opcodes';
import { TransportHeaders } from '../../lib/roce/packet';
import { xorshift } from '../support/rng';
import { ipv4Path, ipv6Path, vlanPath } from './paths';

function frameOf(path: RocePath, opcode: number, payload: Buffer): { buf: Buffer; len: number; h: TransportHeaders } {
  const h = new TransportHeaders();
  h.opcode = opcode;
  h.destQp = 0x11;
  h.psn = 0xfffffe;
  h.ackReq = true;
  h.va = 0x1000;
  h.rkey = 0x42;
  h.dmaLen = payload.length;
  h.qkey = 0x1234;
  h.srcQp = 7;
  h.imm = 0xdeadbeef;
  h.syndrome = 0x1f;
  h.msn = 9;
  const buf = Buffer.alloc(frameBytes(path, opcode, payload.length) + 32, 0xcc);
  payload.copy(buf, frameHeaderBytes(path, opcode));
  const len = encodeFrame(buf, path, h, payload.length);
  return { buf, len, h };
}

describe('roce/frame', () => {
  const paths: ReadonlyArray<readonly [string, RocePath]> = [
    ['IPv4', ipv4Path(1, 2)],
    ['IPv6', ipv6Path(1, 2)],
    ['VLAN', vlanPath(1, 2)],
  ];
  for (const [name, path] of paths) {
    it(`${name}: every opcode round-trips with its payload, addresses and ICRC`, () => {
      const f = new RoceFrame();
      for (const op of knownOpcodes()) {
        const payload = OPCODE_FLAGS[op]! & F_PAYLOAD ? Buffer.from('hello, remote memory!') : Buffer.alloc(0);
        const { buf, len } = frameOf(path, op, payload);
        expect(len % 4, 'frames end on a word').to.equal(2);
        expect(decodeFrame(buf, len, f), opcodeName(op)).to.equal(DROP_NONE);
        expect(f.headers.opcode).to.equal(op);
        expect(f.headers.psn).to.equal(0xfffffe);
        expect(
          buf.subarray(f.headers.payloadOff, f.headers.payloadOff + f.headers.payloadLen).equals(payload),
        ).to.equal(true);
        expect(f.srcGid.equals(path.srcGid)).to.equal(true);
        expect(f.dstGid.equals(path.dstGid)).to.equal(true);
        expect(f.ipVersion).to.equal(path.ipVersion);
        expect(f.vlanTci).to.equal(path.vlanTci);
        expect(f.trafficClass).to.equal(path.trafficClass);
        expect(f.hopLimit).to.equal(path.hopLimit);
        expect(f.udpSrcPort).to.equal(path.udpSrcPort);
        expect(f.flowLabel).to.equal(path.ipVersion === 6 ? path.flowLabel : 0);
        expect(isRoceV2(buf, len)).to.equal(true);
      }
    });
  }

  it('takes Ethernet padding after the IP datagram', () => {
    const { buf, len } = frameOf(ipv4Path(1, 2), 0x11, Buffer.alloc(0));
    const f = new RoceFrame();
    expect(decodeFrame(buf, len + 6, f)).to.equal(DROP_NONE);
    expect(f.icrcOff).to.equal(len - 4);
  });

  it('drops, with a reason, every truncation of every kind of frame', () => {
    const f = new RoceFrame();
    for (const [, path] of paths) {
      for (const op of [0x04, 0x0a, 0x0c, 0x11, 0x12, 0x13, 0x64]) {
        const { buf, len } = frameOf(path, op, OPCODE_FLAGS[op]! & F_PAYLOAD ? Buffer.alloc(8, 1) : Buffer.alloc(0));
        for (let cut = 0; cut < len; cut++)
          expect(decodeFrame(buf, cut, f), `${opcodeName(op)} cut at ${cut}`).to.not.equal(DROP_NONE);
      }
    }
  });

  it('names the layer that is wrong', () => {
    const f = new RoceFrame();
    const base = frameOf(ipv4Path(1, 2), 0x04, Buffer.alloc(16, 7));
    const with_ = (mutate: (b: Buffer) => void): number => {
      const b = Buffer.from(base.buf);
      mutate(b);
      return decodeFrame(b, base.len, f);
    };
    expect(decodeFrame(base.buf, base.len + 40, f), 'length past the buffer').to.equal(DROP_TOO_SHORT);
    expect(with_((b) => b.writeUInt16BE(0x0806, 12))).to.equal(DROP_NOT_IP);
    expect(
      with_((b) => {
        b[14] = 0x46;
      }),
    ).to.equal(DROP_IP_HEADER); // options
    expect(
      with_((b) => {
        b[14] = 0x55;
      }),
    ).to.equal(DROP_IP_HEADER); // version 5
    expect(with_((b) => b.writeUInt16BE(0x2001, 20))).to.equal(DROP_IP_HEADER); // a fragment
    expect(with_((b) => b.writeUInt16BE(0xffff, 16))).to.equal(DROP_IP_LENGTH);
    expect(with_((b) => b.writeUInt16BE(20, 16))).to.equal(DROP_IP_LENGTH);
    expect(
      with_((b) => {
        b[23] = 6;
      }),
    ).to.equal(DROP_NOT_UDP);
    expect(
      with_((b) => {
        b[25] ^= 1;
      }),
    ).to.equal(DROP_IP_CHECKSUM);
    expect(with_((b) => b.writeUInt16BE(4792, 36))).to.equal(DROP_NOT_ROCE_PORT);
    expect(with_((b) => b.writeUInt16BE(b.readUInt16BE(38) + 4, 38))).to.equal(DROP_UDP_LENGTH);
    expect(
      with_((b) => {
        b[42] = 0x15;
      }),
    ).to.equal(DROP_BAD_OPCODE);
    expect(
      with_((b) => {
        b[base.len - 6] ^= 0x80;
      }),
      'payload bit flip',
    ).to.equal(DROP_ICRC);
    expect(
      with_((b) => {
        b[base.len - 1] ^= 1;
      }),
      'ICRC bit flip',
    ).to.equal(DROP_ICRC);
    const v6 = frameOf(ipv6Path(1, 2), 0x04, Buffer.alloc(4));
    const b6 = Buffer.from(v6.buf);
    b6[20] = 0; // a hop-by-hop extension header instead of UDP
    expect(decodeFrame(b6, v6.len, f)).to.equal(DROP_NOT_UDP);
  });

  it('never throws on random bit flips and random frames; every one is a packet or a reason', () => {
    const next = xorshift(0xf1f1);
    const f = new RoceFrame();
    const { buf, len } = frameOf(ipv4Path(1, 2), 0x0a, Buffer.alloc(64, 3));
    let icrc = 0;
    for (let i = 0; i < 5000; i++) {
      const b = Buffer.from(buf);
      const flips = 1 + (next() % 3);
      // Not the MACs (Ethernet's FCS covers them, not the ICRC), the UDP checksum (unused over IPv4) or the BTH's FECN/BECN byte.
      for (let k = 0; k < flips; k++) {
        const at = 12 + (next() % (len - 12));
        if (at !== 40 && at !== 41 && at !== 46) b[at] ^= 1 << (next() % 8);
      }
      if (b.equals(buf)) continue;
      const r = decodeFrame(b, len, f);
      if (r === DROP_ICRC) icrc++;
      expect(r, 'a flipped frame never decodes (ICRC or checksum catch it)').to.not.equal(DROP_NONE);
    }
    expect(icrc).to.be.greaterThan(1000);
    const junk = Buffer.alloc(256);
    for (let i = 0; i < 5000; i++) {
      for (let j = 0; j < junk.length; j++) junk[j] = next() & 0xff;
      junk.writeUInt16BE(i & 1 ? 0x0800 : 0x86dd, 12);
      expect(decodeFrame(junk, next() % 257, f)).to.not.equal(DROP_NONE);
    }
  });

  it('isRoceV2 picks out UDP 4791 and nothing else', () => {
    const { buf, len } = frameOf(ipv6Path(1, 2), 0x11, Buffer.alloc(0));
    expect(isRoceV2(buf, len)).to.equal(true);
    expect(isRoceV2(buf, 20)).to.equal(false);
    const other = Buffer.from(buf);
    other.writeUInt16BE(53, 14 + 40 + 2);
    expect(isRoceV2(other, len)).to.equal(false);
    expect(isRoceV2(Buffer.alloc(64), 64)).to.equal(false);
  });
});

describe('roce/frame gidEquals', () => {
  it('equal only when all 16 bytes are: a difference in any byte, and views at an offset, are seen', () => {
    const a = Buffer.from('fe800000000000000265720000010a0a', 'hex');
    expect(gidEquals(a, Buffer.from(a))).to.equal(true);
    for (let i = 0; i < 16; i++) {
      const b = Buffer.from(a);
      b[i]! ^= 0x01;
      expect(gidEquals(a, b), `byte ${i}`).to.equal(false);
      expect(gidEquals(b, a), `byte ${i}`).to.equal(false);
    }
    const big = Buffer.alloc(40);
    a.copy(big, 7);
    expect(gidEquals(big.subarray(7, 23), a)).to.equal(true);
  });
});

describe('roce/icrc', () => {
  // A RoCEv2 CNP captured from a ConnectX-4 Lx, ICRC included (published as a
  // hex dump in scapy's RoCE tests): an ICRC computed by hardware.
  const CNP = Buffer.from(
    'e41d2dab2bc27cfe90643b32080045c2003c718c4000401191610a0011010a001201' +
      '000012b70028000081' +
      '00ffff40000118' +
      '0'.repeat(40) +
      '82fd002a',
    'hex',
  );

  it('matches the ICRC a ConnectX-4 Lx put on a real packet', () => {
    expect(CNP.length).to.equal(74);
    const v = computeIcrc(CNP, 14, 4, CNP.length - 4);
    expect(v).to.equal(CNP.readUInt32LE(CNP.length - 4));
  });

  it('ignores exactly the fields routers may change', () => {
    const base = computeIcrc(CNP, 14, 4, 70);
    const variant = [15, 22, 24, 25, 40, 41, 46]; // TOS, TTL, IP checksum, UDP checksum, BTH FECN/BECN byte
    for (const at of variant) {
      const b = Buffer.from(CNP);
      b[at] ^= 0x5a;
      expect(computeIcrc(b, 14, 4, 70), `byte ${at}`).to.equal(base);
    }
    for (let at = 14; at < 70; at++) {
      if (variant.includes(at)) continue;
      const b = Buffer.from(CNP);
      b[at] ^= 0x01;
      expect(computeIcrc(b, 14, 4, 70), `byte ${at}`).to.not.equal(base);
    }
  });

  it('over IPv6 ignores traffic class, flow label and hop limit but not the version', () => {
    const h = new TransportHeaders();
    h.opcode = 0x04;
    const p = ipv6Path(3, 4);
    const buf = Buffer.alloc(200);
    const len = encodeFrame(buf, p, h, 8);
    const base = computeIcrc(buf, 14, 6, len - 4);
    for (const at of [14, 15, 16, 17, 21]) {
      const b = Buffer.from(buf);
      b[at] ^= at === 14 ? 0x0f : 0xff;
      expect(computeIcrc(b, 14, 6, len - 4), `byte ${at}`).to.equal(base);
    }
    const b = Buffer.from(buf);
    b[14] ^= 0x10;
    expect(computeIcrc(b, 14, 6, len - 4)).to.not.equal(base);
  });
});
