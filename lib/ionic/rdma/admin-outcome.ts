// What an RDMA admin command works on and what it answers (ionic RDMA R2.4): the environment the handlers share, the
// result for the CQE (an AdminStatus, and status_length on success) or work that takes more turns, and the small
// helpers every handler uses to refuse.

import type { Logger, RateLimiter } from '../../log';
import { CounterSet } from '../../rdma/counters';
import type { DataPathHooks } from '../../rdma/hooks';
import { RDMA_NDBPGS_PER_LIF } from '../../rdma/limits';
import type { ResourceManager, RmError } from '../../rdma/resources';
import type { GuestMemory } from '../../vfio-user/guest-memory';
import type { FaultInjector } from '../fault-injection';
import { AdminStatus } from './constants';
import type { EventQueue } from './event-queue';

/** What the commands work on. */
export interface AdminEnv {
  readonly rm: ResourceManager;
  readonly eqs: ReadonlyMap<number, EventQueue>;
  readonly counters: CounterSet;
  readonly faults: FaultInjector;
  readonly hooks: DataPathHooks;
  readonly log: Logger;
  readonly limiter: RateLimiter;
}

export interface AdminResult {
  readonly status: AdminStatus;
  /** status_length on success. */
  readonly length: number;
}

/**
 * A command that takes more than one turn (CREATE_MR over a long page list):
 * the admin queue calls `step` once per turn until it answers, and `abort`
 * if the queue goes away first.
 */
export interface AdminWork {
  step(mem: GuestMemory): AdminResult | null;
  abort(): void;
}

export type AdminOutcome = AdminResult | AdminWork;

export function isAdminWork(o: AdminOutcome): o is AdminWork {
  return 'step' in o;
}

export const OK: AdminResult = { status: AdminStatus.OK, length: 0 };

export function refuse(status: AdminStatus): AdminResult {
  return { status, length: 0 };
}

/** How a resource-manager refusal reads in the CQE. */
export function rmStatus(e: RmError): AdminStatus {
  switch (e) {
    case 'bad-id':
      return AdminStatus.BAD_INDEX;
    case 'unknown':
      return AdminStatus.BAD_INDEX;
    case 'exists':
      return AdminStatus.BAD_STATE;
    case 'busy':
      return AdminStatus.BAD_STATE;
    case 'bad-state':
      return AdminStatus.BAD_STATE;
    case 'bad-type':
      return AdminStatus.BAD_TYPE;
    case 'bad-attr':
      return AdminStatus.BAD_ATTR;
    case 'no-space':
      return AdminStatus.BAD_INDEX;
  }
}

/** A doorbell page the LIF has. */
export function dbidOk(dbid: number): boolean {
  return dbid < RDMA_NDBPGS_PER_LIF;
}
