// The S3 store on the device (`rdmaBackend: new S3Backend(...)`), through a real
// vfio-user socket with memfd guest memory, driven by the guest model as
// ionic.ko and libionic drive it: ARP and ping for the store's address and
// an HTTP PUT/GET over TCP frames on the guest's own TX and RX rings; the
// token path against MRs the guest registered (scattered pages), GET writing
// into one and PUT reading out of another, byte for byte; and the refusals
// (key 0, an MR without the access, a stale tag, a destroyed MR, a range past
// the MR, a 2^64 address) with guest memory unchanged. The store claims its
// frames before any endpoint added later (the P4 segment's place), and the
// guest's connections end when it detaches. Frames and tokens are built by
// hand (spec/support/s3-frames.ts, s3-guest-tcp.ts), not with the code under test; SigV4 is on,
// every request signed by the AWS SDK's signer (spec/support/s3-sign.ts).

import { expect } from 'chai';
import { createHash, randomBytes } from 'crypto';
import * as http from 'http';
import type { AddressInfo } from 'net';
import type { FrameEndpoint } from '../../../lib/net/frame-endpoint';
import { DeviceCounter } from '../../../lib/rdma/counters';
import { S3_DEFAULTS, S3Options } from '../../../lib/targets/s3/options';
import { ObjectStore } from '../../../lib/targets/s3/store';
import { until } from '../../support/fds';
import { signHeaders } from '../../support/s3-sign';
import type { IonicGuest } from '../../support/ionic/guest';
import { RdmaGuest } from '../../support/ionic/rdma-guest';
import { idBody } from '../../support/ionic/rdma-cmds';
import { AOp, MrF } from '../../support/ionic/rdma-regs';
import { GuestMr, Snapshot, VerbsGuest } from '../../support/ionic/rdma-verbs';
import { Prng, Rig } from '../../support/ionic/rig';
import { arpRequest, decode, echoRequest, GUEST_IP, STORE_IP, STORE_MAC } from '../../support/s3-frames';
import { GuestTcp } from '../../support/s3-guest-tcp';
import { S3Backend } from '../../../lib/backends/s3';

const MR_BYTES = 64 * 1024;
const RW = MrF.LOCAL_WRITE | MrF.REMOTE_WRITE | MrF.REMOTE_READ;

/** The 44-byte token laid out by hand (docs/s3.md, "The token path"): transport RC, QPN, GID, rkey, addr, len, port, LID, little-endian. */
function tokenHex(rkey: number, addr: bigint, len: bigint): string {
  const b = Buffer.alloc(44);
  b[0] = 1;
  b.writeUInt32LE(0x12, 1);
  b.writeUInt32LE(rkey >>> 0, 21);
  b.writeBigUInt64LE(addr, 25);
  b.writeBigUInt64LE(len, 33);
  b[41] = 1;
  return b.toString('hex');
}

interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** SigV4 is on (the host listener's token path takes only signed tokens): every request here is signed, its token header included. */
const CREDS = { accessKeyId: 'DEVICEKEY', secretAccessKey: 'device-spec-secret' };

/** A raw HTTP/1.1 request for the guest's wire, signed. */
async function signedText(method: string, path: string, body?: Buffer): Promise<Buffer> {
  const h = await signHeaders(
    {
      method,
      host: '192.168.200.1',
      path,
      headers: { 'content-length': String(body?.length ?? 0), connection: 'close' },
      ...(body ? { body } : {}),
    },
    CREDS,
  );
  const head = `${method} ${path} HTTP/1.1\r\n${Object.entries(h)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')}\r\n`;
  return Buffer.concat([Buffer.from(head), body ?? Buffer.alloc(0)]);
}

async function request(
  port: number,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: Buffer,
): Promise<Reply> {
  const signed = await signHeaders(
    { method, host: `127.0.0.1:${port}`, path, headers, ...(body ? { body } : {}) },
    CREDS,
  );
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, headers: signed }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('s3 store on the device: frames on the guest rings, tokens through its MR table', function () {
  this.timeout(60_000);
  let rig: Rig;
  let g: IonicGuest;
  let v: VerbsGuest;
  let port: number;
  let src: GuestMr;
  let dst: GuestMr;
  let readOnly: GuestMr;
  /** What an endpoint added after the store saw (as the P4 segment would). */
  const later: Buffer[] = [];
  /** Guest TCP clients fed by the RX pump. */
  const clients: GuestTcp[] = [];
  let pumping = false;
  let pump: Promise<void> = Promise.resolve();

  /** From now on, everything the device sends the guest goes to the TCP clients. */
  function startPump(): void {
    if (pumping) return;
    pumping = true;
    pump = (async () => {
      while (pumping) {
        const f = await g.waitRxFrame({ timeoutMs: 200 }).catch(() => null);
        if (f) for (const c of clients) c.onFrame(f.data);
      }
    })();
  }

  before(async () => {
    const options: S3Options = { ...S3_DEFAULTS, listen: { host: '127.0.0.1', port: 0 } };
    const store = await ObjectStore.open(options.bucket, {
      size: options.size,
      objects: options.objects,
      maxpart: options.maxpart,
    });
    rig = await Rig.start({ rdmaBackend: new S3Backend({ options, store, credentials: [CREDS] }) });
    g = await rig.probed(1, { ramSize: 64 << 20 });
    await g.open(1, { ringLog2: 9 });
    const r = await RdmaGuest.boot(g, { cpus: 8 });
    v = VerbsGuest.attach(g, r, 128);
    await (rig.device.backend as S3Backend).endpoint!.listenHost(options);
    port = ((rig.device.backend as S3Backend).endpoint!.hostAddress as AddressInfo).port;
    const later1: FrameEndpoint = {
      claimTx(f) {
        later.push(Buffer.from(f));
        return false;
      },
    };
    rig.device.addEndpoint(later1);
    // Scattered pages in reverse order, so a copy that assumed contiguity would land wrong.
    src = await v.createMr({
      key: (40 << 8) | 7,
      pages: MR_BYTES / 4096,
      flags: RW,
      offset: 100,
      length: MR_BYTES - 100,
    });
    dst = await v.createMr({ key: (41 << 8) | 9, pages: MR_BYTES / 4096, flags: RW, offset: 0, length: MR_BYTES });
    readOnly = await v.createMr({ key: (42 << 8) | 1, pages: 2, flags: MrF.LOCAL_WRITE | MrF.REMOTE_READ });
  });

  after(async () => {
    pumping = false;
    await pump;
    await (rig.device.backend as S3Backend).endpoint?.close();
    await rig.close();
  });

  it("answers ARP for its address with 02:53:<ipv4> and ping, on the guest's own rings", async () => {
    g.takeRx();
    await g.sendFrame(arpRequest(STORE_IP));
    const arp = decode((await g.waitRxFrame()).data);
    expect(arp.type).to.equal(0x0806);
    expect(arp.src.toString('hex')).to.equal('0253c0a8c801');
    expect(STORE_MAC.toString('hex')).to.equal('0253c0a8c801');
    await g.sendFrame(echoRequest(7, 1, Buffer.from('ernic s3 ping')));
    const echo = (await g.waitRxFrame()).data;
    expect(decode(echo).proto).to.equal(1);
    expect(echo.subarray(echo.length - 13).toString()).to.equal('ernic s3 ping');
    expect((rig.device.backend as S3Backend).endpoint!.stack.counts).to.deep.include({ arpReplies: 1, echoReplies: 1 });
    expect(later, 'frames the store claimed never reach a later endpoint').to.have.length(0);
    // A frame for someone else passes on to the next endpoint.
    await g.sendFrame(arpRequest(Buffer.from([192, 168, 200, 77])));
    expect(later).to.have.length(1);
  });

  it('PUT 100 KB and GET it back over TCP frames through the device (past the 64 KiB window)', async () => {
    startPump();
    const data = randomBytes(100_000);
    const exchange = async (sport: number, req: Buffer): Promise<string> => {
      const c = new GuestTcp(
        (f) => {
          void g.sendFrame(f);
          return true;
        },
        sport,
        9000,
      );
      clients.push(c);
      c.connect();
      await c.write(req);
      await c.until(() => c.finReceived, 30_000);
      c.close();
      return c.text();
    };
    const put = await exchange(40001, await signedText('PUT', '/ernic/wire/obj', data));
    expect(put).to.match(/^HTTP\/1.1 200 OK/);
    expect(put).to.contain(`ETag: "${createHash('md5').update(data).digest('hex')}"`);
    const get = await exchange(40002, await signedText('GET', '/ernic/wire/obj'));
    const raw = Buffer.from(get, 'latin1');
    expect(raw.subarray(raw.indexOf('\r\n\r\n') + 4).equals(data)).to.equal(true);
    expect(later.filter((f) => f.length >= 34 && f.subarray(30, 34).equals(STORE_IP))).to.have.length(0);
    expect(GUEST_IP.length).to.equal(4);
  });

  it('PUT by token reads the object out of a guest MR; GET by token writes one into another, byte for byte', async () => {
    const pattern = randomBytes(src.length);
    src.write(0, pattern);
    const before = rig.device.rdma!.counters.get(DeviceCounter.rdma_read_bytes);
    const put = await request(port, 'PUT', '/ernic/tok/a', {
      'x-amz-rdma-token': tokenHex(src.key, BigInt(src.va), BigInt(src.length)),
    });
    expect(put.status).to.equal(200);
    expect(put.headers['x-amz-rdma-bytes']).to.equal(String(src.length));
    expect(String(put.headers['x-amz-rdma-reply'])).to.match(/^200:[0-9a-f]{88}$/);
    expect((rig.device.backend as S3Backend).endpoint!.store.get('tok/a')!.data.equals(pattern)).to.equal(true);
    expect(rig.device.rdma!.counters.get(DeviceCounter.rdma_read_bytes) - before).to.equal(src.length);

    const obj = randomBytes(40_000);
    expect((await request(port, 'PUT', '/ernic/tok/b', {}, obj)).status).to.equal(200);
    const snap = new Snapshot(g, dst.all());
    const get = await request(port, 'GET', '/ernic/tok/b', {
      'x-amz-rdma-token': tokenHex(dst.key, BigInt(dst.va + 1000), BigInt(MR_BYTES - 1000)),
    });
    expect([get.status, get.body.length, get.headers['x-amz-rdma-bytes']]).to.deep.equal([200, 0, '40000']);
    expect(dst.read(1000, obj.length).equals(obj)).to.equal(true);
    expect(snap.changedOutside(dst.ranges(1000, obj.length)), 'bytes outside the object').to.deep.equal([]);
    // The <token>:<addr>:<len> form with a ranged GET: 4 KiB of tok/a into dst at offset 8.
    const hdr = `${tokenHex(dst.key, BigInt(dst.va), BigInt(dst.length))}:${(dst.va + 8).toString(16)}:1000`;
    const ranged = await request(port, 'GET', '/ernic/tok/a', { 'x-amz-rdma-token': hdr, Range: 'bytes=5000-' });
    expect([ranged.status, ranged.headers['x-amz-rdma-bytes']]).to.deep.equal([206, '4096']);
    expect(dst.read(8, 4096).equals(pattern.subarray(5000, 5000 + 4096))).to.equal(true);
  });

  it('refuses key 0, a missing access right, a stale tag, a range past the MR and a huge address; guest memory unchanged', async () => {
    await request(port, 'PUT', '/ernic/tok/c', {}, randomBytes(8192));
    const snap = new Snapshot(g, [...dst.all(), ...readOnly.all()]);
    const cases: [string, string, number][] = [
      ['key 0', tokenHex(0, BigInt(dst.va), 8192n), 403],
      ['no REMOTE_WRITE', tokenHex(readOnly.key, BigInt(readOnly.va), 8192n), 403],
      ['stale tag', tokenHex((dst.key & ~0xff) | ((dst.key + 1) & 0xff), BigInt(dst.va), 8192n), 403],
      ['unknown key', tokenHex((77 << 8) | 1, BigInt(dst.va), 8192n), 403],
      ['past the MR end', tokenHex(dst.key, BigInt(dst.va + MR_BYTES - 100), 8192n), 403],
      ['below the MR start', tokenHex(dst.key, BigInt(dst.va - 4096), 8192n), 403],
      ['address past 2^53', tokenHex(dst.key, 0xffff_ffff_ffff_f000n, 8192n), 403],
      ['not a token', 'ab'.repeat(43), 400],
    ];
    for (const [what, tok, status] of cases) {
      const r = await request(port, 'GET', '/ernic/tok/c', { 'x-amz-rdma-token': tok });
      expect([r.status, r.headers['x-amz-rdma-reply']], what).to.deep.equal([status, String(status)]);
    }
    // A PUT from an MR without REMOTE_READ, and a PUT past the MR: nothing stored.
    const noRead = await v.createMr({ key: (43 << 8) | 1, pages: 1, flags: MrF.LOCAL_WRITE | MrF.REMOTE_WRITE });
    expect(
      (
        await request(port, 'PUT', '/ernic/tok/d', {
          'x-amz-rdma-token': tokenHex(noRead.key, BigInt(noRead.va), 4096n),
        })
      ).status,
    ).to.equal(403);
    expect(
      (
        await request(port, 'PUT', '/ernic/tok/d', {
          'x-amz-rdma-token': tokenHex(src.key, BigInt(src.va), BigInt(src.length + 1)),
        })
      ).status,
    ).to.equal(403);
    expect((rig.device.backend as S3Backend).endpoint!.store.get('tok/d')).to.equal(undefined);
    // A destroyed MR's key is refused too.
    expect((await v.admin(AOp.DESTROY_MR, idBody(readOnly.key))).status).to.equal(0);
    const gone = await request(port, 'PUT', '/ernic/tok/d', {
      'x-amz-rdma-token': tokenHex(readOnly.key, BigInt(readOnly.va), 4096n),
    });
    expect(gone.status).to.equal(403);
    expect(snap.changed()).to.deep.equal([]);
    expect((rig.device.backend as S3Backend).endpoint!.rdma!.counts.refused).to.be.at.least(cases.length + 2);
  });

  it('300 seeded random tokens: a GET lands only inside an MR that grants remote write, exactly where named; refused ones touch nothing', async () => {
    const rng = new Prng(0x70c3);
    const obj = (rig.device.backend as S3Backend).endpoint!.store.get('tok/b')!.data; // 40,000 bytes
    const mrs = [src, dst];
    const keys = [src.key, dst.key, readOnly.key, 0, (src.key & ~0xff) | 0x55, rng.next() >>> 0];
    let landed = 0;
    for (let i = 0; i < 300; i++) {
      const target = rng.pick(mrs);
      const rkey = rng.pick(keys);
      const addr = target.va - 8192 + rng.below(MR_BYTES + 16384);
      const len = rng.below(4) === 0 ? 0 : rng.below(2 * MR_BYTES);
      const snap = new Snapshot(g, [...src.all(), ...dst.all()]);
      const r = await request(port, 'GET', '/ernic/tok/b', {
        'x-amz-rdma-token': tokenHex(rkey, BigInt(addr), BigInt(len)),
      });
      const n = Math.min(len, obj.length);
      const owner = mrs.find((m) => m.key === rkey);
      const fits = owner !== undefined && addr >= owner.va && addr + n <= owner.va + owner.length;
      const what = `rkey ${rkey.toString(16)} addr ${addr.toString(16)} len ${len}`;
      if (rkey === 0) expect(r.status, what).to.equal(403);
      else if (n === 0 || fits) expect([r.status, r.headers['x-amz-rdma-bytes']], what).to.deep.equal([200, String(n)]);
      else expect(r.status, what).to.equal(403);
      if (r.status === 200 && n > 0) {
        landed++;
        expect(owner!.read(addr - owner!.va, n).equals(obj.subarray(0, n)), what).to.equal(true);
        expect(snap.changedOutside(owner!.ranges(addr - owner!.va, n)), what).to.deep.equal([]);
      } else {
        expect(snap.changed(), what).to.deep.equal([]);
      }
    }
    expect(landed, 'some tokens were good').to.be.greaterThan(5);
  });

  it("the guest's connections end when it detaches; the store and its objects stay", async () => {
    startPump();
    const c = new GuestTcp(
      (f) => {
        void g.sendFrame(f);
        return true;
      },
      40003,
      9000,
    );
    clients.push(c);
    c.connect();
    await until(() => (rig.device.backend as S3Backend).endpoint!.stack.connectionCount > 0, 'a connection', 5000);
    pumping = false;
    await pump;
    await rig.drop(g);
    expect((rig.device.backend as S3Backend).endpoint!.stack.connectionCount).to.equal(0);
    expect((await request(port, 'GET', '/ernic/tok/b')).status).to.equal(200);
  });
});
