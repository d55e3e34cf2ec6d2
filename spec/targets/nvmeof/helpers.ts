// Test host for the NVMe-oF controller: guest memory as a Buffer behind
// TargetDma (keys map to windows of it), and command capsules built byte by
// byte with spec/support/bytes.ts from the NVMe / NVMe-oF specifications'
// offsets, never with the tables under test.

import { Bytes } from '../../support/bytes';
import {
  Cqe,
  DmaStatus,
  NvmeofQueue,
  NvmeofSubsystem,
  NvmeofTarget,
  RamNamespace,
  TargetDma,
} from '../../../lib/targets/nvmeof';
import type { NvmeofNamespace, QueueOptions } from '../../../lib/targets/nvmeof';
import type { NvmeofController } from '../../../lib/targets/nvmeof';

export const HOSTNQN = 'nqn.2014-08.org.nvmexpress:uuid:0c0ffee0-0000-4000-8000-000000000001';
export const SUBNQN = 'nvmet-test';
export const DISC_NQN = 'nqn.2014-08.org.nvmexpress.discovery';
export const HOSTID = Buffer.from('00112233445566778899aabbccddeeff', 'hex');

/** Keyed SGL type bytes: keyed data block (4) with subtype address (0) or invalidate (F); in-capsule (0, offset 1). */
export const KEYED = 0x40;
export const KEYED_INV = 0x4f;
export const IN_CAPSULE = 0x01;
/** PSDT 01b: SGL data, contiguous metadata buffer (what nvme-rdma sets on every command). */
export const PSDT_SGL = 0x40;

/** Status values (SCT << 8 | SC) as the specs define them, and DNR. */
export const SC = {
  SUCCESS: 0,
  INVALID_OPCODE: 0x1,
  INVALID_FIELD: 0x2,
  DATA_XFER_ERROR: 0x4,
  ABORT_REQ: 0x7,
  ABORT_QUEUE: 0x8,
  INVALID_NS: 0xb,
  CMD_SEQ_ERROR: 0xc,
  SGL_INVALID_DATA: 0xf,
  SGL_INVALID_TYPE: 0x11,
  SGL_INVALID_OFFSET: 0x16,
  KA_TIMEOUT_INVALID: 0x1a,
  CMD_INTERRUPTED: 0x21,
  LBA_RANGE: 0x80,
  ASYNC_LIMIT: 0x105,
  INVALID_LOG_PAGE: 0x109,
  FEATURE_NOT_SAVEABLE: 0x10d,
  CONNECT_FORMAT: 0x180,
  CONNECT_CTRL_BUSY: 0x181,
  CONNECT_INVALID_PARAM: 0x182,
  CONNECT_INVALID_HOST: 0x184,
  DNR: 0x4000,
} as const;

export interface SglSpec {
  readonly addr: number;
  readonly len: number;
  readonly key: number;
  readonly type: number;
}

interface SqeSpec {
  readonly opcode: number;
  readonly cid: number;
  readonly flags?: number;
  /** Fabrics: the fctype goes in byte 4 (the low byte of what is nsid elsewhere). */
  readonly nsid?: number;
  readonly sgl?: SglSpec;
  readonly cdw10?: number;
  readonly cdw11?: number;
  readonly cdw12?: number;
  readonly cdw13?: number;
  readonly cdw14?: number;
  readonly cdw15?: number;
}

/** A 64-byte SQE, laid out by hand: opcode, flags, cid, nsid, cdw2-3, mptr, SGL (16), cdw10-15. */
export function sqe(s: SqeSpec): Buffer {
  const b = new Bytes()
    .u8(s.opcode)
    .u8(s.flags ?? PSDT_SGL)
    .u16(s.cid)
    .u32(s.nsid ?? 0)
    .u32(0)
    .u32(0)
    .u64(0);
  const g = s.sgl ?? { addr: 0, len: 0, key: 0, type: KEYED };
  if (g.type >> 4 === 4)
    b.u64(g.addr)
      .u8(g.len)
      .u8(g.len >>> 8)
      .u8(g.len >>> 16)
      .u32(g.key)
      .u8(g.type);
  else b.u64(g.addr).u32(g.len).zeros(3).u8(g.type);
  for (const d of [s.cdw10, s.cdw11, s.cdw12, s.cdw13, s.cdw14, s.cdw15]) b.u32((d ?? 0) >>> 0);
  const out = b.build();
  if (out.length !== 64) throw new Error(`sqe is ${out.length} bytes`);
  return out;
}

