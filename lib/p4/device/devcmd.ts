// The P4 engine's control surface for the guest: device commands 70-72
// (docs/p4.md "Device commands 70-72": unknown opcodes to a guest not given them),
// through BAR0's dev_cmd registers and the Ethernet admin queue alike,
// limited by --p4-guest-scope:
//
//   none     (default) 70-72 fail with EOPCODE (2), as unknown opcodes, and
//            LIF_IDENTIFY does not report the P4 capability
//   read     P4_IDENTIFY; P4_COMMAND with counter_read and register_read
//   tables   read, and every other runtime command (table_add/delete/clear/
//            set_default, counter_reset, register_write/reset, meter_set_rates,
//            parse_vset_add, act_prof_*, table_indirect_*)
//   program  tables, and P4_LOAD (replace the program)
//
// A command the scope does not allow fails with EPERM (4). Layouts (ours: no
// driver defines these opcodes; little-endian like every Ethernet-side
// command, 64-byte command, 16-byte completion):
//
//   70 P4_IDENTIFY   cmd: opcode @0, lif_index le16 @2
//                    comp: scope @4 (1 read, 2 tables, 3 program), flags @5
//                    (bit 0 a program is loaded, bit 1 it runs on RDMA WQEs),
//                    tables le16 @6, counter_arrays le16 @8
//                    data window (dev cmd): text, one `key value` a line:
//                    program, scope, table NAME ENTRIES, counter NAME SIZE; NUL-ended
//   71 P4_COMMAND    cmd: opcode @0, lif_index le16 @2, len le16 @4 (bytes of
//                    the command text, 1..1024), out_len le16 @6 (bytes at
//                    out_pa), text_pa le64 @8 (0: the text is at the start of the
//                    data window, dev cmd only), out_pa le64 @16 (0: the output
//                    goes to the data window, dev cmd only; on the admin queue
//                    without out_pa it is not returned)
//                    comp: handle le32 @4 (the entry, member or group handle;
//                    0xffffffff for none), out_len le16 @8 (output bytes)
//                    One simple_switch CLI command (lib/p4/engine/commands.ts), printable
//                    ASCII, no newline. A refused command: EINVAL, its error as
//                    the output.
//   72 P4_LOAD       cmd: opcode @0, lif_index le16 @2, len le32 @4 (bytes of
//                    the bmv2 JSON, 1..P4_MAX_PROGRAM_BYTES), pa le64 @8
//                    The program replaces the running one (its tables start
//                    empty) only once it is loaded and compiled; a refused one:
//                    EINVAL, the error line in the data window (dev cmd). A
//                    guest's program is held to P4_GUEST_MAX_CELLS array cells,
//                    P4_GUEST_MAX_TABLE_ENTRIES entries in all (table,
//                    action profile and parse value set sizes; the guest's
//                    P4_COMMAND adds stop at the same entry budget) and
//                    P4_GUEST_LIMITS (headers, fields, control nodes, parse
//                    states, primitives: what its load costs).
//
// Other statuses: EINVAL for a bad length, BAD_ADDR (17) when guest memory
// cannot be read or written, ENOENT for P4_COMMAND with no program loaded.
// Nothing here throws for what the guest sent.

import { getField, le as f, setField } from '../../../protocol/field';
import { Status } from '../../ionic/constants';
import type { P4DeviceControl } from '../../ionic/commands';
import { MemStatus } from '../../vfio-user/guest-memory';
import type { GuestMemory } from '../../vfio-user/guest-memory';
import { P4Engine } from '../engine/engine';
import { P4LoadError } from '../program/load';
import { runCommand } from '../engine/commands';
import { vsetLimit } from '../compile/vsets';
import { wqeProgram } from './wqe';

export const P4_GUEST_SCOPES = ['none', 'read', 'tables', 'program'] as const;
export type P4GuestScope = (typeof P4_GUEST_SCOPES)[number];

export const enum P4Opcode {
  IDENTIFY = 70,
  COMMAND = 71,
  LOAD = 72,
}

