// Representative RoCEv2 traffic for the capture fixture, made by the real
// transport: two RC QPs over IPv4 (SEND, SEND with immediate and invalidate,
// WRITE, WRITE with immediate, a two-packet READ, compare-and-swap,
// fetch-and-add, an RNR NAK and its resend, a lost packet's sequence NAK and
// go-back-N, a remote access NAK), UD over IPv6, UC on a VLAN and a MAD on
// QP1. Every frame either side sends is recorded in order (lost ones too: the
// capture is taken at the senders), timed by a fake clock, so the bytes are
// the same on every run.

import type * as sinon from 'sinon';
import type { PcapRecord } from '../../lib/net/pcap';
import {
  QPT_GSI,
  QPT_UC,
  QPT_UD,
  type RoceQpConfig,
  WR_ATOMIC_CMP_AND_SWP,
  WR_ATOMIC_FETCH_AND_ADD,
  WR_RDMA_READ,
  WR_RDMA_WRITE,
  WR_RDMA_WRITE_WITH_IMM,
  WR_SEND,
  WR_SEND_WITH_IMM,
  WR_SEND_WITH_INV,
} from '../../lib/roce/transport/types';
import { ipv6Path, vlanPath } from './paths';
import { connectedPair, deliverAll, type Endpoint, fakeClock, pattern, settle } from './transport/harness';

/** 2026-01-01T00:00:00Z in microseconds: where the capture's clock starts. */
const EPOCH_US = 1767225600 * 1e6;

/** Record what both endpoints send, in order, with the fake clock's time. */
function recorder(clock: sinon.SinonFakeTimers, out: PcapRecord[], ...eps: Endpoint[]): void {
  for (const e of eps) {
    const push = e.out.push.bind(e.out);
    e.out.push = (...frames: Buffer[]): number => {
      for (const f of frames) out.push({ timeUs: EPOCH_US + clock.now * 1000 + out.length, data: f });
      return push(...frames);
    };
  }
}

function rcSession(clock: sinon.SinonFakeTimers, out: PcapRecord[]): void {
  const { a, b } = connectedPair((c: RoceQpConfig) => {
    c.sqPsn = c.qpn === 0x11 ? 0xfffffd : 0x100;
    c.rqPsn = c.qpn === 0x11 ? 0x100 : 0xfffffd;
    c.minRnrTimer = 14;
    c.timeout = 14;
    c.maxRdAtomic = 2;
    c.maxDestRdAtomic = 2;
  });
  recorder(clock, out, a, b);
  pattern(4096, 21).copy(a.mem.register(0x1001, 0x7f0000001000, 4096));
  pattern(4096, 22).copy(b.mem.register(0x2002, 0x7f0000100000, 8192));
  for (let i = 0; i < 3; i++)
    b.postRecv(100 + i, 0x2002, 0x7f0000100000 + 4096 + i * 1024, 1024 + (i === 0 ? 1024 : 0));
  const sge = (off: number, length: number) => [{ addr: 0x7f0000001000 + off, length, lkey: 0x1001 }];
  a.post({ wrId: 1, opcode: WR_SEND, sgl: sge(0, 1500), length: 1500 });
  a.post({ wrId: 2, opcode: WR_SEND_WITH_IMM, sgl: sge(0, 13), length: 13, imm: 0x11223344 });
  a.post({ wrId: 3, opcode: WR_SEND_WITH_INV, sgl: sge(0, 24), length: 24, imm: 0x2002 });
  settle(clock, a, b);
  a.post({ wrId: 4, opcode: WR_RDMA_WRITE, sgl: sge(64, 100), length: 100, remoteAddr: 0x7f0000100000, rkey: 0x2002 });
  b.postRecv(103, 0x2002, 0x7f0000100000, 16);
  a.post({
    wrId: 5,
    opcode: WR_RDMA_WRITE_WITH_IMM,
    sgl: sge(0, 7),
    length: 7,
    remoteAddr: 0x7f0000100200,
    rkey: 0x2002,
    imm: 0xdeadbeef,
  });
  a.post({
    wrId: 6,
    opcode: WR_RDMA_READ,
    sgl: sge(1024, 1500),
    length: 1500,
    remoteAddr: 0x7f0000100400,
    rkey: 0x2002,
  });
  a.post({
    wrId: 7,
    opcode: WR_ATOMIC_CMP_AND_SWP,
    sgl: sge(2600, 8),
    length: 8,
    remoteAddr: 0x7f0000100008,
    rkey: 0x2002,
    cmpHi: 0,
    cmpLo: 0,
    swapHi: 0x01020304,
    swapLo: 0x05060708,
  });
  a.post({
    wrId: 8,
    opcode: WR_ATOMIC_FETCH_AND_ADD,
    sgl: sge(2608, 8),
    length: 8,
    remoteAddr: 0x7f0000100010,
    rkey: 0x2002,
    swapHi: 0,
    swapLo: 1,
  });
  settle(clock, a, b);
  // No receive WQE: an RNR NAK, the RNR timer, then the resend finds one.
  a.post({ wrId: 9, opcode: WR_SEND, sgl: sge(0, 32), length: 32 });
  deliverAll(a, b, a.out.splice(0));
  deliverAll(b, a, b.out.splice(0));
  b.postRecv(104, 0x2002, 0x7f0000100000, 2048);
  settle(clock, a, b);
  // Two KiB over a 1024 MTU with its middle packet lost: a sequence NAK and go-back-N.
  b.postRecv(105, 0x2002, 0x7f0000100000, 4096);
  a.post({ wrId: 10, opcode: WR_SEND, sgl: sge(0, 2100), length: 2100 });
  let n = 0;
  settle(clock, a, b, (from, to, frames) => {
    for (const f of frames) if (!(from === a && n++ === 1)) to.port.receive(f, f.length);
  });
  // A WRITE with an R_Key the responder does not know: remote access NAK (both QPs end in ERROR).
  a.post({ wrId: 11, opcode: WR_RDMA_WRITE, sgl: sge(0, 8), length: 8, remoteAddr: 0x7f0000100000, rkey: 0x7777 });
  settle(clock, a, b);
}