/** Guest memory: one Buffer, addresses from BASE, reachable through keys that each open a window. */
export class HostMemory implements TargetDma {
  static readonly BASE = 0x100000;
  readonly mem: Buffer;
  readonly #keys = new Map<number, { addr: number; len: number }>();
  calls = 0;
  /** Make the next callbacks fail (a transport error). */
  failing = false;
  /** Delay each callback by a macrotask (async transports). */
  async = false;

  constructor(size = 1 << 20) {
    this.mem = Buffer.alloc(size);
  }

  /** Register [addr, addr + len) under `key`. */
  key(key: number, addr = HostMemory.BASE, len = this.mem.length): number {
    this.#keys.set(key, { addr, len });
    return key;
  }

  #range(key: number, addr: number, len: number): number | null {
    if (key === 0 || this.failing) return null; // the data path never resolves key 0
    const w = this.#keys.get(key);
    if (!w || addr < w.addr || addr + len > w.addr + w.len) return null;
    const off = addr - HostMemory.BASE;
    return off >= 0 && off + len <= this.mem.length ? off : null;
  }

  async #maybeWait(): Promise<void> {
    if (this.async) await new Promise((r) => setImmediate(r));
  }

  async fromHost(key: number, addr: number, len: number, out: Buffer): Promise<number> {
    this.calls++;
    await this.#maybeWait();
    const off = this.#range(key, addr, len);
    if (off === null) return DmaStatus.BAD_KEY;
    this.mem.copy(out, 0, off, off + len);
    return DmaStatus.OK;
  }

  async toHost(key: number, addr: number, src: Buffer): Promise<number> {
    this.calls++;
    await this.#maybeWait();
    const off = this.#range(key, addr, src.length);
    if (off === null) return DmaStatus.BAD_KEY;
    src.copy(this.mem, off);
    return DmaStatus.OK;
  }

  /** The bytes at guest address `addr`. */
  at(addr: number, len: number): Buffer {
    const off = addr - HostMemory.BASE;
    return this.mem.subarray(off, off + len);
  }
}

/** Connect data (1024 bytes) by hand: hostid @0, cntlid @16, subnqn @256, hostnqn @512. */
export function connectData(subnqn: string, hostnqn: string, cntlid: number, hostid: Buffer = HOSTID): Buffer {
  const b = Buffer.alloc(1024);
  hostid.copy(b, 0);
  b.writeUInt16LE(cntlid, 16);
  b.write(subnqn, 256, 255, 'latin1');
  b.write(hostnqn, 512, 255, 'latin1');
  return b;
}

export const KEY = 0x1234;
/** Guest addresses the tests use. */
export const ADDR = {
  CONNECT: HostMemory.BASE,
  DATA: HostMemory.BASE + 0x10000,
  OUT: HostMemory.BASE + 0x40000,
} as const;

export function newTarget(
  opts: { namespaces?: NvmeofNamespace[]; hosts?: string[]; queues?: number } = {},
): NvmeofTarget {
  const subsystem = new NvmeofSubsystem<NvmeofController>({
    nqn: SUBNQN,
    model: 'rocm-ernic NVMe-oF target',
    serial: 'ERNIC0000000000001',
    namespaces: opts.namespaces ?? [new RamNamespace(1, 1 << 20, 512)],
    maxIoQueues: opts.queues ?? 8,
    ...(opts.hosts ? { hosts: opts.hosts } : {}),
  });
  return new NvmeofTarget({ subsystem, port: { traddr: '192.168.200.1', trsvcid: '4420', portid: 1 } });
}

/** Status field of a completion with DNR masked out, and the DNR bit. */
export function sc(c: Cqe): number {
  return c.status & 0x7ff;
}
export function dnr(c: Cqe): boolean {
  return (c.status & SC.DNR) !== 0;
}

/** A host driving one queue. */
export class TestHost {
  queue: NvmeofQueue;
  #cid = 1;

  /** `dma` defaults to `mem` itself; a test may put another TargetDma in front of it. */
  constructor(
    readonly target: NvmeofTarget,
    readonly mem: HostMemory,
    opts: QueueOptions = {},
    dma: TargetDma = mem,
  ) {
    this.queue = target.openQueue(dma, opts);
  }

  nextCid(): number {
    return this.#cid++;
  }

  submit(spec: Omit<SqeSpec, 'cid'> & { cid?: number }, inCapsule?: Buffer): Promise<Cqe> {
    const cmd = sqe({ cid: this.nextCid(), ...spec });
    return this.queue.submit(inCapsule ? Buffer.concat([cmd, inCapsule]) : cmd);
  }

