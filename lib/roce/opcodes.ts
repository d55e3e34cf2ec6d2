// The BTH opcodes of RC, UC and UD (IBTA Vol 1 9.2, table 38; RoCEv2 uses
// them unchanged) and, for each, which extended headers follow the BTH and
// what part of a message it is. The table is an array indexed by opcode:
// an opcode from the wire is a number 0..255, never a property name.

/** Transport of an opcode: its top three bits. */
export const TRANSPORT_MASK = 0xe0;
export const TRANSPORT_RC = 0x00;
export const TRANSPORT_UC = 0x20;
export const TRANSPORT_UD = 0x60;

/** The low five bits: the operation, the same under RC and UC. */
export const OP_SEND_FIRST = 0x00;
export const OP_SEND_MIDDLE = 0x01;
export const OP_SEND_LAST = 0x02;
export const OP_SEND_LAST_IMM = 0x03;
export const OP_SEND_ONLY = 0x04;
export const OP_SEND_ONLY_IMM = 0x05;
export const OP_WRITE_FIRST = 0x06;
export const OP_WRITE_MIDDLE = 0x07;
export const OP_WRITE_LAST = 0x08;
export const OP_WRITE_LAST_IMM = 0x09;
export const OP_WRITE_ONLY = 0x0a;
export const OP_WRITE_ONLY_IMM = 0x0b;
export const OP_READ_REQUEST = 0x0c;
export const OP_READ_RESPONSE_FIRST = 0x0d;
export const OP_READ_RESPONSE_MIDDLE = 0x0e;
export const OP_READ_RESPONSE_LAST = 0x0f;
export const OP_READ_RESPONSE_ONLY = 0x10;
export const OP_ACKNOWLEDGE = 0x11;
export const OP_ATOMIC_ACKNOWLEDGE = 0x12;
export const OP_COMPARE_SWAP = 0x13;
export const OP_FETCH_ADD = 0x14;
export const OP_SEND_LAST_INV = 0x16;
export const OP_SEND_ONLY_INV = 0x17;

/** Header and role bits of an opcode (OPCODE_FLAGS[opcode]). 0: not an opcode we speak. */
const F_VALID = 1 << 0;
export const F_RETH = 1 << 1;
export const F_AETH = 1 << 2;
export const F_DETH = 1 << 3;
export const F_IMMDT = 1 << 4;
export const F_IETH = 1 << 5;
export const F_ATOMICETH = 1 << 6;
export const F_ATOMICACKETH = 1 << 7;
/** Carries payload bytes after its headers. */
export const F_PAYLOAD = 1 << 8;
/** First (or only) packet of a message. */
export const F_START = 1 << 9;
/** Last (or only) packet of a message. */
export const F_END = 1 << 10;
/** Sent by a requester (the rest are responses: read responses and acknowledges). */
export const F_REQUEST = 1 << 11;
export const F_SEND = 1 << 12;
export const F_WRITE = 1 << 13;
export const F_READ = 1 << 14;
export const F_ATOMIC = 1 << 15;
/** A read response packet. */
export const F_READ_RESPONSE = 1 << 16;
/** An ACK or atomic ACK (no payload). */
export const F_ACK = 1 << 17;
/** Consumes a receive WQE at its first packet (SEND, WRITE with immediate). */
export const F_RECV_WQE = 1 << 18;
/** Completes a receive WQE at its last packet. */
export const F_RECV_COMPLETES = 1 << 19;

/** Extended header sizes in bytes (IBTA Vol 1 9.3). */
export const BTH_BYTES = 12;
const RETH_BYTES = 16;
const AETH_BYTES = 4;
const DETH_BYTES = 8;
const IMMDT_BYTES = 4;
const IETH_BYTES = 4;
const ATOMICETH_BYTES = 28;
const ATOMICACKETH_BYTES = 8;
export const ICRC_BYTES = 4;

