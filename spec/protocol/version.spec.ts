// VERSION negotiation: the capabilities JSON (docs/vfio-user-protocol.md 2.1, 3.3, 4.1) and the
// libvfio-user negotiation conditions of its section 5.
import { expect } from 'chai';
import {
  checkVersionReply,
  DEFAULT_PEER_CAPABILITIES,
  DMA_PAGE_SIZE,
  MAX_DATA_XFER_SIZE,
  MAX_DMA_REGIONS,
  MAX_FDS_PER_MSG,
  MAX_VERSION_JSON,
  parseCapabilities,
  peerLimits,
  serverCapabilitiesJson,
} from '../../protocol';
import type { Capabilities, ProtocolError } from '../../protocol';
import { EINVAL } from './codec-helpers';

const QEMU_VERSION_JSON =
  '{"capabilities": {"pgsizes": 4096, "max_msg_fds": 16, "max_dma_maps": 65535, "max_data_xfer_size": 1048576, ' +
  '"migration": {"max_bitmap_size": 268435456, "pgsize": 4096}, "write_multiple": true}}';

function capsOk(json: string | undefined): Capabilities {
  const r = parseCapabilities(json);
  if (!r.ok) throw new Error(`expected ${JSON.stringify(json)} to parse, got ${r.error.code}: ${r.error.detail}`);
  return r.value;
}

function capsErr(json: string): ProtocolError {
  const r = parseCapabilities(json);
  if (r.ok) throw new Error(`expected ${JSON.stringify(json)} to be refused, got ${JSON.stringify(r.value)}`);
  return r.error;
}

describe('protocol version: parseCapabilities', () => {
  it('no JSON gives {} and the spec defaults', () => {
    const caps = capsOk(undefined);
    expect(caps).to.deep.equal({});
    expect(peerLimits(caps)).to.deep.equal({
      maxMsgFds: 1,
      maxDataXferSize: 1048576,
      maxDmaMaps: 65535,
      pgsizes: 4096,
      twinSocket: false,
      writeMultiple: false,
    });
    expect(DEFAULT_PEER_CAPABILITIES).to.deep.equal({
      max_msg_fds: 1,
      max_data_xfer_size: 1048576,
      max_dma_maps: 65535,
      pgsizes: 4096,
    });
  });

  it("'{}' gives {}", () => {
    expect(capsOk('{}')).to.deep.equal({});
    expect(capsOk('{"capabilities": {}}')).to.deep.equal({});
  });

  it('the full QEMU JSON gives every capability, typed', () => {
    expect(capsOk(QEMU_VERSION_JSON)).to.deep.equal({
      pgsizes: 4096,
      max_msg_fds: 16,
      max_dma_maps: 65535,
      max_data_xfer_size: 1048576,
      migration: { max_bitmap_size: 268435456, pgsize: 4096 },
      write_multiple: true,
    });
  });

  it('the libvfio-user client JSON (max_msg_fds 32, max_data_xfer_size 1024) gives those limits', () => {
    const limits = peerLimits(capsOk('{"capabilities":{"max_msg_fds":32,"max_data_xfer_size":1024}}'));
    expect(limits.maxMsgFds).to.equal(32);
    expect(limits.maxDataXferSize).to.equal(1024);
  });

  describe('refused JSON (vfio-user-protocol.md 5, Negotiation)', () => {
    const bad: ReadonlyArray<readonly [string, string, string]> = [
      ['malformed JSON `{`', '{', 'BAD_JSON'],
      ['malformed JSON `"`', '"', 'BAD_JSON'],
      ['an empty text', '', 'BAD_JSON'],
      ['capabilities a number', '{"capabilities": 5}', 'BAD_CAPABILITIES'],
      ['capabilities a string', '{"capabilities": "max_msg_fds"}', 'BAD_CAPABILITIES'],
      ['capabilities an array', '{"capabilities": []}', 'BAD_CAPABILITIES'],
      ['capabilities null', '{"capabilities": null}', 'BAD_CAPABILITIES'],
      ['top level an array', '[]', 'BAD_CAPABILITIES'],
      ['top level a number', '42', 'BAD_CAPABILITIES'],
      ['top level null', 'null', 'BAD_CAPABILITIES'],
      ['max_msg_fds a string', '{"capabilities": {"max_msg_fds": "8"}}', 'BAD_CAPABILITIES'],
      ['max_msg_fds -1', '{"capabilities": {"max_msg_fds": -1}}', 'BAD_CAPABILITIES'],
      ['max_msg_fds 1025', '{"capabilities": {"max_msg_fds": 1025}}', 'BAD_CAPABILITIES'],
      ['max_msg_fds not an integer', '{"capabilities": {"max_msg_fds": 1.5}}', 'BAD_CAPABILITIES'],
      ['max_data_xfer_size a string', '{"capabilities": {"max_data_xfer_size": "1048576"}}', 'BAD_CAPABILITIES'],
      ['migration not an object', '{"capabilities": {"migration": 4096}}', 'BAD_CAPABILITIES'],
      ['migration a string', '{"capabilities": {"migration": "yes"}}', 'BAD_CAPABILITIES'],
      ['pgsize a string', '{"capabilities": {"migration": {"pgsize": "4096"}}}', 'BAD_CAPABILITIES'],
      ['twin_socket.supported not a bool', '{"capabilities": {"twin_socket": {"supported": 1}}}', 'BAD_CAPABILITIES'],
      ['write_multiple not a bool', '{"capabilities": {"write_multiple": "true"}}', 'BAD_CAPABILITIES'],
    ];
    for (const [name, json, code] of bad) {
      it(`${name} gives ${code} (EINVAL)`, () => {
        const e = capsErr(json);
        expect(e.code).to.equal(code);
        expect(e.errno).to.equal(EINVAL);
      });
    }

    it('JSON longer than MAX_VERSION_JSON gives BAD_JSON', () => {
      const pad = 'x'.repeat(MAX_VERSION_JSON);
      expect(capsErr(`{"capabilities": {}, "pad": "${pad}"}`).code).to.equal('BAD_JSON');
    });
  });

  it('max_msg_fds at the edges 0 and 1024 is accepted', () => {
    expect(capsOk('{"capabilities": {"max_msg_fds": 0}}').max_msg_fds).to.equal(0);
    expect(capsOk('{"capabilities": {"max_msg_fds": 1024}}').max_msg_fds).to.equal(1024);
  });

  it('unknown keys pass, at the top level, in capabilities and in migration', () => {
    const caps = capsOk(
      '{"capabilities": {"max_msg_fds": 8, "future_cap": {"x": 1}, "migration": {"pgsize": 4096, "extra": true}}, "other": [1]}',
    );
    expect(caps.max_msg_fds).to.equal(8);
    expect(caps.migration?.pgsize).to.equal(4096);
    expect(peerLimits(caps).maxMsgFds).to.equal(8);
  });

  it('twin_socket supported=true shows in peerLimits', () => {
    expect(peerLimits(capsOk('{"capabilities": {"twin_socket": {"supported": true}}}')).twinSocket).to.equal(true);
    expect(peerLimits(capsOk('{"capabilities": {"twin_socket": {"supported": false}}}')).twinSocket).to.equal(false);
  });
});

