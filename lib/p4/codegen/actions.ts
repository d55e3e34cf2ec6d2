// Actions (../compile/actions.ts's primitives on the number path) as
// source over the field locals.

import type { CompiledAction } from '../compile/actions';
import { DROP_PORT } from '../compile/actions';
import { NO_DIGESTS } from '../frame/packet-state';
import type { FieldInfo, HeaderInfo } from '../program/layout';
import { hexToBig, POW2 } from '../program/numbers';
import type { TypeValue } from '../program/schema';
import { f, fieldOf, GenContext, int, no, NumCtx, v } from './context';
import { num } from './expr';

/** An action's primitives on the locals, its data read through `args`; an exit ends it (nothing after runs). */
export function actionSource(gen: GenContext, ca: CompiledAction, args: string): { src: string; exits: boolean } {
  const layout = gen.layout;
  const a = gen.input.program.actions[ca.index];
  if (!a) no('an action of no index');
  const widths = a.runtime_data.map((r) => r.bitwidth);
  const ctx: NumCtx = { widths, args };
  let src = '';
  for (const pr of a.primitives) {
    const ps = pr.parameters;
    const dest = (i: number): FieldInfo => {
      const tv = ps[i];
      const fi = tv && tv.type === 'field' ? fieldOf(layout, tv.value) : undefined;
      if (!fi || fi.wide) no('a destination of no number field');
      return fi;
    };
    const header = (i: number): HeaderInfo => {
      const tv = ps[i];
      const h = tv && tv.type === 'header' ? layout.headerByName.get(tv.value as string) : undefined;
      if (!h) no('no such header');
      return h;
    };
    switch (pr.op) {
      case 'modify_field':
      case 'assign': {
        if (ps.length !== 2) no('a masked modify_field');
        src += assign(gen, dest(0), ps[1]!, ctx);
        break;
      }
      case 'add_to_field':
      case 'subtract_from_field': {
        if (ps.length !== 2) no('a malformed add_to_field');
        const dst = dest(0);
        const x = num(gen, ps[1], ctx); // refuses where compileNum has no number form (the bigint path)
        const sg = pr.op === 'add_to_field' ? 1 : -1;
        const m = POW2[dst.width]!;
        const t = gen.r(dst.slot);
        const c = ps[1]!.type === 'hexstr' ? sg * Number(hexToBig(ps[1]!.value as string)) : NaN;
        if (Math.abs(c) < m)
          src += `{ const r = ${t} + ${int(c)}; ${t} = r < 0 ? r + ${int(m)} : r >= ${int(m)} ? r - ${int(m)} : r;${gen.m(dst.slot)} }\n`;
        else
          src += `{ const r = (${t} + ${int(sg)} * ${x}) % ${int(m)}; ${t} = r < 0 ? r + ${int(m)} : r;${gen.m(dst.slot)} }\n`;
        break;
      }
      case 'drop':
      case 'mark_to_drop':
      case 'mark_for_drop': {
        const es = gen.input.slots.egressSpec;
        src += `dropped = true;${es >= 0 ? ` ${f(es)} = ${int(DROP_PORT)};${gen.m(es)}` : ''}\n`;
        break;
      }
      case 'exit':
        return { src: `${src}ex = true;\n`, exits: true };
      case 'no_op':
      case 'log_msg':
        break;
      case 'add_header': {
        const h = header(0);
        gen.validWrites.add(h.index);
        src += `if (${v(h.index)} === 0) { ${v(h.index)} = 1;${h.fields.map((fi) => ` ${f(fi.slot)} = 0;${gen.m(fi.slot)}`).join('')} }\n`;
        break;
      }
      case 'remove_header':
        gen.validWrites.add(header(0).index);
        src += `${v(header(0).index)} = 0;\n`;
        break;
      case 'copy_header':
      case 'assign_header': {
        const hd = header(0);
        const hs = header(1);
        if (hd.fields.length !== hs.fields.length) no('headers of different types');
        gen.validWrites.add(hd.index);
        // st.set(d, st.get(s)): the value masked to the destination's width
        src += `${v(hd.index)} = ${v(hs.index)};${hd.fields.map((fi, i) => ` ${f(fi.slot)} = ${gen.r(hs.fields[i]!.slot)} % ${int(POW2[fi.width])};${gen.m(fi.slot)}`).join('')}\n`;
        break;
      }
      case 'generate_digest': {
        const id = ps[1]?.type === 'hexstr' ? Number(BigInt(ps[1].value as string)) : NaN;
        const list = [...gen.input.program.learn_lists].reverse().find((l) => l.id === id);
        if (!list) no('no such learn list');
        const values = list.elements.map((el) => bigValue(gen, el));
        src += `if (dg === ${gen.cap(NO_DIGESTS)}) dg = [];\ndg.push({ list: ${int(id)}, values: [${values.join(', ')}] });\n`;
        break;
      }
      default:
        no('a primitive outside the subset');
    }
  }
  return { src, exits: false };
}

/** assign() of ./actions.ts into a number field. */
function assign(gen: GenContext, dst: FieldInfo, src: TypeValue, ctx: NumCtx): string {
  return `${assignValue(gen, dst, src, ctx)}${gen.m(dst.slot)}\n`;
}

/** The statement of assign() (no newline). */
function assignValue(gen: GenContext, dst: FieldInfo, src: TypeValue, ctx: NumCtx): string {
  const t = f(dst.slot);
  const m = int(POW2[dst.width]);
  if (src.type === 'runtime_data' || src.type === 'local') {
    const i = src.value as number;
    const w = ctx.widths?.[i] ?? Infinity;
    if (w <= dst.width) return `${t} = ${ctx.args}.num[${int(i)}];`;
    return `${t} = Number(${ctx.args}.big[${int(i)}] & ${gen.cap(dst.mask)});`;
  }
  if (src.type === 'field' && gen.layout.hiddenValid(src.value) === undefined) {
    const fi = fieldOf(gen.layout, src.value);
    if (!fi || fi.wide) no('a copy of no number field');
    return fi.width <= dst.width ? `${t} = ${gen.r(fi.slot)};` : `${t} = ${gen.r(fi.slot)} % ${m};`;
  }
  return `{ const r = ${num(gen, src, ctx)} % ${m}; ${t} = r < 0 ? r + ${m} : r; }`;
}

/** A learn list element as compileValue gives it (bigint): a field or a constant. */
function bigValue(gen: GenContext, tv: TypeValue): string {
  if (tv.type === 'field') {
    const hv = gen.layout.hiddenValid(tv.value);
    if (hv !== undefined) return `BigInt(${v(hv)})`;
    const fi = fieldOf(gen.layout, tv.value);
    if (!fi || fi.wide) no('a learn list field of no number field');
    return `BigInt(${gen.r(fi.slot)})`;
  }
  if (tv.type === 'hexstr' && typeof tv.value === 'string' && /^-?0x[0-9a-fA-F]+$/.test(tv.value))
    return gen.cap(hexToBig(tv.value));
  if (tv.type === 'bool' && typeof tv.value === 'boolean') return tv.value ? '1n' : '0n';
  return no('a learn list element outside the subset');
}
