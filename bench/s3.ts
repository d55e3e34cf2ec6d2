// S3 store (--backend s3) 1 MiB GET throughput, five ways in one run:
//
//   wire, token   the request over the guest's TCP (frames on its own TX/RX
//                 rings through the device, the guest model's client), the
//                 object RDMA-written into a 1 MiB guest MR by x-amz-rdma-token
//   wire, body    the same request without a token: the object comes back in
//                 the HTTP body, 1 MiB of TCP segments into the guest's RX ring
//                 (MSS 1460: a guest at MTU 1500)
//   wire, jumbo   the same with MSS 8960 (a guest at MTU 9000: the store sends
//                 segments as large as the guest's RX buffers take)
//   host, token   the request over host loopback (listen=), the object still
//                 RDMA-written into the guest MR (the data plane alone)
//   host, body    a plain host loopback HTTP GET of the same object from the
//                 same http.Server: the baseline, measured in this run
//
// The server is the real rocm-ernic binary in its own process; the guest is
// the ionic.ko + ionic_rdma model (spec/support/ionic) over a real vfio-user
// socket with memfd RAM; its RX buffers hold 9018-byte frames (MTU 9000)
// (not poisoned before posting, as no driver does), its client takes frames
// inside the poll as the driver hands skbs to GRO, acknowledges each 64 KiB
// and the rest at the poll's end (what GRO gives a Linux receiver), not per
// segment, checks TCP checksums by the RX completion's complete sum
// (CHECKSUM_COMPLETE, as Linux does) rather than summing each frame again,
// and reads the stream into a buffer of its own (so does the host loopback
// reader). Every way runs untimed first (the JIT's warm-up), then rounds
// interleave the ways so load on the machine hits them alike; each way also
// prints the CPU per GET of the server and of this process (all threads, and
// the event loop's thread). Bytes are checked (MR contents, wire bodies)
// before timing. SigV4 is on (the host listener takes tokens only under a
// signature), each request signed once before timing. The C rocm-ernic's
// published badge, "S3 1M GET 698.5 MB/s" (a README badge of ROCm/rocm-ernic,
// from its CI's performance history), was measured on another
// host (a GitHub-hosted runner, with a guest kernel and hipObject client), so it is
// printed beside ours for orientation only. Prints figures; asserts nothing.
//
// Env: BENCH_S3_N (GETs per way per round, default 8), BENCH_S3_ROUNDS (default 4), BENCH_S3_WARM
// (untimed GETs of each way first, default 100: the JIT settled in both processes),
// BENCH_S3_BIN (another build's bin/rocm-ernic.js to serve, for a before/after
// with the same client), BENCH_S3_WAYS (a comma list of the ways to time, e.g.
// "wire, body,host, body" splits on ',' followed by no space; default all: for profiling one way).

import type { ChildProcess } from 'child_process';
import { randomBytes } from 'crypto';
import * as http from 'http';
import * as os from 'os';
import { IonicGuest } from '../spec/support/ionic/guest';
import { RdmaGuest } from '../spec/support/ionic/rdma-guest';
import { MrF } from '../spec/support/ionic/rdma-regs';
import { VerbsGuest } from '../spec/support/ionic/rdma-verbs';
import { signHeaders } from '../spec/support/s3-sign';
import { mrTokenHex } from '../spec/support/s3-token';
import { GuestTcp } from '../spec/support/s3-guest-tcp';
import { cpuMs, mainThreadCpuMs } from './support/cpu';
import { freePort } from './support/free-port';
import { startServerProcess, stopProcess } from './support/server-process';

const MiB = 1 << 20;
const N = Number(process.env.BENCH_S3_N ?? 8);
const ROUNDS = Number(process.env.BENCH_S3_ROUNDS ?? 4);
const WARM = Number(process.env.BENCH_S3_WARM ?? 100);
const S3_PORT = 9000;
/** The C rocm-ernic's published S3 1 MiB GET figure (see the top of this file), MB/s, another host. */
const C_BADGE_MBPS = 698.5;
const now = (): bigint => process.hrtime.bigint();

/** SigV4 on: the host listener's token path takes only tokens under a signature. Each request is signed once, before timing (a signature holds for 15 minutes). */
const CREDS = { accessKeyId: 'BENCHKEY', secretAccessKey: 'bench-s3-secret' };

