// The RC rules at the responder, attacked over the network: a real server in
// its own process (rocm-ernic --backend tcp:manager:listen:PORT) with a
// guest attached over vfio-user, and raw TCP peers registered as workers
// that speak the ionic wire protocol by hand:
//
// - a request for an RC QP from a node that is not its peer, or from its
//   peer node but another QPN, is not executed (answered as if the QP were
//   not there) and the QP carries on;
// - its peer guessing keys gets one NAK (REMOTE_ACC) and the QP goes to
//   ERR with an ERR_ACCESS event on the guest's EQ: the right key, tried
//   next, is refused too;
// - datagrams: the Q_Key is checked as for a local sender, and a header of
//   the old wire format (no version) is dropped even with the right Q_Key.

import { expect } from 'chai';
import {
  decodeIonicWireHeader,
  encodeFrameHeader,
  encodeIonicWireHeader,
  encodeNodeGids,
  encodeRegisterNode,
  decodeRegisterResp,
} from '../../../../lib/mesh/codec';
import { AUTO_NODE_ID } from '../../../../lib/mesh/limits';
import { IonicWireOp, MsgType } from '../../../../lib/mesh/messages';
import { ipv4Gid } from '../../../../lib/rdma/address';
import { startMeshServer, MeshServer } from '../../../mesh/fixtures/server';
import { cqesOf, LOCAL, RawPeer, until } from '../../../mesh/helpers';
import { IonicGuest } from '../../../support/ionic/guest';
import { RdmaGuest } from '../../../support/ionic/rdma-guest';
import { AOp, CqeT, MrF, QpF, QpS, QpT } from '../../../support/ionic/rdma-regs';
import { queryQpBody } from '../../../support/ionic/rdma-cmds';
import { PAGE } from '../../../support/ionic/regs';
import { Cq, GuestMr, Qp, v4, VerbsGuest } from '../../../support/ionic/rdma-verbs';

const IP_GUEST = '10.7.0.1';
const IP_PEER = '10.7.0.2';
const IP_OTHER = '10.7.0.3';
const PEER_QPN = 77;
const QP_RC = 20;
const QP_UD = 30;
const QKEY = 0x1234;
/** IonicStatus values as the wire carries them. */
const ST = { OK: 0, REMOTE_ACC: 9, RETRY_EXCEEDED: 11 } as const;
/** EQE QP code for an access error (ionic RDMA R4.8). */
const EQE_QP = 1;
const ERR_ACCESS = 10;
/** rsvd (LE u16 at offset 6): bit 0 datagram, high byte the wire version. */
const RSVD = 6;

/** A raw worker: registered, its guest's GID advertised, answers collected. */
class Rogue {
  private constructor(
    readonly peer: RawPeer,
    readonly id: number,
  ) {}

  static async join(port: number, n: number, gidIp: string, from: string): Promise<Rogue> {
    const peer = await RawPeer.connect(port, LOCAL, from);
    peer.send(
      MsgType.REGISTER_NODE,
      encodeRegisterNode({
        host: '',
        port: 0,
        requestedId: AUTO_NODE_ID,
        instance: (0xa77ac0 + n).toString(16).padStart(16, '0'),
      }),
    );
    const d = decodeRegisterResp((await peer.waitFrame(MsgType.REGISTER_RESP)).body);
    if (!d.ok || d.value.result !== 0) throw new Error('registration refused');
    const r = new Rogue(peer, d.value.nodeId);
    peer.send(MsgType.NODE_GIDS, encodeNodeGids([{ nodeId: r.id, gids: [ipv4Gid(v4(gidIp))] }]), { src: r.id });
    await r.sync();
    return r;
  }

  /** A heartbeat round trip: everything sent before it has been handled. */
  async sync(): Promise<void> {
    const n = this.peer.frames.filter((f) => f.header.type === MsgType.HEARTBEAT_RESP).length;
    this.peer.send(MsgType.HEARTBEAT, Buffer.alloc(0), { src: this.id });
    await until(
      () => this.peer.frames.filter((f) => f.header.type === MsgType.HEARTBEAT_RESP).length > n,
      'heartbeat answer',
    );
  }

