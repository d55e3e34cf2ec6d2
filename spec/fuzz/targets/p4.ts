// The P4 engine (lib/p4): mutated programs loaded as an operator's
// (P4Engine.load) and as a guest's (device command 72 through P4Control,
// the entry the device uses), runtime commands with random arguments
// (directly and as device command 71), raw device commands 70-72, and
// frames through whatever loaded.
//
// Programs (p4-programs.ts) start from the fixtures and a few synthetic ones (value sets,
// action profiles, bigint expressions, heavy frames sized around the frame
// cost limit), then get mutations: names and
// operators from Object.prototype's keys, huge and negative sizes and
// widths, deep and wide expressions, deleted and duplicated parts, broken
// JSON text. An engine lives for a few epochs so its tables, members and
// value sets fill up (floods of adds run into the guest budget).
//
// A finding: an exception escaping (the loader throwing anything but a
// P4LoadError, a command or a device command throwing), a frame that threw
// inside the program (the engine's frame-boundary guard counted it: a bug it
// contained), a frame over 20 ms, a loop turn over 50 ms, Object.prototype
// changed, or the known-good program (simple_router and its commands)
// processing frames differently from the start of the run.

import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { PerformanceObserver } from 'perf_hooks';
import { P4Engine } from '../../../lib/p4/engine/engine';
import { P4Result } from '../../../lib/p4/frame/result';
import { P4_GUEST_MAX_TABLE_ENTRIES } from '../../../lib/p4/device/devcmd';
import { P4LoadError } from '../../../lib/p4/program/load';
import { runCommand, runCommands } from '../../../lib/p4/engine/commands';
import { GuestP4 } from '../../p4/guest';
import { ethernet, fixtureText, ipv4, snapshot, tcp, udp } from '../../support/p4';
import { FuzzFinding, registerTarget } from './index';
import {
  breakText,
  COMMANDS,
  exprProgram,
  FIXTURES,
  heavyProgram,
  mutate,
  NUMBERS,
  profileProgram,
  PROTO_KEYS,
  Rnd,
  vsetProgram,
} from './p4-programs';

/** Longest a frame may take, and a loop turn. */
const FRAME_MS = 20;
const TURN_MS = 50;
/** Epochs an engine lives (picked per engine). */
const ENGINE_EPOCHS = [1, 1, 1, 2, 2, 3, 4];
/** Floods of adds a big engine takes before a new one (enough to reach the guest budget). */
const BIG_FLOODS = 8;

// ---- commands and frames ----

function token(r: Rnd, width: number): string {
  switch (r.below(12)) {
    case 0:
      return String(r.below(1 << Math.min(30, Math.max(1, width))));
    case 1:
      return r.hex(Math.max(1, Math.ceil(width / 4)));
    case 2:
      return `${r.below(256)}.${r.below(256)}.${r.below(256)}.${r.below(256)}`;
    case 3:
      return Array.from({ length: 6 }, () => (r.below(256) + 0x100).toString(16).slice(1)).join(':');
    case 4:
      return `${r.hex(4)}/${r.below(width + 2)}`;
    case 5:
      return `${r.hex(4)}&&&${r.hex(4)}`;
    case 6:
      return `${r.below(100)}->${r.below(1000)}`;
    case 7:
      return r.pick(PROTO_KEYS);
    case 8:
      return String(r.pick(NUMBERS));
    case 9:
      return '*';
    case 10:
      return '=>';
    default:
      return String(r.below(16));
  }
}

function randomCommand(r: Rnd, e: P4Engine | null): string {
  const cmd = r.chance(20) ? r.pick(PROTO_KEYS) : r.pick(COMMANDS);
  const names = e
    ? [
        ...e.tables.keys(),
        ...e.profiles.keys(),
        ...e.vsets.sets.keys(),
        ...e.externs.counters.keys(),
        ...e.externs.registers.keys(),
        ...e.externs.meters.keys(),
      ]
    : [];
  const actions = e ? [...e.actions.keys()] : [];
  const words: string[] = [cmd];
  words.push(names.length > 0 && !r.chance(8) ? r.pick(names) : r.pick(PROTO_KEYS));
  if (/table_add|set_default|create_member/.test(cmd))
    words.push(actions.length > 0 && !r.chance(8) ? r.pick(actions) : r.pick(PROTO_KEYS));
  const n = r.below(8);
  for (let i = 0; i < n; i++) words.push(token(r, r.pick([1, 8, 9, 16, 32, 48, 128])));
  if (r.chance(3)) words.splice(2 + r.below(Math.max(1, words.length - 2)), 0, '=>');
  return words.join(' ');
}

