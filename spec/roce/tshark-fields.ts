// TShark's dissection of RoCEv2 captures and our codec's reading of the same
// frames, in the same columns, so a spec can hold a capture and its stored
// dissection side by side (spec/roce/capture.spec.ts, interop-capture.spec.ts).
import { expect } from 'chai';
import { spawnSync } from 'child_process';
import { decodeFrame, RoceFrame } from '../../lib/roce/frame';
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

/**
 * Payload dissectors that guess at an RDMA payload (RPC-over-RDMA, SMB
 * Direct, ...) and call a test pattern malformed: off for captures of tools'
 * traffic, whose payloads are theirs.
 */
export const NO_PAYLOAD_GUESSES: readonly string[] = [
  'rpcordma',
  'smc',
  'smb_direct',
  'nvme-rdma',
  'lnet',
  'iser',
  'infiniband.eoib',
  'infiniband_sdp',
  'fcoib',
].flatMap((p) => ['--disable-protocol', p]);

export function tshark(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync('tshark', args, {
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
    env: { ...process.env, LC_ALL: 'C' },
  });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

export function tsharkDissection(file: string, extra: readonly string[] = []): string {
  const r = tshark([
    '-r',
    file,
    ...extra,
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
export function codecRow(n: number, buf: Buffer): string[] {
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

export function tsvRows(text: string): string[][] {
  return text
    .replace(/\n+$/, '')
    .split('\n')
    .slice(1)
    .map((l) => normalise(l.split('\t')));
}

export function normaliseText(t: string): string {
  return t.replace(/\r/g, '').trimEnd();
}
