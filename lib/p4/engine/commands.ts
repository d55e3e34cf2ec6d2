// Runtime control of a loaded program in simple_switch CLI syntax (the
// fixtures' commands.txt):
//   table_add T A k1 k2 ... => p1 p2 ... [priority]
//   table_set_default T A p1 p2 ...
//   table_delete T HANDLE | table_clear T
//   counter_read C INDEX | counter_reset C
//   register_read R INDEX | register_write R INDEX VALUE | register_reset R
//   meter_set_rates M INDEX CIR:CBS PIR:PBS   (rates per microsecond, bursts in units; a direct
//     meter's INDEX is the entry handle)
//   parse_vset_add V VALUE    (at most the set's max_size values; see ../compile/vsets.ts)
//   act_prof_create_member P A p1 ... | act_prof_create_group P | act_prof_add_member_to_group P MBR GRP
//   table_indirect_add T k... => MBR [priority] | table_indirect_add_with_group T k... => GRP [priority]
//   table_indirect_set_default T MBR
// Values: decimal, 0x hex, a.b.c.d, aa:bb:cc:dd:ee:ff; key forms: exact V,
// lpm V/LEN, ternary V&&&MASK, range LO->HI, valid 0|1|true|false, optional
// V or * (wildcard). Commands can come from outside (a guest through device
// commands, a file), so a bad one is an error value, never a throw. Every
// name is looked up in a Map. A guest's commands run with its budget
// (CommandOptions.maxHeld): an add past it is refused.

import { CompiledAction } from '../compile/actions';
import { P4Engine } from './engine';
import { exactSpec, lpmSpec, MatchSpec, rangeSpec, ternarySpec, wildcardSpec } from '../compile/tables/entries';
import { MatchTable } from '../compile/tables/match-table';

type CommandResult = { ok: true; output: string; handle?: number } | { ok: false; error: string };

/** Longest command line accepted. */
const MAX_COMMAND_LENGTH = 4096;

const fail = (error: string): CommandResult => ({ ok: false, error });
const ok = (output = '', handle?: number): CommandResult =>
  handle === undefined ? { ok: true, output } : { ok: true, output, handle };

/** Parses one value token into a bigint no wider than `width` bits; undefined if malformed or too wide. */
function parseValue(tok: string, width: number): bigint | undefined {
  let v: bigint;
  if (/^0x[0-9a-fA-F]+$/.test(tok) || /^[0-9]+$/.test(tok)) v = BigInt(tok);
  else if (/^\d{1,3}(\.\d{1,3}){3}$/.test(tok)) {
    const p = tok.split('.').map(Number);
    if (p.some((x) => x > 255)) return undefined;
    v = p.reduce((a, x) => (a << 8n) | BigInt(x), 0n);
  } else if (/^[0-9a-fA-F]{1,2}(:[0-9a-fA-F]{1,2}){5}$/.test(tok)) {
    v = tok.split(':').reduce((a, x) => (a << 8n) | BigInt(parseInt(x, 16)), 0n);
  } else return undefined;
  if (v >> BigInt(width) !== 0n) return undefined;
  return v;
}

function table(engine: P4Engine, name: string | undefined): MatchTable | string {
  const t = name === undefined ? undefined : engine.tables.get(name);
  return t ?? `no table ${JSON.stringify(name ?? '')}`;
}

function actionOf(t: MatchTable, name: string | undefined): CompiledAction | string {
  const a = name === undefined ? undefined : t.actions.get(name);
  return a ?? `table ${t.name} has no action ${JSON.stringify(name ?? '')}`;
}

function actionData(a: CompiledAction, toks: string[]): bigint[] | string {
  if (toks.length !== a.params.length) return `${a.name} takes ${a.params.length} parameters, got ${toks.length}`;
  const out: bigint[] = [];
  for (let i = 0; i < toks.length; i++) {
    const v = parseValue(toks[i]!, a.params[i]!.bitwidth);
    if (v === undefined)
      return `bad value ${JSON.stringify(toks[i])} for ${a.params[i]!.name} (${a.params[i]!.bitwidth} bits)`;
    out.push(v);
  }
  return out;
}

