// The S3 store's TCP endpoint against a recorded frame sequence: a real
// guest (the stock ionic driver, Linux's TCP, curl) talking to the store in
// the VM rig, captured on the guest's netdev with offloads off
// (fixtures/s3/guest-session.pcap, made by spec/vm/s3-record.sh: ARP, ping,
// PUT of 20000 bytes, GET, ranged GET, a 404). The guest's frames are fed,
// in order, to a fresh stack and store whose initial sequence numbers are
// the recorded ones; each is fed once our answers have reached the point it
// acknowledges. What we send must be what the store sent then: the ARP and
// echo replies byte for byte, and on every connection the same data
// segments (sequence, length, bytes) and the same SYN and FIN, apart from
// the values that differ by nature (Date, Last-Modified, x-amz-request-id:
// the same lengths).

import { expect } from 'chai';
import * as fs from 'fs';
import * as http from 'http';
import * as path from 'path';
import { createS3Server, ObjectStore } from '../../../lib/targets/s3/store';
import { TcpStack } from '../../../lib/net/tcp-host';
import { ACK, decode, FIN, Out, RST, STORE_MAC, SYN } from '../../support/s3-frames';

const FIXTURE = path.join(__dirname, '..', '..', '..', '..', 'fixtures', 's3', 'guest-session.pcap');

/** Frames of a classic little-endian pcap (LINKTYPE_ETHERNET), read with our own offsets. */
function readPcap(file: string): Buffer[] {
  const b = fs.readFileSync(file);
  if (b.readUInt32LE(0) !== 0xa1b2c3d4 || b.readUInt32LE(20) !== 1)
    throw new Error(`${file}: not a little-endian Ethernet pcap`);
  const out: Buffer[] = [];
  for (let at = 24; at + 16 <= b.length;) {
    const len = b.readUInt32LE(at + 8);
    out.push(b.subarray(at + 16, at + 16 + len));
    at += 16 + len;
  }
  return out;
}

const fromStore = (f: Buffer): boolean => f.subarray(6, 12).equals(STORE_MAC);
const isTcp = (o: Out): boolean => o.type === 0x0800 && o.proto === 6;
/** Date, Last-Modified and x-amz-request-id values differ run to run (same lengths): masked before comparing. */
function masked(b: Buffer): string {
  return b
    .toString('latin1')
    .replace(/(Date: |Last-Modified: )[^\r]*/g, '$1*')
    .replace(/(x-amz-request-id: )[0-9A-F]+/g, '$1*')
    .replace(/(<RequestId>)[0-9A-F]+/g, '$1*');
}

interface Seg {
  seq: number;
  len: number;
  flags: number;
  data: string;
}

function segmentsByPort(frames: Out[]): Map<number, Seg[]> {
  const m = new Map<number, Seg[]>();
  for (const o of frames) {
    if (!isTcp(o)) continue;
    const list = m.get(o.dport!) ?? [];
    if (o.data!.length > 0 || o.flags! & (SYN | FIN | RST))
      list.push({ seq: o.seq!, len: o.data!.length, flags: o.flags! & (SYN | FIN | RST), data: masked(o.data!) });
    m.set(o.dport!, list);
  }
  return m;
}

describe('s3 tcp: a recorded guest session replayed (fixtures/s3/guest-session.pcap)', function () {
  this.timeout(30000);
  let recorded: Buffer[] = [];
  before(function () {
    recorded = readPcap(FIXTURE);
  });

  it("answers the real guest's frames as the store did in the VM: ARP and echo replies byte for byte, every connection's segments", async () => {
    const theirs = recorded.filter(fromStore).map(decode);
    const guest = recorded.filter((f) => !fromStore(f));
    const isns = theirs.filter((o) => isTcp(o) && (o.flags! & (SYN | ACK)) === (SYN | ACK)).map((o) => o.seq!);
    expect(isns.length, 'connections in the recording').to.be.at.least(4);
    const store = await ObjectStore.open('ernic', { size: 256 << 20, objects: 256, maxpart: 256 << 20 });
    const server: http.Server = createS3Server({ store });
    const ours: Out[] = [];
    const issQueue = [...isns];
    const stack = new TcpStack({
      ip: '192.168.200.1',
      ports: [9000],
      send: (f) => ours.push(decode(Buffer.from(f))),
      onConnection: (c) => server.emit('connection', c),
      iss: () => issQueue.shift()!,
    });
    /** How far our answers on connection `port` reach (highest seq + length, SYN and FIN counting one). */
    const sentUpTo = (port: number): number => {
      let hi = -1;
      for (const o of ours) {
        if (!isTcp(o) || o.dport !== port) continue;
        const end = (o.seq! + o.data!.length + (o.flags! & SYN ? 1 : 0) + (o.flags! & FIN ? 1 : 0)) >>> 0;
        if (hi < 0 || ((end - hi) | 0) > 0) hi = end;
      }
      return hi;
    };
    for (const f of guest) {
      const o = decode(f);
      if (isTcp(o) && o.flags! & ACK && !(o.flags! & SYN)) {
        // Wait until we have sent what this frame acknowledges (the guest saw it before it sent the frame).
        for (let i = 0; i < 5000 && ((o.ack! - sentUpTo(o.sport!)) | 0) > 0; i++)
          await new Promise((r) => setImmediate(r));
      }
      stack.claimTx(Buffer.from(f));
    }
    for (let i = 0; i < 50; i++) await new Promise((r) => setImmediate(r));

    const arpTheirs = theirs.filter((o) => o.type === 0x0806);
    const arpOurs = ours.filter((o) => o.type === 0x0806);
    expect(arpOurs.length).to.equal(arpTheirs.length);
    arpOurs.forEach((o, i) =>
      expect(Buffer.concat([o.dst, o.src, o.body]).toString('hex')).to.equal(
        Buffer.concat([arpTheirs[i]!.dst, arpTheirs[i]!.src, arpTheirs[i]!.body]).toString('hex'),
      ),
    );
    const echo = (list: Out[]): string[] =>
      list.filter((o) => o.type === 0x0800 && o.proto === 1).map((o) => o.body.toString('hex'));
    expect(echo(ours)).to.deep.equal(echo(theirs));
    expect(echo(ours)).to.have.length.at.least(1);

    const want = segmentsByPort(theirs);
    const got = segmentsByPort(ours);
    expect([...got.keys()].sort()).to.deep.equal([...want.keys()].sort());
    for (const [port, segs] of want) {
      expect(got.get(port), `connection from port ${port}`).to.deep.equal(segs);
    }
    const statuses = [...want.values()].map(
      (s) => /^HTTP\/1\.1 (\d{3})/.exec(s.find((x) => x.len > 0)?.data ?? '')?.[1],
    );
    expect(statuses).to.deep.equal(['200', '200', '206', '404']);
    stack.close();
    server.closeAllConnections();
  });
});
