// struct virtio_net_hdr (include/uapi/linux/virtio_net.h): what a TAP with
// IFF_VNET_HDR puts before every frame, both ways, and the TUN_F_* offloads
// (include/uapi/linux/if_tun.h) that say which of these the kernel may hand us.
// Little-endian: tun's default on a little-endian host, and virtio 1.0's.

import { le } from '../../protocol/field';

export const virtio_net_hdr = {
  flags: le(0, 1),
  gso_type: le(1, 1),
  hdr_len: le(2, 2),
  gso_size: le(4, 2),
  csum_start: le(6, 2),
  csum_offset: le(8, 2),
  SIZE: 10,
} as const;

/** virtio_net_hdr.flags */
const VIRTIO_NET_HDR_F_NEEDS_CSUM = 0x1;
const VIRTIO_NET_HDR_F_DATA_VALID = 0x2;

/** virtio_net_hdr.gso_type */
export const enum VirtioGso {
  NONE = 0,
  TCPV4 = 1,
  UDP = 3,
  TCPV6 = 4,
  UDP_L4 = 5,
  ECN = 0x80,
}

/** TUNSETOFFLOAD bits. */
export const TUN_F_CSUM = 0x01;
export const TUN_F_TSO4 = 0x02;
export const TUN_F_TSO6 = 0x04;
export const TUN_F_TSO_ECN = 0x08;
/** UDP segmentation offload (Linux 6.2+); the kernel takes it only for both families at once. */
export const TUN_F_USO4 = 0x20;
export const TUN_F_USO6 = 0x40;

/** A frame's virtio_net_hdr, decoded (one reusable record per link). */
export class FrameOffload {
  /** NEEDS_CSUM: the checksum at csumStart + csumOffset is partial (a pseudo-header seed). */
  needsCsum = false;
  /** DATA_VALID: the kernel already checked the checksums. */
  dataValid = false;
  gsoType: number = VirtioGso.NONE;
  gsoSize = 0;
  hdrLen = 0;
  csumStart = 0;
  csumOffset = 0;

  clear(): this {
    this.needsCsum = false;
    this.dataValid = false;
    this.gsoType = VirtioGso.NONE;
    this.gsoSize = 0;
    this.hdrLen = 0;
    this.csumStart = 0;
    this.csumOffset = 0;
    return this;
  }

  /** TCP segmentation is asked for (over IPv4 or IPv6). */
  get tcpGso(): boolean {
    const t = this.gsoType & ~VirtioGso.ECN;
    return t === VirtioGso.TCPV4 || t === VirtioGso.TCPV6;
  }

  /** UDP segmentation is asked for (UDP_L4: datagrams cut every gsoSize bytes of payload). */
  get udpGso(): boolean {
    return this.gsoType === VirtioGso.UDP_L4;
  }

  decode(b: Buffer, at: number): this {
    const flags = b[at + virtio_net_hdr.flags.off]!;
    this.needsCsum = (flags & VIRTIO_NET_HDR_F_NEEDS_CSUM) !== 0;
    this.dataValid = (flags & VIRTIO_NET_HDR_F_DATA_VALID) !== 0;
    this.gsoType = b[at + virtio_net_hdr.gso_type.off]!;
    this.hdrLen = b.readUInt16LE(at + virtio_net_hdr.hdr_len.off);
    this.gsoSize = b.readUInt16LE(at + virtio_net_hdr.gso_size.off);
    this.csumStart = b.readUInt16LE(at + virtio_net_hdr.csum_start.off);
    this.csumOffset = b.readUInt16LE(at + virtio_net_hdr.csum_offset.off);
    return this;
  }

  encode(b: Buffer, at: number): void {
    b[at + virtio_net_hdr.flags.off] =
      (this.needsCsum ? VIRTIO_NET_HDR_F_NEEDS_CSUM : 0) | (this.dataValid ? VIRTIO_NET_HDR_F_DATA_VALID : 0);
    b[at + virtio_net_hdr.gso_type.off] = this.gsoType;
    b.writeUInt16LE(this.hdrLen, at + virtio_net_hdr.hdr_len.off);
    b.writeUInt16LE(this.gsoSize, at + virtio_net_hdr.gso_size.off);
    b.writeUInt16LE(this.csumStart, at + virtio_net_hdr.csum_start.off);
    b.writeUInt16LE(this.csumOffset, at + virtio_net_hdr.csum_offset.off);
  }
}
