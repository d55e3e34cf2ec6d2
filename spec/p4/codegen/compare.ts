// Two engines over one program, the generated function's and the closures'
// (the reference), and the frames the codegen specs send through both.

import { expect } from 'chai';
import { OutputMode, P4Engine } from '../../../lib/p4/engine/engine';
import { P4Result } from '../../../lib/p4/frame/result';
import { runCommand } from '../../../lib/p4/engine/commands';
import { ethernet, ipv4, snapshot, tcp, udp } from '../../support/p4';

export interface Pair {
  gen: P4Engine;
  ref: P4Engine;
}

export function pair(program: unknown, opts: { maxFrame?: number } = {}): Pair {
  const gen = P4Engine.load(program, opts);
  const ref = P4Engine.load(program, { ...opts, codegen: false });
  expect(gen.generated, `generated (refused: ${gen.codegenRefused})`).to.equal(true);
  expect(ref.generated).to.equal(false);
  return { gen, ref };
}

/** The same command on both engines, with the same outcome. */
export function both(p: Pair, cmd: string): boolean {
  const a = runCommand(p.gen, cmd);
  const b = runCommand(p.ref, cmd);
  expect(a, cmd).to.deep.equal(b);
  return a.ok;
}

/** One frame through both engines on the three paths; returns the reference's process() result. */
export function compare(p: Pair, frame: Buffer, port: number, what: string): P4Result {
  const a = p.gen.process(frame, port);
  const b = p.ref.process(frame, port);
  expect(snapshot(a), `${what}: process`).to.deep.equal(snapshot(b));
  if (a.frame) expect(a.frame, `${what}: a new Buffer`).to.not.equal(frame);
  const ra = snapshot(p.gen.processReused(frame, port, OutputMode.ENGINE_BUFFER));
  const rb = snapshot(p.ref.processReused(frame, port, OutputMode.ENGINE_BUFFER));
  expect(ra, `${what}: processReused`).to.deep.equal(rb);
  const ca = Buffer.from(frame);
  const cb = Buffer.from(frame);
  const ia = p.gen.processReused(ca, port, OutputMode.IN_PLACE);
  const ib = p.ref.processReused(cb, port, OutputMode.IN_PLACE);
  expect(snapshot(ia), `${what}: IN_PLACE`).to.deep.equal(snapshot(ib));
  expect(ia.frame === ca, `${what}: IN_PLACE wrote the input`).to.equal(ib.frame === cb);
  expect(ca.toString('hex'), `${what}: the input after IN_PLACE`).to.equal(cb.toString('hex'));
  expect(p.gen.stats, `${what}: stats`).to.deep.equal(p.ref.stats);
  return b;
}

export function randomBytes(r: () => number, len: number): Buffer {
  const b = Buffer.alloc(len);
  for (let i = 0; i < len; i++) b[i] = r() & 0xff;
  return b;
}

export function pick<T>(r: () => number, xs: readonly T[]): T {
  return xs[r() % xs.length]!;
}

export const MACS = [
  '00:00:00:00:00:0a',
  '00:00:00:00:00:0b',
  '00:04:00:00:00:00',
  '00:04:00:00:00:01',
  '02:aa:bb:cc:dd:ee',
  'ff:ff:ff:ff:ff:ff',
  '80:00:00:00:00:01',
];
export const ADDRS = [
  '10.0.0.10',
  '10.0.1.10',
  '10.0.2.1',
  '10.1.0.1',
  '192.168.7.9',
  '255.255.255.255',
  '0.0.0.0',
  '128.0.0.1',
];

/** An IPv4 frame (UDP, TCP or other), any TTL, checksum right or wrong, sometimes not version 4. */
function ipv4Frame(r: () => number): Buffer {
  const proto = pick(r, [6, 17, 1]);
  const body = randomBytes(r, r() % 48);
  const l4 =
    proto === 6
      ? tcp(r() & 0xffff, r() & 0xffff, r() >>> 0, body)
      : proto === 17
        ? udp(r() & 0xffff, r() & 0xffff, body)
        : body;
  const h = ipv4({
    src: pick(r, ADDRS),
    dst: pick(r, ADDRS),
    ttl: pick(r, [0, 1, 2, 3, 64, 255]),
    protocol: proto,
    payloadLength: l4.length,
    id: r() & 0xffff,
    goodChecksum: r() % 5 !== 0,
  });
  if (r() % 9 === 0) h[0] = 0x55; // version 5
  return Buffer.concat([ethernet(pick(r, MACS), pick(r, MACS), 0x0800), h, l4]);
}

/** Random bytes with the EtherType (and the IPv4 protocol) steered half the time. */
export function noiseFrame(r: () => number): Buffer {
  const f = randomBytes(r, r() % 90);
  if (f.length > 13 && (r() & 1) === 1) f.writeUInt16BE(pick(r, [0x0800, 0x8100, 0x88b5, 0x8847]), 12);
  if (f.length > 23 && (r() & 1) === 1) f[23] = pick(r, [6, 17]);
  return f;
}

/** Mostly well-formed frames, some noise, some cut short anywhere. */
export function anyFrame(r: () => number, make: (r: () => number) => Buffer = ipv4Frame): Buffer {
  const k = r() % 8;
  if (k < 4) return make(r);
  if (k < 6) return noiseFrame(r);
  const f = make(r);
  return f.subarray(0, r() % (f.length + 1));
}
