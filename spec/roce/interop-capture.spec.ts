// The RoCEv2 interop fixture (fixtures/roce/rxe-interop.pcap): frames taken
// from the bridge between two VMs while ionic_0 (a --backend roce server)
// talked to stock rdma_rxe (spec/vm/roce-rxe.sh), both senders' frames, with
// tshark's dissection stored beside it. Our codec must read rdma_rxe's frames
// as tshark does, ICRC included, and tshark must find ours well formed.
import { expect } from 'chai';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { readPcap } from '../../lib/net/pcap';
import { decodeFrame, RoceFrame } from '../../lib/roce/frame';
import { computeIcrc } from '../../lib/roce/icrc';
import { skipBecause } from '../support/skip';
import { codecRow, NO_PAYLOAD_GUESSES, normaliseText, tshark, tsharkDissection, tsvRows } from './tshark-fields';

const ROOT = process.env.VFU_REPO_ROOT ?? path.join(__dirname, '..', '..', '..');
const PCAP = path.join(ROOT, 'fixtures', 'roce', 'rxe-interop.pcap');
const TSV = path.join(ROOT, 'fixtures', 'roce', 'rxe-interop.tshark.tsv');
/** The two guests' addresses in the capture: ionic_0's (our server's frames) and rxe0's. */
const OURS = '10.83.0.1';
const RXE = '10.83.0.2';

describe('roce/interop capture fixture (ionic_0 <-> rdma_rxe)', () => {
  it('holds both senders: SEND, WRITE, READ request and response, fetch-and-add and ACKs from each; UD and QP1', () => {
    const rows = tsvRows(fs.readFileSync(TSV, 'utf8'));
    const bySender = (ip: string): Set<number> => new Set(rows.filter((r) => r[2] === ip).map((r) => Number(r[6])));
    // SEND first/middle/last/only, WRITE first/middle/last/only, READ request, READ response
    // first/middle/last/only, ACK, atomic ACK, fetch-and-add: each sender as requester and as responder.
    for (const ip of [OURS, RXE]) {
      const ops = bySender(ip);
      for (const op of [0, 1, 2, 4, 6, 7, 8, 10, 12, 13, 14, 15, 16, 17, 18, 20])
        expect(ops.has(op), `${ip} opcode ${op}`).to.equal(true);
    }
    // UD SEND only (100) on some QP, and QP1's MADs (rdma_cm) from both.
    const ud = rows.filter((r) => Number(r[6]) === 100);
    expect(ud.length, 'UD sends').to.be.above(0);
    for (const ip of [OURS, RXE]) {
      expect(
        ud.some((r) => r[2] === ip && r[10] === '0x000001'),
        `${ip} QP1 MAD`,
      ).to.equal(true);
    }
  });

  it("our codec reads every frame, rdma_rxe's and ours, as tshark did, ICRC recomputed", () => {
    const frames = readPcap(fs.readFileSync(PCAP));
    const rows = tsvRows(fs.readFileSync(TSV, 'utf8'));
    expect(rows).to.have.length(frames.length);
    frames.forEach((r, i) => {
      expect(codecRow(i + 1, r.data), `frame ${i + 1}`).to.deep.equal(rows[i]);
      const f = new RoceFrame();
      decodeFrame(r.data, r.data.length, f);
      expect(computeIcrc(r.data, f.ipOff, f.ipVersion, f.icrcOff), `frame ${i + 1} ICRC`).to.equal(
        r.data.readUInt32LE(f.icrcOff),
      );
    });
  });

  describe('with tshark', () => {
    before(function () {
      const r = spawnSync('tshark', ['--version'], { encoding: 'utf8' });
      if (r.error || r.status !== 0) skipBecause(this, 'tshark is not installed');
    });

    it('dissects it today as stored: every frame RRoCE, none malformed', () => {
      expect(normaliseText(tsharkDissection(PCAP, NO_PAYLOAD_GUESSES))).to.equal(
        normaliseText(fs.readFileSync(TSV, 'utf8')),
      );
      const stacks = tshark(['-r', PCAP, '-T', 'fields', '-e', 'frame.protocols']).stdout.trimEnd().split('\n');
      for (const s of stacks) expect(s).to.match(/:udp:infiniband/);
      const bad = tshark(['-r', PCAP, ...NO_PAYLOAD_GUESSES, '-Y', '_ws.malformed || _ws.expert.severity == "Error"']);
      expect(bad.stdout.trim(), 'malformed or error frames').to.equal('');
    });
  });
});
