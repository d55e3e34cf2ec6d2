// Device commands: the same 64-byte commands arrive through the BAR0
// device-command registers and through the admin queue. Each handler reads
// its fields from the command, acts on the LIF and port, and fills the
// 16-byte completion (and, for device commands, the data window).
// Refusals follow the firmware's status codes; nothing here throws.

import { MemStatus } from '../vfio-user/guest-memory';
import {
  IONIC_LIF_CAP_P4,
  IONIC_MAX_RING_LOG2,
  IONIC_MIN_RING_LOG2,
  LifAttr,
  LinkStatus,
  Opcode,
  QControlOp,
  QInitFlag,
  QType,
  RxFilterMatch,
  Status,
} from './constants';
import {
  buildPortInfo,
  MAX_MCAST_FILTERS,
  MAX_UCAST_FILTERS,
  queueCount,
  writeDevIdentity,
  writeLifConfig,
  writeLifIdentity,
  writePortIdentity,
  writeQIdentity,
} from './identity';
import {
  ionic_cmd,
  ionic_comp,
  ionic_dev_identify_cmd,
  ionic_dev_identify_comp,
  ionic_lif_getattr_cmd,
  ionic_lif_getattr_comp,
  ionic_lif_identify_cmd,
  ionic_lif_identity,
  ionic_lif_identify_comp,
  ionic_lif_info,
  ionic_lif_init_cmd,
  ionic_lif_init_comp,
  ionic_lif_setattr_cmd,
  ionic_lif_setattr_comp,
  ionic_port_init_cmd,
  ionic_q_control_cmd,
  ionic_q_identify_cmd,
  ionic_q_identify_comp,
  ionic_q_identity,
  ionic_q_init_cmd,
  ionic_q_init_comp,
  ionic_rx_filter_add_cmd,
  ionic_rx_filter_add_comp,
  ionic_rx_filter_del_cmd,
  ionic_rx_mode_set_cmd,
} from './layouts';
import { getField, setField, setRawBytes, viewRaw } from '../../protocol/field';
import type { Lif } from './lif';
import { offeredFeatures } from './offload/features';
import { AdminQueue, NotifyQueue, QueueConfig, RxQueue, TxQueue } from './queues';
import type { DeviceStats } from './stats';
import type { NicProfile } from './profile';
import type { GuestMemory } from '../vfio-user/guest-memory';
import type { InterruptController } from './interrupts';
import type { Logger } from '../log';
import { ionicAddr, ionicRange } from './ring';
import type { RdmaEngine } from './rdma/engine';

export interface CommandContext {
  readonly profile: NicProfile;
  readonly lif: Lif;
  readonly stats: DeviceStats;
  readonly interrupts: InterruptController;
  readonly log: Logger;
  memory(): GuestMemory | undefined;
  /** RESET: the whole device back to its power-on state (counters too). */
  resetDevice(): void;
  /** Counters by opcode, for stats and tests. */
  readonly counts: Map<number, number>;
  /** The RDMA half, when the profile offers RDMA (else the RDMA opcodes are unknown). */
  readonly rdma: RdmaEngine | null;
  /** The P4 engine's control surface (opcodes 70-72), with --p4 options (else they are unknown). */
  p4: P4DeviceControl | null;
}

/** The P4 engine's control surface as the device sees it (lib/p4/device/devcmd.ts). */
export interface P4DeviceControl {
  /** LIF_IDENTIFY reports the P4 capability: the guest was given some access. */
  readonly advertised: boolean;
  /** Runs opcode 70-72; a Status. `data`: the dev cmd data window, null on the admin queue. */
  execute(opcode: number, cmd: Buffer, comp: Buffer, data: Buffer | null, mem: GuestMemory | undefined): number;
}

/** Largest Ethernet MTU we accept from LIF_SETATTR MTU. */
const MIN_MTU = 68;

/**
 * Run one command. `data` is the 1912-byte data window for device commands,
 * or null on the admin queue (commands that need the window then fail).
 */
export function executeCommand(ctx: CommandContext, cmd: Buffer, comp: Buffer, data: Buffer | null): void {
  const opcode = getField(cmd, 0, ionic_cmd.opcode);
  ctx.counts.set(opcode, (ctx.counts.get(opcode) ?? 0) + 1);
  const status = run(ctx, opcode, cmd, comp, data);
  setField(comp, 0, ionic_comp.status, status);
  if (status !== Status.SUCCESS && ctx.log.debugEnabled) ctx.log.debug(`ionic: command ${opcode} -> status ${status}`);
}

