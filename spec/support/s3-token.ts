// The S3 store's 44-byte RDMA token for a guest MR, laid out by hand (not
// with the code under test): transport RC, QPN, GID, rkey, address, length,
// port 1, LID, little-endian (docs/s3.md, "The token path").

import type { GuestMr } from './ionic/rdma-verbs';

/** The token naming all of `mr` (QPN, GID and LID zero), as hex. */
export function mrTokenHex(mr: GuestMr): string {
  const b = Buffer.alloc(44);
  b[0] = 1;
  b.writeUInt32LE(mr.key >>> 0, 21);
  b.writeBigUInt64LE(BigInt(mr.va), 25);
  b.writeBigUInt64LE(BigInt(mr.length), 33);
  b[41] = 1;
  return b.toString('hex');
}
