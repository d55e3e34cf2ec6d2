// Numbers a program's values are read with.

/** 2^k for k = 0..64 (`2 ** k` with a variable k compiles to a pow() call). */
export const POW2: Float64Array = Float64Array.from({ length: 65 }, (_, k) => 2 ** k);

/** Parses a bmv2 hexstring (`0x..`, `-0x..`) into a bigint. */
export function hexToBig(s: string): bigint {
  return s.startsWith('-') ? -BigInt(s.slice(1)) : BigInt(s);
}
