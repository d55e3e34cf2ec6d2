// Framing of the byte stream by the Transport alone, over a socketpair
// (docs/vfio-user-protocol.md 1.2, 1.4, 1.5; tested as ws tests its framing): splits at every
// byte offset, several messages per write, fds attached to the right message,
// and a header over the limit refused before its body. Through the server's
// listening socket: ./framing.spec.ts.
import { expect } from 'chai';
import * as fs from 'fs';
import * as native from '../../lib/native';
import { RawHeader, Transport, TransportHandler } from '../../lib/vfio-user/transport';
import type { ProtocolError } from '../../protocol/errors';
import { Bytes, msg } from '../support/bytes';
import { openFdCount, settle, until } from '../support/fds';
import { CMD, dmaMapPayload, QEMU_VERSION_JSON, regionAccessPayload, versionPayload } from './raw-peer';

const MiB = 1 << 20;

function memfdOf(size: number): number {
  return native.memfdCreate('framing', size, true);
}

interface Got {
  header: RawHeader;
  bytes: Buffer;
  fds: number;
}

class Recorder implements TransportHandler {
  readonly got: Got[] = [];
  readonly bad: string[] = [];
  closedReason: string | null = null;
  message(h: RawHeader, payload: Buffer, fds: number[]): void {
    this.got.push({ header: { ...h }, bytes: Buffer.from(payload), fds: fds.length });
    for (const fd of fds) fs.closeSync(fd);
  }
  badHeader(_h: RawHeader, e: ProtocolError): void {
    this.bad.push(e.code);
  }
  closed(reason: string): void {
    this.closedReason = reason;
  }
}

describe('vfio-user transport: framing over a socketpair', () => {
  const write = msg(1, CMD.REGION_WRITE, 0, regionAccessPayload(0x10, 0, 8, Buffer.from('12345678')));
  const map = msg(2, CMD.DMA_MAP, 0, dmaMapPayload(3, 0, 0x100000, 0x1000));
  const version = msg(3, CMD.VERSION, 0, versionPayload(0, 0, QEMU_VERSION_JSON));
  const stream = Buffer.concat([write, map, version]);
  const mapStart = write.length;
  const mapEnd = write.length + map.length;

  let a: number;
  let b: number;
  let rec: Recorder;
  let transport: Transport;
  let fdsBefore: number;

  beforeEach(() => {
    fdsBefore = openFdCount();
    [a, b] = native.socketPair();
    rec = new Recorder();
    transport = new Transport(b, rec, { maxMessageSize: MiB + 32, maxFdsPerMessage: 16 });
    transport.start();
  });
  afterEach(async () => {
    transport.close();
    fs.closeSync(a);
    await settle(1);
    expect(openFdCount()).to.equal(fdsBefore);
  });

  function send(buf: Buffer, fds: number[] = []): void {
    expect(native.sendmsg(a, buf, 0, buf.length, fds.length ? fds : null)).to.equal(buf.length);
  }

  /** Wait until the transport has read `bytes` bytes in all. */
  async function readUpTo(bytes: number): Promise<void> {
    await until(() => transport.stats.bytesIn >= bytes, `${bytes} bytes read`);
  }

  function expectTheThree(got: Got[], mapFds: number): void {
    expect(got.map((g) => [g.header.id, g.header.command, g.header.size, g.fds])).to.deep.equal([
      [1, CMD.REGION_WRITE, write.length, 0],
      [2, CMD.DMA_MAP, map.length, mapFds],
      [3, CMD.VERSION, version.length, 0],
    ]);
    expect(got[0]!.bytes).to.deep.equal(write.subarray(16));
    expect(got[1]!.bytes).to.deep.equal(map.subarray(16));
    expect(got[2]!.bytes).to.deep.equal(version.subarray(16));
  }

  it('decodes three messages split at every byte offset once and identically; the fd stays with DMA_MAP', async () => {
    const fd = memfdOf(4096);
    try {
      let total = 0;
      for (let k = 1; k < stream.length; k++) {
        // Like QEMU, each message goes in its own sendmsg (its fd on the one with its header), plus
        // one extra cut at k; inside DMA_MAP the fd goes either on its header or on the later part.
        const cuts = [...new Set([0, k, mapStart, mapEnd, stream.length])].sort((x, y) => x - y);
        for (const fdOnHeader of k > mapStart && k < mapEnd ? [true, false] : [true]) {
          rec.got.length = 0;
          const fdAt = fdOnHeader ? mapStart : k;
          for (let i = 0; i + 1 < cuts.length; i++) {
            send(stream.subarray(cuts[i]!, cuts[i + 1]!), cuts[i] === fdAt ? [fd] : []);
            if (cuts[i + 1] === k) {
              // Let the event loop turn between the first k bytes and the rest.
              await readUpTo(total + k);
              expect(rec.got.length, `k=${k}: only complete messages`).to.equal(
                k >= mapEnd ? 2 : k >= mapStart ? 1 : 0,
              );
            }
          }
          total += stream.length;
          await readUpTo(total);
          expectTheThree(rec.got, 1);
        }
      }
    } finally {
      fs.closeSync(fd);
    }
    expect(rec.bad).to.deep.equal([]);
  });

  it("decodes the same stream sent one byte per write, with the fd on a byte in the middle of DMA_MAP's body", async () => {
    const fd = memfdOf(4096);
    try {
      for (let i = 0; i < stream.length; i++) {
        send(stream.subarray(i, i + 1), i === mapStart + 30 ? [fd] : []);
        if (i % 7 === 0) await readUpTo(i + 1);
      }
      await readUpTo(stream.length);
      expectTheThree(rec.got, 1);
    } finally {
      fs.closeSync(fd);
    }
  });

  it('decodes the three messages from one write', async () => {
    send(stream);
    await readUpTo(stream.length);
    expectTheThree(rec.got, 0);
  });

  it('gives the fds of a write holding the tail of one message and all of the next to the next one', async () => {
    const fd = memfdOf(4096);
    try {
      // Write 1: REGION_WRITE minus 5 bytes. Write 2 (with the fd): those 5 bytes + all of DMA_MAP.
      send(stream.subarray(0, mapStart - 5));
      await readUpTo(mapStart - 5);
      send(stream.subarray(mapStart - 5, mapEnd), [fd]);
      send(stream.subarray(mapEnd));
      await readUpTo(stream.length);
      expectTheThree(rec.got, 1);
    } finally {
      fs.closeSync(fd);
    }
  });

  it('refuses msg_size above the limit as soon as the header is in, before any body', async () => {
    send(
      new Bytes()
        .u16(1)
        .u16(CMD.REGION_READ)
        .u32(64 << 20)
        .u32(0)
        .u32(0)
        .build(),
    );
    await until(() => rec.closedReason !== null, 'close');
    expect(rec.bad).to.deep.equal(['MESSAGE_TOO_LARGE']);
    expect(rec.got).to.deep.equal([]);
  });
});
