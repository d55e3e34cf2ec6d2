// The S3 store put together, ready for the device's frame hooks: the store
// (RAM, or dir= backed), one http.Server answering S3, the TCP endpoint on
// the guest's segment feeding it connections, optionally the same server
// listening on the host (listen=), and the RDMA path when DMA callbacks are
// given. `claimTx` is the FrameEndpoint face; frames for the guest leave
// through `send`. On the device (`--backend s3`), lib/ionic/device.ts builds
// it with the LIF's queue to the guest and the MR-table DMA (guest-dma.ts),
// first among the segment's endpoints.

import * as http from 'http';
import type { FrameEndpoint } from '../../net/frame-endpoint';
import type { S3Options } from './options';
import { RdmaDma, RdmaPath } from './rdma';
import { Credentials, createS3Server, ObjectStore } from './store';
import { TcpStack } from '../../net/tcp-host';

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

  /** The store opened (loaded from dir= when given), the endpoint built, and the host listener listening when listen= was given. */
  static async open(opts: S3Options, deps: S3EndpointDeps): Promise<S3Endpoint> {
    const ep = S3Endpoint.create(opts, await S3Endpoint.openStore(opts), deps);
    await ep.listenHost(opts);
    return ep;
  }

  /** The store of `opts`: in RAM, or loaded from dir= (what the device's backend carries). */
  static openStore(opts: S3Options): Promise<ObjectStore> {
    return ObjectStore.open(opts.bucket, { size: opts.size, objects: opts.objects, maxpart: opts.maxpart }, opts.dir);
  }

  /** The endpoint over an opened store, synchronously (the device builds it with its own send and DMA). */
  static create(opts: S3Options, store: ObjectStore, deps: S3EndpointDeps): S3Endpoint {
    let server: http.Server | undefined;
    const stack = new TcpStack({
      ip: opts.ip, ports: [opts.port], send: deps.send,
      onConnection: (c) => server!.emit('connection', c),
    });
    const rdma = deps.dma ? new RdmaPath(deps.dma, stack.ip) : null;
    server = createS3Server({ store, ...(rdma ? { rdma } : {}), ...(deps.credentials ? { credentials: deps.credentials } : {}) });
    return new S3Endpoint(store, server, stack, rdma);
  }

  /** The same http.Server on the host too, when `opts.listen` is set (HOST:PORT); rejects when it cannot listen. */
  async listenHost(opts: Pick<S3Options, 'listen'>): Promise<void> {
    if (!opts.listen || this.#hostListener) return;
    const server = this.server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(opts.listen!.port, opts.listen!.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.#hostListener = server;
  }

  /** The host listener's address, when listen= was given. */
  get hostAddress(): ReturnType<http.Server['address']> {
    return this.#hostListener?.address() ?? null;
  }

  claimTx(frame: Buffer): boolean {
    return this.stack.claimTx(frame);
  }

  /** The guest is gone (VM detached): its connections end; the store and the host listener stay. */
  dropGuestConnections(): void {
    this.stack.close();
  }

  async close(): Promise<void> {
    this.stack.close();
    this.server.closeAllConnections();
    if (this.#hostListener) await new Promise<void>((r) => this.#hostListener!.close(() => r()));
  }
}
