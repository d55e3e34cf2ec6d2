// Data-path operations over BufferMemory: SEND (SGL, inline, UD with a GRH
// prefix) into receive WQEs, RDMA WRITE / READ against rkeys, ATOMIC
// compare-swap and fetch-add; each success and each error status, with guest
// memory untouched whenever an operation fails.

import { expect } from 'chai';
import {
  decodeRecvWqe, decodeSendWqe, IonicStatus, ionicStatusName, MrFlag, QpFlag, RecvWqe, SendWqe, WqeError,
} from '../../lib/rdma/datapath/layouts';
import {
  copySlices, CONTROLLED_QKEY_BIT, datagramAccepted, effectiveQkey, execAtomic, execOneSided, execRdmaRead, execRdmaWrite,
  execSend, GRH_SIZE, localStatus, newOpEnv, NO_COMPLETION, OpEnv, OpResult, remoteStatus,
} from '../../lib/rdma/datapath/ops';
import { KeyUse, MemoryRegion, MrBuildError, mrFromDirect, mrFromPages, Xlate } from '../../lib/rdma/datapath/translate';
import { BufferMemory } from '../../lib/vfio-user/buffer-memory';
import { GuestMemory } from '../../lib/vfio-user/guest-memory';
import { FakeMrs, kctx, Poke, SplitMemory } from './datapath-helpers';

const PG = 4096;
const RAM = 0x100000;
const LW = MrFlag.LOCAL_WRITE;
const ALL_REMOTE = MrFlag.LOCAL_WRITE | MrFlag.REMOTE_WRITE | MrFlag.REMOTE_READ | MrFlag.REMOTE_ATOMIC;
const QP_REMOTE = QpFlag.REMOTE_WRITE | QpFlag.REMOTE_READ | QpFlag.REMOTE_ATOMIC;

// keys
const K_SRC = (1 << 8) | 1; //   iova 0x10000, RAM pages 0-3, LOCAL_WRITE
const K_DST = (2 << 8) | 1; //   iova 0x20000, RAM pages 8-11, LOCAL_WRITE
const K_REM = (3 << 8) | 7; //   iova 0x30000, RAM pages 20,22,24 (scattered), all remote rights
const K_RO = (4 << 8) | 1; //    iova 0x40000, RAM page 30, REMOTE_READ only (no local write)
const K_PD2 = (5 << 8) | 1; //   iova 0x50000, RAM page 32, PD 2
const K_GONE = (6 << 8) | 1; //  iova 0x60000, a page outside guest RAM

function mr(x: MemoryRegion | MrBuildError): MemoryRegion {
  if (typeof x === 'number') throw new Error(`mr build ${x}`);
  return x;
}

interface Rig {
  ram: Buffer;
  mem: GuestMemory;
  env: OpEnv;
}

function rig(mem?: (ram: Buffer) => GuestMemory): Rig {
  const ram = Buffer.alloc(64 * PG);
  for (let i = 0; i < ram.length; i++) ram[i] = (i * 7) & 0xff;
  const m = mem ? mem(ram) : new BufferMemory(ram, RAM);
  const mrs = new FakeMrs();
  const g12 = { pageSizeLog2: 12, firstPageOffset: 0 };
  mrs.add(mr(mrFromDirect({ key: K_SRC, pd: 1, iova: 0x10000, length: 4 * PG, flags: LW }, RAM)));
  mrs.add(mr(mrFromDirect({ key: K_DST, pd: 1, iova: 0x20000, length: 4 * PG, flags: LW }, RAM + 8 * PG)));
  mrs.add(mr(mrFromPages({ key: K_REM, pd: 1, iova: 0x30000, length: 3 * PG, flags: ALL_REMOTE }, g12, [RAM + 20 * PG, RAM + 22 * PG, RAM + 24 * PG])));
  mrs.add(mr(mrFromDirect({ key: K_RO, pd: 1, iova: 0x40000, length: PG, flags: MrFlag.REMOTE_READ }, RAM + 30 * PG)));
  mrs.add(mr(mrFromDirect({ key: K_PD2, pd: 2, iova: 0x50000, length: PG, flags: ALL_REMOTE }, RAM + 32 * PG)));
  mrs.add(mr(mrFromDirect({ key: K_GONE, pd: 1, iova: 0x60000, length: PG, flags: ALL_REMOTE }, 0x9000_0000)));
  return { ram, mem: m, env: newOpEnv(m, mrs) };
}

