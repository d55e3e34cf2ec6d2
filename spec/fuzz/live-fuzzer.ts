// A seeded, time-boxed fuzzer of the whole live path: one in-process server
// and device, and a guest model that boots the NIC properly, then mixes good
// and random work at every layer: raw vfio-user messages (well framed and
// not), BAR0 reads and writes (device commands included), doorbell writes,
// Ethernet admin commands, RDMA admin commands and random WQEs on live QPs.
//
// A finding is anything the server should never do: an exception (the process
// would die, or mocha reports it), a bug contained by the last-resort guard
// (lib/guard.ts counts them), books out of balance, or a server that no
// longer serves a fresh client. The guest model itself is expendable: when a
// random message unmaps its memory or resets the device, the epoch ends and a
// new guest boots. The same seed replays the same actions.

import { guardStats } from '../../lib/guard';
import type { Logger } from '../../lib/log';
import { checkBooks } from '../support/ionic/rdma-books';
import { command, IonicGuest } from '../support/ionic/guest';
import { Op, PAGE } from '../support/ionic/regs';
import { Prng, Rig } from '../support/ionic/rig';
import { RdmaGuest } from '../support/ionic/rdma-guest';
import { AOp, MrF, QpS, QpT, WOp } from '../support/ionic/rdma-regs';
import { createCqBody, createMrBody, idBody, modifyQpBody } from '../support/ionic/rdma-cmds';
import { Cq, GuestMr, Qp, SendWr, Sge, VerbsGuest } from '../support/ionic/rdma-verbs';
import { FuzzFinding } from './targets';

export const ACTIONS = ['vfio', 'bar0', 'doorbell', 'ethAdmin', 'devCmd', 'rdmaAdmin', 'wqe', 'recv'] as const;
type Action = (typeof ACTIONS)[number];
/** Relative weights: mostly live-path work, sometimes the layers under it. */
const WEIGHTS: Record<Action, number> = {
  vfio: 4,
  bar0: 8,
  doorbell: 10,
  ethAdmin: 8,
  devCmd: 4,
  rdmaAdmin: 14,
  wqe: 40,
  recv: 12,
};

interface LiveFuzzOptions {
  readonly seed: number;
  /** Wall-clock budget. */
  readonly ms: number;
  /** Actions per guest before a fresh one boots (default 300). */
  readonly actionsPerEpoch?: number;
  /** The device and server log (default: nowhere). */
  readonly log?: Logger;
  /** Called after every epoch. */
  readonly onEpoch?: (s: LiveFuzzStats) => void;
}

export interface LiveFuzzStats {
  readonly seed: number;
  epochs: number;
  actions: Record<Action, number>;
  /** Epochs the server ended by closing the guest (a protocol violation, a bad DMA_MAP...). */
  closedByServer: number;
  /** Epochs whose guest model stopped answering (its memory unmapped, the device reset). */
  modelLost: number;
  /** QPs brought back from ERR (RESET, then up again) between rounds. */
  revived: number;
  elapsedMs: number;
}

const ALL = MrF.LOCAL_WRITE | MrF.REMOTE_WRITE | MrF.REMOTE_READ | MrF.REMOTE_ATOMIC;
const RAW_ID_BASE = 0xff00; // raw messages use ids the model's client is unlikely to have in flight

const LATE = Symbol('no answer in time');
const FAILED = Symbol('failed');

/** `p`'s value, FAILED if it rejected, LATE if it took longer than `ms`. */
function within<T>(p: Promise<T>, ms: number): Promise<T | typeof LATE | typeof FAILED> {
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve(LATE), ms);
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      () => {
        clearTimeout(t);
        resolve(FAILED);
      },
    );
  });
}

