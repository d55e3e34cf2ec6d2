// The S3 store put together, ready for the device's frame hooks: the store
// (RAM, or dir= backed), one http.Server answering S3, the TCP endpoint on
// the guest's segment feeding it connections, optionally the same server
// listening on the host (listen=), and the RDMA path when DMA callbacks are
// given. `claimTx` is the FrameEndpoint face; frames for the guest leave
// through `send`. The device integration (lib/ionic, bin/rocm-ernic.ts) is
// not done here.

import * as http from 'http';
import type { FrameEndpoint } from '../../ionic/frames';
import type { S3Options } from './options';
import { RdmaDma, RdmaPath } from './rdma';
import { Credentials, createS3Server, ObjectStore } from './store';
import { TcpStack } from './tcp';

export interface S3EndpointDeps {
  /** Queue a frame for the guest (the buffer is the callee's). */
  readonly send: (frame: Buffer) => void;
  /** Guest memory by rkey; without it, token requests answer 501. */
  readonly dma?: RdmaDma;
  readonly credentials?: readonly Credentials[];
}

export class S3Endpoint implements FrameEndpoint {
  readonly store: ObjectStore;
  readonly server: http.Server;
  readonly stack: TcpStack;
  readonly rdma: RdmaPath | null;
  #hostListener: http.Server | null = null;

  private constructor(store: ObjectStore, server: http.Server, stack: TcpStack, rdma: RdmaPath | null) {
    this.store = store;
    this.server = server;
    this.stack = stack;
    this.rdma = rdma;
  }

  static async open(opts: S3Options, deps: S3EndpointDeps): Promise<S3Endpoint> {
    const store = await ObjectStore.open(opts.bucket, { size: opts.size, objects: opts.objects, maxpart: opts.maxpart }, opts.dir);
    let server: http.Server | undefined;
    const stack = new TcpStack({
      ip: opts.ip, ports: [opts.port], send: deps.send,
      onConnection: (c) => server!.emit('connection', c),
    });
    const rdma = deps.dma ? new RdmaPath(deps.dma, stack.ip) : null;
    server = createS3Server({ store, ...(rdma ? { rdma } : {}), ...(deps.credentials ? { credentials: deps.credentials } : {}) });
    const ep = new S3Endpoint(store, server, stack, rdma);
    if (opts.listen) {
      ep.#hostListener = server;
      await new Promise<void>((resolve, reject) => {
        server!.once('error', reject);
        server!.listen(opts.listen!.port, opts.listen!.host, () => {
          server!.off('error', reject);
          resolve();
        });
      });
    }
    return ep;
  }

  /** The host listener's address, when listen= was given. */
  get hostAddress(): ReturnType<http.Server['address']> {
    return this.#hostListener?.address() ?? null;
  }

  claimTx(frame: Buffer): boolean {
    return this.stack.claimTx(frame);
  }

  async close(): Promise<void> {
    this.stack.close();
    this.server.closeAllConnections();
    if (this.#hostListener) await new Promise<void>((r) => this.#hostListener!.close(() => r()));
  }
}
