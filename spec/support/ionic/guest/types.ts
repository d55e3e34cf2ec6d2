// The guest model's records: what its calls return and take, and the
// driver-side state of each queue it runs.

export interface DevCmdResult {
  readonly status: number;
  /** The 16-byte completion at BAR0 0x848. */
  readonly comp: Buffer;
  /** The 1912-byte data window after the command, when asked for. */
  readonly data: Buffer | null;
}

export interface AdminCompletion {
  readonly status: number;
  readonly comp: Buffer;
  /** Ring slot of the command. */
  readonly slot: number;
  /** CQ slot the completion was read from, and the color it carried. */
  readonly cqIndex: number;
  readonly color: number;
}

export interface TxCompletion {
  readonly status: number;
  readonly slot: number;
}

export interface RxFrame {
  readonly queue: number;
  /** Descriptor index (= comp_index). */
  readonly index: number;
  readonly status: number;
  readonly len: number;
  readonly numSg: number;
  readonly rssHash: number;
  readonly pktType: number;
  /** The completion's csum (as the bytes sit: big-endian), csum_flags and vlan_tci. */
  readonly csum: number;
  readonly csumFlags: number;
  readonly vlanTci: number;
  readonly data: Buffer;
}

export interface GuestOptions {
  /** Guest RAM size (default 64 MiB). */
  readonly ramSize?: number;
  /** Guest-physical (IOVA) address of the RAM (default 4 GiB, so every address needs more than 32 bits). */
  readonly iova?: number;
  /** Per-wait timeout in ms (default 3000). */
  readonly timeoutMs?: number;
  /** Share RAM as an unsealed memfd (default sealed, as QEMU's memfd backend does). */
  readonly unsealedRam?: boolean;
}

export interface OpenOptions {
  /** log2 of the TX and RX ring sizes (default 6: 64 descriptors). */
  readonly ringLog2?: number;
  readonly txRingLog2?: number;
  readonly rxRingLog2?: number;
  /** MTU for RX buffer sizing (default 1500); above PAGE - 18 the buffers use SG elements. */
  readonly mtu?: number;
  /** Refill RX buffers from NAPI (default true). */
  readonly autoRefill?: boolean;
  /**
   * Fill each RX buffer with 0xee when posting it (default true), so bytes a
   * device writes past what its completion reports show; a benchmark turns
   * it off, as no driver pays for it.
   */
  readonly poisonRx?: boolean;
  /** How many RX buffers to post at start (default size - 1, the most the driver ever posts). */
  readonly initialFill?: number;
  /** TX queue version to ask for in Q_INIT (default the q_identity version). */
  readonly txVersion?: number;
  /** Skip Q_CONTROL ENABLE (queues stay created but disabled). */
  readonly noEnable?: boolean;
}

export interface SendOptions {
  readonly queue?: number;
  /** Split the frame into pieces of these lengths: the first goes in the descriptor, the rest in SG elements. */
  readonly pieces?: readonly number[];
  /** Ring the doorbell (default true); false batches like xmit_more. */
  readonly ring?: boolean;
}

export type VectorMode = 'napi' | 'manual';

export interface AdminQ {
  ring: number;
  cq: number;
  head: number;
  tail: number;
  cqTail: number;
  doneColor: number;
  hwType: number;
  hwIndex: number;
  waiters: Map<number, { resolve(c: AdminCompletion): void }>;
}

export interface NotifyQ {
  base: number;
  events: number;
  lastEid: bigint;
  tail: number;
  hwType: number;
  hwIndex: number;
}

export interface TxQ {
  index: number;
  intr: number;
  size: number;
  ring: number;
  cq: number;
  sg: number;
  bufs: number;
  sgDescSize: number;
  version: number;
  head: number;
  tail: number;
  cqTail: number;
  doneColor: number;
  hwType: number;
  hwIndex: number;
  waiters: Map<number, (c: TxCompletion) => void>;
  completed: number;
}

export interface RxBuf {
  iova: number;
  len: number;
}
export interface RxQ {
  index: number;
  intr: number;
  size: number;
  ring: number;
  cq: number;
  sg: number;
  head: number;
  tail: number;
  cqTail: number;
  doneColor: number;
  hwType: number;
  hwIndex: number;
  /** Per slot: the first buffer and the SG buffers posted with it. */
  bufs: RxBuf[][];
  frameLen: number;
  autoRefill: boolean;
  poison: boolean;
}
