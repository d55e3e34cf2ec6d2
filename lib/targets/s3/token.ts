// The `x-amz-rdma-token` header of the S3-over-RDMA protocol (hipObject,
// cuObject): a 44-byte token, sent as 88 hex characters, naming the client's
// registered buffer (docs/s3.md, "The token path"; the byte layout
// agrees with hipObject's src/rdma/token.cpp). Multi-byte fields are
// little-endian. The header may also be `<token>:<addr>:<len>` (hex), where a
// non-zero addr or len overrides the token's. The reply header
// `x-amz-rdma-reply` is `200:<token>` (the server's token) on success, or a
// bare three-digit status.

import { getField, getFieldBig, le, raw, setField, setFieldBig, setRawBytes, viewRaw } from '../../../protocol/field';

/** The token, field by field. */
const rdma_token = {
  transport: le(0, 1),
  qp_num: le(1, 4),
  gid: raw(5, 16),
  rkey: le(21, 4),
  remote_addr: le(25, 8),
  length: le(33, 8),
  port_num: le(41, 1),
  lid: le(42, 2),
  SIZE: 44,
} as const;
const RDMA_TOKEN_HEX_LEN = rdma_token.SIZE * 2;

const TRANSPORT_DC = 0;
export const TRANSPORT_RC = 1;

/** A decoded token; addresses and lengths as bigint (a u64 need not be a safe number). */
export interface RdmaToken {
  readonly transport: number;
  readonly qpNum: number;
  readonly gid: Buffer;
  readonly rkey: number;
  readonly remoteAddr: bigint;
  readonly length: bigint;
  readonly portNum: number;
  readonly lid: number;
}

type TokenResult =
  | { readonly ok: true; readonly token: RdmaToken; readonly hex: string }
  | { readonly ok: false; readonly error: string };

const HEX = /^[0-9a-fA-F]+$/;
/** Longest addr or len override: a u64 in hex. */
const MAX_U64_HEX = 16;

function decodeHex(hex: string): TokenResult {
  if (hex.length !== RDMA_TOKEN_HEX_LEN || !HEX.test(hex))
    return { ok: false, error: `token is not ${RDMA_TOKEN_HEX_LEN} hex characters` };
  const b = Buffer.from(hex, 'hex');
  const transport = getField(b, 0, rdma_token.transport);
  if (transport !== TRANSPORT_DC && transport !== TRANSPORT_RC)
    return { ok: false, error: `unknown transport ${transport}` };
  return {
    ok: true,
    hex: hex.toLowerCase(),
    token: {
      transport,
      qpNum: getField(b, 0, rdma_token.qp_num),
      gid: Buffer.from(viewRaw(b, 0, rdma_token.gid)),
      rkey: getField(b, 0, rdma_token.rkey),
      remoteAddr: getFieldBig(b, 0, rdma_token.remote_addr),
      length: getFieldBig(b, 0, rdma_token.length),
      portNum: getField(b, 0, rdma_token.port_num),
      lid: getField(b, 0, rdma_token.lid),
    },
  };
}

/** Parse the header: 88 hex characters, or `<token>:<addr>:<len>` with hex overrides (0 keeps the token's value). */
export function parseTokenHeader(value: string): TokenResult {
  const v = value.trim();
  const parts = v.split(':');
  if (parts.length !== 1 && parts.length !== 3) return { ok: false, error: 'expected <token> or <token>:<addr>:<len>' };
  const r = decodeHex(parts[0]!);
  if (!r.ok || parts.length === 1) return r;
  const over: bigint[] = [];
  for (const p of parts.slice(1)) {
    const t = p.replace(/^0x/i, '');
    if (t.length === 0 || t.length > MAX_U64_HEX || !HEX.test(t)) return { ok: false, error: `bad override '${p}'` };
    over.push(BigInt(`0x${t}`));
  }
  const [addr, len] = over as [bigint, bigint];
  return {
    ok: true,
    hex: r.hex,
    token: {
      ...r.token,
      remoteAddr: addr !== 0n ? addr : r.token.remoteAddr,
      length: len !== 0n ? len : r.token.length,
    },
  };
}

export function encodeToken(t: RdmaToken): string {
  const b = Buffer.alloc(rdma_token.SIZE);
  setField(b, 0, rdma_token.transport, t.transport);
  setField(b, 0, rdma_token.qp_num, t.qpNum);
  setRawBytes(b, 0, rdma_token.gid, t.gid);
  setField(b, 0, rdma_token.rkey, t.rkey);
  setFieldBig(b, 0, rdma_token.remote_addr, t.remoteAddr);
  setFieldBig(b, 0, rdma_token.length, t.length);
  setField(b, 0, rdma_token.port_num, t.portNum);
  setField(b, 0, rdma_token.lid, t.lid);
  return b.toString('hex');
}

/** `x-amz-rdma-reply`: `200:<server token>` on a 200, else the bare status (hipObject accepts a token only with 200). */
export function replyValue(status: number, serverToken: string | null): string {
  return status === 200 && serverToken !== null ? `${status}:${serverToken}` : String(status);
}
