// A client that attacks the server: each attack against the real server
// (bin/rocm-ernic) in its own process, so that a crash or a blocked loop
// shows as what it is. After every attack the same process must still serve
// a fresh client (VERSION and a config read).

import { expect } from 'chai';
import { ChildProcess, execFileSync, spawn } from 'child_process';
import * as fs from 'fs';
import * as net from 'net';
import * as os from 'os';
import * as path from 'path';
import { Errno, SetIrqsFlag } from '../../protocol/constants';
import { VfioUserClient, VfioUserError } from '../../lib/vfio-user/client';
import * as native from '../../lib/native';
import { command, IonicGuest, putU64 } from '../support/ionic/guest';
import { Op } from '../support/ionic/regs';
import { tempSocketPath } from '../support/fds';

const BIN = path.join(__dirname, '..', '..', 'bin', 'rocm-ernic.js');
const MSIX = 2;
const CONFIG = 7;

interface Server {
  proc: ChildProcess;
  sock: string;
  stderr: () => string;
  exited: () => boolean;
}

async function startServer(args: string[] = []): Promise<Server> {
  const sock = tempSocketPath('attack');
  const proc = spawn(process.execPath, [BIN, '--socket', sock, '-L', 'info', ...args], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  let gone = false;
  proc.stderr!.on('data', (d: Buffer) => {
    err += d.toString();
  });
  proc.once('exit', () => {
    gone = true;
  });
  for (let i = 0; i < 200 && !fs.existsSync(sock); i++) await new Promise((r) => setTimeout(r, 25));
  if (!fs.existsSync(sock)) throw new Error(`server did not start: ${err}`);
  return { proc, sock, stderr: () => err, exited: () => gone };
}

/** The server's log reaches us on its own pipe, after the socket events it explains: wait for it (up to 5 s). */
async function logged(s: Server, re: RegExp): Promise<string> {
  for (let i = 0; i < 200 && !re.test(s.stderr()); i++) await new Promise((r) => setTimeout(r, 25));
  return s.stderr();
}

async function stopServer(s: Server): Promise<number | null> {
  if (s.exited()) return s.proc.exitCode;
  const code = new Promise<number | null>((r) => s.proc.once('exit', (c) => r(c)));
  s.proc.kill('SIGTERM');
  return code;
}

/** The server still serves: a fresh client negotiates and reads the vendor/device id. */
async function stillServes(s: Server): Promise<void> {
  expect(s.exited(), s.stderr()).to.equal(false);
  const c = await VfioUserClient.connect(s.sock);
  try {
    expect((await c.regionRead(CONFIG, 0, 4)).readUInt32LE(0)).to.equal(0x10021dd8);
  } finally {
    c.close();
  }
}

async function expectErrno(p: Promise<unknown>, errno: number): Promise<void> {
  try {
    await p;
  } catch (e) {
    expect(e).to.be.instanceOf(VfioUserError);
    expect((e as VfioUserError).errno).to.equal(errno);
    return;
  }
  expect.fail(`expected errno ${errno}`);
}

function closed(c: VfioUserClient): Promise<string> {
  return new Promise((resolve) => {
    if (c.isClosed) resolve('closed');
    else c.onClose = resolve;
  });
}

describe('vfio-user: a client attacking the server (server in its own process)', function () {
  this.timeout(30_000);
  let s: Server;

  afterEach(async () => {
    if (s) expect(await stopServer(s), s.stderr()).to.equal(0);
  });

  it('a client that never sends VERSION is closed after --negotiation-timeout; the next client in the backlog is served', async () => {
    s = await startServer(['--negotiation-timeout', '300']);
    const silent = net.connect(s.sock);
    const silentClosed = new Promise<void>((r) => silent.once('close', () => r()));
    await new Promise<void>((r) => silent.once('connect', () => r()));
    const t0 = Date.now();
    // Waits in the backlog while the silent one holds the only slot.
    const next = await VfioUserClient.connect(s.sock);
    await silentClosed;
    expect(Date.now() - t0).to.be.at.least(250);
    expect((await next.regionRead(CONFIG, 0, 4)).readUInt32LE(0)).to.equal(0x10021dd8);
    next.close();
    expect(await logged(s, /no VERSION within 300 ms/)).to.match(/no VERSION within 300 ms/);
    await stillServes(s);
  });

  it('a FIFO (or a pipe) passed as an interrupt eventfd is refused with EINVAL, and nothing blocks on it', async () => {
    s = await startServer();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ernic-fifo-'));
    const fifo = path.join(dir, 'irq');
    execFileSync('mkfifo', [fifo]);
    const fifoFd = fs.openSync(fifo, fs.constants.O_RDWR | fs.constants.O_NONBLOCK);
    const [pipeRead, pipeWrite] = native.socketPair();
    const c = await VfioUserClient.connect(s.sock);
    try {
      await expectErrno(c.setIrqEventfds(MSIX, 0, [fifoFd]), Errno.EINVAL);
      await expectErrno(c.setIrqEventfds(MSIX, 0, [pipeWrite]), Errno.EINVAL);
      // A real eventfd is accepted, and the device signals it.
      const efd = native.eventfd(0, true);
      await c.setIrqEventfds(MSIX, 0, [efd]);
      await c.setIrqs(MSIX, SetIrqsFlag.DATA_NONE | SetIrqsFlag.ACTION_TRIGGER, 0, 1);
      const got = Buffer.alloc(8);
      expect(fs.readSync(efd, got, 0, 8, null)).to.equal(8);
      expect(got.readBigUInt64LE(0)).to.equal(1n);
      fs.closeSync(efd);
    } finally {
      c.close();
      for (const fd of [fifoFd, pipeRead, pipeWrite]) fs.closeSync(fd);
      fs.rmSync(dir, { recursive: true, force: true });
    }
    await stillServes(s);
  });

  it('unaligned DMA_MAP addresses and sizes are refused with EINVAL', async () => {
    s = await startServer();
    const fd = native.memfdCreate('attack', 1 << 20, true);
    const c = await VfioUserClient.connect(s.sock);
    try {
      await expectErrno(c.dmaMap(0x1000_0001, 0x1000, fd), Errno.EINVAL);
      await expectErrno(c.dmaMap(0x1000_0000, 0x1001, fd), Errno.EINVAL);
      await expectErrno(c.dmaMap(0x1000_0000, 0x1000, fd, 0x800), Errno.EINVAL);
      await c.dmaMap(0x1000_0000, 0x1000, fd);
    } finally {
      c.close();
      fs.closeSync(fd);
    }
    await stillServes(s);
  });

  it('guest RAM truncated after DMA_MAP (an unsealed memfd): the next device access is caught, the client closed, the server lives', async () => {
    s = await startServer();
    const g = await IonicGuest.connect(s.sock, { unsealedRam: true, ramSize: 16 << 20 });
    await g.probe();
    const gone = closed(g.client);
    // Shrink the RAM to nothing behind the server's mapping, then ask the device to write
    // the port info into it: without the guard that write is SIGBUS and the end of the process.
    fs.ftruncateSync(g.ram.fd, 0);
    const pinit = command(Op.PORT_INIT);
    putU64(pinit, 8, g.portInfoPa);
    await g.devCmd(pinit).catch(() => undefined);
    expect(await gone).to.be.a('string');
    g.dispose();
    expect(await logged(s, /shrank the file/)).to.match(/shrank the file behind a DMA_MAP region/);
    await stillServes(s);
  });
});