async function startServer(sock: string, hostPort: number): Promise<ChildProcess> {
  const server = await startServerProcess({
    sock,
    env: { ...process.env, ERNIC_S3_ACCESS_KEY: CREDS.accessKeyId, ERNIC_S3_SECRET_KEY: CREDS.secretAccessKey },
    args: ['-L', 'info', '--backend', `s3:size=64M,maxpart=16M,listen=127.0.0.1:${hostPort}`],
    ...(process.env.BENCH_S3_BIN ? { bin: process.env.BENCH_S3_BIN } : {}),
    nodeFlags: (process.env.BENCH_S3_NODE_FLAGS ?? '').split(/\s+/).filter(Boolean),
  });
  return server.proc;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

/** Where a host GET's body is read into (one at a time), as the wire's reader reads into its own buffer. */
const hostRx = Buffer.alloc(2 * MiB);

/** A GET over host loopback; `body` is a view of hostRx, good until the next GET. */
function hostGet(
  port: number,
  headers: Record<string, string>,
): Promise<{ status: number; body: Buffer; moved: number }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: '/ernic/bench/1m', headers, agent }, (res) => {
      let len = 0;
      res.on('data', (c: Buffer) => {
        if (len + c.length > hostRx.length) {
          req.destroy(new Error('host GET: a body larger than its buffer'));
          return;
        }
        len += c.copy(hostRx, len);
      });
      res.on('end', () =>
        resolve({
          status: res.statusCode!,
          body: hostRx.subarray(0, len),
          moved: Number(res.headers['x-amz-rdma-bytes'] ?? 0),
        }),
      );
    });
    req.on('error', reject);
    req.end();
  });
}

/** The guest's MTU: RX buffers of MTU + 18 bytes. */
const GUEST_MTU = 9000;
const MSS_1500 = 1460;
const MSS_9000 = 8960;

/** The guest's side of the wire: TCP clients fed by frames from the RX ring, one ACK per batch. */
class Wire {
  readonly #clients = new Set<GuestTcp>();
  #sport = 20000;

