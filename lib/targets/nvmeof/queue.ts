// The transport-facing side: a target (one NVM subsystem and the discovery
// subsystem that lists it at an address) and its queues. The transport opens
// one NvmeofQueue per connection (in the server: per QP the IB CM bound),
// hands it every command capsule, and sends back the completion it gets.
//
// A queue's first command must be a Fabrics Connect. Connect on qid 0
// creates a controller (a new association, with a fresh cntlid); Connect on
// qid N joins the controller the Connect data names, if the same host owns
// it and N is within the subsystem's I/O queues. Refusals follow the Linux
// target: Connect Invalid Parameters with the offending field's offset in
// dword 0 (bit 16 set when it is in the Connect data), Connect Invalid Host
// for a host the subsystem does not allow.

import { getField } from '../../../protocol/field';
import { Logger, nullLogger } from '../../log';
import {
  capsuleCid,
  checkSgl,
  CmdResult,
  Cqe,
  dataFromHost,
  decodeCommand,
  done,
  fail,
  failRetry,
  getText,
  NvmeCommand,
  SGL_TYPE_FIELD,
  sqeField,
  SUCCESS,
  TargetDma,
} from './command';
import { NvmeofController, TeardownReason } from './controller';
import { roundKato } from './features';
import {
  CONNECT_CATTR_DISABLE_SQFLOW,
  CONNECT_IATTR_DATA,
  Discovery,
  FabricsType,
  IoOpcode,
  nvme_sqe,
  NvmeStatus,
  nvmf_connect_command,
  nvmf_connect_data,
  SQE_FLAGS,
} from './layouts';
import { ADMIN_QUEUE_MIN_ENTRIES, MAX_KATO_MS, QUEUE_ENTRIES } from './limits';
import { NvmeofSubsystem, PortAddress, validNqn } from './subsystem';

/** A subsystem of the target: its controllers are NvmeofControllers. */
export type TargetSubsystem = NvmeofSubsystem<NvmeofController>;

interface TargetOptions {
  readonly subsystem: TargetSubsystem;
  /** Where the subsystem is reachable (the discovery log entry). */
  readonly port: PortAddress;
  readonly logger?: Logger;
  readonly now?: () => number;
}

export interface QueueOptions {
  /** The controller this queue belongs to went away (keep-alive timeout, admin queue closed): disconnect. */
  readonly onTeardown?: (reason: TeardownReason) => void;
}

export class NvmeofTarget {
  readonly subsystem: TargetSubsystem;
  readonly discovery: TargetSubsystem;
  readonly port: PortAddress;
  readonly log: Logger;
  readonly now: () => number;

  constructor(o: TargetOptions) {
    this.subsystem = o.subsystem;
    this.port = o.port;
    this.log = o.logger ?? nullLogger;
    this.now = o.now ?? Date.now;
    this.discovery = NvmeofSubsystem.discovery(this.now());
    this.discovery.list(o.subsystem, o.port);
  }

  findSubsystem(nqn: string): TargetSubsystem | undefined {
    if (nqn === this.subsystem.nqn) return this.subsystem;
    if (nqn === this.discovery.nqn) return this.discovery;
    return undefined;
  }

  /** A new, unconnected queue moving data through `dma`. */
  openQueue(dma: TargetDma, opts: QueueOptions = {}): NvmeofQueue {
    return new NvmeofQueue(this, dma, opts);
  }

  /** Tear every controller down and close the namespaces. */
  async close(): Promise<void> {
    await this.discovery.close();
    await this.subsystem.close();
  }
}

/** Where a Connect Invalid Parameters points: a field of the SQE, or (IATTR) of the Connect data. */
function connectInvalid(at: { readonly off: number }, inData: boolean): CmdResult {
  return fail(NvmeStatus.CONNECT_INVALID_PARAM, inData ? undefined : at, (inData ? CONNECT_IATTR_DATA : 0) | at.off);
}

const SQHD_FLOW_DISABLED = 0xffff;
/** A queue before Connect accepts one command at a time. */
const UNCONNECTED_DEPTH = 1;

export class NvmeofQueue {
  #ctrl: NvmeofController | null = null;
  #qid = -1;
  #entries = UNCONNECTED_DEPTH;
  #sqhd = 0;
  #sqflow = true;
  #outstanding = 0;
  #closed = false;
  #gone: TeardownReason | null = null;
  #unlisten: (() => void) | null = null;

  constructor(
    private readonly target: NvmeofTarget,
    private readonly dma: TargetDma,
    private readonly opts: QueueOptions,
  ) {}

