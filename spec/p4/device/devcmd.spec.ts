// Device commands 70-72 (lib/p4/device/devcmd.ts) through the in-process device
// over a real vfio-user socket: the guest model issues them through BAR0's
// dev_cmd registers and the admin queue, as ionic.ko would, under each
// --p4-guest-scope; refusals by scope (EOPCODE, EPERM), bad lengths, bad
// text, unreadable guest addresses; P4_LOAD replacing the program; and the
// P4 counters in the stats file and /metrics.

import { expect } from 'chai';
import * as fs from 'fs';
import * as path from 'path';
import { attachP4, P4Attachment, p4FromCli } from '../../../lib/p4/device/attach';
import type { P4GuestScope } from '../../../lib/p4/device/devcmd';
import { P4_MAX_COMMAND_BYTES, P4_MAX_PROGRAM_BYTES } from '../../../lib/p4/device/devcmd';
import { collectStats } from '../../../lib/ops/stats-source';
import { serverRegistry } from '../../../lib/ops/metrics';
import { command } from '../../support/ionic/guest/bytes';
import type { IonicGuest } from '../../support/ionic/guest';
import { Op } from '../../support/ionic/regs';
import { Rig } from '../../support/ionic/rig';

const ROOT = path.join(__dirname, '..', '..', '..', '..');
const PROGRAM = path.join(ROOT, 'fixtures', 'p4', 'rdma_fp8.json');
const COMMANDS = path.join(ROOT, 'fixtures', 'p4', 'rdma_fp8.commands.txt');
const St = { SUCCESS: 0, EOPCODE: 2, EPERM: 4, ENOENT: 7, EINVAL: 14, BAD_ADDR: 17 } as const;
const CAP_P4 = 4;

/** A command laid out as devcmd.ts documents it, written here by hand. */
function p4Command(len: number, o: { outLen?: number; textPa?: number; outPa?: number } = {}): Buffer {
  const c = command(71);
  c.writeUInt16LE(len, 4);
  c.writeUInt16LE(o.outLen ?? 0, 6);
  c.writeBigUInt64LE(BigInt(o.textPa ?? 0), 8);
  c.writeBigUInt64LE(BigInt(o.outPa ?? 0), 16);
  return c;
}
function p4Load(len: number, pa: number): Buffer {
  const c = command(72);
  c.writeUInt32LE(len, 4);
  c.writeBigUInt64LE(BigInt(pa), 8);
  return c;
}
const text = (data: Buffer | null): string => data!.subarray(0, data!.indexOf(0)).toString('latin1');

async function boot(scope: P4GuestScope | null): Promise<{ rig: Rig; g: IonicGuest; att: P4Attachment | null }> {
  const rig = await Rig.start();
  let att: P4Attachment | null = null;
  if (scope) {
    const setup = p4FromCli({ program: PROGRAM, commands: COMMANDS, guestScope: scope });
    if (!setup.ok) throw new Error(setup.error);
    att = attachP4(rig.device, setup.value!.engine, scope, PROGRAM);
  }
  const g = await rig.probed(1, {});
  return { rig, g, att };
}

async function lifCaps(g: IonicGuest): Promise<number> {
  const r = await g.devCmd(command(Op.LIF_IDENTIFY), { readData: true });
  expect(r.status).to.equal(St.SUCCESS);
  return Number(r.data!.readBigUInt64LE(0));
}

async function run(
  g: IonicGuest,
  line: string,
  o: { outLen?: number; textPa?: number; outPa?: number } = {},
): Promise<{ status: number; comp: Buffer; out: string }> {
  const t = Buffer.from(line, 'latin1');
  const r = await g.devCmd(p4Command(t.length, o), { data: t, readData: true });
  return { status: r.status, comp: r.comp, out: text(r.data) };
}

