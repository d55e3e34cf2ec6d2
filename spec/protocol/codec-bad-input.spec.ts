// What the vfio-user decoder refuses, each with its stable code and errno:
// short payloads, mismatched data, u64 fields past 2^53-1, bad JSON, unknown
// commands, broken capability chains, REGION_WRITE_MULTI and header limits.

import { expect } from 'chai';
import { checkHeader, decodeHeader, decodeMessage, MAX_MSG_SIZE } from '../../protocol';
import { Bytes, msg } from '../support/bytes';
import {
  CMD,
  decodeErr,
  decodeOk,
  EINVAL,
  FLAG_COMMAND,
  FLAG_ERROR_REPLY,
  FLAG_NO_REPLY,
  FLAG_REPLY,
  SAFE_MAX,
  SAFE_MAX_PLUS_1,
  U64_MAX,
} from './codec-helpers';
import {
  dmaAccess,
  dmaMapPayload,
  dmaUnmapPayload,
  multiEntry,
  QEMU_VERSION_JSON,
  regionAccess,
  regionInfo,
  SPARSE_AREAS,
  sparseCap,
  typeCap,
} from './codec-payloads';

function expectError(bytes: Buffer, code: string, errno = EINVAL): void {
  const e = decodeErr(bytes);
  expect(e.code, e.detail).to.equal(code);
  expect(e.errno).to.equal(errno);
  expect(e.detail).to.be.a('string').and.not.equal('');
}

