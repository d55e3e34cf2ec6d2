import { expect } from 'chai';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import * as native from '../../lib/native';
import {
  DISCONNECT, F_SEAL_GROW, F_SEAL_SEAL, F_SEAL_SHRINK, FDS_OUT_LENGTH, MAX_FDS, READABLE, WRITABLE,
  Watcher, isNativeError,
} from '../../lib/native';

const PAGE = 4096;

function fdCount(): number {
  return fs.readdirSync('/proc/self/fd').length;
}

function mapsCount(): number {
  return fs.readFileSync('/proc/self/maps', 'utf8').split('\n').length;
}

function closeAll(...fds: number[]): void {
  for (const fd of fds) fs.closeSync(fd);
}

/** Runs fn and returns what it threw (fails if it did not throw). */
function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (e) {
    return e;
  }
  throw new Error('expected an exception');
}

function expectNative(fn: () => unknown, code: string, syscall?: string): void {
  const e = thrown(fn);
  expect(isNativeError(e), String(e)).to.equal(true);
  if (!isNativeError(e)) return;
  expect(e.code).to.equal(code);
  expect(e.errno).to.be.a('number').greaterThan(0);
  if (syscall !== undefined) expect(e.syscall).to.equal(syscall);
  expect(e.message.startsWith(`${e.syscall}: `), e.message).to.equal(true);
}

function fsCode(fn: () => unknown): string | undefined {
  const e = thrown(fn) as NodeJS.ErrnoException;
  return e.code;
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

interface PollEvent { status: number; events: number }

/** Resolves with the first callback of a fresh watcher (closed afterwards). */
function nextEvent(fd: number, events: number, timeoutMs = 2000): Promise<PollEvent> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      w.close();
      reject(new Error('watch callback not called'));
    }, timeoutMs);
    const w = native.watch(fd, events, function (status, ev) {
      clearTimeout(timer);
      this.close();
      resolve({ status, events: ev });
    });
  });
}