/** Flags of the five-bit operations shared by RC and UC. */
const OPERATION: ReadonlyArray<readonly [number, number]> = [
  [OP_SEND_FIRST, F_PAYLOAD | F_REQUEST | F_SEND | F_START | F_RECV_WQE],
  [OP_SEND_MIDDLE, F_PAYLOAD | F_REQUEST | F_SEND],
  [OP_SEND_LAST, F_PAYLOAD | F_REQUEST | F_SEND | F_END | F_RECV_COMPLETES],
  [OP_SEND_LAST_IMM, F_IMMDT | F_PAYLOAD | F_REQUEST | F_SEND | F_END | F_RECV_COMPLETES],
  [OP_SEND_ONLY, F_PAYLOAD | F_REQUEST | F_SEND | F_START | F_END | F_RECV_WQE | F_RECV_COMPLETES],
  [OP_SEND_ONLY_IMM, F_IMMDT | F_PAYLOAD | F_REQUEST | F_SEND | F_START | F_END | F_RECV_WQE | F_RECV_COMPLETES],
  [OP_WRITE_FIRST, F_RETH | F_PAYLOAD | F_REQUEST | F_WRITE | F_START],
  [OP_WRITE_MIDDLE, F_PAYLOAD | F_REQUEST | F_WRITE],
  [OP_WRITE_LAST, F_PAYLOAD | F_REQUEST | F_WRITE | F_END],
  [OP_WRITE_LAST_IMM, F_IMMDT | F_PAYLOAD | F_REQUEST | F_WRITE | F_END | F_RECV_WQE | F_RECV_COMPLETES],
  [OP_WRITE_ONLY, F_RETH | F_PAYLOAD | F_REQUEST | F_WRITE | F_START | F_END],
  [
    OP_WRITE_ONLY_IMM,
    F_RETH | F_IMMDT | F_PAYLOAD | F_REQUEST | F_WRITE | F_START | F_END | F_RECV_WQE | F_RECV_COMPLETES,
  ],
];

/** RC only: reads, atomics, their responses, acknowledges and the invalidating sends. */
const RC_ONLY: ReadonlyArray<readonly [number, number]> = [
  [OP_READ_REQUEST, F_RETH | F_REQUEST | F_READ | F_START | F_END],
  [OP_READ_RESPONSE_FIRST, F_AETH | F_PAYLOAD | F_READ_RESPONSE | F_START],
  [OP_READ_RESPONSE_MIDDLE, F_PAYLOAD | F_READ_RESPONSE],
  [OP_READ_RESPONSE_LAST, F_AETH | F_PAYLOAD | F_READ_RESPONSE | F_END],
  [OP_READ_RESPONSE_ONLY, F_AETH | F_PAYLOAD | F_READ_RESPONSE | F_START | F_END],
  [OP_ACKNOWLEDGE, F_AETH | F_ACK | F_START | F_END],
  [OP_ATOMIC_ACKNOWLEDGE, F_AETH | F_ATOMICACKETH | F_ACK | F_START | F_END],
  [OP_COMPARE_SWAP, F_ATOMICETH | F_REQUEST | F_ATOMIC | F_START | F_END],
  [OP_FETCH_ADD, F_ATOMICETH | F_REQUEST | F_ATOMIC | F_START | F_END],
  [OP_SEND_LAST_INV, F_IETH | F_PAYLOAD | F_REQUEST | F_SEND | F_END | F_RECV_COMPLETES],
  [OP_SEND_ONLY_INV, F_IETH | F_PAYLOAD | F_REQUEST | F_SEND | F_START | F_END | F_RECV_WQE | F_RECV_COMPLETES],
];

/** UD: only SEND ONLY (with or without immediate), with a DETH. */
const UD_OPS: ReadonlyArray<readonly [number, number]> = [
  [OP_SEND_ONLY, F_DETH | F_PAYLOAD | F_REQUEST | F_SEND | F_START | F_END | F_RECV_WQE | F_RECV_COMPLETES],
  [
    OP_SEND_ONLY_IMM,
    F_DETH | F_IMMDT | F_PAYLOAD | F_REQUEST | F_SEND | F_START | F_END | F_RECV_WQE | F_RECV_COMPLETES,
  ],
];

