// Reading the live device for the stats file and the metrics: the counters
// the server already keeps (nothing here counts anything), gathered into the
// records stats-format.ts prints.
//
//   device.counters            BAR0 reads/writes, doorbell writes, device resets
//   device.commandCounts       device commands by opcode (dev_cmd and the admin queue)
//   device.interrupts.fired    MSI-X interrupts delivered
//   device.stats.lif / .port   the Ethernet LIF and port blocks (lib/ionic/stats.ts)
//   device.rdma.counters       RDMA device counters (lib/rdma/counters.ts)
//   device.rdma.rm.qps         per-QP counters and WQEs by opcode
//   meshDataPath.stats         and Mesh.stats(), with --backend tcp:...
//   roce.counters()            the RoCEv2 transport's, with --backend roce (./roce-stats.ts)
//   the P4 engine               with --p4 options (./p4-stats.ts)

import type { IonicDevice } from '../ionic/device';
import { ionic_lif_stats, ionic_port_stats } from '../ionic/layouts';
import type { MeshDataPath } from '../rdma/datapath/mesh';
import { DeviceCounter, DEVICE_COUNTER_NAMES, QP_COUNTER_NAMES } from '../rdma/counters';
import { GSI_QPN } from '../rdma/limits';
import type { QpRecord } from '../rdma/records';
import { QP_STATE_NAMES } from '../rdma/types';
import type { ConnectionView } from './activity';
import { p4Rows } from './p4-stats';
import type { P4StatsSource } from './p4-stats';
import { roceRows, type RoceStatsSource } from './roce-stats';
import {
  INTERNAL_ERRORS_KEY,
  MESH_NODE_KEY,
  MESH_UNREGISTERED,
  OPCODE_NAMES,
  QpBlock,
  STATE_KEY,
  StatRow,
  StatsSection,
  StatsSnapshot,
} from './stats-format';
import { guardStats } from '../guard';
import type { LoopWatch } from './loop-watch';

/** The mesh as the ops tools see it (lib/mesh Mesh.stats()). */
export interface MeshStatsSource {
  stats(): {
    readonly nodeId: number | undefined;
    readonly role: string;
    readonly connections: number;
    readonly established: number;
    readonly outboundBytes: number;
    readonly inboundBytes: number;
    readonly inboundMessages: number;
    readonly heldConnections: number;
    readonly parserBytes: number;
    readonly inboundDropped: number;
    readonly relayDropped: number;
    readonly protocolErrors: number;
  };
}

/** Everything the stats file and /metrics read. */
export interface OpsSources {
  readonly device: IonicDevice;
  /** As given on the command line. */
  readonly socket: string;
  readonly backend: string;
  readonly mac: string;
  readonly connection: ConnectionView;
  readonly mesh?: MeshStatsSource | null;
  /** The mesh data path (lib/backends/mesh.ts), with --backend tcp:... */
  readonly meshDataPath?: Pick<MeshDataPath, 'stats'> | null;
  /** The RoCEv2 transport, with --backend roce. */
  readonly roce?: RoceStatsSource | null;
  /** The P4 engine, with --p4 options. */
  readonly p4?: P4StatsSource | null;
  /** The loop-stall watchdog, with --loop-watch. */
  readonly loopWatch?: LoopWatch | null;
}

/** PCI vendor:device as the stats file shows it. */
const PCI_ID_TEXT = '0x1dd8:0x1002';

/** Most QP blocks one stats file lists (lowest ids first); qp_count says how many there are. */
const STATS_FILE_MAX_QPS = 256;

/** QP transport names by QpType value. */
const QP_TYPE_NAMES: readonly string[] = ['RC', 'UC', 'RD', 'UD', 'SRQ', 'XRC_INI', 'XRC_TGT', 'XRC_SRQ'];

export function qpTypeName(qp: QpRecord): string {
  return qp.id === GSI_QPN ? 'GSI' : (QP_TYPE_NAMES[qp.type] ?? `type${qp.type}`);
}

export function qpStateName(qp: QpRecord): string {
  return QP_STATE_NAMES[qp.state] ?? `state${qp.state}`;
}

