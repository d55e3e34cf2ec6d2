// --backend tcp:...: RDMA between VMs of several servers over the TCP mesh
// (lib/mesh). The mesh data path runs remote QPs; the mesh learns the guest's
// GIDs from what it transmits (an endpoint that never claims a frame), and
// holds inbound work while no VM is attached.

import { isMeshBackend, Mesh, meshOptionsFromCli, meshSecurityFromCli } from '../mesh';
import type { RdmaBackend, GuestSegment } from '../rdma/backend';
import { installMeshDataPath, MeshDataPath, MeshDataPathOptions, MeshPort } from '../rdma/datapath/mesh';
import type { DataPathEngine } from '../rdma/executor';
import type { BackendKind, ServedBackend } from './kind';

export class MeshBackend implements RdmaBackend {
  readonly name = 'mesh';
  /** The mesh data path, once attached to an engine. */
  dataPath: MeshDataPath | null = null;

  constructor(
    readonly mesh: MeshPort,
    readonly options?: MeshDataPathOptions,
  ) {}

  attach(engine: DataPathEngine | null, segment: GuestSegment): void {
    if (!engine) return;
    const dp = installMeshDataPath(engine, this.mesh, this.options);
    this.dataPath = dp;
    segment.addEndpoint({
      claimTx(frame) {
        dp.observeTx(frame);
        return false;
      },
    });
  }

  consumerPresent(present: boolean): void {
    this.mesh.setConsumerPresent(present);
  }
}

/** The backend over a started Mesh, as the server runs it. */
export class ServedMesh extends MeshBackend implements ServedBackend {
  constructor(readonly node: Mesh) {
    super(node);
  }

  close(): Promise<void> {
    return this.node.close();
  }
}

export const meshKind: BackendKind = {
  help: `  tcp:manager:listen:PORT   RDMA between VMs over a TCP mesh of servers; this one is the manager
  tcp:manager:IP:PORT         (node 0), listening on IP:PORT; workers dial it with
  tcp:worker:HOST:PORT        tcp:worker:HOST:PORT (docs/mesh.md; tuned by ERNIC_TCP_GUEST_GIDS,
                              ERNIC_TCP_SEND_TIMEOUT_MS, ERNIC_TCP_HEARTBEAT_MS,
                              ERNIC_TCP_NODES_PER_ADDRESS); listen:PORT binds
                              127.0.0.1; without --mesh-psk (or --mesh-cert) the mesh stays on loopback`,
  grammar: 'tcp:manager:listen:PORT, tcp:manager:IP:PORT, tcp:worker:HOST:PORT',
  accepts: isMeshBackend,
  prepare: (spec) => ({
    ok: true,
    value: {
      // The options are read with the logger (they warn about what they ignore), so at opening.
      async open(ctx) {
        const m = meshOptionsFromCli(spec, ctx.env, ctx.log);
        if (!m.ok) return m;
        const secured = meshSecurityFromCli(m.value, ctx.mesh, ctx.env);
        if (!secured.ok) return { ok: false, error: `--backend ${spec}: ${secured.error}` };
        try {
          const node = await Mesh.start(secured.value);
          node.on('registered', (id) => ctx.log.info(`rocm-ernic: mesh node ${id}`));
          return { ok: true, value: new ServedMesh(node) };
        } catch (e) {
          return { ok: false, error: `--backend ${spec}: cannot start the mesh: ${(e as Error).message}` };
        }
      },
    },
  }),
};
