// Namespaces: where the blocks live. A RAM namespace is one Buffer; a file
// namespace is a FileHandle driven through fs.promises only (never a sync
// call on the loop), with a bounded number of operations in flight per
// namespace and the rest waiting in order. A write completes (and so is
// acknowledged to the host) only once the file has taken every byte; Flush
// is fsync. Callers check ranges first (the controller does): these methods
// assume lba + nlb is inside the namespace.
//
// A RAM namespace's zeroing (Write Zeroes, deallocate) can cover the whole
// namespace, gigabytes, from one command: it runs through the shared pacer
// (../pace.ts) a few milliseconds per loop turn, one command's zeroing after
// another in arrival order, so those commands also complete in that order.

import { constants as bufferConstants } from 'buffer';
import { createHash } from 'crypto';
import { constants as fsConstants, promises as fsp } from 'fs';
import { fillPaced, SLICE } from '../pace';
import { NvmeStatus } from './layouts';

export const BLOCK_SIZES = [512, 1024, 2048, 4096] as const;
/** Operations in flight per file namespace; the rest wait (bounded in turn by the queues' depth). */
const FILE_NS_DEPTH = 32;
/** Largest RAM namespace (one Buffer). */
export const MAX_RAM_NS_BYTES = Math.min(bufferConstants.MAX_LENGTH, 2 ** 32);
/** Zeroes are written in pieces of this size (Write Zeroes on a file). */
const ZERO_CHUNK = 128 * 1024;

/** Blocks [slba, slba + nlb). */
export interface BlockRange {
  readonly slba: number;
  readonly nlb: number;
}

/** What the controller needs from a namespace. Every operation resolves to an NVMe status. */
export interface NvmeofNamespace {
  readonly nsid: number;
  readonly blockSize: number;
  readonly blocks: number;
  /** Identify's DLFEAT: what a read of deallocated blocks returns. */
  readonly dlfeat: number;
  /** Read blocks [lba, lba + out.length / blockSize) into out. */
  read(lba: number, out: Buffer): Promise<number>;
  /** Write src at lba; resolves once stored. `fua`: durable before completing. */
  write(lba: number, src: Buffer, fua: boolean): Promise<number>;
  writeZeroes(lba: number, nlb: number): Promise<number>;
  /** Advisory: the ranges' contents are no longer needed (ranges checked, sorted, not overlapping). */
  deallocate(ranges: readonly BlockRange[]): Promise<number>;
  flush(): Promise<number>;
  close(): Promise<void>;
}

/** Stable identifiers for a namespace (same subsystem NQN and nsid: same ids across restarts). */
export interface NamespaceIds {
  readonly uuid: Buffer;
  readonly nguid: Buffer;
  readonly eui64: Buffer;
}

export function namespaceIds(subnqn: string, nsid: number): NamespaceIds {
  const h = createHash('sha256').update(`${subnqn}\0${nsid}`).digest();
  const uuid = Buffer.from(h.subarray(0, 16));
  uuid[6] = (uuid[6]! & 0x0f) | 0x50; // version 5 style
  uuid[8] = (uuid[8]! & 0x3f) | 0x80; // RFC 4122 variant
  return { uuid, nguid: Buffer.from(h.subarray(16, 32)), eui64: Buffer.from(h.subarray(8, 16)) };
}

function checkGeometry(size: number, blockSize: number): void {
  if (!(BLOCK_SIZES as readonly number[]).includes(blockSize))
    throw new RangeError(`block size ${blockSize} is not one of ${BLOCK_SIZES.join(', ')}`);
  if (!Number.isSafeInteger(size) || size < blockSize || size % blockSize !== 0) {
    throw new RangeError(`namespace size ${size} is not a whole, non-zero number of ${blockSize}-byte blocks`);
  }
}

/** A namespace in one Buffer (lost when the process ends). */
export class RamNamespace implements NvmeofNamespace {
  readonly blocks: number;
  readonly dlfeat = 1; // deallocated blocks read as zeroes
  readonly #data: Buffer;
  /** Zeroing runs one command after another: the previous one's end. */
  #zeroTail: Promise<unknown> = Promise.resolve();
  #zeroing = 0;

  constructor(
    readonly nsid: number,
    size: number,
    readonly blockSize: number,
  ) {
    checkGeometry(size, blockSize);
    if (size > MAX_RAM_NS_BYTES) throw new RangeError(`a RAM namespace holds at most ${MAX_RAM_NS_BYTES} bytes`);
    this.#data = Buffer.alloc(size);
    this.blocks = size / blockSize;
  }

  read(lba: number, out: Buffer): Promise<number> {
    this.#data.copy(out, 0, lba * this.blockSize, lba * this.blockSize + out.length);
    return Promise.resolve(NvmeStatus.SUCCESS);
  }

