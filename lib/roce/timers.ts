// The two transport timers' encodings (IBTA Vol 1): the local ACK timeout of a
// QP (a 5-bit exponent: 4.096 us * 2^t, 0 = never) and the RNR NAK timer (a
// 5-bit code from a table, 0 being the longest), as milliseconds for setTimeout.

/** RNR NAK timer codes 0..31 in milliseconds (IBTA Vol 1 table 45). */
const RNR_TIMER_MS: readonly number[] = [
  655.36, 0.01, 0.02, 0.03, 0.04, 0.06, 0.08, 0.12, 0.16, 0.24, 0.32, 0.48, 0.64, 0.96, 1.28, 1.92, 2.56, 3.84, 5.12,
  7.68, 10.24, 15.36, 20.48, 30.72, 40.96, 61.44, 81.92, 122.88, 163.84, 245.76, 327.68, 491.52,
];

/** The wait an RNR NAK asks for, in ms (code taken modulo 32). */
export function rnrTimerMs(code: number): number {
  return RNR_TIMER_MS[code & 0x1f]!;
}

/** Local ACK timeout exponent to ms; 0 means the timer never fires (Infinity). */
export function ackTimeoutMs(timeout: number): number {
  const t = timeout & 0x1f;
  if (t === 0) return Infinity;
  return 0.004096 * 2 ** t;
}

/** rnr_retry 7 means retry without limit. */
export const RNR_RETRY_INFINITE = 7;

/** setTimeout takes whole milliseconds; round short waits up to 1 ms so a timer never spins. */
export function timerDelayMs(ms: number): number {
  return Math.max(1, Math.ceil(ms));
}
