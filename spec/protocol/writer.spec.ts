// MessageWriter (batching, abort, growth, rewind, misuse) and the layout tables
// (offsets pinned to docs/vfio-user-protocol.md, u64 get/set at the 2^53 edge).
import { expect } from 'chai';
import * as layouts from '../../protocol/layouts';
import { getField, MessageWriter, setField, U64_UNSAFE, writeErrorReply, writeMessage } from '../../protocol';
import type { Body, Field, Header } from '../../protocol';
import { Bytes, msg } from '../support/bytes';
import { decodeOk, SAFE_MAX } from './codec-helpers';

type Head = Omit<Header, 'size'>;

/** Walk a batch by msg_size and return each message. */
function split(batch: Buffer): Buffer[] {
  const out: Buffer[] = [];
  let at = 0;
  while (at < batch.length) {
    const size = batch.readUInt32LE(at + 4);
    expect(size, `msg_size at ${at}`).to.be.at.least(16);
    out.push(batch.subarray(at, at + size));
    at += size;
  }
  expect(at).to.equal(batch.length);
  return out;
}

const RESET: [Head, Body, Buffer] = [
  { id: 1, command: 13, flags: 0, error: 0 },
  { kind: 'deviceReset' },
  msg(1, 13, 0),
];
const READ: [Head, Body, Buffer] = [
  { id: 2, command: 9, flags: 1, error: 0 },
  { kind: 'regionReadReply', offset: 0x10, region: 7, count: 4, data: Buffer.from([1, 2, 3, 4]) },
  msg(2, 9, 1, new Bytes().u64(0x10).u32(7).u32(4).raw([1, 2, 3, 4]).build()),
];
const UNMAP: [Head, Body, Buffer] = [
  { id: 3, command: 3, flags: 1, error: 0 },
  { kind: 'dmaUnmapReply', argsz: 24, flags: 0, address: 0x1000, size: 0x2000 },
  msg(3, 3, 1, new Bytes().u32(24).u32(0).u64(0x1000).u64(0x2000).build()),
];

describe('protocol writer: MessageWriter', () => {
  it('batches several messages; take() returns them concatenated, each with its own msg_size', () => {
    const w = new MessageWriter();
    for (const [h, b] of [RESET, READ, UNMAP]) writeMessage(w, h, b);
    writeErrorReply(w, 4, 9, 22);
    const errBytes = Buffer.from('0400' + '0900' + '10000000' + '21000000' + '16000000', 'hex');
    const expected = Buffer.concat([RESET[2], READ[2], UNMAP[2], errBytes]);
    expect(w.length).to.equal(expected.length);
    const batch = w.take();
    expect(batch.toString('hex')).to.equal(expected.toString('hex'));
    const parts = split(batch);
    expect(parts.map((p) => p.length)).to.deep.equal([16, 36, 40, 16]);
    expect(parts.map((p) => decodeOk(p).body.kind)).to.deep.equal([
      'deviceReset',
      'regionReadReply',
      'dmaUnmapReply',
      'error',
    ]);
  });

  it('end() returns the size of the message it closed', () => {
    const w = new MessageWriter();
    w.begin(9, 10, 0x10);
    w.bytes(Buffer.alloc(24));
    expect(w.end()).to.equal(40);
    expect(w.take().readUInt32LE(4)).to.equal(40);
  });

  it('abort() drops a half-written message and keeps the complete ones', () => {
    const w = new MessageWriter();
    writeMessage(w, RESET[0], RESET[1]);
    w.begin(5, 9, 1);
    w.reserve(16);
    w.bytes(Buffer.from([0xee, 0xee]));
    expect(w.length).to.equal(16);
    w.abort();
    expect(w.length).to.equal(16);
    writeMessage(w, READ[0], READ[1]);
    expect(w.take().toString('hex')).to.equal(Buffer.concat([RESET[2], READ[2]]).toString('hex'));
  });

  it('abort() with no open message changes nothing', () => {
    const w = new MessageWriter();
    writeMessage(w, RESET[0], RESET[1]);
    w.abort();
    expect(w.take().toString('hex')).to.equal(RESET[2].toString('hex'));
  });

  it('writeMessage drops the partial message when encoding throws, and the writer stays usable', () => {
    const w = new MessageWriter();
    writeMessage(w, RESET[0], RESET[1]);
    // major does not fit its u16 field: the encoder throws half way (a programmer error).
    expect(() =>
      writeMessage(
        w,
        { id: 6, command: 1, flags: 0, error: 0 },
        { kind: 'version', major: 0x10000, minor: 0, json: '{}' },
      ),
    ).to.throw(RangeError);
    expect(w.length).to.equal(16);
    writeMessage(w, UNMAP[0], UNMAP[1]);
    expect(w.take().toString('hex')).to.equal(Buffer.concat([RESET[2], UNMAP[2]]).toString('hex'));
  });

  it('grows past its initial size and keeps the bytes written before (also mid-message)', () => {
    const w = new MessageWriter(20);
    writeMessage(w, READ[0], READ[1]); // 36 bytes: grows once already
    const data = Buffer.alloc(5000);
    for (let i = 0; i < data.length; i++) data[i] = (i * 7) & 0xff;
    writeMessage(
      w,
      { id: 8, command: 10, flags: 0, error: 0 },
      { kind: 'regionWrite', offset: 0x40, region: 2, count: data.length, data },
    );
    writeMessage(w, UNMAP[0], UNMAP[1]);
    const expected = Buffer.concat([
      READ[2],
      msg(8, 10, 0, new Bytes().u64(0x40).u32(2).u32(5000).raw(data).build()),
      UNMAP[2],
    ]);
    expect(w.take().equals(expected)).to.equal(true);
  });

  it('works from an initial size of 0 (growth must not stall)', () => {
    const w = new MessageWriter(0);
    writeMessage(w, READ[0], READ[1]);
    expect(w.take().toString('hex')).to.equal(READ[2].toString('hex'));
  });

  it('take() rewinds: the next take() holds only what was written after', () => {
    const w = new MessageWriter();
    writeMessage(w, RESET[0], RESET[1]);
    writeMessage(w, READ[0], READ[1]);
    expect(w.take().length).to.equal(16 + 36);
    expect(w.length).to.equal(0);
    expect(w.take().length).to.equal(0);
    writeMessage(w, UNMAP[0], UNMAP[1]);
    expect(w.take().toString('hex')).to.equal(UNMAP[2].toString('hex'));
  });

  it('takeCopy() is not overwritten by later messages', () => {
    const w = new MessageWriter();
    writeMessage(w, READ[0], READ[1]);
    const copy = w.takeCopy();
    writeMessage(w, UNMAP[0], UNMAP[1]);
    w.take();
    expect(copy.toString('hex')).to.equal(READ[2].toString('hex'));
  });

  it('reserve() gives zeroed bytes even when the buffer memory was used before', () => {
    const w = new MessageWriter(64);
    w.begin(1, 10, 0);
    w.bytes(Buffer.alloc(40, 0xff));
    w.end();
    w.take();
    w.begin(2, 10, 0);
    const at = w.reserve(40);
    expect(at).to.equal(0);
    w.end();
    expect(w.take().subarray(16).equals(Buffer.alloc(40))).to.equal(true);
  });

  it('throws on programmer errors: begin() twice, end() without begin(), take() with a message open', () => {
    const w = new MessageWriter();
    w.begin(1, 13, 0);
    expect(() => w.begin(2, 13, 0)).to.throw(Error, /begin/);
    expect(() => w.take()).to.throw(Error, /open/);
    w.end();
    expect(() => w.end()).to.throw(Error, /no message/);
    expect(w.take().toString('hex')).to.equal(msg(1, 13, 0).toString('hex'));
  });
});

