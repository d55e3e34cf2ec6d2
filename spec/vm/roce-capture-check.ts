// Checks a capture of RoCEv2 traffic (a classic pcap, e.g. `tshark -F pcap`)
// with the project's codec: every frame decoded, its ICRC recomputed (tshark
// does not check the ICRC of RRoCE). Prints one line per IPv4 /24 of the
// senders: frames, well-formed with a good ICRC, and the drop reasons of the
// rest. Exit 1 when a frame from one of the /24s named on the command line
// (all when none is named) is not a well-formed RoCEv2 packet. A server with
// --tap-uso writes UDP GSO buffers, and a capture on the bridge sees them
// before the kernel cuts them: such a buffer counts as good when every
// datagram the kernel would cut from it is (the datagram sizes tried: the
// first datagram's headers and ICRC, with no payload or a path MTU of it).
// Usage: node dist/spec/vm/roce-capture-check.js FILE.pcap [10.83.0 ...]

import * as fs from 'fs';
import { readPcap } from '../../lib/net/pcap';
import { DROP_NONE, DROP_REASON_NAMES } from '../../lib/roce/counters';
import { OPCODE_HEADER_BYTES } from '../../lib/roce/opcodes';
import { decodeFrame, RoceFrame } from '../../lib/roce/frame';
import { PacketInfo } from '../../lib/ionic/offload/packet';
import { writeUdpSegment } from '../../lib/ionic/offload/segment';

/** The path MTUs: a batched packet with payload carries one of them (all but a batch's last). */
const PATH_MTUS = [256, 512, 1024, 2048, 4096];
const info = new PacketInfo();
const datagram = Buffer.alloc(16384);

/** Whether frame is a UDP GSO buffer every datagram of which, cut as the kernel cuts, is good; their count, or 0. */
function gsoDatagrams(data: Buffer, frame: RoceFrame): number {
  const p = info.parse(data, data.length);
  if (p.proto !== 17) return 0;
  const body = data.length - p.headersEnd;
  // The batch's datagrams share the first one's opcode headers: BTH and the rest, then a path MTU of payload or none, then the ICRC.
  const hdr = OPCODE_HEADER_BYTES[data[p.headersEnd] ?? -1];
  if (!hdr) return 0;
  for (const size of [hdr + 4, ...PATH_MTUS.map((mtu) => hdr + mtu + 4)]) {
    if (body <= size) continue;
    const n = Math.ceil(body / size);
    let i = 0;
    for (; i < n; i++) {
      const len = writeUdpSegment(data, data.length, p, size, i, datagram);
      if (decodeFrame(datagram, len, frame) !== DROP_NONE) break;
    }
    if (i === n) return n;
  }
  return 0;
}

interface Tally {
  frames: number;
  good: number;
  /** UDP GSO buffers (good), and the datagrams in them. */
  gso: number;
  gsoDatagrams: number;
  drops: Map<string, number>;
}

function main(): number {
  const [file, ...strict] = process.argv.slice(2);
  if (!file) {
    console.error('usage: roce-capture-check FILE.pcap [A.B.C ...] (the /24s whose frames must all be good)');
    return 2;
  }
  const frame = new RoceFrame();
  const bySubnet = new Map<string, Tally>();
  for (const r of readPcap(fs.readFileSync(file))) {
    const why = decodeFrame(r.data, r.data.length, frame);
    // The sender's /24 from the IPv4 header (14 bytes of Ethernet, 4 more with a VLAN tag).
    const ip = r.data.readUInt16BE(12) === 0x8100 ? 18 : 14;
    const subnet = r.data.length >= ip + 16 ? `${r.data[ip + 12]}.${r.data[ip + 13]}.${r.data[ip + 14]}` : '?';
    let t = bySubnet.get(subnet);
    if (!t) bySubnet.set(subnet, (t = { frames: 0, good: 0, gso: 0, gsoDatagrams: 0, drops: new Map() }));
    t.frames++;
    const cut = why === DROP_NONE ? 0 : gsoDatagrams(r.data, frame);
    if (why === DROP_NONE) t.good++;
    else if (cut > 0) {
      t.good++;
      t.gso++;
      t.gsoDatagrams += cut;
    } else {
      const name = DROP_REASON_NAMES[why] ?? `reason ${why}`;
      t.drops.set(name, (t.drops.get(name) ?? 0) + 1);
    }
  }
  let status = 0;
  for (const [subnet, t] of [...bySubnet].sort()) {
    const drops = [...t.drops].map(([k, v]) => `${k} ${v}`).join(', ');
    const gso = t.gso ? ` (${t.gso} of them UDP GSO buffers of ${t.gsoDatagrams} datagrams, each good)` : '';
    console.log(
      `  from ${subnet}.0/24: ${t.frames} frames, ${t.good} well-formed with a good ICRC${gso}${drops ? `; not: ${drops}` : ''}`,
    );
    if (t.good !== t.frames && (strict.length === 0 || strict.includes(subnet))) status = 1;
  }
  return status;
}

process.exitCode = main();
