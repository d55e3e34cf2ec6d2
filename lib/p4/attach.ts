// The P4 engine on the device (issue 15): the server's --p4 options checked
// and loaded before anything is created, and the engine added to the device's
// Ethernet segment as a P4Segment (./segment.ts) behind the endpoints that
// claim frames first (NVMe-oF target, S3 store).
//
//   --p4                   the engine, no program: every frame passes
//   --p4-program FILE      bmv2 JSON, loaded and validated at start
//   --p4-commands FILE     simple_switch CLI lines run at start (table entries)
//   --p4-guest-scope none  what the guest may do to the engine (only none yet)
//
// Guest TX goes in on port 1, host link RX on port 2 (simple_router's
// commands.txt numbering). A dropped frame is claimed and counted
// (segment.stats.dropped); a frame for the other side goes there (rewritten
// if the program rewrote it); a frame for the side it came from goes back
// there (guest TX -> guest RX queue, host RX -> host link).

import * as fs from 'fs';
import type { IonicDevice } from '../ionic/device';
import { P4Engine } from './compile';
import { P4LoadError } from './load';
import { runCommands } from './runtime';
import { P4Segment } from './segment';

/** What --p4-guest-scope accepts today; `none` (the default): the guest has no access to the engine. */
export const P4_GUEST_SCOPES = ['none'] as const;
export type P4GuestScope = (typeof P4_GUEST_SCOPES)[number];

export interface P4CliOptions {
  p4?: boolean;
  program?: string;
  commands?: string;
  guestScope?: string;
}

export interface P4Setup {
  /** null with --p4 alone: frames pass untouched. */
  engine: P4Engine | null;
  programPath: string | null;
  /** Commands run from --p4-commands. */
  commands: number;
  guestScope: P4GuestScope;
}

export type P4SetupResult = { ok: true; value: P4Setup | null } | { ok: false; error: string };

/** Checks and loads the --p4 options; value null when none was given (no engine). Errors are one line. */
export function p4FromCli(o: P4CliOptions, read: (file: string) => string = (f) => fs.readFileSync(f, 'utf8')): P4SetupResult {
  const given = o.p4 === true || o.program !== undefined || o.commands !== undefined || o.guestScope !== undefined;
  if (!given) return { ok: true, value: null };
  const scope = o.guestScope ?? 'none';
  if (!(P4_GUEST_SCOPES as readonly string[]).includes(scope)) {
    return { ok: false, error: `--p4-guest-scope ${scope}: not available (available: ${P4_GUEST_SCOPES.join(', ')}; guest access to the engine is not implemented yet)` };
  }
  if (o.commands !== undefined && o.program === undefined) return { ok: false, error: `--p4-commands ${o.commands}: needs --p4-program (table entries need a program)` };
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

/**
 * Adds the engine to the device's segment (after the endpoints already
 * there). Returns the segment, or null for an engine without a program
 * (nothing to run: frames pass as without --p4).
 */
export function attachP4(device: IonicDevice, engine: P4Engine | null): P4Segment | null {
  if (!engine) return null;
  const lif = device.lif;
  const seg = new P4Segment(engine, {
    // Without a host link the frame is discarded, as the device does on an unplugged port.
    toHost: (frame) => (lif.link ? lif.link.send(frame) : true),
    toGuest: (frame) => lif.sendToGuest(frame),
  });
  device.addEndpoint(seg);
  return seg;
}

/** One line for the start-up log. */
export function describeP4(s: P4Setup): string {
  if (!s.engine) return 'P4 engine without a program (frames pass)';
  return `P4 program ${s.programPath} (${s.commands} commands), guest scope ${s.guestScope}`;
}
