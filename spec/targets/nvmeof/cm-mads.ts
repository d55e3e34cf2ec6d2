// CM MADs for the target's tests, laid out by hand from IBTA vol. 1 tables
// 106-113 (as Linux's include/rdma/ibta_vol1_c12.h places them: message
// offsets + 24 for the MAD header), rdma_cm's cma_hdr and nvme-rdma.h's
// private data - never with the tables under test.

const MAD = 256;
export const ATTR = { REQ: 0x10, MRA: 0x11, REJ: 0x12, REP: 0x13, RTU: 0x14, DREQ: 0x15, DREP: 0x16 } as const;
/** rdma_cm TCP port space << 16 | 4420. */
const SERVICE_4420 = 0x0106_1144;
const GUEST_IP = [192, 168, 200, 2];
const TARGET_IP = [192, 168, 200, 1];

/** The 24-byte MAD header: base version 1, class CM (7), class version 2, method Send (3), TID, attribute. */
export function madHeader(attr: number, tid = 0x1122334455667788n): Buffer {
  const b = Buffer.alloc(MAD);
  b[0] = 1;
  b[1] = 7;
  b[2] = 2;
  b[3] = 3;
  b.writeBigUInt64BE(tid, 8);
  b.writeUInt16BE(attr, 16);
  return b;
}

interface ReqSpec {
  commId?: number;
  qpn?: number;
  /** Responder resources (what the guest takes: our RDMA READs) and initiator depth. */
  rr?: number;
  depth?: number;
  psn?: number;
  service?: number;
  /** Transport service type (0 RC, 1 UC). */
  transport?: number;
  dstIp?: number[];
  ipVersion?: number;
  recfmt?: number;
  qid?: number;
  hrqsize?: number;
  hsqsize?: number;
  cntlid?: number;
  tid?: bigint;
}

/** A REQ as rdma_cm sends it for nvme-rdma (admin queue defaults: qid 0, hrqsize 32, hsqsize 31). */
export function req(s: ReqSpec = {}): Buffer {
  const b = madHeader(ATTR.REQ, s.tid);
  const M = 24;
  b.writeUInt32BE(s.commId ?? 0xa1b2c3d4, M + 0);
  b.writeBigUInt64BE(BigInt(s.service ?? SERVICE_4420), M + 8);
  b.writeBigUInt64BE(0x0200c0fffea8c802n, M + 16); // local CA GUID
  b.writeUInt32BE(0, M + 28); // local Q_Key
  b.writeUInt32BE((((s.qpn ?? 0x11) << 8) | (s.rr ?? 16)) >>> 0, M + 32);
  b.writeUInt32BE(s.depth ?? 0, M + 36); // local EECN 0, initiator depth
  b[M + 43] = (20 << 3) | ((s.transport ?? 0) << 1) | 1; // remote CM response timeout, transport, end-to-end flow control
  b.writeUInt32BE((((s.psn ?? 0x123456) << 8) | (20 << 3) | 7) >>> 0, M + 44); // starting PSN, local CM response timeout, retry 7
  b.writeUInt16BE(0xffff, M + 48); // P_Key
  b[M + 50] = (3 << 4) | 7; // MTU 1024, RNR retry 7
  b[M + 51] = 15 << 4; // max CM retries
  // Primary path GIDs (::ffff:a.b.c.d) at 56 and 72.
  b.writeUInt16BE(0xffff, M + 56 + 10);
  Buffer.from(GUEST_IP).copy(b, M + 56 + 12);
  b.writeUInt16BE(0xffff, M + 72 + 10);
  Buffer.from(TARGET_IP).copy(b, M + 72 + 12);
  b[M + 93] = 64; // hop limit
  // Private data at 140: cma_hdr (version 0, IP version 4 in bits 7:4, source port, addresses), then nvme_rdma_cm_req.
  const P = M + 140;
  b[P + 0] = 0;
  b[P + 1] = (s.ipVersion ?? 4) << 4;
  b.writeUInt16BE(40000, P + 2);
  Buffer.from(GUEST_IP).copy(b, P + 4 + 12);
  Buffer.from(s.dstIp ?? TARGET_IP).copy(b, P + 20 + 12);
  const N = P + 36;
  b.writeUInt16LE(s.recfmt ?? 0, N + 0);
  b.writeUInt16LE(s.qid ?? 0, N + 2);
  b.writeUInt16LE(s.hrqsize ?? 32, N + 4);
  b.writeUInt16LE(s.hsqsize ?? 31, N + 6);
  b.writeUInt16LE(s.cntlid ?? 0, N + 8);
  return b;
}