  /** Fabrics Connect on `qid` (sqsize 0's based), Connect data at ADDR.CONNECT. */
  connect(
    o: {
      qid?: number;
      sqsize?: number;
      kato?: number;
      cntlid?: number;
      subnqn?: string;
      hostnqn?: string;
      hostid?: Buffer;
      recfmt?: number;
      cattr?: number;
      key?: number;
    } = {},
  ): Promise<Cqe> {
    const data = connectData(o.subnqn ?? SUBNQN, o.hostnqn ?? HOSTNQN, o.cntlid ?? 0xffff, o.hostid);
    data.copy(this.mem.at(ADDR.CONNECT, 1024));
    return this.submit({
      opcode: 0x7f,
      nsid: 0x01,
      sgl: { addr: ADDR.CONNECT, len: 1024, key: o.key ?? KEY, type: KEYED },
      cdw10: ((o.qid ?? 0) << 16) | (o.recfmt ?? 0),
      cdw11: ((o.cattr ?? 0) << 16) | (o.sqsize ?? 31),
      cdw12: o.kato ?? 0,
    });
  }

  propGet(offset: number, eight = false): Promise<Cqe> {
    return this.submit({ opcode: 0x7f, nsid: 0x04, cdw10: eight ? 1 : 0, cdw11: offset });
  }

  propSet(offset: number, value: number, attrib = 0): Promise<Cqe> {
    return this.submit({ opcode: 0x7f, nsid: 0x00, cdw10: attrib, cdw11: offset, cdw12: value });
  }

  /** CC = EN | IOSQES 6 | IOCQES 4 (what the Linux host writes), then CSTS. */
  async enable(): Promise<Cqe> {
    await this.propSet(0x14, 0x00460001);
    return this.propGet(0x1c);
  }

  identify(cns: number, nsid = 0, len = 4096, addr: number = ADDR.OUT, cdw11 = 0): Promise<Cqe> {
    return this.submit({ opcode: 0x06, nsid, sgl: { addr, len, key: KEY, type: KEYED }, cdw10: cns, cdw11 });
  }

  getLog(
    lid: number,
    bytes: number,
    o: { offset?: number; nsid?: number; rae?: boolean; len?: number } = {},
  ): Promise<Cqe> {
    const numd = bytes / 4 - 1;
    const lpo = o.offset ?? 0;
    return this.submit({
      opcode: 0x02,
      nsid: o.nsid ?? 0xffffffff,
      sgl: { addr: ADDR.OUT, len: o.len ?? bytes, key: KEY, type: KEYED },
      cdw10: lid | (o.rae ? 0x8000 : 0) | ((numd & 0xffff) << 16),
      cdw11: numd >>> 16,
      cdw12: lpo % 2 ** 32,
      cdw13: Math.floor(lpo / 2 ** 32),
    });
  }

  setFeature(fid: number, cdw11: number, save = false): Promise<Cqe> {
    return this.submit({ opcode: 0x09, cdw10: fid | (save ? 0x80000000 : 0), cdw11 });
  }

  getFeature(fid: number, sel = 0, cdw11 = 0, sgl?: SglSpec): Promise<Cqe> {
    return this.submit({ opcode: 0x0a, cdw10: fid | (sel << 8), cdw11, ...(sgl ? { sgl } : {}) });
  }

  keepAlive(): Promise<Cqe> {
    return this.submit({ opcode: 0x18 });
  }

  /** Read or write `nlb` blocks at `slba` through the keyed SGL at `addr`. */
  rw(
    opcode: 0x01 | 0x02,
    slba: number,
    nlb: number,
    addr: number,
    bs = 512,
    o: { nsid?: number; sgl?: SglSpec; control?: number } = {},
  ): Promise<Cqe> {
    return this.submit({
      opcode,
      nsid: o.nsid ?? 1,
      sgl: o.sgl ?? { addr, len: nlb * bs, key: KEY, type: KEYED },
      cdw10: slba % 2 ** 32,
      cdw11: Math.floor(slba / 2 ** 32),
      cdw12: ((o.control ?? 0) << 16) | (nlb - 1),
    });
  }
}

/** A host with an enabled admin queue on a fresh target. */
export async function adminHost(target = newTarget(), kato = 0): Promise<TestHost> {
  const h = new TestHost(target, new HostMemory());
  h.mem.key(KEY);
  const c = await h.connect({ kato });
  if (c.status !== 0) throw new Error(`connect failed: ${c.status.toString(16)}`);
  const e = await h.enable();
  if ((e.dw0 & 1) !== 1) throw new Error('controller not ready');
  return h;
}

/** An I/O queue joined to `admin`'s controller. */
export async function ioHost(admin: TestHost, qid = 1): Promise<TestHost> {
  const h = new TestHost(admin.target, admin.mem);
  const c = await h.connect({ qid, sqsize: 127, cntlid: admin.queue.controller!.cntlid });
  if (c.status !== 0) throw new Error(`io connect failed: ${c.status.toString(16)}`);
  return h;
}
