// The server's own Prometheus endpoint (`rocm-ernic --metrics-port PORT`):
// /metrics over Node's http.Server, every value read from the live device
// when Prometheus scrapes (nothing is done per event). Names start with
// rocm_ernic_; where node_exporter's infiniband collector has a name for the
// same thing it is used, with its {device, port} labels:
//
//   rocm_ernic_port_data_{transmitted,received}_bytes_total{device,port}
//   rocm_ernic_rate_bytes_per_second{device,port}
//
// Every label set is bounded: QPs are aggregated by type and state, per-QP
// series exist only for the lowest QP_METRICS_MAX ids, opcodes and command
// numbers are small fixed sets. docs/operations.md lists every family.

import { p4Families } from './p4-stats';
import { roceFamilies } from './roce-stats';
import { Registry } from 'prom-client';
import type { IonicDevice } from '../ionic/device';
import type { MeshDataPath } from '../rdma/datapath/mesh';
import { DeviceCounter, DEVICE_COUNTER_NAMES, QP_COUNTER_NAMES } from '../rdma/counters';
import { connectionState } from './activity';
import {
  counterName,
  Emit,
  FamilySpec,
  qpCounterName,
  rdmaCounterName,
  registerFamilies,
  SHARED_FAMILIES,
  SharedFamily,
} from './metric-families';
import { ionic_lif_stats, ionic_port_stats } from '../ionic/layouts';
import { OPCODE_NAMES } from './stats-format';
import { guardStats } from '../guard';
import {
  blockFields,
  commandsTotal,
  MeshStatsSource,
  OpsSources,
  qpsById,
  qpStateName,
  qpTypeName,
} from './stats-source';

const METRICS_PREFIX = 'rocm_ernic_';
/** Per-QP series are kept for at most this many QPs (the lowest ids). */
export const QP_METRICS_MAX = 32;
/** The {device, port} of node_exporter's infiniband collector: the name the guest's ionic_rdma gives the device, port 1. */
const IB_DEVICE = 'ionic_0';
const IB_PORT = '1';

const RDMA_HELP: Readonly<Record<string, string>> = {
  admin_commands: 'RDMA admin queue commands completed (refused ones included)',
  admin_errors: 'RDMA admin queue commands completed with an error',
  admin_cqes: 'RDMA admin queue completions written',
  eq_events: 'Event queue entries posted',
  cq_arms: 'CQ arm doorbells',
  doorbells_aq: 'RDMA admin queue doorbells',
  doorbells_sq: 'Send queue doorbells',
  doorbells_rq: 'Receive queue doorbells',
  doorbells_cq: 'CQ doorbells',
  doorbells_bad: 'RDMA doorbells ignored (unknown queue, bad ring or index)',
  tx_wqes: 'Send queue WQEs run',
  rx_wqes: 'Receive WQEs consumed',
  cqes: 'Data completions written',
  send_msgs: 'SEND messages sent',
  recv_msgs: 'SEND messages received',
  tx_bytes: 'SEND payload bytes sent',
  rx_bytes: 'SEND payload bytes received',
  rdma_write_bytes: 'RDMA WRITE payload bytes',
  rdma_read_bytes: 'RDMA READ payload bytes',
  atomic_ops: 'Atomic operations executed',
  flushed_wqes: 'WQEs completed as flushed',
  local_length_errors: 'WQEs completed with a local length error',
  local_prot_errors: 'WQEs completed with a local protection error',
  local_qp_errors: 'WQEs completed with a local QP operation error',
  remote_access_errors: 'WQEs completed with a remote access error',
  remote_inv_req_errors: 'WQEs completed with a remote invalid request error',
  rnr_retry_exceeded: 'WQEs completed with RNR retry exceeded',
  retry_exceeded: 'WQEs completed with transport retry exceeded',
  mem_mgmt_errors: 'Memory management (REG_MR, LOCAL_INV, BIND_MW) errors',
  rnr_naks: 'Receiver-not-ready NAKs',
  cq_full_waits: 'Times a QP waited for room in a full CQ',
  roce_tx_packets: 'RoCEv2 packets sent (--backend roce)',
  roce_rx_packets: 'RoCEv2 packets received well-formed with a good ICRC (--backend roce)',
  roce_retransmits: 'RoCEv2 request packets sent again (--backend roce)',
  roce_timeouts: 'RoCEv2 local ACK timeouts (--backend roce)',
  roce_duplicates: 'RoCEv2 duplicate packets received (--backend roce)',
  roce_naks_tx: 'RoCEv2 NAKs sent, every kind (--backend roce)',
  roce_naks_rx: 'RoCEv2 NAKs received, every kind (--backend roce)',
  roce_icrc_errors: 'RoCEv2 frames dropped for a bad ICRC (--backend roce)',
  roce_rx_drops: 'RoCEv2 frames from the wire dropped, every reason (--backend roce)',
  reg_mr_wqes: 'REG_MR (fast registration) WQEs',
  local_inv_wqes: 'LOCAL_INV WQEs',
  remote_invalidates: 'Keys invalidated by SEND with invalidate',
};

