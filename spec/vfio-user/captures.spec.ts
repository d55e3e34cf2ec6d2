// Captures: reader and writer against the recorded fixtures, the text listing,
// replay against the idio16 example, comparison of two recordings, and the
// recording proxy between our client and our server. The ernic-vfu command
// line is spec/tools/ernic-vfu.spec.ts.
import { expect } from 'chai';
import * as fs from 'fs';
import * as path from 'path';
import {
  CaptureFormatError,
  CaptureWriter,
  parseCapture,
  readCapture,
  CapturedMessage,
} from '../../lib/vfio-user/pcapng';
import { formatCaptureLine } from '../../lib/vfio-user/capture-text';
import { replay, REPLAY_RULES } from '../../lib/vfio-user/replay';
import { compareCaptures } from '../../lib/vfio-user/compare';
import { Recorder } from '../../lib/vfio-user/recorder';
import { VfioUserServer } from '../../lib/vfio-user/server';
import { GuestRam, VfioUserClient } from '../../lib/vfio-user/client';
import { createIdio16, Idio16Registers } from '../../lib/examples/idio16';
import { PciFunction } from '../../lib/pci';
import * as native from '../../lib/native';
import { ScratchDevice } from '../support/scratch-device';
import { openFdCount, settle, tempSocketPath } from '../support/fds';

const ROOT = path.join(__dirname, '..', '..', '..');
const FIX = path.join(ROOT, 'fixtures', 'vfio-user');
const REFERENCE = ['qemu-boot-lvu-gpio', 'qemu-boot-lvu-sample', 'client-lvu-sample'];
/** The protocol-level commands of the libvfio-user sample captures (the rest is device specific). */
const PROTOCOL_ONLY = ['VERSION', 'DMA_MAP', 'DMA_UNMAP', 'DEVICE_SET_IRQS', 'DEVICE_RESET', 'errors'];

function epbs(d: Buffer): Buffer[] {
  const out: Buffer[] = [];
  for (let off = 0; off < d.length;) {
    const t = d.readUInt32LE(off);
    const l = d.readUInt32LE(off + 4);
    if (t === 6) out.push(d.subarray(off, off + l));
    off += l;
  }
  return out;
}

async function withServer<T>(
  device: PciFunction | ScratchDevice,
  fn: (socket: string, server: VfioUserServer) => Promise<T>,
): Promise<T> {
  const socket = tempSocketPath('cap');
  const server = new VfioUserServer({ socketPath: socket, device });
  await server.listen();
  try {
    return await fn(socket, server);
  } finally {
    server.close();
  }
}

