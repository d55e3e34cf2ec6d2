// The NVMe-oF fuzzer's capsules (./nvmeof.ts): admin and I/O commands with random fields, Fabrics commands, SGL
// descriptors (keyed, in capsule, bad; key 0, unknown keys, lengths past MDTS), Dataset Management ranges, plain
// bytes, and now and then a good I/O command a host could send. Each epoch's namespace geometry and guest memory
// come in through `CapsuleEpoch`, which the fuzzer fills as it builds the epoch.

import { Prng } from '../../support/ionic/rig';
import {
  ADDR,
  HOSTNQN,
  HostMemory,
  IN_CAPSULE,
  KEY,
  KEYED,
  KEYED_INV,
  SglSpec,
  sqe,
  SUBNQN,
} from '../../targets/nvmeof/helpers';

/** The namespace only good commands name (their writes are read back); random commands never name it. */
export const CHECK_NSID = 7;

/** This epoch's namespace 1 (blocks of `bs` bytes) and the guest memory descriptors point into. */
export interface CapsuleEpoch {
  blocks: number;
  bs: number;
  mem: HostMemory;
}

/** One capsule, what it is (for the trail), and whether it may be held (an AER). */
interface FuzzCapsule {
  capsule: Buffer;
  what: string;
  held: boolean;
}

export class NvmeCapsules {
  readonly #rnd: Prng;
  readonly #epoch: CapsuleEpoch;
  readonly #stats: { raw: number };

  constructor(rnd: Prng, epoch: CapsuleEpoch, stats: { raw: number }) {
    this.#rnd = rnd;
    this.#epoch = epoch;
    this.#stats = stats;
  }

