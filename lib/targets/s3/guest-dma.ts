// The S3 store's DMA callbacks on the device: a token's (rkey, addr, len)
// resolved in the guest's own MR table (the resource manager's `translate`),
// as the C rocm-ernic does ("no QP is actually connected: rkey resolved in the
// same MR table"). The checks are a responder's: the key must name a valid
// MR or window with the right tag, the MR must grant REMOTE_WRITE (a GET
// writes into it) or REMOTE_READ (a PUT reads from it), and the whole range
// must lie inside it and in mapped guest memory. Key 0, the driver's reserved
// DMA key (a raw guest address), is never accepted. With no QP there is no PD
// to match. Everything runs on the main thread; nothing throws on guest input.

import { DeviceCounter } from '../../rdma/counters';
import { copySlices } from '../../rdma/datapath/copy';
import type { DataPathDevice } from '../../rdma/hooks';
import { KeyStatus } from '../../rdma/resources';
import { MrFlag } from '../../rdma/types';
import { MemStatus } from '../../vfio-user/guest-memory';
import type { RdmaDma } from './rdma';

/** Why the last access was refused, for tests and logs. */
type DmaRefusal = 'none' | 'no-memory' | 'key-0' | 'bad-range' | 'key' | 'access' | 'bounds' | 'unmapped';

function refusalOf(st: KeyStatus): DmaRefusal {
  switch (st) {
    case KeyStatus.ACCESS:
      return 'access';
    case KeyStatus.BOUNDS:
      return 'bounds';
    case KeyStatus.BAD_RANGE:
      return 'bad-range';
    default:
      return 'key';
  }
}

export class MrTableDma implements RdmaDma {
  readonly #dev: DataPathDevice;
  /** Translation output, views and options, reused: no allocation per request. */
  readonly #pairs: number[] = [];
  readonly #views: Buffer[] = [];
  readonly #one: Buffer[] = [Buffer.alloc(0)];
  readonly #opts = { dmaKey: false } as const;
  lastRefusal: DmaRefusal = 'none';

  constructor(dev: DataPathDevice) {
    this.#dev = dev;
  }

  /** Views of (rkey, addr, len) needing `need`, in #views; false (with lastRefusal) when refused. */
  #resolve(rkey: number, addr: bigint, len: number, need: number, write: boolean): boolean {
    this.#views.length = 0;
    this.#pairs.length = 0;
    const mem = this.#dev.memory();
    if (!mem) return this.#refuse('no-memory');
    if (rkey >>> 0 === 0) return this.#refuse('key-0');
    if (addr < 0n || addr > BigInt(Number.MAX_SAFE_INTEGER) || !Number.isSafeInteger(len) || len < 0)
      return this.#refuse('bad-range');
    const st = this.#dev.rm.translate(rkey >>> 0, Number(addr), len, need, this.#opts, this.#pairs);
    if (st !== KeyStatus.OK) return this.#refuse(refusalOf(st));
    const p = this.#pairs;
    for (let i = 0; i < p.length; i += 2) {
      if (mem.slices(p[i]!, p[i + 1]!, write, this.#views) !== MemStatus.OK) return this.#refuse('unmapped');
    }
    return true;
  }

  #refuse(why: DmaRefusal): false {
    this.lastRefusal = why;
    this.#views.length = 0;
    return false;
  }

  /** The first and the last byte resolved (key, tag, access, bounds: what a range's refusals come from), nothing copied. */
  check(rkey: number, addr: bigint, len: number, toHost: boolean): boolean {
    const need = toHost ? MrFlag.REMOTE_WRITE : MrFlag.REMOTE_READ;
    if (!Number.isSafeInteger(len) || len <= 0) return len === 0;
    const good =
      this.#resolve(rkey, addr, 1, need, toHost) && this.#resolve(rkey, addr + BigInt(len - 1), 1, need, toHost);
    this.#views.length = 0;
    return good;
  }

  fromHost(rkey: number, addr: bigint, dst: Buffer): boolean {
    if (!this.#resolve(rkey, addr, dst.length, MrFlag.REMOTE_READ, false)) return false;
    this.#one[0] = dst;
    copySlices(this.#one, 0, this.#views, 0, dst.length);
    this.#release();
    this.#dev.counters.inc(DeviceCounter.rdma_read_bytes, dst.length);
    return true;
  }

  toHost(rkey: number, addr: bigint, data: Buffer): boolean {
    if (!this.#resolve(rkey, addr, data.length, MrFlag.REMOTE_WRITE, true)) return false;
    this.#one[0] = data;
    copySlices(this.#views, 0, this.#one, 0, data.length);
    this.#release();
    this.#dev.counters.inc(DeviceCounter.rdma_write_bytes, data.length);
    return true;
  }

  /** Drop the views and the caller's buffer (never keep guest views or an object across turns). */
  #release(): void {
    this.#views.length = 0;
    this.#one[0] = EMPTY;
    this.lastRefusal = 'none';
  }
}

const EMPTY = Buffer.alloc(0);