describe('captures', () => {
  describe('pcapng writer', () => {
    for (const name of REFERENCE) {
      it(`rewrites every packet of ${name} byte for byte (framing, checksums, comments)`, () => {
        const src = fs.readFileSync(path.join(FIX, `${name}.pcapng`));
        const msgs = parseCapture(src);
        const out = `/tmp/ernic-rewrite-${process.pid}.pcapng`;
        const w = new CaptureWriter(out, 'test');
        for (const m of msgs) w.writeMessage(m.comment, m.bytes, m.timestampUs);
        w.close();
        const a = epbs(src);
        const b = epbs(fs.readFileSync(out));
        fs.unlinkSync(out);
        expect(b.length).to.equal(a.length);
        for (let i = 0; i < a.length; i++) expect(b[i]!.equals(a[i]!), `packet ${i + 1}`).to.equal(true);
      });
    }

    it('cuts a message over 65000 bytes into segments and the reader joins them', () => {
      const out = `/tmp/ernic-seg-${process.pid}.pcapng`;
      const w = new CaptureWriter(out, 'test');
      const big = Buffer.alloc(150000, 7);
      big.writeUInt32LE(big.length, 4);
      w.writeMessage(
        {
          dir: 's2c',
          conn: 0,
          id: 1,
          cmd: 9,
          name: 'REGION_READ',
          type: 'reply',
          size: big.length,
          flags: 1,
          error: 0,
          fds: [{ kind: 'eventfd', size: null }],
        },
        big,
        1,
      );
      w.close();
      const data = fs.readFileSync(out);
      fs.unlinkSync(out);
      expect(epbs(data)).to.have.length(3);
      const back = parseCapture(data);
      expect(back).to.have.length(1);
      expect(back[0]!.bytes.equals(big)).to.equal(true);
      expect(back[0]!.comment.nseg).to.equal(3);
      expect(back[0]!.comment.fds).to.have.length(1);
    });

    it('refuses a file that is not pcapng', () => {
      expect(() => parseCapture(Buffer.from('not a capture at all'))).to.throw(/pcapng/);
    });

    /** A capture of one message whose comment is `comment` as is (the writer does not check it). */
    function withComment(comment: Record<string, unknown>): Buffer {
      const out = `/tmp/ernic-badcomment-${process.pid}.pcapng`;
      const w = new CaptureWriter(out, 'test');
      const good = parseCapture(fs.readFileSync(path.join(FIX, 'client-lvu-sample.pcapng')))[2]!;
      w.writeMessage(
        { ...good.comment, ...comment } as unknown as CapturedMessage['comment'],
        good.bytes,
        good.timestampUs,
      );
      w.close();
      const data = fs.readFileSync(out);
      fs.unlinkSync(out);
      return data;
    }

    for (const [comment, why] of [
      [{ name: 'DMA\u001b[2J' }, /packet 1: comment name: Invalid/],
      [{ id: 70000 }, /packet 1: comment id: Number must be less than or equal to 65535/],
      [{ cmd: 1.5 }, /packet 1: comment cmd: Expected integer/],
      [{ dir: 'up' }, /packet 1: comment dir: Invalid enum value/],
      [{ size: -1 }, /packet 1: comment size: Number must be greater than or equal to 0/],
      [{ flags: '0' }, /packet 1: comment flags: Expected number, received string/],
      [{ fds: 'memfd' }, /packet 1: comment fds: Expected array/],
      [{ fds: [{ kind: 'pipe' }] }, /packet 1: comment fds.0.kind: Invalid enum value/],
      [
        { fds: [{ kind: 'memfd', size: 1, name: 'x'.repeat(5000) }] },
        /packet 1: comment fds.0.name: String must contain at most 4096/,
      ],
      [{ seg: 0, nseg: 0 }, /packet 1: comment nseg: Number must be greater than or equal to 1/],
      [{ incomplete: 'yes' }, /packet 1: comment incomplete: Expected boolean/],
    ] as const) {
      it(`refuses a packet comment with ${JSON.stringify(comment).slice(0, 60)}`, () => {
        expect(() => parseCapture(withComment(comment))).to.throw(CaptureFormatError, why);
      });
    }

    it('refuses a packet comment that claims more bytes than its block has', () => {
      const data = withComment({});
      // The first option of the packet block: its length, after the 54 bytes of synthetic headers and the message.
      const epb = epbs(data)[0]!;
      const start = data.indexOf(epb);
      const caplen = epb.readUInt32LE(8 + 12);
      const opt = start + 8 + 20 + caplen + ((4 - (caplen % 4)) % 4);
      expect(data.readUInt16LE(opt)).to.equal(1);
      data.writeUInt16LE(data.readUInt16LE(opt + 2) + 64, opt + 2);
      expect(() => parseCapture(data)).to.throw(CaptureFormatError, /packet 1: option 1 overruns its block/);
    });
  });

  describe('text listing', () => {
    for (const name of REFERENCE) {
      it(`matches the recorded sidecar ${name}.txt line for line (time column aside)`, () => {
        const msgs = readCapture(path.join(FIX, `${name}.pcapng`));
        const want = fs
          .readFileSync(path.join(FIX, `${name}.txt`), 'utf8')
          .split('\n')
          .filter((l) => l && !l.startsWith('#'));
        expect(want).to.have.length(msgs.length);
        const strip = (s: string): string => (s.slice(0, 6) + s.slice(17)).trimEnd();
        msgs.forEach((m, i) =>
          expect(strip(formatCaptureLine(m.frame, 0, m.comment, m.bytes))).to.equal(strip(want[i]!)),
        );
      });
    }
  });

  describe('replay', () => {
    it('replays QEMU booting the libvfio-user gpio sample against the idio16 example: only the documented rules differ', async () => {
      const r = await withServer(createIdio16(), (s) =>
        replay(readCapture(path.join(FIX, 'qemu-boot-lvu-gpio.pcapng')), s),
      );
      expect(r.differences).to.deep.equal([]);
      expect(r.compared).to.equal(234);
      expect(r.identical).to.equal(232);
      expect(r.allowed.map((a) => a.rule).sort()).to.deep.equal([
        'unimplemented-bar-registers',
        'version-capabilities',
      ]);
    });

    for (const name of ['qemu-boot-lvu-sample', 'client-lvu-sample']) {
      it(`replays the protocol-level part of ${name} against the idio16 example`, async () => {
        const r = await withServer(createIdio16(), (s) =>
          replay(readCapture(path.join(FIX, `${name}.pcapng`)), s, { only: PROTOCOL_ONLY }),
        );
        expect(r.differences).to.deep.equal([]);
        expect(r.compared).to.be.greaterThan(20);
        expect(r.allowed.map((a) => a.rule)).to.deep.equal(['version-capabilities']);
      });
    }

    it('reports a difference when the device answers differently', async () => {
      const wrong = new PciFunction({
        vendorId: 0x494f,
        deviceId: 0x0dc9,
        subsystemVendorId: 0,
        subsystemId: 0,
        classCode: 0,
        bars: [{ index: 2, size: 0x100, kind: 'io', handler: new Idio16Registers() }],
        intx: true,
        powerManagement: false,
      });
      const r = await withServer(wrong, (s) => replay(readCapture(path.join(FIX, 'qemu-boot-lvu-gpio.pcapng')), s));
      expect(r.differences.length).to.be.greaterThan(0);
      expect(r.differences[0]!.command).to.equal('REGION_READ');
      expect(r.differences[0]!.what).to.match(/payload byte 18: recorded c80d/);
      // The same, field by field, pointing at the recorded reply.
      const d = r.differences[0]!;
      const msgs = readCapture(path.join(FIX, 'qemu-boot-lvu-gpio.pcapng'));
      const rec = msgs.find((m) => m.frame === d.frame)!;
      expect(msgs.filter((m) => m.comment.conn === 0)[d.index!]).to.equal(rec);
      expect(rec.comment.type).to.equal('reply');
      const payload = d.fields.find((f) => f.field === 'payload')!;
      expect(payload.offset).to.equal(18);
      expect(payload.expected).to.equal(rec.bytes.toString('hex', 16 + 18, Math.min(rec.bytes.length, 16 + 18 + 8)));
      expect(payload.actual).to.not.equal(payload.expected);
    });

    it('documents every rule', () => {
      for (const rule of REPLAY_RULES) expect(rule.description.length).to.be.greaterThan(40);
    });
  });

  describe('compare', () => {
    it('our server recorded under QEMU with the gpio driver matches the libvfio-user recording', () => {
      const r = compareCaptures(
        readCapture(path.join(FIX, 'qemu-boot-lvu-gpio.pcapng')),
        readCapture(path.join(FIX, 'qemu-boot-ernic-idio16.pcapng')),
      );
      expect(r.differences).to.deep.equal([]);
      expect(r.compared).to.equal(468);
      expect(r.allowed.map((a) => a.rule).sort()).to.deep.equal([
        'unimplemented-bar-registers',
        'version-capabilities',
      ]);
    });

    it('finds a changed reply', () => {
      const ref = readCapture(path.join(FIX, 'qemu-boot-lvu-gpio.pcapng'));
      const changed: CapturedMessage[] = ref.map((m) => ({ ...m, bytes: Buffer.from(m.bytes) }));
      const last = changed[changed.length - 1]!;
      last.bytes[last.bytes.length - 1] ^= 0xff;
      const r = compareCaptures(ref, changed);
      expect(r.differences).to.have.length(1);
      expect(r.differences[0]!.command).to.equal('REGION_READ');
    });
  });

  describe('recording proxy', () => {
    it('forwards bytes and fds exactly and records every message with its fds', async () => {
      const before = openFdCount();
      const device = new ScratchDevice();
      await withServer(device, async (serverSock) => {
        const listen = tempSocketPath('rec');
        const out = `/tmp/ernic-rec-${process.pid}.pcapng`;
        const rec = new Recorder({ listenPath: listen, connectPath: serverSock, outPath: out, once: true });
        await rec.listen();
        const done = rec.finished();
        const ram = new GuestRam(1 << 20, 'test-ram');
        const c = await VfioUserClient.connect(listen);
        await c.dmaMap(0x10000, 1 << 20, ram.fd);
        const efd = native.eventfd(0, true);
        await c.setIrqEventfds(2, 0, [efd]);
        await c.regionWrite(0, 8, Buffer.from('abcd'));
        expect((await c.regionRead(0, 8, 4)).toString()).to.equal('abcd');
        // Through the proxy the server got the real memfd and eventfd.
        ram.buffer.write('via-proxy', 0x20);
        const dst = Buffer.alloc(9);
        expect(device.ctx!.memory.read(0x10020, dst)).to.equal(0);
        expect(dst.toString()).to.equal('via-proxy');
        expect(device.ctx!.signalIrq(2, 0)).to.equal(true);
        c.close();
        await done;
        ram.close();
        fs.closeSync(efd);
        const msgs = readCapture(out);
        expect(msgs.map((m) => `${m.comment.dir} ${m.comment.name}`)).to.deep.equal([
          'c2s VERSION',
          's2c VERSION',
          'c2s DMA_MAP',
          's2c DMA_MAP',
          'c2s DEVICE_SET_IRQS',
          's2c DEVICE_SET_IRQS',
          'c2s REGION_WRITE',
          's2c REGION_WRITE',
          'c2s REGION_READ',
          's2c REGION_READ',
        ]);
        expect(msgs[2]!.comment.fds).to.deep.equal([{ kind: 'memfd', size: 1 << 20, name: 'test-ram' }]);
        expect(msgs[4]!.comment.fds).to.deep.equal([{ kind: 'eventfd', size: null }]);
        const txt = fs.readFileSync(out.replace(/\.pcapng$/, '.txt'), 'utf8');
        expect(txt).to.match(/DMA_MAP +cmd +size=48 flags=0x0 err=0 fds=memfd:1048576 addr=0x10000 size=0x100000/);
        fs.unlinkSync(out);
        fs.unlinkSync(out.replace(/\.pcapng$/, '.txt'));
      });
      await settle();
      expect(openFdCount()).to.equal(before);
    });
  });
});
