// --backend nvmeof[:...]: an NVMe-oF target at an address of the guest's
// segment (lib/targets/nvmeof). Its data path runs the target's QPs beside
// the executor's; the target answers ARP and ping for its address.

import type { GuestSegment, RdmaBackend } from '../rdma/backend';
import type { DataPathEngine } from '../rdma/executor';
import { createNvmeofTarget, parseNvmeofBackend } from '../targets/nvmeof';
import type { NvmeofTarget } from '../targets/nvmeof/queue';
import { installNvmeofDataPath, NvmeofDataPath, NvmeofDataPathOptions } from '../targets/nvmeof/rdma';
import type { BackendKind, ServedBackend } from './kind';

export class NvmeofBackend implements RdmaBackend, ServedBackend {
  readonly name = 'nvmeof';
  /** The target's data path, once attached to an engine. */
  dataPath: NvmeofDataPath | null = null;

  constructor(
    readonly target: NvmeofTarget,
    readonly options?: NvmeofDataPathOptions,
  ) {}

  attach(engine: DataPathEngine | null, segment: GuestSegment): void {
    if (!engine) return;
    this.dataPath = installNvmeofDataPath(engine, this.target, this.options);
    segment.addEndpoint(this.dataPath.segment((frame) => segment.send(frame)));
  }

  close(): Promise<void> {
    return this.target.close();
  }
}

export const nvmeofKind: BackendKind = {
  help: `  nvmeof[:KEY=VALUE,...]    an NVMe-oF target on the guest's segment, for nvme connect -t rdma
                            (docs/nvmeof.md); keys and defaults:
                              size=64M bs=512 file= nqn=nvmet-test ip=192.168.200.1
                              port=4420 queues=8 nsid=1 model= serial=`,
  grammar: 'nvmeof[:key=value,...]',
  accepts: (spec) => spec === 'nvmeof' || spec.startsWith('nvmeof:'),
  prepare(spec) {
    const parsed = parseNvmeofBackend(spec);
    if (!parsed.ok) return parsed;
    const o = parsed.value;
    return {
      ok: true,
      value: {
        // The namespace opened (a file created or sized) before QEMU can connect.
        async open(ctx) {
          let target: NvmeofTarget;
          try {
            target = await createNvmeofTarget(o, ctx.log);
          } catch (e) {
            return { ok: false, error: `--backend ${spec}: cannot open the namespace: ${(e as Error).message}` };
          }
          ctx.log.info(
            `rocm-ernic: NVMe-oF target ${o.nqn} at ${o.ip}:${o.port}, namespace ${o.nsid}: ${o.size} bytes (${o.bs}-byte blocks) in ${o.file ?? 'RAM'}`,
          );
          return { ok: true, value: new NvmeofBackend(target) };
        },
      },
    };
  },
};
