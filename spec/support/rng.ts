// xorshift32: small and seeded, so a failing case names a reproducible seed.
// Good enough to pick bytes and branches in tests and fuzzers; not for keys.
export function xorshift(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x;
  };
}
