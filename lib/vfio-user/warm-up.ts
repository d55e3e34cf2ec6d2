// Warm-up: run the request path a few thousand times before QEMU connects.
//
// V8 starts every function in the interpreter and compiles the hot ones with
// its optimizing compiler after some thousands of calls, on a background
// thread. Until then a region access costs several times its steady-state
// time, and each compilation (and the deoptimizations that follow when a path
// is taken for the first time) shows up as a pause of one to several
// milliseconds in a vCPU's MMIO read. A vCPU waits on every such read, so we
// pay that cost here instead: an in-process client on a socket pair drives a
// real Session (socket, framing, dispatch, reply, the native helper's fd
// watcher, recvmsg and sendmsg) over the device the server will serve, with
// accesses the caller names as free of side effects.
//
// The device sees what any client that connects, reads and leaves would make
// it see: attach() at VERSION, the accesses, detach() when the socket closes.
//
// Two sessions, a short one and then the long one. Closing a connection
// changes the shape of objects the hot path uses (the first close of a
// transport turns fields that had only ever held one kind of value into
// general ones), which throws away the optimized code that assumed them; the
// short session takes that hit, so the long session's code survives its own
// close and is what the first real client runs. For the same reason the
// sessions get the server's own limits object (a different object there is a
// different shape to V8, and the first real access would throw the code away).
//
// Last, one full garbage collection: loading the program and the warm-up grew
// the heap, and V8 would otherwise run its first major collection (incremental
// marking, then a pause of several milliseconds) soon after, in the first
// client's accesses. Done now, the next one is far away: the request path
// makes no garbage.

import * as v8 from 'v8';
import * as vm from 'vm';
import { Command, HeaderFlag } from '../../protocol/constants';
import { vfio_user_region_access } from '../../protocol/layouts';
import { ProtocolError } from '../../protocol/errors';
import { writeMessage } from '../../protocol/serializer';
import { nullLogger } from '../log';
import * as native from '../native';
import type { VfioUserDevice } from './device';
import { DEFAULT_SESSION_LIMITS, Session, SessionLimits } from './session';
import { closeQuietly, RawHeader, Transport, TransportHandler } from './transport';

/** One region access of the warm-up. */
export interface WarmUpAccess {
  readonly region: number;
  readonly offset: number;
  readonly count: number;
}

export interface WarmUpPlan {
  /** Reads without side effects on the device (at least one). */
  readonly reads: readonly WarmUpAccess[];
  /** Writes the device ignores; the data written is zeros. Sent both posted (NO_REPLY) and with a reply. */
  readonly writes?: readonly WarmUpAccess[];
  /** Read round trips to run (default {@link DEFAULT_WARM_UP_ROUNDS}). */
  readonly rounds?: number;
  /** Give up (reject) after this long, in ms (default 10,000). */
  readonly timeoutMs?: number;
}

export interface WarmUpResult {
  /** Requests sent (reads, writes, VERSION). */
  readonly requests: number;
  readonly ms: number;
}

/**
 * Enough for V8 to optimize the whole path and settle (measured with
 * --trace-opt/--trace-deopt: docs/latency.md); about 0.1 s of startup.
 */
const DEFAULT_WARM_UP_ROUNDS = 6000;
/** Every so many rounds, a burst of pipelined reads (several messages in one socket read). */
const BURST_EVERY = 16;
const BURST = 8;
/** Every so many rounds, the writes of the plan: posted, then with a reply. */
const WRITES_EVERY = 4;
/** Rounds of the first, short session. */
const FIRST_SESSION_ROUNDS = 64;

/**
 * Drive `device` through Sessions on socket pairs with the accesses of `plan`,
 * then close them. Resolves when the last session has closed; rejects if the
 * device refuses an access (the plan does not fit the device) or on timeout.
 * `limits` should be the very object the server gives its sessions.
 */
export async function warmUp(
  device: VfioUserDevice,
  plan: WarmUpPlan,
  limits: SessionLimits = DEFAULT_SESSION_LIMITS,
): Promise<WarmUpResult> {
  if (plan.reads.length === 0) throw new Error('warmUp: the plan has no reads');
  const t0 = process.hrtime.bigint();
  const first = await oneSession(device, plan, limits, FIRST_SESSION_ROUNDS);
  const second = await oneSession(device, plan, limits, plan.rounds ?? DEFAULT_WARM_UP_ROUNDS);
  collectGarbage();
  return { requests: first + second, ms: Number(process.hrtime.bigint() - t0) / 1e6 };
}