describe('native addon', () => {
  let tmp: string;
  let startFds: number;

  before(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ernic-native-'));
  });
  after(() => {
    fs.rmSync(tmp, { recursive: true, force: true });
  });
  beforeEach(() => {
    startFds = fdCount();
  });
  afterEach(function () {
    // Every test closes what it opens: nothing may leak.
    if (this.currentTest?.state === 'passed') expect(fdCount()).to.equal(startFds);
  });

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
      expect(() => (native.memfdCreate as unknown as (n: unknown, s: number, x: boolean) => number)(
        5, 1, false)).to.throw(TypeError);
      expect(() => (native.eventfd as unknown as (i: number, nb: unknown) => number)(0, 1))
        .to.throw(TypeError);
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
      const file = path.join(tmp, 'plain');
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
      expect(() => (native.munmap as unknown as (x: unknown) => void)(new Uint8Array(4)))
        .to.throw(TypeError);
    });

    it('unmaps immediately: many map/unmap cycles do not grow /proc/self/maps', () => {
      const before = mapsCount();
      for (let i = 0; i < 500; i++) {
        const ab = native.mmap(mfd, (i % 4) * PAGE, PAGE, i % 2 === 0);
        new Uint8Array(ab)[0];
        native.munmap(ab);
      }
      expect(mapsCount()).to.be.at.most(before + 4);
    });
  });

  describe('socketPair + sendmsg/recvmsg', () => {
    const fdsOut = new Int32Array(FDS_OUT_LENGTH);

    function tempFiles(n: number): number[] {
      const fds: number[] = [];
      for (let i = 0; i < n; i++) {
        const file = path.join(tmp, `f${i}`);
        fs.writeFileSync(file, String(i));
        fds.push(fs.openSync(file, 'r'));
      }
      return fds;
    }

    function expectSameFile(a: number, b: number): void {
      const sa = fs.fstatSync(a);
      const sb = fs.fstatSync(b);
      expect([sa.dev, sa.ino]).to.deep.equal([sb.dev, sb.ino]);
    }

    it('transfers bytes', () => {
      const [a, b] = native.socketPair();
      expect(native.sendmsg(a, Buffer.from('xxhello'), 2, 5, null)).to.equal(5);
      const buf = Buffer.alloc(16);
      expect(native.recvmsg(b, buf, 3, 10, fdsOut)).to.equal(5);
      expect(fdsOut[0]).to.equal(0);
      expect(buf.subarray(3, 8).toString()).to.equal('hello');
      closeAll(a, b);
    });

    it('returns -1 on an empty non-blocking socket and 0 on EOF', () => {
      const [a, b] = native.socketPair();
      fdsOut[0] = 99;
      expect(native.recvmsg(b, Buffer.alloc(8), 0, 8, fdsOut)).to.equal(-1);
      expect(fdsOut[0]).to.equal(0);
      fs.closeSync(a);
      expect(native.recvmsg(b, Buffer.alloc(8), 0, 8, fdsOut)).to.equal(0);
      fs.closeSync(b);
    });

    it('passes fds in order, referring to the same files', () => {
      const files = tempFiles(3);
      const [a, b] = native.socketPair();
      expect(native.sendmsg(a, Buffer.from([1, 2]), 0, 2, files)).to.equal(2);
      expect(native.recvmsg(b, Buffer.alloc(8), 0, 8, fdsOut)).to.equal(2);
      expect(fdsOut[0]).to.equal(3);
      const got = Array.from(fdsOut.subarray(1, 4));
      for (let i = 0; i < 3; i++) {
        expect(got[i]).to.not.be.oneOf(files);
        expectSameFile(got[i], files[i]);
        // close-on-exec is set (MSG_CMSG_CLOEXEC): visible in fdinfo flags (octal, 02000000).
        const flags = /flags:\s*(\d+)/.exec(fs.readFileSync(`/proc/self/fdinfo/${got[i]}`, 'utf8'));
        expect(flags).to.not.equal(null);
        expect(parseInt(flags?.[1] ?? '0', 8) & 0o2000000).to.not.equal(0);
      }
      closeAll(a, b, ...files, ...got);
    });

    it('delivers all 20 fds of one message (Int32Array input)', () => {
      const files = tempFiles(20);
      const [a, b] = native.socketPair();
      expect(native.sendmsg(a, Buffer.from('m'), 0, 1, Int32Array.from(files))).to.equal(1);
      expect(native.recvmsg(b, Buffer.alloc(8), 0, 8, fdsOut)).to.equal(1);
      expect(fdsOut[0]).to.equal(20);
      const got = Array.from(fdsOut.subarray(1, 21));
      got.forEach((fd, i) => expectSameFile(fd, files[i]));
      closeAll(a, b, ...files, ...got);
    });

    it('delivers MAX_FDS (253) fds and refuses more', () => {
      const [a, b] = native.socketPair();
      const many = new Array<number>(MAX_FDS).fill(a);
      expect(native.sendmsg(a, Buffer.from('m'), 0, 1, many)).to.equal(1);
      expect(native.recvmsg(b, Buffer.alloc(8), 0, 8, fdsOut)).to.equal(1);
      expect(fdsOut[0]).to.equal(MAX_FDS);
      const got = Array.from(fdsOut.subarray(1, MAX_FDS + 1));
      expect(new Set(got).size).to.equal(MAX_FDS);
      closeAll(...got);
      expect(() => native.sendmsg(a, Buffer.from('m'), 0, 1, [...many, a])).to.throw(RangeError);
      closeAll(a, b);
    });

    it('fds arrive with the first byte of the message that carried them', () => {
      const files = tempFiles(2);
      const [a, b] = native.socketPair();
      native.sendmsg(a, Buffer.from('abc'), 0, 3, null);
      native.sendmsg(a, Buffer.from('defg'), 0, 4, [files[0]]);
      native.sendmsg(a, Buffer.from('hi'), 0, 2, [files[1]]);
      const buf = Buffer.alloc(16);
      expect(native.recvmsg(b, buf, 0, 2, fdsOut)).to.equal(2);
      expect(fdsOut[0]).to.equal(0);
      // Reads the rest of 'abc' and the start of 'defg': the fd comes along, and
      // the read stops at the end of the message that carried it.
      expect(native.recvmsg(b, buf, 0, 16, fdsOut)).to.equal(5);
      expect(buf.subarray(0, 5).toString()).to.equal('cdefg');
      expect(fdsOut[0]).to.equal(1);
      const first = fdsOut[1];
      expect(native.recvmsg(b, buf, 0, 16, fdsOut)).to.equal(2);
      expect(fdsOut[0]).to.equal(1);
      const second = fdsOut[1];
      expectSameFile(first, files[0]);
      expectSameFile(second, files[1]);
      closeAll(a, b, first, second, ...files);
    });

    it('sendmsg returns -1 when the socket buffer is full and partial counts before that', () => {
      const [a, b] = native.socketPair();
      const chunk = Buffer.alloc(64 * 1024, 7);
      let total = 0;
      let r = 0;
      for (let i = 0; i < 10000 && r !== -1; i++) {
        r = native.sendmsg(a, chunk, 0, chunk.length, null);
        if (r > 0) total += r;
      }
      expect(r).to.equal(-1);
      expect(total).to.be.greaterThan(0);
      let drained = 0;
      const buf = Buffer.alloc(64 * 1024);
      for (let n = native.recvmsg(b, buf, 0, buf.length, fdsOut); n > 0;
        n = native.recvmsg(b, buf, 0, buf.length, fdsOut)) drained += n;
      expect(drained).to.equal(total);
      closeAll(a, b);
    });

    it('sendmsg to a closed peer throws EPIPE (no SIGPIPE)', () => {
      const [a, b] = native.socketPair();
      fs.closeSync(b);
      expectNative(() => native.sendmsg(a, Buffer.from('x'), 0, 1, null), 'EPIPE', 'sendmsg');
      fs.closeSync(a);
    });

    it('validates buffers, ranges and fdsOut', () => {
      const [a, b] = native.socketPair();
      const buf = Buffer.alloc(8);
      expect(() => native.recvmsg(b, buf, 0, 8, new Int32Array(10))).to.throw(TypeError);
      expect(() => native.recvmsg(b, buf, 0, 8, new Uint32Array(FDS_OUT_LENGTH) as unknown as Int32Array))
        .to.throw(TypeError);
      expect(() => native.recvmsg(b, buf, 4, 5, fdsOut)).to.throw(RangeError);
      expect(() => native.recvmsg(b, buf, 9, 0, fdsOut)).to.throw(RangeError);
      expect(() => native.recvmsg(b, buf, 0, 0, fdsOut)).to.throw(RangeError);
      expect(() => native.sendmsg(a, buf, 0, 9, null)).to.throw(RangeError);
      expect(() => native.sendmsg(a, buf, 0, 0, [a])).to.throw(RangeError);
      expect(() => native.sendmsg(a, buf, 0, 1, [-1])).to.throw(RangeError);
      expect(() => (native.sendmsg as unknown as (...x: unknown[]) => number)(a, 'str', 0, 1, null))
        .to.throw(TypeError);
      expect(() => (native.sendmsg as unknown as (...x: unknown[]) => number)(a, buf, 0, 1, 5))
        .to.throw(TypeError);
      expect(native.sendmsg(a, buf, 0, 0, [])).to.equal(0);
      closeAll(a, b);
    });
  });

  describe('listen/connect/accept', () => {
    it('accepts a connection and sees its data', async () => {
      const sock = path.join(tmp, 'srv.sock');
      const lfd = native.listen(sock, 16);
      expect(fs.statSync(sock).isSocket()).to.equal(true);
      expect(native.accept(lfd)).to.equal(-1);

      const pending = nextEvent(lfd, READABLE);
      const cfd = native.connect(sock);
      expect((await pending).events & READABLE).to.equal(READABLE);
      const sfd = native.accept(lfd);
      expect(sfd).to.be.greaterThan(-1);
      expect(native.accept(lfd)).to.equal(-1);

      const readable = nextEvent(sfd, READABLE);
      native.sendmsg(cfd, Buffer.from('ping'), 0, 4, null);
      const ev = await readable;
      expect(ev.status).to.equal(0);
      expect(ev.events & READABLE).to.equal(READABLE);
      const buf = Buffer.alloc(8);
      const fdsOut = new Int32Array(FDS_OUT_LENGTH);
      expect(native.recvmsg(sfd, buf, 0, 8, fdsOut)).to.equal(4);
      expect(buf.subarray(0, 4).toString()).to.equal('ping');
      // The client fd is non-blocking.
      expect(native.recvmsg(cfd, buf, 0, 8, fdsOut)).to.equal(-1);
      closeAll(cfd, sfd, lfd);
      fs.unlinkSync(sock);
    });

    it('fails with ENAMETOOLONG for a 200-character path', () => {
      const long = path.join(tmp, 'x'.repeat(200));
      expectNative(() => native.listen(long, 1), 'ENAMETOOLONG', 'bind');
      expectNative(() => native.connect(long), 'ENAMETOOLONG', 'connect');
    });

    it('fails with EADDRINUSE when the path exists', () => {
      const sock = path.join(tmp, 'busy.sock');
      const lfd = native.listen(sock, 1);
      expectNative(() => native.listen(sock, 1), 'EADDRINUSE', 'bind');
      fs.closeSync(lfd);
      fs.unlinkSync(sock);
    });

    it('connect to a missing path gives ENOENT', () => {
      expectNative(() => native.connect(path.join(tmp, 'missing.sock')), 'ENOENT', 'connect');
    });

    it('rejects empty paths and paths with NUL', () => {
      expect(() => native.listen('', 1)).to.throw(TypeError);
      expect(() => native.connect('a\0b')).to.throw(TypeError);
    });
  });

  describe('watch', () => {
    it('fires for readable and update(0) stops it', async () => {
      const [a, b] = native.socketPair();
      let calls = 0;
      const w = native.watch(b, READABLE, (status, events) => {
        expect(status).to.equal(0);
        expect(events & READABLE).to.equal(READABLE);
        calls++;
        w.update(0); // level triggered: stop until drained
      });
      native.sendmsg(a, Buffer.from('x'), 0, 1, null);
      await delay(50);
      expect(calls).to.equal(1);
      native.sendmsg(a, Buffer.from('y'), 0, 1, null);
      await delay(50);
      expect(calls).to.equal(1);
      w.update(READABLE);
      await delay(50);
      expect(calls).to.equal(2);
      w.close();
      closeAll(a, b);
    });

    it('close inside the callback is safe and final', async () => {
      const [a, b] = native.socketPair();
      let calls = 0;
      const w = native.watch(b, READABLE | WRITABLE, function (this: Watcher) {
        calls++;
        this.close();
        this.close();
      });
      native.sendmsg(a, Buffer.from('x'), 0, 1, null);
      await delay(50);
      expect(calls).to.equal(1);
      w.close();
      expect(() => w.update(READABLE)).to.throw(Error, /closed/);
      closeAll(a, b);
    });

    it('close is idempotent and stops callbacks', async () => {
      const [a, b] = native.socketPair();
      let calls = 0;
      const w = native.watch(b, READABLE, () => { calls++; });
      w.close();
      w.close();
      native.sendmsg(a, Buffer.from('x'), 0, 1, null);
      await delay(50);
      expect(calls).to.equal(0);
      closeAll(a, b);
    });

    it('WRITABLE fires on a connected socket', async () => {
      const [a, b] = native.socketPair();
      const ev = await nextEvent(a, WRITABLE);
      expect(ev.status).to.equal(0);
      expect(ev.events & WRITABLE).to.equal(WRITABLE);
      closeAll(a, b);
    });

    it('DISCONNECT fires when the peer closes', async () => {
      const [a, b] = native.socketPair();
      const pending = nextEvent(a, READABLE | DISCONNECT);
      fs.closeSync(b);
      const ev = await pending;
      expect(ev.events & DISCONNECT).to.equal(DISCONNECT);
      fs.closeSync(a);
    });

    it('a watcher created with events 0 is started by update()', async () => {
      const [a, b] = native.socketPair();
      let calls = 0;
      const w = native.watch(a, 0, () => { calls++; w.update(0); });
      await delay(30);
      expect(calls).to.equal(0);
      w.update(WRITABLE);
      await delay(30);
      expect(calls).to.equal(1);
      w.close();
      closeAll(a, b);
    });

    it('rejects a second watcher on the same fd, regular files and bad events', () => {
      const [a, b] = native.socketPair();
      const w = native.watch(a, READABLE, () => undefined);
      expectNative(() => native.watch(a, READABLE, () => undefined), 'EEXIST', 'uv_poll_init');
      w.close();
      expect(() => native.watch(a, 64, () => undefined)).to.throw(RangeError);
      expect(() => (native.watch as unknown as (...x: unknown[]) => Watcher)(a, READABLE, 'f'))
        .to.throw(TypeError);
      const file = path.join(tmp, 'regular');
      fs.writeFileSync(file, 'x');
      const fd = fs.openSync(file, 'r');
      expectNative(() => native.watch(fd, READABLE, () => undefined), 'EPERM', 'uv_poll_init');
      closeAll(fd, a, b);
    });
  });

  describe('eventfd', () => {
    it('counts writes and reads them back', () => {
      const fd = native.eventfd(0, true);
      const one = Buffer.alloc(8);
      one.writeBigUInt64LE(1n);
      expect(fs.writeSync(fd, one)).to.equal(8);
      expect(fs.writeSync(fd, one)).to.equal(8);
      const out = Buffer.alloc(8);
      expect(fs.readSync(fd, out, 0, 8, null)).to.equal(8);
      expect(out.readBigUInt64LE()).to.equal(2n);
      expect(fsCode(() => fs.readSync(fd, out, 0, 8, null))).to.equal('EAGAIN');
      fs.closeSync(fd);
    });

    it('starts at initval', () => {
      const fd = native.eventfd(5, true);
      const out = Buffer.alloc(8);
      fs.readSync(fd, out, 0, 8, null);
      expect(out.readBigUInt64LE()).to.equal(5n);
      fs.closeSync(fd);
    });
  });

  describe('openTap', () => {
    it('rejects names longer than IFNAMSIZ - 1', () => {
      expectNative(() => native.openTap('x'.repeat(16)), 'ENAMETOOLONG');
    });

    it('opens a TAP device (root only)', function () {
      if (typeof process.getuid !== 'function' || process.getuid() !== 0 || !fs.existsSync('/dev/net/tun')) {
        this.skip();
      }
      let tap: native.TapDevice;
      try {
        tap = native.openTap('erntest%d');
      } catch (e) {
        // root without CAP_NET_ADMIN (containers): nothing to test.
        if (isNativeError(e) && (e.code === 'EPERM' || e.code === 'EACCES')) this.skip();
        throw e;
      }
      expect(tap.name.startsWith('erntest'), tap.name).to.equal(true);
      expect(tap.name).to.not.contain('%');
      expect(tap.fd).to.be.greaterThan(2);
      fs.closeSync(tap.fd);
    });
  });

  describe('lifetime (child process with --expose-gc)', () => {
    it('survives GC of dropped watchers and mappings, and reports callback exceptions', function () {
      this.timeout(20000);
      const mod = path.join(__dirname, '..', '..', 'lib', 'native');
      const script = `
        const n = require(${JSON.stringify(mod)});
        const fs = require('fs');
        const maps = () => fs.readFileSync('/proc/self/maps', 'utf8').split('\\n')
          .filter((l) => l.includes('/memfd:gc')).length;
        const out = {};
        const m = n.memfdCreate('gc', 1 << 20, true);
        const before = maps();
        for (let i = 0; i < 300; i++) {
          const ab = n.mmap(m, 0, 1 << 20, true);
          new Uint8Array(ab)[i] = 1;
          if (i % 2) n.munmap(ab); // the rest is left to the finalizer
        }
        out.mapsGrew = maps() - before;
        const [a, b] = n.socketPair();
        let calls = 0;
        n.watch(a, n.READABLE, function () {
          calls++;
          const buf = Buffer.alloc(8);
          n.recvmsg(a, buf, 0, 8, new Int32Array(254));
          if (calls === 2) { this.close(); throw new Error('boom'); }
        });
        process.on('uncaughtException', (e) => { out.uncaught = e.message; });
        globalThis.gc();
        n.sendmsg(b, Buffer.from('1'), 0, 1, null);
        setTimeout(() => {
          globalThis.gc();
          n.sendmsg(b, Buffer.from('2'), 0, 1, null);
          setTimeout(() => {
            globalThis.gc();
            setTimeout(() => {
              out.calls = calls;
              out.mapsAfterGc = maps() - before;
              console.log(JSON.stringify(out));
            }, 50);
          }, 50);
        }, 50);`;
      const r = spawnSync(process.execPath, ['--expose-gc', '-e', script], { encoding: 'utf8' });
      expect(r.status, r.stderr).to.equal(0);
      const out = JSON.parse(r.stdout.trim()) as Record<string, number | string>;
      expect(out.mapsGrew).to.be.at.least(100);
      expect(out.mapsAfterGc).to.equal(0);
      expect(out.calls).to.equal(2);
      expect(out.uncaught).to.equal('boom');
    });
  });
});
