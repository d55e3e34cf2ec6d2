// The RoCEv2 capture fixture (fixtures/roce/): traffic the transport made,
// and tshark's dissection of it as stored beside it. Three checks: the
// transport still makes exactly these frames; our codec reads every frame of
// the capture the way tshark did (every field in the stored dissection, the
// ICRC recomputed and matched); and, when tshark is installed, tshark today
// still dissects it so, as RRoCE, with no malformed packet.
// ROCE_WRITE_FIXTURES=1 rewrites both files (the .tsv from this machine's tshark).
import { expect } from 'chai';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { readPcap, writePcap } from '../../lib/net/pcap';
import { decodeFrame, RoceFrame } from '../../lib/roce/frame';
import { computeIcrc } from '../../lib/roce/icrc';
import {
  F_AETH,
  F_ATOMICACKETH,
  F_ATOMICETH,
  F_DETH,
  F_IETH,
  F_IMMDT,
  F_RETH,
  OPCODE_FLAGS,
} from '../../lib/roce/opcodes';
import { skipBecause } from '../support/skip';
import { captureTraffic } from './capture-traffic';

const ROOT = process.env.VFU_REPO_ROOT ?? path.join(__dirname, '..', '..', '..');
const DIR = path.join(ROOT, 'fixtures', 'roce');
const PCAP = path.join(DIR, 'roce-v2.pcap');
const TSV = path.join(DIR, 'roce-v2.tshark.tsv');

/** The fields asked of tshark, in column order. */
const FIELDS = [
  'frame.number',
  'vlan.id',
  'ip.src',
  'ipv6.src',
  'udp.srcport',
  'udp.dstport',
  'infiniband.bth.opcode',
  'infiniband.bth.se',
  'infiniband.bth.padcnt',
  'infiniband.bth.p_key',
  'infiniband.bth.destqp',
  'infiniband.bth.a',
  'infiniband.bth.psn',
  'infiniband.reth.va',
  'infiniband.reth.r_key',
  'infiniband.reth.dmalen',
  'infiniband.aeth.syndrome',
  'infiniband.aeth.msn',
  'infiniband.deth.q_key',
  'infiniband.deth.srcqp',
  'infiniband.immdt',
  'infiniband.ieth',
  'infiniband.atomiceth.swapdt',
  'infiniband.atomiceth.cmpdt',
  'infiniband.atomicacketh.origremdt',
  'infiniband.invariant.crc',
  '_ws.malformed',
];