function run(ctx: CommandContext, opcode: number, cmd: Buffer, comp: Buffer, data: Buffer | null): number {
  const p = ctx.profile;
  const lif = ctx.lif;
  if (opcode >= Opcode.P4_FIRST && opcode <= Opcode.P4_LAST)
    return ctx.p4 ? ctx.p4.execute(opcode, cmd, comp, data, ctx.memory()) : Status.EOPCODE;
  switch (opcode) {
    case Opcode.NOP:
    case Opcode.INIT:
    case Opcode.GETATTR:
    case Opcode.SETATTR:
    case Opcode.PORT_GETATTR:
    case Opcode.PORT_SETATTR:
      return Status.SUCCESS;

    case Opcode.RESET:
      ctx.resetDevice();
      return Status.SUCCESS;

    case Opcode.IDENTIFY: {
      if (!data) return Status.EINVAL;
      const ver = getField(cmd, 0, ionic_dev_identify_cmd.ver);
      writeDevIdentity(data, p);
      setField(comp, 0, ionic_dev_identify_comp.ver, Math.min(ver, 2));
      return Status.SUCCESS;
    }

    case Opcode.PORT_IDENTIFY:
      if (!data) return Status.EINVAL;
      writePortIdentity(data, p);
      return Status.SUCCESS;

    case Opcode.PORT_INIT: {
      const pa = ionicAddr(getField(cmd, 0, ionic_port_init_cmd.info_pa));
      const mem = ctx.memory();
      if (pa <= 0 || !mem) return Status.EINVAL;
      if (mem.write(pa, buildPortInfo(p, lif.mtu)) !== MemStatus.OK) return Status.BAD_ADDR;
      ctx.stats.portInfoPa = pa;
      ctx.stats.markDirty();
      ctx.stats.flush();
      return Status.SUCCESS;
    }

    case Opcode.PORT_RESET:
      ctx.stats.stop('port');
      ctx.stats.clear('port');
      return Status.SUCCESS;

    case Opcode.LIF_IDENTIFY: {
      if (!data) return Status.EINVAL;
      writeLifIdentity(data, p, lif.mac, lif.mtu);
      if (ctx.p4?.advertised)
        setField(
          data,
          0,
          ionic_lif_identity.capabilities,
          getField(data, 0, ionic_lif_identity.capabilities) | IONIC_LIF_CAP_P4,
        );
      setField(comp, 0, ionic_lif_identify_comp.ver, Math.min(getField(cmd, 0, ionic_lif_identify_cmd.ver), 1));
      return Status.SUCCESS;
    }

    case Opcode.LIF_INIT: {
      if (getField(cmd, 0, ionic_lif_init_cmd.index) !== 0) return Status.ENOENT;
      const pa = ionicAddr(getField(cmd, 0, ionic_lif_init_cmd.info_pa));
      const mem = ctx.memory();
      if (pa <= 0 || !mem) return Status.EINVAL;
      // lif_info: config, then status "link up" with the profile's speed (the carrier comes from here).
      const block = Buffer.alloc(ionic_lif_info.STATS);
      writeLifConfig(block, ionic_lif_info.CONFIG, p, lif.mac, lif.mtu, lif.features);
      setField(block, 0, ionic_lif_info.eid, 0);
      setField(block, 0, ionic_lif_info.link_status, LinkStatus.UP);
      setField(block, 0, ionic_lif_info.link_speed, p.linkSpeedMbps);
      if (mem.write(pa, block) !== MemStatus.OK) return Status.BAD_ADDR;
      lif.initialized = true;
      ctx.stats.lifInfoPa = pa;
      ctx.stats.markDirty();
      ctx.stats.flush();
      setField(comp, 0, ionic_lif_init_comp.hw_index, 0);
      return Status.SUCCESS;
    }

    case Opcode.LIF_RESET:
      ctx.stats.stop('lif');
      lif.reset();
      // The LIF's RDMA objects go with it: the driver frees their rings next.
      ctx.rdma?.reset();
      return Status.SUCCESS;

    case Opcode.LIF_GETATTR: {
      const attr = getField(cmd, 0, ionic_lif_getattr_cmd.attr);
      if (attr === LifAttr.MAC) setRawBytes(comp, 0, ionic_lif_getattr_comp.mac, lif.mac);
      else if (attr === LifAttr.MTU) setField(comp, 0, ionic_lif_getattr_comp.mtu, lif.mtu);
      else if (attr === LifAttr.STATE) setField(comp, 0, ionic_lif_getattr_comp.state, lif.initialized ? 1 : 0);
      else if (attr === LifAttr.FEATURES) setField(comp, 0, ionic_lif_getattr_comp.features, lif.features);
      return Status.SUCCESS;
    }

    case Opcode.LIF_SETATTR: {
      const attr = getField(cmd, 0, ionic_lif_setattr_cmd.attr);
      if (attr === LifAttr.MAC) {
        const mac = viewRaw(cmd, 0, ionic_lif_setattr_cmd.mac);
        if (mac[0]! & 1) return Status.EINVAL; // a multicast address cannot be a station address
        lif.mac = Buffer.from(mac);
      } else if (attr === LifAttr.MTU) {
        const mtu = getField(cmd, 0, ionic_lif_setattr_cmd.mtu);
        if (mtu < MIN_MTU || mtu > p.maxMtu) return Status.EINVAL;
        lif.mtu = mtu;
      } else if (attr === LifAttr.FEATURES) {
        // The answer is what we offer of what was asked; the driver keeps the AND of the two (ionic Ethernet E4.6).
        // Only the low 32 bits carry offloads we know: the rest (tunnels, GENEVE, TIMESTAMP) are never offered.
        const asked = getField(cmd, 0, ionic_lif_setattr_cmd.features);
        lif.features = (asked >= 0 ? asked % 2 ** 32 : 0) & offeredFeatures(p.offloads);
        setField(comp, 0, ionic_lif_setattr_comp.features, lif.features);
      }
      return Status.SUCCESS;
    }

    case Opcode.RX_MODE_SET:
      lif.rxFilters.mode = getField(cmd, 0, ionic_rx_mode_set_cmd.rx_mode);
      return Status.SUCCESS;

    case Opcode.RX_FILTER_ADD: {
      // A bounded filter table: the driver handles ENOSPC by going promiscuous (ionic Ethernet E4.6).
      if (lif.rxFilters.table.size >= MAX_UCAST_FILTERS + MAX_MCAST_FILTERS) return Status.ENOSPC;
      const match = getField(cmd, 0, ionic_rx_filter_add_cmd.match);
      // The same MAC twice is EEXIST, which the driver tolerates (ionic Ethernet E3.1).
      if (match === RxFilterMatch.MAC && lif.rxFilters.hasMac(viewRaw(cmd, 0, ionic_rx_filter_add_cmd.mac)))
        return Status.EEXIST;
      let id: number;
      if (match === RxFilterMatch.MAC) id = lif.rxFilters.addMac(viewRaw(cmd, 0, ionic_rx_filter_add_cmd.mac));
      else if (match === RxFilterMatch.VLAN)
        id = lif.rxFilters.addOther(match, getField(cmd, 0, ionic_rx_filter_add_cmd.vlan));
      else if (match === RxFilterMatch.MAC_VLAN)
        id = lif.rxFilters.addMac(viewRaw(cmd, 0, ionic_rx_filter_add_cmd.mac_vlan_mac));
      else return Status.EINVAL;
      setField(comp, 0, ionic_rx_filter_add_comp.filter_id, id);
      return Status.SUCCESS;
    }

    case Opcode.RX_FILTER_DEL:
      return lif.rxFilters.delete(getField(cmd, 0, ionic_rx_filter_del_cmd.filter_id)) ? Status.SUCCESS : Status.ENOENT;

    case Opcode.Q_IDENTIFY: {
      if (!data) return Status.EINVAL;
      const type = getField(cmd, 0, ionic_q_identify_cmd.type);
      if (!writeQIdentity(data, type)) return Status.EQTYPE;
      setField(comp, 0, ionic_q_identify_comp.ver, getField(data, 0, ionic_q_identity.version));
      return Status.SUCCESS;
    }

    case Opcode.Q_INIT:
      return qInit(ctx, cmd, comp);

    case Opcode.Q_CONTROL: {
      const q = lif.queue(getField(cmd, 0, ionic_q_control_cmd.type), getField(cmd, 0, ionic_q_control_cmd.index));
      if (!q) return Status.ENOENT;
      const oper = getField(cmd, 0, ionic_q_control_cmd.oper);
      if (oper === QControlOp.ENABLE) {
        q.enabled = true;
        if (q instanceof TxQueue) lif.runTx(q);
      } else if (oper === QControlOp.DISABLE) {
        q.enabled = false;
        // A frame waiting for this queue's buffers would wait for ever.
        if (q instanceof RxQueue) lif.releaseHeld();
      } else if (oper !== QControlOp.HANG_RESET) {
        return Status.EINVAL;
      }
      return Status.SUCCESS;
    }

    // The RDMA bootstrap (ionic RDMA R1): on the admin queue and through dev cmd alike
    // (the driver falls back to dev cmd for RDMA_RESET_LIF). The P4 surface (70-72) is routed above.
    case Opcode.RDMA_RESET_LIF:
    case Opcode.RDMA_CREATE_EQ:
    case Opcode.RDMA_CREATE_CQ:
    case Opcode.RDMA_CREATE_ADMINQ:
      return ctx.rdma ? ctx.rdma.bootstrap(opcode, cmd) : Status.EOPCODE;

    default:
      return Status.EOPCODE;
  }
}

