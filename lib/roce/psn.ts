// Packet sequence numbers are 24 bits and wrap (IBTA Vol 1 9.7.1): every
// comparison is of the difference modulo 2^24, read as signed, so PSN
// 0xffffff is just before 0. Half the space ahead counts as "later".

const PSN_MODULUS = 0x1000000;
const PSN_MASK = 0xffffff;
const HALF = 0x800000;

/** psn + n, wrapped. */
export function psnAdd(psn: number, n: number): number {
  return (psn + n) & PSN_MASK;
}

/** a - b as a signed distance in (-2^23, 2^23]: positive when a is after b. */
export function psnDiff(a: number, b: number): number {
  const d = (a - b) & PSN_MASK;
  return d > HALF ? d - PSN_MODULUS : d;
}