/** Longest P4_COMMAND text. */
export const P4_MAX_COMMAND_BYTES = 1024;
/**
 * Largest program P4_LOAD takes. It is parsed, checked and compiled in one
 * turn of the event loop, so this and the guest's structure limits below
 * bound that turn (a 1 MiB program of 6,400 headers took 140-390 ms).
 */
export const P4_MAX_PROGRAM_BYTES = 256 * 1024;

const p4_identify_comp = { scope: f(4, 1), flags: f(5, 1), tables: f(6, 2), counter_arrays: f(8, 2) } as const;
const p4_command_cmd = { len: f(4, 2), out_len: f(6, 2), text_pa: f(8, 8), out_pa: f(16, 8) } as const;
const p4_command_comp = { handle: f(4, 4), out_len: f(8, 2) } as const;
const p4_load_cmd = { len: f(4, 4), pa: f(8, 8) } as const;

/** P4_IDENTIFY flags. */
const P4_FLAG_LOADED = 1;
const P4_FLAG_RDMA = 2;

/** Commands the `read` scope allows (they change nothing). */
const READ_COMMANDS = new Set(['counter_read', 'register_read']);

const NO_HANDLE = 0xffffffff;

/** What the control surface works on: the running engine, replaceable. */
export interface P4EngineSlot {
  engine: P4Engine | null;
  /** Replace the program (the WQE filter and the segment follow); an error line if the program cannot run here. */
  replace(engine: P4Engine): string | null;
  readonly programName: string;
}

export class P4Control implements P4DeviceControl {
  readonly advertised: boolean;
  readonly #level: number;
  /** Commands by outcome, for the stats. */
  readonly stats = { commands: 0, refused: 0, loads: 0 };
  #text = Buffer.alloc(P4_MAX_COMMAND_BYTES);

  constructor(
    private readonly slot: P4EngineSlot,
    readonly scope: P4GuestScope,
  ) {
    this.#level = P4_GUEST_SCOPES.indexOf(scope);
    this.advertised = this.#level > 0;
  }

  execute(opcode: number, cmd: Buffer, comp: Buffer, data: Buffer | null, mem: GuestMemory | undefined): number {
    const st = this.#run(opcode, cmd, comp, data, mem);
    if (st === Status.SUCCESS) this.stats.commands++;
    else this.stats.refused++;
    return st;
  }

  #run(opcode: number, cmd: Buffer, comp: Buffer, data: Buffer | null, mem: GuestMemory | undefined): number {
    if (this.#level === 0) return Status.EOPCODE;
    switch (opcode) {
      case P4Opcode.IDENTIFY:
        return this.#identify(comp, data);
      case P4Opcode.COMMAND:
        return this.#command(cmd, comp, data, mem);
      case P4Opcode.LOAD:
        return this.#level < 3 ? Status.EPERM : this.#load(cmd, data, mem);
      default:
        return Status.EOPCODE;
    }
  }

  #identify(comp: Buffer, data: Buffer | null): number {
    const e = this.slot.engine;
    setField(comp, 0, p4_identify_comp.scope, this.#level);
    setField(comp, 0, p4_identify_comp.flags, e ? P4_FLAG_LOADED | (wqeProgram(e) === true ? P4_FLAG_RDMA : 0) : 0);
    setField(comp, 0, p4_identify_comp.tables, e ? Math.min(e.tables.size, 0xffff) : 0);
    setField(comp, 0, p4_identify_comp.counter_arrays, e ? Math.min(e.externs.counters.size, 0xffff) : 0);
    if (data) {
      const lines = [`program ${e ? this.slot.programName : '(none)'}`, `scope ${this.scope}`];
      if (e) {
        for (const t of e.tables.values()) lines.push(`table ${t.name} ${t.entries.size}`);
        for (const c of e.externs.counters.values()) lines.push(`counter ${c.name} ${c.packets.length}`);
      }
      putText(data, lines.join('\n') + '\n');
    }
    return Status.SUCCESS;
  }