  #sgl(len: number): SglSpec {
    const rnd = this.#rnd;
    switch (rnd.below(12)) {
      case 0:
        return { addr: ADDR.DATA, len, key: 0, type: KEYED };
      case 1:
        return { addr: ADDR.DATA, len, key: rnd.next(), type: KEYED };
      case 2:
        return {
          addr: rnd.pick([0, 2 ** 52, HostMemory.BASE + (1 << 20) - 10, Number.MAX_SAFE_INTEGER]),
          len,
          key: KEY,
          type: KEYED,
        };
      case 3:
        return { addr: HostMemory.BASE + 0x1000, len, key: 0x5678, type: KEYED };
      case 4:
        return { addr: rnd.below(8192), len, key: 0, type: IN_CAPSULE };
      case 5:
        return {
          addr: ADDR.DATA,
          len: rnd.pick([0, 1, len + 1, len - 1, 0xffffff, rnd.below(0x1000000)]),
          key: KEY,
          type: KEYED,
        };
      case 6:
        return {
          addr: ADDR.DATA,
          len,
          key: KEY,
          type: rnd.pick([0x00, 0x02, 0x30, 0x41, 0x4e, 0x50, 0xf0, rnd.below(256)]),
        };
      case 7:
        return { addr: ADDR.DATA, len, key: KEY, type: KEYED_INV };
      default:
        return { addr: ADDR.DATA + rnd.below(0x1000) * 16, len, key: KEY, type: KEYED };
    }
  }

  #nsid(): number {
    const rnd = this.#rnd;
    const n = rnd.pick([1, 1, 1, 1, 2, 3, 0, 0xffffffff, 0xfffffffe, rnd.next()]);
    return n === CHECK_NSID ? 1 : n;
  }

  /** One capsule: an admin or I/O command with random fields, a Fabrics command, or bytes. */
  capsule(admin: boolean): FuzzCapsule {
    const rnd = this.#rnd;
    const cid = rnd.below(0x10000);
    const blocks = this.#epoch.blocks;
    if (rnd.below(25) === 0) {
      this.#stats.raw++;
      const b = rnd.bytes(rnd.pick([0, 1, 16, 63, 64, 65, 100, 4160]));
      return { capsule: b, what: `raw ${b.length} bytes`, held: false };
    }
    const withData = (b: Buffer): Buffer => (rnd.below(6) === 0 ? Buffer.concat([b, rnd.bytes(rnd.below(9000))]) : b);
    const flags = rnd.below(15) === 0 ? rnd.below(256) : 0x40;
    if (rnd.below(8) === 0) {
      // Fabrics: Property Get/Set, Connect, Disconnect, anything
      const fctype = rnd.pick([0x00, 0x01, 0x04, 0x08, rnd.below(256)]);
      const offset = rnd.pick([0, 0x8, 0x14, 0x1c, 0x20, rnd.below(0x2000)]);
      const value =
        fctype === 0x00 && offset === 0x14
          ? rnd.pick([0x00460001, 0x00460000, 0x00464001, 0x00468001, 0, rnd.next()])
          : rnd.next();
      const capsule = sqe({
        opcode: 0x7f,
        cid,
        flags,
        nsid: fctype,
        sgl: fctype === 0x01 ? this.#sgl(1024) : undefined,
        cdw10: rnd.below(2) ? rnd.below(8) : rnd.next(),
        cdw11: fctype === 0x01 ? (rnd.below(5) << 16) | rnd.below(200) : offset,
        cdw12: value,
        cdw13: rnd.next(),
      });
      if (fctype === 0x01) {
        // Connect data in guest memory, half of it plausible.
        const d = Buffer.alloc(1024);
        rnd.bytes(16).copy(d, 0);
        d.writeUInt16LE(rnd.pick([0xffff, 1, 2, rnd.below(0x10000)]), 16);
        d.write(rnd.below(2) ? SUBNQN : rnd.bytes(40).toString('latin1'), 256, 255, 'latin1');
        d.write(rnd.below(2) ? HOSTNQN : rnd.bytes(rnd.below(300)).toString('latin1'), 512, 255, 'latin1');
        d.copy(this.#epoch.mem.at(ADDR.DATA, d.length)); // where most of the descriptors point
      }
      return { capsule: withData(capsule), what: `fabrics ${fctype} cdw11 ${offset}`, held: false };
    }
    if (admin) {
      const op = rnd.pick([
        0x06,
        0x06,
        0x02,
        0x02,
        0x09,
        0x0a,
        0x18,
        0x0c,
        0x08,
        0x00,
        0x01,
        0x05,
        0x80,
        rnd.below(256),
      ]);
      switch (op) {
        case 0x06: {
          // Identify
          const len = rnd.pick([4096, 4096, 0, 512, 8192]);
          return {
            capsule: withData(
              sqe({
                opcode: op,
                cid,
                flags,
                nsid: this.#nsid(),
                sgl: this.#sgl(len),
                cdw10: rnd.pick([0, 1, 2, 3, 6, 0x10, rnd.below(256)]),
                cdw11: rnd.below(4) === 0 ? rnd.next() : 0,
              }),
            ),
            what: 'identify',
            held: false,
          };
        }
        case 0x02: {
          // Get Log Page
          const numd = rnd.pick([127, 15, 1023, 0, 32767, rnd.below(0x10000)]);
          const bytes = (numd + 1) * 4;
          return {
            capsule: withData(
              sqe({
                opcode: op,
                cid,
                flags,
                nsid: this.#nsid(),
                sgl: this.#sgl(bytes),
                cdw10:
                  rnd.pick([0x01, 0x02, 0x03, 0x04, 0x70, rnd.below(256)]) |
                  (rnd.below(2) ? 0x8000 : 0) |
                  ((numd & 0xffff) << 16),
                cdw11: rnd.below(4) === 0 ? rnd.next() : 0,
                cdw12: rnd.pick([0, 4, 512, 3, rnd.next()]),
                cdw13: rnd.below(8) === 0 ? rnd.next() : 0,
              }),
            ),
            what: `get log ${numd}`,
            held: false,
          };
        }
        case 0x09:
        case 0x0a: // Set / Get Features
          return {
            capsule: withData(
              sqe({
                opcode: op,
                cid,
                flags,
                sgl: rnd.below(3) ? undefined : this.#sgl(16),
                cdw10:
                  rnd.pick([1, 2, 4, 5, 6, 7, 0x0a, 0x0b, 0x0f, 0x81, rnd.below(256)]) |
                  (rnd.below(4) === 0 ? rnd.below(8) << 8 : 0) |
                  (rnd.below(8) === 0 ? 0x80000000 : 0),
                cdw11: rnd.pick([0, 1, 0xffff, 5000, rnd.next()]),
              }),
            ),
            what: `features ${op}`,
            held: false,
          };
        case 0x0c:
          return { capsule: sqe({ opcode: op, cid, flags }), what: 'AER', held: true };
        case 0x08:
          return {
            capsule: sqe({ opcode: op, cid, flags, cdw10: (rnd.below(0x10000) << 16) | rnd.below(4) }),
            what: 'abort',
            held: false,
          };
        default:
          return {
            capsule: withData(
              sqe({
                opcode: op,
                cid,
                flags,
                nsid: this.#nsid(),
                sgl: this.#sgl(rnd.below(9000)),
                cdw10: rnd.next(),
                cdw11: rnd.next(),
              }),
            ),
            what: `admin op ${op}`,
            held: false,
          };
      }
    }
    const op = rnd.pick([0x01, 0x02, 0x02, 0x00, 0x08, 0x09, 0x09, rnd.below(256)]);
    if (rnd.below(2) === 0 && op <= 0x09) return this.#goodIo(op, cid);
    const slba = rnd.pick([0, 1, blocks - 1, blocks, blocks - 256, rnd.below(blocks), 2 ** 32, 2 ** 53 - 1]);
    switch (op) {
      case 0x01:
      case 0x02: {
        // Write / Read
        const nlb = rnd.pick([1, 8, 256, 257, 0x10000, rnd.below(300) + 1]);
        const len = Math.min(nlb * this.#epoch.bs, 0xffffff);
        const control = rnd.below(4) === 0 ? rnd.below(0x10000) : 0;
        return {
          capsule: withData(
            sqe({
              opcode: op,
              cid,
              flags,
              nsid: this.#nsid(),
              sgl: this.#sgl(len),
              cdw10: slba % 2 ** 32,
              cdw11: Math.floor(slba / 2 ** 32) % 2 ** 32,
              cdw12: (control << 16) | ((nlb - 1) & 0xffff),
            }),
          ),
          what: `${op === 1 ? 'write' : 'read'} ${nlb} @${slba}`,
          held: false,
        };
      }
      case 0x08: {
        // Write Zeroes: up to the whole namespace
        const nlb = rnd.pick([1, 0x10000, blocks, rnd.below(0x10000) + 1]);
        return {
          capsule: sqe({
            opcode: op,
            cid,
            flags,
            nsid: this.#nsid(),
            sgl: rnd.below(4) ? undefined : this.#sgl(rnd.below(100)),
            cdw10: slba % 2 ** 32,
            cdw11: Math.floor(slba / 2 ** 32) % 2 ** 32,
            cdw12: (nlb - 1) & 0xffff,
          }),
          what: `write zeroes ${nlb} @${slba}`,
          held: false,
        };
      }
      case 0x09: {
        // Dataset Management: up to 256 ranges, each up to the whole namespace
        const nr = rnd.pick([0, 1, 255, rnd.below(256)]);
        const ranges = Buffer.alloc((nr + 1) * 16);
        for (let i = 0; i <= nr; i++) {
          const s = rnd.pick([0, rnd.below(blocks), blocks, 2 ** 40]);
          ranges.writeUInt32LE(rnd.next(), i * 16);
          ranges.writeUInt32LE(
            rnd.pick([blocks, blocks - s > 0 ? blocks - s : 1, 1, 0, 0xffffffff, rnd.below(blocks + 1)]),
            i * 16 + 4,
          );
          ranges.writeBigUInt64LE(BigInt(s), i * 16 + 8);
        }
        const inCapsule = rnd.below(3) === 0;
        if (!inCapsule) ranges.copy(this.#epoch.mem.at(ADDR.DATA, ranges.length));
        const sgl = inCapsule
          ? { addr: 0, len: ranges.length, key: 0, type: IN_CAPSULE }
          : rnd.below(5)
            ? { addr: ADDR.DATA, len: rnd.pick([ranges.length, 4096]), key: KEY, type: KEYED }
            : this.#sgl(ranges.length);
        const capsule = sqe({
          opcode: op,
          cid,
          flags,
          nsid: this.#nsid(),
          sgl,
          cdw10: nr,
          cdw11: rnd.pick([0x4, 0x4, 0, 0x7, rnd.next()]),
        });
        return {
          capsule: inCapsule ? Buffer.concat([capsule, ranges]) : capsule,
          what: `dsm ${nr + 1} ranges`,
          held: false,
        };
      }
      default:
        return {
          capsule: withData(
            sqe({
              opcode: op,
              cid,
              flags,
              nsid: this.#nsid(),
              sgl: this.#sgl(rnd.below(0x30000)),
              cdw10: rnd.next(),
              cdw11: rnd.next(),
              cdw12: rnd.next(),
              cdw13: rnd.next(),
              cdw14: rnd.next(),
              cdw15: rnd.next(),
            }),
          ),
          what: `io op ${op}`,
          held: false,
        };
    }
  }

  /** An I/O command a host could send: nsid 1, a range inside the namespace, an exact keyed SGL within MDTS. */
  #goodIo(op: number, cid: number): FuzzCapsule {
    const rnd = this.#rnd;
    const maxNlb = Math.max(1, Math.floor((128 * 1024) / this.#epoch.bs));
    switch (op) {
      case 0x01:
      case 0x02: {
        const nlb = 1 + rnd.below(maxNlb);
        const slba = rnd.below(this.#epoch.blocks - nlb + 1);
        return {
          capsule: sqe({
            opcode: op,
            cid,
            nsid: 1,
            sgl: { addr: ADDR.DATA, len: nlb * this.#epoch.bs, key: KEY, type: rnd.below(4) ? KEYED : KEYED_INV },
            cdw10: slba,
            cdw12: nlb - 1,
          }),
          what: `good ${op === 1 ? 'write' : 'read'} ${nlb} @${slba}`,
          held: false,
        };
      }
      case 0x08: {
        const nlb = 1 + rnd.below(Math.min(0x10000, this.#epoch.blocks));
        const slba = rnd.below(this.#epoch.blocks - nlb + 1);
        return {
          capsule: sqe({ opcode: op, cid, nsid: 1, cdw10: slba, cdw12: nlb - 1 }),
          what: `good write zeroes ${nlb} @${slba}`,
          held: false,
        };
      }
      case 0x09: {
        const nr = rnd.below(256);
        const ranges = Buffer.alloc((nr + 1) * 16);
        for (let i = 0; i <= nr; i++) {
          const s = rnd.below(this.#epoch.blocks);
          ranges.writeUInt32LE(1 + rnd.below(this.#epoch.blocks - s), i * 16 + 4);
          ranges.writeBigUInt64LE(BigInt(s), i * 16 + 8);
        }
        ranges.copy(this.#epoch.mem.at(ADDR.DATA, ranges.length));
        return {
          capsule: sqe({
            opcode: op,
            cid,
            nsid: 1,
            sgl: { addr: ADDR.DATA, len: ranges.length, key: KEY, type: KEYED },
            cdw10: nr,
            cdw11: 0x4,
          }),
          what: `good dsm ${nr + 1} ranges`,
          held: false,
        };
      }
      default:
        return { capsule: sqe({ opcode: 0x00, cid, nsid: 1 }), what: 'good flush', held: false };
    }
  }
}