  constructor(readonly g: IonicGuest) {
    // Frames go to the clients from inside the guest's poll, as an skb goes to GRO: checked by the completion's
    // CHECKSUM_COMPLETE sum (flag 0x80), as Linux checks it, with no second pass; a client acknowledges each
    // 64 KiB (a GRO packet) and what is left at the end of the poll.
    g.rxSink = (data, csum, flags) => {
      for (const c of this.#clients) c.onFrame(data, flags & 0x80 ? csum : -1);
    };
    g.rxPollEnd = () => {
      for (const c of this.#clients) c.ackBatch();
    };
  }

  /** Where a response is read into (one at a time): a view of it is good until the next request. */
  readonly #rx = Buffer.alloc(2 * MiB);

  /** One request on a new connection (Connection: close) offering `mss`; the raw response. */
  async request(text: string, mss = MSS_1500): Promise<Buffer> {
    // Window scale 7 as a Linux guest offers it: the 65535 it advertises then means 8 MiB, so the
    // store's sender is bounded by what it has to send, not by 64 KiB in flight.
    const c = new GuestTcp((f) => this.#transmit(f), this.#sport++, S3_PORT, 7000, {
      wscale: 7,
      mss,
      batchAcks: true,
      receiveInto: this.#rx,
    });
    if (this.#sport > 60000) this.#sport = 20000;
    this.#clients.add(c);
    try {
      c.connect();
      await c.write(Buffer.from(text));
      await c.until(() => c.finReceived, 60_000);
      c.close();
      return this.#rx.subarray(0, c.receivedBytes);
    } finally {
      this.#clients.delete(c);
    }
  }

  /** A frame onto the guest's TX ring; with the ring full it is lost, as a NIC would drop it (TCP's cumulative ACKs cover a lost ACK). */
  #transmit(f: Buffer): boolean {
    try {
      void this.g.sendFrame(f);
    } catch {
      this.dropped++;
    }
    return true;
  }

  dropped = 0;

  close(): void {
    this.g.rxSink = null;
    this.g.rxPollEnd = null;
  }
}

function bodyOf(raw: Buffer): Buffer {
  return raw.subarray(raw.indexOf('\r\n\r\n') + 4);
}

const fmt = (v: number, digits = 1): string =>
  v.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

async function main(): Promise<void> {
  const sock = `/tmp/ernic-s3-bench-${process.pid}.sock`;
  const hostPort = await freePort();
  const server = await startServer(sock, hostPort);
  let g: IonicGuest | null = null;
  let wire: Wire | null = null;
  try {
    g = await IonicGuest.connect(sock, { ramSize: 64 << 20, timeoutMs: 60_000 });
    await g.probe();
    await g.open(1, { ringLog2: 9, mtu: GUEST_MTU, poisonRx: false });
    const r = await RdmaGuest.boot(g, { cpus: 8 });
    const v = VerbsGuest.attach(g, r, 300);
    const mr = await v.createMr({
      key: (20 << 8) | 3,
      pages: 256,
      flags: MrF.LOCAL_WRITE | MrF.REMOTE_WRITE | MrF.REMOTE_READ,
      contiguous: true,
    });
    wire = new Wire(g);
    const w = wire;
    const object = randomBytes(MiB);
    const hostName = `127.0.0.1:${hostPort}`;
    const putHeaders = await signHeaders(
      { method: 'PUT', host: hostName, path: '/ernic/bench/1m', body: object },
      CREDS,
    );
    const put = await new Promise<number>((resolve, reject) => {
      const req = http.request(
        { host: '127.0.0.1', port: hostPort, method: 'PUT', path: '/ernic/bench/1m', headers: putHeaders, agent },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode!));
        },
      );
      req.on('error', reject);
      req.end(object);
    });
    if (put !== 200) throw new Error(`PUT of the object: ${put}`);
    const token = mrTokenHex(mr);
    const wireHead = async (withToken: boolean): Promise<string> => {
      const h = await signHeaders(
        {
          method: 'GET',
          host: `192.168.200.1:${S3_PORT}`,
          path: '/ernic/bench/1m',
          headers: { ...(withToken ? { 'x-amz-rdma-token': token } : {}), connection: 'close' },
        },
        CREDS,
      );
      return `GET /ernic/bench/1m HTTP/1.1\r\n${Object.entries(h)
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('')}\r\n`;
    };
    const wireText = new Map([
      [true, await wireHead(true)],
      [false, await wireHead(false)],
    ]);
    const wireReq = (withToken: boolean): string => wireText.get(withToken)!;
    const hostTokenHeaders = await signHeaders(
      { method: 'GET', host: hostName, path: '/ernic/bench/1m', headers: { 'x-amz-rdma-token': token } },
      CREDS,
    );
    const hostBodyHeaders = await signHeaders({ method: 'GET', host: hostName, path: '/ernic/bench/1m' }, CREDS);

    // Check each way once (and warm up): the bytes must be the object's.
    const ways = {
      'wire, token': async (): Promise<void> => {
        const raw = await w.request(wireReq(true));
        if (
          !/^HTTP\/1.1 200/.test(raw.toString('latin1', 0, 16)) ||
          !/x-amz-rdma-bytes: 1048576/i.test(raw.toString('latin1'))
        ) {
          throw new Error(`wire token GET: ${raw.toString('latin1', 0, 200)}`);
        }
      },
      'wire, body': async (): Promise<void> => {
        const raw = await w.request(wireReq(false));
        if (bodyOf(raw).length !== MiB) throw new Error(`wire body GET: ${bodyOf(raw).length} bytes`);
      },
      'wire, jumbo': async (): Promise<void> => {
        const raw = await w.request(wireReq(false), MSS_9000);
        if (bodyOf(raw).length !== MiB) throw new Error(`wire jumbo GET: ${bodyOf(raw).length} bytes`);
      },
      'host, token': async (): Promise<void> => {
        const res = await hostGet(hostPort, hostTokenHeaders);
        if (res.status !== 200 || res.moved !== MiB)
          throw new Error(`host token GET: ${res.status}, ${res.moved} bytes`);
      },
      'host, body': async (): Promise<void> => {
        const res = await hostGet(hostPort, hostBodyHeaders);
        if (res.status !== 200 || res.body.length !== MiB)
          throw new Error(`host body GET: ${res.status}, ${res.body.length} bytes`);
      },
    } as const;
    mr.write(0, Buffer.alloc(MiB));
    await ways['wire, token']();
    if (!mr.read(0, MiB).equals(object)) throw new Error('wire token GET: the MR does not hold the object');
    mr.write(0, Buffer.alloc(MiB));
    await ways['host, token']();
    if (!mr.read(0, MiB).equals(object)) throw new Error('host token GET: the MR does not hold the object');
    if (!bodyOf(await w.request(wireReq(false))).equals(object)) throw new Error('wire body GET: not the object');
    if (!bodyOf(await w.request(wireReq(false), MSS_9000)).equals(object))
      throw new Error('wire jumbo GET: not the object');
    if (!(await hostGet(hostPort, hostBodyHeaders)).body.equals(object))
      throw new Error('host body GET: not the object');
    // Warm-up: every way runs until the JIT has compiled its paths (both processes), so the rounds time steady state.
    for (let i = 0; i < WARM; i++) for (const run of Object.values(ways)) await run();

    const only = process.env.BENCH_S3_WAYS?.split(/,(?! )/);
    const timed = Object.entries(ways).filter(([name]) => !only || only.includes(name));
    if (!timed.some(([name]) => name === 'host, body')) timed.push(['host, body', ways['host, body']]);
    const secs = new Map<string, number>(timed.map(([k]) => [k, 0]));
    // CPU ms each side spent per way: the server process, and this one (the guest model, or the host client).
    const cpu = new Map(timed.map(([k]) => [k, { server: 0, serverMain: 0, guest: 0, guestMain: 0 }]));
    for (let round = 0; round < ROUNDS; round++) {
      for (const [name, run] of timed) {
        const s0 = cpuMs(server.pid!);
        const sm0 = mainThreadCpuMs(server.pid!);
        const g0 = cpuMs(process.pid);
        const gm0 = mainThreadCpuMs(process.pid);
        const t0 = now();
        for (let i = 0; i < N; i++) await run();
        secs.set(name, secs.get(name)! + Number(now() - t0) / 1e9);
        const c = cpu.get(name)!;
        c.server += cpuMs(server.pid!) - s0;
        c.serverMain += mainThreadCpuMs(server.pid!) - sm0;
        c.guest += cpuMs(process.pid) - g0;
        c.guestMain += mainThreadCpuMs(process.pid) - gm0;
      }
    }
    const count = N * ROUNDS;
    const mbps = (name: string): number => (count * MiB) / secs.get(name)! / 1e6;
    const base = mbps('host, body');
    console.log(
      `s3 benchmark: 1 MiB GETs of one object, ${count} per way (${ROUNDS} interleaved rounds of ${N}); server: rocm-ernic --backend s3 in its own process;`,
    );
    console.log(
      `guest: the ionic.ko + ionic_rdma model (its own TCP client on its rings, window scale 7, one ACK per 64 KiB or poll, RX buffers for MTU ${GUEST_MTU}; a 1 MiB MR for tokens); MB/s = 10^6 bytes/s; bytes checked before timing`,
    );
    for (const name of secs.keys()) {
      const m = mbps(name);
      const c = cpu.get(name)!;
      console.log(
        `  ${name.padEnd(12)} ${fmt(m).padStart(8)} MB/s  ${fmt((secs.get(name)! / count) * 1e3, 2).padStart(7)} ms/GET  ${fmt(m / base, 2)}x host loopback body GET  ${fmt(m / C_BADGE_MBPS, 2)}x the C rocm-ernic's badge  CPU ms/GET (main thread): server ${fmt(c.server / count, 2)} (${fmt(c.serverMain / count, 2)}), client ${fmt(c.guest / count, 2)} (${fmt(c.guestMain / count, 2)})`,
      );
    }
    console.log(`  guest ACKs lost to a full TX ring (the client's, not the store's): ${w.dropped}`);
    console.log(
      `  load average ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')} on ${os.cpus().length} CPUs (other work on the machine shows in every way alike)`,
    );
    console.log(
      `  the C rocm-ernic's badge "S3 1M GET ${C_BADGE_MBPS} MB/s" (its published figure): another host (GitHub-hosted runner, guest kernel, hipObject), for orientation only`,
    );
  } finally {
    wire?.close();
    g?.dispose();
    await stopProcess(server);
    agent.destroy();
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