export async function runLiveFuzz(o: LiveFuzzOptions): Promise<LiveFuzzStats> {
  const rnd = new Prng(o.seed);
  const start = Date.now();
  const stats: LiveFuzzStats = {
    seed: o.seed,
    epochs: 0,
    closedByServer: 0,
    modelLost: 0,
    revived: 0,
    elapsedMs: 0,
    actions: Object.fromEntries(ACTIONS.map((a) => [a, 0])) as Record<Action, number>,
  };
  const total = ACTIONS.reduce((n, a) => n + WEIGHTS[a], 0);
  const pickAction = (): Action => {
    let x = rnd.below(total);
    for (const a of ACTIONS) {
      if ((x -= WEIGHTS[a]) < 0) return a;
    }
    return 'wqe';
  };
  const rig = await Rig.start(o.log ? { log: o.log } : {});
  const contained0 = guardStats.contained;
  const trail: string[] = [];
  const note = (s: string): void => {
    trail.push(s);
    if (trail.length > 12) trail.shift();
  };
  const finding = (what: string): FuzzFinding => new FuzzFinding(what, o.seed, stats.epochs, [...trail]);
  try {
    while (Date.now() - start < o.ms) {
      stats.epochs++;
      const g = await within(IonicGuest.connect(rig.path, { ramSize: 32 << 20, timeoutMs: 400 }), 5000);
      if (typeof g === 'symbol') throw finding('a fresh guest could not connect and map its memory');
      let closed = false;
      g.client.onClose = () => {
        closed = true;
      };
      try {
        await g.probe();
        const r = await RdmaGuest.boot(g, { cpus: 4, aqCount: 2 });
        const v = VerbsGuest.attach(g, r, 24);
        const live = await setUp(v, rnd);
        const n = o.actionsPerEpoch ?? 300;
        for (let i = 0; i < n && !closed && Date.now() - start < o.ms; i++) {
          const a = pickAction();
          stats.actions[a]++;
          const ok = await act(a, v, r, live, rnd, note);
          if (!ok) {
            if (!closed) stats.modelLost++;
            break;
          }
          if (i % 16 === 15) {
            await within(v.settle(), 2000);
            // QPs a bad WQE moved to ERR come back, so random work keeps reaching live QPs.
            for (const qp of live.qps) {
              if (rig.device.rdma?.rm.qps.get(qp.id)?.state !== QpS.ERR) continue;
              if (typeof (await within(v.reset(qp), 1500)) === 'symbol') break;
              stats.revived++;
            }
          }
          if (guardStats.contained !== contained0) throw finding('the last-resort guard caught a bug');
        }
        if (closed) stats.closedByServer++;
      } catch (e) {
        if (e instanceof FuzzFinding) throw e;
        // The model lost its footing (a reset or an unmap it did not expect): a new guest boots.
        if (closed) stats.closedByServer++;
        else stats.modelLost++;
      } finally {
        g.dispose();
      }
      await rig.drop(g);
      if (guardStats.contained !== contained0) throw finding('the last-resort guard caught a bug');
      if (rig.device.rdma) checkBooks(rig.device.rdma);
      o.onEpoch?.({ ...stats, elapsedMs: Date.now() - start });
    }
    // The end: a fresh guest boots the whole NIC and runs good traffic.
    const g = await within(rig.probed(), 5000);
    if (typeof g === 'symbol') throw finding('after the run, a fresh guest could not probe the device');
    if ((await g.adminCmd(command(Op.NOP))).status !== 0) throw finding('after the run, an admin NOP failed');
    const r = await RdmaGuest.boot(g, { cpus: 4 });
    if ((await r.post(AOp.NOOP, Buffer.alloc(0))).error) throw finding('after the run, an RDMA NOOP failed');
  } finally {
    await rig.close();
  }
  stats.elapsedMs = Date.now() - start;
  return stats;
}

interface Live {
  cqs: Cq[];
  qps: Qp[];
  mrs: GuestMr[];
  barSizes: { bar0: number; bar2: number };
}