function keySpec(t: MatchTable, i: number, tok: string): MatchSpec | string {
  const k = t.keys[i]!;
  const bad = `bad ${k.kind} key ${JSON.stringify(tok)} (${k.width} bits)`;
  switch (k.kind) {
    case 'exact': {
      const v = parseValue(tok, k.width);
      return v === undefined ? bad : exactSpec(v, k.width);
    }
    case 'valid': {
      const v = tok === 'true' || tok === '1' ? 1n : tok === 'false' || tok === '0' ? 0n : undefined;
      return v === undefined ? bad : exactSpec(v, 1);
    }
    case 'lpm': {
      const m = /^(.+)\/(\d+)$/.exec(tok);
      const v = m ? parseValue(m[1]!, k.width) : undefined;
      const len = m ? Number(m[2]) : -1;
      return v === undefined || len > k.width ? bad : lpmSpec(v, len, k.width);
    }
    case 'ternary': {
      const m = /^(.+)&&&(.+)$/.exec(tok);
      const v = m ? parseValue(m[1]!, k.width) : undefined;
      const mask = m ? parseValue(m[2]!, k.width) : undefined;
      return v === undefined || mask === undefined ? bad : ternarySpec(v, mask);
    }
    case 'range': {
      const m = /^(.+)->(.+)$/.exec(tok);
      const lo = m ? parseValue(m[1]!, k.width) : undefined;
      const hi = m ? parseValue(m[2]!, k.width) : undefined;
      return lo === undefined || hi === undefined || lo > hi ? bad : rangeSpec(lo, hi);
    }
    case 'optional': {
      if (tok === '*') return wildcardSpec();
      const v = parseValue(tok, k.width);
      return v === undefined ? bad : exactSpec(v, k.width);
    }
  }
}

function tableAdd(engine: P4Engine, args: string[], o: CommandOptions): CommandResult {
  const t = table(engine, args[0]);
  if (typeof t === 'string') return fail(t);
  const a = actionOf(t, args[1]);
  if (typeof a === 'string') return fail(a);
  if (t.profile) return fail(`table ${t.name} is indirect: use table_indirect_add`);
  const rest = args.slice(2);
  const arrow = rest.indexOf('=>');
  const keyToks = arrow < 0 ? rest : rest.slice(0, arrow);
  let dataToks = arrow < 0 ? [] : rest.slice(arrow + 1);
  if (keyToks.length !== t.keys.length)
    return fail(`table ${t.name} has ${t.keys.length} key parts, got ${keyToks.length}`);
  let priority = 0;
  if (t.needsPriority) {
    if (dataToks.length !== a.params.length + 1)
      return fail(`table ${t.name} needs a priority after ${a.params.length} action parameters`);
    const p = dataToks[dataToks.length - 1]!;
    if (!/^\d{1,9}$/.test(p)) return fail(`bad priority ${JSON.stringify(p)}`);
    priority = Number(p);
    dataToks = dataToks.slice(0, -1);
  }
  const key: MatchSpec[] = [];
  for (let i = 0; i < keyToks.length; i++) {
    const s = keySpec(t, i, keyToks[i]!);
    if (typeof s === 'string') return fail(s);
    key.push(s);
  }
  const data = actionData(a, dataToks);
  if (typeof data === 'string') return fail(data);
  const full = room(engine, o);
  if (full) return fail(full);
  const h = t.add(key, a, data, priority);
  if (typeof h === 'string') return fail(h);
  return ok(`Entry has been added with handle ${h}`, h);
}

/** table_indirect_add T KEYS => MEMBER [PRIORITY] and table_indirect_add_with_group T KEYS => GROUP [PRIORITY]. */
function tableIndirectAdd(engine: P4Engine, args: string[], group: boolean, o: CommandOptions): CommandResult {
  const t = table(engine, args[0]);
  if (typeof t === 'string') return fail(t);
  const ap = t.profile;
  if (!ap) return fail(`table ${t.name} is not indirect`);
  const rest = args.slice(1);
  const arrow = rest.indexOf('=>');
  if (arrow < 0) return fail('missing "=>"');
  const keyToks = rest.slice(0, arrow);
  const after = rest.slice(arrow + 1);
  if (keyToks.length !== t.keys.length)
    return fail(`table ${t.name} has ${t.keys.length} key parts, got ${keyToks.length}`);
  if (after.length !== (t.needsPriority ? 2 : 1))
    return fail(t.needsPriority ? 'want a handle and a priority after "=>"' : 'want one handle after "=>"');
  if (!after.every((x) => /^\d{1,9}$/.test(x)))
    return fail(`bad handle or priority ${JSON.stringify(after.join(' '))}`);
  const ref = Number(after[0]);
  if (group ? !ap.groups.has(ref) : !ap.members.has(ref))
    return fail(`action profile ${ap.name} has no ${group ? 'group' : 'member'} ${ref}`);
  const key: MatchSpec[] = [];
  for (let i = 0; i < keyToks.length; i++) {
    const s = keySpec(t, i, keyToks[i]!);
    if (typeof s === 'string') return fail(s);
    key.push(s);
  }
  const full = room(engine, o);
  if (full) return fail(full);
  const h = t.add(key, undefined, [], t.needsPriority ? Number(after[1]) : 0, ref, group);
  if (typeof h === 'string') return fail(h);
  return ok(`Entry has been added with handle ${h}`, h);
}

