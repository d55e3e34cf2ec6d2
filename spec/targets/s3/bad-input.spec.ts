// Bad input to the S3 store from both sides, seeded so a failure replays:
// mutated and random frames into the TCP endpoint (truncated, flipped bytes,
// wrong lengths and offsets, every flag combination), a SYN flood, and random
// bytes, request lines, headers, tokens, ranges and query strings over HTTP.
// Nothing throws, connections stay bounded, no answer is a 500 (our safety
// net catching a bug), and afterwards a clean client is served as before.

import { expect } from 'chai';
import { randomBytes } from 'crypto';
import * as http from 'http';
import * as net from 'net';
import type { AddressInfo } from 'net';
import { S3Endpoint } from '../../../lib/targets/s3/endpoint';
import { S3_DEFAULTS } from '../../../lib/targets/s3/options';
import { Prng } from '../../support/ionic/rig';
import { ACK, arpRequest, echoRequest, FIN, PSH, RST, STORE_IP, SYN, tcp } from '../../support/s3-frames';
import { GuestTcp } from '../../support/s3-guest-tcp';

const SEED = 0x5eed53;

function mutate(rng: Prng, f: Buffer): Buffer {
  const out = Buffer.from(f);
  switch (rng.below(5)) {
    case 0:
      return out.subarray(0, rng.below(out.length + 1)); // truncated anywhere
    case 1:
      for (let i = 0, n = 1 + rng.below(4); i < n; i++) out[rng.below(out.length)] = rng.next() & 0xff;
      return out;
    case 2:
      if (out.length >= 18) out.writeUInt16BE(rng.below(0x10000), 16);
      return out; // IPv4 total length
    case 3:
      if (out.length >= 47) out[46] = rng.next() & 0xff;
      return out; // TCP data offset and flags
    default:
      return Buffer.concat([out, rng.bytes(rng.below(64))]); // trailing garbage
  }
}