/** RTU: local (the guest's) and remote (ours) communication ids. */
export function rtu(local: number, remote: number): Buffer {
  const b = madHeader(ATTR.RTU);
  b.writeUInt32BE(local, 24);
  b.writeUInt32BE(remote, 28);
  return b;
}

/** DREQ from the guest: its id, ours, and our QPN (remote QPN/EECN, 24 bits at 32). */
export function dreq(local: number, remote: number, remoteQpn: number, tid = 0x99n): Buffer {
  const b = madHeader(ATTR.DREQ, tid);
  b.writeUInt32BE(local, 24);
  b.writeUInt32BE(remote, 28);
  b.writeUInt32BE((remoteQpn << 8) >>> 0, 32);
  return b;
}

/** DREP from the guest (answering a DREQ of ours). */
export function drep(local: number, remote: number): Buffer {
  const b = madHeader(ATTR.DREP);
  b.writeUInt32BE(local, 24);
  b.writeUInt32BE(remote, 28);
  return b;
}

/** REJ from the guest of a message of ours (1: REP). */
export function rej(local: number, remote: number, rejected = 1, reason = 10): Buffer {
  const b = madHeader(ATTR.REJ);
  b.writeUInt32BE(local, 24);
  b.writeUInt32BE(remote, 28);
  b[32] = rejected << 6;
  b.writeUInt16BE(reason, 34);
  return b;
}

/** The fields of a MAD the target sent, read at the tables' offsets. */
export function header(m: Buffer): {
  base: number;
  cls: number;
  ver: number;
  method: number;
  attr: number;
  tid: bigint;
} {
  return { base: m[0]!, cls: m[1]!, ver: m[2]!, method: m[3]!, attr: m.readUInt16BE(16), tid: m.readBigUInt64BE(8) };
}

interface RepFields {
  local: number;
  remote: number;
  qkey: number;
  qpn: number;
  eecn: number;
  psn: number;
  rr: number;
  depth: number;
  ackDelay: number;
  failover: number;
  flowControl: number;
  rnrRetry: number;
  srq: number;
  guid: bigint;
  recfmt: number;
  crqsize: number;
}

export function repFields(m: Buffer): RepFields {
  const M = 24;
  return {
    local: m.readUInt32BE(M + 0),
    remote: m.readUInt32BE(M + 4),
    qkey: m.readUInt32BE(M + 8),
    qpn: m.readUInt32BE(M + 12) >>> 8,
    eecn: m.readUInt32BE(M + 16) >>> 8,
    psn: m.readUInt32BE(M + 20) >>> 8,
    rr: m[M + 24]!,
    depth: m[M + 25]!,
    ackDelay: m[M + 26]! >>> 3,
    failover: (m[M + 26]! >>> 1) & 3,
    flowControl: m[M + 26]! & 1,
    rnrRetry: m[M + 27]! >>> 5,
    srq: (m[M + 27]! >>> 4) & 1,
    guid: m.readBigUInt64BE(M + 28),
    recfmt: m.readUInt16LE(M + 36),
    crqsize: m.readUInt16LE(M + 38),
  };
}

export function rejFields(m: Buffer): {
  local: number;
  remote: number;
  rejected: number;
  infoLen: number;
  reason: number;
  recfmt: number;
  sts: number;
} {
  const M = 24;
  return {
    local: m.readUInt32BE(M + 0),
    remote: m.readUInt32BE(M + 4),
    rejected: m[M + 8]! >>> 6,
    infoLen: m[M + 9]! >>> 1,
    reason: m.readUInt16BE(M + 10),
    recfmt: m.readUInt16LE(M + 84),
    sts: m.readUInt16LE(M + 86),
  };
}