/** Good resources to aim random work at: two CQs, three MRs, RC pairs and a UD QP. */
async function setUp(v: VerbsGuest, rnd: Prng): Promise<Live> {
  const cqs = [await v.createCq(30, 6), await v.createCq(31, 6)];
  const mrs = [
    await v.createMr({ key: 0x101, pages: 4, flags: ALL }),
    await v.createMr({ key: 0x202, pages: 2, flags: MrF.LOCAL_WRITE }),
    await v.createMr({ key: 0x303, pages: 1, flags: MrF.REMOTE_READ }),
  ];
  const qps: Qp[] = [];
  for (let i = 0; i < 4; i++)
    qps.push(await v.createQp(10 + i, QpT.RC, { sqCq: cqs[i & 1]!, rqCq: cqs[(i >> 1) & 1]!, depthLog2: 5 }));
  await v.connectPair(qps[0]!, qps[1]!, { rnrRetry: rnd.below(8) });
  await v.connect(qps[2]!, qps[2]!);
  await v.connect(qps[3]!, qps[0]!.id, { rnrRetry: 7 });
  const ud = await v.createQp(20, QpT.UD, { sqCq: cqs[0]!, rqCq: cqs[1]!, depthLog2: 5 });
  await v.readyUd(ud, 0x11111111);
  qps.push(ud);
  const bar0 = (await v.g.client.getRegionInfo(0)).size;
  const bar2 = (await v.g.client.getRegionInfo(2)).size;
  return { cqs, qps, mrs, barSizes: { bar0, bar2 } };
}

/** One action; false when the guest is gone. */
async function act(
  a: Action,
  v: VerbsGuest,
  r: RdmaGuest,
  live: Live,
  rnd: Prng,
  note: (s: string) => void,
): Promise<boolean> {
  const g = v.g;
  const pick = <T>(xs: readonly T[]): T => rnd.pick(xs);
  const mostly = <T>(good: T, bad: readonly T[]): T => (rnd.below(4) < 3 ? good : pick(bad));
  switch (a) {
    case 'vfio': {
      const m = vfioMessage(rnd, live);
      note(`vfio cmd ${m.readUInt16LE(2)} size ${m.length}`);
      g.client.sendRaw(m);
      // The session may close (a refused message before negotiation, a bad header): the epoch ends.
      return typeof (await within(g.sync(), 1500)) !== 'symbol';
    }
    case 'bar0': {
      const len = pick([1, 2, 4, 8, 16, 64]);
      const off = mostly(rnd.below(Math.max(1, live.barSizes.bar0 - len)), [live.barSizes.bar0 - 1, rnd.next()]);
      note(`bar0 ${rnd.below(2) ? 'write' : 'read'} @${off} x${len}`);
      if (rnd.below(2)) g.bar0Write(off, rnd.bytes(len));
      else if (typeof (await within(g.bar0Read(off, len), 1500)) === 'symbol') return false;
      return true;
    }
    case 'doorbell': {
      const off = mostly(rnd.below(live.barSizes.bar2 >> 3) << 3, [rnd.below(live.barSizes.bar2), rnd.next()]);
      note(`doorbell @${off}`);
      g.doorbellRaw(off, rnd.bytes(pick([8, 8, 4, 2, 16])));
      return true;
    }
    case 'ethAdmin': {
      const c = rnd.bytes(64);
      // The resets end the model's queues: rarely, so an epoch gets deep.
      const gentle = Object.values(Op).filter((x) => x !== Op.RESET && x !== Op.LIF_RESET && x !== Op.PORT_RESET);
      c[0] = rnd.below(10) === 0 ? rnd.below(256) : pick(gentle);
      note(`eth admin op ${c[0]}`);
      // No answer: the command stopped the queue (or reset the LIF); the model's queue is gone.
      return typeof (await within(g.adminCmd(c, 400), 1500)) !== 'symbol';
    }
    case 'devCmd': {
      const c = rnd.bytes(64);
      // Not RESET or the queue-tearing LIF_RESET too often: they end the epoch's model.
      c[0] = pick([
        Op.NOP,
        Op.IDENTIFY,
        Op.PORT_IDENTIFY,
        Op.LIF_IDENTIFY,
        Op.LIF_GETATTR,
        Op.Q_IDENTIFY,
        Op.PORT_SETATTR,
        rnd.below(256),
      ]);
      note(`dev cmd op ${c[0]}`);
      return typeof (await within(g.devCmd(c), 1500)) !== 'symbol';
    }
    case 'rdmaAdmin': {
      const { op, body } = adminCommand(v, live, rnd);
      note(`rdma admin op ${op}`);
      return typeof (await within(r.post(op, body, { aq: rnd.below(2), timeoutMs: 400 }), 1500)) !== 'symbol';
    }
    case 'wqe': {
      const qp = pick(live.qps);
      if (rnd.below(16) === 0) {
        note(`raw wqe on QP ${qp.id}`);
        v.postRaw(qp, rnd.bytes(pick([16, 32, 64, 128])));
      } else {
        const w = sendWr(live, qp, rnd);
        note(`wqe op ${w.op} on QP ${qp.id}`);
        try {
          v.postSend(qp, w);
        } catch {
          /* the model refused to encode it (full ring, too many SGEs): fine */
        }
      }
      if (rnd.below(4) === 0) for (const cq of live.cqs) v.drain(cq);
      return true;
    }
    case 'recv': {
      const qp = pick(live.qps);
      const mr = pick(live.mrs);
      note(`recv on QP ${qp.id}`);
      try {
        v.postRecv(qp, {
          id: rnd.below(1000),
          sges: [mr.sge(rnd.below(PAGE), rnd.below(2 * PAGE), mostly(mr.key, [rnd.next(), 0]))],
        });
      } catch {
        /* ring full */
      }
      return true;
    }
  }
}

