// The S3 store put together, ready for the device's frame hooks: the store
// (RAM, or dir= backed), one http.Server answering S3, the TCP endpoint on
// the guest's segment feeding it connections, optionally the same server
// listening on the host (listen=, loopback unless credentials are set), and the RDMA path when DMA callbacks are
// given. `claimTx` is the FrameEndpoint face; frames for the guest leave
// through `send`. On the device (`--backend s3`), lib/ionic/device.ts builds
// it with the LIF's queue to the guest and the MR-table DMA (guest-dma.ts),
// first among the segment's endpoints.

import * as http from 'http';
import type { FrameEndpoint } from '../../net/frame-endpoint';
import type { FrameOffload } from '../../net/vnet';
import { hostListenerRefusal, S3Options } from './options';
import { RdmaDma, RdmaPath } from './rdma';
import { Credentials, ObjectStore, s3Handler, S3RequestHandler } from './store';
import { TcpStack } from '../../net/tcp-host';

/** Host clients connected at once; past it the kernel's backlog waits (the vfio-user socket needs fds too). */
export const S3_HOST_MAX_CONNECTIONS = 64;

interface S3EndpointDeps {
  /** Queue a frame for the guest (valid during the call only), with its sum after the Ethernet header when known. */
  readonly send: (frame: Buffer, l3Sum?: number) => void;
  /** Guest memory by rkey; without it, token requests answer 501. */
  readonly dma?: RdmaDma;
  readonly credentials?: readonly Credentials[];
}

export class S3Endpoint implements FrameEndpoint {
  readonly store: ObjectStore;
  readonly server: http.Server;
  readonly stack: TcpStack;
  readonly rdma: RdmaPath | null;
  readonly #handler: S3RequestHandler;
  readonly #credentials: readonly Credentials[];
  #hostListener: http.Server | null = null;

  private constructor(
    store: ObjectStore,
    server: http.Server,
    stack: TcpStack,
    rdma: RdmaPath | null,
    handler: S3RequestHandler,
    credentials: readonly Credentials[],
  ) {
    this.store = store;
    this.server = server;
    this.stack = stack;
    this.rdma = rdma;
    this.#handler = handler;
    this.#credentials = credentials;
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
    const stack = new TcpStack({
      ip: opts.ip,
      ports: [opts.port],
      send: deps.send,
      // The guest's first SYN comes after this returns, when `server` exists.
      onConnection: (c) => server.emit('connection', c),
    });
    const rdma = deps.dma ? new RdmaPath(deps.dma, stack.ip) : null;
    const credentials = deps.credentials ?? [];
    const handler = s3Handler({ store, ...(rdma ? { rdma } : {}), ...(credentials.length > 0 ? { credentials } : {}) });
    const server = http.createServer(handler);
    return new S3Endpoint(store, server, stack, rdma, handler, credentials);
  }

  /**
   * The store on the host too, when `opts.listen` is set: its own
   * http.Server over the same handler and body budget, whose requests are
   * the host's (the token path there needs a signed token), capped in
   * connections. Rejects when it cannot listen, or when the address is not
   * loopback and no credentials are set.
   */
  async listenHost(opts: Pick<S3Options, 'listen'>): Promise<void> {
    if (!opts.listen || this.#hostListener) return;
    const refusal = hostListenerRefusal(opts.listen, this.#credentials.length > 0);
    if (refusal) throw new Error(refusal);
    const handler = this.#handler;
    const server = http.createServer((req, res) => handler(req, res, 'host'));
    server.maxConnections = S3_HOST_MAX_CONNECTIONS;
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

  /** TSO super-frames and partial checksums come whole (the TCP host takes them so). */
  readonly takesOffloads = true;

  claimTx(frame: Buffer, offload?: FrameOffload): boolean {
    return this.stack.claimTx(frame, offload);
  }

  txPass(begin: boolean): void {
    this.stack.txPass(begin);
  }

  /** The guest is gone (VM detached): its connections end; the store and the host listener stay. */
  dropGuestConnections(): void {
    this.stack.close();
  }

  async close(): Promise<void> {
    this.stack.close();
    this.server.closeAllConnections();
    const host = this.#hostListener;
    if (host) {
      host.closeAllConnections();
      await new Promise<void>((r) => host.close(() => r()));
    }
  }
}