const QP_HELP: Readonly<Record<string, string>> = {
  doorbell_send: 'Send queue doorbells of the QP',
  doorbell_recv: 'Receive queue doorbells of the QP',
  wqes_processed: 'Send WQEs the QP ran',
  cqes_posted: 'Completions written for the QP',
  bytes_sent: 'Bytes the QP sent',
  bytes_received: 'Bytes the QP received',
  bytes_rdma_read: 'RDMA READ bytes of the QP',
  bytes_rdma_write: 'RDMA WRITE bytes of the QP',
  errors: 'WQEs of the QP completed with an error',
  rnr_naks: 'RNR NAKs the QP met',
  flushed_wqes: 'WQEs of the QP completed as flushed',
};

const ACTIVE = new Set(['qps_active', 'cqs_active', 'mrs_active', 'ahs_active', 'srqs_active']);

type MeshStats = ReturnType<MeshStatsSource['stats']>;
type MeshDpStats = MeshDataPath['stats'];

/** The mesh families: name, type, help, and where the value is. */
const MESH_FAMILIES: readonly (readonly [
  name: string,
  type: 'counter' | 'gauge',
  help: string,
  read: (m: MeshStats | undefined, dp: MeshDpStats | undefined) => number | undefined,
])[] = [
  ['mesh_connections', 'gauge', 'Mesh connections open', (m) => m?.connections],
  ['mesh_established_connections', 'gauge', 'Mesh connections past the handshake', (m) => m?.established],
  ['mesh_outbound_queued_bytes', 'gauge', 'Data bytes queued or in flight to mesh peers', (m) => m?.outboundBytes],
  ['mesh_inbound_queued_bytes', 'gauge', 'Received data bytes not yet taken by the data path', (m) => m?.inboundBytes],
  [
    'mesh_inbound_queued_messages',
    'gauge',
    'Received data messages not yet taken by the data path',
    (m) => m?.inboundMessages,
  ],
  ['mesh_held_connections', 'gauge', 'Mesh connections whose reading is paused for room', (m) => m?.heldConnections],
  ['mesh_parser_buffered_bytes', 'gauge', 'Bytes held by the mesh frame parsers', (m) => m?.parserBytes],
  [
    'mesh_inbound_dropped_total',
    'counter',
    'Mesh messages dropped while no consumer was present',
    (m) => m?.inboundDropped,
  ],
  ['mesh_relay_dropped_total', 'counter', 'Mesh frames the manager could not relay', (m) => m?.relayDropped],
  [
    'mesh_protocol_errors_total',
    'counter',
    'Mesh protocol errors (bad frames, refused messages)',
    (m) => m?.protocolErrors,
  ],
  ['mesh_pending_requests', 'gauge', 'Remote RDMA requests waiting for their answer', (_m, dp) => dp?.pending],
  ['mesh_held_requests', 'gauge', 'Remote requests held by the responder (RNR, pressure)', (_m, dp) => dp?.held],
  ['mesh_replies_dropped_total', 'counter', 'Responder replies dropped', (_m, dp) => dp?.repliesDropped],
];

