// One NVMe-oF controller: the association a host builds with an admin
// Connect. It holds the properties (CAP, VS, CC, CSTS), features, the
// keep-alive timer, held Asynchronous Event Requests, the error log and the
// changed namespace list, and runs the admin commands (Identify, Get Log
// Page, Get/Set Features, Keep Alive, Abort, Asynchronous Event Request)
// and, through io.ts, the I/O commands of its queues. Which queue a command
// came on, and Connect itself, are queue.ts's business.
//
// The keep-alive timer is an unref'd setTimeout: it never holds the process
// open, and a test drives it with fake timers. When it fires the controller
// reports a fatal status and is torn down: held AERs complete, queues are
// told (the transport then disconnects them), and the cntlid is free again.

import { Logger, nullLogger } from '../../log';
import {
  checkSgl,
  CmdResult,
  dataToHost,
  done,
  fail,
  failRetry,
  NvmeCommand,
  sqeField,
  SUCCESS,
  TargetDma,
} from './command';
import { FeatureHost, getFeature, roundKato, setFeature } from './features';
import {
  activeNamespaceList,
  identifyController,
  identifyNamespace,
  identifyNvmController,
  namespaceDescriptors,
} from './identify';
import { executeIo } from './io';
import {
  AdminOpcode,
  AER_RESULT,
  AerNotice,
  AerType,
  CAP,
  CC,
  Cns,
  CSI_NVM,
  CSTS,
  GET_LOG_RAE,
  ID_CTRL,
  IDENTIFY_DATA_SIZE,
  LogPageId,
  NSID_ALL,
  NVM_CQES_LOG2,
  NVM_SQES_LOG2,
  nvme_abort,
  nvme_changed_ns_log,
  nvme_get_log_page,
  nvme_identify,
  nvme_properties,
  nvme_sqe,
  NVME_VS_1_3,
  NvmeStatus,
  nvmf_property_command,
  PROPERTY_ATTRIB_8_BYTES,
  PROPERTY_ATTRIB_SIZE_MASK,
} from './layouts';
import {
  ASYNC_EVENT_LIMIT,
  CAP_TIMEOUT_500MS,
  ERROR_LOG_ENTRIES,
  MAX_PENDING_EVENTS,
  MAX_TRANSFER_BYTES,
  QUEUE_ENTRIES,
} from './limits';
import { changedNamespaceLog, discoveryLog, ErrorEntry, errorLog, firmwareSlotLog, smartLog } from './log-pages';
import type { NvmeofSubsystem } from './subsystem';

interface ControllerOptions {
  readonly subsystem: NvmeofSubsystem<NvmeofController>;
  readonly cntlid: number;
  readonly hostnqn: string;
  readonly hostid: Buffer;
  /** Keep-alive timeout from Connect, ms (0: none). */
  readonly kato: number;
  readonly logger?: Logger;
  /** Clock for SMART power-on hours (tests). */
  readonly now?: () => number;
}

/** Why a controller went away. */
export type TeardownReason = 'keep-alive timeout' | 'admin queue closed' | 'subsystem closed' | 'host request';

interface HeldAer {
  readonly cid: number;
  readonly resolve: (r: CmdResult) => void;
}

interface AsyncEvent {
  readonly type: number;
  readonly info: number;
  readonly logPage: number;
}

/** CAP: MQES (0's based), TO, the NVM command set, MPSMIN 0 (4 KiB pages). */
const CAP_VALUE = QUEUE_ENTRIES - 1 + CAP_TIMEOUT_500MS * 2 ** CAP.TO_SHIFT + CAP.CSS_NVM;
const TWO_32 = 2 ** 32;

