// The stats file and /metrics of a live server: an in-process IonicDevice
// behind a VfioUserServer serving it through DeviceActivity (as
// bin/rocm-ernic.ts does with -S and --metrics-port), driven by the guest
// model: Ethernet frames and RDMA SEND / RDMA WRITE between two RC QPs. Both
// outputs move with the traffic by exactly what the guest did; the scrape
// passes promtool; a device reset rewrites the file at once.

import { expect } from 'chai';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { IonicDevice } from '../../lib/ionic/device';
import { DeviceActivity } from '../../lib/ops/activity';
import { MetricsHttpServer } from '../../lib/ops/metrics-http';
import { serverRegistry } from '../../lib/ops/metrics';
import { StatsFileWriter } from '../../lib/ops/stats-file';
import { ParsedStats, parseStatsFile } from '../../lib/ops/stats-format';
import { collectStats, OpsSources } from '../../lib/ops/stats-source';
import { VfioUserServer } from '../../lib/vfio-user/server';
import { settle, tempSocketPath } from '../support/fds';
import { IonicGuest } from '../support/ionic/guest';
import { RdmaGuest } from '../support/ionic/rdma-guest';
import { MrF, QpT, WOp } from '../support/ionic/rdma-regs';
import { Cq, GuestMr, Qp, VerbsGuest } from '../support/ionic/rdma-verbs';
import { DEVICE_MAC, testProfile } from '../support/ionic/rig';
import { FakeLink, udpFrame } from '../support/ionic/wire';
import { needPromtool, promtoolCheck, sample } from './helpers';
import { guardStats } from '../../lib/guard';

const INTERVAL_MS = 50;
const PEER = Buffer.from([0x02, 0, 0, 0, 0, 0x42]);
const ALL = MrF.LOCAL_WRITE | MrF.REMOTE_WRITE | MrF.REMOTE_READ | MrF.REMOTE_ATOMIC;

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