/** RAM offset of an address in one of the direct MRs / scattered K_REM. */
function ramOf(key: number, va: number): number {
  switch (key) {
    case K_SRC: return va - 0x10000;
    case K_DST: return 8 * PG + va - 0x20000;
    case K_RO: return 30 * PG + va - 0x40000;
    case K_REM: {
      const o = va - 0x30000;
      return [20, 22, 24][Math.floor(o / PG)]! * PG + (o % PG);
    }
    default: throw new Error('no map');
  }
}

type SgeSpec = [va: number, len: number, lkey: number];

const V1 = { version: 1, datagram: false };

function ok<T extends SendWqe | RecvWqe>(r: T | WqeError): T {
  if (!r.ok) throw new Error(`decode failed: ${r.code}`);
  return r;
}

/** A v1 SEND/WRITE/READ WQE in a 128-byte stride. */
function wqe(op: number, sges: SgeSpec[], remote: { va?: number; rkey?: number } = {}): Buffer {
  const total = sges.reduce((s, x) => s + x[1], 0);
  const p = new Poke(128).u8(8, op).u8(9, sges.length).be16(10, 0x8)
    .be32(16, Math.floor((remote.va ?? 0) / 2 ** 32)).be32(20, (remote.va ?? 0) % 2 ** 32).be32(24, remote.rkey ?? 0).be32(28, total);
  sges.forEach(([va, len, lkey], i) => p.sge(32 + 16 * i, va, len, lkey));
  return p.buf;
}

function inlineWqe(op: number, data: Buffer, remote: { va?: number; rkey?: number } = {}): Buffer {
  return new Poke(128).u8(8, op).be16(10, 0x4 | 0x8).be32(20, remote.va ?? 0).be32(24, remote.rkey ?? 0).be32(28, data.length).bytes(32, data).buf;
}

function recv(sges: SgeSpec[]): RecvWqe {
  const p = new Poke(128).u8(9, sges.length).be32(12, sges.reduce((s, x) => s + x[1], 0));
  sges.forEach(([va, len, lkey], i) => p.sge(32 + 16 * i, va, len, lkey));
  return ok(decodeRecvWqe(p.buf));
}

function atomicWqe(op: 6 | 7, remoteVa: number, rkey: number, swapAdd: bigint, compare: bigint, localVa: number, lkey: number): Buffer {
  return new Poke(64).u8(8, op).u8(9, 1).be16(10, 0x8).be32(16, Math.floor(remoteVa / 2 ** 32)).be32(20, remoteVa % 2 ** 32).be32(24, rkey)
    .be64(28, swapAdd).be64(36, compare).sge(48, localVa, 8, lkey).buf;
}

function status(r: OpResult): [string, string | number, number] {
  return [ionicStatusName(r.status), r.responder === NO_COMPLETION ? 'none' : ionicStatusName(r.responder), r.bytes];
}

const SCTX = kctx(1);
const RCTX = kctx(1, QP_REMOTE);