export class NvmeofController implements FeatureHost {
  readonly cntlid: number;
  readonly subsystem: NvmeofSubsystem<NvmeofController>;
  readonly hostnqn: string;
  readonly hostid: Buffer;
  aec = 0;
  readonly featureValues = new Map<number, number>();
  #cc = 0;
  #csts = 0;
  #kato: number;
  #timer: NodeJS.Timeout | null = null;
  #alive = true;
  readonly #log: Logger;
  readonly #now: () => number;
  /** Attached queues: qid -> entries. */
  readonly #queues = new Map<number, number>();
  readonly #goneListeners = new Set<(reason: TeardownReason) => void>();
  readonly #aers: HeldAer[] = [];
  readonly #events: AsyncEvent[] = [];
  /** Log pages whose event was reported and not yet read (further events of that kind wait). */
  readonly #masked = new Set<number>();
  readonly #errors: ErrorEntry[] = [];
  #errorCount = 0;
  #changedNs: number[] = [];
  #changedOverflow = false;

  constructor(o: ControllerOptions) {
    this.cntlid = o.cntlid;
    this.subsystem = o.subsystem;
    this.hostnqn = o.hostnqn;
    this.hostid = Buffer.from(o.hostid);
    this.#kato = roundKato(o.kato);
    this.#log = o.logger ?? nullLogger;
    this.#now = o.now ?? Date.now;
    this.#armKeepAlive();
  }

  get discovery(): boolean {
    return this.subsystem.kind === 'discovery';
  }
  get maxIoQueues(): number {
    return this.subsystem.maxIoQueues;
  }
  get alive(): boolean {
    return this.#alive;
  }
  get cc(): number {
    return this.#cc;
  }
  get csts(): number {
    return this.#csts;
  }
  get kato(): number {
    return this.#kato;
  }
  /** Enabled and ready: admin (other than Fabrics) and I/O commands may run. */
  get ready(): boolean {
    return this.#alive && (this.#cc & CC.EN) !== 0 && (this.#csts & CSTS.RDY) !== 0;
  }
  get heldAers(): number {
    return this.#aers.length;
  }
  get errorCount(): number {
    return this.#errorCount;
  }

  // ---- keep alive

  setKato(ms: number): void {
    this.#kato = ms;
    this.#armKeepAlive();
  }

