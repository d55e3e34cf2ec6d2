/** A figure with thousands separators and a fixed number of decimals (en-US), as the benchmarks print them. */
export const fmt = (v: number, digits = 0): string =>
  v.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
