// --backend loopback (the default): WQEs run between QPs of this device, on
// the WQE executor alone.

import type { RdmaBackend } from '../rdma/backend';
import { DataPathEngine, installWqeExecutor } from '../rdma/executor';
import type { BackendKind } from './kind';

class LoopbackBackend implements RdmaBackend {
  readonly name = 'loopback';
  attach(engine: DataPathEngine | null): void {
    if (engine) installWqeExecutor(engine);
  }
}

export const loopbackKind: BackendKind = {
  help: '  loopback                  WQEs run between QPs of this VM (default)',
  grammar: 'loopback',
  accepts: (spec) => spec === 'loopback',
  prepare: () => ({ ok: true, value: { open: async () => ({ ok: true, value: new LoopbackBackend() }) } }),
};