  #armKeepAlive(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    if (this.#kato === 0 || !this.#alive) return;
    this.#timer = setTimeout(() => this.#keepAliveExpired(), this.#kato);
    this.#timer.unref();
  }

  #keepAliveExpired(): void {
    this.#timer = null;
    this.#log.warn('nvmeof: keep-alive timeout, controller torn down', {
      cntlid: this.cntlid,
      kato: this.#kato,
      hostnqn: this.hostnqn,
    });
    this.#csts |= CSTS.CFS;
    this.destroy('keep-alive timeout');
  }

  // ---- queues and teardown

  /** Attach queue `qid` with `entries`; false when the qid is taken. */
  attachQueue(qid: number, entries: number): boolean {
    if (this.#queues.has(qid)) return false;
    this.#queues.set(qid, entries);
    return true;
  }

  detachQueue(qid: number): void {
    this.#queues.delete(qid);
  }

  hasQueue(qid: number): boolean {
    return this.#queues.has(qid);
  }

  /** Called once when the controller goes away; returns a function that removes the listener. */
  onGone(listener: (reason: TeardownReason) => void): () => void {
    this.#goneListeners.add(listener);
    return () => this.#goneListeners.delete(listener);
  }

  /** End the association: held AERs complete, queues are told, the cntlid is freed. */
  destroy(reason: TeardownReason): void {
    if (!this.#alive) return;
    this.#alive = false;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    this.#failAers();
    this.subsystem.removeController(this);
    this.#log.info('nvmeof: controller gone', { cntlid: this.cntlid, reason });
    for (const l of [...this.#goneListeners]) l(reason);
    this.#goneListeners.clear();
  }

  // ---- properties

  propertyGet(cmd: NvmeCommand): CmdResult {
    const eight = (sqeField(cmd, nvmf_property_command.attrib) & PROPERTY_ATTRIB_SIZE_MASK) === PROPERTY_ATTRIB_8_BYTES;
    const offset = sqeField(cmd, nvmf_property_command.offset);
    const p = Object.values(nvme_properties).find((x) => x.off === offset);
    if (!p) return fail(NvmeStatus.INVALID_FIELD, nvmf_property_command.offset);
    if (eight !== (p.size === 8)) return fail(NvmeStatus.INVALID_FIELD, nvmf_property_command.attrib);
    switch (p) {
      case nvme_properties.CAP:
        return done(CAP_VALUE % TWO_32, Math.floor(CAP_VALUE / TWO_32));
      case nvme_properties.VS:
        return done(NVME_VS_1_3);
      case nvme_properties.CC:
        return done(this.#cc);
      default:
        return done(this.#csts);
    }
  }

  async propertySet(cmd: NvmeCommand): Promise<CmdResult> {
    if ((sqeField(cmd, nvmf_property_command.attrib) & PROPERTY_ATTRIB_SIZE_MASK) !== 0) {
      return fail(NvmeStatus.INVALID_FIELD, nvmf_property_command.attrib);
    }
    if (sqeField(cmd, nvmf_property_command.offset) !== nvme_properties.CC.off)
      return fail(NvmeStatus.INVALID_FIELD, nvmf_property_command.offset);
    const value = sqeField(cmd, nvmf_property_command.value);
    if (value >= TWO_32) return fail(NvmeStatus.INVALID_FIELD, nvmf_property_command.value);
    await this.#updateCc(value);
    return SUCCESS;
  }

  async #updateCc(next: number): Promise<void> {
    const old = this.#cc;
    this.#cc = next;
    const field = (v: number, shift: number, mask: number): number => (v >>> shift) & mask;
    if (next & CC.EN && !(old & CC.EN)) {
      const ok =
        field(next, CC.IOSQES_SHIFT, CC.IOSQES_MASK) === NVM_SQES_LOG2 &&
        field(next, CC.IOCQES_SHIFT, CC.IOCQES_MASK) === NVM_CQES_LOG2 &&
        field(next, CC.MPS_SHIFT, CC.MPS_MASK) === 0 &&
        field(next, CC.AMS_SHIFT, CC.AMS_MASK) === 0 &&
        field(next, CC.CSS_SHIFT, CC.CSS_MASK) === 0;
      this.#csts = ok ? this.#csts | CSTS.RDY : this.#csts | CSTS.CFS;
    }
    if (!(next & CC.EN) && old & CC.EN) this.#reset();
    const shn = field(next, CC.SHN_SHIFT, CC.SHN_MASK);
    const oldShn = field(old, CC.SHN_SHIFT, CC.SHN_MASK);
    if (shn && !oldShn) {
      // Shutdown: processing occurring while the namespaces reach stable storage, then complete.
      this.#csts = (this.#csts & ~CSTS.SHST_MASK) | (1 << CSTS.SHST_SHIFT);
      for (const ns of this.subsystem.namespaces.values()) await ns.flush();
      if (field(this.#cc, CC.SHN_SHIFT, CC.SHN_MASK)) this.#csts = (this.#csts & ~CSTS.SHST_MASK) | CSTS.SHST_COMPLETE;
    }
    if (!shn && oldShn) this.#csts &= ~CSTS.SHST_MASK;
  }

  /** CC.EN 1 -> 0: a controller reset (the association and its queues stay). */
  #reset(): void {
    this.#csts &= ~(CSTS.RDY | CSTS.CFS);
    this.#failAers();
    this.#events.length = 0;
    this.#masked.clear();
    this.aec = 0;
    this.featureValues.clear();
  }

  // ---- errors and events

  /** Note a failed command in the error log. */
  recordError(sqid: number, cid: number, r: CmdResult, nsid: number): void {
    this.#errorCount++;
    this.#errors.push({ errorCount: this.#errorCount, sqid, cid, status: r.status, loc: r.loc, nsid });
    if (this.#errors.length > ERROR_LOG_ENTRIES) this.#errors.shift();
  }

  /** A namespace changed: log it, and raise the notice if the host asked for it. */
  namespaceChanged(nsid: number): void {
    if (!this.#changedOverflow && !this.#changedNs.includes(nsid)) {
      if (this.#changedNs.length >= nvme_changed_ns_log.MAX) this.#changedOverflow = true;
      else this.#changedNs.push(nsid);
    }
    if (this.aec & ID_CTRL.OAES_NS_ATTR)
      this.#raise({ type: AerType.NOTICE, info: AerNotice.NS_CHANGED, logPage: LogPageId.CHANGED_NS });
  }

  /** The discovery log changed (discovery controllers). */
  discoveryChanged(): void {
    if (this.aec & ID_CTRL.OAES_DISC_CHANGE)
      this.#raise({ type: AerType.NOTICE, info: AerNotice.DISC_CHANGED, logPage: LogPageId.DISCOVERY });
  }

  #raise(e: AsyncEvent): void {
    if (this.#masked.has(e.logPage) || this.#events.some((x) => x.logPage === e.logPage)) return;
    if (this.#events.length >= MAX_PENDING_EVENTS) this.#events.shift();
    this.#events.push(e);
    this.#deliverEvents();
  }

  #deliverEvents(): void {
    while (this.#aers.length > 0 && this.#events.length > 0) {
      const e = this.#events.shift()!;
      const aer = this.#aers.shift()!;
      this.#masked.add(e.logPage);
      aer.resolve(done(e.type | (e.info << AER_RESULT.INFO_SHIFT) | (e.logPage << AER_RESULT.LOG_PAGE_SHIFT)));
    }
  }

  #failAers(): void {
    for (const aer of this.#aers.splice(0)) aer.resolve(failRetry(NvmeStatus.ABORT_QUEUE));
  }

  // ---- admin commands

  /** Run an admin command (not Fabrics; the controller is ready). */
  executeAdmin(cmd: NvmeCommand, dma: TargetDma): Promise<CmdResult> | CmdResult {
    switch (cmd.opcode) {
      case AdminOpcode.IDENTIFY:
        return this.#identify(cmd, dma);
      case AdminOpcode.GET_LOG_PAGE:
        return this.#getLogPage(cmd, dma);
      case AdminOpcode.SET_FEATURES:
        return setFeature(this, cmd);
      case AdminOpcode.GET_FEATURES:
        return getFeature(this, cmd, dma);
      case AdminOpcode.KEEP_ALIVE:
        return this.#keepAlive(cmd);
      case AdminOpcode.ASYNC_EVENT:
        return this.#asyncEvent(cmd);
      case AdminOpcode.ABORT:
        return this.#abort(cmd);
      default:
        return fail(NvmeStatus.INVALID_OPCODE, nvme_sqe.opcode);
    }
  }

  /** Run an I/O command. */
  executeIo(cmd: NvmeCommand, dma: TargetDma): Promise<CmdResult> {
    return executeIo(this.subsystem, cmd, dma);
  }

  #keepAlive(cmd: NvmeCommand): CmdResult {
    if (this.#kato === 0) return fail(NvmeStatus.KA_TIMEOUT_INVALID);
    const bad = checkSgl(cmd, 0, false);
    if (bad) return bad;
    this.#armKeepAlive();
    return SUCCESS;
  }

  #asyncEvent(cmd: NvmeCommand): Promise<CmdResult> | CmdResult {
    if (this.#aers.length >= ASYNC_EVENT_LIMIT) return fail(NvmeStatus.ASYNC_LIMIT);
    const bad = checkSgl(cmd, 0, false);
    if (bad) return bad;
    return new Promise<CmdResult>((resolve) => {
      this.#aers.push({ cid: cmd.cid, resolve });
      this.#deliverEvents();
    });
  }

  /** Best effort: only a held AER can still be aborted (everything else completes as it runs). */
  #abort(cmd: NvmeCommand): CmdResult {
    const sqid = sqeField(cmd, nvme_abort.sqid);
    const cid = sqeField(cmd, nvme_abort.cid);
    const i = sqid === 0 ? this.#aers.findIndex((a) => a.cid === cid) : -1;
    if (i < 0) return done(1); // dword 0 bit 0: not aborted
    const [aer] = this.#aers.splice(i, 1);
    aer!.resolve(failRetry(NvmeStatus.ABORT_REQ));
    return done(0);
  }

  async #identify(cmd: NvmeCommand, dma: TargetDma): Promise<CmdResult> {
    const cns = sqeField(cmd, nvme_identify.cns);
    const sub = this.subsystem;
    let data: Buffer;
    if (this.discovery && cns !== Cns.CTRL) return fail(NvmeStatus.INVALID_FIELD, nvme_identify.cns);
    switch (cns) {
      case Cns.CTRL:
        data = identifyController(sub, this.cntlid);
        break;
      case Cns.NS:
        if (cmd.nsid === 0 || cmd.nsid === NSID_ALL || cmd.nsid > sub.nn)
          return fail(NvmeStatus.INVALID_NS, nvme_sqe.nsid);
        data = identifyNamespace(sub, cmd.nsid);
        break;
      case Cns.NS_ACTIVE_LIST:
        if (cmd.nsid >= NSID_ALL - 1) return fail(NvmeStatus.INVALID_NS, nvme_sqe.nsid);
        data = activeNamespaceList(sub, cmd.nsid);
        break;
      case Cns.NS_DESC_LIST:
        if (!sub.namespaces.has(cmd.nsid)) return fail(NvmeStatus.INVALID_NS, nvme_sqe.nsid);
        data = namespaceDescriptors(sub, cmd.nsid);
        break;
      case Cns.CS_CTRL:
        if (sqeField(cmd, nvme_identify.csi) !== CSI_NVM) return fail(NvmeStatus.INVALID_FIELD, nvme_identify.csi);
        data = identifyNvmController();
        break;
      default:
        return fail(NvmeStatus.INVALID_FIELD, nvme_identify.cns);
    }
    const bad = checkSgl(cmd, IDENTIFY_DATA_SIZE, false);
    if (bad) return bad;
    return (await dataToHost(cmd, dma, data)) ?? SUCCESS;
  }

  #logPage(lid: number, nsid: number): Buffer | CmdResult {
    if (this.discovery) {
      return lid === LogPageId.DISCOVERY
        ? discoveryLog(this.subsystem)
        : fail(NvmeStatus.INVALID_LOG_PAGE, nvme_get_log_page.lid);
    }
    switch (lid) {
      case LogPageId.ERROR:
        return errorLog(this.#errors);
      case LogPageId.SMART:
        if (nsid !== 0 && nsid !== NSID_ALL && !this.subsystem.namespaces.has(nsid))
          return fail(NvmeStatus.INVALID_NS, nvme_sqe.nsid);
        return smartLog(this.subsystem.stats, this.#errorCount, this.#now());
      case LogPageId.FW_SLOT:
        return firmwareSlotLog(this.subsystem.firmware);
      case LogPageId.CHANGED_NS:
        return changedNamespaceLog(this.#changedNs, this.#changedOverflow);
      default:
        return fail(NvmeStatus.INVALID_LOG_PAGE, nvme_get_log_page.lid);
    }
  }

  async #getLogPage(cmd: NvmeCommand, dma: TargetDma): Promise<CmdResult> {
    const lid = sqeField(cmd, nvme_get_log_page.lid);
    const rae = (sqeField(cmd, nvme_get_log_page.lsp) & GET_LOG_RAE) !== 0;
    const len = (sqeField(cmd, nvme_get_log_page.numdu) * 0x10000 + sqeField(cmd, nvme_get_log_page.numdl) + 1) * 4;
    const lpo = sqeField(cmd, nvme_get_log_page.lpo);
    if (len > MAX_TRANSFER_BYTES) return fail(NvmeStatus.INVALID_FIELD, nvme_get_log_page.numdl);
    if (lpo < 0 || lpo % 4 !== 0) return fail(NvmeStatus.INVALID_FIELD, nvme_get_log_page.lpo);
    const page = this.#logPage(lid, cmd.nsid);
    if (!Buffer.isBuffer(page)) return page;
    if (lpo > page.length) return fail(NvmeStatus.INVALID_FIELD, nvme_get_log_page.lpo);
    const bad = checkSgl(cmd, len, false);
    if (bad) return bad;
    const out = Buffer.alloc(len);
    page.copy(out, 0, lpo);
    const moved = await dataToHost(cmd, dma, out);
    if (moved) return moved;
    if (!rae) {
      if (lid === LogPageId.CHANGED_NS) {
        this.#changedNs = [];
        this.#changedOverflow = false;
      }
      this.#masked.delete(lid);
      this.#deliverEvents();
    }
    return SUCCESS;
  }
}
