// The Wireshark Lua dissector (docs/wireshark/vfio-user.lua), run through
// tshark against the recorded captures and against a synthetic capture full
// of truncated, garbage and segmented messages. Skipped only when tshark is
// not installed.
import { expect } from 'chai';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { skipBecause } from '../support/skip';
import { comment, le, msg, Packet, readPcapng, SynthPacket, writePcapng } from './pcapng';
import { big, expectClean, fields, LUA, num, realStderr, Run, tshark, tsharkEnv, useTsharkHome } from './tshark';

const ROOT = process.env.VFU_REPO_ROOT ?? path.join(__dirname, '..', '..', '..');
const FIXTURES = path.join(ROOT, 'fixtures', 'vfio-user');
const CAPTURES = ['qemu-boot-lvu-sample.pcapng', 'qemu-boot-lvu-gpio.pcapng', 'client-lvu-sample.pcapng'];

// An empty HOME for tshark, so that a copy of the dissector installed in the user's personal plugin folder (or
// personal preferences) cannot interfere.
let tsharkHome = '';

describe('tools: Wireshark dissector (docs/wireshark/vfio-user.lua)', function () {
  this.timeout(120000);

  before(function () {
    const r = spawnSync('tshark', ['-v'], { encoding: 'utf8' });
    if (r.error || r.status !== 0) skipBecause(this, 'tshark not found (apt-get install tshark)');
    tsharkHome = fs.mkdtempSync(path.join(os.tmpdir(), 'vfu-tshark-home-'));
    useTsharkHome(tsharkHome);
  });

  after(() => {
    if (tsharkHome) fs.rmSync(tsharkHome, { recursive: true, force: true });
    tsharkHome = '';
    useTsharkHome('');
  });

  it('exists and loads without Lua errors', () => {
    expect(fs.existsSync(LUA), LUA).to.equal(true);
    // -G must come first, so this one does not go through tshark()
    const g = spawnSync('tshark', ['-G', 'protocols', '-X', `lua_script:${LUA}`], {
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
      env: tsharkEnv(),
    });
    const r: Run = { stdout: g.stdout, stderr: g.stderr, status: g.status };
    expect(r.status, `tshark -G protocols: ${r.stderr}`).to.equal(0);
    expect(realStderr(r), 'stderr').to.not.match(/Lua|error/i);
    expect(r.stdout).to.match(/^vfio-user Protocol\t[^\t]+\tvfio-user$/m);
    const f = spawnSync('tshark', ['-G', 'fields', '-X', `lua_script:${LUA}`], {
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
      env: tsharkEnv(),
    });
    expect(f.stdout).to.match(/^F\tCommand\tvfio_user\.command\tFT_UINT16\tvfio-user\t/m);
  });

  for (const name of CAPTURES) {
    describe(name, () => {
      const file = path.join(FIXTURES, name);
      let packets: Packet[] = [];
      let rows: string[][] = [];
      const F = [
        'frame.number',
        'vfio_user.command',
        'vfio_user.msg_id',
        'vfio_user.flags',
        'vfio_user.error',
        'vfio_user.direction',
        'vfio_user.request_in',
        '_ws.col.Info',
        'frame.comment',
      ];
      const col = (f: string): number => F.indexOf(f);

      before(() => {
        packets = readPcapng(file);
        rows = fields(file, F);
      });

      it('dissects every packet as exactly one vfio-user message', () => {
        expect(packets.length).to.be.greaterThan(100);
        expect(rows.length, 'tshark rows').to.equal(packets.length);
        const withCommand = rows.filter((r) => (r[col('vfio_user.command')] ?? '') !== '');
        expect(withCommand.length, 'packets with a vfio_user.command').to.equal(packets.length);
        for (const r of rows) {
          expect(r[col('vfio_user.command')], `frame ${r[0]}: one message`).to.not.contain(',');
        }
      });

      it('decodes command and msg_id equal to the JSON comment of every packet', () => {
        for (const p of packets) {
          const r = rows[p.frame - 1];
          expect(r, `row for frame ${p.frame}`).to.not.equal(undefined);
          if (!r) continue;
          expect(num(r[col('frame.number')])).to.equal(p.frame);
          expect(p.comment, `frame ${p.frame} comment`).to.be.a('string');
          const c = JSON.parse(p.comment as string) as {
            dir: string;
            id: number;
            cmd: number;
            flags: number;
            error: number;
            type: string;
          };
          // tshark sees the same comment as our own reader
          expect(r[col('frame.comment')], `frame ${p.frame} frame.comment`).to.equal(p.comment);
          expect(num(r[col('vfio_user.command')]), `frame ${p.frame} command`).to.equal(c.cmd);
          expect(num(r[col('vfio_user.msg_id')]), `frame ${p.frame} msg_id`).to.equal(c.id);
          expect(num(r[col('vfio_user.flags')]), `frame ${p.frame} flags`).to.equal(c.flags);
          expect(num(r[col('vfio_user.error')]), `frame ${p.frame} error`).to.equal(c.error);
          expect(r[col('vfio_user.direction')], `frame ${p.frame} direction`).to.equal(c.dir);
          const info = r[col('_ws.col.Info')] ?? '';
          const kind = c.type === 'reply' ? 'reply' : 'cmd';
          expect(info, `frame ${p.frame} Info`).to.match(
            new RegExp(
              `^${c.dir} \\S+ ${kind}${(c.flags & 0x20) !== 0 ? '/ERR' : ''} id=0x${c.id.toString(16).padStart(4, '0')}`,
            ),
          );
          // the payload tshark decoded is the one in the file
          expect(p.payload.readUInt16LE(2)).to.equal(c.cmd);
        }
      });

      it('links every reply to its request', () => {
        for (const p of packets) {
          const c = JSON.parse(p.comment as string) as { id: number; cmd: number; type: string };
          if (c.type !== 'reply') continue;
          const r = rows[p.frame - 1] as string[];
          const reqFrame = num(r[col('vfio_user.request_in')]);
          expect(reqFrame, `frame ${p.frame}`).to.be.lessThan(p.frame);
          const req = JSON.parse(packets[reqFrame - 1]?.comment as string) as { id: number; cmd: number; type: string };
          expect([req.id, req.cmd, req.type], `frame ${p.frame} -> ${reqFrame}`).to.deep.equal([
            c.id,
            c.cmd,
            'command',
          ]);
        }
      });

      it('prints the full decode (-V) without Lua errors', () => {
        const r = tshark(['-r', file, '-V']);
        expectClean(r, `${name} -V`);
        expect(r.stdout).to.contain('vfio-user Protocol');
        // no expert info from the dissector other than the intended error reply
        const experts = r.stdout.split('\n').filter((l) => /Expert Info/.test(l) && !/Comment\/Comment/.test(l));
        for (const e of experts) expect(e).to.match(/Error reply to REGION_READ: errno 22\(EINVAL\)/);
      });
    });
  }

  describe('decoded values', () => {
    it('qemu-boot-lvu-gpio: DMA_MAP of all 2 GiB of RAM at 0, flags R|W, with the memfd', () => {
      const file = path.join(FIXTURES, 'qemu-boot-lvu-gpio.pcapng');
      const rows = fields(
        file,
        [
          'frame.number',
          'vfio_user.msg_id',
          'vfio_user.dma_map.flags',
          'vfio_user.dma_map.address',
          'vfio_user.dma_map.size',
          'vfio_user.dma_map.offset',
          'vfio_user.fd.kind',
          'vfio_user.fd.size',
          '_ws.col.Info',
        ],
        ['-Y', 'vfio_user.command == 2 && vfio_user.flags.type == 0'],
      );
      expect(rows.length).to.equal(18);
      // RAM is mapped whole at realize (id 1) and again after the firmware's PAM churn
      const big2g = rows.filter((r) => big(r[4]) === 0x80000000n);
      expect(big2g.length).to.equal(2);
      const r = big2g[0] as string[];
      expect(num(r[1])).to.equal(1);
      expect(num(r[2])).to.equal(3);
      expect(big(r[3])).to.equal(0n);
      expect(big(r[5])).to.equal(0n);
      expect(r[6]).to.equal('memfd');
      expect(num(r[7])).to.equal(2147483648);
      expect(r[8]).to.match(
        /^c2s DMA_MAP cmd id=0x0001 addr=0x0 size=0x80000000 off=0x0 prot=RW fds=memfd:2147483648$/,
      );
      // the BIOS map: read-only, no fd
      const bios = rows.find((r2) => big(r2[3]) === 0xfffc0000n) as string[];
      expect(num(bios[2])).to.equal(1);
      expect(bios[6]).to.equal('');
    });

    it('qemu-boot-lvu-gpio: the 256-byte config space read and its data', () => {
      const file = path.join(FIXTURES, 'qemu-boot-lvu-gpio.pcapng');
      const rows = fields(
        file,
        [
          'frame.number',
          'vfio_user.flags.type',
          'vfio_user.region.index',
          'vfio_user.region.offset',
          'vfio_user.region.count',
          'vfio_user.data',
          'vfio_user.request_in',
        ],
        ['-Y', 'vfio_user.command == 9 && vfio_user.region.count == 256'],
      );
      expect(rows.length).to.equal(2);
      const [cmd, reply] = rows as [string[], string[]];
      expect(num(cmd[1])).to.equal(0);
      expect(num(reply[1])).to.equal(1);
      for (const r of rows) {
        expect(num(r[2])).to.equal(7);
        expect(big(r[3])).to.equal(0n);
      }
      expect(cmd[5]).to.equal('');
      const data = reply[5] as string;
      expect(data.replace(/:/g, '').length).to.equal(512);
      expect(data.replace(/:/g, '').slice(0, 8)).to.equal('4f49c80d'); // vendor 494f, device 0dc8
      expect(num(reply[6])).to.equal(num(cmd[0]));
    });

    it('qemu-boot-lvu-gpio: SET_IRQS for INTx with one eventfd', () => {
      const file = path.join(FIXTURES, 'qemu-boot-lvu-gpio.pcapng');
      const rows = fields(
        file,
        [
          'vfio_user.set_irqs.flags',
          'vfio_user.set_irqs.index',
          'vfio_user.set_irqs.start',
          'vfio_user.set_irqs.count',
          'vfio_user.fd.kind',
        ],
        ['-Y', 'vfio_user.command == 8 && vfio_user.flags.type == 0'],
      );
      expect(rows.length).to.equal(4);
      const first = rows[0] as string[];
      expect(num(first[0])).to.equal(0x24); // DATA_EVENTFD | ACTION_TRIGGER
      expect(num(first[1])).to.equal(0);
      expect(num(first[2])).to.equal(0);
      expect(num(first[3])).to.equal(1);
      expect(first[4]).to.equal('eventfd');
    });

    it('qemu-boot-lvu-sample: BAR1 region info with the sparse-mmap capability and its fd', () => {
      const file = path.join(FIXTURES, 'qemu-boot-lvu-sample.pcapng');
      const rows = fields(
        file,
        [
          'frame.number',
          'vfio_user.region_info.index',
          'vfio_user.region_info.flags',
          'vfio_user.region_info.size',
          'vfio_user.region_info.cap_offset',
          'vfio_user.cap.id',
          'vfio_user.cap.sparse.nr_areas',
          'vfio_user.cap.sparse.area.offset',
          'vfio_user.cap.sparse.area.size',
          'vfio_user.fd.kind',
        ],
        ['-Y', 'vfio_user.cap.id'],
      );
      expect(rows.length).to.equal(1);
      const r = rows[0] as string[];
      expect(num(r[0])).to.equal(14);
      expect(num(r[1])).to.equal(1);
      expect(num(r[2])).to.equal(0xf);
      expect(big(r[3])).to.equal(0x4000n);
      expect(num(r[4])).to.equal(32);
      expect(num(r[5])).to.equal(1);
      expect(num(r[6])).to.equal(2);
      expect((r[7] as string).split(',').map(big)).to.deep.equal([0n, 0x2000n]);
      expect((r[8] as string).split(',').map(big)).to.deep.equal([0x1000n, 0x1000n]);
      expect(r[9]).to.equal('file');
    });

    it('qemu-boot-lvu-sample: VERSION major/minor and JSON', () => {
      const file = path.join(FIXTURES, 'qemu-boot-lvu-sample.pcapng');
      const rows = fields(
        file,
        ['vfio_user.version.major', 'vfio_user.version.minor', 'vfio_user.version.json'],
        ['-Y', 'vfio_user.command == 1'],
      );
      expect(rows.length).to.equal(2);
      for (const r of rows) {
        expect([num(r[0]), num(r[1])]).to.deep.equal([0, 0]);
      }
      expect(rows[0]?.[2]).to.contain('"max_data_xfer_size": 1048576');
    });

    it('client-lvu-sample: the intentional bad REGION_READ gets an EINVAL error reply', () => {
      const file = path.join(FIXTURES, 'client-lvu-sample.pcapng');
      const rows = fields(
        file,
        [
          'frame.number',
          'vfio_user.command',
          'vfio_user.msg_id',
          'vfio_user.flags',
          'vfio_user.flags.error',
          'vfio_user.error',
          'vfio_user.request_in',
          '_ws.col.Info',
        ],
        ['-Y', 'vfio_user.flags.error == 1'],
      );
      expect(rows.length).to.equal(1);
      const r = rows[0] as string[];
      expect(num(r[0])).to.equal(4);
      expect(num(r[1])).to.equal(9);
      expect(num(r[2])).to.equal(0xf00f);
      expect(num(r[3])).to.equal(0x21);
      expect(num(r[5])).to.equal(22);
      expect(num(r[6])).to.equal(3);
      expect(r[7]).to.equal('s2c REGION_READ reply/ERR id=0xf00f err=22(EINVAL)');
      // and the request it answers
      const req = fields(file, ['vfio_user.region.index', 'vfio_user.region.count'], ['-Y', 'frame.number == 3']);
      expect(num(req[0]?.[0])).to.equal(0xdeadbeef);
      expect(num(req[0]?.[1])).to.equal(4);
    });

    it('client-lvu-sample: server-initiated DMA, DEVICE_FEATURE and MIG_DATA_READ', () => {
      const file = path.join(FIXTURES, 'client-lvu-sample.pcapng');
      const dma = fields(
        file,
        ['vfio_user.command', 'vfio_user.direction', 'vfio_user.dma.address', 'vfio_user.dma.count', 'vfio_user.data'],
        ['-Y', '(vfio_user.command == 11 || vfio_user.command == 12) && vfio_user.flags.type == 0'],
      );
      expect(dma.length).to.equal(8);
      for (const r of dma) {
        expect(r[1]).to.equal('s2c');
        expect(num(r[3])).to.equal(1024);
      }
      const writes = dma.filter((r) => r[0] === '12');
      expect(writes.map((r) => big(r[2]))).to.deep.equal([0n, 0x400n, 0x800n, 0xc00n]);
      expect((writes[0]?.[4] as string).replace(/:/g, '').length).to.equal(2048);

      const feat = fields(
        file,
        ['vfio_user.feature.index', 'vfio_user.feature.get', 'vfio_user.feature.set', 'vfio_user.feature.device_state'],
        ['-Y', 'vfio_user.command == 16 && vfio_user.flags.type == 0'],
      );
      expect(feat.length).to.equal(21);
      const states = feat.filter((r) => r[0] === '2').map((r) => num(r[3]));
      expect(states).to.deep.equal([6, 3, 1]); // PRE_COPY, STOP_COPY, STOP
      expect(feat.filter((r) => r[0] === '8').length).to.equal(16);

      const mig = fields(
        file,
        ['vfio_user.argsz', 'vfio_user.mig_data.size'],
        ['-Y', 'vfio_user.command == 17 && vfio_user.flags.type == 0'],
      );
      expect(mig.length).to.equal(33);
    });
  });

  describe('robustness (synthetic capture)', () => {
    let dir = '';
    let file = '';
    const bigData = Buffer.alloc(70000, 0xab);
    const bigMsg = msg(0x0100, 10, 0, Buffer.concat([le([8, 0x10], [4, 0], [4, bigData.length]), bigData]));

    before(() => {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'vfu-wireshark-'));
      file = path.join(dir, 'synthetic.pcapng');
      const packets: SynthPacket[] = [];
      const add = (
        conn: number,
        d: 'c2s' | 's2c',
        payload: Buffer,
        c?: string | null,
        ports: Partial<SynthPacket> = {},
      ) => packets.push({ conn, dir: d, payload, comment: c === undefined ? comment(d, conn, payload) : c, ...ports });

      // connection 0: well-formed traffic, a message split over two packets, two messages in one packet
      const ver = msg(1, 1, 0, Buffer.concat([le([2, 0], [2, 0]), Buffer.from('{"capabilities":{}}\0')]));
      add(0, 'c2s', ver);
      add(0, 's2c', msg(1, 1, 1, Buffer.concat([le([2, 0], [2, 0]), Buffer.from('{}\0')])));
      const seg0 = bigMsg.subarray(0, 65000);
      const seg1 = bigMsg.subarray(65000);
      add(
        0,
        'c2s',
        seg0,
        comment('c2s', 0, bigMsg, { seg: 0, nseg: 2, fds: [{ kind: 'memfd', size: 4096, name: 'seg-test' }] }),
      );
      add(0, 'c2s', seg1, comment('c2s', 0, bigMsg, { seg: 1, nseg: 2 }));
      add(0, 's2c', msg(0x0100, 10, 1, le([8, 0x10], [4, 0], [4, bigData.length])));
      const two = Buffer.concat([msg(2, 13, 0, Buffer.alloc(0)), msg(3, 4, 0, le([4, 16], [4, 0], [4, 0], [4, 0]))]);
      add(0, 'c2s', two, null);
      // QEMU-layout DMA_WRITE from the server (u32 count, data at offset 28)
      add(0, 's2c', msg(4, 12, 0, Buffer.concat([le([8, 0x1000], [4, 8]), Buffer.from('ABCDEFGH'), Buffer.alloc(4)])));

      // connection 1: garbage of every kind
      add(
        1,
        'c2s',
        msg(10, 2, 0, le([4, 32], [4, 3], [8, 0])).subarray(0, 30),
        comment('c2s', 1, msg(10, 2, 0, Buffer.alloc(32)), { incomplete: true, size: 30 }),
      );
      add(1, 'c2s', msg(0x0b0a, 5, 0, Buffer.from([0x11, 0x22]), { size: 5 }), comment('c2s', 1, Buffer.alloc(16)));
      add(
        1,
        'c2s',
        Buffer.from('hello, this is not vfio-user at all'),
        JSON.stringify({ dir: 'c2s', conn: 1, cmd: null, name: 'RAW', raw: true, fds: [] }),
      );
      add(
        1,
        's2c',
        msg(
          11,
          5,
          1,
          Buffer.concat([
            le([4, 80], [4, 0xf], [4, 1], [4, 32], [8, 0x4000], [8, 0]),
            le([2, 1], [2, 1], [4, 32], [4, 5], [4, 0]),
          ]),
        ),
      );
      add(1, 's2c', msg(12, 5, 1, le([4, 80], [4, 0xf], [4, 1], [4, 200], [8, 0x4000], [8, 0])));
      add(1, 'c2s', msg(13, 99, 0x40, Buffer.from('??')));
      add(
        1,
        'c2s',
        msg(
          14,
          8,
          0,
          Buffer.concat([le([4, 20 + 1000], [4, 0x22], [4, 0], [4, 0], [4, 1000]), Buffer.from([1, 0, 1])]),
        ),
      );
      add(
        1,
        'c2s',
        msg(15, 15, 0x10, Buffer.concat([le([8, 1n << 40n]), le([8, 0], [4, 0], [4, 4]), Buffer.alloc(8, 0x55)])),
      );
      add(1, 'c2s', msg(16, 1, 0, Buffer.from([0, 0, 2, 0, 0x7b, 0x7b])), 'not json at all');
      add(1, 'c2s', msg(17, 2, 0, Buffer.alloc(0)));
      add(1, 'c2s', msg(18, 16, 0, le([4, 16], [4, 0x10002], [4, 3])));
      add(1, 'c2s', msg(19, 17, 0, le([4, 8])));
      add(
        1,
        'c2s',
        Buffer.from([1, 2, 3, 4, 5, 6, 7]),
        comment('c2s', 1, Buffer.alloc(16), { incomplete: true, size: 7 }),
      );

      // another port pair: found by the heuristic
      add(2, 'c2s', msg(20, 4, 0, le([4, 16], [4, 0], [4, 0], [4, 0])), null, { clientPort: 41000, serverPort: 45000 });
      add(2, 's2c', msg(20, 4, 1, le([4, 16], [4, 3], [4, 9], [4, 5])), null, { clientPort: 41000, serverPort: 45000 });
      writePcapng(file, packets);
    });

    after(() => {
      if (dir && !process.env.VFU_KEEP_SYNTHETIC) fs.rmSync(dir, { recursive: true, force: true });
    });

    it('never raises a Lua error, and reports problems as expert info', () => {
      const r = tshark(['-r', file, '-V']);
      expectClean(r, 'synthetic -V');
      expect(r.stdout).to.contain('Truncated');
      expect(r.stdout).to.contain('Capability chain loops back to offset 32');
      expect(r.stdout).to.contain('Capability offset 200 is outside the payload');
      expect(r.stdout).to.contain('msg_size 5 is outside 16..');
      expect(r.stdout).to.contain('Unknown command 99');
      expect(r.stdout).to.contain("decoded with QEMU's layout");
      const two = tshark(['-r', file, '-2', '-V']);
      expectClean(two, 'synthetic -2 -V');
    });

    it('reassembles a message recorded in two segments and shows the fds of segment 0', () => {
      const rows = fields(
        file,
        [
          'frame.number',
          'vfio_user.command',
          'vfio_user.msg_id',
          'vfio_user.region.count',
          'vfio_user.fd.kind',
          'vfio_user.fd.name',
        ],
        ['-Y', 'vfio_user.command == 10 && vfio_user.flags.type == 0'],
      );
      expect(rows.length).to.equal(1);
      const r = rows[0] as string[];
      expect(num(r[0])).to.equal(4);
      expect(num(r[2])).to.equal(0x100);
      expect(num(r[3])).to.equal(70000);
      expect(r[4]).to.equal('memfd');
      expect(r[5]).to.equal('seg-test');
    });

    it('splits two messages in one packet and finds vfio-user on other ports heuristically', () => {
      const rows = fields(file, [
        'frame.number',
        'vfio_user.command',
        'vfio_user.msg_id',
        'vfio_user.direction',
        '_ws.col.Info',
      ]);
      const byFrame = new Map(rows.map((r) => [num(r[0]), r]));
      expect(byFrame.get(6)?.[1]).to.equal('13,4');
      expect(byFrame.get(6)?.[4]).to.equal(
        'c2s DEVICE_RESET cmd id=0x0002 ; c2s DEVICE_GET_INFO cmd id=0x0003 argsz=16',
      );
      const n = rows.length;
      expect(byFrame.get(n - 1)?.[1]).to.equal('4');
      expect(byFrame.get(n)?.[1]).to.equal('4');
      expect(byFrame.get(n)?.[3]).to.equal('s2c');
      expect(byFrame.get(n)?.[4]).to.equal('s2c DEVICE_GET_INFO reply id=0x0014 flags=0x3 regions=9 irqs=5');
    });
  });
});