  #command(cmd: Buffer, comp: Buffer, data: Buffer | null, mem: GuestMemory | undefined): number {
    setField(comp, 0, p4_command_comp.handle, NO_HANDLE);
    const len = getField(cmd, 0, p4_command_cmd.len);
    const textPa = getField(cmd, 0, p4_command_cmd.text_pa);
    const outPa = getField(cmd, 0, p4_command_cmd.out_pa);
    const outLen = getField(cmd, 0, p4_command_cmd.out_len);
    if (len === 0 || len > P4_MAX_COMMAND_BYTES) return Status.EINVAL;
    const text = this.#text.subarray(0, len);
    if (textPa === 0) {
      if (!data || len > data.length) return Status.EINVAL;
      data.copy(text, 0, 0, len);
    } else {
      if (textPa < 0 || !mem || mem.read(textPa, text) !== MemStatus.OK) return Status.BAD_ADDR;
    }
    for (let i = 0; i < len; i++) {
      const c = text[i]!;
      if ((c < 0x20 || c > 0x7e) && c !== 0x09) return Status.EINVAL;
    }
    const line = text.toString('latin1');
    const word = line.trim().split(/\s+/, 1)[0] ?? '';
    if (this.#level < 2 && !READ_COMMANDS.has(word)) return Status.EPERM;
    const e = this.slot.engine;
    if (!e) return Status.ENOENT;
    const r = runCommand(e, line, { maxHeld: P4_GUEST_MAX_TABLE_ENTRIES });
    const output = r.ok ? r.output : r.error;
    if (r.ok && r.handle !== undefined) setField(comp, 0, p4_command_comp.handle, r.handle >>> 0);
    let written = 0;
    if (outPa !== 0) {
      if (outPa < 0 || !mem) return Status.BAD_ADDR;
      const out = Buffer.from(output, 'latin1').subarray(0, Math.min(outLen, 0xffff));
      if (out.length > 0 && mem.write(outPa, out) !== MemStatus.OK) return Status.BAD_ADDR;
      written = out.length;
    } else if (data) {
      written = putText(data, output);
    }
    setField(comp, 0, p4_command_comp.out_len, written);
    return r.ok ? Status.SUCCESS : Status.EINVAL;
  }

  #load(cmd: Buffer, data: Buffer | null, mem: GuestMemory | undefined): number {
    const len = getField(cmd, 0, p4_load_cmd.len);
    const pa = getField(cmd, 0, p4_load_cmd.pa);
    if (len === 0 || len > P4_MAX_PROGRAM_BYTES) return Status.EINVAL;
    if (pa <= 0 || !mem) return Status.BAD_ADDR;
    const text = Buffer.allocUnsafe(len);
    if (mem.read(pa, text) !== MemStatus.OK) return Status.BAD_ADDR;
    let engine: P4Engine;
    try {
      const json: unknown = JSON.parse(text.toString('utf8'));
      const over = overBudget(json);
      if (over) {
        if (data) putText(data, over);
        return Status.EINVAL;
      }
      engine = P4Engine.load(json);
    } catch (e) {
      // A P4LoadError names what was refused; anything else the loader threw is still the guest's bad program.
      if (data) putText(data, e instanceof P4LoadError ? e.message : `not loadable: ${(e as Error).message}`);
      return Status.EINVAL;
    }
    const why = this.slot.replace(engine);
    if (why !== null) {
      if (data) putText(data, why);
      return Status.EINVAL;
    }
    this.stats.loads++;
    return Status.SUCCESS;
  }
}

/**
 * What a guest's program may make the server hold (an operator's program
 * from --p4-program is trusted and only bound by the loader's own limits):
 * cells of counter, meter and register arrays, summed; and entries: table
 * sizes, action profile sizes (members, and as many groups with a
 * selector) and parse value set sizes (../compile/vsets.ts), summed. Checked on the
 * JSON before anything is compiled; an error line, or null. What the guest
 * then adds through P4_COMMAND (whoever loaded the program) is held to the
 * same entry budget as it goes, group memberships included (../engine/commands.ts,
 * CommandOptions.maxHeld).
 */
const P4_GUEST_MAX_CELLS = 1 << 20;
export const P4_GUEST_MAX_TABLE_ENTRIES = 1 << 16;

