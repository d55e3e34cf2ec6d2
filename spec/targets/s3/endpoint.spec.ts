// HTTP through the TCP endpoint: a guest-side client made of hand-built
// frames (spec/support/s3-guest-tcp.ts) sends requests to S3Endpoint.claimTx, and the same
// http.Server that serves host clients answers through frames out: ARP, a
// PUT larger than the receive window, a GET of it back, a ranged GET, and a
// host client seeing the same object through listen=.

import { expect } from 'chai';
import { createHash, randomBytes } from 'crypto';
import * as http from 'http';
import type { AddressInfo } from 'net';
import { S3Endpoint } from '../../../lib/targets/s3/endpoint';
import { S3_DEFAULTS } from '../../../lib/targets/s3/options';
import { arpRequest, decode } from '../../support/s3-frames';
import { GuestTcp } from '../../support/s3-guest-tcp';

function headerOf(text: string, name: string): string | undefined {
  const m = new RegExp(`^${name}: *(.*)$`, 'mi').exec(text);
  return m?.[1]?.trim();
}

function bodyOf(raw: Buffer): Buffer {
  const at = raw.indexOf('\r\n\r\n');
  return raw.subarray(at + 4);
}

describe('s3 over the TCP endpoint (frames in, frames out)', function () {
  this.timeout(60000);
  let ep: S3Endpoint;
  const guests: GuestTcp[] = [];
  const frames: Buffer[] = [];

  beforeEach(async () => {
    guests.length = 0;
    frames.length = 0;
    ep = await S3Endpoint.open(
      { ...S3_DEFAULTS, listen: { host: '127.0.0.1', port: 0 } },
      {
        send: (f) => {
          frames.push(Buffer.from(f));
          for (const g of guests) g.onFrame(f);
        },
      },
    );
  });
  afterEach(async () => {
    await ep.close();
  });

  function guest(sport: number): GuestTcp {
    const g = new GuestTcp((f) => ep.claimTx(f), sport, S3_DEFAULTS.port);
    guests.push(g);
    return g;
  }

  async function exchange(sport: number, request: Buffer): Promise<Buffer> {
    const g = guest(sport);
    g.connect();
    await g.write(request);
    await g.until(() => g.finReceived);
    g.close();
    return Buffer.concat(g.received);
  }

  it('answers ARP on the frame hook, then PUT (200 KB, past the window) and GET it back over HTTP/1.1', async () => {
    expect(ep.claimTx(arpRequest(Buffer.from([192, 168, 200, 1])))).to.equal(true);
    expect(decode(frames[0]!).src).to.deep.equal(Buffer.from([0x02, 0x53, 192, 168, 200, 1]));
    const data = randomBytes(200_000);
    const put = await exchange(
      50000,
      Buffer.concat([
        Buffer.from(
          `PUT /ernic/guest.bin HTTP/1.1\r\nHost: 192.168.200.1:9000\r\nContent-Length: ${data.length}\r\nConnection: close\r\n\r\n`,
        ),
        data,
      ]),
    );
    const putText = put.toString('latin1');
    expect(putText).to.match(/^HTTP\/1\.1 200 /);
    expect(headerOf(putText, 'ETag')).to.equal(`"${createHash('md5').update(data).digest('hex')}"`);
    const get = await exchange(
      50001,
      Buffer.from('GET /ernic/guest.bin HTTP/1.1\r\nHost: 192.168.200.1:9000\r\nConnection: close\r\n\r\n'),
    );
    expect(get.toString('latin1')).to.match(/^HTTP\/1\.1 200 /);
    expect(bodyOf(get).equals(data)).to.equal(true);
    expect(ep.stack.connectionCount).to.equal(0);
  });

  it('a ranged GET and an S3 error document through the wire; the host listener sees the same store', async () => {
    await ep.store.put('r.txt', Buffer.from('hello, wire'), 'text/plain');
    const r = await exchange(
      50002,
      Buffer.from('GET /ernic/r.txt HTTP/1.1\r\nHost: s3\r\nRange: bytes=7-10\r\nConnection: close\r\n\r\n'),
    );
    expect(r.toString('latin1')).to.match(/^HTTP\/1\.1 206 /);
    expect(bodyOf(r).toString()).to.equal('wire');
    const missing = await exchange(
      50003,
      Buffer.from('GET /ernic/nope HTTP/1.1\r\nHost: s3\r\nConnection: close\r\n\r\n'),
    );
    expect(missing.toString('latin1')).to.match(/^HTTP\/1\.1 404 /);
    expect(bodyOf(missing).toString()).to.contain('<Code>NoSuchKey</Code>');
    const port = (ep.hostAddress as AddressInfo).port;
    const body = await new Promise<string>((resolve, reject) => {
      http
        .get(`http://127.0.0.1:${port}/ernic/r.txt`, (res) => {
          let s = '';
          res.on('data', (c: Buffer) => {
            s += c;
          });
          res.on('end', () => resolve(s));
        })
        .on('error', reject);
    });
    expect(body).to.equal('hello, wire');
  });

  it('two guest connections at once, keep-alive: two requests on one of them', async () => {
    await ep.store.put('a', Buffer.from('AAA'), 'text/plain');
    await ep.store.put('b', Buffer.from('BB'), 'text/plain');
    const g1 = guest(50010);
    const g2 = guest(50011);
    g1.connect();
    g2.connect();
    await g1.write(Buffer.from('GET /ernic/a HTTP/1.1\r\nHost: s3\r\n\r\n'));
    await g2.write(Buffer.from('GET /ernic/b HTTP/1.1\r\nHost: s3\r\nConnection: close\r\n\r\n'));
    await g1.until(() => g1.text().endsWith('AAA'));
    await g1.write(Buffer.from('GET /ernic/b HTTP/1.1\r\nHost: s3\r\nConnection: close\r\n\r\n'));
    await g1.until(() => g1.finReceived);
    await g2.until(() => g2.finReceived);
    expect(g1.text().match(/HTTP\/1\.1 200 /g)).to.have.length(2);
    expect(g1.text().endsWith('BB')).to.equal(true);
    expect(g2.text().endsWith('\r\n\r\nBB')).to.equal(true);
  });
});
