// A table's lookup specialised once for the shape of its key (one number
// read, one Map probe or one per prefix length, or the short array's scan),
// and the pipeline node of a common table with that lookup written in. The
// index's Maps and arrays they close over are never replaced, only changed.

import type { PacketState } from '../../frame/packet-state';
import type { ActionChoice, Entry } from './entries';
import { EntryIndex, Mode } from './entry-index';

/**
 * The lookup for the common shapes with one key part on the number path;
 * the others go through the index's general lookup().
 */
export function finder(ix: EntryIndex): (st: PacketState) => Entry | undefined {
  if (ix.keys.length !== 1 || !ix.numeric || ix.mode === Mode.Ordered) return (st) => ix.lookup(st);
  const k = ix.keys[0]!;
  const slot = k.slot;
  const read = k.readNum!;
  const sm = ix.small;
  const { keys: sk, divs: sd, entries: se } = sm;
  const i32 = ix.int32;
  if (slot >= 0 && ix.mode === Mode.Exact) {
    const map = ix.exact;
    return (st) => {
      const v = i32 ? st.num[slot]! | 0 : st.num[slot]!;
      const n = sm.n;
      if (n < 0) return map.get(v);
      for (let i = 0; i < n; i++) if (sk[i] === v) return se[i];
      return undefined;
    };
  }
  if (slot >= 0) {
    const ps = ix.prefixes;
    return (st) => {
      const v = st.num[slot]!;
      const n = sm.n;
      if (n >= 0) {
        for (let i = 0; i < n; i++) {
          const q = Math.floor(v / sd[i]!);
          if ((i32 ? q | 0 : q) === sk[i]) return se[i];
        }
        return undefined;
      }
      for (let j = 0; j < ps.length; j++) {
        const pm = ps[j]!;
        const q = Math.floor(v / pm.div);
        const e = pm.map.get(i32 ? q | 0 : q);
        if (e !== undefined) return e;
      }
      return undefined;
    };
  }
  if (ix.mode === Mode.Exact) {
    const map = ix.exact;
    if (ix.int32) return slot >= 0 ? (st) => map.get(st.num[slot]! | 0) : (st) => map.get(read(st) | 0);
    return slot >= 0 ? (st) => map.get(st.num[slot]!) : (st) => map.get(read(st));
  }
  const ps = ix.prefixes;
  if (ix.int32) {
    return (st) => {
      const v = slot >= 0 ? st.num[slot]! : read(st);
      for (let j = 0; j < ps.length; j++) {
        const pm = ps[j]!;
        const e = pm.map.get(Math.floor(v / pm.div) | 0);
        if (e !== undefined) return e;
      }
      return undefined;
    };
  }
  return (st) => {
    const v = slot >= 0 ? st.num[slot]! : read(st);
    for (let j = 0; j < ps.length; j++) {
      const pm = ps[j]!;
      const e = pm.map.get(Math.floor(v / pm.div));
      if (e !== undefined) return e;
    }
    return undefined;
  };
}

/**
 * The pipeline node of a common table (direct actions; no counters, meter
 * or __HIT__/__MISS__, checked by the caller) with the lookup written in:
 * for one-part exact or lpm tables on a number field (the others:
 * undefined, and the pipeline calls find). Runs the entry's action, or the
 * default's (read from `table` per frame: the control plane may change it),
 * and returns the next node by action index.
 */
export function directNode(
  ix: EntryIndex,
  table: { readonly defaultEntry: ActionChoice | undefined },
  byAction: Int32Array,
  baseNext: number,
): ((st: PacketState) => number) | undefined {
  if (ix.keys.length !== 1 || !ix.numeric || ix.mode === Mode.Ordered || ix.keys[0]!.slot < 0) return undefined;
  const slot = ix.keys[0]!.slot;
  const sm = ix.small;
  const { keys: sk, divs: sd, entries: se } = sm;
  const i32 = ix.int32;
  if (ix.mode === Mode.Exact) {
    const map = ix.exact;
    return (st) => {
      const v = i32 ? st.num[slot]! | 0 : st.num[slot]!;
      const n = sm.n;
      let e: Entry | undefined;
      if (n < 0) e = map.get(v);
      else {
        for (let i = 0; i < n; i++) {
          if (sk[i] === v) {
            e = se[i];
            break;
          }
        }
      }
      const c = e ?? table.defaultEntry;
      if (c === undefined) return baseNext;
      const a = c.action!;
      a.run(st, c.args);
      return byAction[a.index]!;
    };
  }
  const ps = ix.prefixes;
  return (st) => {
    const v = st.num[slot]!;
    const n = sm.n;
    let e: Entry | undefined;
    if (n >= 0) {
      for (let i = 0; i < n; i++) {
        const q = Math.floor(v / sd[i]!);
        if ((i32 ? q | 0 : q) === sk[i]) {
          e = se[i];
          break;
        }
      }
    } else {
      for (let j = 0; j < ps.length; j++) {
        const pm = ps[j]!;
        const q = Math.floor(v / pm.div);
        e = pm.map.get(i32 ? q | 0 : q);
        if (e !== undefined) break;
      }
    }
    const c = e ?? table.defaultEntry;
    if (c === undefined) return baseNext;
    const a = c.action!;
    a.run(st, c.args);
    return byAction[a.index]!;
  };
}