/** Many adds of one kind (fills tables, profiles and sets to their limits), made as they are run. */
function* flood(r: Rnd, e: P4Engine, n: number): Generator<string> {
  const t = r.pick([...e.tables.values()].filter((x) => x.keys.length > 0));
  const ap = r.pick([...e.profiles.values()]);
  const vs = r.pick([...e.vsets.sets.values()]);
  // what the engine has: its value sets and profiles are flooded most (they have the largest limits)
  const kind = vs && r.chance(2) ? 2 : ap && r.chance(2) ? 1 : r.below(4);
  const tableActions = t ? [...t.actions.values()] : [];
  const profileActions = ap ? [...ap.actions.values()] : [];
  const base = r.next();
  const v = (i: number, width: number) => (base + i) % 2 ** Math.min(width, 30);
  for (let i = 0; i < n; i++) {
    if (kind === 0 && t) {
      const a = r.pick(tableActions);
      const key = t.keys
        .map((k) =>
          k.kind === 'lpm'
            ? `${v(i, k.width)}/${k.width}`
            : k.kind === 'ternary'
              ? `${v(i, k.width)}&&&${2 ** Math.min(k.width, 30) - 1}`
              : k.kind === 'range'
                ? `0->${v(i, k.width)}`
                : String(v(i, k.width)),
        )
        .join(' ');
      const data = a ? a.params.map(() => '1').join(' ') : '';
      yield t.profile
        ? `table_indirect_add ${t.name} ${key} => 0${t.needsPriority ? ` ${i}` : ''}`
        : `table_add ${t.name} ${a?.name ?? 'x'} ${key} => ${data}${t.needsPriority ? ` ${i}` : ''}`;
    } else if (kind === 1 && ap) {
      const a = r.pick(profileActions);
      yield r.chance(3)
        ? `act_prof_add_member_to_group ${ap.name} ${r.below(n)} ${r.below(4)}`
        : r.chance(50)
          ? `act_prof_create_group ${ap.name}`
          : `act_prof_create_member ${ap.name} ${a?.name ?? 'x'} ${a ? a.params.map(() => String(i)).join(' ') : ''}`;
    } else if (kind === 2 && vs) {
      yield `parse_vset_add ${vs.name} ${v(i, vs.width)}`;
    } else yield randomCommand(r, e);
  }
}

function randomFrame(r: Rnd): Buffer {
  switch (r.below(6)) {
    case 0:
      return r.bytes(r.below(120));
    case 1:
      return Buffer.concat([
        ethernet('02:00:00:00:00:02', '02:00:00:00:00:01', r.pick([0x0800, 0x86dd, 0x0806, r.below(0x10000)])),
        r.bytes(r.below(80)),
      ]);
    case 2:
      return Buffer.concat([
        ethernet('00:aa:bb:00:00:00', '00:00:00:00:00:01', 0x0800),
        ipv4({
          src: '10.0.9.9',
          dst: r.pick(['10.0.0.10', '10.0.1.10', '1.2.3.4']),
          ttl: r.below(4),
          protocol: 17,
          payloadLength: 12,
        }),
        udp(r.below(65536), r.below(65536), r.bytes(4)),
      ]);
    case 3:
      return Buffer.concat([
        ethernet('00:aa:bb:00:00:00', '00:00:00:00:00:01', 0x0800),
        ipv4({ src: '10.0.9.9', dst: '10.0.0.10', ttl: 64, protocol: 6, payloadLength: 24 }),
        tcp(1, 2, 3, r.bytes(4)),
      ]);
    case 4:
      return r.bytes(r.pick([0, 1, 13, 14, 44, 1500, 9000]));
    default:
      return Buffer.alloc(r.below(70000));
  }
}

