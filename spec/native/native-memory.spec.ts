// The native addon: its errors, memfd (seals, sizes) and mmap/munmap.

import { expect } from 'chai';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import * as native from '../../lib/native';
import { F_SEAL_GROW, F_SEAL_SEAL, F_SEAL_SHRINK, FDS_OUT_LENGTH, isNativeError } from '../../lib/native';
import { closeAll, expectNative, fsCode, mapsCount, PAGE, thrown, useNativeSuite } from './native-helpers';

describe('native addon: errors, memfd, mmap', () => {
  const scratch = useNativeSuite();

  describe('errors', () => {
    it('carry code, errno and syscall (recvmsg on a closed fd)', () => {
      const [a, b] = native.socketPair();
      closeAll(a, b);
      const e = thrown(() => native.recvmsg(a, Buffer.alloc(4), 0, 4, new Int32Array(FDS_OUT_LENGTH)));
      expect(e).to.be.instanceOf(Error);
      expect(isNativeError(e)).to.equal(true);
      if (!isNativeError(e)) return;
      expect(e.code).to.equal('EBADF');
      expect(e.errno).to.equal(os.constants.errno.EBADF);
      expect(e.syscall).to.equal('recvmsg');
      expect(e.message).to.equal('recvmsg: Bad file descriptor');
    });

    it('isNativeError rejects other values', () => {
      expect(isNativeError(new Error('x'))).to.equal(false);
      expect(isNativeError(new TypeError('x'))).to.equal(false);
      expect(isNativeError({ code: 'EBADF', errno: 9, syscall: 'read' })).to.equal(false);
      expect(isNativeError(undefined)).to.equal(false);
    });

    it('throws TypeError/RangeError for bad arguments', () => {
      const call = native.accept as unknown as (fd: unknown) => number;
      expect(() => call('3')).to.throw(TypeError);
      expect(() => call(1.5)).to.throw(TypeError);
      expect(() => call(-1)).to.throw(RangeError);
      expect(() =>
        (native.memfdCreate as unknown as (n: unknown, s: number, x: boolean) => number)(5, 1, false),
      ).to.throw(TypeError);
      expect(() => (native.eventfd as unknown as (i: number, nb: unknown) => number)(0, 1)).to.throw(TypeError);
    });
  });

  describe('memfd', () => {
    it('creates a memfd of the given size', () => {
      const fd = native.memfdCreate('ernic-test', 12345, false);
      expect(fs.fstatSync(fd).size).to.equal(12345);
      expect(fs.readlinkSync(`/proc/self/fd/${fd}`)).to.match(/^\/memfd:ernic-test/);
      fs.closeSync(fd);
    });

    it('accepts sizes above 4 GiB', () => {
      const size = 5 * 2 ** 30 + PAGE;
      const fd = native.memfdCreate('big', size, true);
      expect(fs.fstatSync(fd).size).to.equal(size);
      fs.closeSync(fd);
    });

    it('rejects bad sizes', () => {
      expect(() => native.memfdCreate('x', -1, false)).to.throw(RangeError);
      expect(() => native.memfdCreate('x', 2 ** 53, false)).to.throw(RangeError);
      expect(() => native.memfdCreate('x', 1.5, false)).to.throw(TypeError);
    });

    it('a sealed memfd cannot change size and shows its seals', () => {
      const fd = native.memfdCreate('sealed', 2 * PAGE, true);
      expect(fsCode(() => fs.ftruncateSync(fd, PAGE))).to.equal('EPERM');
      expect(fsCode(() => fs.ftruncateSync(fd, 4 * PAGE))).to.equal('EPERM');
      expect(fs.fstatSync(fd).size).to.equal(2 * PAGE);
      expect(native.getSeals(fd)).to.equal(F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW);
      fs.closeSync(fd);
    });

    it('an unsealed memfd has no size seals and can be resized', () => {
      const fd = native.memfdCreate('unsealed', PAGE, false);
      // Without MFD_ALLOW_SEALING the kernel reports just F_SEAL_SEAL ("no sealing").
      expect(native.getSeals(fd)).to.equal(F_SEAL_SEAL);
      expect(native.getSeals(fd) & (F_SEAL_SHRINK | F_SEAL_GROW)).to.equal(0);
      fs.ftruncateSync(fd, 3 * PAGE);
      expect(fs.fstatSync(fd).size).to.equal(3 * PAGE);
      fs.closeSync(fd);
    });

    it('getSeals returns -1 for fds without sealing and throws EBADF on closed fds', () => {
      const file = path.join(scratch.dir, 'plain');
      fs.writeFileSync(file, 'x');
      const fd = fs.openSync(file, 'r');
      expect(native.getSeals(fd)).to.equal(-1);
      fs.closeSync(fd);
      expectNative(() => native.getSeals(fd), 'EBADF');
    });
  });

  describe('mmap/munmap', () => {
    let mfd: number;
    beforeEach(() => {
      mfd = native.memfdCreate('map', 4 * PAGE, true);
    });
    afterEach(() => {
      fs.closeSync(mfd);
    });

    it('writes through the mapping are visible to read()', () => {
      const ab = native.mmap(mfd, 0, 4 * PAGE, true);
      expect(ab.byteLength).to.equal(4 * PAGE);
      const view = new Uint8Array(ab);
      view.set([1, 2, 3, 4], 100);
      const out = Buffer.alloc(4);
      expect(fs.readSync(mfd, out, 0, 4, 100)).to.equal(4);
      expect([...out]).to.deep.equal([1, 2, 3, 4]);
      native.munmap(ab);
    });

    it('writes to the file are visible through the mapping (read-only mapping too)', () => {
      const rw = native.mmap(mfd, 0, 4 * PAGE, true);
      const ro = native.mmap(mfd, 0, 4 * PAGE, false);
      fs.writeSync(mfd, Buffer.from([9, 8, 7]), 0, 3, 2 * PAGE + 5);
      expect([...new Uint8Array(rw, 2 * PAGE + 5, 3)]).to.deep.equal([9, 8, 7]);
      expect([...new Uint8Array(ro, 2 * PAGE + 5, 3)]).to.deep.equal([9, 8, 7]);
      new Uint8Array(rw)[10] = 42;
      expect(new Uint8Array(ro)[10]).to.equal(42);
      native.munmap(rw);
      native.munmap(ro);
    });

    it('maps at a page-aligned offset', () => {
      fs.writeSync(mfd, Buffer.from('hello'), 0, 5, 2 * PAGE);
      const ab = native.mmap(mfd, 2 * PAGE, PAGE, true);
      expect(ab.byteLength).to.equal(PAGE);
      expect(Buffer.from(ab, 0, 5).toString()).to.equal('hello');
      Buffer.from(ab).write('world', 10);
      const out = Buffer.alloc(5);
      fs.readSync(mfd, out, 0, 5, 2 * PAGE + 10);
      expect(out.toString()).to.equal('world');
      native.munmap(ab);
    });

    it('rejects an unaligned offset with EINVAL', () => {
      expectNative(() => native.mmap(mfd, 100, PAGE, true), 'EINVAL', 'mmap');
    });

    it('rejects bad lengths and a closed fd', () => {
      expect(() => native.mmap(mfd, 0, 0, true)).to.throw(RangeError);
      expect(() => native.mmap(mfd, 0, 2 ** 31 + 1, true)).to.throw(RangeError);
      expect(() => native.mmap(mfd, -PAGE, PAGE, true)).to.throw(RangeError);
      const fd = native.memfdCreate('closed', PAGE, false);
      fs.closeSync(fd);
      expectNative(() => native.mmap(fd, 0, PAGE, true), 'EBADF', 'mmap');
    });

    it('munmap detaches the ArrayBuffer and every view of it', () => {
      const ab = native.mmap(mfd, 0, 4 * PAGE, true);
      const buf = Buffer.from(ab);
      const u32 = new Uint32Array(ab, PAGE, 4);
      buf[0] = 1;
      expect(buf.length).to.equal(4 * PAGE);
      native.munmap(ab);
      expect(ab.byteLength).to.equal(0);
      expect(buf.length).to.equal(0);
      expect(u32.length).to.equal(0);
      expect(buf[0]).to.equal(undefined);
    });

    it('munmap throws for double unmap and foreign ArrayBuffers', () => {
      const ab = native.mmap(mfd, 0, PAGE, true);
      native.munmap(ab);
      expect(() => native.munmap(ab)).to.throw(Error, /not a live mapping/);
      expect(() => native.munmap(new ArrayBuffer(16))).to.throw(Error, /not a live mapping/);
      expect(() => native.munmap(Buffer.alloc(16).buffer)).to.throw(Error, /not a live mapping/);
      expect(() => (native.munmap as unknown as (x: unknown) => void)(new Uint8Array(4))).to.throw(TypeError);
    });

    it('unmaps immediately: many map/unmap cycles do not grow /proc/self/maps', () => {
      const before = mapsCount();
      for (let i = 0; i < 500; i++) {
        const ab = native.mmap(mfd, (i % 4) * PAGE, PAGE, i % 2 === 0);
        void new Uint8Array(ab)[0]; // touch the page
        native.munmap(ab);
      }
      expect(mapsCount()).to.be.at.most(before + 4);
    });
  });
});