  get connected(): boolean {
    return this.#ctrl !== null;
  }
  /** Queue id after Connect, else -1. */
  get qid(): number {
    return this.#qid;
  }
  get controller(): NvmeofController | null {
    return this.#ctrl;
  }
  /** Commands taken and not yet completed (held AERs included). */
  get outstanding(): number {
    return this.#outstanding;
  }

  /** Run one command capsule (64-byte SQE, then any in-capsule data); resolves to its completion. */
  async submit(capsule: Buffer): Promise<Cqe> {
    const cmd = decodeCommand(capsule);
    if (this.#ctrl) this.#sqhd = (this.#sqhd + 1) % this.#entries;
    if (!cmd) return this.#cqe(capsuleCid(capsule), fail(NvmeStatus.INVALID_FIELD), null);
    if (this.#closed || this.#gone) return this.#cqe(cmd.cid, failRetry(NvmeStatus.ABORT_QUEUE), cmd);
    if (this.#outstanding >= this.#entries) return this.#cqe(cmd.cid, failRetry(NvmeStatus.CMD_INTERRUPTED), cmd);
    this.#outstanding++;
    let r: CmdResult;
    try {
      r = await this.#run(cmd);
    } catch (e) {
      // Safety net for our own bugs: the host gets an error, the queue stays up.
      this.target.log.error('nvmeof: command failed inside the controller', { opcode: cmd.opcode, error: String(e) });
      r = fail(NvmeStatus.INTERNAL);
    } finally {
      this.#outstanding--;
    }
    const ctrl = this.#ctrl;
    if (r.status !== NvmeStatus.SUCCESS && ctrl) {
      ctrl.recordError(this.#qid, cmd.cid, r, cmd.nsid);
      if (this.target.log.debugEnabled)
        this.target.log.debug('nvmeof: command failed', {
          qid: this.#qid,
          cid: cmd.cid,
          opcode: cmd.opcode,
          status: r.status,
          loc: r.loc,
        });
    }
    return this.#cqe(cmd.cid, r, cmd);
  }

  #cqe(cid: number, r: CmdResult, cmd: NvmeCommand | null): Cqe {
    const sgl = cmd?.sgl;
    const invalidateKey =
      sgl && sgl.kind === 'keyed' && sgl.invalidate && sgl.length > 0 && sgl.key !== 0 ? sgl.key : null;
    return {
      status: r.status,
      dw0: r.dw0,
      dw1: r.dw1,
      cid,
      invalidateKey,
      sqhd: this.#sqflow ? this.#sqhd : SQHD_FLOW_DISABLED,
      sqid: Math.max(this.#qid, 0),
    };
  }

  #run(cmd: NvmeCommand): Promise<CmdResult> | CmdResult {
    if ((cmd.flags & SQE_FLAGS.FUSE_MASK) !== 0 || (cmd.flags & SQE_FLAGS.PSDT_MASK) !== SQE_FLAGS.PSDT_SGL_METABUF) {
      return fail(NvmeStatus.INVALID_FIELD, nvme_sqe.flags);
    }
    // Every command's descriptor is checked, data or not (a null one is keyed, length 0), as the Linux target does.
    if (cmd.sgl.kind === 'bad') return fail(cmd.sgl.status, SGL_TYPE_FIELD);
    const fabrics = cmd.opcode === IoOpcode.FABRICS;
    const fctype = fabrics ? sqeField(cmd, nvmf_connect_command.fctype) : -1;
    const ctrl = this.#ctrl;
    if (!ctrl) {
      if (!fabrics) return fail(NvmeStatus.INVALID_OPCODE, nvme_sqe.opcode);
      if (fctype !== FabricsType.CONNECT) return fail(NvmeStatus.INVALID_OPCODE, nvmf_connect_command.fctype);
      return this.#connect(cmd);
    }
    if (fabrics) {
      if (fctype === FabricsType.CONNECT) return fail(NvmeStatus.CMD_SEQ_ERROR, nvmf_connect_command.fctype);
      if (this.#qid !== 0) return fail(NvmeStatus.INVALID_OPCODE, nvmf_connect_command.fctype);
      if (fctype === FabricsType.PROPERTY_GET) return ctrl.propertyGet(cmd);
      if (fctype === FabricsType.PROPERTY_SET) return ctrl.propertySet(cmd);
      return fail(NvmeStatus.INVALID_OPCODE, nvmf_connect_command.fctype);
    }
    if (!ctrl.ready) return fail(NvmeStatus.CMD_SEQ_ERROR, nvme_sqe.opcode);
    return this.#qid === 0 ? ctrl.executeAdmin(cmd, this.dma) : ctrl.executeIo(cmd, this.dma);
  }

  async #connect(cmd: NvmeCommand): Promise<CmdResult> {
    if (sqeField(cmd, nvmf_connect_command.recfmt) !== 0)
      return fail(NvmeStatus.CONNECT_FORMAT, nvmf_connect_command.recfmt);
    const badSgl = checkSgl(cmd, nvmf_connect_data.SIZE, true);
    if (badSgl) return badSgl;
    const data = Buffer.alloc(nvmf_connect_data.SIZE);
    const moved = await dataFromHost(cmd, this.dma, data);
    if (moved) return moved;
    const subnqn = getText(data, 0, nvmf_connect_data.subsysnqn);
    const hostnqn = getText(data, 0, nvmf_connect_data.hostnqn);
    const sub = subnqn === null ? undefined : this.target.findSubsystem(subnqn);
    if (!sub) return connectInvalid(nvmf_connect_data.subsysnqn, true);
    if (hostnqn === null || !validNqn(hostnqn)) return connectInvalid(nvmf_connect_data.hostnqn, true);
    if (!sub.hostAllowed(hostnqn))
      return fail(NvmeStatus.CONNECT_INVALID_HOST, undefined, CONNECT_IATTR_DATA | nvmf_connect_data.hostnqn.off);
    const qid = sqeField(cmd, nvmf_connect_command.qid);
    const sqsize = sqeField(cmd, nvmf_connect_command.sqsize);
    if (sqsize === 0 || sqsize >= QUEUE_ENTRIES) return connectInvalid(nvmf_connect_command.sqsize, false);
    const entries = sqsize + 1;
    const hostid = data.subarray(
      nvmf_connect_data.hostid.off,
      nvmf_connect_data.hostid.off + nvmf_connect_data.hostid.size,
    );
    const cntlid = getField(data, 0, nvmf_connect_data.cntlid);
    let ctrl: NvmeofController;
    let result: CmdResult;
    if (qid === 0) {
      if (entries < ADMIN_QUEUE_MIN_ENTRIES) return connectInvalid(nvmf_connect_command.sqsize, false);
      if (cntlid !== Discovery.CNTLID_DYNAMIC) return connectInvalid(nvmf_connect_data.cntlid, true);
      const kato = sqeField(cmd, nvmf_connect_command.kato);
      if (kato > MAX_KATO_MS) return connectInvalid(nvmf_connect_command.kato, false);
      const id = sub.allocCntlid();
      if (id === null) return fail(NvmeStatus.CONNECT_CTRL_BUSY);
      ctrl = new NvmeofController({
        subsystem: sub,
        cntlid: id,
        hostnqn,
        hostid,
        kato: roundKato(kato),
        logger: this.target.log,
        now: this.target.now,
      });
      sub.addController(ctrl);
      ctrl.attachQueue(0, entries);
      result = done(id);
      this.target.log.info('nvmeof: controller created', { cntlid: id, subnqn: sub.nqn, hostnqn, kato: ctrl.kato });
    } else {
      if (qid > sub.maxIoQueues) return connectInvalid(nvmf_connect_command.qid, false);
      const found = sub.controller(cntlid);
      if (!found || !found.alive || found.hostnqn !== hostnqn) return connectInvalid(nvmf_connect_data.cntlid, true);
      if (!found.hostid.equals(hostid)) return connectInvalid(nvmf_connect_data.hostid, true);
      if (!found.ready) return fail(NvmeStatus.CMD_SEQ_ERROR, nvmf_connect_command.qid);
      if (!found.attachQueue(qid, entries)) return connectInvalid(nvmf_connect_command.qid, false);
      ctrl = found;
      result = SUCCESS;
    }
    this.#ctrl = ctrl;
    this.#qid = qid;
    this.#entries = entries;
    this.#sqhd = 1 % entries; // the Connect itself was consumed
    this.#sqflow = (sqeField(cmd, nvmf_connect_command.cattr) & CONNECT_CATTR_DISABLE_SQFLOW) === 0;
    this.#unlisten = ctrl.onGone((reason) => this.#controllerGone(reason));
    return result;
  }

  #controllerGone(reason: TeardownReason): void {
    this.#gone = reason;
    this.#unlisten = null;
    this.opts.onTeardown?.(reason);
  }

  /** The transport disconnected: an admin queue ends its association, an I/O queue leaves it. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    const ctrl = this.#ctrl;
    this.#unlisten?.();
    this.#unlisten = null;
    if (!ctrl || this.#gone) return;
    if (this.#qid === 0) ctrl.destroy('admin queue closed');
    else ctrl.detachQueue(this.#qid);
  }
}