// ---- the known-good program ----

function knownGood(): P4Engine {
  const e = P4Engine.load(fixtureText('simple_router.json'));
  const c = runCommands(e, fixtureText('commands.txt'));
  if (!c.ok) throw new Error('simple_router commands refused');
  return e;
}

const GOOD_FRAMES = ['10.0.0.10', '10.0.1.10', '10.0.2.1'].flatMap((dst, i) =>
  [0, 1, 64].map((ttl) =>
    Buffer.concat([
      ethernet('00:aa:bb:00:00:00', '00:00:00:00:00:01', 0x0800),
      ipv4({ src: '10.0.9.9', dst, ttl, protocol: 17, payloadLength: 12 }),
      udp(1000 + i, 2000, Buffer.from('payload!')),
    ]),
  ),
);

function goodSnapshot(e: P4Engine): string {
  return JSON.stringify(
    GOOD_FRAMES.map((f, i) => snapshot(i % 2 === 0 ? e.process(f, 1) : copyResult(e.processReused(f, 1)))),
  );
}

function copyResult(r: P4Result): P4Result {
  return { ...r, frame: r.frame ? Buffer.from(r.frame) : undefined };
}

// ---- the target ----

interface Counts {
  epochs: number;
  loads: number;
  loaded: number;
  guestLoads: number;
  guestLoaded: number;
  commands: number;
  commandsOk: number;
  devCmds: number;
  frames: number;
  dropped: number;
  refusedByBudget: number;
  longestFrameMs: number;
  longestFrame: string;
  longestLoadMs: number;
  /** Turns over TURN_MS that were GC or the machine, not this process's work. */
  slowTurns: number;
  /** Actions over TURN_MS once that took less when run again. */
  slowOnce: number;
}

function summary(c: Counts): string {
  return `${c.epochs} epochs, ${c.loads} loads (${c.loaded} loaded) + ${c.guestLoads} P4_LOADs (${c.guestLoaded} loaded), ${c.commands} commands (${c.commandsOk} ok, ${c.refusedByBudget} over the guest budget), ${c.devCmds} raw device commands, ${c.frames} frames (${c.dropped} dropped); longest frame ${c.longestFrameMs.toFixed(2)} ms (${c.longestFrame}), longest P4_LOAD ${c.longestLoadMs.toFixed(1)} ms; ${c.slowTurns} loop turns over ${TURN_MS} ms of GC or CPU contention and ${c.slowOnce} actions slow once only`;
}

const ms = (t0: bigint): number => Number(process.hrtime.bigint() - t0) / 1e6;