/** The families of one server. */
export function serverFamilies(src: OpsSources, opts: { qpMax?: number; profile?: string } = {}): FamilySpec[] {
  const d: IonicDevice = src.device;
  const ib = { device: IB_DEVICE, port: IB_PORT };
  const qpMax = opts.qpMax ?? QP_METRICS_MAX;
  const f: FamilySpec[] = [];
  const add = (
    name: string,
    type: 'counter' | 'gauge',
    help: string,
    read: (emit: Emit) => void,
    labels?: readonly string[],
  ): void => {
    f.push({
      name: METRICS_PREFIX + (type === 'counter' ? counterName(name) : name),
      type,
      help,
      read,
      ...(labels ? { labels } : {}),
    });
  };
  const shared = (q: SharedFamily, read: (emit: Emit) => void, labels?: readonly string[]): void =>
    add(q.name, q.type, q.help, read, labels);

  // ---- the server ------------------------------------------------------------------------------
  add(
    'info',
    'gauge',
    'The emulated NIC: backend, NIC profile, MAC, PCI id (value 1)',
    (e) =>
      e(1, {
        device: IB_DEVICE,
        backend: src.backend,
        profile: opts.profile ?? d.profile.name,
        mac: src.mac,
        pci: '1dd8:1002',
      }),
    ['device', 'backend', 'profile', 'mac', 'pci'],
  );
  shared(
    SHARED_FAMILIES.connectionUp,
    (e) => e(src.connection.connected ? 1 : 0, { state: connectionState(src.connection) }),
    ['state'],
  );
  add(
    'rate_bytes_per_second',
    'gauge',
    "Link speed of the port (the NIC profile's)",
    (e) => e(d.profile.linkSpeedMbps * 125_000, ib),
    ['device', 'port'],
  );

  // ---- device registers (the C rocm-ernic's device counters) -------------------------------------
  add('bar0_reads_total', 'counter', 'BAR0 register reads', (e) => e(d.counters.bar0Reads));
  add('bar0_writes_total', 'counter', 'BAR0 register writes', (e) => e(d.counters.bar0Writes));
  add('doorbell_writes_total', 'counter', 'Doorbell BAR (BAR2) writes', (e) => e(d.counters.doorbells));
  shared(SHARED_FAMILIES.interrupts, (e) => e(d.interrupts.fired));
  shared(SHARED_FAMILIES.resets, (e) => e(d.counters.resets));
  shared(SHARED_FAMILIES.internalErrors, (e) => e(guardStats.contained));
  if (src.loopWatch) {
    const w = src.loopWatch;
    add(
      'loop_turn_max_seconds',
      'gauge',
      'The longest event-loop turn since start (--loop-watch): how long one guest MMIO access may have waited',
      (e) => e(w.maxMs / 1000),
    );
  }
  shared(SHARED_FAMILIES.commands, (e) => e(commandsTotal(d)));
  add(
    'device_commands_total',
    'counter',
    'Device commands (dev_cmd and the admin queue) by opcode',
    (e) => {
      for (const [op, n] of d.commandCounts) e(n, { opcode: String(op) });
    },
    ['opcode'],
  );

  // ---- Ethernet LIF and port (what ethtool -S shows) ------------------------------------------
  for (const [name, i] of blockFields(ionic_lif_stats)) {
    add(`lif_${name}`, 'counter', `LIF statistic ${name} (ethtool -S)`, (e) => e(d.stats.lif[i] ?? 0, { lif: '0' }), [
      'lif',
    ]);
  }
  for (const [name, i] of blockFields(ionic_port_stats)) {
    add(
      `eth_port_${name}`,
      'counter',
      `Port statistic ${name} (ethtool -S)`,
      (e) => e(d.stats.port[i] ?? 0, { port: IB_PORT }),
      ['port'],
    );
  }

  // ---- RDMA -------------------------------------------------------------------------------------
  const e0 = d.rdma;
  if (e0) {
    const c = e0.counters;
    add(
      'port_data_transmitted_bytes_total',
      'counter',
      "RDMA payload bytes sent by this device's requesters (SEND and RDMA WRITE)",
      (e) => e(c.get(DeviceCounter.tx_bytes) + c.get(DeviceCounter.rdma_write_bytes), ib),
      ['device', 'port'],
    );
    add(
      'port_data_received_bytes_total',
      'counter',
      'RDMA payload bytes received (SEND into receive buffers, RDMA READ responses)',
      (e) => e(c.get(DeviceCounter.rx_bytes) + c.get(DeviceCounter.rdma_read_bytes), ib),
      ['device', 'port'],
    );
    DEVICE_COUNTER_NAMES.forEach((name, i) => {
      if (ACTIVE.has(name)) return;
      // The roce_* ones are copied in from the transport first (a few numbers, per scrape).
      const read = name.startsWith('roce_')
        ? (e: Emit): void => {
            e0.hooks.refreshCounters?.();
            e(c.get(i), ib);
          }
        : (e: Emit): void => e(c.get(i), ib);
      add(rdmaCounterName(name), 'counter', RDMA_HELP[name] ?? name, read, ['device', 'port']);
    });
    add(
      'rdma_objects',
      'gauge',
      'RDMA objects alive on the device, by kind',
      (e) => {
        const n = e0.rm.counts();
        for (const [kind, v] of [
          ['qp', n.qps],
          ['cq', n.cqs],
          ['mr', n.mrs],
          ['ah', n.ahs],
          ['srq', n.srqs],
        ] as const)
          e(v, { device: IB_DEVICE, kind });
      },
      ['device', 'kind'],
    );
    add(
      SHARED_FAMILIES.qps.name,
      'gauge',
      `${SHARED_FAMILIES.qps.help}, by transport type and state`,
      (e) => {
        const n = new Map<string, number>();
        for (const qp of e0.rm.qps.values()) {
          const k = `${qpTypeName(qp)}\0${qpStateName(qp)}`;
          n.set(k, (n.get(k) ?? 0) + 1);
        }
        for (const [k, v] of n) {
          const [type, state] = k.split('\0') as [string, string];
          e(v, { device: IB_DEVICE, type, state });
        }
      },
      ['device', 'type', 'state'],
    );
    add(
      'rdma_wqes_total',
      'counter',
      'Send WQEs run, by opcode, over every QP the device has had',
      (e) => {
        const t = e0.rm.opcodeTotals();
        OPCODE_NAMES.forEach((opcode, i) => e(t[i] ?? 0, { device: IB_DEVICE, opcode }));
      },
      ['device', 'opcode'],
    );
    add('qps_without_series', 'gauge', `QPs beyond the ${qpMax} with per-QP series (the lowest ids have them)`, (e) =>
      e(Math.max(0, e0.rm.qps.size - qpMax)),
    );
    QP_COUNTER_NAMES.forEach((name, i) => {
      add(
        qpCounterName(name),
        'counter',
        `${QP_HELP[name] ?? name} (the ${qpMax} lowest QP ids)`,
        (e) => {
          for (const qp of qpsById(d).slice(0, qpMax))
            e(qp.stats.get(i), { device: IB_DEVICE, qp: String(qp.id), type: qpTypeName(qp) });
        },
        ['device', 'qp', 'type'],
      );
    });
  }

  // ---- the TCP mesh ------------------------------------------------------------------------------
  if (src.mesh || src.meshDataPath) {
    for (const [name, type, help, read] of MESH_FAMILIES)
      add(name, type, help, (e) => {
        const v = read(src.mesh?.stats(), src.meshDataPath?.stats);
        if (v !== undefined) e(v);
      });
    add(
      'mesh_node_id',
      'gauge',
      "This server's mesh node id, by role (absent until registered)",
      (e) => {
        const m = src.mesh?.stats();
        if (m && m.nodeId !== undefined) e(m.nodeId, { role: m.role });
      },
      ['role'],
    );
  }
  // ---- the RoCEv2 transport -----------------------------------------------------------------------
  if (src.roce) roceFamilies(src.roce, add);
  // ---- the P4 engine -------------------------------------------------------------------------------
  if (src.p4) p4Families(src.p4, add);
  return f;
}

/** A registry holding the server's families. */
export function serverRegistry(src: OpsSources, opts: { qpMax?: number; profile?: string } = {}): Registry {
  const reg = new Registry();
  registerFamilies(reg, serverFamilies(src, opts));
  return reg;
}