function profileCommand(engine: P4Engine, cmd: string, args: string[], o: CommandOptions): CommandResult {
  const ap = args[0] === undefined ? undefined : engine.profiles.get(args[0]);
  if (!ap) return fail(`no action profile ${JSON.stringify(args[0] ?? '')}`);
  if (cmd === 'act_prof_create_member') {
    const a = args[1] === undefined ? undefined : ap.actions.get(args[1]);
    if (!a) return fail(`action profile ${ap.name} has no action ${JSON.stringify(args[1] ?? '')}`);
    const data = actionData(a, args.slice(2));
    if (typeof data === 'string') return fail(data);
    const full = room(engine, o);
    if (full) return fail(full);
    const h = ap.addMember(a, data);
    return typeof h === 'string' ? fail(h) : ok(`Member has been created with handle ${h}`, h);
  }
  if (cmd === 'act_prof_create_group') {
    const full = ap.selector ? room(engine, o) : undefined; // a profile without a selector refuses below
    if (full) return fail(full);
    const h = ap.addGroup();
    return typeof h === 'string' ? fail(h) : ok(`Group has been created with handle ${h}`, h);
  }
  const [m, g] = [args[1], args[2]];
  if (m === undefined || g === undefined || !/^\d{1,9}$/.test(m) || !/^\d{1,9}$/.test(g))
    return fail('want MEMBER GROUP');
  const why = ap.checkAddToGroup(Number(m), Number(g)) ?? room(engine, o);
  if (why) return fail(why);
  const err = ap.addToGroup(Number(m), Number(g));
  return err === undefined ? ok() : fail(err);
}

function tableSetDefault(engine: P4Engine, args: string[]): CommandResult {
  const t = table(engine, args[0]);
  if (typeof t === 'string') return fail(t);
  if (t.defaultConst) return fail(`table ${t.name} has a const default action`);
  if (t.profile) return fail(`table ${t.name} is indirect: use table_indirect_set_default`);
  const a = actionOf(t, args[1]);
  if (typeof a === 'string') return fail(a);
  const data = actionData(a, args.slice(2));
  if (typeof data === 'string') return fail(data);
  t.setDefault(a, data);
  return ok();
}

function index(tok: string | undefined, size: number): number | string {
  if (tok === undefined || !/^\d{1,9}$/.test(tok) || Number(tok) >= size)
    return `bad index ${JSON.stringify(tok ?? '')} (size ${size})`;
  return Number(tok);
}

interface CommandOptions {
  /**
   * Most entries the engine may hold after a command adds one (table
   * entries, action profile members, groups and group memberships, value
   * set values: P4Engine.held()); the guest's commands run with its budget.
   */
  readonly maxHeld?: number;
}

/** Why an add would pass `o.maxHeld`, or undefined when it fits. */
function room(engine: P4Engine, o: CommandOptions): string | undefined {
  const limit = o.maxHeld;
  if (limit === undefined || engine.held() < limit) return undefined;
  return `the guest budget of ${limit} entries (table entries, action profile members, groups and group members, value set values) is used up`;
}

