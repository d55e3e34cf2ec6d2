// The native addon: socket pairs with sendmsg/recvmsg (fd passing, limits)
// and listen/connect/accept on unix sockets.

import { expect } from 'chai';
import * as fs from 'fs';
import * as path from 'path';
import * as native from '../../lib/native';
import { FDS_OUT_LENGTH, MAX_FDS, READABLE } from '../../lib/native';
import { closeAll, expectNative, nextEvent, useNativeSuite } from './native-helpers';

describe('native addon: sockets and fd passing', () => {
  const scratch = useNativeSuite();

  describe('socketPair + sendmsg/recvmsg', () => {
    const fdsOut = new Int32Array(FDS_OUT_LENGTH);

    function tempFiles(n: number): number[] {
      const fds: number[] = [];
      for (let i = 0; i < n; i++) {
        const file = path.join(scratch.dir, `f${i}`);
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
      for (
        let n = native.recvmsg(b, buf, 0, buf.length, fdsOut);
        n > 0;
        n = native.recvmsg(b, buf, 0, buf.length, fdsOut)
      )
        drained += n;
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
      expect(() => native.recvmsg(b, buf, 0, 8, new Uint32Array(FDS_OUT_LENGTH) as unknown as Int32Array)).to.throw(
        TypeError,
      );
      expect(() => native.recvmsg(b, buf, 4, 5, fdsOut)).to.throw(RangeError);
      expect(() => native.recvmsg(b, buf, 9, 0, fdsOut)).to.throw(RangeError);
      expect(() => native.recvmsg(b, buf, 0, 0, fdsOut)).to.throw(RangeError);
      expect(() => native.sendmsg(a, buf, 0, 9, null)).to.throw(RangeError);
      expect(() => native.sendmsg(a, buf, 0, 0, [a])).to.throw(RangeError);
      expect(() => native.sendmsg(a, buf, 0, 1, [-1])).to.throw(RangeError);
      expect(() => (native.sendmsg as unknown as (...x: unknown[]) => number)(a, 'str', 0, 1, null)).to.throw(
        TypeError,
      );
      expect(() => (native.sendmsg as unknown as (...x: unknown[]) => number)(a, buf, 0, 1, 5)).to.throw(TypeError);
      expect(native.sendmsg(a, buf, 0, 0, [])).to.equal(0);
      closeAll(a, b);
    });
  });

  describe('dupFd', () => {
    it('gives a second, close-on-exec descriptor of the same socket: bytes written through it arrive after the first is closed', () => {
      const [a, b] = native.socketPair();
      const d = native.dupFd(a);
      expect(d).to.not.equal(a);
      expect(fs.readlinkSync(`/proc/self/fd/${d}`)).to.equal(fs.readlinkSync(`/proc/self/fd/${a}`));
      const flags = parseInt(/^flags:\s+([0-7]+)/m.exec(fs.readFileSync(`/proc/self/fdinfo/${d}`, 'utf8'))![1]!, 8);
      expect(flags & 0o2000000, 'O_CLOEXEC').to.equal(0o2000000);
      fs.closeSync(a);
      expect(native.sendmsg(d, Buffer.from('still open'), 0, 10, null)).to.equal(10);
      const got = Buffer.alloc(16);
      const fdsOut = new Int32Array(FDS_OUT_LENGTH);
      expect(native.recvmsg(b, got, 0, 16, fdsOut)).to.equal(10);
      expect(got.toString('utf8', 0, 10)).to.equal('still open');
      closeAll(d, b);
    });

    it('fails with EBADF for a closed descriptor and refuses a negative one', () => {
      const [a, b] = native.socketPair();
      closeAll(a, b);
      expectNative(() => native.dupFd(a), 'EBADF', 'fcntl');
      expect(() => native.dupFd(-1)).to.throw(RangeError);
    });
  });

  describe('listen/connect/accept', () => {
    it('accepts a connection and sees its data', async () => {
      const sock = path.join(scratch.dir, 'srv.sock');
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
      const long = path.join(scratch.dir, 'x'.repeat(200));
      expectNative(() => native.listen(long, 1), 'ENAMETOOLONG', 'bind');
      expectNative(() => native.connect(long), 'ENAMETOOLONG', 'connect');
    });

    it('fails with EADDRINUSE when the path exists', () => {
      const sock = path.join(scratch.dir, 'busy.sock');
      const lfd = native.listen(sock, 1);
      expectNative(() => native.listen(sock, 1), 'EADDRINUSE', 'bind');
      fs.closeSync(lfd);
      fs.unlinkSync(sock);
    });

    it('connect to a missing path gives ENOENT', () => {
      expectNative(() => native.connect(path.join(scratch.dir, 'missing.sock')), 'ENOENT', 'connect');
    });

    it('rejects empty paths and paths with NUL', () => {
      expect(() => native.listen('', 1)).to.throw(TypeError);
      expect(() => native.connect('a\0b')).to.throw(TypeError);
    });
  });
});