describe('p4 device commands 70-72 and --p4-guest-scope', function () {
  this.timeout(20000);

  it('without --p4 they are unknown opcodes (EOPCODE), as any opcode the device does not know', async () => {
    const { rig, g } = await boot(null);
    try {
      for (const op of [70, 71, 72]) expect((await g.devCmd(command(op))).status, `opcode ${op}`).to.equal(St.EOPCODE);
      expect((await lifCaps(g)) & CAP_P4).to.equal(0);
    } finally {
      await rig.close();
    }
  });

  describe('scope none (the default)', () => {
    let rig: Rig;
    let g: IonicGuest;
    let att: P4Attachment;
    before(async () => {
      const b = await boot('none');
      rig = b.rig;
      g = b.g;
      att = b.att!;
    });
    after(async () => rig?.close());

    it('70-72 fail as unknown opcodes through dev_cmd and the admin queue; nothing changes; LIF_IDENTIFY has no P4 bit', async () => {
      const entries = att.engine!.tables.get('wqe_ops')!.entries.size;
      const t = Buffer.from('table_clear wqe_ops');
      expect((await g.devCmd(command(70))).status).to.equal(St.EOPCODE);
      expect((await g.devCmd(p4Command(t.length), { data: t })).status).to.equal(St.EOPCODE);
      expect((await g.devCmd(p4Load(16, 0x1000))).status).to.equal(St.EOPCODE);
      const pa = g.alloc(64);
      t.copy(g.mem(pa, t.length));
      expect((await g.adminCmd(p4Command(t.length, { textPa: pa }))).status).to.equal(St.EOPCODE);
      expect(att.engine!.tables.get('wqe_ops')!.entries.size).to.equal(entries);
      expect((await lifCaps(g)) & CAP_P4).to.equal(0);
      expect(att.control.stats.refused).to.equal(4);
    });
  });

  describe('scope read', () => {
    let rig: Rig;
    let g: IonicGuest;
    before(async () => {
      const b = await boot('read');
      rig = b.rig;
      g = b.g;
    });
    after(async () => rig?.close());

    it('P4_IDENTIFY: scope, flags, counts in the completion; names in the data window; LIF_IDENTIFY reports P4', async () => {
      const r = await g.devCmd(command(70), { readData: true });
      expect(r.status).to.equal(St.SUCCESS);
      expect([r.comp[4], r.comp[5], r.comp.readUInt16LE(6), r.comp.readUInt16LE(8)]).to.deep.equal([1, 3, 3, 2]);
      expect(text(r.data).split('\n')).to.include.members([
        'program rdma_fp8.json',
        'scope read',
        'table wqe_ops 2',
        'table l2_fwd 2',
        'table count_verbs 0',
        'counter wqe_verbs 16',
        'counter wqe_actions 4',
      ]);
      expect((await lifCaps(g)) & CAP_P4).to.equal(CAP_P4);
    });

    it('counter_read and register_read style commands run; anything that changes state is EPERM; P4_LOAD is EPERM', async () => {
      const r = await run(g, 'counter_read wqe_actions 2');
      expect(r.status).to.equal(St.SUCCESS);
      expect(r.out).to.equal('wqe_actions[2]= (0 bytes, 0 packets)');
      expect(r.comp.readUInt16LE(8)).to.equal(r.out.length);
      for (const line of [
        'table_add wqe_ops drop_wqe 0&&&0 0&&&0 0&&&0 0&&&0 => 1',
        'table_clear wqe_ops',
        'counter_reset wqe_actions',
      ]) {
        expect((await run(g, line)).status, line).to.equal(St.EPERM);
      }
      expect((await g.devCmd(p4Load(16, 0x1000))).status).to.equal(St.EPERM);
    });
  });

  describe('scope tables', () => {
    let rig: Rig;
    let g: IonicGuest;
    let att: P4Attachment;
    before(async () => {
      const b = await boot('tables');
      rig = b.rig;
      g = b.g;
      att = b.att!;
    });
    after(async () => rig?.close());

    it('table_add through dev_cmd: the entry is there, its handle in the completion', async () => {
      const before = att.engine!.tables.get('wqe_ops')!.entries.size;
      const r = await run(g, 'table_add wqe_ops drop_wqe 5&&&0xff 0&&&0 0&&&0 0&&&0 => 3');
      expect(r.status).to.equal(St.SUCCESS);
      expect(r.out).to.match(/^Entry has been added with handle \d+$/);
      expect(r.comp.readUInt32LE(4)).to.equal(Number(/handle (\d+)/.exec(r.out)![1]));
      expect(att.engine!.tables.get('wqe_ops')!.entries.size).to.equal(before + 1);
      expect((await run(g, 'counter_read wqe_verbs 4')).comp.readUInt32LE(4), 'no handle').to.equal(0xffffffff);
    });

    it('through the admin queue: text and output by guest address (out_len bounds what is written)', async () => {
      const line = Buffer.from('counter_read wqe_verbs 15');
      const tp = g.alloc(64);
      const op = g.alloc(64);
      line.copy(g.mem(tp, line.length));
      g.mem(op, 64).fill(0xaa);
      const c = await g.adminCmd(p4Command(line.length, { textPa: tp, outPa: op, outLen: 12 }));
      expect(c.status).to.equal(St.SUCCESS);
      expect(c.comp.readUInt16LE(8)).to.equal(12);
      expect(g.mem(op, 13).toString('latin1')).to.equal('wqe_verbs[15\xaa');
      // No data window on the admin queue: the text must come by address.
      expect((await g.adminCmd(p4Command(line.length))).status).to.equal(St.EINVAL);
    });

    it('bad input: empty or too long, a newline or a control byte, an unreadable address, a refused command (its error as output)', async () => {
      expect((await g.devCmd(p4Command(0), { data: Buffer.from('x') })).status).to.equal(St.EINVAL);
      expect((await g.devCmd(p4Command(P4_MAX_COMMAND_BYTES + 1))).status).to.equal(St.EINVAL);
      expect((await g.devCmd(p4Command(0xffff))).status).to.equal(St.EINVAL);
      expect((await run(g, 'table_clear wqe_ops\ntable_clear l2_fwd')).status).to.equal(St.EINVAL);
      expect((await run(g, 'table_clear\x00wqe_ops')).status).to.equal(St.EINVAL);
      expect((await g.devCmd(p4Command(10, { textPa: 2 ** 50 }))).status).to.equal(St.BAD_ADDR);
      expect((await g.devCmd(p4Command(10, { textPa: 2 ** 60 }))).status).to.equal(St.BAD_ADDR);
      const tp = g.alloc(64);
      Buffer.from('counter_read wqe_verbs 1').copy(g.mem(tp, 24));
      expect((await g.devCmd(p4Command(24, { textPa: tp, outPa: 2 ** 50, outLen: 100 }))).status).to.equal(St.BAD_ADDR);
      const r = await run(g, 'table_add no_such_table x => 1');
      expect(r.status).to.equal(St.EINVAL);
      expect(r.out).to.match(/no_such_table/);
      const big = await run(g, `counter_read wqe_verbs ${'9'.repeat(900)}`);
      expect(big.status).to.equal(St.EINVAL);
      expect((await g.devCmd(p4Load(16, 0x1000))).status).to.equal(St.EPERM);
      // The device still works after all that.
      expect((await g.devCmd(command(70))).status).to.equal(St.SUCCESS);
    });
  });

  describe('scope program', () => {
    let rig: Rig;
    let g: IonicGuest;
    let att: P4Attachment;
    before(async () => {
      const b = await boot('program');
      rig = b.rig;
      g = b.g;
      att = b.att!;
    });
    after(async () => rig?.close());

    function place(s: string | Buffer): { pa: number; len: number } {
      const b = Buffer.isBuffer(s) ? s : Buffer.from(s);
      const pa = g.alloc(b.length);
      b.copy(g.mem(pa, b.length));
      return { pa, len: b.length };
    }

    it('P4_LOAD replaces the program (tables start empty); the WQE filter and the segment follow', async () => {
      const old = att.engine;
      const { pa, len } = place(fs.readFileSync(PROGRAM));
      const r = await g.devCmd(p4Load(len, pa), { readData: true });
      expect(r.status).to.equal(St.SUCCESS);
      expect(att.engine).to.not.equal(old);
      expect(att.segment.engine).to.equal(att.engine);
      const id = await g.devCmd(command(70), { readData: true });
      expect([id.comp[4], id.comp[5]]).to.deep.equal([3, 3]);
      expect(text(id.data)).to.include('program (loaded by the guest)').and.include('table wqe_ops 0');
      expect(att.control.stats.loads).to.equal(1);
    });

    it('a refused program leaves the running one: not JSON, a bad value (its JSON path), a bad ernic_wqe layout; sizes and addresses', async () => {
      const running = att.engine;
      const a = place('{ not json');
      let r = await g.devCmd(p4Load(a.len, a.pa), { readData: true });
      expect(r.status).to.equal(St.EINVAL);
      expect(text(r.data).length).to.be.greaterThan(0);
      const p = JSON.parse(fs.readFileSync(PROGRAM, 'utf8'));
      p.pipelines[0].tables[1].match_type = 'fuzzy';
      const b = place(JSON.stringify(p));
      r = await g.devCmd(p4Load(b.len, b.pa), { readData: true });
      expect(r.status).to.equal(St.EINVAL);
      expect(text(r.data)).to.match(/pipelines\[0\]\.tables\[1\]\.match_type/);
      const q = JSON.parse(fs.readFileSync(PROGRAM, 'utf8'));
      q.header_types[1].fields[0] = ['verb', 16];
      const c = place(JSON.stringify(q));
      r = await g.devCmd(p4Load(c.len, c.pa), { readData: true });
      expect(r.status).to.equal(St.EINVAL);
      expect(text(r.data)).to.match(/header ernic_wqe must have the fields/);
      // What a guest's program may make the server hold is bounded before anything is compiled.
      const big = JSON.parse(fs.readFileSync(PROGRAM, 'utf8'));
      big.counter_arrays = Array.from({ length: 64 }, (_, i) => ({
        name: `c${i}`,
        id: 10 + i,
        size: 1 << 20,
        is_direct: false,
      }));
      const d = place(JSON.stringify(big));
      r = await g.devCmd(p4Load(d.len, d.pa), { readData: true });
      expect(r.status).to.equal(St.EINVAL);
      expect(text(r.data)).to.match(/a guest's program may have at most 1048576/);
      const wide = JSON.parse(fs.readFileSync(PROGRAM, 'utf8'));
      wide.pipelines[0].tables[1].max_size = 1 << 24;
      const w = place(JSON.stringify(wide));
      r = await g.devCmd(p4Load(w.len, w.pa), { readData: true });
      expect(r.status).to.equal(St.EINVAL);
      expect(text(r.data)).to.match(/\d+ entries in all \(tables \d+,/);
      expect((await g.devCmd(p4Load(0, a.pa))).status).to.equal(St.EINVAL);
      expect((await g.devCmd(p4Load(P4_MAX_PROGRAM_BYTES + 1, a.pa))).status).to.equal(St.EINVAL);
      expect((await g.devCmd(p4Load(100, 2 ** 50))).status).to.equal(St.BAD_ADDR);
      expect((await g.devCmd(p4Load(100, 0))).status).to.equal(St.BAD_ADDR);
      expect(att.engine).to.equal(running);
    });
  });

  describe('P4 counters in the stats file and /metrics', () => {
    let rig: Rig;
    let g: IonicGuest;
    let att: P4Attachment;
    before(async () => {
      const b = await boot('read');
      rig = b.rig;
      g = b.g;
      att = b.att!;
    });
    after(async () => rig?.close());

    it('a P4 Statistics section and p4_* families with the segment, WQE, command and counter-array figures', async () => {
      await run(g, 'counter_read wqe_verbs 0');
      await run(g, 'table_clear wqe_ops'); // EPERM
      att.engine!.externs.counters.get('wqe_verbs')!.count(4, 44);
      att.engine!.externs.counters.get('wqe_verbs')!.count(4, 44);
      const src = {
        device: rig.device,
        socket: 's',
        backend: 'loopback',
        mac: 'm',
        connection: { connected: true, state: 'connected' },
        p4: att,
      };
      const snap = collectStats(src, 1);
      const sec = snap.sections.find((s) => s.title === 'P4 Statistics')!;
      const rows = new Map(sec.rows);
      expect(rows.get('program')).to.equal('rdma_fp8.json');
      expect(rows.get('guest_scope')).to.equal('read');
      expect(rows.get('guest_commands')).to.equal(1);
      expect(rows.get('guest_commands_refused')).to.equal(1);
      expect(rows.get('counter_wqe_verbs[4]_packets')).to.equal(2);
      expect(rows.get('counter_wqe_verbs[4]_bytes')).to.equal(88);
      expect(rows.has('counter_wqe_verbs[0]_packets'), 'zero cells are left out').to.equal(false);
      for (const k of ['wqe_wqes', 'wqe_adds', 'wqe_dropped', 'frames_from_guest', 'frames_dropped'])
        expect(rows.get(k), k).to.equal(0);
      const metrics = await serverRegistry(src).metrics();
      expect(metrics).to.include('rocm_ernic_p4_counter_packets_total{counter="wqe_verbs",index="4"} 2');
      expect(metrics).to.include('rocm_ernic_p4_guest_commands_total{outcome="refused"} 1');
      expect(metrics).to.include('rocm_ernic_p4_wqes_total{outcome="adds"} 0');
      expect(metrics).to.include('rocm_ernic_p4_info{program="rdma_fp8.json",scope="read"} 1');
      const plain = collectStats({ ...src, p4: null }, 2);
      expect(plain.sections.map((s) => s.title)).to.not.include('P4 Statistics');
    });
  });
});