type StatsBlock = Readonly<Record<string, unknown>>;

/** Each named counter of an Ethernet stats block (every field of its layout table) with its index in the block. */
export function blockFields(layout: StatsBlock): [name: string, index: number][] {
  const out: [string, number][] = [];
  for (const [name, field] of Object.entries(layout)) {
    if (typeof field !== 'object' || field === null || !('off' in field)) continue;
    out.push([name, (field as { off: number }).off / 8]);
  }
  return out;
}

/** The named counters of an Ethernet stats block with their values. */
function blockRows(layout: StatsBlock, values: Float64Array): StatRow[] {
  return blockFields(layout).map(([name, i]): StatRow => [name, values[i] ?? 0]);
}

function lifRows(d: IonicDevice): StatRow[] {
  return blockRows(ionic_lif_stats, d.stats.lif);
}

function portRows(d: IonicDevice): StatRow[] {
  return blockRows(ionic_port_stats, d.stats.port);
}

function sumLif(d: IonicDevice, names: readonly (keyof typeof ionic_lif_stats)[]): number {
  let n = 0;
  for (const k of names) {
    const f = ionic_lif_stats[k];
    if (typeof f === 'object') n += d.stats.lif[f.off / 8] ?? 0;
  }
  return n;
}

/** Bytes the LIF sent and received (every destination kind). */
function ipBytes(d: IonicDevice): { tx: number; rx: number } {
  return {
    tx: sumLif(d, ['tx_ucast_bytes', 'tx_mcast_bytes', 'tx_bcast_bytes']),
    rx: sumLif(d, ['rx_ucast_bytes', 'rx_mcast_bytes', 'rx_bcast_bytes']),
  };
}

export function commandsTotal(d: IonicDevice): number {
  let n = 0;
  for (const v of d.commandCounts.values()) n += v;
  return n + (d.rdma?.counters.get(DeviceCounter.admin_commands) ?? 0);
}

function rdma(d: IonicDevice, index: number): number {
  return d.rdma?.counters.get(index) ?? 0;
}

/**
 * The C rocm-ernic's fifteen device counters, in its order. uar_* is the
 * doorbell BAR: it is write-only (reads return 0 and are not counted).
 */
function deviceRows(d: IonicDevice): StatRow[] {
  const ip = ipBytes(d);
  const c = d.counters;
  return [
    ['commands', commandsTotal(d)],
    ['bar0_reads', c.bar0Reads],
    ['bar0_writes', c.bar0Writes],
    ['uar_reads', 0],
    ['uar_writes', c.doorbells],
    ['mmio_reads_total', c.bar0Reads],
    ['mmio_writes_total', c.bar0Writes + c.doorbells],
    ['interrupts', d.interrupts.fired],
    ['reset_count', c.resets],
    ['total_bytes_sent', rdma(d, DeviceCounter.tx_bytes)],
    ['total_bytes_received', rdma(d, DeviceCounter.rx_bytes)],
    ['total_bytes_rdma_read', rdma(d, DeviceCounter.rdma_read_bytes)],
    ['total_bytes_rdma_write', rdma(d, DeviceCounter.rdma_write_bytes)],
    ['total_ip_bytes_tx', ip.tx],
    ['total_ip_bytes_rx', ip.rx],
  ];
}

/** Live object counts in place of the *_active counters (which the guest's STATS read refreshes). */
function rdmaCounterRows(d: IonicDevice): StatRow[] {
  const e = d.rdma;
  if (!e) return [];
  e.hooks.refreshCounters?.();
  const n = e.rm.counts();
  const active: Record<string, number> = {
    qps_active: n.qps,
    cqs_active: n.cqs,
    mrs_active: n.mrs,
    ahs_active: n.ahs,
    srqs_active: n.srqs,
  };
  return DEVICE_COUNTER_NAMES.map((name, i): StatRow => [name, active[name] ?? e.counters.get(i)]);
}

/** WQEs by opcode over every QP the device has had. */
function opcodeTotalRows(d: IonicDevice): StatRow[] {
  const e = d.rdma;
  if (!e) return [];
  const totals = e.rm.opcodeTotals();
  return OPCODE_NAMES.map((name, i): StatRow => [name, totals[i] ?? 0]);
}

