// The InfiniBand transport headers a RoCEv2 packet carries after UDP (IBTA
// Vol 1 9.2-9.3, include/rdma/ib_pack.h), as named-offset tables in network
// byte order, and the values their bit fields take. Which of them follow a
// given BTH is in opcodes.ts; reading and writing them is packet.ts.

import { be } from '../../protocol/field';

/** Base Transport Header. flags: SE (bit 7), MigReq (6), PadCnt (5..4), TVer (3..0). */
export const bth = {
  opcode: be(0, 1),
  flags: be(1, 1),
  pkey: be(2, 2),
  /** FECN (bit 7), BECN (bit 6), then reserved; the 24-bit destination QP below shares the word. */
  ecn_dest_qp: be(4, 4),
  /** AckReq (bit 31), reserved (30..24), PSN (23..0). */
  ack_psn: be(8, 4),
  SIZE: 12,
} as const;
export const BTH_SE = 0x80;
export const BTH_MIG_REQ = 0x40;
export const BTH_PAD_SHIFT = 4;
export const BTH_PAD_MASK = 0x3;
export const BTH_TVER_MASK = 0xf;
export const BTH_ACK_REQ = 0x80000000;
export const BTH_FECN = 0x80000000;
export const BTH_BECN = 0x40000000;
/** QPNs, PSNs and MSNs are 24 bits. */
export const MASK_24 = 0xffffff;
/** The default partition key (full membership). */
export const DEFAULT_PKEY = 0xffff;
/** The P_Key bit that says full (not limited) membership. */
export const PKEY_FULL_MEMBER = 0x8000;

/** RDMA Extended Transport Header (WRITE first/only, READ request). */
export const reth = {
  va: be(0, 8),
  va_hi: be(0, 4),
  va_lo: be(4, 4),
  rkey: be(8, 4),
  dma_len: be(12, 4),
  SIZE: 16,
} as const;

/** ACK Extended Transport Header: syndrome (8 bits) and MSN (24) in one word. */
export const aeth = { syn_msn: be(0, 4), SIZE: 4 } as const;
export const AETH_SYNDROME_SHIFT = 24;

/** Datagram Extended Transport Header: Q_Key, then reserved (8 bits) and source QP (24). */
export const deth = { qkey: be(0, 4), src_qp: be(4, 4), SIZE: 8 } as const;

/** Immediate data, carried opaque (read and written as a big-endian word). */
export const immdt = { imm: be(0, 4), SIZE: 4 } as const;

/** Invalidate Extended Transport Header: the R_Key to invalidate. */
export const ieth = { rkey: be(0, 4), SIZE: 4 } as const;

/** Atomic Extended Transport Header: 64-bit operands kept as two words each. */
export const atomiceth = {
  va: be(0, 8),
  va_hi: be(0, 4),
  va_lo: be(4, 4),
  rkey: be(8, 4),
  swap_add_hi: be(12, 4),
  swap_add_lo: be(16, 4),
  compare_hi: be(20, 4),
  compare_lo: be(24, 4),
  SIZE: 28,
} as const;

/** Atomic ACK Extended Transport Header: the original remote data. */
export const atomicacketh = { orig_hi: be(0, 4), orig_lo: be(4, 4), SIZE: 8 } as const;

/** AETH syndrome: the top three bits say ACK, RNR NAK or NAK; the low five carry credits, the RNR timer or the NAK code. */
export const SYNDROME_KIND_MASK = 0xe0;
export const SYNDROME_ACK = 0x00;
export const SYNDROME_RNR_NAK = 0x20;
export const SYNDROME_NAK = 0x60;
export const SYNDROME_VALUE_MASK = 0x1f;
/** Credit count 31: the responder does not do end-to-end flow control. */
export const CREDITS_INVALID = 0x1f;

/** NAK codes (the low five bits of a NAK syndrome). */
export const NAK_PSN_SEQUENCE_ERROR = 0;
export const NAK_INVALID_REQUEST = 1;
export const NAK_REMOTE_ACCESS_ERROR = 2;
export const NAK_REMOTE_OPERATIONAL_ERROR = 3;
// 4 is Invalid RD Request: there is no RD transport here.

/** The UDP destination port of RoCEv2 (IANA). */
export const ROCE_V2_UDP_PORT = 4791;
/** The Q_Key of QP1 (General Services); a datagram to QP1 must carry it. */
export const GSI_QKEY = 0x80010000;
/** QP1: the General Services QP that carries MADs (rdma_cm's CM). */
export const GSI_QPN = 1;