function tshark(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync('tshark', args, {
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
    env: { ...process.env, LC_ALL: 'C' },
  });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

function tsharkDissection(file: string): string {
  const r = tshark([
    '-r',
    file,
    '-T',
    'fields',
    '-E',
    'header=y',
    '-E',
    'separator=/t',
    ...FIELDS.flatMap((f) => ['-e', f]),
  ]);
  expect(r.status, r.stderr).to.equal(0);
  return r.stdout;
}

function hex(n: number, digits: number): string {
  return `0x${n.toString(16).padStart(digits, '0')}`;
}

function u64(hi: number, lo: number): string {
  return ((BigInt(hi >>> 0) << 32n) | BigInt(lo >>> 0)).toString();
}

/** An IPv6 address in the short form tshark prints. */
function ipv6Text(gid: Buffer): string {
  const words: string[] = [];
  for (let i = 0; i < 16; i += 2) words.push(gid.readUInt16BE(i).toString(16));
  return new URL(`http://[${words.join(':')}]`).hostname.slice(1, -1);
}

/** The row our codec gives a frame, in tshark's formatting of each field. */
function codecRow(n: number, buf: Buffer): string[] {
  const f = new RoceFrame();
  expect(decodeFrame(buf, buf.length, f), `frame ${n} decodes`).to.equal(0);
  const h = f.headers;
  const fl = OPCODE_FLAGS[h.opcode]!;
  const ip = buf.subarray(f.ipOff);
  const addrOrAtomic = fl & (F_RETH | F_ATOMICETH);
  return [
    String(n),
    f.vlanTci >= 0 ? String(f.vlanTci & 0xfff) : '',
    f.ipVersion === 4 ? [...ip.subarray(12, 16)].join('.') : '',
    f.ipVersion === 6 ? ipv6Text(f.srcGid) : '',
    String(f.udpSrcPort),
    '4791',
    String(h.opcode),
    h.solicited ? '1' : '0',
    String(h.padCount),
    String(h.pkey),
    hex(h.destQp, 6),
    h.ackReq ? '1' : '0',
    String(h.psn),
    addrOrAtomic ? hex(h.va, 16) : '',
    addrOrAtomic ? hex(h.rkey, 8) : '',
    fl & F_RETH ? String(h.dmaLen) : '',
    fl & F_AETH ? String(h.syndrome) : '',
    fl & F_AETH ? String(h.msn) : '',
    fl & F_DETH ? hex(h.qkey, 16) : '',
    fl & F_DETH ? hex(h.srcQp, 8) : '',
    fl & F_IMMDT ? h.imm.toString(16).padStart(8, '0') : '',
    fl & F_IETH ? h.invRkey.toString(16).padStart(8, '0') : '',
    fl & F_ATOMICETH ? u64(h.swapHi, h.swapLo) : '',
    fl & F_ATOMICETH ? u64(h.cmpHi, h.cmpLo) : '',
    fl & F_ATOMICACKETH ? u64(h.origHi, h.origLo) : '',
    hex(buf.readUInt32BE(f.icrcOff), 8),
    '',
  ];
}

/** tshark lists ImmDt and IETH twice ("a,a"): keep one. */
function normalise(row: string[]): string[] {
  return row.map((v) => (v.includes(',') && v.split(',').every((x) => x === v.split(',')[0]) ? v.split(',')[0]! : v));
}

function tsvRows(text: string): string[][] {
  return text
    .replace(/\n+$/, '')
    .split('\n')
    .slice(1)
    .map((l) => normalise(l.split('\t')));
}

describe('roce/capture fixture', () => {
  before(function () {
    if (process.env.ROCE_WRITE_FIXTURES !== '1') return;
    fs.mkdirSync(DIR, { recursive: true });
    fs.writeFileSync(PCAP, writePcap(captureTraffic()));
    fs.writeFileSync(TSV, tsharkDissection(PCAP));
  });

  it('is the traffic the transport makes today, frame for frame', () => {
    const want = readPcap(fs.readFileSync(PCAP));
    const got = captureTraffic();
    expect(got.length).to.equal(want.length);
    got.forEach((r, i) => {
      expect(r.data.equals(want[i]!.data), `frame ${i + 1}`).to.equal(true);
      expect(r.timeUs, `frame ${i + 1} time`).to.equal(want[i]!.timeUs);
    });
  });

  it('holds SEND, WRITE, READ, atomics, ACK, every kind of NAK here, UD and QP1', () => {
    const ops = new Set(tsvRows(fs.readFileSync(TSV, 'utf8')).map((r) => Number(r[6])));
    for (const op of [0, 1, 2, 4, 5, 10, 11, 12, 13, 15, 17, 18, 19, 20, 23, 36, 42, 100, 101])
      expect(ops.has(op), `opcode ${op}`).to.equal(true);
    const syndromes = new Set(
      tsvRows(fs.readFileSync(TSV, 'utf8'))
        .map((r) => r[16])
        .filter((s) => s),
    );
    expect([...syndromes].map(Number).sort((a, b) => a - b)).to.deep.equal([31, 46, 96, 98]); // ACK, RNR NAK, PSN sequence NAK, remote access NAK
  });

  it('our codec reads every frame as tshark did, ICRC included', () => {
    const frames = readPcap(fs.readFileSync(PCAP));
    const rows = tsvRows(fs.readFileSync(TSV, 'utf8'));
    expect(rows).to.have.length(frames.length);
    frames.forEach((r, i) => {
      expect(codecRow(i + 1, r.data), `frame ${i + 1}`).to.deep.equal(rows[i]);
      const f = new RoceFrame();
      decodeFrame(r.data, r.data.length, f);
      expect(computeIcrc(r.data, f.ipOff, f.ipVersion, f.icrcOff)).to.equal(r.data.readUInt32LE(f.icrcOff));
    });
  });

  describe('with tshark', () => {
    before(function () {
      const r = spawnSync('tshark', ['--version'], { encoding: 'utf8' });
      if (r.error || r.status !== 0) skipBecause(this, 'tshark is not installed');
    });

    it('dissects it today exactly as stored: every frame RRoCE on UDP 4791, none malformed', () => {
      expect(normaliseText(tsharkDissection(PCAP))).to.equal(normaliseText(fs.readFileSync(TSV, 'utf8')));
      const all = tshark(['-r', PCAP, '-T', 'fields', '-e', 'frame.protocols']);
      const stacks = all.stdout.trimEnd().split('\n');
      expect(stacks).to.have.length(readPcap(fs.readFileSync(PCAP)).length);
      for (const s of stacks) expect(s).to.match(/:udp:infiniband/);
      const bad = tshark(['-r', PCAP, '-Y', '_ws.malformed || _ws.expert.severity == "Error"']);
      expect(bad.status).to.equal(0);
      expect(bad.stdout.trim(), 'malformed or error frames').to.equal('');
    });
  });
});

function normaliseText(t: string): string {
  return t.replace(/\r/g, '').trimEnd();
}