// ---- layouts ---------------------------------------------------------------

type Pinned = Readonly<Record<string, readonly [number, number] | number>>;

/** [offset, size] per field and the struct SIZE, as written in docs/vfio-user-protocol.md sections 1.2 and 2. */
const REFERENCE_LAYOUTS: Readonly<Record<string, Pinned>> = {
  vfio_user_header: { msg_id: [0, 2], command: [2, 2], msg_size: [4, 4], flags: [8, 4], error: [12, 4], SIZE: 16 },
  vfio_user_version: { major: [0, 2], minor: [2, 2], SIZE: 4 },
  vfio_user_dma_map: { argsz: [0, 4], flags: [4, 4], offset: [8, 8], addr: [16, 8], size: [24, 8], SIZE: 32 },
  vfio_user_dma_unmap: { argsz: [0, 4], flags: [4, 4], addr: [8, 8], size: [16, 8], SIZE: 24 },
  vfio_user_bitmap: { pgsize: [0, 8], size: [8, 8], SIZE: 16 },
  vfio_user_device_info: { argsz: [0, 4], flags: [4, 4], num_regions: [8, 4], num_irqs: [12, 4], SIZE: 16 },
  vfio_region_info: {
    argsz: [0, 4],
    flags: [4, 4],
    index: [8, 4],
    cap_offset: [12, 4],
    size: [16, 8],
    offset: [24, 8],
    SIZE: 32,
  },
  vfio_info_cap_header: { id: [0, 2], version: [2, 2], next: [4, 4], SIZE: 8 },
  vfio_region_info_cap_sparse_mmap: { nr_areas: [8, 4], reserved: [12, 4], SIZE: 16 },
  vfio_region_sparse_mmap_area: { offset: [0, 8], size: [8, 8], SIZE: 16 },
  vfio_region_info_cap_type: { type: [8, 4], subtype: [12, 4], SIZE: 16 },
  vfio_user_region_io_fds_request: { argsz: [0, 4], flags: [4, 4], index: [8, 4], count: [12, 4], SIZE: 16 },
  vfio_irq_info: { argsz: [0, 4], flags: [4, 4], index: [8, 4], count: [12, 4], SIZE: 16 },
  vfio_irq_set: { argsz: [0, 4], flags: [4, 4], index: [8, 4], start: [12, 4], count: [16, 4], SIZE: 20 },
  vfio_user_region_access: { offset: [0, 8], region: [8, 4], count: [12, 4], SIZE: 16 },
  vfio_user_dma_rw: { addr: [0, 8], count: [8, 8], SIZE: 16 },
  vfio_user_dirty_pages: { argsz: [0, 4], flags: [4, 4], SIZE: 8 },
  vfio_user_write_multi: { wr_cnt: [0, 8], SIZE: 8 },
  vfio_user_write_multi_data: { offset: [0, 8], region: [8, 4], count: [12, 4], data: [16, 8], SIZE: 24 },
  vfio_user_device_feature: { argsz: [0, 4], flags: [4, 4], SIZE: 8 },
  vfio_user_mig_data: { argsz: [0, 4], size: [4, 4], SIZE: 8 },
};

