// NVM subsystems: what a host names in Connect. The NVM subsystem holds the
// namespaces and the controllers (one per association, by cntlid); the
// discovery subsystem (nqn.2014-08.org.nvmexpress.discovery) has no
// namespaces and lists, in its log page, where the NVM subsystems are
// reachable (RDMA: reliable connected QPs, rdma_cm, IPv4 address and port).

import { namespaceIds, NamespaceIds, NvmeofNamespace } from './namespace';

export const DISCOVERY_NQN = 'nqn.2014-08.org.nvmexpress.discovery';
/** NVMF_NQN_SIZE: the longest NQN, in bytes, without the NUL. */
export const MAX_NQN_BYTES = 223;
/** Controller ids a subsystem hands out (0 and 0xfff0..0xffff are reserved). */
const CNTLID_MIN = 1;
const CNTLID_MAX = 0xffef;
/** Controllers per subsystem at once (a host reconnecting leaves at most a few behind). */
const MAX_CONTROLLERS = 64;
/** I/O queues a subsystem may offer (the MR budget: (N + 1) x 128 regions within 2048). */
export const MAX_IO_QUEUES = 15;

/** Where a subsystem is reachable (a discovery log entry). */
export interface PortAddress {
  /** IPv4 address, dotted. */
  readonly traddr: string;
  /** Service id: the port, in decimal. */
  readonly trsvcid: string;
  readonly portid: number;
}

interface SubsystemOptions {
  readonly nqn: string;
  readonly model: string;
  readonly serial: string;
  /** Firmware revision (8 ASCII characters at most). */
  readonly firmware?: string;
  readonly namespaces: readonly NvmeofNamespace[];
  /** I/O queues per controller, 1..15. */
  readonly maxIoQueues: number;
  /** Host NQNs allowed to connect; absent: any host (the default, as the anchor target has no host list). */
  readonly hosts?: readonly string[];
  /** In-capsule data bytes the controller accepts after the SQE (advertised in IOCCSZ); default 0. */
  readonly inCapsuleBytes?: number;
}

/** Counters behind the SMART log, shared by the subsystem's controllers. */
export class SmartCounters {
  bytesRead = 0;
  bytesWritten = 0;
  readCommands = 0;
  writeCommands = 0;
  readonly startedAt: number;

  constructor(now: number) {
    this.startedAt = now;
  }

  /** Thousands of 512-byte units, rounded up (SMART's data units). */
  static dataUnits(bytes: number): number {
    return Math.ceil(bytes / 512 / 1000);
  }
}

/** True when `nqn` is usable as an NQN: 1..223 printable ASCII bytes. */
export function validNqn(nqn: string): boolean {
  return nqn.length >= 1 && nqn.length <= MAX_NQN_BYTES && /^[\x21-\x7e]+$/.test(nqn);
}

/** What a subsystem asks of its controllers (./controller.ts's NvmeofController, which imports this module). */
interface SubsystemController {
  readonly cntlid: number;
  /** A namespace's attributes changed: log it and raise the notice. */
  namespaceChanged(nsid: number): void;
  /** The discovery log changed. */
  discoveryChanged(): void;
  destroy(reason: 'subsystem closed'): void;
}

/** `C`: the controllers it holds (the target's are NvmeofControllers). */
export class NvmeofSubsystem<C extends SubsystemController = SubsystemController> {
  readonly kind: 'nvm' | 'discovery';
  readonly nqn: string;
  readonly model: string;
  readonly serial: string;
  readonly firmware: string;
  readonly maxIoQueues: number;
  readonly inCapsuleBytes: number;
  readonly namespaces: ReadonlyMap<number, NvmeofNamespace>;
  readonly stats: SmartCounters;
  readonly #ids = new Map<number, NamespaceIds>();
  readonly #hosts: ReadonlySet<string> | null;
  readonly #controllers = new Map<number, C>();
  #nextCntlid = CNTLID_MIN;
  /** Discovery only: the subsystems it lists and where. */
  readonly #listed: Array<{ readonly subsystem: NvmeofSubsystem; readonly port: PortAddress }> = [];
  #genctr = 1;

