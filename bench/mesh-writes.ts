// The guest's RDMA WRITEs in the mesh benchmark (bench/mesh.ts), from A's MR into B's: one at a time, doorbell to
// CQE (the latency figure), and a window in flight for a time (the throughput figure); how the guest waits for CQEs
// between polls (BENCH_MESH_WAIT, BENCH_MESH_NAP_US); and the check that B's MR holds A's bytes after a run.

import { cpuOf, cpuSince, Rate } from './mesh-raw';
import { envChoice, envNumber } from './support/env';
import { CqPoller, Side } from './mesh-guest';
import { WOp } from '../spec/support/ionic/rdma-regs';

const now = (): bigint => process.hrtime.bigint();
const secsSince = (t0: bigint): number => Number(now() - t0) / 1e9;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

/**
 * How the guest waits for CQEs in the throughput runs. ib_write_bw busy-polls
 * its CQ on its own vCPU and reposts the moment a WRITE completes; a model
 * that spins here would take one of this machine's two cores from the
 * servers, so:
 * - 'nap' (default): peek at the CQ every NAP_MS, the thread asleep in
 *   between (Atomics.wait), turning the event loop after NAPS naps; it reacts
 *   within ~0.1 ms, as a busy poll does, for about a fifth of a core.
 * - 'sleep': a ~1 ms timer between polls (the old default):
 *   every completion waits ~0.5 ms on average before its slot is reposted,
 *   which left A idle 13-17% of the time against the raw sender's 2-7%.
 * - 'spin': poll again after each turn of the event loop (a busy poll that
 *   takes a core).
 * - 'event': ibv_req_notify_cq + ibv_get_cq_event (arm, sleep until the EQ
 *   interrupt), as ib_write_bw -e; A pays an interrupt and three more
 *   doorbells per wake.
 * The latency run waits as BENCH_MESH_LAT_WAIT says.
 */
export const WAIT = envChoice('BENCH_MESH_WAIT', ['nap', 'sleep', 'spin', 'event']);
/**
 * How the guest waits for the CQE of each latency WRITE (BENCH_MESH_LAT_WAIT):
 * 'spin' (default) polls after each turn of the event loop, as ib_write_lat
 * busy-polls; 'event' arms the CQ before the doorbell and sleeps until its
 * interrupt, as ib_write_lat -e (on a 2-core machine a spinning guest takes a
 * core from the two servers; the raw ping-pong's processes both sleep).
 */
export const LAT_WAIT = envChoice('BENCH_MESH_LAT_WAIT', ['spin', 'event']);
/** BENCH_MESH_WAIT=nap: the guest thread's nap between CQ peeks (ms), and how many naps before it turns the event loop. */
const NAP_MS = envNumber('BENCH_MESH_NAP_US', 100, 10, 100_000) / 1000;
const NAPS = 10;
const napCell = new Int32Array(new SharedArrayBuffer(4));
/** The latency WRITEs cycle over this many 8-byte slots at the start of the MRs. */
export const LAT_SLOTS = 512;

/** How the guest waits when a poll found nothing (BENCH_MESH_WAIT). */
function waitForCqe(cq: CqPoller): Promise<void> {
  if (WAIT === 'event') return cq.event(10_000);
  if (WAIT === 'nap') {
    for (let i = 0; i < NAPS && !cq.peek(); i++) Atomics.wait(napCell, 0, 0, NAP_MS);
    return turn();
  }
  return WAIT === 'sleep' ? sleep(1) : turn();
}

/** Post an RDMA WRITE of A's MR bytes [off, off + len) to B's MR at the same offset (no doorbell). */
function postWrite(a: Side, b: Side, id: number, off: number, len: number): void {
  a.v.postSend(
    a.qp,
    { op: WOp.RDMA_WRITE, id, sges: [a.mr.sge(off, len)], remote: { va: b.mr.va + off, rkey: b.mr.key } },
    false,
  );
}

/** One 8-byte WRITE at a time: doorbell to CQE seen, in microseconds, sorted. */
export async function rdmaLatency(a: Side, b: Side, cq: CqPoller, n: number, id0: number): Promise<Float64Array> {
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    postWrite(a, b, id0 + i, (i % LAT_SLOTS) * 8, 8);
    // ib_write_lat -e re-arms the CQ after each event, before the next post.
    if (LAT_WAIT === 'event') cq.arm();
    const t0 = now();
    a.v.ringSq(a.qp);
    let got = cq.poll();
    while (got === 0) {
      if (LAT_WAIT === 'event') await cq.sleep(5000);
      else await turn();
      got = cq.poll();
      if (got === 0 && secsSince(t0) > 5) throw new Error(`latency: no CQE 5 s after the doorbell (op ${i})`);
    }
    out[i] = Number(now() - t0) / 1000;
    if (got !== 1) throw new Error('latency: more than one CQE for one WQE');
  }
  cq.report();
  return out.sort();
}

/** `size`-byte WRITEs over the window's slots, `window` in flight; for `secs` and at least `minBytes` (or `maxOps` when given), never past `maxSecs`. */
export async function rdmaThroughput(
  a: Side,
  b: Side,
  cq: CqPoller,
  servers: number[],
  window: number,
  secs: number,
  minBytes: number,
  size: number,
  maxSecs: number,
  maxOps = Infinity,
): Promise<Rate> {
  let posted = 0;
  let done = 0;
  let stop = false;
  const c0 = servers.map(cpuOf);
  const s0 = cpuOf(process.pid);
  const t0 = now();
  let lastProgress = t0;
  for (;;) {
    if (!stop) {
      const el = secsSince(t0);
      if (posted >= maxOps || (maxOps === Infinity && ((el >= secs && done * size >= minBytes) || el >= maxSecs)))
        stop = true;
    }
    if (stop && done >= posted) break;
    if (!stop && posted - done < window) {
      while (posted - done < window && posted < maxOps) {
        postWrite(a, b, posted, (posted % window) * size, size);
        posted++;
      }
      a.v.ringSq(a.qp);
    }
    const got = cq.poll();
    done += got;
    if (got === 0) {
      if (secsSince(lastProgress) > 10) throw new Error(`throughput: no CQE for 10 s (${done} of ${posted} done)`);
      await waitForCqe(cq);
    } else lastProgress = now();
  }
  const el = secsSince(t0);
  cq.report();
  return {
    bytes: done * size,
    secs: el,
    cpu: { self: cpuSince(process.pid, s0), peer: servers.map((p, i) => cpuSince(p, c0[i]!)) },
  };
}

/** B's bytes [0, len) must equal A's. */
export function verify(a: Side, b: Side, len: number, what: string): void {
  const sa = a.bytes.subarray(0, len);
  const sb = b.bytes.subarray(0, len);
  if (!sa.equals(sb)) {
    let first = 0;
    while (first < len && sa[first] === sb[first]) first++;
    throw new Error(`${what}: B's MR does not hold A's bytes (first difference at offset ${first}); no figure`);
  }
}