/** An SGE inside one of the MRs, now and then too long or with a wrong key. */
function sge(live: Live, rnd: Prng, len?: number): Sge {
  const mr = rnd.pick(live.mrs);
  const n =
    len ??
    (rnd.below(12) === 0 ? rnd.pick([0, 1, PAGE * 8, 2 ** 31 - 1]) : rnd.below(Math.min(mr.length, 2 * PAGE) + 1));
  const off = n <= mr.length ? rnd.below(mr.length - n + 1) : 0;
  const s = mr.sge(len === undefined ? off : off & ~7, n);
  return rnd.below(16) === 0 ? { ...s, lkey: rnd.pick([0, rnd.next(), mr.key ^ 1]) } : s;
}

function sendWr(live: Live, qp: Qp, rnd: Prng): SendWr {
  const op =
    rnd.below(10) === 0
      ? rnd.below(16)
      : rnd.pick([
          WOp.SEND,
          WOp.SEND_IMM,
          WOp.RDMA_WRITE,
          WOp.RDMA_WRITE_IMM,
          WOp.RDMA_READ,
          WOp.ATOMIC_CS,
          WOp.ATOMIC_FA,
          WOp.SEND_INV,
          WOp.LOCAL_INV,
        ]);
  // Mostly the MR that takes every remote access, at an 8-aligned offset (atomics need it).
  const target = rnd.below(4) === 0 ? rnd.pick(live.mrs) : live.mrs[0]!;
  const remote = {
    va: rnd.below(12) === 0 ? rnd.next() * PAGE : target.va + (rnd.below(target.length) & ~7),
    rkey: rnd.below(16) === 0 ? rnd.next() : target.key,
  };
  const w: SendWr = {
    op,
    id: rnd.next(),
    imm: rnd.next(),
    remote,
    solicited: rnd.below(4) === 0,
    fence: rnd.below(8) === 0,
    signaled: rnd.below(5) !== 0,
    // A 64-byte stride holds two SGEs; three now and then.
    sges: Array.from({ length: rnd.below(16) === 0 ? 3 : rnd.below(3) }, () => sge(live, rnd)),
  };
  if (op === WOp.ATOMIC_CS || op === WOp.ATOMIC_FA)
    return {
      ...w,
      sges: [],
      atomic: { swapAdd: BigInt(rnd.next()), compare: BigInt(rnd.next()), local: sge(live, rnd, 8) },
    };
  if (qp.type === QpT.UD)
    return { ...w, ud: { ah: rnd.below(8), qpn: rnd.pick([qp.id, 1, rnd.below(4096)]), qkey: rnd.next() } };
  if (rnd.below(10) === 0) return { ...w, sges: [], inline: rnd.bytes(rnd.below(40)) };
  return w;
}

