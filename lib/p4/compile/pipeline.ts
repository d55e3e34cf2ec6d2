// A control pipeline (ingress, egress) compiled to an array of node closures
// (tables, conditionals, action calls), each returning the index of the next
// node or END. The driver is a loop bounded by the node count: a well-formed
// pipeline is acyclic, and a cyclic one stops there instead of spinning.

import { CompiledAction } from './actions';
import { nodeLoop } from '../frame/dispatch';
import { compileNum, compileValue, ExprContext, NO_ARGS } from './expr';
import { JsonPath, refuse } from '../program/load';
import { Pipeline } from '../program/schema';
import { PacketState } from '../frame/packet-state';
import { MatchTable } from './tables/match-table';
import { MeterArray } from './externs';
import { ActionProfile } from './action-profiles';

export const END = -1;

type NodeFn = (st: PacketState) => number;

export interface CompiledPipeline {
  readonly name: string;
  readonly tables: Map<string, MatchTable>;
  run(st: PacketState): void;
}

export function compilePipeline(
  pl: Pipeline,
  pi: number,
  ctx: ExprContext,
  actions: Map<string, CompiledAction>,
  tablesOut: Map<string, MatchTable>,
  profilesOut: Map<string, ActionProfile>,
  meters: Map<string, MeterArray>,
): CompiledPipeline {
  const path: JsonPath = ['pipelines', pi];
  const index = new Map<string, number>();
  const names: string[] = [];
  const addName = (n: string, p: JsonPath) => {
    if (index.has(n)) refuse(p, 'duplicate control node name', n);
    index.set(n, names.length);
    names.push(n);
  };
  pl.tables.forEach((t, i) => addName(t.name, [...path, 'tables', i, 'name']));
  pl.conditionals.forEach((c, i) => addName(c.name, [...path, 'conditionals', i, 'name']));
  (pl.action_calls ?? []).forEach((c, i) => addName(c.name, [...path, 'action_calls', i, 'name']));
  (pl.action_profiles ?? []).forEach((ap, i) => {
    if (profilesOut.has(ap.name))
      refuse([...path, 'action_profiles', i, 'name'], 'duplicate action profile name', ap.name);
    profilesOut.set(
      ap.name,
      new ActionProfile(ap, [...path, 'action_profiles', i], { ...ctx, runtimeData: 0, parser: false }),
    );
  });

  const next = (n: string | null | undefined, p: JsonPath): number => {
    if (n === null || n === undefined) return END;
    const i = index.get(n);
    if (i === undefined) refuse(p, 'no such table or conditional', n);
    return i;
  };

  const tables = new Map<string, MatchTable>();
  const nodes: NodeFn[] = [];
  pl.tables.forEach((t, ti) => {
    const tp: JsonPath = [...path, 'tables', ti];
    const mt = new MatchTable(t, tp, ctx, actions, profilesOut, meters);
    if (tablesOut.has(t.name)) refuse([...tp, 'name'], 'duplicate table name', t.name);
    tables.set(t.name, mt);
    tablesOut.set(t.name, mt);
    const nt = t.next_tables;
    const hitMiss = nt.has('__HIT__') || nt.has('__MISS__');
    const onHit = hitMiss ? next(nt.get('__HIT__'), [...tp, 'next_tables', '__HIT__']) : END;
    const onMiss = hitMiss ? next(nt.get('__MISS__'), [...tp, 'next_tables', '__MISS__']) : END;
    const baseNext = next(t.base_default_next, [...tp, 'base_default_next']);
    // the next node by action index (CompiledAction.index): one array read per frame
    const byAction = new Int32Array(actions.size).fill(baseNext);
    if (!hitMiss) {
      for (const [a, n] of nt) {
        const ca = mt.actions.get(a);
        if (!ca) refuse([...tp, 'next_tables', a], 'not an action of this table', a);
        byAction[ca.index] = next(n, [...tp, 'next_tables', a]);
      }
    }
    const counted = mt.withCounters;
    const profile = mt.profile;
    const meter = mt.meter;
    const find = mt.find;
    if (!counted && !profile && !meter && !hitMiss) {
      // the common table: a direct action, next node by action; the lookup written in when it can be
      const direct = mt.directNode(byAction, baseNext);
      if (direct) {
        nodes.push(direct);
        return;
      }
      nodes.push((st) => {
        const e = find(st);
        const c = e ?? mt.defaultEntry;
        if (c === undefined) return baseNext;
        const a = c.action!;
        a.run(st, c.args);
        return byAction[a.index]!;
      });
      return;
    }
    nodes.push((st) => {
      const e = find(st);
      if (e) {
        if (counted) {
          e.packets++;
          e.bytes += st.frame.length;
        }
        if (meter) st.set(meter.result, BigInt(meter.array.execute(e.slot, st.frame.length)));
        const m = e.action ? e : profile!.resolve(e.ref, e.group, st);
        if (!m) return hitMiss ? onHit : baseNext; // an empty group: no action
        m.action!.run(st, m.args);
        return hitMiss ? onHit : byAction[m.action!.index]!;
      }
      const d = mt.defaultEntry;
      if (d) d.action.run(st, d.args);
      if (hitMiss) return onMiss;
      return d ? byAction[d.action.index]! : baseNext;
    });
  });
  pl.conditionals.forEach((c, ci) => {
    const cp: JsonPath = [...path, 'conditionals', ci];
    const cctx = { ...ctx, runtimeData: 0, parser: false };
    const cond = compileValue(c.expression, cctx, [...cp, 'expression']);
    const num = compileNum(c.expression, cctx);
    const t = next(c.true_next, [...cp, 'true_next']);
    const f = next(c.false_next, [...cp, 'false_next']);
    if (num) nodes.push((st) => (num(st, NO_ARGS) !== 0 ? t : f));
    else nodes.push((st) => (cond(st, NO_ARGS) !== 0n ? t : f));
  });
  (pl.action_calls ?? []).forEach((c, ci) => {
    const cp: JsonPath = [...path, 'action_calls', ci];
    const ca = [...actions.values()].find((a) => a.id === c.action_id);
    if (!ca) refuse([...cp, 'action_id'], 'no action with this id', c.action_id);
    if (ca.params.length > 0) refuse([...cp, 'action_id'], 'a direct action call takes no parameters', ca.name);
    const n = next(c.next_node, [...cp, 'next_node']);
    nodes.push((st) => {
      ca.run(st, NO_ARGS);
      return n;
    });
  });
  const init = next(pl.init_table, [...path, 'init_table']);
  const budget = nodes.length + 1;
  return {
    name: pl.name,
    tables,
    run: nodeLoop(nodes, init, END, budget),
  };
}