registerTarget({
  name: 'p4',
  describe:
    'P4 programs (mutated fixtures, prototype-key names and operators, huge sizes), runtime and device commands 70-72, frames (lib/p4)',
  async run(o) {
    const r = new Rnd(o.seed);
    const start = Date.now();
    const c: Counts = {
      epochs: 0,
      loads: 0,
      loaded: 0,
      guestLoads: 0,
      guestLoaded: 0,
      commands: 0,
      commandsOk: 0,
      devCmds: 0,
      frames: 0,
      dropped: 0,
      refusedByBudget: 0,
      longestFrameMs: 0,
      longestFrame: '',
      longestLoadMs: 0,
      slowTurns: 0,
      slowOnce: 0,
    };
    const trail: string[] = [];
    const note = (s: string): void => {
      trail.push(s.length > 160 ? `${s.slice(0, 157)}...` : s);
      if (trail.length > 10) trail.shift();
    };
    const finding = (what: string): FuzzFinding => new FuzzFinding(what, o.seed, c.epochs, [...trail]);
    const protoKeys = Object.getOwnPropertyNames(Object.prototype).join(',');
    const fixtures = FIXTURES.map((f) => fixtureText(f));
    const good = knownGood();
    const want = goodSnapshot(good);
    const checkGood = (when: string): void => {
      if (goodSnapshot(good) !== want)
        throw finding(`${when}: the known-good engine loaded at the start processes frames differently`);
      if (goodSnapshot(knownGood()) !== want)
        throw finding(`${when}: simple_router loaded again processes frames differently`);
      if (Object.getOwnPropertyNames(Object.prototype).join(',') !== protoKeys)
        throw finding(`${when}: Object.prototype changed`);
    };
    let engine: P4Engine | null = null;
    let guest: GuestP4 | null = null;
    let age = 0;
    let life = 0;
    let big: P4Engine | null = null;
    let bigGuest: GuestP4 | null = null;
    let bigFloods = 0;
    let floodMs = 0;
    let shown = 0;
    // The device does one guest action per turn or so: the work here yields every few ms, so a turn
    // holds a few actions at most. A turn over TURN_MS is a finding when it was this process's own
    // work: its wall time less the GC pauses inside it (perf_hooks' gc entries, delivered after the
    // turn, so a turn is judged one turn later), and its CPU time (a turn the OS took the CPU from,
    // on these two shared cores, uses little). The others are counted (slowTurns), not reported.
    let turnAt = performance.now();
    let cpuAt = process.cpuUsage();
    let work = 0;
    let noisy = false; // an action of this turn was slow once and fast again
    let pending: { start: number; end: number; cpu: number; work: number } | undefined;
    const gcs: { start: number; end: number }[] = [];
    const gcWatch = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) gcs.push({ start: e.startTime, end: e.startTime + e.duration });
      if (gcs.length > 256) gcs.splice(0, gcs.length - 256);
    });
    gcWatch.observe({ entryTypes: ['gc'] });
    const judge = (t: { start: number; end: number; cpu: number; work: number }): void => {
      let gc = 0;
      for (const g of gcs) gc += Math.max(0, Math.min(g.end, t.end) - Math.max(g.start, t.start));
      const own = Math.min(t.end - t.start - gc, t.cpu);
      if (own > TURN_MS)
        throw finding(
          `a loop turn of ${(t.end - t.start).toFixed(1)} ms (${gc.toFixed(1)} ms of it GC, ${t.cpu.toFixed(1)} ms CPU; ${t.work} actions)`,
        );
      c.slowTurns++;
    };
    /** Ends the turn once 5 ms were spent in it (now: whatever was spent); `own`: it was this target's own work (making programs, an operator's load), not judged. */
    const tick = async (o: { now?: boolean; own?: boolean } = {}): Promise<void> => {
      const now = performance.now();
      if (now - turnAt < 5 && !o.now) return;
      const cpu = process.cpuUsage(cpuAt);
      const t =
        now - turnAt > TURN_MS && !noisy && !o.own
          ? { start: turnAt, end: now, cpu: (cpu.user + cpu.system) / 1000, work }
          : undefined;
      await new Promise((res) => setImmediate(res));
      if (pending) judge(pending);
      pending = t;
      turnAt = performance.now();
      cpuAt = process.cpuUsage();
      work = 0;
      noisy = false;
    };
    /**
     * One guest-sized action: over TURN_MS on its own is a finding, when
     * running it again (`again`, the same action) takes as long: once is
     * this machine's noise.
     */
    const timed = (what: string, t0: bigint, again?: () => void): void => {
      work++;
      const t = ms(t0);
      if (t <= TURN_MS) return;
      if (again) {
        const t1 = process.hrtime.bigint();
        again();
        if (ms(t1) <= TURN_MS) {
          c.slowOnce++;
          noisy = true;
          return;
        }
      }
      throw finding(`${what} took ${t.toFixed(1)} ms`);
    };

    // a finding's program and frame, written where the message says (to replay by hand)
    const sources = new WeakMap<P4Engine, string>();
    const keep = (e: P4Engine, f: Buffer): string => {
      const src = sources.get(e);
      if (src === undefined) return '';
      const file = path.join(os.tmpdir(), `p4-fuzz-${o.seed}-${c.epochs}`);
      fs.writeFileSync(`${file}.json`, src);
      fs.writeFileSync(`${file}.frame`, f);
      return `; program and frame in ${file}.json and .frame`;
    };
    const frames = async (e: P4Engine, n: number): Promise<void> => {
      for (let i = 0; i < n; i++) {
        await tick();
        const f = randomFrame(r);
        const port = r.below(512);
        const faults = e.stats.faults;
        note(`frame ${f.length} bytes port ${port}`);
        const t0 = process.hrtime.bigint();
        let res: P4Result;
        try {
          res = r.chance(2) ? e.process(f, port) : e.processReused(f, port, r.below(2));
        } catch (err) {
          throw finding(`a frame threw out of the engine: ${(err as Error).stack ?? String(err)}`);
        }
        const t = ms(t0);
        c.frames++;
        if (res.dropped) c.dropped++;
        if (t > c.longestFrameMs) {
          c.longestFrameMs = t;
          const sizes = [
            ...[...e.tables.values()].map(
              (x) => `${x.name}:${x.keys.map((k) => `${k.kind}${k.width}`).join('+')}=${x.entries.size}`,
            ),
            ...[...e.vsets.sets.values()].map((x) => `vs ${x.name}=${x.size}`),
            ...[...e.profiles.values()].map((x) => `ap ${x.name}=${x.held}`),
          ];
          c.longestFrame = `${f.length} bytes, ${e.generated ? 'generated' : 'closures'}, ${sizes.join(' ').slice(0, 200)}`;
        }
        if (e.stats.faults !== faults)
          throw finding(
            `a frame threw inside the program (dropped by the frame guard): ${e.lastFault ?? '?'}${keep(e, f)}`,
          );
        // a frame's first run may compile; only a repeat is held to the bound
        if (t > FRAME_MS) {
          // slow every time, not once (a GC, this machine's other work): the fastest of three runs
          let again = Infinity;
          for (let k = 0; k < 3; k++) {
            const t1 = process.hrtime.bigint();
            e.processReused(f, port);
            again = Math.min(again, ms(t1));
          }
          if (again > FRAME_MS)
            throw finding(
              `a frame took ${again.toFixed(1)} ms at best of three more runs (first run ${t.toFixed(1)} ms; the program's frame cost estimate ${e.frameCost}${keep(e, f)})`,
            );
        }
      }
    };

    const command = async (e: P4Engine, g: GuestP4 | null, line: string): Promise<void> => {
      await tick();
      note(line);
      c.commands++;
      const viaGuest = g !== null && r.chance(2);
      const limit = r.chance(2) ? { maxHeld: P4_GUEST_MAX_TABLE_ENTRIES } : {};
      const run = (): void => {
        if (viaGuest) {
          const res = g!.command(line);
          if (res.status === 0) c.commandsOk++;
          else if (/guest budget/.test(res.out)) c.refusedByBudget++;
        } else {
          const res = runCommand(e, line, limit);
          if (res.ok) c.commandsOk++;
          else if (/guest budget/.test(res.error)) c.refusedByBudget++;
        }
      };
      const t0 = process.hrtime.bigint();
      try {
        run();
      } catch (err) {
        throw finding(`a command threw: ${(err as Error).stack ?? String(err)}`);
      }
      timed('a command', t0, run);
    };

    try {
      while (Date.now() - start < o.ms) {
        c.epochs++;
        if (!engine || age >= life) {
          // a new program: a fixture or a synthetic one, mutated, as an operator's or a guest's
          await tick({ now: true });
          age = 0;
          life = r.pick(ENGINE_EPOCHS);
          const k = r.below(10);
          // a copy: the synthetic programs share objects with the spec helpers, which must not change
          const base: any = structuredClone(
            k < 5
              ? JSON.parse(r.pick(fixtures))
              : k < 7
                ? vsetProgram(r)
                : k < 8
                  ? profileProgram(r)
                  : k < 9
                    ? heavyProgram(r)
                    : exprProgram(r),
          );
          const n = r.pick([0, 0, 1, 1, 2, 3, 5, 10]);
          for (let i = 0; i < n; i++) mutate(r, base);
          let text = JSON.stringify(base);
          if (r.chance(12)) text = breakText(r, text);
          const asGuest = r.chance(2);
          const codegen = !r.chance(3);
          const input = r.chance(4) ? base : text;
          note(`${asGuest ? 'P4_LOAD' : 'load'} ${n} mutations, ${text.length} bytes`);
          await tick({ now: true, own: true });
          const t0 = process.hrtime.bigint();
          if (asGuest) {
            c.guestLoads++;
            const g: GuestP4 = new GuestP4(r.pick(['program', 'program', 'program', 'tables', 'read', 'none']), engine);
            let st: number;
            try {
              st = g.load(text).status;
            } catch (err) {
              throw finding(`P4_LOAD threw: ${(err as Error).stack ?? String(err)}`);
            }
            if (st === 0) {
              c.guestLoaded++;
              engine = g.engine;
              if (engine) sources.set(engine, text);
            }
            guest = g;
          } else {
            c.loads++;
            try {
              engine = P4Engine.load(input, { codegen });
              sources.set(engine, text);
              c.loaded++;
              guest = new GuestP4(r.pick(['tables', 'program', 'read']), engine);
            } catch (err) {
              if (!(err instanceof P4LoadError))
                throw finding(
                  `the loader threw ${(err as Error)?.constructor?.name}, not a P4LoadError: ${(err as Error).stack ?? String(err)}`,
                );
            }
          }
          // a guest's P4_LOAD is one device command, held to the turn limit; an operator's program
          // loads at start-up, before the device serves anyone
          if (asGuest) {
            c.longestLoadMs = Math.max(c.longestLoadMs, ms(t0));
            timed('a P4_LOAD', t0, () => new GuestP4('program').load(text));
          } else await tick({ now: true, own: true });
        }
        age++;
        if (engine) {
          const e: P4Engine = engine;
          const n = r.below(40);
          for (let i = 0; i < n; i++) await command(e, guest, randomCommand(r, e));
          await frames(e, r.below(60));
        }
        if (guest) {
          for (let i = r.below(4); i > 0; i--) {
            const cmd = r.bytes(64);
            cmd[0] = r.chance(4) ? r.below(256) : 70 + r.below(3);
            note(`device command ${cmd[0]} ${cmd.subarray(0, 24).toString('hex')}`);
            c.devCmds++;
            const g: GuestP4 = guest;
            const t0 = process.hrtime.bigint();
            try {
              g.raw(cmd);
              g.identify();
            } catch (err) {
              throw finding(`device command ${cmd[0]} threw: ${(err as Error).stack ?? String(err)}`);
            }
            timed(`device command ${cmd[0]}`, t0, () => {
              g.raw(cmd);
              g.identify();
            });
          }
        }
        // the big engine: an operator's program with room for more than the guest budget, filled by
        // floods of the guest's adds (scope tables), in at most a third of the time; a new one after
        // BIG_FLOODS floods
        if (floodMs < (Date.now() - start) / 3) {
          if (!big || bigFloods >= BIG_FLOODS) {
            bigFloods = 0;
            note('a big engine');
            await tick({ now: true });
            big = P4Engine.load(r.chance(2) ? vsetProgram(r, true) : profileProgram(r, true));
            bigGuest = new GuestP4('tables', big);
            await tick({ now: true, own: true });
          }
          bigFloods++;
          const t0 = Date.now();
          for (const line of flood(r, big, r.pick([5000, 30000]))) {
            if (Date.now() - start >= o.ms) break;
            await command(big, bigGuest, line);
          }
          floodMs += Date.now() - t0;
          await frames(big, 20);
        }
        await tick();
        if (c.epochs % 200 === 0) {
          await tick({ now: true });
          checkGood(`epoch ${c.epochs}`);
          await tick({ now: true, own: true });
        }
        if (Date.now() - start - shown >= 1000) {
          shown = Date.now() - start;
          o.progress(summary(c));
        }
      }
      await tick();
      await new Promise((res) => setImmediate(res));
      if (pending) judge(pending);
    } finally {
      gcWatch.disconnect();
    }
    checkGood('after the run');
    return summary(c);
  },
});
