// The in-process NVMe-oF target (`--backend nvmeof`): a transport-independent
// controller written against two DMA callbacks. The RDMA side (IB CM on the
// GSI QP, capsules on bound QPs) plugs in through NvmeofTarget.openQueue;
// docs/nvmeof.md says what exists and what remains.

import { Logger } from '../../log';
import { FileNamespace, NvmeofNamespace, RamNamespace } from './namespace';
import { NvmeofOptions } from './options';
import { NvmeofTarget, TargetSubsystem } from './queue';
import { NvmeofSubsystem } from './subsystem';

export { decodeCqe, DmaStatus, encodeCqe } from './command';
export type { Cqe, TargetDma } from './command';
export { NvmeofController } from './controller';
export { FileNamespace, RamNamespace } from './namespace';
export type { NvmeofNamespace } from './namespace';
export { NVMEOF_DEFAULTS, parseNvmeofBackend } from './options';
export type { NvmeofOptions } from './options';
export { NvmeofQueue, NvmeofTarget } from './queue';
export type { QueueOptions } from './queue';
export { NvmeofSubsystem } from './subsystem';

/** Build the target `--backend nvmeof:...` describes (opens or creates the file namespace). */
export async function createNvmeofTarget(o: NvmeofOptions, logger?: Logger): Promise<NvmeofTarget> {
  const ns: NvmeofNamespace =
    o.file === undefined
      ? new RamNamespace(o.nsid, o.size, o.bs)
      : await FileNamespace.open(o.nsid, o.file, o.size, o.bs);
  const subsystem: TargetSubsystem = new NvmeofSubsystem({
    nqn: o.nqn,
    model: o.model,
    serial: o.serial,
    namespaces: [ns],
    maxIoQueues: o.queues,
  });
  return new NvmeofTarget({
    subsystem,
    port: { traddr: o.ip, trsvcid: String(o.port), portid: 1 },
    ...(logger ? { logger } : {}),
  });
}
