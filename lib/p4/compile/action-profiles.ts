// Action profiles (indirect tables): entries point at a member (an action
// with its data) or, with a selector (indirect_ws), at a group of members
// from which the selector's hash over the frame's fields picks one.

import { CompiledAction } from './actions';
import { compileCalculation, Calc } from './calculations';
import { ActionArgs, actionArgs, ExprContext, RuntimeData } from './expr';
import { JsonPath, refuse } from '../program/load';
import { PacketState } from '../frame/packet-state';
import { z } from 'zod';
import { actionProfileSchema } from '../program/schema';

interface Member {
  readonly action: CompiledAction;
  readonly data: RuntimeData;
  /** data as the action reads it. */
  readonly args: ActionArgs;
}

/** A selector group: its members in order (the selector's hash indexes them) and as a Set (the duplicate check). */
interface Group {
  readonly list: number[];
  readonly set: Set<number>;
}

export class ActionProfile {
  readonly members = new Map<number, Member>();
  readonly groups = new Map<number, Group>();
  /** Actions of the tables bound to this profile (members may only use these). */
  readonly actions = new Map<string, CompiledAction>();
  readonly selector: Calc | undefined;
  readonly name: string;
  readonly maxSize: number;
  #nextMember = 0;
  #nextGroup = 0;
  #memberships = 0;

  constructor(ap: z.infer<typeof actionProfileSchema>, path: JsonPath, ctx: ExprContext) {
    this.name = ap.name;
    this.maxSize = ap.max_size;
    if (ap.selector) {
      ap.selector.input.forEach((inp, i) => {
        if (inp.type !== 'field')
          refuse([...path, 'selector', 'input', i, 'type'], 'selector inputs must be fields', inp.type);
      });
      this.selector = compileCalculation(ap.selector, [...path, 'selector'], ctx);
    }
  }

  addMember(action: CompiledAction, data: RuntimeData): number | string {
    if (this.members.size >= this.maxSize) return `action profile ${this.name} is full (${this.maxSize})`;
    const h = this.#nextMember++;
    this.members.set(h, { action, data, args: actionArgs(data) });
    return h;
  }

  addGroup(): number | string {
    if (!this.selector) return `action profile ${this.name} has no selector`;
    if (this.groups.size >= this.maxSize) return `action profile ${this.name} has too many groups (${this.maxSize})`;
    const h = this.#nextGroup++;
    this.groups.set(h, { list: [], set: new Set() });
    return h;
  }

  /** Why addToGroup would refuse, or undefined. */
  checkAddToGroup(member: number, group: number): string | undefined {
    const g = this.groups.get(group);
    if (!g) return `action profile ${this.name} has no group ${group}`;
    if (!this.members.has(member)) return `action profile ${this.name} has no member ${member}`;
    if (g.set.has(member)) return `member ${member} is already in group ${group}`;
    return undefined;
  }

  addToGroup(member: number, group: number): string | undefined {
    const why = this.checkAddToGroup(member, group);
    if (why !== undefined) return why;
    const g = this.groups.get(group)!;
    g.list.push(member);
    g.set.add(member);
    this.#memberships++;
    return undefined;
  }

  /** What the profile holds, in the guest budget's units: members, groups and group memberships. */
  get held(): number {
    return this.members.size + this.groups.size + this.#memberships;
  }

  /** The member an entry's reference selects for this frame (undefined: empty group). */
  resolve(ref: number, group: boolean, st: PacketState): Member | undefined {
    if (!group) return this.members.get(ref);
    const g = this.groups.get(ref)?.list;
    if (!g || g.length === 0) return undefined;
    const i = g.length === 1 ? 0 : Number(this.selector!(st) % BigInt(g.length));
    return this.members.get(g[i]!);
  }
}
