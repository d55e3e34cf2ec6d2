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
import { skipBecause } from '../support/skip';
import { captureTraffic } from './capture-traffic';
import { codecRow, normaliseText, tshark, tsharkDissection, tsvRows } from './tshark-fields';

const ROOT = process.env.VFU_REPO_ROOT ?? path.join(__dirname, '..', '..', '..');
const DIR = path.join(ROOT, 'fixtures', 'roce');
const PCAP = path.join(DIR, 'roce-v2.pcap');
const TSV = path.join(DIR, 'roce-v2.tshark.tsv');

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
