// Checks a capture of RoCEv2 traffic (a classic pcap, e.g. `tshark -F pcap`)
// with the project's codec: every frame decoded, its ICRC recomputed (tshark
// does not check the ICRC of RRoCE). Prints one line per IPv4 /24 of the
// senders: frames, well-formed with a good ICRC, and the drop reasons of the
// rest. Exit 1 when a frame from one of the /24s named on the command line
// (all when none is named) is not a well-formed RoCEv2 packet.
// Usage: node dist/spec/vm/roce-capture-check.js FILE.pcap [10.83.0 ...]

import * as fs from 'fs';
import { readPcap } from '../../lib/net/pcap';
import { DROP_NONE, DROP_REASON_NAMES } from '../../lib/roce/counters';
import { decodeFrame, RoceFrame } from '../../lib/roce/frame';

interface Tally {
  frames: number;
  good: number;
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
    if (!t) bySubnet.set(subnet, (t = { frames: 0, good: 0, drops: new Map() }));
    t.frames++;
    if (why === DROP_NONE) t.good++;
    else {
      const name = DROP_REASON_NAMES[why] ?? `reason ${why}`;
      t.drops.set(name, (t.drops.get(name) ?? 0) + 1);
    }
  }
  let status = 0;
  for (const [subnet, t] of [...bySubnet].sort()) {
    const drops = [...t.drops].map(([k, v]) => `${k} ${v}`).join(', ');
    console.log(
      `  from ${subnet}.0/24: ${t.frames} frames, ${t.good} well-formed with a good ICRC${drops ? `; not: ${drops}` : ''}`,
    );
    if (t.good !== t.frames && (strict.length === 0 || strict.includes(subnet))) status = 1;
  }
  return status;
}

process.exitCode = main();