/** Runs one command line against the engine. */
export function runCommand(engine: P4Engine, line: string, o: CommandOptions = {}): CommandResult {
  if (line.length > MAX_COMMAND_LENGTH) return fail(`command longer than ${MAX_COMMAND_LENGTH} characters`);
  const toks = line
    .trim()
    .split(/\s+/)
    .filter((x) => x !== '');
  const [cmd, ...args] = toks;
  switch (cmd) {
    case undefined:
      return ok();
    case 'table_add':
      return tableAdd(engine, args, o);
    case 'table_set_default':
      return tableSetDefault(engine, args);
    case 'table_indirect_add':
      return tableIndirectAdd(engine, args, false, o);
    case 'table_indirect_add_with_group':
      return tableIndirectAdd(engine, args, true, o);
    case 'table_indirect_set_default': {
      const t = table(engine, args[0]);
      if (typeof t === 'string') return fail(t);
      if (!t.profile) return fail(`table ${t.name} is not indirect`);
      const m = args[1] !== undefined && /^\d{1,9}$/.test(args[1]) ? t.profile.members.get(Number(args[1])) : undefined;
      if (!m) return fail(`action profile ${t.profile.name} has no member ${JSON.stringify(args[1] ?? '')}`);
      t.setDefault(m.action, m.data);
      return ok();
    }
    case 'act_prof_create_member':
    case 'act_prof_create_group':
    case 'act_prof_add_member_to_group':
      return profileCommand(engine, cmd, args, o);
    case 'table_delete': {
      const t = table(engine, args[0]);
      if (typeof t === 'string') return fail(t);
      const h = args[1] !== undefined && /^\d+$/.test(args[1]) ? Number(args[1]) : -1;
      return t.delete(h) ? ok() : fail(`table ${t.name} has no entry ${JSON.stringify(args[1] ?? '')}`);
    }
    case 'table_clear': {
      const t = table(engine, args[0]);
      if (typeof t === 'string') return fail(t);
      t.clear();
      return ok();
    }
    case 'counter_read':
    case 'counter_reset': {
      const c = args[0] === undefined ? undefined : engine.externs.counters.get(args[0]);
      if (!c) return fail(`no counter array ${JSON.stringify(args[0] ?? '')}`);
      if (cmd === 'counter_reset') {
        c.reset();
        return ok();
      }
      const i = index(args[1], c.packets.length);
      if (typeof i === 'string') return fail(i);
      return ok(`${c.name}[${i}]= (${c.bytes[i]} bytes, ${c.packets[i]} packets)`);
    }
    case 'register_read':
    case 'register_write':
    case 'register_reset': {
      const r = args[0] === undefined ? undefined : engine.externs.registers.get(args[0]);
      if (!r) return fail(`no register array ${JSON.stringify(args[0] ?? '')}`);
      if (cmd === 'register_reset') {
        r.cells.fill(0n);
        return ok();
      }
      const i = index(args[1], r.cells.length);
      if (typeof i === 'string') return fail(i);
      if (cmd === 'register_read') return ok(`${r.name}[${i}]= ${r.cells[i]}`);
      const v = args[2] === undefined ? undefined : parseValue(args[2], r.bitwidth);
      if (v === undefined) return fail(`bad value ${JSON.stringify(args[2] ?? '')} (${r.bitwidth} bits)`);
      r.cells[i] = v;
      return ok();
    }
    case 'meter_set_rates': {
      const m = args[0] === undefined ? undefined : engine.externs.meters.get(args[0]);
      if (!m) return fail(`no meter array ${JSON.stringify(args[0] ?? '')}`);
      let i: number | string;
      if (m.direct) {
        // a direct meter is addressed by the entry handle of its table
        const e =
          args[1] !== undefined && /^\d{1,9}$/.test(args[1])
            ? engine.tables.get(m.direct.binding)?.entries.get(Number(args[1]))
            : undefined;
        i = e ? e.slot : `table ${m.direct.binding} has no entry ${JSON.stringify(args[1] ?? '')}`;
      } else i = index(args[1], m.size);
      if (typeof i === 'string') return fail(i);
      const rates = args.slice(2).map((r) => r.split(':').map(Number));
      if (rates.length !== 2 || rates.some((r) => r.length !== 2 || r.some((x) => !Number.isFinite(x) || x < 0))) {
        return fail('meter_set_rates wants CIR:CBS PIR:PBS');
      }
      m.setRates(i, rates[0]![0]!, rates[0]![1]!, rates[1]![0]!, rates[1]![1]!);
      return ok();
    }
    case 'parse_vset_add': {
      const set = args[0] === undefined ? undefined : engine.vsets.sets.get(args[0]);
      if (!set) return fail(`no parse value set ${JSON.stringify(args[0] ?? '')}`);
      const v = args[1] === undefined ? undefined : parseValue(args[1], set.width);
      if (v === undefined) return fail(`bad value ${JSON.stringify(args[1] ?? '')} (${set.width} bits)`);
      if (set.has(v)) return ok();
      const full = room(engine, o);
      if (full) return fail(full);
      const err = set.add(v);
      return err === undefined ? ok() : fail(err);
    }
    default:
      return fail(`unknown command ${JSON.stringify(cmd)}`);
  }
}

/** Runs a commands.txt-style text (one command a line, # comments); stops at the first failure. */
export function runCommands(engine: P4Engine, text: string): { ok: boolean; results: CommandResult[]; line?: number } {
  const results: CommandResult[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const l = lines[i]!.replace(/#.*$/, '').trim();
    if (l === '') continue;
    const r = runCommand(engine, l);
    results.push(r);
    if (!r.ok) return { ok: false, results, line: i + 1 };
  }
  return { ok: true, results };
}

/** A table entry's direct counters (tables with with_counters). */
export function readEntryCounters(
  engine: P4Engine,
  tableName: string,
  handle: number,
): { packets: number; bytes: number } | undefined {
  const e = engine.tables.get(tableName)?.entries.get(handle);
  return e ? { packets: e.packets, bytes: e.bytes } : undefined;
}