function udSession(clock: sinon.SinonFakeTimers, out: PcapRecord[]): void {
  const { a, b } = connectedPair((c: RoceQpConfig) => {
    c.qkey = 0x11111111;
    c.qpn = c.qpn === 0x11 ? 0x31 : 0x32;
  }, QPT_UD);
  recorder(clock, out, a, b);
  const p6 = ipv6Path(1, 2);
  b.port.addGid(p6.dstGid);
  b.mem.register(1, 0, 4096);
  b.postRecv(1, 1, 0, 2048);
  b.postRecv(2, 1, 2048, 2048);
  a.post({
    wrId: 1,
    opcode: WR_SEND,
    inline: pattern(100, 30),
    length: 100,
    ud: { path: p6, destQpn: 0x32, qkey: 0x11111111 },
  });
  a.post({
    wrId: 2,
    opcode: WR_SEND_WITH_IMM,
    inline: pattern(3, 31),
    length: 3,
    imm: 42,
    ud: { path: p6, destQpn: 0x32, qkey: 0x11111111 },
  });
  settle(clock, a, b);
}

function ucSession(clock: sinon.SinonFakeTimers, out: PcapRecord[]): void {
  const { a, b } = connectedPair((c: RoceQpConfig) => {
    const v = vlanPath(c.qpn === 0x11 ? 1 : 2, c.qpn === 0x11 ? 2 : 1);
    v.srcMac.copy(c.path.srcMac);
    v.dstMac.copy(c.path.dstMac);
    c.path.vlanTci = v.vlanTci;
    c.qpn = c.qpn === 0x11 ? 0x41 : 0x42;
    c.destQpn = c.qpn === 0x41 ? 0x42 : 0x41;
  }, QPT_UC);
  recorder(clock, out, a, b);
  b.mem.register(2, 0x10000, 4096);
  b.postRecv(1, 2, 0x10000, 1024);
  a.post({ wrId: 1, opcode: WR_SEND, inline: Buffer.from('unreliable connected'), length: 20 });
  a.post({ wrId: 2, opcode: WR_RDMA_WRITE, inline: Buffer.from('write'), length: 5, remoteAddr: 0x10800, rkey: 2 });
  settle(clock, a, b);
}

/** A CM DREQ MAD (IBTA Vol 1 16.7 and 12.6.14): what rdma_cm sends to QP1 to disconnect. */
function cmDreq(): Buffer {
  const mad = Buffer.alloc(256);
  mad[0] = 1; // base version
  mad[1] = 0x07; // management class: communication management
  mad[2] = 2; // class version
  mad[3] = 0x03; // method: Send
  mad.writeUInt32BE(0x12345678, 12); // transaction id (low half)
  mad.writeUInt16BE(0x0015, 16); // attribute: DisconnectRequest
  mad.writeUInt32BE(0x00000101, 24); // local communication id
  mad.writeUInt32BE(0x00000202, 28); // remote communication id
  mad.writeUInt32BE(0x00001100, 32); // remote QPN (24 bits) and reserved
  return mad;
}

function gsiSession(clock: sinon.SinonFakeTimers, out: PcapRecord[]): void {
  const { a, b } = connectedPair((c: RoceQpConfig) => {
    c.qpn = 1;
    c.destQpn = 1;
  }, QPT_GSI);
  recorder(clock, out, a, b);
  b.mem.register(1, 0, 512);
  b.postRecv(1, 1, 0, 512);
  a.post({
    wrId: 1,
    opcode: WR_SEND,
    inline: cmDreq(),
    length: 256,
    ud: { path: a.path, destQpn: 1, qkey: 0x80010000 },
  });
  settle(clock, a, b);
}

/** Every frame of the four sessions, in order. */
export function captureTraffic(): PcapRecord[] {
  const out: PcapRecord[] = [];
  const clock = fakeClock();
  try {
    rcSession(clock, out);
    udSession(clock, out);
    ucSession(clock, out);
    gsiSession(clock, out);
  } finally {
    clock.restore();
  }
  return out;
}