  /** Send an ionic message to node 0; `rsvd` overrides the header's rsvd word. */
  send(
    h: { op: number; srcQp: number; dstQp: number; reqId: number; rkey: number; va?: bigint },
    payload: Buffer,
    rsvd?: number,
  ): void {
    const hdr = encodeIonicWireHeader({
      op: h.op,
      atomicCs: 0,
      srcQpId: h.srcQp,
      dstQpId: h.dstQp,
      reqId: h.reqId,
      rkey: h.rkey,
      length: payload.length,
      immBe: 0,
      status: 0,
      remoteVa: h.va ?? 0n,
    });
    if (rsvd !== undefined) hdr.writeUInt16LE(rsvd, RSVD);
    const body = Buffer.concat([hdr, payload]);
    this.peer.write(
      Buffer.concat([
        encodeFrameHeader({
          type: MsgType.IONIC,
          length: body.length,
          seq: 1,
          src: this.id,
          dst: 0,
          srcQpn: h.srcQp,
          dstQpn: h.dstQp,
        }),
        body,
      ]),
    );
  }

  /** The status of the answer to `reqId`. */
  async answer(reqId: number): Promise<number> {
    const find = (): number | undefined => {
      for (const f of this.peer.frames) {
        if (f.header.type !== MsgType.IONIC) continue;
        const d = decodeIonicWireHeader(f.body);
        if (d.ok && d.value.op === IonicWireOp.ACK && d.value.reqId === reqId) return d.value.status;
      }
      return undefined;
    };
    await until(() => find() !== undefined, `the answer to request ${reqId}`);
    return find()!;
  }
}