describe('rdma datapath: operations', () => {
  describe('SEND into a receive WQE', () => {
    it('two SGEs into three scattered receive SGEs', () => {
      const { ram, env } = rig();
      const w = ok(decodeSendWqe(wqe(0, [[0x10000 + 100, 300, K_SRC], [0x10000 + 2000, 50, K_SRC]]), V1));
      const r = recv([[0x20000, 100, K_DST], [0x20000 + PG, 100, K_DST], [0x20000 + 3 * PG, 500, K_DST]]);
      const expected = Buffer.concat([ram.subarray(100, 400), ram.subarray(2000, 2050)]);
      const res = execSend(env, w, Buffer.alloc(0), SCTX, r, kctx(1));
      expect(status(res)).to.deep.equal(['ok', 'ok', 350]);
      const got = Buffer.concat([ram.subarray(8 * PG, 8 * PG + 100), ram.subarray(9 * PG, 9 * PG + 100), ram.subarray(11 * PG, 11 * PG + 150)]);
      expect(got).to.deep.equal(expected);
      expect(env.src.length + env.dst.length).to.equal(0);
    });

    it('inline payload comes from the WQE itself', () => {
      const { ram, env } = rig();
      const buf = inlineWqe(0, Buffer.from('inline!'));
      const w = ok(decodeSendWqe(buf, V1));
      const res = execSend(env, w, buf, SCTX, recv([[0x20000, 64, K_DST]]), kctx(1));
      expect(status(res)).to.deep.equal(['ok', 'ok', 7]);
      expect(ram.subarray(8 * PG, 8 * PG + 7).toString()).to.equal('inline!');
    });

    it('UD: the 40-byte GRH goes first and counts in the byte count', () => {
      const { ram, env } = rig();
      const w = ok(decodeSendWqe(wqe(0, [[0x10000, 256, K_SRC]]), { version: 1, datagram: true }));
      const grh = Buffer.alloc(GRH_SIZE, 0x66);
      const res = execSend(env, w, Buffer.alloc(0), SCTX, recv([[0x20000, 296, K_DST]]), kctx(1), grh);
      expect(status(res)).to.deep.equal(['ok', 'ok', 296]);
      expect(ram.subarray(8 * PG, 8 * PG + 40)).to.deep.equal(grh);
      expect(ram.subarray(8 * PG + 40, 8 * PG + 296)).to.deep.equal(ram.subarray(0, 256));
    });

    it('zero bytes: success, the receive is consumed with byte count 0', () => {
      const { env } = rig();
      const w = ok(decodeSendWqe(wqe(0, []), V1));
      expect(status(execSend(env, w, Buffer.alloc(0), SCTX, recv([]), kctx(1)))).to.deep.equal(['ok', 'ok', 0]);
    });

    it('only the receive SGEs the message needs are checked', () => {
      const { env } = rig();
      const w = ok(decodeSendWqe(wqe(0, [[0x10000, 10, K_SRC]]), V1));
      const r = recv([[0x20000, 10, K_DST], [0x20000, 10, 0xdead01]]);
      expect(status(execSend(env, w, Buffer.alloc(0), SCTX, r, kctx(1)))).to.deep.equal(['ok', 'ok', 10]);
    });

    const failures: [string, SgeSpec[], SgeSpec[], [string, string, number], number?][] = [
      ['receive buffers too small', [[0x10000, 100, K_SRC]], [[0x20000, 99, K_DST]], ['remote-inv-req', 'local-len', 0]],
      ['bad receive lkey', [[0x10000, 10, K_SRC]], [[0x20000, 10, K_DST + 1]], ['remote-oper', 'local-prot', 0]],
      ['receive MR without local write', [[0x10000, 10, K_SRC]], [[0x40000, 10, K_RO]], ['remote-oper', 'local-prot', 0]],
      ['receive SGE outside its MR', [[0x10000, 10, K_SRC]], [[0x20000 + 4 * PG - 5, 10, K_DST]], ['remote-oper', 'local-prot', 0]],
      ['receive lkey 0 on a user QP', [[0x10000, 10, K_SRC]], [[RAM, 10, 0]], ['remote-oper', 'local-prot', 0]],
      ['bad send lkey', [[0x10000, 10, 0x999901]], [[0x20000, 10, K_DST]], ['local-prot', 'none', 0]],
      ['send SGE outside its MR', [[0x10000 + 4 * PG - 1, 2, K_SRC]], [[0x20000, 10, K_DST]], ['local-prot', 'none', 0]],
      ['send lkey from another PD', [[0x50000, 4, K_PD2]], [[0x20000, 10, K_DST]], ['local-prot', 'none', 0]],
      ['send lkey 0 on a user QP', [[RAM, 4, 0]], [[0x20000, 10, K_DST]], ['local-prot', 'none', 0]],
    ];
    for (const [what, src, dst, want] of failures) {
      it(`${what}: ${want[0]} / responder ${want[1]}, memory untouched`, () => {
        const { ram, env } = rig();
        const before = Buffer.from(ram);
        const w = ok(decodeSendWqe(wqe(0, src), V1));
        expect(status(execSend(env, w, Buffer.alloc(0), SCTX, recv(dst), kctx(1)))).to.deep.equal(want);
        expect(ram.equals(before)).to.equal(true);
        expect(env.src.length + env.dst.length).to.equal(0);
      });
    }

    it('a privileged (kernel) QP sends and receives with lkey 0 and bus addresses', () => {
      const { ram, env } = rig();
      const priv = kctx(7, QpFlag.PRIVILEGED);
      const w = ok(decodeSendWqe(wqe(0, [[RAM + 40 * PG, 24, 0], [RAM + 41 * PG, 8, 0]]), { version: 1, datagram: true }));
      const res = execSend(env, w, Buffer.alloc(0), priv, recv([[RAM + 50 * PG, 296, 0]]), priv, Buffer.alloc(GRH_SIZE));
      expect(status(res)).to.deep.equal(['ok', 'ok', 72]);
      expect(ram.subarray(50 * PG + 40, 50 * PG + 64)).to.deep.equal(ram.subarray(40 * PG, 40 * PG + 24));
    });
  });

  describe('RDMA WRITE', () => {
    it('writes across the runs of a scattered remote MR', () => {
      const { ram, env } = rig();
      const w = ok(decodeSendWqe(wqe(4, [[0x10000, 2 * PG, K_SRC]], { va: 0x30000 + PG / 2, rkey: K_REM }), V1));
      const res = execRdmaWrite(env, w, Buffer.alloc(0), SCTX, RCTX);
      expect(status(res)).to.deep.equal(['ok', 'none', 2 * PG]);
      const got = Buffer.concat([ram.subarray(20 * PG + PG / 2, 21 * PG), ram.subarray(22 * PG, 23 * PG), ram.subarray(24 * PG, 24 * PG + PG / 2)]);
      expect(got).to.deep.equal(ram.subarray(0, 2 * PG));
    });

    it('inline data (WRITE_IMM)', () => {
      const { ram, env } = rig();
      const buf = inlineWqe(5, Buffer.from('imm-data'), { va: 0x30000 + 8, rkey: K_REM });
      const w = ok(decodeSendWqe(buf, V1));
      expect(status(execOneSided(env, w, buf, SCTX, RCTX))).to.deep.equal(['ok', 'none', 8]);
      expect(ram.subarray(20 * PG + 8, 20 * PG + 16).toString()).to.equal('imm-data');
    });

    it('zero bytes: no rkey check at all', () => {
      const { env } = rig();
      const w = ok(decodeSendWqe(wqe(4, [], { va: 0xdeadbeef, rkey: 0x77 }), V1));
      expect(status(execRdmaWrite(env, w, Buffer.alloc(0), SCTX, kctx(9)))).to.deep.equal(['ok', 'none', 0]);
    });

    const failures: [string, SgeSpec[], { va: number; rkey: number }, number, string, KeyUse?][] = [
      ['rkey with the wrong tag', [[0x10000, 8, K_SRC]], { va: 0x30000, rkey: K_REM + 1 }, QP_REMOTE, 'remote-acc'],
      ['unknown rkey', [[0x10000, 8, K_SRC]], { va: 0x30000, rkey: 0x7777701 }, QP_REMOTE, 'remote-acc'],
      ['MR without remote write', [[0x10000, 8, K_SRC]], { va: 0x40000, rkey: K_RO }, QP_REMOTE, 'remote-acc'],
      ['responder QP without remote write', [[0x10000, 8, K_SRC]], { va: 0x30000, rkey: K_REM }, QpFlag.REMOTE_READ, 'remote-acc'],
      ['past the end of the remote MR', [[0x10000, 16, K_SRC]], { va: 0x30000 + 3 * PG - 8, rkey: K_REM }, QP_REMOTE, 'remote-acc'],
      ['remote MR of another PD', [[0x10000, 8, K_SRC]], { va: 0x50000, rkey: K_PD2 }, QP_REMOTE, 'remote-acc'],
      ['rkey 0 without REMOTE_PRIVILEGED', [[0x10000, 8, K_SRC]], { va: RAM, rkey: 0 }, QP_REMOTE | QpFlag.PRIVILEGED, 'remote-acc'],
      ['rkey 0 from an untrusted peer', [[0x10000, 8, K_SRC]], { va: RAM, rkey: 0 }, QP_REMOTE | QpFlag.REMOTE_PRIVILEGED, 'remote-acc', KeyUse.UNTRUSTED],
      ['remote page missing from guest memory', [[0x10000, 8, K_SRC]], { va: 0x60000, rkey: K_GONE }, QP_REMOTE, 'remote-oper'],
      ['bad local lkey (checked before the rkey)', [[0x10000, 8, 0x123401]], { va: 0, rkey: 0x55 }, QP_REMOTE, 'local-prot'],
    ];
    for (const [what, sges, remote, qpFlags, want, use] of failures) {
      it(`${what}: ${want}, memory untouched`, () => {
        const { ram, env } = rig();
        const before = Buffer.from(ram);
        const w = ok(decodeSendWqe(wqe(4, sges, remote), V1));
        expect(status(execRdmaWrite(env, w, Buffer.alloc(0), SCTX, kctx(1, qpFlags), use))).to.deep.equal([want, 'none', 0]);
        expect(ram.equals(before)).to.equal(true);
      });
    }

    it('rkey 0 on a REMOTE_PRIVILEGED responder writes the bus address', () => {
      const { ram, env } = rig();
      const w = ok(decodeSendWqe(wqe(4, [[0x10000, 16, K_SRC]], { va: RAM + 60 * PG, rkey: 0 }), V1));
      expect(status(execRdmaWrite(env, w, Buffer.alloc(0), SCTX, kctx(1, QP_REMOTE | QpFlag.REMOTE_PRIVILEGED)))).to.deep.equal(['ok', 'none', 16]);
      expect(ram.subarray(60 * PG, 60 * PG + 16)).to.deep.equal(ram.subarray(0, 16));
    });
  });

  describe('RDMA READ', () => {
    it('reads a scattered remote range into two local SGEs', () => {
      const { ram, env } = rig();
      const w = ok(decodeSendWqe(wqe(3, [[0x20000, 100, K_DST], [0x20000 + 2 * PG, PG, K_DST]], { va: 0x30000 + PG - 50, rkey: K_REM }), V1));
      // remote: 50 bytes at the end of run 0 (page 20), all of run 1 (page 22), 50 bytes of run 2 (page 24)
      const want = Buffer.concat([ram.subarray(21 * PG - 50, 21 * PG), ram.subarray(22 * PG, 23 * PG), ram.subarray(24 * PG, 24 * PG + 50)]);
      const res = execRdmaRead(env, w, SCTX, RCTX);
      expect(status(res)).to.deep.equal(['ok', 'none', PG + 100]);
      expect(Buffer.concat([ram.subarray(8 * PG, 8 * PG + 100), ram.subarray(10 * PG, 11 * PG)])).to.deep.equal(want);
    });

    it('a REMOTE_READ-only MR can be read', () => {
      const { ram, env } = rig();
      const w = ok(decodeSendWqe(wqe(3, [[0x20000, 32, K_DST]], { va: 0x40000, rkey: K_RO }), V1));
      expect(status(execOneSided(env, w, Buffer.alloc(0), SCTX, RCTX))).to.deep.equal(['ok', 'none', 32]);
      expect(ram.subarray(8 * PG, 8 * PG + 32)).to.deep.equal(ram.subarray(30 * PG, 30 * PG + 32));
    });

    const failures: [string, SgeSpec[], { va: number; rkey: number }, number, string][] = [
      ['bad rkey and bad lkey: the remote NAK wins', [[0x20000, 8, 0x1]], { va: 0x30000, rkey: 0x2 }, QP_REMOTE, 'remote-acc'],
      ['responder QP without remote read', [[0x20000, 8, K_DST]], { va: 0x30000, rkey: K_REM }, QpFlag.REMOTE_WRITE, 'remote-acc'],
      ['remote range past the MR', [[0x20000, 8, K_DST]], { va: 0x40000 + PG - 4, rkey: K_RO }, QP_REMOTE, 'remote-acc'],
      ['local MR without local write', [[0x40000, 8, K_RO]], { va: 0x30000, rkey: K_REM }, QP_REMOTE, 'local-prot'],
      ['bad local lkey', [[0x20000, 8, K_DST ^ 0xff]], { va: 0x30000, rkey: K_REM }, QP_REMOTE, 'local-prot'],
      ['local SGE outside its MR', [[0x20000 - 1, 8, K_DST]], { va: 0x30000, rkey: K_REM }, QP_REMOTE, 'local-prot'],
    ];
    for (const [what, sges, remote, qpFlags, want] of failures) {
      it(`${what}: ${want}, memory untouched`, () => {
        const { ram, env } = rig();
        const before = Buffer.from(ram);
        const w = ok(decodeSendWqe(wqe(3, sges, remote), V1));
        expect(status(execRdmaRead(env, w, SCTX, kctx(1, qpFlags)))).to.deep.equal([want, 'none', 0]);
        expect(ram.equals(before)).to.equal(true);
      });
    }
  });

  describe('atomics', () => {
    const REM = 0x30000 + PG + 64; // inside the second run (RAM page 22)
    const remAt = ramOf(K_REM, REM);
    const LOC = 0x20000 + 8;
    const locAt = ramOf(K_DST, LOC);

    function setRemote(ram: Buffer, v: bigint): void { ram.writeBigUInt64LE(v, remAt); }

    it('compare-swap, equal: swaps and returns the old value', () => {
      const { ram, env } = rig();
      setRemote(ram, 0x1122334455667788n);
      const w = ok(decodeSendWqe(atomicWqe(6, REM, K_REM, 0xaaaabbbbccccddddn, 0x1122334455667788n, LOC, K_DST), V1));
      const res = execAtomic(env, w, SCTX, RCTX);
      expect(status(res)).to.deep.equal(['ok', 'none', 8]);
      expect(ram.readBigUInt64LE(remAt)).to.equal(0xaaaabbbbccccddddn);
      expect(ram.readBigUInt64LE(locAt)).to.equal(0x1122334455667788n);
      expect([res.oldHi, res.oldLo]).to.deep.equal([0x11223344, 0x55667788]);
    });

    it('compare-swap, different: leaves the target and returns the old value', () => {
      const { ram, env } = rig();
      setRemote(ram, 5n);
      const w = ok(decodeSendWqe(atomicWqe(6, REM, K_REM, 9n, 6n, LOC, K_DST), V1));
      expect(status(execAtomic(env, w, SCTX, RCTX))).to.deep.equal(['ok', 'none', 8]);
      expect(ram.readBigUInt64LE(remAt)).to.equal(5n);
      expect(ram.readBigUInt64LE(locAt)).to.equal(5n);
    });

    const adds: [bigint, bigint, bigint][] = [
      [1n, 2n, 3n],
      [0xffffffffn, 1n, 0x100000000n],
      [0xffffffffffffffffn, 2n, 1n],
      [0x8000000080000000n, 0x8000000080000000n, 0x100000000n],
      [123n, 0n, 123n],
    ];
    for (const [old, add, sum] of adds) {
      it(`fetch-add ${old.toString(16)} + ${add.toString(16)} = ${sum.toString(16)} (mod 2^64)`, () => {
        const { ram, env } = rig();
        setRemote(ram, old);
        const w = ok(decodeSendWqe(atomicWqe(7, REM, K_REM, add, 0n, LOC, K_DST), V1));
        expect(status(execAtomic(env, w, SCTX, RCTX))).to.deep.equal(['ok', 'none', 8]);
        expect(ram.readBigUInt64LE(remAt)).to.equal(sum);
        expect(ram.readBigUInt64LE(locAt)).to.equal(old);
      });
    }

    it('v2 layout (lkey at 44, local va at 48)', () => {
      const { ram, env } = rig();
      setRemote(ram, 40n);
      const buf = new Poke(64).u8(8, 0x05).u8(9, 1).be32(20, REM).be32(24, K_REM).be64(28, 2n).be32(44, K_DST).be64(48, LOC).buf;
      const w = ok(decodeSendWqe(buf, { version: 2, datagram: false }));
      expect(status(execAtomic(env, w, SCTX, RCTX))).to.deep.equal(['ok', 'none', 8]);
      expect(ram.readBigUInt64LE(remAt)).to.equal(42n);
    });

    it('an 8-byte target split across guest-memory views', () => {
      const { ram, env } = rig((r) => new SplitMemory(RAM, r, 12));
      setRemote(ram, 0x0102030405060708n);
      const w = ok(decodeSendWqe(atomicWqe(7, REM, K_REM, 0x0101010101010101n, 0n, LOC, K_DST), V1));
      expect(status(execAtomic(env, w, SCTX, RCTX))).to.deep.equal(['ok', 'none', 8]);
      expect(ram.readBigUInt64LE(remAt)).to.equal(0x0203040506070809n);
      expect(ram.readBigUInt64LE(locAt)).to.equal(0x0102030405060708n);
    });

    const failures: [string, number, number, number, number, string][] = [
      ['misaligned target', REM + 4, K_REM, LOC, K_DST, 'remote-inv-req'],
      ['MR without remote atomic', 0x40000, K_RO, LOC, K_DST, 'remote-acc'],
      ['bad rkey', REM, K_REM + 1, LOC, K_DST, 'remote-acc'],
      ['target past the MR', 0x30000 + 3 * PG, K_REM, LOC, K_DST, 'remote-acc'],
      ['bad local lkey (remote not modified)', REM, K_REM, LOC, K_DST + 1, 'local-prot'],
      ['local MR without local write', REM, K_REM, 0x40000, K_RO, 'local-prot'],
      ['local lkey 0 on a user QP', REM, K_REM, RAM, 0, 'local-prot'],
    ];
    for (const [what, rva, rkey, lva, lkey, want] of failures) {
      it(`${what}: ${want}, memory untouched`, () => {
        const { ram, env } = rig();
        const before = Buffer.from(ram);
        const w = ok(decodeSendWqe(atomicWqe(7, rva, rkey, 1n, 0n, lva, lkey), V1));
        expect(status(execAtomic(env, w, SCTX, RCTX))).to.deep.equal([want, 'none', 0]);
        expect(ram.equals(before)).to.equal(true);
      });
    }

    it('responder QP without remote atomic: remote-acc', () => {
      const { env } = rig();
      const w = ok(decodeSendWqe(atomicWqe(6, REM, K_REM, 1n, 0n, LOC, K_DST), V1));
      expect(status(execAtomic(env, w, SCTX, kctx(1, QpFlag.REMOTE_WRITE | QpFlag.REMOTE_READ)))).to.deep.equal(['remote-acc', 'none', 0]);
    });

    it('a local buffer that is not 8 bytes: local-len', () => {
      const { env } = rig();
      const w = ok(decodeSendWqe(atomicWqe(6, REM, K_REM, 1n, 0n, LOC, K_DST), V1));
      w.atomic.localLen = 4;
      expect(status(execAtomic(env, w, SCTX, RCTX))).to.deep.equal(['local-len', 'none', 0]);
    });
  });

  describe('dispatch and building blocks', () => {
    it('execOneSided refuses verbs that move no data', () => {
      const { env } = rig();
      const w = ok(decodeSendWqe(new Poke(64).u8(8, 9).buf, V1));
      expect(status(execOneSided(env, w, Buffer.alloc(0), SCTX, RCTX))).to.deep.equal(['local-qp-oper', 'none', 0]);
    });

    it('copySlices walks unequal splits with offsets on both sides', () => {
      const src = [Buffer.from('abc'), Buffer.from(''), Buffer.from('defgh'), Buffer.from('ij')];
      const dst = [Buffer.alloc(2), Buffer.alloc(4), Buffer.alloc(0), Buffer.alloc(6)];
      expect(copySlices(dst, 1, src, 2, 8)).to.equal(8);
      expect(Buffer.concat(dst).toString('latin1')).to.equal('\0cdefghij\0\0\0');
      expect(copySlices([Buffer.alloc(3)], 0, src, 0, 10)).to.equal(3);
      expect(copySlices(dst, 100, src, 0, 4)).to.equal(0);
    });

    it('status mapping for translation failures', () => {
      expect(localStatus(Xlate.TOO_LONG)).to.equal(IonicStatus.LOCAL_LEN);
      for (const x of [Xlate.BAD_KEY, Xlate.PD_MISMATCH, Xlate.DMA_KEY_REFUSED, Xlate.ACCESS, Xlate.BOUNDS, Xlate.WRAP, Xlate.UNMAPPED]) {
        expect(localStatus(x)).to.equal(IonicStatus.LOCAL_PROT);
      }
      expect(remoteStatus(Xlate.UNMAPPED)).to.equal(IonicStatus.REMOTE_OPER);
      expect(remoteStatus(Xlate.READ_ONLY)).to.equal(IonicStatus.REMOTE_OPER);
      expect(remoteStatus(Xlate.TOO_LONG)).to.equal(IonicStatus.REMOTE_INV_REQ);
      for (const x of [Xlate.BAD_KEY, Xlate.PD_MISMATCH, Xlate.DMA_KEY_REFUSED, Xlate.ACCESS, Xlate.BOUNDS, Xlate.WRAP, Xlate.BAD_VALUE]) {
        expect(remoteStatus(x)).to.equal(IonicStatus.REMOTE_ACC);
      }
    });
  });

  describe('datagram Q_Keys (contract 5.6)', () => {
    it('a controlled Q_Key in the WQE means the sending QP\'s own', () => {
      expect(effectiveQkey(0x80000000, 0x80010000)).to.equal(0x80010000);
      expect(effectiveQkey(0xffffffff, 0x1234)).to.equal(0x1234);
      expect(effectiveQkey(0x80000000, null)).to.equal(-1);
      expect(effectiveQkey(0x01234567, 0x80010000)).to.equal(0x01234567);
      expect(CONTROLLED_QKEY_BIT).to.equal(0x80000000);
    });

    it('delivery needs a UD/GSI destination whose Q_Key (if any) matches', () => {
      expect(datagramAccepted(true, 0x80010000, 0x80010000)).to.equal(true);
      expect(datagramAccepted(true, 0x80010000, 0x80000000)).to.equal(false);
      expect(datagramAccepted(true, null, 0x1)).to.equal(true);
      expect(datagramAccepted(false, null, 0x1)).to.equal(false);
      expect(datagramAccepted(true, null, -1)).to.equal(false);
    });
  });
});