/**
 * Bytes per ring entry at most, over every queue type: descriptors (the
 * notify queue's event ring follows its command slots, a page later), CQ
 * entries, SG lists. Used only to refuse rings that would run past 2^52.
 */
const QUEUE_DESC_BYTES_MAX = 128;
const QUEUE_DESC_SLACK = 4096;
const QUEUE_COMP_BYTES_MAX = 16;
const QUEUE_SG_BYTES_MAX = 256;

/** Q_INIT: validate type, index, ring size and vector, then create the queue. */
function qInit(ctx: CommandContext, cmd: Buffer, comp: Buffer): number {
  const type = getField(cmd, 0, ionic_q_init_cmd.type);
  const index = getField(cmd, 0, ionic_q_init_cmd.index);
  const ringLog2 = getField(cmd, 0, ionic_q_init_cmd.ring_size);
  const flags = getField(cmd, 0, ionic_q_init_cmd.flags);
  const intr = getField(cmd, 0, ionic_q_init_cmd.intr_index);
  if (type > QType.TXQ) return Status.EQTYPE;
  if (index >= queueCount(ctx.profile, type)) return Status.EQID;
  if (ringLog2 < IONIC_MIN_RING_LOG2 || ringLog2 > IONIC_MAX_RING_LOG2) return Status.EINVAL;
  if (flags & QInitFlag.IRQ && intr >= ctx.interrupts.vectors) return Status.EINVAL;
  const ringBase = getField(cmd, 0, ionic_q_init_cmd.ring_base);
  const cqBase = getField(cmd, 0, ionic_q_init_cmd.cq_ring_base);
  const sgBase = getField(cmd, 0, ionic_q_init_cmd.sg_ring_base);
  if (ringBase <= 0 || cqBase < 0 || sgBase < 0) return Status.EINVAL;
  if (type !== QType.NOTIFYQ && cqBase === 0) return Status.EINVAL;
  // Every ring must lie inside the 52-bit device address space: refused, never wrapped.
  const entries = 2 ** ringLog2;
  if (
    !ionicRange(ringBase, entries * QUEUE_DESC_BYTES_MAX + QUEUE_DESC_SLACK) ||
    !ionicRange(cqBase, entries * QUEUE_COMP_BYTES_MAX) ||
    !ionicRange(sgBase, entries * QUEUE_SG_BYTES_MAX)
  )
    return Status.EINVAL;
  const cfg: QueueConfig = {
    type,
    index,
    ringBase,
    cqBase,
    sgBase,
    ringLog2,
    intr,
    irq: (flags & QInitFlag.IRQ) !== 0,
    sg: (flags & QInitFlag.SG) !== 0,
    version: getField(cmd, 0, ionic_q_init_cmd.ver),
  };
  const lif = ctx.lif;
  const enable = (flags & QInitFlag.ENA) !== 0;
  switch (type) {
    case QType.ADMINQ:
      lif.adminq = new AdminQueue(cfg);
      lif.adminq.enabled = enable;
      break;
    case QType.NOTIFYQ:
      lif.notifyq = new NotifyQueue(cfg);
      lif.notifyq.enabled = enable;
      break;
    case QType.RXQ: {
      const q = new RxQueue(cfg);
      q.enabled = enable;
      lif.rxqs[index] = q;
      break;
    }
    case QType.TXQ: {
      const q = new TxQueue(cfg);
      q.enabled = enable;
      lif.txqs[index] = q;
      break;
    }
  }
  // Doorbells name a queue by (hw_type, hw_index): we use the logical type and index.
  setField(comp, 0, ionic_q_init_comp.hw_index, index);
  setField(comp, 0, ionic_q_init_comp.hw_type, type);
  return Status.SUCCESS;
}
