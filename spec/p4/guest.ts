// Device commands 70-72 in process: the P4Control the device routes them to
// (lib/p4/device/devcmd.ts), with a plain Buffer as guest memory and the data
// window, and a slot that replaces the engine as the attachment does. For
// the specs and the p4 fuzz target, which drive the guest's entry without a
// vfio-user socket. Commands are laid out by hand as devcmd.ts documents them.

import { P4Engine } from '../../lib/p4/engine/engine';
import { P4Control, P4EngineSlot, P4GuestScope, P4Opcode } from '../../lib/p4/device/devcmd';
import { wqeProgram } from '../../lib/p4/device/wqe';
import { BufferMemory } from '../../lib/vfio-user/buffer-memory';

/** Where the program text goes in the fake guest memory (P4_LOAD's pa). */
const PROGRAM_PA = 0x10000;
const MEMORY_BYTES = PROGRAM_PA + (1 << 20) + 4096;
/** The dev cmd data window's size (ionic: 2 KiB). */
const DATA_BYTES = 2048;

class Slot implements P4EngineSlot {
  engine: P4Engine | null = null;
  programName = '(none)';
  replace(e: P4Engine): string | null {
    const w = wqeProgram(e);
    if (typeof w === 'string') return w;
    this.engine = e;
    this.programName = '(loaded by the guest)';
    return null;
  }
}

interface GuestResult {
  status: number;
  /** The data window's text up to its NUL. */
  out: string;
  handle: number;
}

export class GuestP4 {
  readonly slot = new Slot();
  readonly control: P4Control;
  readonly memory = new BufferMemory(Buffer.alloc(MEMORY_BYTES));
  readonly #data = Buffer.alloc(DATA_BYTES);
  readonly #cmd = Buffer.alloc(64);
  readonly #comp = Buffer.alloc(16);

  constructor(scope: P4GuestScope, engine: P4Engine | null = null) {
    this.slot.engine = engine;
    this.control = new P4Control(this.slot, scope);
  }

  get engine(): P4Engine | null {
    return this.slot.engine;
  }

  #exec(op: number): GuestResult {
    this.#cmd[0] = op;
    const status = this.control.execute(op, this.#cmd, this.#comp, this.#data, this.memory);
    const nul = this.#data.indexOf(0);
    return {
      status,
      out: this.#data.subarray(0, nul < 0 ? this.#data.length : nul).toString('latin1'),
      handle: this.#comp.readUInt32LE(4),
    };
  }

  /** P4_LOAD of `program` (text, or an object as JSON); bytes past 1 MiB are cut. */
  load(program: string | unknown): GuestResult & { text: string } {
    const text = Buffer.from(typeof program === 'string' ? program : JSON.stringify(program), 'utf8');
    const len = Math.min(text.length, MEMORY_BYTES - PROGRAM_PA);
    text.copy(this.memory.buffer, PROGRAM_PA, 0, len);
    this.#cmd.fill(0);
    this.#data.fill(0);
    this.#cmd.writeUInt32LE(len, 4);
    this.#cmd.writeBigUInt64LE(BigInt(PROGRAM_PA), 8);
    const r = this.#exec(P4Opcode.LOAD);
    return { ...r, text: r.out };
  }

  /** P4_COMMAND with the text in the data window (latin1, cut to the window). */
  command(line: string): GuestResult {
    const t = Buffer.from(line, 'latin1').subarray(0, DATA_BYTES);
    this.#cmd.fill(0);
    this.#data.fill(0);
    t.copy(this.#data);
    this.#cmd.writeUInt16LE(t.length, 4);
    return this.#exec(P4Opcode.COMMAND);
  }

  /** P4_IDENTIFY. */
  identify(): GuestResult {
    this.#cmd.fill(0);
    this.#data.fill(0);
    return this.#exec(P4Opcode.IDENTIFY);
  }

  /** A raw command of any opcode with these bytes (the fuzz target's mutated layouts). */
  raw(cmd: Buffer): GuestResult {
    this.#cmd.fill(0);
    cmd.copy(this.#cmd, 0, 0, Math.min(cmd.length, 64));
    return this.#exec(this.#cmd[0]!);
  }
}

export function guestControl(scope: P4GuestScope, engine: P4Engine | null = null): GuestP4 {
  return new GuestP4(scope, engine);
}
