// Mesh codec: each table pinned to the C rocm-ernic's offsets
// (docs/mesh.md, "Frame format"), encoders checked against bytes
// built by hand, decoders against hand-built bytes and every refusal.

import { expect } from 'chai';
import {
  decodeFrameHeader,
  decodeHandshake,
  decodeIonicWireHeader,
  decodeNodeGids,
  decodeRegisterNode,
  decodeRegisterResp,
  decodeTopology,
  encodeFrameHeader,
  encodeHandshake,
  encodeIonicWireHeader,
  encodeNodeGids,
  encodeRegisterNode,
  encodeRegisterResp,
  encodeTopology,
  isReplyFrame,
  maxPayloadOf,
} from '../../lib/mesh/codec';
import { Decoded } from '../../lib/mesh/errors';
import {
  ionic_wire_hdr,
  tcp_handshake,
  tcp_msg_header,
  tcp_node_gids,
  tcp_node_info,
  tcp_register_node,
  tcp_register_resp,
} from '../../lib/mesh/layouts';
import { MAX_FRAME_PAYLOAD, MESH_MAGIC } from '../../lib/mesh/limits';
import { IonicWireOp, MsgType } from '../../lib/mesh/messages';
import type { Field } from '../../protocol/field';
import { Be } from './helpers';

const I1 = '0123456789abcdef';
const I2 = 'fedcba9876543210';
const K = Buffer.from('00112233445566778899aabbccddeeff', 'hex');

function pin(f: Field, off: number, size: number, order: 'be' | 'le'): void {
  expect([f.off, f.size, f.order]).to.deep.equal([off, size, order]);
}

function bad<T>(d: Decoded<T>): string {
  if (d.ok) throw new Error('decode unexpectedly succeeded');
  return d.error.code;
}

function good<T>(d: Decoded<T>): T {
  if (!d.ok) throw new Error(`decode failed: ${d.error.code} ${d.error.detail}`);
  return d.value;
}

function header(type: number, length: number, magic = MESH_MAGIC): Buffer {
  return new Be().u32(magic).u32(type).u32(length).u32(7).u32(1).u32(2).u32(3).u32(4).build();
}