/**
 * A full, synchronous collection. Node offers no call for it without
 * --expose-gc on the command line; the flag set now exposes gc() to contexts
 * made from now on, so we take it from a throwaway one and unset the flag.
 */
function collectGarbage(): void {
  v8.setFlagsFromString('--expose-gc');
  try {
    (vm.runInNewContext('gc') as () => void)();
  } finally {
    v8.setFlagsFromString('--no-expose-gc');
  }
}

/** One session of `rounds` read round trips (and the plan's writes); resolves with the requests sent. */
function oneSession(device: VfioUserDevice, plan: WarmUpPlan, limits: SessionLimits, rounds: number): Promise<number> {
  const writes = plan.writes ?? [];
  const [serverFd, clientFd] = native.socketPair();
  return new Promise<number>((resolve, reject) => {
    let failure: Error | null = null;
    let requests = 0;
    let round = 0;
    let awaiting = 0;
    let nextId = 0;
    let client: Transport | null = null;
    const timer = setTimeout(() => finish(new Error('warmUp: timed out')), plan.timeoutMs ?? 10000);

    const session = new Session(serverFd, device, limits, nullLogger, () => {
      clearTimeout(timer);
      client?.close();
      if (failure) reject(failure);
      else resolve(requests);
    });

    function finish(e: Error | null): void {
      if (e && !failure) failure = e;
      // Closing our end makes the session see EOF, close, and call back above.
      client?.close();
      session.close();
    }

    function access(command: number, a: WarmUpAccess, flags: number): void {
      const w = client!.writer;
      const data = command === Command.REGION_WRITE ? a.count : 0;
      w.begin(nextId, command, flags);
      nextId = (nextId + 1) & 0xffff;
      const at = w.reserve(vfio_user_region_access.SIZE + data);
      w.field(at, vfio_user_region_access.offset, a.offset)
        .field(at, vfio_user_region_access.region, a.region)
        .field(at, vfio_user_region_access.count, a.count);
      w.end();
      requests++;
      if (!(flags & HeaderFlag.NO_REPLY)) awaiting++;
    }

    /** Send the next step's requests; when every round is done, close. */
    function next(): void {
      if (round >= rounds) {
        finish(null);
        return;
      }
      const r = round++;
      if (r % WRITES_EVERY === 0) {
        for (const a of writes) {
          access(Command.REGION_WRITE, a, HeaderFlag.NO_REPLY);
          access(Command.REGION_WRITE, a, 0);
        }
      }
      const n = r % BURST_EVERY === BURST_EVERY - 1 ? BURST : 1;
      for (let i = 0; i < n; i++) access(Command.REGION_READ, plan.reads[(r + i) % plan.reads.length]!, 0);
      client!.flush();
    }

    const handler: TransportHandler = {
      message(h: RawHeader, _payload: Buffer, fds: number[]): void {
        for (const fd of fds) closeQuietly(fd);
        if (h.flags & HeaderFlag.ERROR) {
          finish(new Error(`warmUp: the device refused command ${h.command} (errno ${h.error})`));
          return;
        }
        if (--awaiting === 0) next();
      },
      badHeader(_h: RawHeader, e: ProtocolError): void {
        finish(new Error(`warmUp: ${e.detail}`));
      },
      closed(): void {
        /* finish() closed us, or the session went away: its callback settles */
      },
    };
    client = new Transport(clientFd, handler, { maxMessageSize: limits.maxDataXferSize + 32, maxFdsPerMessage: 0 });
    session.start();
    client.start();
    const json = JSON.stringify({
      capabilities: { max_msg_fds: limits.maxMsgFds, max_data_xfer_size: limits.maxDataXferSize },
    });
    writeMessage(
      client.writer,
      { id: nextId++, command: Command.VERSION, flags: 0, error: 0 },
      { kind: 'version', major: 0, minor: 0, json },
    );
    requests++;
    awaiting++;
    client.flush();
  });
}