/** An own property of a JSON object (never one of Object.prototype's). */
function own(o: unknown, k: string): unknown {
  return typeof o === 'object' && o !== null && Object.hasOwn(o, k) ? (o as Record<string, unknown>)[k] : undefined;
}

/** A declared size as a count (absent, negative or not a number: 0; the loader refuses the bad ones). */
function count(o: unknown, k: string): number {
  const n = Number(own(o, k));
  return Number.isFinite(n) && n > 0 ? n : 0;
}

function list(o: unknown, k: string): unknown[] {
  const v = own(o, k);
  return Array.isArray(v) ? v : [];
}

/**
 * How much of each costly construct a guest's program may have: what the
 * compile builds per header, field, control node, parse state and
 * primitive (closures, layouts) is what a load costs, so these bound the
 * P4_LOAD turn with the byte limit (each at its limit loads in a few tens
 * of ms at most on a shared 2-CPU machine). Real programs have far fewer.
 */
export const P4_GUEST_LIMITS = { headers: 256, fields: 4096, nodes: 256, states: 256, primitives: 4096 } as const;

function overBudget(json: unknown): string | null {
  if (typeof json !== 'object' || json === null) return null; // the loader refuses it with its path
  let cells = 0;
  for (const k of ['counter_arrays', 'meter_arrays', 'register_arrays'])
    for (const a of list(json, k)) cells += count(a, 'size');
  if (cells > P4_GUEST_MAX_CELLS)
    return `counter, meter and register arrays of ${cells} cells: a guest's program may have at most ${P4_GUEST_MAX_CELLS}`;
  let tables = 0;
  let profiles = 0;
  let nodes = 0;
  for (const pl of list(json, 'pipelines')) {
    for (const t of list(pl, 'tables')) tables += count(t, 'max_size');
    for (const ap of list(pl, 'action_profiles'))
      profiles += count(ap, 'max_size') * (own(ap, 'selector') === undefined ? 1 : 2);
    nodes += list(pl, 'tables').length + list(pl, 'conditionals').length + list(pl, 'action_calls').length;
  }
  let vsets = 0;
  for (const v of list(json, 'parse_vsets'))
    vsets += own(v, 'max_size') === undefined ? vsetLimit(undefined) : count(v, 'max_size') || vsetLimit(0);
  const entries = tables + profiles + vsets;
  if (entries > P4_GUEST_MAX_TABLE_ENTRIES) {
    return `${entries} entries in all (tables ${tables}, action profile members and groups ${profiles}, parse value sets ${vsets}): a guest's program may have at most ${P4_GUEST_MAX_TABLE_ENTRIES}`;
  }
  // the structure the compile builds (fields: of every header instance, by its type)
  const typeFields = new Map<unknown, number>();
  for (const t of list(json, 'header_types')) typeFields.set(own(t, 'name'), list(t, 'fields').length);
  let fields = 0;
  for (const h of list(json, 'headers')) fields += typeFields.get(own(h, 'header_type')) ?? 0;
  let states = 0;
  let primitives = 0;
  for (const ps of list(json, 'parsers')) {
    for (const st of list(ps, 'parse_states')) {
      states++;
      primitives += list(st, 'parser_ops').length;
    }
  }
  for (const a of list(json, 'actions')) primitives += list(a, 'primitives').length;
  const have = { headers: list(json, 'headers').length, fields, nodes, states, primitives };
  for (const [k, limit] of Object.entries(P4_GUEST_LIMITS)) {
    const n = have[k as keyof typeof have];
    if (n > limit)
      return `${n} ${k === 'nodes' ? 'tables, conditionals and action calls' : k === 'primitives' ? 'primitives and parser operations' : k}: a guest's program may have at most ${limit}`;
  }
  return null;
}

/** `s` (ASCII) at the start of the window, NUL-ended, cut to fit; the bytes written before the NUL. */
function putText(data: Buffer, s: string): number {
  const n = Math.min(Buffer.byteLength(s, 'latin1'), data.length - 1);
  data.write(s, 0, n, 'latin1');
  data[n] = 0;
  return n;
}