/** OPCODE_FLAGS[opcode]: the F_* bits, 0 for an opcode outside RC, UC and UD SEND. */
export const OPCODE_FLAGS: Uint32Array = buildFlags();
/** OPCODE_HEADER_BYTES[opcode]: BTH plus its extended headers. */
export const OPCODE_HEADER_BYTES: Uint8Array = buildHeaderBytes();

function buildFlags(): Uint32Array {
  const t = new Uint32Array(256);
  for (const [op, f] of OPERATION) {
    t[TRANSPORT_RC | op] = f | F_VALID;
    t[TRANSPORT_UC | op] = f | F_VALID;
  }
  for (const [op, f] of RC_ONLY) t[TRANSPORT_RC | op] = f | F_VALID;
  for (const [op, f] of UD_OPS) t[TRANSPORT_UD | op] = f | F_VALID;
  return t;
}

function buildHeaderBytes(): Uint8Array {
  const t = new Uint8Array(256);
  for (let op = 0; op < 256; op++) {
    const f = OPCODE_FLAGS[op]!;
    if (!f) continue;
    t[op] =
      BTH_BYTES +
      (f & F_RETH ? RETH_BYTES : 0) +
      (f & F_AETH ? AETH_BYTES : 0) +
      (f & F_DETH ? DETH_BYTES : 0) +
      (f & F_IMMDT ? IMMDT_BYTES : 0) +
      (f & F_IETH ? IETH_BYTES : 0) +
      (f & F_ATOMICETH ? ATOMICETH_BYTES : 0) +
      (f & F_ATOMICACKETH ? ATOMICACKETH_BYTES : 0);
  }
  return t;
}

const OPERATION_NAMES = [
  'SEND_FIRST',
  'SEND_MIDDLE',
  'SEND_LAST',
  'SEND_LAST_WITH_IMMEDIATE',
  'SEND_ONLY',
  'SEND_ONLY_WITH_IMMEDIATE',
  'RDMA_WRITE_FIRST',
  'RDMA_WRITE_MIDDLE',
  'RDMA_WRITE_LAST',
  'RDMA_WRITE_LAST_WITH_IMMEDIATE',
  'RDMA_WRITE_ONLY',
  'RDMA_WRITE_ONLY_WITH_IMMEDIATE',
  'RDMA_READ_REQUEST',
  'RDMA_READ_RESPONSE_FIRST',
  'RDMA_READ_RESPONSE_MIDDLE',
  'RDMA_READ_RESPONSE_LAST',
  'RDMA_READ_RESPONSE_ONLY',
  'ACKNOWLEDGE',
  'ATOMIC_ACKNOWLEDGE',
  'COMPARE_SWAP',
  'FETCH_ADD',
  'RESERVED',
  'SEND_LAST_WITH_INVALIDATE',
  'SEND_ONLY_WITH_INVALIDATE',
];

/** A readable name for an opcode ("RC_SEND_ONLY"), for logs and test titles. */
export function opcodeName(opcode: number): string {
  if (!OPCODE_FLAGS[opcode & 0xff]) return `UNKNOWN_0x${(opcode & 0xff).toString(16).padStart(2, '0')}`;
  const transport = opcode & TRANSPORT_MASK;
  const prefix = transport === TRANSPORT_RC ? 'RC' : transport === TRANSPORT_UC ? 'UC' : 'UD';
  return `${prefix}_${OPERATION_NAMES[opcode & 0x1f]}`;
}

/** Every opcode we speak, ascending. */
export function knownOpcodes(): number[] {
  const out: number[] = [];
  for (let op = 0; op < 256; op++) if (OPCODE_FLAGS[op]) out.push(op);
  return out;
}
