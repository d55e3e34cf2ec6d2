// The P4 engine on the device (issue 15): the server's --p4 options checked
// and loaded before anything is created, then the engine put on the device's
// two paths and its control surface:
//
//   --p4                   the engine, no program: every frame and WQE passes
//   --p4-program FILE      bmv2 JSON, loaded and validated at start
//   --p4-commands FILE     simple_switch CLI lines run at start (table entries)
//   --p4-guest-scope S     what the guest may do through device commands
//                          70-72: none (default), read, tables, program (./devcmd.ts)
//
// Ethernet: a P4Segment (./segment.ts) behind the endpoints that claim frames
// first (NVMe-oF target, S3 store); guest TX goes in on port 1, host link RX
// on port 2 (simple_router's commands.txt numbering). A dropped frame is
// claimed and counted (segment.stats.dropped); a frame for the other side goes
// there (rewritten if the program rewrote it); a frame for the side it came
// from goes back there (guest TX -> guest RX queue, host RX -> host link).
// RDMA: a program that declares the `ernic_wqe` header also runs on every
// send WQE (./wqe.ts, port 3).

import * as fs from 'fs';
import * as path from 'path';
import type { IonicDevice } from '../../ionic/device';
import { P4Engine } from '../engine/engine';
import { P4Control, P4EngineSlot, P4GuestScope, P4_GUEST_SCOPES } from './devcmd';
import { P4LoadError } from '../program/load';
import { runCommands } from '../engine/commands';
import { P4Segment } from './segment';
import { P4WqeFilter, wqeProgram } from './wqe';

interface P4CliOptions {
  p4?: boolean;
  program?: string;
  commands?: string;
  guestScope?: string;
}

interface P4Setup {
  /** null with --p4 alone: frames pass untouched. */
  engine: P4Engine | null;
  programPath: string | null;
  /** Commands run from --p4-commands. */
  commands: number;
  guestScope: P4GuestScope;
}

type P4SetupResult = { ok: true; value: P4Setup | null } | { ok: false; error: string };

/** Checks and loads the --p4 options; value null when none was given (no engine). Errors are one line. */
export function p4FromCli(
  o: P4CliOptions,
  read: (file: string) => string = (f) => fs.readFileSync(f, 'utf8'),
): P4SetupResult {
  const given = o.p4 === true || o.program !== undefined || o.commands !== undefined || o.guestScope !== undefined;
  if (!given) return { ok: true, value: null };
  const scope = o.guestScope ?? 'none';
  if (!(P4_GUEST_SCOPES as readonly string[]).includes(scope)) {
    return { ok: false, error: `--p4-guest-scope ${scope}: not a scope (available: ${P4_GUEST_SCOPES.join(', ')})` };
  }
  if (o.commands !== undefined && o.program === undefined)
    return { ok: false, error: `--p4-commands ${o.commands}: needs --p4-program (table entries need a program)` };
  let engine: P4Engine | null = null;
  if (o.program !== undefined) {
    let text: string;
    try {
      text = read(o.program);
    } catch (e) {
      return { ok: false, error: `--p4-program ${o.program}: cannot read: ${(e as Error).message}` };
    }
    try {
      engine = P4Engine.load(text);
    } catch (e) {
      if (e instanceof P4LoadError) return { ok: false, error: `--p4-program ${o.program}: ${e.message}` };
      throw e;
    }
    const wqe = wqeProgram(engine);
    if (typeof wqe === 'string') return { ok: false, error: `--p4-program ${o.program}: ${wqe}` };
  }
  let commands = 0;
  if (o.commands !== undefined && engine) {
    let text: string;
    try {
      text = read(o.commands);
    } catch (e) {
      return { ok: false, error: `--p4-commands ${o.commands}: cannot read: ${(e as Error).message}` };
    }
    const r = runCommands(engine, text);
    if (!r.ok) {
      const last = r.results[r.results.length - 1];
      const why = last && !last.ok ? last.error : 'refused';
      return { ok: false, error: `--p4-commands ${o.commands}: line ${r.line}: ${why}` };
    }
    commands = r.results.length;
  }
  return { ok: true, value: { engine, programPath: o.program ?? null, commands, guestScope: scope as P4GuestScope } };
}

/** The engine on one device: the segment, the WQE filter and the guest's control surface share one slot. */
export class P4Attachment implements P4EngineSlot {
  readonly segment: P4Segment;
  readonly wqe: P4WqeFilter;
  readonly control: P4Control;
  #engine: P4Engine | null;
  /** The engine WQEs run through: the program when it declares ernic_wqe. */
  #wqeEngine: P4Engine | null = null;
  readonly #device: IonicDevice;
  #name: string;

  constructor(device: IonicDevice, engine: P4Engine | null, scope: P4GuestScope, programPath: string | null) {
    this.#engine = engine;
    this.#name = programPath ? path.basename(programPath) : '(none)';
    const lif = device.lif;
    this.segment = new P4Segment(engine, {
      // Without a host link the frame is discarded, as the device does on an unplugged port.
      toHost: (frame) => (lif.link ? lif.link.send(frame) : true),
      toGuest: (frame) => lif.sendToGuest(frame),
    });
    device.addEndpoint(this.segment);
    this.wqe = new P4WqeFilter(() => this.#wqeEngine);
    this.#device = device;
    this.control = new P4Control(this, scope);
    device.setP4Control(this.control);
    this.#setWqeEngine(engine && wqeProgram(engine) === true ? engine : null);
  }

  /** The data path calls the filter only while a WQE program runs (no checks, no cost per WQE otherwise). */
  #setWqeEngine(e: P4Engine | null): void {
    this.#wqeEngine = e;
    const rdma = this.#device.rdma;
    if (!rdma || (rdma.hooks.sendFilter === this.wqe) === (e !== null)) return;
    const { sendFilter: _old, ...rest } = rdma.hooks;
    rdma.hooks = e ? { ...rest, sendFilter: this.wqe } : rest;
  }

  get engine(): P4Engine | null {
    return this.#engine;
  }

  get programName(): string {
    return this.#name;
  }

  replace(engine: P4Engine): string | null {
    const wqe = wqeProgram(engine);
    if (typeof wqe === 'string') return wqe;
    this.#engine = engine;
    this.#name = '(loaded by the guest)';
    this.segment.engine = engine;
    this.#setWqeEngine(wqe ? engine : null);
    return null;
  }
}

/**
 * Puts the engine on the device: the Ethernet segment (after the endpoints
 * already there), the RDMA send filter, and device commands 70-72 within
 * `scope`. With no program every frame and WQE passes until a guest with
 * scope `program` loads one.
 */
export function attachP4(
  device: IonicDevice,
  engine: P4Engine | null,
  scope: P4GuestScope = 'none',
  programPath: string | null = null,
): P4Attachment {
  return new P4Attachment(device, engine, scope, programPath);
}

/** One line for the start-up log. */
export function describeP4(s: P4Setup): string {
  const wqe = s.engine && wqeProgram(s.engine) === true ? ', on RDMA send WQEs too' : '';
  if (!s.engine) return `P4 engine without a program (frames pass), guest scope ${s.guestScope}`;
  return `P4 program ${s.programPath} (${s.commands} commands${wqe}), guest scope ${s.guestScope}`;
}