describe('mesh: codec', () => {
  describe('tables match the C rocm-ernic', () => {
    it('TcpMsgHeader: 32 bytes, every field u32 big-endian', () => {
      const names = [
        'magic',
        'msg_type',
        'msg_len',
        'seq',
        'src_node_id',
        'dst_node_id',
        'src_qpn',
        'dst_qpn',
      ] as const;
      names.forEach((n, i) => pin(tcp_msg_header[n], i * 4, 4, 'be'));
      expect(tcp_msg_header.SIZE).to.equal(32);
    });

    it('ionic_wire_hdr: 60 bytes, little-endian except the immediate', () => {
      pin(ionic_wire_hdr.magic, 0, 4, 'le');
      pin(ionic_wire_hdr.op, 4, 1, 'le');
      pin(ionic_wire_hdr.atomic_cs, 5, 1, 'le');
      pin(ionic_wire_hdr.rsvd, 6, 2, 'le');
      pin(ionic_wire_hdr.src_qp_id, 8, 4, 'le');
      pin(ionic_wire_hdr.dst_qp_id, 12, 4, 'le');
      pin(ionic_wire_hdr.req_id, 16, 4, 'le');
      pin(ionic_wire_hdr.rkey, 20, 4, 'le');
      pin(ionic_wire_hdr.length, 24, 4, 'le');
      pin(ionic_wire_hdr.imm_be, 28, 4, 'be');
      pin(ionic_wire_hdr.status, 32, 4, 'le');
      pin(ionic_wire_hdr.remote_va, 36, 8, 'le');
      pin(ionic_wire_hdr.swap_add, 44, 8, 'le');
      pin(ionic_wire_hdr.compare, 52, 8, 'le');
      expect(ionic_wire_hdr.SIZE).to.equal(60);
    });

    it('control payloads extend the v4 layouts by appending', () => {
      pin(tcp_handshake.node_id, 0, 4, 'be');
      pin(tcp_handshake.version, 4, 4, 'be');
      expect(tcp_handshake.V4_SIZE).to.equal(8);
      expect([tcp_handshake.V5_SIZE, tcp_handshake.SIZE]).to.deep.equal([28, 44]);
      expect(tcp_handshake.link_key).to.deep.equal({ off: 28, size: 16, order: 'raw' });
      expect(tcp_register_node.hostname).to.deep.equal({ off: 0, size: 256, order: 'raw' });
      pin(tcp_register_node.port, 256, 2, 'be');
      pin(tcp_register_node.requested_node_id, 258, 4, 'be');
      pin(tcp_register_node.version, 262, 4, 'be');
      expect([tcp_register_node.V3_SIZE, tcp_register_node.V4_SIZE, tcp_register_node.SIZE]).to.deep.equal([
        262, 266, 274,
      ]);
      pin(tcp_register_resp.assigned_node_id, 0, 4, 'be');
      pin(tcp_register_resp.num_nodes, 4, 4, 'be');
      pin(tcp_register_resp.result, 8, 4, 'be');
      pin(tcp_register_resp.version, 12, 4, 'be');
      expect([tcp_register_resp.V3_SIZE, tcp_register_resp.V4_SIZE]).to.deep.equal([12, 16]);
      pin(tcp_node_info.node_id, 0, 4, 'be');
      expect(tcp_node_info.hostname).to.deep.equal({ off: 4, size: 256, order: 'raw' });
      pin(tcp_node_info.port, 260, 2, 'be');
      pin(tcp_node_info.is_alive, 262, 1, 'be');
      expect([tcp_node_info.V4_SIZE, tcp_node_info.V5_SIZE, tcp_node_info.SIZE]).to.deep.equal([266, 274, 290]);
      expect(tcp_node_info.link_key).to.deep.equal({ off: 274, size: 16, order: 'raw' });
      pin(tcp_node_gids.node_id, 0, 4, 'be');
      pin(tcp_node_gids.num_gids, 4, 4, 'be');
      expect(tcp_node_gids.SIZE).to.equal(136);
    });

    it('message type ordinals are the fixed ones', () => {
      expect([
        MsgType.HANDSHAKE,
        MsgType.REGISTER_NODE,
        MsgType.MESH_TOPOLOGY,
        MsgType.HEARTBEAT,
        MsgType.HEARTBEAT_RESP,
        MsgType.RDMA_WRITE,
        MsgType.IONIC,
        MsgType.NODE_GIDS,
      ]).to.deep.equal([1, 12, 14, 15, 16, 21, 24, 25]);
    });
  });

  describe('frame header', () => {
    it('encodes to the golden bytes', () => {
      const got = encodeFrameHeader({
        type: MsgType.IONIC,
        length: 0x1234,
        seq: 7,
        src: 1,
        dst: 2,
        srcQpn: 3,
        dstQpn: 4,
      });
      expect(got.toString('hex')).to.equal(header(24, 0x1234).toString('hex'));
      expect(got.subarray(0, 4).toString('ascii')).to.equal('RDMA');
    });

    it('decodes the golden bytes at an offset', () => {
      const buf = Buffer.concat([Buffer.from([9, 9, 9]), header(24, 100)]);
      expect(good(decodeFrameHeader(buf, 3))).to.deep.equal({
        type: 24,
        length: 100,
        seq: 7,
        src: 1,
        dst: 2,
        srcQpn: 3,
        dstQpn: 4,
      });
    });

    it('refuses bad magic, unknown and unspoken types, and lengths outside the type rules', () => {
      expect(bad(decodeFrameHeader(header(24, 100, 0x52444d42), 0))).to.equal('BAD_MAGIC');
      expect(bad(decodeFrameHeader(header(99, 0), 0))).to.equal('UNKNOWN_TYPE');
      expect(bad(decodeFrameHeader(header(0, 0), 0))).to.equal('UNKNOWN_TYPE');
      for (const t of [3, 11, 17, 18, 19, 20])
        expect(bad(decodeFrameHeader(header(t, 0), 0))).to.equal('UNSUPPORTED_TYPE');
      expect(bad(decodeFrameHeader(header(24, MAX_FRAME_PAYLOAD + 1), 0))).to.equal('FRAME_TOO_LARGE');
      expect(bad(decodeFrameHeader(header(24, 0xffffffff), 0))).to.equal('FRAME_TOO_LARGE');
      expect(good(decodeFrameHeader(header(24, MAX_FRAME_PAYLOAD), 0)).length).to.equal(MAX_FRAME_PAYLOAD);
      expect(bad(decodeFrameHeader(header(24, 59), 0))).to.equal('BAD_LENGTH');
      expect(bad(decodeFrameHeader(header(MsgType.HEARTBEAT, 65), 0))).to.equal('BAD_LENGTH');
      expect(bad(decodeFrameHeader(header(MsgType.REGISTER_NODE, 1000), 0))).to.equal('BAD_LENGTH');
      expect(bad(decodeFrameHeader(header(MsgType.NODE_GIDS, 10), 0))).to.equal('BAD_LENGTH');
      expect(maxPayloadOf(MsgType.MESH_TOPOLOGY)).to.equal(4 + 64 * 290);
    });
  });

  describe('control payloads', () => {
    it('HANDSHAKE encodes to golden bytes and round-trips', () => {
      const got = encodeHandshake({ nodeId: 3, result: -116, incarnation: I1, peerIncarnation: I2, linkKey: K });
      const want = new Be().u32(3).u32(6).u32(0xffffff8c).hex(I1).hex(I2).raw(K).build();
      expect(got.toString('hex')).to.equal(want.toString('hex'));
      expect(good(decodeHandshake(got))).to.deep.equal({
        nodeId: 3,
        version: 6,
        result: -116,
        incarnation: I1,
        peerIncarnation: I2,
        linkKey: K,
      });
    });

    it('a v4 handshake is a version error; other sizes are length errors', () => {
      expect(bad(decodeHandshake(new Be().u32(3).u32(4).build()))).to.equal('BAD_VERSION');
      expect(bad(decodeHandshake(new Be().u32(3).u32(5).u32(0).hex(I1).hex(I2).build()))).to.equal('BAD_VERSION');
      expect(bad(decodeHandshake(new Be().u32(3).u32(6).build()))).to.equal('BAD_LENGTH');
      expect(bad(decodeHandshake(Buffer.alloc(4)))).to.equal('BAD_VERSION');
      expect(bad(decodeHandshake(new Be().u32(3).u32(6).u32(0).zeros(32).build()))).to.equal('BAD_FIELD');
      expect(bad(decodeHandshake(new Be().u32(64).u32(6).u32(0).hex(I1).hex(I2).raw(K).build()))).to.equal(
        'BAD_NODE_ID',
      );
    });

    it('REGISTER_NODE encodes to golden bytes and round-trips', () => {
      const got = encodeRegisterNode({ host: 'node-a.example', port: 7000, requestedId: 0xffffffff, instance: I1 });
      const want = new Be().text('node-a.example', 256).u16(7000).u32(0xffffffff).u32(6).hex(I1).build();
      expect(got.toString('hex')).to.equal(want.toString('hex'));
      expect(good(decodeRegisterNode(got))).to.deep.equal({
        host: 'node-a.example',
        port: 7000,
        requestedId: 0xffffffff,
        version: 6,
        instance: I1,
      });
      expect(
        good(decodeRegisterNode(encodeRegisterNode({ host: 'fe80::1%eth0', port: 1, requestedId: 9, instance: I2 })))
          .host,
      ).to.equal('fe80::1%eth0');
    });

    it('REGISTER_NODE from a v3 or v4 peer is a version error; bad fields are refused', () => {
      expect(bad(decodeRegisterNode(new Be().text('h', 256).u16(1).u32(0xffffffff).build()))).to.equal('BAD_VERSION');
      expect(bad(decodeRegisterNode(new Be().text('h', 256).u16(1).u32(0xffffffff).u32(4).build()))).to.equal(
        'BAD_VERSION',
      );
      expect(bad(decodeRegisterNode(new Be().text('h', 256).u16(1).u32(0xffffffff).u32(5).hex(I1).build()))).to.equal(
        'BAD_VERSION',
      );
      const reg = (host: Buffer, id: number, inst = I1): Buffer =>
        Buffer.concat([host, new Be().u16(1).u32(id).u32(6).hex(inst).build()]);
      const hostField = (s: string): Buffer => new Be().text(s, 256).build();
      expect(bad(decodeRegisterNode(reg(Buffer.alloc(256, 0x41), 1)))).to.equal('BAD_HOST');
      expect(bad(decodeRegisterNode(reg(hostField('a b'), 1)))).to.equal('BAD_HOST');
      expect(bad(decodeRegisterNode(reg(hostField('1.2.3'), 1)))).to.equal('BAD_HOST');
      expect(bad(decodeRegisterNode(reg(hostField('ok'), 0)))).to.equal('BAD_NODE_ID');
      expect(bad(decodeRegisterNode(reg(hostField('ok'), 0x80000000)))).to.equal('BAD_NODE_ID');
      // Only ids of the table's range may be asked for (ids 1..63).
      expect(bad(decodeRegisterNode(reg(hostField('ok'), 0x7fffffff)))).to.equal('BAD_NODE_ID');
      expect(bad(decodeRegisterNode(reg(hostField('ok'), 64)))).to.equal('BAD_NODE_ID');
      expect(good(decodeRegisterNode(reg(hostField('ok'), 63))).requestedId).to.equal(63);
      expect(bad(decodeRegisterNode(reg(hostField('ok'), 1, '0000000000000000')))).to.equal('BAD_FIELD');
      expect(bad(decodeRegisterNode(Buffer.concat([reg(hostField('ok'), 1), Buffer.alloc(1)])))).to.equal('BAD_LENGTH');
    });

    it('REGISTER_RESP encodes to golden bytes and round-trips; refusals carry a negative errno', () => {
      const got = encodeRegisterResp({ nodeId: 4, numNodes: 5, result: 0, managerInstance: I2 });
      expect(got.toString('hex')).to.equal(new Be().u32(4).u32(5).u32(0).u32(6).hex(I2).build().toString('hex'));
      expect(good(decodeRegisterResp(got))).to.deep.equal({
        nodeId: 4,
        numNodes: 5,
        result: 0,
        version: 6,
        managerInstance: I2,
      });
      const refused = good(
        decodeRegisterResp(encodeRegisterResp({ nodeId: 0, numNodes: 64, result: -28, managerInstance: I2 })),
      );
      expect(refused.result).to.equal(-28);
      expect(bad(decodeRegisterResp(new Be().u32(4).u32(5).u32(0).u32(4).build()))).to.equal('BAD_VERSION');
      expect(bad(decodeRegisterResp(new Be().u32(0).u32(5).u32(0).u32(6).hex(I2).build()))).to.equal('BAD_NODE_ID');
      expect(bad(decodeRegisterResp(new Be().u32(64).u32(5).u32(0).u32(6).hex(I2).build()))).to.equal('BAD_NODE_ID');
      expect(bad(decodeRegisterResp(new Be().u32(1).u32(65).u32(0).u32(6).hex(I2).build()))).to.equal('TOO_MANY');
    });

    it('MESH_TOPOLOGY carries only the listed nodes and round-trips', () => {
      const nodes = [
        { id: 0, host: '', port: 5000, alive: true, incarnation: I1, linkKey: Buffer.alloc(16) },
        { id: 2, host: '10.0.0.2', port: 6000, alive: false, incarnation: I2, linkKey: K },
      ];
      const got = encodeTopology(nodes);
      const want = new Be()
        .u32(2)
        .u32(0)
        .text('', 256)
        .u16(5000)
        .u8(1)
        .zeros(3)
        .hex(I1)
        .zeros(16)
        .u32(2)
        .text('10.0.0.2', 256)
        .u16(6000)
        .u8(0)
        .zeros(3)
        .hex(I2)
        .raw(K)
        .build();
      expect(got.toString('hex')).to.equal(want.toString('hex'));
      expect(good(decodeTopology(got))).to.deep.equal(nodes);
    });

    it('MESH_TOPOLOGY refusals: count, length, duplicate ids, is_alive, ids', () => {
      const one = (id: number, alive = 1): Buffer =>
        new Be().u32(id).text('h', 256).u16(1).u8(alive).zeros(3).hex(I1).zeros(16).build();
      expect(bad(decodeTopology(new Be().u32(65).build()))).to.equal('TOO_MANY');
      expect(bad(decodeTopology(Buffer.concat([new Be().u32(2).build(), one(1)])))).to.equal('BAD_LENGTH');
      expect(bad(decodeTopology(Buffer.concat([new Be().u32(2).build(), one(1), one(1)])))).to.equal('DUPLICATE');
      expect(bad(decodeTopology(Buffer.concat([new Be().u32(1).build(), one(1, 2)])))).to.equal('BAD_FIELD');
      expect(bad(decodeTopology(Buffer.concat([new Be().u32(1).build(), one(0x80000000)])))).to.equal('BAD_NODE_ID');
      expect(bad(decodeTopology(Buffer.concat([new Be().u32(1).build(), one(64)])))).to.equal('BAD_NODE_ID');
    });

    it('NODE_GIDS batches records; one record is the C layout', () => {
      const g1 = Buffer.from('fe800000000000000000000000000001', 'hex');
      const g2 = Buffer.from('00000000000000000000ffff0a000001', 'hex');
      const one = encodeNodeGids([{ nodeId: 3, gids: [g1, g2] }]);
      expect(one.toString('hex')).to.equal(new Be().u32(3).u32(2).raw(g1).raw(g2).zeros(96).build().toString('hex'));
      const two = encodeNodeGids([
        { nodeId: 3, gids: [g1] },
        { nodeId: 4, gids: [] },
      ]);
      const d = good(decodeNodeGids(two));
      expect(d.map((r) => [r.nodeId, r.gids.map((g) => g.toString('hex'))])).to.deep.equal([
        [3, [g1.toString('hex')]],
        [4, []],
      ]);
    });

    it('NODE_GIDS refusals: partial records, more than 8 GIDs, duplicate nodes, empty', () => {
      const rec = (id: number, n: number): Buffer => new Be().u32(id).u32(n).zeros(128).build();
      expect(bad(decodeNodeGids(Buffer.alloc(0)))).to.equal('BAD_LENGTH');
      expect(bad(decodeNodeGids(Buffer.alloc(137)))).to.equal('BAD_LENGTH');
      expect(bad(decodeNodeGids(rec(1, 9)))).to.equal('TOO_MANY');
      expect(bad(decodeNodeGids(Buffer.concat([rec(1, 1), rec(1, 2)])))).to.equal('DUPLICATE');
      expect(bad(decodeNodeGids(Buffer.concat(new Array<Buffer>(65).fill(rec(1, 0)))))).to.equal('TOO_MANY');
    });
  });

  describe('ionic header', () => {
    const fields = {
      op: IonicWireOp.ATOMIC_REQ,
      atomicCs: 1,
      srcQpId: 0x11,
      dstQpId: 0x22,
      reqId: 0x33,
      rkey: 0x44,
      length: 8,
      immBe: 0xaabbccdd,
      status: 0,
      remoteVa: 0x1122334455667788n,
      swapAdd: 0xffffffffffffffffn,
      compare: 5n,
    };

    it('encodes to golden bytes (little-endian, immediate big-endian) and round-trips', () => {
      const got = encodeIonicWireHeader(fields);
      // rsvd: the data path's flags (0) and the wire version (1) in its high byte.
      const want = new Be()
        .raw(Buffer.from('IONC', 'ascii'))
        .u8(8)
        .u8(1)
        .le16(0x0100)
        .le32(0x11)
        .le32(0x22)
        .le32(0x33)
        .le32(0x44)
        .le32(8)
        .u32(0xaabbccdd)
        .le32(0)
        .le64(0x1122334455667788n)
        .le64(0xffffffffffffffffn)
        .le64(5n)
        .build();
      expect(got.toString('hex')).to.equal(want.toString('hex'));
      expect(good(decodeIonicWireHeader(got))).to.deep.equal(fields);
    });

    it('refuses short headers, bad magic and unknown ops', () => {
      const h = encodeIonicWireHeader(fields);
      expect(bad(decodeIonicWireHeader(h.subarray(0, 59)))).to.equal('BAD_LENGTH');
      const m = Buffer.from(h);
      m[0] = 0;
      expect(bad(decodeIonicWireHeader(m))).to.equal('BAD_MAGIC');
      const o = Buffer.from(h);
      o[4] = 11;
      expect(bad(decodeIonicWireHeader(o))).to.equal('BAD_FIELD');
    });

    it('classifies replies by op for the relay', () => {
      for (const [op, reply] of [
        [IonicWireOp.WRITE, false],
        [IonicWireOp.READ_REQ, false],
        [IonicWireOp.READ_RESP, true],
        [IonicWireOp.ATOMIC_RESP, true],
        [IonicWireOp.ACK, true],
      ] as const) {
        expect(isReplyFrame(MsgType.IONIC, encodeIonicWireHeader({ ...fields, op }))).to.equal(reply);
      }
      expect(isReplyFrame(MsgType.RDMA_READ_RESP, Buffer.alloc(0))).to.equal(true);
      expect(isReplyFrame(MsgType.DATA, Buffer.alloc(0))).to.equal(false);
    });
  });
});