describe("ops: a live server's stats file and /metrics", function () {
  this.timeout(30000);
  let dir: string;
  let file: string;
  let device: IonicDevice;
  let server: VfioUserServer;
  let writer: StatsFileWriter;
  let http: MetricsHttpServer;
  let url: string;
  let v: VerbsGuest;
  let g: IonicGuest;
  let scq: Cq;
  let rcq: Cq;
  let A: GuestMr;
  let B: GuestMr;
  let a: Qp;
  let b: Qp;

  const stats = (): ParsedStats => parseStatsFile(fs.readFileSync(file, 'utf8'));
  const dev = (p: ParsedStats, k: string): unknown => p.sections['Device Statistics']?.[k];
  const scrape = async (): Promise<string> => {
    const r = await fetch(url);
    expect(r.status).to.equal(200);
    expect(r.headers.get('content-type')).to.match(/^text\/plain; version=0\.0\.4/);
    return r.text();
  };
  /** Let the writer finish by itself (its write and its follow-up check) and go idle. */
  const idle = async (): Promise<void> => {
    for (let i = 0; i < 300 && writer.scheduled; i++) await sleep(10);
    expect(writer.scheduled, 'the writer went idle').to.equal(false);
  };
  /** Wait for the writer to rewrite the file by itself (it is never asked). */
  const nextWrite = async (after: number): Promise<ParsedStats> => {
    for (let i = 0; i < 300 && writer.writes <= after; i++) await sleep(10);
    expect(writer.writes, 'the stats file was rewritten by its timer').to.be.greaterThan(after);
    return stats();
  };

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ernic-live-'));
    file = path.join(dir, '0.stats');
    device = new IonicDevice({ profile: testProfile(), mac: DEVICE_MAC, link: new FakeLink() });
    const activity = new DeviceActivity();
    const socket = tempSocketPath('ops');
    const src: OpsSources = { device, socket, backend: 'loopback', mac: '02:65:72:6e:69:63', connection: activity };
    writer = new StatsFileWriter({ path: file, snapshot: (n) => collectStats(src, n), intervalMs: INTERVAL_MS });
    writer.writeNow(true);
    writer.follow(activity);
    const reg = serverRegistry(src);
    http = new MetricsHttpServer({
      host: '127.0.0.1',
      port: 0,
      title: 'test',
      render: async () => ({ contentType: reg.contentType, body: await reg.metrics() }),
    });
    url = `http://127.0.0.1:${(await http.listen()).port}/metrics`;
    server = new VfioUserServer({ socketPath: socket, device: activity.wrap(device.pci) });
    await server.listen();

    g = await IonicGuest.connect(socket);
    await g.probe();
    await g.open(1);
    const r = await RdmaGuest.boot(g, { cpus: 8 });
    v = VerbsGuest.attach(g, r, 64);
    scq = await v.createCq(300);
    rcq = await v.createCq(301);
    A = await v.createMr({ key: 0x101, pages: 2, flags: ALL });
    B = await v.createMr({ key: 0x207, pages: 2, flags: ALL });
    a = await v.createQp(10, QpT.RC, { sqCq: scq, rqCq: rcq });
    b = await v.createQp(11, QpT.RC, { sqCq: scq, rqCq: rcq });
    await v.connectPair(a, b);
  });

  after(async () => {
    g?.dispose();
    await settle();
    server?.close();
    device?.close();
    writer?.close();
    await http?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('shows the instance, the QPs and a client connected once the guest is up', async () => {
    await idle();
    const p = stats();
    expect(writer.writes, 'its timer wrote after the startup write').to.be.greaterThan(1);
    expect(p.titled).to.equal(true);
    expect(p.instance).to.include({ backend: 'loopback', pci: '0x1dd8:0x1002', connection: 'connected' });
    expect(p.sections['Per-QP Statistics']).to.deep.equal({ qp_count: 2, qps_shown: 2 });
    expect(p.qps.get('10')).to.include({ type: 'RC', state: 'RTS', wqes_processed: 0 });
    expect(dev(p, 'bar0_reads')).to.be.greaterThan(0);
    expect(dev(p, 'commands')).to.be.greaterThan(0);
    const m = await scrape();
    expect(sample(m, 'rocm_ernic_connection_up', { state: 'connected' })).to.equal(1);
    expect(sample(m, 'rocm_ernic_rdma_qps', { type: 'RC', state: 'RTS' })).to.equal(2);
    expect(sample(m, 'rocm_ernic_rdma_objects', { kind: 'qp' })).to.equal(2);
    expect(sample(m, 'rocm_ernic_rate_bytes_per_second', { device: 'ionic_0', port: '1' })).to.equal(100000 * 125000);
    // The last-resort guard's count of contained bugs of ours (process-wide).
    expect(sample(m, 'rocm_ernic_internal_errors_total')).to.equal(guardStats.contained);
    expect(p.instance.internal_errors).to.equal(guardStats.contained);
  });

  it("moves with the guest's traffic: a SEND, an RDMA WRITE and an Ethernet frame, counted exactly", async () => {
    await idle();
    const before = await scrape();
    const writes = writer.writes;

    A.write(0, Buffer.alloc(300, 0x5a));
    v.postRecv(b, { id: 1, sges: [B.sge(0, 512)] });
    v.postSend(a, { op: WOp.SEND, id: 2, sges: [A.sge(0, 300)] });
    v.postSend(a, { op: WOp.RDMA_WRITE, id: 3, sges: [A.sge(0, 4096)], remote: { va: B.va + 4096, rkey: B.key } });
    await v.settle();
    expect(v.drain(scq)).to.have.length(2);
    expect(v.drain(rcq)).to.have.length(1);
    const frame = udpFrame(PEER, DEVICE_MAC, '10.0.0.2', '10.0.0.1', 5000, 6000, 100);
    await g.sendFrame(frame);

    const p = await nextWrite(writes);
    expect(dev(p, 'total_bytes_sent')).to.equal(300);
    expect(dev(p, 'total_bytes_received')).to.equal(300);
    expect(dev(p, 'total_bytes_rdma_write')).to.equal(4096);
    expect(dev(p, 'total_ip_bytes_tx')).to.equal(frame.length);
    expect(p.qps.get('10')).to.include({
      wqes_processed: 2,
      doorbell_send: 2,
      bytes_sent: 300,
      bytes_rdma_write: 4096,
      opcode_SEND: 1,
      opcode_RDMA_WRITE: 1,
    });
    expect(p.qps.get('11')).to.include({ bytes_received: 300, doorbell_recv: 1, wqes_processed: 0 });
    expect(p.qps.get('11')!.opcode_SEND).to.equal(undefined); // zeros are not listed
    expect(p.sections['RDMA WQEs by Opcode']).to.include({ SEND: 1, RDMA_WRITE: 1, RDMA_READ: 0 });

    const m = await scrape();
    const delta = (name: string, labels: Record<string, string> = {}): number =>
      (sample(m, name, labels) ?? NaN) - (sample(before, name, labels) ?? 0);
    const ib = { device: 'ionic_0', port: '1' };
    expect(delta('rocm_ernic_port_data_transmitted_bytes_total', ib)).to.equal(300 + 4096);
    expect(delta('rocm_ernic_port_data_received_bytes_total', ib)).to.equal(300);
    expect(delta('rocm_ernic_rdma_tx_wqes_total', ib)).to.equal(2);
    expect(delta('rocm_ernic_rdma_write_bytes_total', ib)).to.equal(4096);
    expect(delta('rocm_ernic_rdma_wqes_total', { opcode: 'SEND' })).to.equal(1);
    expect(delta('rocm_ernic_rdma_wqes_total', { opcode: 'RDMA_WRITE' })).to.equal(1);
    expect(delta('rocm_ernic_qp_bytes_sent_total', { qp: '10', type: 'RC' })).to.equal(300);
    expect(delta('rocm_ernic_qp_bytes_rdma_write_total', { qp: '10' })).to.equal(4096);
    expect(delta('rocm_ernic_lif_tx_ucast_bytes_total', { lif: '0' })).to.equal(frame.length);
    expect(delta('rocm_ernic_eth_port_frames_tx_ok_total', { port: '1' })).to.equal(1);
    expect(delta('rocm_ernic_doorbell_writes_total')).to.be.greaterThan(0);
  });

  it('schedules nothing once the device is idle', async () => {
    await idle();
    const writes = writer.writes;
    await sleep(4 * INTERVAL_MS);
    expect(writer.writes).to.equal(writes);
    expect(writer.scheduled).to.equal(false);
  });

  it('a real scrape passes promtool check metrics with no findings', async function () {
    needPromtool(this);
    const m = await scrape();
    expect(m).to.include('# TYPE rocm_ernic_port_data_received_bytes_total counter');
    const r = promtoolCheck(m);
    expect(r.output, r.output).to.equal('');
    expect(r.status).to.equal(0);
  });

  it('answers / with a pointer, other paths with 404, other methods with 405', async () => {
    const base = url.replace(/\/metrics$/, '');
    expect(await (await fetch(`${base}/`)).text()).to.include('/metrics');
    expect((await fetch(`${base}/nope`)).status).to.equal(404);
    expect((await fetch(url, { method: 'POST' })).status).to.equal(405);
    expect((await fetch(url, { method: 'HEAD' })).status).to.equal(200);
  });

  it('a device reset rewrites the file at once, with the reset counted', async () => {
    await idle();
    const resets = dev(stats(), 'reset_count') as number; // the driver's RESET at probe counts too
    const resetsMetric = sample(await scrape(), 'rocm_ernic_resets_total');
    expect(resetsMetric).to.equal(resets);
    const writes = writer.writes;
    await g.client.reset();
    expect(writer.writes, 'written inside the reset, no timer').to.equal(writes + 1);
    const p = stats();
    expect(p.instance.connection).to.equal('connected (device reset)');
    expect(dev(p, 'reset_count')).to.equal(resets + 1);
    expect(p.sections['Per-QP Statistics']).to.deep.equal({ qp_count: 0, qps_shown: 0 });
    // The RDMA counters outlive the reset; the Ethernet blocks start again from zero, as the guest sees them.
    expect(dev(p, 'total_bytes_rdma_write')).to.equal(4096);
    expect(dev(p, 'total_ip_bytes_tx')).to.equal(0);
    expect(p.sections['RDMA WQEs by Opcode']).to.include({ SEND: 1, RDMA_WRITE: 1 });
    expect(sample(await scrape(), 'rocm_ernic_resets_total')).to.equal(resets + 1);
  });
});
