// The server's metric families (lib/ops/metrics.ts) without a guest: bounded
// label sets however many QPs there are, WQEs by opcode that outlive their
// QP, the mesh families when a mesh is present, and promtool's verdict on
// all of them. The live scrape is in live.spec.ts.

import { expect } from 'chai';
import { IonicDevice } from '../../lib/ionic/device';
import { Registry } from 'prom-client';
import type { ServerPhase } from '../../lib/ops/activity';
import { exporterFamilies } from '../../lib/ops/exporter';
import { counterName, FamilySpec, registerFamilies, SHARED_FAMILIES } from '../../lib/ops/metric-families';
import { serverFamilies, serverRegistry } from '../../lib/ops/metrics';
import type { MeshStatsSource, OpsSources } from '../../lib/ops/stats-source';
import { PageTable } from '../../lib/rdma/page-table';
import { QpType } from '../../lib/rdma/types';
import { SendVerb } from '../../lib/rdma/datapath/wqe-layout';
import { DEVICE_MAC, testProfile } from '../support/ionic/rig';
import { needPromtool, promtoolCheck, sample, samples } from './helpers';

function table(): PageTable {
  return PageTable.contiguous(0x100000, 4096)!;
}

function withQps(n: number): IonicDevice {
  const d = new IonicDevice({ profile: testProfile(), mac: DEVICE_MAC });
  const rm = d.rdma!.rm;
  expect(rm.createCq({ id: 3, eqId: 0, depthLog2: 4, strideLog2: 5, dbid: 0, admin: false }, table()).ok).to.equal(
    true,
  );
  for (let i = 0; i < n; i++) {
    const r = rm.createQp(
      {
        id: 100 - i,
        type: i % 2 ? QpType.UD : QpType.RC,
        pdId: 0,
        flags: 0,
        sqCqId: 3,
        rqCqId: 3,
        sq: { depthLog2: 4, strideLog2: 6 },
        rq: { depthLog2: 4, strideLog2: 6 },
        srqId: null,
        dbid: 0,
      },
      table(),
      table(),
    );
    expect(r.ok).to.equal(true);
  }
  return d;
}

const connection = { connected: false, state: 'disconnected (no client yet)' };

function sources(d: IonicDevice, mesh?: MeshStatsSource): OpsSources {
  return {
    device: d,
    socket: '/tmp/x.sock',
    backend: mesh ? 'tcp:manager:listen:6320' : 'loopback',
    mac: '72:6f:63:6d:2d:6e',
    connection,
    mesh: mesh ?? null,
  };
}

const fakeMesh: MeshStatsSource = {
  stats: () => ({
    nodeId: 2,
    role: 'worker',
    connections: 3,
    established: 2,
    outboundBytes: 4096,
    inboundBytes: 100,
    inboundMessages: 1,
    heldConnections: 0,
    parserBytes: 12,
    inboundDropped: 5,
    relayDropped: 0,
    protocolErrors: 1,
  }),
};