function isField(v: unknown): v is Field {
  return typeof v === 'object' && v !== null && 'off' in v && 'size' in v;
}

/** The layout tables exported by protocol/layouts.ts, by name. */
function exportedTables(): Map<string, Readonly<Record<string, unknown>>> {
  const out = new Map<string, Readonly<Record<string, unknown>>>();
  for (const [name, value] of Object.entries(layouts)) {
    if (typeof value === 'object' && value !== null && 'SIZE' in value)
      out.set(name, value as Readonly<Record<string, unknown>>);
  }
  return out;
}

describe('protocol layouts: tables pinned to docs/vfio-user-protocol.md', () => {
  const tables = exportedTables();

  it('every exported layout table is pinned here, and every pinned one exists', () => {
    expect([...tables.keys()].sort()).to.deep.equal(Object.keys(REFERENCE_LAYOUTS).sort());
  });

  for (const [name, pinned] of Object.entries(REFERENCE_LAYOUTS)) {
    it(`${name}: offsets, sizes and SIZE match docs/vfio-user-protocol.md`, () => {
      const table = tables.get(name);
      if (!table) throw new Error(`layouts.ts has no ${name}`);
      const actual: Record<string, readonly [number, number] | number> = {};
      for (const [key, value] of Object.entries(table)) {
        if (key === 'SIZE') actual[key] = value as number;
        else if (isField(value)) actual[key] = [value.off, value.size];
        else throw new Error(`${name}.${key} is neither a field nor SIZE`);
      }
      expect(actual).to.deep.equal(pinned);
    });

    it(`${name}: fields lie inside SIZE and do not overlap`, () => {
      const size = pinned['SIZE'];
      if (typeof size !== 'number') throw new Error('SIZE missing');
      const spans = Object.entries(pinned)
        .filter((e): e is [string, readonly [number, number]] => typeof e[1] !== 'number')
        .map(([, span]) => span)
        .sort((a, b) => a[0] - b[0]);
      let end = 0;
      for (const [off, len] of spans) {
        expect(off, `${name} field at ${off}`).to.be.at.least(end);
        end = off + len;
      }
      expect(end).to.be.at.most(size);
    });
  }
});

describe('protocol layouts: getField / setField', () => {
  const U64: Field = { off: 0, size: 8, order: 'le' };

  it('u64 2^53-1 round-trips and has the expected little-endian bytes', () => {
    const buf = Buffer.alloc(12, 0xaa);
    setField(buf, 2, U64, SAFE_MAX);
    expect(buf.toString('hex')).to.equal('aaaa' + 'ffffffffffff1f00' + 'aaaa');
    expect(getField(buf, 2, U64)).to.equal(SAFE_MAX);
  });

  it('u64 above 2^53-1 reads as U64_UNSAFE', () => {
    expect(U64_UNSAFE).to.equal(-1);
    for (const v of [2n ** 53n, 2n ** 53n + 1n, 2n ** 63n, 0xffffffffffffffffn]) {
      const buf = Buffer.alloc(8);
      buf.writeBigUInt64LE(v);
      expect(getField(buf, 0, U64), v.toString()).to.equal(U64_UNSAFE);
    }
  });

  it('u64 values with a high word read exactly', () => {
    const buf = new Bytes().u64(0x1_2345_6789n).build();
    expect(getField(buf, 0, U64)).to.equal(0x1_2345_6789);
    const out = Buffer.alloc(8);
    setField(out, 0, U64, 0x1_2345_6789);
    expect(out.toString('hex')).to.equal('8967452301000000');
  });

  it('u8/u16/u32 fields read and write little-endian at base + offset', () => {
    const buf = Buffer.alloc(16);
    setField(buf, 4, { off: 0, size: 1, order: 'le' }, 0xab);
    setField(buf, 4, { off: 2, size: 2, order: 'le' }, 0xbeef);
    setField(buf, 4, { off: 4, size: 4, order: 'le' }, 0xffffffff);
    expect(buf.toString('hex')).to.equal('00000000' + 'ab00efbe' + 'ffffffff' + '00000000');
    expect(getField(buf, 4, { off: 0, size: 1, order: 'le' })).to.equal(0xab);
    expect(getField(buf, 4, { off: 2, size: 2, order: 'le' })).to.equal(0xbeef);
    expect(getField(buf, 4, { off: 4, size: 4, order: 'le' })).to.equal(0xffffffff);
  });
});