function adminCommand(v: VerbsGuest, live: Live, rnd: Prng): { op: number; body: Buffer } {
  const qpIds = live.qps.map((q) => q.id);
  switch (rnd.below(6)) {
    case 0:
      return { op: rnd.below(32), body: rnd.bytes(rnd.below(120)) };
    case 1:
      return {
        op: AOp.MODIFY_QP,
        body: modifyQpBody({
          id: rnd.pick([...qpIds, 999]),
          mask: rnd.next() & 0x3fffff,
          state: rnd.below(8),
          curState: rnd.below(8),
          pmtu: rnd.below(16),
          qkeyDest: rnd.next(),
          retry: rnd.below(256),
          timeout: rnd.below(40),
          rsqDepth: rnd.below(12),
          rrqDepth: rnd.below(12),
          ahId: rnd.below(100),
          hdrLen: rnd.below(80),
          hdrDma: 0,
        }),
      };
    case 2:
      return {
        op: AOp.CREATE_MR,
        body: createMrBody({
          key: ((1 + rnd.below(60)) << 8) | rnd.below(256),
          va: rnd.pick([0x10000, rnd.next() * 4096]),
          length: rnd.pick([PAGE, 0, 2 ** 40]),
          flags: rnd.next() & 0xffff,
          mapCount: rnd.below(3),
          dma: rnd.pick([v.pages(1)[0] ?? 0, 0, rnd.next() * 4096]),
          pageSizeLog2: rnd.pick([12, 13, 21]),
        }),
      };
    case 3:
      return {
        op: AOp.CREATE_CQ,
        body: createCqBody({
          id: 40 + rnd.below(200),
          eqId: rnd.below(8),
          depthLog2: rnd.below(18),
          strideLog2: rnd.pick([5, 4]),
          pageSizeLog2: 0,
          mapCount: 1,
          dma: rnd.next() * 4096,
        }),
      };
    case 4:
      return {
        op: rnd.pick([AOp.DESTROY_MR, AOp.DESTROY_AH, AOp.DESTROY_SRQ, AOp.QUERY_AH]),
        body: idBody(rnd.below(64) << 8),
      };
    default:
      return { op: AOp.QUERY_QP, body: rnd.bytes(64) };
  }
}

/** A vfio-user message: mostly well framed with a random command and body, sometimes not framed at all. */
function vfioMessage(rnd: Prng, live: Live): Buffer {
  const kind = rnd.below(10);
  const body = (() => {
    switch (rnd.below(4)) {
      case 0: {
        // REGION_READ / WRITE with random region, offset, count
        const b = Buffer.alloc(16 + rnd.below(16));
        b.writeBigUInt64LE(BigInt(rnd.below(4) === 0 ? rnd.next() : rnd.below(live.barSizes.bar0)), 0);
        b.writeUInt32LE(rnd.pick([0, 2, 7, 9, rnd.next()]), 8);
        b.writeUInt32LE(rnd.pick([1, 2, 4, 8, 0, 4096, rnd.next()]), 12);
        return b;
      }
      case 1:
        return rnd.bytes(rnd.below(64));
      case 2:
        return Buffer.alloc(rnd.below(40));
      default:
        return rnd.bytes(rnd.below(300));
    }
  })();
  const command =
    kind === 0
      ? rnd.below(65536)
      : rnd.pick([4, 5, 6, 7, 9, 9, 10, 10, 14, 15, 16, 13, 8, 3, 2, 11, 12, 17, 18, 1, 0, 19]);
  const m = Buffer.alloc(16 + body.length);
  m.writeUInt16LE(RAW_ID_BASE + rnd.below(256), 0);
  m.writeUInt16LE(command, 2);
  m.writeUInt32LE(kind === 1 ? rnd.pick([0, 8, 15, m.length + 1 + rnd.below(64)]) : m.length, 4);
  m.writeUInt32LE(rnd.below(8) === 0 ? rnd.next() : rnd.pick([0, 0x10, 0x1]), 8);
  m.writeUInt32LE(rnd.below(8) === 0 ? rnd.next() : 0, 12);
  body.copy(m, 16);
  return m;
}