describe('rdma over the mesh: RC rules at the responder, attacked from the network', function () {
  this.timeout(90_000);
  let srv: MeshServer;
  let g: IonicGuest;
  let r: RdmaGuest;
  let v: VerbsGuest;
  let cq: Cq;
  let mr: GuestMr;
  let qp: Qp;
  let peer: Rogue;
  let other: Rogue;
  let original: Buffer;

  const qpState = async (id: number): Promise<number> => {
    const sqAt = g.alloc(PAGE);
    const rqAt = g.alloc(PAGE);
    const c = await r.post(AOp.QUERY_QP, queryQpBody(id, sqAt, rqAt));
    if (c.error) throw new Error(`QUERY_QP ${id}: status ${c.status}`);
    return g.mem(rqAt, 1)[0]! >> 4;
  };

  before(async () => {
    srv = await startMeshServer({ gids: IP_GUEST });
    g = await IonicGuest.connect(srv.sock, {});
    await g.probe();
    r = await RdmaGuest.boot(g, { cpus: 8 });
    v = VerbsGuest.attach(g, r, 32);
    peer = await Rogue.join(srv.port, 1, IP_PEER, '127.0.0.2');
    other = await Rogue.join(srv.port, 2, IP_OTHER, '127.0.0.3');
    cq = await v.createCq(5);
    mr = await v.createMr({ key: 0x4242, pages: 1, flags: MrF.LOCAL_WRITE | MrF.REMOTE_WRITE | MrF.REMOTE_READ });
    original = Buffer.from(mr.read(0, 64));
    qp = await v.createQp(QP_RC, QpT.RC, { sqCq: cq, rqCq: cq });
    await v.connect(qp, PEER_QPN, {
      access: QpF.REMOTE_WRITE | QpF.REMOTE_READ,
      tpl: { sip: v4(IP_GUEST), dip: v4(IP_PEER) },
    });
  });

  after(async () => {
    peer?.peer.destroy();
    other?.peer.destroy();
    g?.dispose();
    await srv?.stop();
  });

  it("executes nothing from a node that is not the QP's peer, nor from the peer node's other QPs", async () => {
    const write = { op: IonicWireOp.WRITE, dstQp: QP_RC, rkey: mr.key, va: BigInt(mr.va) };
    other.send({ ...write, srcQp: PEER_QPN, reqId: 1 }, Buffer.alloc(64, 0xee));
    const fromOther = await other.answer(1);
    peer.send({ ...write, srcQp: PEER_QPN + 1, reqId: 2 }, Buffer.alloc(64, 0xdd));
    const fromOtherQp = await peer.answer(2);
    console.log(
      `      a WRITE with the live rkey from another node: status ${fromOther}; from the peer node's QP ${PEER_QPN + 1}: status ${fromOtherQp}`,
    );
    expect([fromOther, fromOtherQp]).to.deep.equal([ST.RETRY_EXCEEDED, ST.RETRY_EXCEEDED]);
    expect(mr.read(0, 64).equals(original), 'the MR is untouched').to.equal(true);
    expect(await qpState(QP_RC)).to.equal(QpS.RTS);
  });

  it('its peer guessing keys gets one NAK: the QP goes to ERR with an ERR_ACCESS event, and the right key is refused after', async () => {
    const write = { op: IonicWireOp.WRITE, srcQp: PEER_QPN, dstQp: QP_RC, va: BigInt(mr.va) };
    // Wrong keys first (as a guesser's would be), then the live one.
    const keys = [mr.key + 0x100, mr.key + 0x200, mr.key + 0x300, mr.key];
    const statuses: number[] = [];
    for (let i = 0; i < keys.length; i++) {
      peer.send({ ...write, reqId: 100 + i, rkey: keys[i]! }, Buffer.alloc(64, 0xcc));
      statuses.push(await peer.answer(100 + i));
    }
    const naks = statuses.filter((s) => s === ST.REMOTE_ACC).length;
    console.log(
      `      key guesses answered ${statuses.join(' ')}: ${naks} try before the QP refused everything (the live key included)`,
    );
    expect(statuses).to.deep.equal([ST.REMOTE_ACC, ST.RETRY_EXCEEDED, ST.RETRY_EXCEEDED, ST.RETRY_EXCEEDED]);
    expect(mr.read(0, 64).equals(original), 'the MR is untouched').to.equal(true);
    expect(await qpState(QP_RC)).to.equal(QpS.ERR);
    const ev = await g.waitFor(
      'the QP event',
      () => {
        r.service();
        return r.events.find((e) => e.type === EQE_QP && e.qid === QP_RC);
      },
      10_000,
    );
    expect([ev.code, ev.qid]).to.deep.equal([ERR_ACCESS, QP_RC]);
  });

  it('datagrams: the Q_Key is checked as for a local sender, and the old wire format is dropped', async () => {
    const ud = await v.createQp(QP_UD, QpT.UD, { sqCq: cq, rqCq: cq });
    await v.readyUd(ud, QKEY);
    const buf = mr.sge(0, 512);
    v.postRecv(ud, { id: 0x51, sges: [buf] });
    const dgram = (tag: number): Buffer => Buffer.concat([Buffer.alloc(40), Buffer.alloc(100, tag)]);
    const to = { op: IonicWireOp.SEND, srcQp: 9, dstQp: QP_UD, reqId: 0 };
    peer.send({ ...to, rkey: QKEY + 1 }, dgram(1), 0x0101); // wrong Q_Key
    peer.send({ ...to, rkey: QKEY }, dgram(2), 0x0001); // right Q_Key, no version (the old format)
    peer.send({ ...to, rkey: QKEY }, dgram(3), 0x0101); // right Q_Key, version 1
    await peer.sync();
    const got = await cqesOf(v, cq, 1);
    await peer.sync();
    got.push(...v.drain(cq));
    console.log(`      3 datagrams (wrong Q_Key; right Q_Key in the old format; right Q_Key): ${got.length} received`);
    expect(got.map((c) => [c.type, c.qid, c.error, c.statusLength])).to.deep.equal([[CqeT.RECV, QP_UD, false, 140]]);
    expect(mr.read(40, 100).equals(Buffer.alloc(100, 3))).to.equal(true);
  });
});