  write(lba: number, src: Buffer): Promise<number> {
    src.copy(this.#data, lba * this.blockSize);
    return Promise.resolve(NvmeStatus.SUCCESS);
  }

  writeZeroes(lba: number, nlb: number): Promise<number> {
    return this.#zero([{ slba: lba, nlb }]);
  }

  deallocate(ranges: readonly BlockRange[]): Promise<number> {
    return this.#zero(ranges);
  }

  /** Zeroing commands waiting or running (tests). */
  get zeroing(): number {
    return this.#zeroing;
  }

  #zero(ranges: readonly BlockRange[]): Promise<number> {
    const bs = this.blockSize;
    let bytes = 0;
    for (const r of ranges) bytes += r.nlb * bs;
    // Small and nothing queued before it: at once (the common 4 KiB discard).
    if (this.#zeroing === 0 && bytes <= SLICE.fill) {
      for (const r of ranges) this.#data.fill(0, r.slba * bs, (r.slba + r.nlb) * bs);
      return Promise.resolve(NvmeStatus.SUCCESS);
    }
    this.#zeroing++;
    const run = this.#zeroTail
      .then(async () => {
        for (const r of ranges) await fillPaced(this.#data, 0, r.slba * bs, (r.slba + r.nlb) * bs);
        return NvmeStatus.SUCCESS;
      })
      .finally(() => {
        this.#zeroing--;
      });
    this.#zeroTail = run.catch(() => undefined);
    return run;
  }

  flush(): Promise<number> {
    return Promise.resolve(NvmeStatus.SUCCESS);
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

/** A counting gate: at most `depth` holders, the others wait in arrival order. */
class DepthGate {
  #inFlight = 0;
  readonly #waiting: Array<() => void> = [];
  readonly #idle: Array<() => void> = [];

  constructor(private readonly depth: number) {}

  get inFlight(): number {
    return this.#inFlight;
  }
  get waiting(): number {
    return this.#waiting.length;
  }

  acquire(): Promise<void> {
    if (this.#inFlight < this.depth) {
      this.#inFlight++;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  release(): void {
    const next = this.#waiting.shift();
    if (next) {
      next();
      return;
    } // the slot passes straight to the next waiter
    this.#inFlight--;
    if (this.#inFlight === 0) for (const idle of this.#idle.splice(0)) idle();
  }

  /** Resolves when nothing is in flight or waiting. */
  drain(): Promise<void> {
    if (this.#inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }
}

/** A namespace in a file, created if absent and sized to the namespace (a bigger file shrinks). */
export class FileNamespace implements NvmeofNamespace {
  readonly blocks: number;
  /** Deallocate is advisory here (no hole punching from Node): reads of deallocated blocks are unspecified. */
  readonly dlfeat = 0;
  readonly #gate: DepthGate;
  #closed = false;

  private constructor(
    readonly nsid: number,
    readonly path: string,
    private readonly fh: fsp.FileHandle,
    size: number,
    readonly blockSize: number,
    depth: number,
  ) {
    this.blocks = size / blockSize;
    this.#gate = new DepthGate(depth);
  }

  /** Open (creating it if absent) and size `path`. Throws for a bad geometry or an fs error (operator input, at start). */
  static async open(
    nsid: number,
    path: string,
    size: number,
    blockSize: number,
    depth = FILE_NS_DEPTH,
  ): Promise<FileNamespace> {
    checkGeometry(size, blockSize);
    if (!Number.isInteger(depth) || depth < 1) throw new RangeError(`depth ${depth} must be a positive integer`);
    const fh = await fsp.open(path, fsConstants.O_RDWR | fsConstants.O_CREAT, 0o644);
    try {
      const st = await fh.stat();
      if (!st.isFile()) throw new Error(`${path} is not a regular file`);
      if (st.size !== size) await fh.truncate(size);
    } catch (e) {
      await fh.close();
      throw e;
    }
    return new FileNamespace(nsid, path, fh, size, blockSize, depth);
  }

  /** Operations running now, and waiting for a slot (for tests and stats). */
  get inFlight(): number {
    return this.#gate.inFlight;
  }
  get waiting(): number {
    return this.#gate.waiting;
  }

  async #run(op: () => Promise<void>, failure: number): Promise<number> {
    if (this.#closed) return NvmeStatus.NS_NOT_READY;
    await this.#gate.acquire();
    try {
      await op();
      return NvmeStatus.SUCCESS;
    } catch {
      return failure | NvmeStatus.DNR;
    } finally {
      this.#gate.release();
    }
  }

  read(lba: number, out: Buffer): Promise<number> {
    return this.#run(async () => {
      let done = 0;
      while (done < out.length) {
        const { bytesRead } = await this.fh.read(out, done, out.length - done, lba * this.blockSize + done);
        if (bytesRead === 0) {
          out.fill(0, done);
          break;
        } // the file was cut short behind our back
        done += bytesRead;
      }
    }, NvmeStatus.READ_ERROR);
  }

  write(lba: number, src: Buffer, fua: boolean): Promise<number> {
    return this.#run(async () => {
      await this.#writeAll(src, lba * this.blockSize, src.length);
      if (fua) await this.fh.datasync();
    }, NvmeStatus.WRITE_FAULT);
  }

  async #writeAll(src: Buffer, pos: number, len: number): Promise<void> {
    let done = 0;
    while (done < len) {
      const { bytesWritten } = await this.fh.write(src, done, len - done, pos + done);
      if (bytesWritten === 0) throw new Error('short write');
      done += bytesWritten;
    }
  }

  writeZeroes(lba: number, nlb: number): Promise<number> {
    return this.#run(async () => {
      const zeroes = Buffer.alloc(Math.min(ZERO_CHUNK, nlb * this.blockSize));
      let pos = lba * this.blockSize;
      const end = (lba + nlb) * this.blockSize;
      while (pos < end) {
        const n = Math.min(zeroes.length, end - pos);
        await this.#writeAll(zeroes, pos, n);
        pos += n;
      }
    }, NvmeStatus.WRITE_FAULT);
  }

  deallocate(): Promise<number> {
    return Promise.resolve(NvmeStatus.SUCCESS);
  }

  flush(): Promise<number> {
    return this.#run(() => this.fh.sync(), NvmeStatus.WRITE_FAULT);
  }

  /** Let what is in flight finish, then close the file. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#gate.drain();
    await this.fh.close();
  }
}
