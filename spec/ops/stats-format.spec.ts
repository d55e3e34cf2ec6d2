// The stats file's text (lib/ops/stats-format.ts): the layout written out by
// hand here, the separator on every value line however long the label, the
// histogram in the C rocm-ernic's order with zeros left out, and the parser
// reading back both our output and a file in the C rocm-ernic's own shape.

import { expect } from 'chai';
import {
  formatStatsFile,
  HISTOGRAM_ORDER,
  OPCODE_NAMES,
  parseStatsFile,
  SEP,
  StatsSnapshot,
  STATS_TITLE,
} from '../../lib/ops/stats-format';

function snapshot(over: Partial<StatsSnapshot> = {}): StatsSnapshot {
  return {
    instance: [
      ['socket', '/tmp/nic0.sock'],
      ['backend', 'loopback'],
      ['pci', '0x1dd8:0x1002'],
      ['mac', '72:6f:63:6d:2d:6e'],
      ['connection', 'connected'],
    ],
    writeCount: 7,
    sections: [
      {
        title: 'Device Statistics',
        rows: [
          ['commands', 42],
          ['bar0_reads', 1000],
          ['total_bytes_rdma_write', 2 ** 40],
        ],
      },
      { title: 'RDMA Counters', rows: [['a_counter_name_of_27_chars_x', 5]] },
    ],
    qpSummary: [
      ['qp_count', 2],
      ['qps_shown', 2],
    ],
    qps: [
      {
        id: 10,
        rows: [
          ['type', 'RC'],
          ['state', 'RTS'],
          ['doorbell_send', 3],
          ['bytes_rdma_write', 4096],
        ],
        opcodes: [
          ['SEND', 2],
          ['RDMA_WRITE', 1],
          ['RDMA_READ', 0],
        ],
      },
      {
        id: 11,
        rows: [
          ['type', 'RC'],
          ['state', 'RTS'],
          ['doorbell_send', 0],
        ],
        opcodes: [],
      },
    ],
    ...over,
  };
}