  constructor(opts: SubsystemOptions, kind: 'nvm' | 'discovery' = 'nvm', now: number = Date.now()) {
    if (!validNqn(opts.nqn))
      throw new RangeError(`subsystem NQN '${opts.nqn}' is not 1..${MAX_NQN_BYTES} printable ASCII bytes`);
    if (kind === 'nvm' && opts.nqn === DISCOVERY_NQN)
      throw new RangeError('an NVM subsystem cannot take the discovery NQN');
    const maxQ = kind === 'discovery' ? 0 : opts.maxIoQueues;
    if (kind === 'nvm' && !(Number.isInteger(maxQ) && maxQ >= 1 && maxQ <= MAX_IO_QUEUES)) {
      throw new RangeError(`maxIoQueues ${opts.maxIoQueues} is not 1..${MAX_IO_QUEUES}`);
    }
    this.kind = kind;
    this.nqn = opts.nqn;
    this.model = opts.model;
    this.serial = opts.serial;
    this.firmware = opts.firmware ?? '1.0';
    this.maxIoQueues = maxQ;
    this.inCapsuleBytes = opts.inCapsuleBytes ?? 0;
    const map = new Map<number, NvmeofNamespace>();
    for (const ns of opts.namespaces) {
      if (!(ns.nsid >= 1 && ns.nsid < 0xffffffff)) throw new RangeError(`nsid ${ns.nsid} is not 1..0xfffffffe`);
      if (map.has(ns.nsid)) throw new RangeError(`nsid ${ns.nsid} given twice`);
      map.set(ns.nsid, ns);
      this.#ids.set(ns.nsid, namespaceIds(opts.nqn, ns.nsid));
    }
    this.namespaces = map;
    this.#hosts = opts.hosts ? new Set(opts.hosts) : null;
    this.stats = new SmartCounters(now);
  }

  /** The discovery subsystem (no namespaces, no I/O queues). */
  static discovery<D extends SubsystemController>(now?: number): NvmeofSubsystem<D> {
    return new NvmeofSubsystem<D>(
      {
        nqn: DISCOVERY_NQN,
        model: 'rocm-ernic discovery',
        serial: 'ERNICDISC',
        namespaces: [],
        maxIoQueues: 0,
      },
      'discovery',
      now,
    );
  }

  /** Identify's NN: the largest nsid (namespaces are numbered 1..nn, some may be inactive). */
  get nn(): number {
    let max = 0;
    for (const nsid of this.namespaces.keys()) max = Math.max(max, nsid);
    return max;
  }

  ids(nsid: number): NamespaceIds | undefined {
    return this.#ids.get(nsid);
  }

  hostAllowed(hostnqn: string): boolean {
    return this.#hosts === null || this.#hosts.has(hostnqn);
  }

  // ---- controllers

  /** A free controller id, or null when MAX_CONTROLLERS are live. */
  allocCntlid(): number | null {
    if (this.#controllers.size >= MAX_CONTROLLERS) return null;
    for (;;) {
      const id = this.#nextCntlid;
      this.#nextCntlid = id >= CNTLID_MAX ? CNTLID_MIN : id + 1;
      if (!this.#controllers.has(id)) return id;
    }
  }

  addController(c: C): void {
    this.#controllers.set(c.cntlid, c);
  }

  removeController(c: C): void {
    if (this.#controllers.get(c.cntlid) === c) this.#controllers.delete(c.cntlid);
  }

  controller(cntlid: number): C | undefined {
    return this.#controllers.get(cntlid);
  }

  get controllerCount(): number {
    return this.#controllers.size;
  }

  /** A namespace's attributes changed (size, for one): every controller logs it and raises the notice. */
  namespaceChanged(nsid: number): void {
    for (const c of this.#controllers.values()) c.namespaceChanged(nsid);
  }

  // ---- discovery

  /** Discovery only: list `subsystem` at `port` in the log page. */
  list(subsystem: NvmeofSubsystem, port: PortAddress): void {
    if (this.kind !== 'discovery') throw new Error('only the discovery subsystem lists subsystems');
    this.#listed.push({ subsystem, port });
    this.#genctr++;
    for (const c of this.#controllers.values()) c.discoveryChanged();
  }

  get listed(): ReadonlyArray<{ readonly subsystem: NvmeofSubsystem; readonly port: PortAddress }> {
    return this.#listed;
  }

  /** Discovery log generation counter (changes whenever the list does). */
  get genctr(): number {
    return this.#genctr;
  }

  /** Tear down every controller and close the namespaces. */
  async close(): Promise<void> {
    for (const c of [...this.#controllers.values()]) c.destroy('subsystem closed');
    for (const ns of this.namespaces.values()) await ns.close();
  }
}
