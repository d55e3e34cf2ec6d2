// The classic libpcap file format (Ethernet link type), whole files in
// memory: enough to write a capture of RoCE frames that tshark reads and to
// read one back. Off the hot path: each record is its own buffer.

import { getField, le, setField } from '../../protocol/field';

const pcap_file_header = {
  magic: le(0, 4),
  version_major: le(4, 2),
  version_minor: le(6, 2),
  thiszone: le(8, 4),
  sigfigs: le(12, 4),
  snaplen: le(16, 4),
  linktype: le(20, 4),
  SIZE: 24,
} as const;
const pcap_record_header = {
  ts_sec: le(0, 4),
  ts_usec: le(4, 4),
  incl_len: le(8, 4),
  orig_len: le(12, 4),
  SIZE: 16,
} as const;

const PCAP_MAGIC_USEC = 0xa1b2c3d4;
const LINKTYPE_ETHERNET = 1;
const SNAPLEN = 65535;

/** One captured frame and when, in microseconds since the epoch. */
export interface PcapRecord {
  timeUs: number;
  data: Buffer;
}

/** A whole pcap file of Ethernet frames. */
export function writePcap(records: readonly PcapRecord[]): Buffer {
  const head = Buffer.alloc(pcap_file_header.SIZE);
  setField(head, 0, pcap_file_header.magic, PCAP_MAGIC_USEC);
  setField(head, 0, pcap_file_header.version_major, 2);
  setField(head, 0, pcap_file_header.version_minor, 4);
  setField(head, 0, pcap_file_header.snaplen, SNAPLEN);
  setField(head, 0, pcap_file_header.linktype, LINKTYPE_ETHERNET);
  const parts: Buffer[] = [head];
  for (const r of records) {
    const h = Buffer.alloc(pcap_record_header.SIZE);
    setField(h, 0, pcap_record_header.ts_sec, Math.floor(r.timeUs / 1e6));
    setField(h, 0, pcap_record_header.ts_usec, Math.floor(r.timeUs % 1e6));
    setField(h, 0, pcap_record_header.incl_len, r.data.length);
    setField(h, 0, pcap_record_header.orig_len, r.data.length);
    parts.push(h, r.data);
  }
  return Buffer.concat(parts);
}

/** The frames of a pcap file written by writePcap (little-endian, microseconds, Ethernet); throws on anything else. */
export function readPcap(file: Buffer): PcapRecord[] {
  if (
    file.length < pcap_file_header.SIZE ||
    getField(file, 0, pcap_file_header.magic) !== PCAP_MAGIC_USEC ||
    getField(file, 0, pcap_file_header.linktype) !== LINKTYPE_ETHERNET
  ) {
    throw new Error('not a little-endian microsecond Ethernet pcap file');
  }
  const out: PcapRecord[] = [];
  let at = pcap_file_header.SIZE;
  while (at < file.length) {
    if (at + pcap_record_header.SIZE > file.length) throw new Error(`truncated record header at ${at}`);
    const len = getField(file, at, pcap_record_header.incl_len);
    const timeUs = getField(file, at, pcap_record_header.ts_sec) * 1e6 + getField(file, at, pcap_record_header.ts_usec);
    at += pcap_record_header.SIZE;
    if (at + len > file.length) throw new Error(`truncated record at ${at}`);
    out.push({ timeUs, data: Buffer.from(file.subarray(at, at + len)) });
    at += len;
  }
  return out;
}