describe("ops: the server's metric families", () => {
  it('keeps per-QP series to the lowest ids however many QPs there are, and aggregates the rest by type and state', async () => {
    const d = withQps(6);
    const m = await serverRegistry(sources(d), { qpMax: 4 }).metrics();
    const qps = samples(m, 'rocm_ernic_qp_wqes_processed_total').map((l) => /qp="(\d+)"/.exec(l)![1]);
    expect(qps.sort()).to.deep.equal(['95', '96', '97', '98']);
    expect(sample(m, 'rocm_ernic_qps_without_series')).to.equal(2);
    expect(sample(m, 'rocm_ernic_rdma_qps', { type: 'RC', state: 'RESET' })).to.equal(3);
    expect(sample(m, 'rocm_ernic_rdma_qps', { type: 'UD', state: 'RESET' })).to.equal(3);
    // The same number of lines with 6 QPs as with 60: only the per-QP families are capped, at 4.
    const m60 = await serverRegistry(sources(withQps(60)), { qpMax: 4 }).metrics();
    const lines = (t: string): number => t.split('\n').filter((l) => l && !l.startsWith('#')).length;
    expect(lines(m60) - lines(m)).to.equal(0);
  });

  it("counts WQEs by opcode over every QP the device has had (a destroyed QP's stay)", async () => {
    const d = withQps(2);
    const rm = d.rdma!.rm;
    rm.qps.get(100)!.opcodes[SendVerb.RDMA_WRITE] += 5;
    rm.qps.get(99)!.opcodes[SendVerb.SEND] += 2;
    expect(rm.destroyQp(100).ok).to.equal(true);
    const reg = serverRegistry(sources(d));
    let m = await reg.metrics();
    expect(sample(m, 'rocm_ernic_rdma_wqes_total', { opcode: 'RDMA_WRITE' })).to.equal(5);
    expect(sample(m, 'rocm_ernic_rdma_wqes_total', { opcode: 'SEND' })).to.equal(2);
    expect(sample(m, 'rocm_ernic_rdma_wqes_total', { opcode: 'BIND_MW' })).to.equal(0);
    rm.reset();
    m = await reg.metrics();
    expect(sample(m, 'rocm_ernic_rdma_wqes_total', { opcode: 'SEND' })).to.equal(2);
    expect(samples(m, 'rocm_ernic_rdma_wqes_total')).to.have.length(11);
  });

  it('has the mesh families only with a mesh', async () => {
    const plain = await serverRegistry(sources(withQps(0))).metrics();
    expect(plain).to.not.include('rocm_ernic_mesh_');
    const m = await serverRegistry(sources(withQps(0), fakeMesh)).metrics();
    expect(sample(m, 'rocm_ernic_mesh_connections')).to.equal(3);
    expect(sample(m, 'rocm_ernic_mesh_outbound_queued_bytes')).to.equal(4096);
    expect(sample(m, 'rocm_ernic_mesh_inbound_dropped_total')).to.equal(5);
    expect(sample(m, 'rocm_ernic_mesh_node_id', { role: 'worker' })).to.equal(2);
    expect(sample(m, 'rocm_ernic_info', { backend: 'tcp:manager:listen:6320' })).to.equal(1);
  });

  it('names every counter *_total and every family with HELP and TYPE', async () => {
    const m = await serverRegistry(sources(withQps(3), fakeMesh)).metrics();
    const types = [...m.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((x) => [x[1]!, x[2]!]);
    expect(types.length).to.be.greaterThan(100);
    for (const [name, type] of types) {
      expect(name, name).to.match(/^rocm_ernic_[a-z0-9_]+$/);
      expect(name.endsWith('_total'), `${name} (${type})`).to.equal(type === 'counter');
      expect(m, name).to.match(new RegExp(`^# HELP ${name} \\S`, 'm'));
    }
  });

  it('ends every counter in one _total, the port fields that end in _total included (no _total_total)', async () => {
    const m = await serverRegistry(sources(withQps(1), fakeMesh)).metrics();
    const names = [...m.matchAll(/^# TYPE (\S+) /gm)].map((x) => x[1]!);
    expect(names.filter((n) => n.includes('_total_total'))).to.deep.equal([]);
    expect(names).to.include('rocm_ernic_eth_port_octets_tx_total');
    expect(names).to.include('rocm_ernic_eth_port_frames_tx_unicast_total');
    expect(counterName('a_total')).to.equal('a_total');
    expect(counterName('a')).to.equal('a_total');
  });

  it('refuses to register a family whose name breaks the convention', () => {
    const bad: FamilySpec[][] = [
      [{ name: 'x_total_total', type: 'counter', help: 'h', read: () => {} }],
      [{ name: 'x', type: 'counter', help: 'h', read: () => {} }],
      [{ name: 'x_total', type: 'gauge', help: 'h', read: () => {} }],
      [{ name: 'x_count', type: 'gauge', help: 'h', read: () => {} }],
    ];
    for (const specs of bad)
      expect(() => registerFamilies(new Registry(), specs), specs[0]!.name).to.throw(
        new RegExp(`^metric ${specs[0]!.name}: `),
      );
  });

  it('serves each shared quantity under the one name the exporter uses too', () => {
    const server = new Set(serverFamilies(sources(withQps(0), fakeMesh)).map((f) => f.name));
    const exporter = new Set(exporterFamilies(() => ({ instances: [], manifestError: null })).map((f) => f.name));
    for (const q of Object.values(SHARED_FAMILIES)) {
      expect(server.has(`rocm_ernic_${q.name}`), `rocm_ernic_${q.name}`).to.equal(true);
      expect(exporter.has(`ernic_${q.name}`), `ernic_${q.name}`).to.equal(true);
    }
    // The quantities of the C rocm-ernic that used other names are gone from both.
    for (const old of ['ernic_flr_reset_total', 'ernic_qp_count', 'ernic_rdma_bytes_sent_total'])
      expect(exporter.has(old), old).to.equal(false);
    expect(server.has('rocm_ernic_client_connected')).to.equal(false);
  });

  it('labels connection_up with connected, disconnected or stopped, never the free text', async () => {
    const view = { connected: false, state: 'disconnected (no client yet)', phase: 'listening' as ServerPhase | null };
    const reg = serverRegistry({ ...sources(withQps(0)), connection: view });
    expect(sample(await reg.metrics(), 'rocm_ernic_connection_up', { state: 'disconnected' })).to.equal(0);
    Object.assign(view, { connected: true, state: 'connected (device reset)' });
    expect(sample(await reg.metrics(), 'rocm_ernic_connection_up', { state: 'connected' })).to.equal(1);
    Object.assign(view, { connected: false, state: 'disconnected (server stopped: SIGTERM)', phase: 'stopped' });
    const m = await reg.metrics();
    expect(samples(m, 'rocm_ernic_connection_up')).to.deep.equal(['rocm_ernic_connection_up{state="stopped"} 0']);
  });

  it('passes promtool check metrics with no findings, mesh and QPs included', async function () {
    needPromtool(this);
    const r = promtoolCheck(await serverRegistry(sources(withQps(5), fakeMesh)).metrics());
    expect(r.output, r.output).to.equal('');
    expect(r.status).to.equal(0);
  });
});
