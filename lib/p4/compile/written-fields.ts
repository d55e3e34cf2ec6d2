// The fields a program may write, found once at load: the deparse writes
// only their windows where a header did not move (the engine's closures and
// the generated function both).

import type { FieldInfo, Layout } from '../program/layout';
import type { Program } from '../program/schema';

/** Primitives that write no field (their field operands are only read; remove_header changes only validity). */
const READ_ONLY_PRIMITIVES = new Set([
  'count',
  'register_write',
  'generate_digest',
  'log_msg',
  'drop',
  'mark_to_drop',
  'mark_for_drop',
  'exit',
  'no_op',
  '_jump',
  '_jump_if_zero',
  'remove_header',
]);

/**
 * The fields the program may write, over-approximated: every field operand
 * of a primitive other than the read-only ones (source operands too), every
 * field of a header such a primitive names (add_header, copy_header: source
 * too), parser `set` destinations, checksum targets and meter results.
 */
export function writtenFields(p: Program, layout: Layout): Set<FieldInfo> {
  const out = new Set<FieldInfo>();
  const field = (ref: unknown): void => {
    if (!Array.isArray(ref) || ref.length !== 2) return;
    const f = layout.headerByName.get(ref[0] as string)?.byName.get(ref[1] as string);
    if (f) out.add(f);
  };
  const header = (name: unknown): void => {
    for (const f of (typeof name === 'string' ? layout.headerByName.get(name)?.fields : undefined) ?? []) out.add(f);
  };
  for (const a of p.actions) {
    for (const pr of a.primitives) {
      if (READ_ONLY_PRIMITIVES.has(pr.op)) continue;
      for (const tv of pr.parameters) {
        if (tv.type === 'field') field(tv.value);
        else if (tv.type === 'header') header(tv.value);
        else if (tv.type === 'header_stack' || tv.type === 'stack') {
          const sk = layout.stackByName.get(tv.value as string);
          for (const hi of sk?.headers ?? []) header(layout.headers[hi]!.name);
        }
      }
    }
  }
  for (const ps of p.parsers) {
    for (const st of ps.parse_states) {
      for (const op of st.parser_ops) {
        if (op.op === 'set') field((op.parameters[0] as { value?: unknown } | undefined)?.value);
      }
    }
  }
  for (const c of p.checksums) field(c.target);
  for (const m of p.meter_arrays) field(m.result_target);
  return out;
}