describe('protocol version: serverCapabilitiesJson', () => {
  const json = serverCapabilitiesJson({
    maxMsgFds: MAX_FDS_PER_MSG,
    maxDataXferSize: MAX_DATA_XFER_SIZE,
    maxDmaMaps: MAX_DMA_REGIONS,
    pgsizes: DMA_PAGE_SIZE,
  });

  it("is short: under 150 bytes, so the reply fits QEMU's 214-byte VERSION buffer", () => {
    expect(Buffer.byteLength(json, 'utf8')).to.be.below(150);
    expect(16 + 4 + Buffer.byteLength(json, 'utf8') + 1).to.be.at.most(214);
  });

  it('parses back to the values given, with nothing else', () => {
    expect(capsOk(json)).to.deep.equal({
      max_msg_fds: MAX_FDS_PER_MSG,
      max_data_xfer_size: MAX_DATA_XFER_SIZE,
      max_dma_maps: MAX_DMA_REGIONS,
      pgsizes: DMA_PAGE_SIZE,
    });
    expect(
      capsOk(serverCapabilitiesJson({ maxMsgFds: 8, maxDataXferSize: 4096, maxDmaMaps: 1, pgsizes: 8192 })),
    ).to.deep.equal({
      max_msg_fds: 8,
      max_data_xfer_size: 4096,
      max_dma_maps: 1,
      pgsizes: 8192,
    });
  });

  it("meets QEMU's acceptance rules (vfio-user-protocol.md 3.3) and never advertises twin_socket (samples/client.c would crash)", () => {
    const caps = capsOk(json);
    expect(caps.max_msg_fds).to.be.at.most(16);
    expect(caps.max_data_xfer_size).to.be.within(4096, 64 << 20);
    expect((caps.pgsizes ?? 0) & 0xfff).to.equal(0);
    expect(caps.max_dma_maps).to.be.at.most(65535);
    expect(caps).to.not.have.property('twin_socket');
    expect(json).to.not.contain('\u0000');
  });
});

describe('protocol version: checkVersionReply', () => {
  it('accepts the same major with a minor at or below the proposed one', () => {
    expect(checkVersionReply(0, 0, 0, 0)).to.equal(null);
    expect(checkVersionReply(0, 2, 0, 2)).to.equal(null);
    expect(checkVersionReply(0, 2, 0, 1)).to.equal(null);
    expect(checkVersionReply(0, 2, 0, 0)).to.equal(null);
  });

  it('refuses a different major', () => {
    expect(checkVersionReply(0, 0, 1, 0))
      .to.be.a('string')
      .and.contain('major');
    expect(checkVersionReply(0, 2, 999, 0)).to.be.a('string');
    expect(checkVersionReply(1, 0, 0, 0)).to.be.a('string');
  });

  it('refuses a minor above the proposed one (QEMU proposes 0.0, so a reply minor 1 fails)', () => {
    expect(checkVersionReply(0, 0, 0, 1))
      .to.be.a('string')
      .and.contain('minor');
    expect(checkVersionReply(0, 2, 0, 3)).to.be.a('string');
  });
});