describe('s3 store: bad input from the wire and from HTTP clients', function () {
  this.timeout(60000);
  let ep: S3Endpoint;
  let port: number;
  const clients: GuestTcp[] = [];
  let sent = 0;

  beforeEach(async () => {
    clients.length = 0;
    ep = await S3Endpoint.open(
      { ...S3_DEFAULTS, size: 16 << 20, maxpart: 4 << 20, listen: { host: '127.0.0.1', port: 0 } },
      {
        send: (f) => {
          sent++;
          for (const c of clients) c.onFrame(f);
        },
      },
    );
    port = (ep.hostAddress as AddressInfo).port;
  });
  afterEach(async () => {
    await ep.close();
  });

  async function cleanRoundTrip(sport: number): Promise<string> {
    const c = new GuestTcp((f) => ep.claimTx(f), sport, S3_DEFAULTS.port, 90000 + sport);
    clients.push(c);
    c.connect();
    await c.write(Buffer.from('PUT /ernic/after HTTP/1.1\r\nHost: s3\r\nContent-Length: 5\r\n\r\nhello'));
    await c.write(Buffer.from('GET /ernic/after HTTP/1.1\r\nHost: s3\r\nConnection: close\r\n\r\n'));
    await c.until(() => c.finReceived);
    c.close();
    return c.text();
  }

  it('20,000 mutated and random frames: nothing throws, connections stay bounded, then a clean client is served', async () => {
    const rng = new Prng(SEED);
    const seeds = [
      arpRequest(STORE_IP),
      echoRequest(1, 1, Buffer.from('ping')),
      tcp({ sport: 5000, dport: 9000, seq: 1, ack: 0, flags: SYN, window: 65535, mss: 1460 }),
      tcp({
        sport: 5001,
        dport: 9000,
        seq: 1,
        ack: 1,
        flags: ACK | PSH,
        window: 65535,
        data: Buffer.from('GET / HTTP/1.1\r\n\r\n'),
      }),
      tcp({ sport: 5002, dport: 9000, seq: 1, ack: 1, flags: FIN | ACK, window: 0 }),
      tcp({ sport: 5003, dport: 9000, seq: 1, ack: 1, flags: RST, window: 0 }),
    ];
    for (let i = 0; i < 20000; i++) {
      const f = rng.below(10) === 0 ? rng.bytes(rng.below(1600)) : mutate(rng, rng.pick(seeds));
      expect(() => ep.claimTx(f)).to.not.throw();
      expect(ep.stack.connectionCount).to.be.at.most(8);
    }
    // Every flag combination on a fresh port, in and out of any state.
    for (let flags = 0; flags < 64; flags++)
      ep.claimTx(tcp({ sport: 6000 + flags, dport: 9000, seq: flags, ack: flags, flags, window: 1000 }));
    expect(ep.stack.connectionCount).to.be.at.most(8);
    // Half-open connections from the fuzz hold slots until their timers give up; free them as a restart would.
    ep.dropGuestConnections();
    const text = await cleanRoundTrip(7000);
    expect(text).to.match(/^HTTP\/1.1 200 OK/);
    expect(text.endsWith('hello'), text).to.equal(true);
    expect(ep.stack.counts.badFrames + ep.stack.counts.resetsSent).to.be.greaterThan(0);
  });

  it('a SYN flood gets at most 8 connections; the rest are refused with RST and counted', () => {
    const before = sent;
    for (let p = 0; p < 200; p++)
      ep.claimTx(tcp({ sport: 10000 + p, dport: 9000, seq: p * 1000, ack: 0, flags: SYN, window: 65535, mss: 1460 }));
    expect(ep.stack.connectionCount).to.equal(8);
    expect(ep.stack.counts.refused).to.equal(192);
    expect(sent - before).to.equal(200); // a SYN-ACK or an RST for each
  });

  it('random bytes, request lines, headers, tokens, ranges and queries over HTTP: never a 500, the server stays up', async () => {
    const rng = new Prng(SEED + 1);
    // Raw bytes on fresh sockets: http.Server answers 400 or closes.
    for (let i = 0; i < 40; i++) {
      await new Promise<void>((resolve) => {
        const s = net.connect(port, '127.0.0.1', () => {
          s.end(
            i % 2
              ? rng.bytes(1 + rng.below(3000))
              : Buffer.from(
                  `${String.fromCharCode(65 + rng.below(26))} /${rng.bytes(20).toString('latin1')} HTTP/1.1\r\n\r\n`,
                  'latin1',
                ),
          );
        });
        s.on('data', (d: Buffer) => {
          expect(d.toString('latin1')).to.not.match(/^HTTP\/1\.1 5\d\d/);
        });
        s.on('close', () => resolve());
        s.on('error', () => resolve());
        s.setTimeout(5000, () => s.destroy());
      });
    }
    const put = await fetch(`http://127.0.0.1:${port}/ernic/kept`, { method: 'PUT', body: randomBytes(10000) });
    expect(put.status).to.equal(200);
    const junk = (n: number): string =>
      rng
        .bytes(n)
        .toString('base64')
        .replace(/[^A-Za-z0-9]/g, '');
    const tokens = [
      '',
      'zz',
      'ab'.repeat(44),
      'ab'.repeat(44) + ':1:2',
      `01${'00'.repeat(43)}:ffffffffffffffffff:1`,
      `${'01'.repeat(44)}::`,
      `${'01'.repeat(44)}:${'f'.repeat(16)}:${'f'.repeat(16)}`,
      'ab'.repeat(4000),
    ];
    const ranges = [
      'bytes=',
      'bytes=-',
      'bytes=99999999999999999999-',
      'bytes=5-1',
      'bytes=0-0,5-6',
      'items=0-1',
      'bytes=-0',
      'bytes=9999-',
    ];
    const queries = [
      '?list-type=2&max-keys=-1',
      '?list-type=2&max-keys=99999999999999999999',
      '?continuation-token=%%%',
      '?uploadId=&partNumber=x',
      '?partNumber=0&uploadId=00000000000000000000000000000000',
      '?uploads&uploadId=1',
      '?delete',
      '?acl',
      '?list-type=2&encoding-type=zip',
      '?part-number-marker=-5&uploadId=x',
      '?' + 'a=b&'.repeat(500),
    ];
    const methods = ['GET', 'PUT', 'HEAD', 'DELETE', 'POST', 'PATCH', 'OPTIONS'];
    for (let i = 0; i < 300; i++) {
      const method = rng.pick(methods);
      const headers: Record<string, string> = {};
      if (rng.below(2)) headers['x-amz-rdma-token'] = rng.pick(tokens);
      if (rng.below(3) === 0) headers['range'] = rng.pick(ranges);
      if (rng.below(4) === 0)
        headers['x-amz-decoded-content-length'] = rng.pick(['-1', '1e400', 'x', '18446744073709551616']);
      if (rng.below(4) === 0) headers['content-encoding'] = 'aws-chunked';
      if (rng.below(5) === 0) headers['x-amz-checksum-crc32'] = junk(6);
      if (rng.below(5) === 0) headers['content-md5'] = junk(20);
      const key = rng.below(4) === 0 ? `%${junk(3)}` : rng.pick(['obj', 'a/b/c', '', 'x'.repeat(2000)]);
      const path = `/${rng.pick(['ernic', 'other', ''])}/${key}${rng.below(2) ? rng.pick(queries) : ''}`;
      const body = method === 'PUT' || method === 'POST' ? rng.bytes(rng.below(5000)) : undefined;
      const status = await new Promise<number>((resolve) => {
        const req = http.request({ host: '127.0.0.1', port, method, path, headers }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode!));
        });
        req.on('error', () => resolve(-1));
        req.end(body);
      });
      expect(status, `${method} ${path.slice(0, 80)} ${JSON.stringify(headers).slice(0, 200)}`).to.not.equal(500);
      expect(status).to.be.lessThan(600);
    }
    const got = await fetch(`http://127.0.0.1:${port}/ernic/kept`);
    expect([got.status, (await got.arrayBuffer()).byteLength]).to.deep.equal([200, 10000]);
  });

  it('request bodies in progress at once are bounded by the store size: one past it is 503 SlowDown, the first still completes', async () => {
    await ep.close();
    ep = await S3Endpoint.open(
      { ...S3_DEFAULTS, size: 1 << 20, maxpart: 1 << 20, listen: { host: '127.0.0.1', port: 0 } },
      { send: () => undefined },
    );
    port = (ep.hostAddress as AddressInfo).port;
    const answer = (req: http.ClientRequest): Promise<{ status: number; body: string }> =>
      new Promise((resolve, reject) => {
        req.on('response', (res) => {
          let b = '';
          res.on('data', (c: Buffer) => {
            b += c;
          });
          res.on('end', () => resolve({ status: res.statusCode!, body: b }));
        });
        req.on('error', reject);
      });
    const a = http.request({
      host: '127.0.0.1',
      port,
      method: 'PUT',
      path: '/ernic/a',
      headers: { 'content-length': '600000' },
    });
    const aDone = answer(a);
    a.write(Buffer.alloc(500_000, 1)); // in progress: 500,000 of the 1 MiB budget held
    await new Promise((r) => setTimeout(r, 200));
    const b = http.request({
      host: '127.0.0.1',
      port,
      method: 'PUT',
      path: '/ernic/b',
      headers: { 'content-length': '600000' },
    });
    const bDone = answer(b);
    b.end(Buffer.alloc(600_000, 2));
    const rb = await bDone;
    expect([rb.status, rb.body.includes('<Code>SlowDown</Code>')]).to.deep.equal([503, true]);
    a.end(Buffer.alloc(100_000, 1));
    expect((await aDone).status).to.equal(200);
    expect(ep.store.get('a')!.data.length).to.equal(600_000);
    expect(ep.store.get('b')).to.equal(undefined);
    // The budget came back: the same PUT now fits.
    const again = http.request({
      host: '127.0.0.1',
      port,
      method: 'PUT',
      path: '/ernic/b',
      headers: { 'content-length': '300000' },
    });
    const againDone = answer(again);
    again.end(Buffer.alloc(300_000, 3));
    expect((await againDone).status).to.equal(200);
  });
});
