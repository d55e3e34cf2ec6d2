// The native addon: fd watchers, eventfds, openTap, and the lifetime of
// watchers in a child process run with --expose-gc.

import { expect } from 'chai';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import * as native from '../../lib/native';
import { DISCONNECT, isNativeError, READABLE, Watcher, WRITABLE } from '../../lib/native';
import { closeAll, delay, expectNative, fsCode, nextEvent, useNativeSuite } from './native-helpers';
import { skipBecause } from '../support/skip';

describe('native addon: watch, eventfd, TAP, lifetime', () => {
  const scratch = useNativeSuite();

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
      const w = native.watch(b, READABLE, () => {
        calls++;
      });
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
      const w = native.watch(a, 0, () => {
        calls++;
        w.update(0);
      });
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
      expect(() => (native.watch as unknown as (...x: unknown[]) => Watcher)(a, READABLE, 'f')).to.throw(TypeError);
      const file = path.join(scratch.dir, 'regular');
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
        skipBecause(this, 'needs root and /dev/net/tun');
      }
      let tap: native.TapDevice;
      try {
        tap = native.openTap('erntest%d');
      } catch (e) {
        // root without CAP_NET_ADMIN (containers): nothing to test.
        if (isNativeError(e) && (e.code === 'EPERM' || e.code === 'EACCES'))
          skipBecause(this, `root without CAP_NET_ADMIN (${e.code})`);
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
