// Every vfio-user command and reply, checked byte for byte against bytes built
// from docs/vfio-user-protocol.md (sections 1, 2 and 4) with the test-only builder
// (the table: ./codec-cases.ts), then decoded back to the expected typed body.
// What the decoder refuses: ./codec-bad-input.spec.ts.
import { expect } from 'chai';
import { encodeMessage, parseCapabilities, peerLimits } from '../../protocol';
import { Bytes, msg } from '../support/bytes';
import { decodeOk } from './codec-helpers';
import { QEMU_VERSION_JSON, regionAccess } from './codec-payloads';
import { CASES } from './codec-cases';

describe('protocol codec: every command, byte for byte', () => {
  it('covers every command number 1..18 (14 in its legacy layout), as request and as reply', () => {
    const seen = new Set(CASES.map((c) => `${c.header.command}/${c.header.flags & 0xf}`));
    for (let cmd = 1; cmd <= 18; cmd++) {
      expect(seen.has(`${cmd}/0`), `request of command ${cmd}`).to.equal(true);
      expect(seen.has(`${cmd}/1`), `reply of command ${cmd}`).to.equal(true);
    }
  });

  for (const c of CASES) {
    describe(c.name, () => {
      it('encodes to the reference bytes', () => {
        const out = encodeMessage(c.header, c.body);
        expect(out.toString('hex')).to.equal(c.bytes.toString('hex'));
      });

      it('decodes to the expected header and body', () => {
        const m = decodeOk(c.bytes);
        expect(m.header).to.deep.equal({ ...c.header, size: c.bytes.length });
        expect(m.body).to.deep.equal(c.body);
      });
    });
  }

  it('has the message sizes docs/vfio-user-protocol.md gives for fixed messages', () => {
    const size = (name: string): number => {
      const c = CASES.find((x) => x.name.startsWith(name));
      if (!c) throw new Error(`no case ${name}`);
      return c.bytes.readUInt32LE(4);
    };
    expect(size('VERSION request as QEMU sends it')).to.equal(214);
    expect(size('DMA_MAP request (')).to.equal(48);
    expect(size('DMA_UNMAP reply (')).to.equal(40);
    expect(size('DEVICE_GET_INFO reply')).to.equal(32);
    expect(size('DEVICE_GET_REGION_INFO request (')).to.equal(48);
    expect(size('DEVICE_GET_REGION_INFO reply without caps')).to.equal(48);
    expect(size('DEVICE_GET_REGION_INFO reply with a SPARSE_MMAP')).to.equal(16 + 80);
    expect(size('DEVICE_GET_IRQ_INFO request')).to.equal(32);
    expect(size('DEVICE_SET_IRQS request, TRIGGER|EVENTFD')).to.equal(36);
    expect(size('REGION_READ request')).to.equal(32);
    expect(size('REGION_WRITE_MULTI request')).to.equal(24 + 24 * 2);
    expect(size('DEVICE_RESET reply')).to.equal(16);
  });

  it('hands out data as views of the message, not copies', () => {
    const bytes = msg(1, 10, 0, regionAccess(0, 0, 2, [0xaa, 0xbb]));
    const m = decodeOk(bytes);
    if (m.body.kind !== 'regionWrite') throw new Error(m.body.kind);
    bytes[16 + 16] = 0x55;
    expect(m.body.data[0]).to.equal(0x55);
  });
});

describe('protocol codec: QEMU VERSION request', () => {
  const bytes = msg(0, 1, 0, new Bytes().u16(0).u16(0).text(QEMU_VERSION_JSON).u8(0).build());

  it('ends in a NUL and is 214 bytes long, as recorded', () => {
    expect(bytes.length).to.equal(214);
    expect(bytes[bytes.length - 1]).to.equal(0);
  });

  it('gives capabilities that parse to exactly what QEMU advertises', () => {
    const m = decodeOk(bytes);
    if (m.body.kind !== 'version') throw new Error(m.body.kind);
    const caps = parseCapabilities(m.body.json);
    if (!caps.ok) throw new Error(caps.error.detail);
    expect(caps.value).to.deep.equal({
      pgsizes: 4096,
      max_msg_fds: 16,
      max_dma_maps: 65535,
      max_data_xfer_size: 1048576,
      migration: { max_bitmap_size: 268435456, pgsize: 4096 },
      write_multiple: true,
    });
    expect(peerLimits(caps.value)).to.deep.equal({
      maxMsgFds: 16,
      maxDataXferSize: 1048576,
      maxDmaMaps: 65535,
      pgsizes: 4096,
      twinSocket: false,
      writeMultiple: true,
    });
  });
});