describe('protocol codec: bad input', () => {
  describe('payload shorter than the command struct', () => {
    // [command, flags, struct size] from reference section 2.
    const structs: ReadonlyArray<readonly [string, number, number, number]> = [
      ['VERSION', CMD.VERSION, FLAG_COMMAND, 4],
      ['VERSION reply', CMD.VERSION, FLAG_REPLY, 4],
      ['DMA_MAP', CMD.DMA_MAP, FLAG_COMMAND, 32],
      ['DMA_UNMAP', CMD.DMA_UNMAP, FLAG_COMMAND, 24],
      ['DMA_UNMAP reply', CMD.DMA_UNMAP, FLAG_REPLY, 24],
      ['DEVICE_GET_INFO', CMD.DEVICE_GET_INFO, FLAG_COMMAND, 16],
      ['DEVICE_GET_INFO reply', CMD.DEVICE_GET_INFO, FLAG_REPLY, 16],
      ['DEVICE_GET_REGION_INFO', CMD.DEVICE_GET_REGION_INFO, FLAG_COMMAND, 32],
      ['DEVICE_GET_REGION_INFO reply', CMD.DEVICE_GET_REGION_INFO, FLAG_REPLY, 32],
      ['DEVICE_GET_REGION_IO_FDS', CMD.DEVICE_GET_REGION_IO_FDS, FLAG_COMMAND, 16],
      ['DEVICE_GET_REGION_IO_FDS reply', CMD.DEVICE_GET_REGION_IO_FDS, FLAG_REPLY, 16],
      ['DEVICE_GET_IRQ_INFO', CMD.DEVICE_GET_IRQ_INFO, FLAG_COMMAND, 16],
      ['DEVICE_GET_IRQ_INFO reply', CMD.DEVICE_GET_IRQ_INFO, FLAG_REPLY, 16],
      ['DEVICE_SET_IRQS', CMD.DEVICE_SET_IRQS, FLAG_COMMAND, 20],
      ['REGION_READ', CMD.REGION_READ, FLAG_COMMAND, 16],
      ['REGION_READ reply', CMD.REGION_READ, FLAG_REPLY, 16],
      ['REGION_WRITE', CMD.REGION_WRITE, FLAG_COMMAND, 16],
      ['REGION_WRITE reply', CMD.REGION_WRITE, FLAG_REPLY, 16],
      ['DMA_READ', CMD.DMA_READ, FLAG_COMMAND, 16],
      ['DMA_READ reply', CMD.DMA_READ, FLAG_REPLY, 16],
      ['DMA_WRITE', CMD.DMA_WRITE, FLAG_COMMAND, 16],
      ['DMA_WRITE reply', CMD.DMA_WRITE, FLAG_REPLY, 16],
      ['REGION_WRITE_MULTI', CMD.REGION_WRITE_MULTI, FLAG_COMMAND, 8],
      ['REGION_WRITE_MULTI reply', CMD.REGION_WRITE_MULTI, FLAG_REPLY, 8],
      ['DEVICE_FEATURE', CMD.DEVICE_FEATURE, FLAG_COMMAND, 8],
      ['DEVICE_FEATURE reply', CMD.DEVICE_FEATURE, FLAG_REPLY, 8],
      ['MIG_DATA_READ', CMD.MIG_DATA_READ, FLAG_COMMAND, 8],
      ['MIG_DATA_READ reply', CMD.MIG_DATA_READ, FLAG_REPLY, 8],
      ['MIG_DATA_WRITE', CMD.MIG_DATA_WRITE, FLAG_COMMAND, 8],
    ];
    for (const [name, cmd, flags, size] of structs) {
      it(`${name}: header only and ${size - 1} bytes give SHORT_PAYLOAD; ${size} bytes decode`, () => {
        expectError(msg(1, cmd, flags), 'SHORT_PAYLOAD');
        expectError(msg(1, cmd, flags, Buffer.alloc(size - 1)), 'SHORT_PAYLOAD');
        // The exact struct size is accepted (zero counts, so no data is expected).
        expect(decodeMessage(msg(1, cmd, flags, Buffer.alloc(size))).ok, `${name} with ${size} bytes`).to.equal(true);
      });
    }
  });

  it('replies that must be header only refuse a payload (DMA_MAP, SET_IRQS, DEVICE_RESET, MIG_DATA_WRITE)', () => {
    for (const cmd of [CMD.DMA_MAP, CMD.DEVICE_SET_IRQS, CMD.DEVICE_RESET, CMD.MIG_DATA_WRITE]) {
      expectError(msg(1, cmd, FLAG_REPLY, Buffer.alloc(1)), 'PAYLOAD_MISMATCH');
    }
  });

  it('REGION_WRITE whose count differs from the data length gives PAYLOAD_MISMATCH', () => {
    expectError(msg(1, 10, 0, regionAccess(0, 0, 4, [1, 2, 3])), 'PAYLOAD_MISMATCH');
    expectError(msg(1, 10, 0, regionAccess(0, 0, 4, [1, 2, 3, 4, 5])), 'PAYLOAD_MISMATCH');
    expectError(msg(1, 10, 0, regionAccess(0, 0, 0, [1])), 'PAYLOAD_MISMATCH');
    expect(decodeOk(msg(1, 10, 0, regionAccess(0, 0, 4, [1, 2, 3, 4]))).body.kind).to.equal('regionWrite');
  });

  it('REGION_READ reply and DMA_WRITE/DMA_READ reply data must match count', () => {
    expectError(msg(1, 9, FLAG_REPLY, regionAccess(0, 7, 4, [1, 2])), 'PAYLOAD_MISMATCH');
    expectError(msg(1, 12, 0, dmaAccess(0x1000, 4, [1, 2, 3])), 'PAYLOAD_MISMATCH');
    expectError(msg(1, 11, FLAG_REPLY, dmaAccess(0x1000, 2, [1, 2, 3])), 'PAYLOAD_MISMATCH');
  });

  it('REGION_READ/REGION_WRITE at offset 0xFFFFFFFFFFFFFFFF give U64_RANGE', () => {
    expectError(msg(1, 9, 0, regionAccess(U64_MAX, 0, 4)), 'U64_RANGE');
    expectError(msg(1, 10, 0, regionAccess(U64_MAX, 0, 1, [0])), 'U64_RANGE');
    expectError(msg(1, 9, FLAG_REPLY, regionAccess(U64_MAX, 0, 1, [0])), 'U64_RANGE');
    expectError(msg(1, 10, FLAG_REPLY, regionAccess(U64_MAX, 0, 1)), 'U64_RANGE');
  });

  it('REGION offsets: 2^53 is refused, 2^53-1 decodes exactly', () => {
    expectError(msg(1, 9, 0, regionAccess(SAFE_MAX_PLUS_1, 0, 4)), 'U64_RANGE');
    const m = decodeOk(msg(1, 9, 0, regionAccess(SAFE_MAX, 0, 4)));
    expect(m.body).to.deep.equal({ kind: 'regionRead', offset: SAFE_MAX, region: 0, count: 4 });
  });

  describe('DMA_MAP u64 fields above 2^53-1 give U64_RANGE', () => {
    const fields: ReadonlyArray<readonly [string, (v: bigint) => Buffer]> = [
      ['offset', (v) => dmaMapPayload(32, 3, v, 0, 0x1000)],
      ['address', (v) => dmaMapPayload(32, 3, 0, v, 0x1000)],
      ['size', (v) => dmaMapPayload(32, 3, 0, 0, v)],
    ];
    for (const [field, build] of fields) {
      it(`${field}: 2^53 and 2^64-1 are refused`, () => {
        expectError(msg(1, 2, 0, build(SAFE_MAX_PLUS_1)), 'U64_RANGE');
        expectError(msg(1, 2, 0, build(U64_MAX)), 'U64_RANGE');
        const e = decodeErr(msg(1, 2, 0, build(U64_MAX)));
        expect(e.detail).to.contain(field);
      });
    }
  });

  it('DMA_UNMAP, DMA_READ and the sparse-mmap areas refuse u64 values above 2^53-1 too', () => {
    expectError(msg(1, 3, 0, dmaUnmapPayload(24, 0, U64_MAX, 0x1000).build()), 'U64_RANGE');
    expectError(msg(1, 11, 0, dmaAccess(0, U64_MAX)), 'U64_RANGE');
    const reply = sparseCap(regionInfo(64, 0xf, 1, 32, 0x1000, 0), 0, [[0, 0]]).build();
    reply.writeBigUInt64LE(U64_MAX, 32 + 16 + 8); // area 0 size
    expectError(msg(1, 5, FLAG_REPLY, reply), 'U64_RANGE');
    expectError(msg(1, 5, FLAG_REPLY, regionInfo(32, 0, 0, 0, U64_MAX, 0).build()), 'U64_RANGE');
  });

  it('DMA_UNMAP with bytes after the struct and no bitmap flag gives PAYLOAD_MISMATCH', () => {
    expectError(msg(1, 3, 0, dmaUnmapPayload(24, 0, 0x1000, 0x1000).u32(0).build()), 'PAYLOAD_MISMATCH');
  });

  it('MIG_DATA_WRITE and MIG_DATA_READ reply with fewer data bytes than size give PAYLOAD_MISMATCH', () => {
    expectError(msg(1, 18, 0, new Bytes().u32(12).u32(4).raw([1, 2, 3]).build()), 'PAYLOAD_MISMATCH');
    expectError(msg(1, 17, FLAG_REPLY, new Bytes().u32(16).u32(8).raw([1, 2, 3]).build()), 'PAYLOAD_MISMATCH');
  });

  it('VERSION JSON without its NUL gives BAD_JSON', () => {
    expectError(msg(1, 1, 0, new Bytes().u16(0).u16(0).text('{}').build()), 'BAD_JSON');
    expectError(msg(1, 1, FLAG_REPLY, new Bytes().u16(0).u16(0).text(QEMU_VERSION_JSON).build()), 'BAD_JSON');
  });

  it('VERSION JSON with a NUL inside gives BAD_JSON', () => {
    expectError(msg(1, 1, 0, new Bytes().u16(0).u16(0).text('{"a"').u8(0).text(':1}').u8(0).build()), 'BAD_JSON');
    expectError(msg(1, 1, 0, new Bytes().u16(0).u16(0).u8(0).u8(0).build()), 'BAD_JSON');
  });

  it('unknown commands 999, 0 and 19 give UNKNOWN_COMMAND, as command and as reply', () => {
    for (const cmd of [999, 0, 19]) {
      expectError(msg(1, cmd, FLAG_COMMAND, Buffer.alloc(16)), 'UNKNOWN_COMMAND');
      expectError(msg(1, cmd, FLAG_REPLY, Buffer.alloc(16)), 'UNKNOWN_COMMAND');
    }
  });

  it('an error reply carrying a body gives ERROR_WITH_BODY', () => {
    expectError(msg(1, 9, FLAG_ERROR_REPLY, Buffer.alloc(1), 22), 'ERROR_WITH_BODY');
    expectError(msg(1, 9, FLAG_ERROR_REPLY, regionAccess(0, 7, 0), 22), 'ERROR_WITH_BODY');
  });

  describe('region-info capability chain', () => {
    it('a cap whose next points to itself (a loop) gives BAD_CAP_CHAIN', () => {
      expectError(
        msg(1, 5, FLAG_REPLY, sparseCap(regionInfo(80, 0xf, 1, 32, 0x3000, 0), 32, SPARSE_AREAS).build()),
        'BAD_CAP_CHAIN',
      );
    });

    it('a second cap that points back to the first gives BAD_CAP_CHAIN', () => {
      const p = typeCap(sparseCap(regionInfo(96, 0xf, 1, 32, 0x3000, 0), 80, SPARSE_AREAS), 32, 1, 1).build();
      expectError(msg(1, 5, FLAG_REPLY, p), 'BAD_CAP_CHAIN');
    });

    it('cap_offset past the end of the payload gives BAD_CAP_CHAIN', () => {
      const p = sparseCap(regionInfo(80, 0xf, 1, 200, 0x3000, 0), 0, SPARSE_AREAS).build();
      expectError(msg(1, 5, FLAG_REPLY, p), 'BAD_CAP_CHAIN');
    });

    it('CAPS set with cap_offset 32 but no bytes after the struct gives BAD_CAP_CHAIN', () => {
      expectError(msg(1, 5, FLAG_REPLY, regionInfo(80, 0xf, 1, 32, 0x3000, 0).build()), 'BAD_CAP_CHAIN');
    });

    it('cap_offset inside the 32-byte struct gives BAD_CAP_CHAIN', () => {
      const p = sparseCap(regionInfo(80, 0xf, 1, 8, 0x3000, 0), 0, SPARSE_AREAS).build();
      expectError(msg(1, 5, FLAG_REPLY, p), 'BAD_CAP_CHAIN');
      // At 24 the struct's zero `offset` field would read as a well-formed cap header (id 0, next 0).
      const q = sparseCap(regionInfo(80, 0xf, 1, 24, 0x3000, 0), 0, SPARSE_AREAS).build();
      expectError(msg(1, 5, FLAG_REPLY, q), 'BAD_CAP_CHAIN');
    });

    it('a next that points past the end of the payload gives BAD_CAP_CHAIN', () => {
      const p = sparseCap(regionInfo(80, 0xf, 1, 32, 0x3000, 0), 4096, SPARSE_AREAS).build();
      expectError(msg(1, 5, FLAG_REPLY, p), 'BAD_CAP_CHAIN');
    });

    it('a cap header cut short by the end of the payload gives BAD_CAP_CHAIN', () => {
      const p = regionInfo(36, 0xf, 1, 32, 0x3000, 0).u16(1).u16(1).build();
      expectError(msg(1, 5, FLAG_REPLY, p), 'BAD_CAP_CHAIN');
    });

    it('a sparse cap claiming more areas than fit gives BAD_CAP_CHAIN', () => {
      const three = sparseCap(regionInfo(80, 0xf, 1, 32, 0x3000, 0), 0, SPARSE_AREAS, 3).build();
      expectError(msg(1, 5, FLAG_REPLY, three), 'BAD_CAP_CHAIN');
      const huge = sparseCap(regionInfo(80, 0xf, 1, 32, 0x3000, 0), 0, SPARSE_AREAS, 0xffffffff).build();
      expectError(msg(1, 5, FLAG_REPLY, huge), 'BAD_CAP_CHAIN');
      // Areas that fit in the chain slot but not before the next cap also count.
      const chained = typeCap(sparseCap(regionInfo(96, 0xf, 1, 32, 0x3000, 0), 80, SPARSE_AREAS, 3), 0, 1, 1).build();
      expectError(msg(1, 5, FLAG_REPLY, chained), 'BAD_CAP_CHAIN');
    });

    it('a sparse cap shorter than its 16-byte fixed part gives BAD_CAP_CHAIN', () => {
      const p = regionInfo(44, 0xf, 1, 32, 0x3000, 0).u16(1).u16(1).u32(0).u32(0).build();
      expectError(msg(1, 5, FLAG_REPLY, p), 'BAD_CAP_CHAIN');
    });
  });

  describe('REGION_WRITE_MULTI', () => {
    const two = (wrCnt: number | bigint): Buffer =>
      multiEntry(
        multiEntry(new Bytes().u64(wrCnt), 0, 0, 4, [1, 2, 3, 4, 0, 0, 0, 0]),
        8,
        0,
        4,
        [5, 6, 7, 8, 0, 0, 0, 0],
      ).build();

    it('wr_cnt that does not match the entries gives PAYLOAD_MISMATCH', () => {
      expectError(msg(1, 15, FLAG_NO_REPLY, two(3)), 'PAYLOAD_MISMATCH');
      expectError(msg(1, 15, FLAG_NO_REPLY, two(1)), 'PAYLOAD_MISMATCH');
      expectError(msg(1, 15, FLAG_NO_REPLY, two(0)), 'PAYLOAD_MISMATCH');
      expect(decodeOk(msg(1, 15, FLAG_NO_REPLY, two(2))).body.kind).to.equal('regionWriteMulti');
    });

    it('an entry whose count is above 8 gives COUNT_TOO_LARGE', () => {
      const p = multiEntry(new Bytes().u64(1), 0, 0, 9, [1, 2, 3, 4, 5, 6, 7, 8]).build();
      expectError(msg(1, 15, FLAG_NO_REPLY, p), 'COUNT_TOO_LARGE');
      const ok8 = multiEntry(new Bytes().u64(1), 0, 0, 8, [1, 2, 3, 4, 5, 6, 7, 8]).build();
      expect(decodeMessage(msg(1, 15, FLAG_NO_REPLY, ok8)).ok).to.equal(true);
    });

    it('a huge wr_cnt gives COUNT_TOO_LARGE before any entry is read', () => {
      expectError(msg(1, 15, FLAG_NO_REPLY, two(U64_MAX)), 'COUNT_TOO_LARGE');
      expectError(msg(1, 15, FLAG_NO_REPLY, two(0x1_0000_0000)), 'COUNT_TOO_LARGE');
    });

    it('an entry offset above 2^53-1 gives U64_RANGE', () => {
      const p = new Bytes().u64(1).u64(U64_MAX).u32(0).u32(1).zeros(8).build();
      expectError(msg(1, 15, FLAG_NO_REPLY, p), 'U64_RANGE');
    });
  });

  describe('header limits (checkHeader / decodeMessage)', () => {
    const hdr = (size: number): Buffer => new Bytes().u16(1).u16(9).u32(size).u32(0).u32(0).build();

    it('msg_size below 16 gives HEADER_TOO_SMALL', () => {
      for (const size of [0, 1, 15]) {
        const e = checkHeader(decodeHeader(hdr(size)), MAX_MSG_SIZE);
        expect(e, `msg_size ${size}`).to.not.equal(null);
        expect(e?.code).to.equal('HEADER_TOO_SMALL');
        expect(e?.errno).to.equal(EINVAL);
      }
    });

    it('msg_size above the limit gives MESSAGE_TOO_LARGE', () => {
      expect(MAX_MSG_SIZE).to.equal((1 << 20) + 32);
      for (const [size, limit] of [
        [MAX_MSG_SIZE + 1, MAX_MSG_SIZE],
        [0xffffffff, MAX_MSG_SIZE],
        [49, 48],
      ] as const) {
        const e = checkHeader(decodeHeader(hdr(size)), limit);
        expect(e?.code, `msg_size ${size} limit ${limit}`).to.equal('MESSAGE_TOO_LARGE');
        expect(e?.errno).to.equal(EINVAL);
      }
    });

    it('msg_size 16 and exactly the limit pass', () => {
      expect(checkHeader(decodeHeader(hdr(16)), MAX_MSG_SIZE)).to.equal(null);
      expect(checkHeader(decodeHeader(hdr(MAX_MSG_SIZE)), MAX_MSG_SIZE)).to.equal(null);
    });

    it('decodeHeader reads the fields at the reference offsets (header at a non-zero offset)', () => {
      const buf = Buffer.concat([
        Buffer.alloc(3),
        Buffer.from('3412' + '0a00' + '28000000' + '10000000' + '5f000000', 'hex'),
      ]);
      expect(decodeHeader(buf, 3)).to.deep.equal({ id: 0x1234, command: 10, size: 40, flags: 0x10, error: 95 });
    });

    it('decodeMessage refuses fewer than 16 bytes and a msg_size that disagrees with the buffer', () => {
      expectError(Buffer.alloc(15), 'HEADER_TOO_SMALL');
      const m = msg(1, 13, 0);
      m.writeUInt32LE(17, 4);
      expectError(m, 'PAYLOAD_MISMATCH');
      expectError(Buffer.concat([msg(1, 13, 0), Buffer.alloc(1)]), 'PAYLOAD_MISMATCH');
    });
  });
});
