// --backend none: the control path only. QPs, MRs and CQs are created and
// doorbells recorded, but no WQE runs and nothing completes (PCI enumeration
// and driver bring-up).

import type { RdmaBackend } from '../rdma/backend';
import type { BackendKind } from './kind';

export class NoBackend implements RdmaBackend {
  readonly name = 'none';
  attach(): void {}
}

export const noneKind: BackendKind = {
  help: '  none                      control path only: nothing runs or completes',
  grammar: 'none',
  accepts: (spec) => spec === 'none',
  prepare: () => ({ ok: true, value: { open: async () => ({ ok: true, value: new NoBackend() }) } }),
};
