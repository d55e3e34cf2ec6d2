import { expect } from 'chai';
import {
  F_ACK,
  F_AETH,
  F_ATOMIC,
  F_ATOMICACKETH,
  F_ATOMICETH,
  F_DETH,
  F_END,
  F_IETH,
  F_IMMDT,
  F_PAYLOAD,
  F_READ,
  F_READ_RESPONSE,
  F_REQUEST,
  F_RETH,
  F_START,
  knownOpcodes,
  OPCODE_FLAGS,
  OPCODE_HEADER_BYTES,
  opcodeName,
} from '../../lib/roce/opcodes';

// IBTA Vol 1 table 38, restated independently of the table in lib/roce: each
// opcode we speak with its extended headers in order, and the header bytes
// that makes (BTH 12, RETH 16, AETH 4, DETH 8, ImmDt 4, IETH 4, AtomicETH 28,
// AtomicAckETH 8).
const EXPECTED: ReadonlyArray<readonly [number, string, string]> = [
  [0x00, 'RC_SEND_FIRST', ''],
  [0x01, 'RC_SEND_MIDDLE', ''],
  [0x02, 'RC_SEND_LAST', ''],
  [0x03, 'RC_SEND_LAST_WITH_IMMEDIATE', 'ImmDt'],
  [0x04, 'RC_SEND_ONLY', ''],
  [0x05, 'RC_SEND_ONLY_WITH_IMMEDIATE', 'ImmDt'],
  [0x06, 'RC_RDMA_WRITE_FIRST', 'RETH'],
  [0x07, 'RC_RDMA_WRITE_MIDDLE', ''],
  [0x08, 'RC_RDMA_WRITE_LAST', ''],
  [0x09, 'RC_RDMA_WRITE_LAST_WITH_IMMEDIATE', 'ImmDt'],
  [0x0a, 'RC_RDMA_WRITE_ONLY', 'RETH'],
  [0x0b, 'RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE', 'RETH ImmDt'],
  [0x0c, 'RC_RDMA_READ_REQUEST', 'RETH'],
  [0x0d, 'RC_RDMA_READ_RESPONSE_FIRST', 'AETH'],
  [0x0e, 'RC_RDMA_READ_RESPONSE_MIDDLE', ''],
  [0x0f, 'RC_RDMA_READ_RESPONSE_LAST', 'AETH'],
  [0x10, 'RC_RDMA_READ_RESPONSE_ONLY', 'AETH'],
  [0x11, 'RC_ACKNOWLEDGE', 'AETH'],
  [0x12, 'RC_ATOMIC_ACKNOWLEDGE', 'AETH AtomicAckETH'],
  [0x13, 'RC_COMPARE_SWAP', 'AtomicETH'],
  [0x14, 'RC_FETCH_ADD', 'AtomicETH'],
  [0x16, 'RC_SEND_LAST_WITH_INVALIDATE', 'IETH'],
  [0x17, 'RC_SEND_ONLY_WITH_INVALIDATE', 'IETH'],
  [0x20, 'UC_SEND_FIRST', ''],
  [0x21, 'UC_SEND_MIDDLE', ''],
  [0x22, 'UC_SEND_LAST', ''],
  [0x23, 'UC_SEND_LAST_WITH_IMMEDIATE', 'ImmDt'],
  [0x24, 'UC_SEND_ONLY', ''],
  [0x25, 'UC_SEND_ONLY_WITH_IMMEDIATE', 'ImmDt'],
  [0x26, 'UC_RDMA_WRITE_FIRST', 'RETH'],
  [0x27, 'UC_RDMA_WRITE_MIDDLE', ''],
  [0x28, 'UC_RDMA_WRITE_LAST', ''],
  [0x29, 'UC_RDMA_WRITE_LAST_WITH_IMMEDIATE', 'ImmDt'],
  [0x2a, 'UC_RDMA_WRITE_ONLY', 'RETH'],
  [0x2b, 'UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE', 'RETH ImmDt'],
  [0x64, 'UD_SEND_ONLY', 'DETH'],
  [0x65, 'UD_SEND_ONLY_WITH_IMMEDIATE', 'DETH ImmDt'],
];
const SIZES = new Map([
  ['RETH', 16],
  ['AETH', 4],
  ['DETH', 8],
  ['ImmDt', 4],
  ['IETH', 4],
  ['AtomicETH', 28],
  ['AtomicAckETH', 8],
]);
const FLAG = new Map([
  ['RETH', F_RETH],
  ['AETH', F_AETH],
  ['DETH', F_DETH],
  ['ImmDt', F_IMMDT],
  ['IETH', F_IETH],
  ['AtomicETH', F_ATOMICETH],
  ['AtomicAckETH', F_ATOMICACKETH],
]);

describe('roce/opcodes', () => {
  it('knows exactly the RC, UC and UD SEND opcodes of the IBTA table', () => {
    expect(knownOpcodes()).to.deep.equal(EXPECTED.map((e) => e[0]));
  });

  for (const [op, name, hdrs] of EXPECTED) {
    it(`0x${op.toString(16).padStart(2, '0')} ${name}: ${hdrs || 'BTH only'}`, () => {
      expect(opcodeName(op)).to.equal(name);
      const list = hdrs ? hdrs.split(' ') : [];
      expect(OPCODE_HEADER_BYTES[op]).to.equal(12 + list.reduce((n, h) => n + SIZES.get(h)!, 0));
      for (const [h, bit] of FLAG) expect((OPCODE_FLAGS[op]! & bit) !== 0, h).to.equal(list.includes(h));
      const f = OPCODE_FLAGS[op]!;
      expect((f & F_START) !== 0, 'start').to.equal(/FIRST|ONLY|REQUEST|ACKNOWLEDGE|SWAP|ADD/.test(name));
      expect((f & F_END) !== 0, 'end').to.equal(/LAST|ONLY|REQUEST|ACKNOWLEDGE|SWAP|ADD/.test(name));
      expect((f & F_PAYLOAD) !== 0, 'payload').to.equal(/SEND|WRITE|RESPONSE/.test(name));
      expect((f & F_REQUEST) !== 0, 'request').to.equal(!/RESPONSE|ACKNOWLEDGE/.test(name));
      expect((f & F_READ) !== 0, 'read').to.equal(name.endsWith('READ_REQUEST'));
      expect((f & F_READ_RESPONSE) !== 0, 'read response').to.equal(name.includes('READ_RESPONSE'));
      expect((f & F_ATOMIC) !== 0, 'atomic').to.equal(/SWAP|FETCH_ADD/.test(name));
      expect((f & F_ACK) !== 0, 'ack').to.equal(name.endsWith('ACKNOWLEDGE'));
    });
  }

  it('names any other opcode as unknown, without a table lookup by name', () => {
    expect(opcodeName(0x15)).to.equal('UNKNOWN_0x15');
    expect(opcodeName(0x81)).to.equal('UNKNOWN_0x81');
    expect(opcodeName(0x2c)).to.equal('UNKNOWN_0x2c');
    expect(OPCODE_HEADER_BYTES[0x60]).to.equal(0);
  });
});