describe('ops: stats file text', () => {
  it('lays the file out as written here (title, padded labels, " : ", blank lines)', () => {
    const expected = [
      '=== ROCm ERNIC Statistics ===',
      'Instance:',
      '  socket      : /tmp/nic0.sock',
      '  backend     : loopback',
      '  pci         : 0x1dd8:0x1002',
      '  mac         : 72:6f:63:6d:2d:6e',
      '  connection  : connected',
      '',
      'Write count : 7',
      '',
      'Device Statistics:',
      '  commands                : 42',
      '  bar0_reads              : 1000',
      '  total_bytes_rdma_write  : 1099511627776',
      '',
      'RDMA Counters:',
      '  a_counter_name_of_27_chars_x : 5',
      '',
      'Per-QP Statistics:',
      '  qp_count                : 2',
      '  qps_shown               : 2',
      '  QP 10:',
      '    type           : RC',
      '    state          : RTS',
      '    doorbell_send  : 3',
      '    bytes_rdma_write : 4096',
      '    WQEs by opcode:',
      '      RDMA_WRITE            : 1',
      '      SEND                  : 2',
      '',
      '  QP 11:',
      '    type           : RC',
      '    state          : RTS',
      '    doorbell_send  : 0',
      '    WQEs by opcode:',
      '',
    ].join('\n');
    expect(formatStatsFile(snapshot())).to.equal(expected);
  });

  it('puts " : " on every value line, however long the label (a label never swallows the space)', () => {
    const long = 'x'.repeat(40);
    const text = formatStatsFile(
      snapshot({
        instance: [[long, 'v']],
        sections: [{ title: 'Device Statistics', rows: [[long, 1]] }],
        qps: [{ id: 1, rows: [[long, 2]], opcodes: [['MASKED_ATOMIC_CMP_SWP', 3]] }],
      }),
    );
    for (const line of text.split('\n')) {
      if (line === '' || line.endsWith(':') || line === STATS_TITLE) continue;
      expect(line, line).to.include(SEP);
    }
    const p = parseStatsFile(text);
    expect(p.instance[long]).to.equal('v');
    expect(p.sections['Device Statistics']![long]).to.equal(1);
    expect(p.qps.get('1')![long]).to.equal(2);
    expect(p.qps.get('1')!.opcode_MASKED_ATOMIC_CMP_SWP).to.equal(3);
  });

  it("lists the histogram in the C rocm-ernic's order, non-zero only, and sums unknown names as (other opcodes)", () => {
    const text = formatStatsFile(
      snapshot({
        qps: [
          {
            id: 5,
            rows: [],
            opcodes: [
              ['SEND', 1],
              ['BIND_MW', 4],
              ['RDMA_WRITE', 2],
              ['FANCY_OP', 3],
              ['ODD_OP', 1],
              ['LOCAL_INV', 0],
            ],
          },
        ],
      }),
    );
    const hist = text.split('\n').filter((l) => l.startsWith('      '));
    expect(hist).to.deep.equal([
      '      RDMA_WRITE            : 2',
      '      SEND                  : 1',
      '      BIND_MW               : 4',
      '      (other opcodes)       : 4',
    ]);
    // Every opcode the device can count has a histogram name.
    for (const n of OPCODE_NAMES) expect(HISTOGRAM_ORDER, n).to.include(n);
    expect(OPCODE_NAMES).to.have.length(11);
  });

  it('parses its own output back to the same values', () => {
    const s = snapshot();
    const p = parseStatsFile(formatStatsFile(s));
    expect(p.titled).to.equal(true);
    expect(p.writeCount).to.equal(7);
    expect(p.instance).to.deep.equal(Object.fromEntries(s.instance));
    expect(p.sections['Device Statistics']).to.deep.equal({
      commands: 42,
      bar0_reads: 1000,
      total_bytes_rdma_write: 2 ** 40,
    });
    expect(p.sections['RDMA Counters']).to.deep.equal({ a_counter_name_of_27_chars_x: 5 });
    expect(p.sections['Per-QP Statistics']).to.deep.equal({ qp_count: 2, qps_shown: 2 });
    expect([...p.qps.keys()]).to.deep.equal(['10', '11']);
    expect(p.qps.get('10')).to.deep.equal({
      type: 'RC',
      state: 'RTS',
      doorbell_send: 3,
      bytes_rdma_write: 4096,
      opcode_SEND: 2,
      opcode_RDMA_WRITE: 1,
    });
    expect(p.qps.get('11')).to.deep.equal({ type: 'RC', state: 'RTS', doorbell_send: 0 });
  });

  it("reads a file in the C rocm-ernic's shape (no summary rows, QPs by handle, integers and text)", () => {
    const c = [
      '=== ROCm ERNIC Statistics ===',
      'Instance:',
      '  socket      : (not set)',
      '  connection  : disconnected (lost connection)',
      '',
      'Write count : 12',
      '',
      'Device Statistics:',
      '  commands                : 5',
      '  total_ip_bytes_tx       : 300',
      'Per-QP Statistics:',
      '  QP 0x55aa:',
      '    doorbell_send  : 1',
      '    bytes_rdma_read : 64',
      '    WQEs by opcode:',
      '      RDMA_READ             : 1',
      '',
      '  QP 0x55ab:',
      '    wqes_processed : 0',
      '',
    ].join('\n');
    const p = parseStatsFile(c);
    expect(p.instance).to.deep.equal({ socket: '(not set)', connection: 'disconnected (lost connection)' });
    expect(p.writeCount).to.equal(12);
    expect(p.sections['Device Statistics']).to.deep.equal({ commands: 5, total_ip_bytes_tx: 300 });
    expect(p.qps.get('0x55aa')).to.deep.equal({ doorbell_send: 1, bytes_rdma_read: 64, opcode_RDMA_READ: 1 });
    expect(p.qps.get('0x55ab')).to.deep.equal({ wqes_processed: 0 });
  });

  it('never throws on garbage, a truncated file or an empty one', () => {
    expect(parseStatsFile('').writeCount).to.equal(null);
    const full = formatStatsFile(snapshot());
    for (let cut = 0; cut < full.length; cut += 7) expect(() => parseStatsFile(full.slice(0, cut))).not.to.throw();
    const p = parseStatsFile('junk\n: :\n  : x\nQP 3:\n    a : 1\n\u0000\n');
    expect(p.titled).to.equal(false);
    expect(p.qps.size).to.equal(0);
  });

  it('keeps a text value on one line', () => {
    const p = parseStatsFile(formatStatsFile(snapshot({ instance: [['connection', 'a\nb']] })));
    expect(p.instance.connection).to.equal('a b');
  });
});