function meshRows(src: OpsSources): StatRow[] {
  const m = src.mesh?.stats();
  const dp = src.meshDataPath?.stats;
  if (!m && !dp) return [];
  const rows: StatRow[] = [];
  if (m) {
    rows.push(
      ['node_id', m.nodeId ?? '(not registered)'],
      ['role', m.role],
      ['connections', m.connections],
      ['established', m.established],
      ['outbound_bytes', m.outboundBytes],
      ['inbound_bytes', m.inboundBytes],
      ['inbound_messages', m.inboundMessages],
      ['held_connections', m.heldConnections],
      ['parser_bytes', m.parserBytes],
      ['inbound_dropped', m.inboundDropped],
      ['relay_dropped', m.relayDropped],
      ['protocol_errors', m.protocolErrors],
    );
  }
  if (dp)
    rows.push(['pending_requests', dp.pending], ['held_requests', dp.held], ['replies_dropped', dp.repliesDropped]);
  return rows;
}

/** Live QPs by id, ascending. */
export function qpsById(d: IonicDevice): QpRecord[] {
  const qps = d.rdma ? [...d.rdma.rm.qps.values()] : [];
  return qps.sort((a, b) => a.id - b.id);
}

function qpBlock(qp: QpRecord): QpBlock {
  const rows: StatRow[] = [
    ['type', qpTypeName(qp)],
    ['state', qpStateName(qp)],
  ];
  QP_COUNTER_NAMES.forEach((name, i) => rows.push([name, qp.stats.get(i)]));
  const opcodes: [string, number][] = [];
  OPCODE_NAMES.forEach((name, i) => opcodes.push([name, qp.opcodes[i] ?? 0]));
  return { id: qp.id, rows, opcodes };
}

/**
 * The Instance section. `state` and `mesh_node` are for programs (one
 * word or an integer each); `connection` is free text for people.
 */
export function instanceRows(src: OpsSources): StatRow[] {
  const rows: StatRow[] = [
    ['socket', src.socket || '(not set)'],
    ['backend', src.backend],
    ['pci', PCI_ID_TEXT],
    ['mac', src.mac],
    ['connection', src.connection.state],
  ];
  if (src.connection.phase) rows.push([STATE_KEY, src.connection.phase]);
  if (src.mesh) rows.push([MESH_NODE_KEY, src.mesh.stats().nodeId ?? MESH_UNREGISTERED]);
  rows.push([INTERNAL_ERRORS_KEY, guardStats.contained]);
  if (src.loopWatch) rows.push(['loop_turn_max_ms', Number(src.loopWatch.maxMs.toFixed(1))]);
  return rows;
}

/** One snapshot of everything, for the stats file. */
export function collectStats(src: OpsSources, writeCount: number, maxQps = STATS_FILE_MAX_QPS): StatsSnapshot {
  const d = src.device;
  const sections: StatsSection[] = [{ title: 'Device Statistics', rows: deviceRows(d) }];
  if (d.rdma) {
    sections.push({ title: 'RDMA Counters', rows: rdmaCounterRows(d) });
    sections.push({ title: 'RDMA WQEs by Opcode', rows: opcodeTotalRows(d) });
  }
  sections.push({ title: 'Ethernet LIF Statistics', rows: lifRows(d) });
  sections.push({ title: 'Ethernet Port Statistics', rows: portRows(d) });
  const mesh = meshRows(src);
  if (mesh.length) sections.push({ title: 'Mesh Statistics', rows: mesh });
  const roce = src.roce ? roceRows(src.roce) : [];
  if (roce.length) sections.push({ title: 'RoCE Statistics', rows: roce });
  if (src.p4) sections.push({ title: 'P4 Statistics', rows: p4Rows(src.p4) });
  const qps = qpsById(d);
  const shown = qps.slice(0, maxQps);
  return {
    instance: instanceRows(src),
    writeCount,
    sections,
    qpSummary: [
      ['qp_count', qps.length],
      ['qps_shown', shown.length],
    ],
    qps: shown.map(qpBlock),
  };
}
