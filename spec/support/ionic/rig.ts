// A device under test: IonicDevice behind an in-process VfioUserServer on a
// temporary socket, plus the guests connected to it. Also a seeded PRNG and
// the network-namespace helpers of the TAP tests.

import { execFileSync } from 'child_process';
import * as fs from 'fs';
import type { Logger } from '../../../lib/log';
import type { RdmaBackend } from '../../../lib/rdma/backend';
import { IonicDevice } from '../../../lib/ionic/device';
import type { FaultInjector } from '../../../lib/ionic/fault-injection';
import type { HostLink } from '../../../lib/net/frame-endpoint';
import { COMPAT_PROFILE, NicProfile } from '../../../lib/ionic/profile';
import { VfioUserServer } from '../../../lib/vfio-user/server';
import { settle, tempSocketPath } from '../fds';
import { GuestOptions, IonicGuest } from './guest';

/** Station MAC of the device under test: locally administered, unicast. */
export const DEVICE_MAC = Buffer.from([0x02, 0x65, 0x72, 0x6e, 0x69, 0x63]);

/** The profile the tests pin their expected values to (compat's numbers, spelled out). */
export function testProfile(over: Partial<NicProfile> = {}): NicProfile {
  return {
    ...COMPAT_PROFILE,
    name: 'test',
    msixVectors: 32,
    ethQueues: 16,
    linkSpeedMbps: 100000,
    transceiver: { phy: 'copper', pid: 1, description: '100 Gb/s copper QSFP' },
    maxMtu: 9000,
    firmwareVersion: '1.0.0-ernic',
    serialNumber: 'ERNIC-00000000',
    statsIntervalMs: 1000,
    asicType: 1,
    asicRev: 0,
    ...over,
  };
}

interface RigOptions {
  readonly profile?: NicProfile;
  readonly link?: HostLink | null;
  readonly faults?: FaultInjector;
  readonly mac?: Buffer;
  readonly rdmaBackend?: RdmaBackend;
  /** Where the device and server log (default: nowhere). */
  readonly log?: Logger;
}

export class Rig {
  readonly guests: IonicGuest[] = [];

  private constructor(
    readonly device: IonicDevice,
    readonly server: VfioUserServer,
    readonly path: string,
  ) {}

  static async start(opts: RigOptions = {}): Promise<Rig> {
    const device = new IonicDevice({
      profile: opts.profile ?? testProfile(),
      mac: opts.mac ?? DEVICE_MAC,
      link: opts.link ?? null,
      ...(opts.faults ? { faults: opts.faults } : {}),
      ...(opts.rdmaBackend ? { rdmaBackend: opts.rdmaBackend } : {}),
      ...(opts.log ? { log: opts.log } : {}),
    });
    const path = tempSocketPath('ionic');
    const server = new VfioUserServer({ socketPath: path, device: device.pci, ...(opts.log ? { log: opts.log } : {}) });
    await server.listen();
    return new Rig(device, server, path);
  }

  /** A connected guest (MSI-X wired), not yet probed. */
  async connect(opts: GuestOptions = {}): Promise<IonicGuest> {
    const g = await IonicGuest.connect(this.path, opts);
    this.guests.push(g);
    return g;
  }

  /** A guest through probe, optionally opened with `queues` queue pairs. */
  async probed(queues = 0, opts: GuestOptions = {}): Promise<IonicGuest> {
    const g = await this.connect(opts);
    await g.probe();
    if (queues > 0) await g.open(queues);
    return g;
  }

  /** Disconnect a guest and let the server notice. */
  async drop(g: IonicGuest): Promise<void> {
    const session = this.server.session;
    g.dispose();
    await settle();
    // Until the server has seen this client go (another may already be attached).
    for (let i = 0; i < 200 && session !== null && this.server.session === session; i++) await settle(1);
  }

  async close(): Promise<void> {
    for (const g of this.guests) g.dispose();
    await settle();
    this.server.close();
    this.device.close();
  }
}

/** xorshift32: small, seeded, the same sequence on every run. */
export class Prng {
  #s: number;
  constructor(seed: number) {
    this.#s = seed >>> 0 || 1;
  }
  next(): number {
    let x = this.#s;
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    this.#s = x;
    return x;
  }
  /** Integer in [0, n). */
  below(n: number): number {
    return this.next() % n;
  }
  bytes(n: number): Buffer {
    const b = Buffer.alloc(n);
    for (let i = 0; i < n; i++) b[i] = this.next() & 0xff;
    return b;
  }
  pick<T>(list: readonly T[]): T {
    return list[this.below(list.length)]!;
  }
}

// ---- network namespaces -----------------------------------------------------------------------

/** Whether the TAP tests can run here: root and /dev/net/tun. */
export function canUseTap(): boolean {
  return process.getuid?.() === 0 && fs.existsSync('/dev/net/tun');
}

export function run(cmd: string, args: string[]): string {
  return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** Run quietly, ignoring failure (cleanup). */
export function runQuiet(cmd: string, args: string[]): void {
  try {
    execFileSync(cmd, args, { stdio: 'ignore' });
  } catch {
    /* already gone */
  }
}
