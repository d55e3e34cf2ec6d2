// LIF and port statistics: counted here, written into the guest's lif_info
// and port_info blocks (where LIF_INIT and PORT_INIT put them). `ip -s link`
// reads only the LIF block; `ethtool -S` reads both.
//
// Writes happen at the profile's interval, and only while something changed:
// a change arms one timer; when it fires the blocks are written and nothing
// is re-armed until the next change. An idle device schedules nothing.

import type { GuestMemory } from '../vfio-user/guest-memory';
import { guardedTimeout } from '../guard';
import { Logger, nullLogger } from '../log';
import { AddrKind } from './frames';
import { ionic_lif_info, ionic_lif_stats, ionic_port_info, ionic_port_stats } from './layouts';
import { setField } from '../../protocol/field';
import { le } from '../../protocol/field';
import type { Field } from '../../protocol/field';

export class DeviceStats {
  /** ionic_lif_stats image, 128 u64 (kept as doubles: exact below 2^53). */
  readonly lif = new Float64Array(ionic_lif_stats.SIZE / 8);
  readonly port = new Float64Array(ionic_port_stats.SIZE / 8);
  readonly #lifBlock = Buffer.alloc(ionic_lif_stats.SIZE);
  readonly #portBlock = Buffer.alloc(ionic_port_stats.SIZE);
  #timer: NodeJS.Timeout | null = null;
  #dirty = false;
  /** Where to write; 0 = not set (before LIF_INIT/PORT_INIT or after a reset). */
  lifInfoPa = 0;
  portInfoPa = 0;
  /** Writes done, for tests and the idle check. */
  writes = 0;

  constructor(
    private readonly intervalMs: number,
    private readonly memory: () => GuestMemory | undefined,
    private readonly log: Logger = nullLogger,
  ) {}

  static inc(arr: Float64Array, field: Field, by = 1): void {
    arr[field.off / 8] += by;
  }

  rxFrame(kind: AddrKind, bytes: number): void {
    const s = this.lif;
    if (kind === AddrKind.UNICAST) {
      DeviceStats.inc(s, ionic_lif_stats.rx_ucast_packets);
      DeviceStats.inc(s, ionic_lif_stats.rx_ucast_bytes, bytes);
      DeviceStats.inc(this.port, ionic_port_stats.frames_rx_unicast);
    } else if (kind === AddrKind.MULTICAST) {
      DeviceStats.inc(s, ionic_lif_stats.rx_mcast_packets);
      DeviceStats.inc(s, ionic_lif_stats.rx_mcast_bytes, bytes);
      DeviceStats.inc(this.port, ionic_port_stats.frames_rx_multicast);
    } else {
      DeviceStats.inc(s, ionic_lif_stats.rx_bcast_packets);
      DeviceStats.inc(s, ionic_lif_stats.rx_bcast_bytes, bytes);
      DeviceStats.inc(this.port, ionic_port_stats.frames_rx_broadcast);
    }
    DeviceStats.inc(this.port, ionic_port_stats.frames_rx_ok);
    DeviceStats.inc(this.port, ionic_port_stats.frames_rx_all);
    DeviceStats.inc(this.port, ionic_port_stats.octets_rx_ok, bytes);
    DeviceStats.inc(this.port, ionic_port_stats.octets_rx_all, bytes);
    this.changed();
  }

  rxDrop(kind: AddrKind, bytes: number, why: 'no-buffer' | 'disabled' | 'error'): void {
    const s = this.lif;
    if (kind === AddrKind.UNICAST) {
      DeviceStats.inc(s, ionic_lif_stats.rx_ucast_drop_packets);
      DeviceStats.inc(s, ionic_lif_stats.rx_ucast_drop_bytes, bytes);
    } else if (kind === AddrKind.MULTICAST) {
      DeviceStats.inc(s, ionic_lif_stats.rx_mcast_drop_packets);
      DeviceStats.inc(s, ionic_lif_stats.rx_mcast_drop_bytes, bytes);
    } else {
      DeviceStats.inc(s, ionic_lif_stats.rx_bcast_drop_packets);
      DeviceStats.inc(s, ionic_lif_stats.rx_bcast_drop_bytes, bytes);
    }
    if (why === 'no-buffer') DeviceStats.inc(s, ionic_lif_stats.rx_queue_empty);
    else if (why === 'disabled') DeviceStats.inc(s, ionic_lif_stats.rx_queue_disabled);
    else DeviceStats.inc(s, ionic_lif_stats.rx_dma_error);
    DeviceStats.inc(this.port, ionic_port_stats.frames_rx_all);
    DeviceStats.inc(this.port, ionic_port_stats.octets_rx_all, bytes);
    this.changed();
  }

  txFrame(kind: AddrKind, bytes: number): void {
    const s = this.lif;
    if (kind === AddrKind.UNICAST) {
      DeviceStats.inc(s, ionic_lif_stats.tx_ucast_packets);
      DeviceStats.inc(s, ionic_lif_stats.tx_ucast_bytes, bytes);
      DeviceStats.inc(this.port, ionic_port_stats.frames_tx_unicast);
    } else if (kind === AddrKind.MULTICAST) {
      DeviceStats.inc(s, ionic_lif_stats.tx_mcast_packets);
      DeviceStats.inc(s, ionic_lif_stats.tx_mcast_bytes, bytes);
      DeviceStats.inc(this.port, ionic_port_stats.frames_tx_multicast);
    } else {
      DeviceStats.inc(s, ionic_lif_stats.tx_bcast_packets);
      DeviceStats.inc(s, ionic_lif_stats.tx_bcast_bytes, bytes);
      DeviceStats.inc(this.port, ionic_port_stats.frames_tx_broadcast);
    }
    DeviceStats.inc(this.port, ionic_port_stats.frames_tx_ok);
    DeviceStats.inc(this.port, ionic_port_stats.frames_tx_all);
    DeviceStats.inc(this.port, ionic_port_stats.octets_tx_ok, bytes);
    DeviceStats.inc(this.port, ionic_port_stats.octets_tx_total, bytes);
    this.changed();
  }

  txDrop(kind: AddrKind, bytes: number, why: 'error' | 'desc'): void {
    const s = this.lif;
    if (kind === AddrKind.UNICAST) {
      DeviceStats.inc(s, ionic_lif_stats.tx_ucast_drop_packets);
      DeviceStats.inc(s, ionic_lif_stats.tx_ucast_drop_bytes, bytes);
    } else if (kind === AddrKind.MULTICAST) {
      DeviceStats.inc(s, ionic_lif_stats.tx_mcast_drop_packets);
      DeviceStats.inc(s, ionic_lif_stats.tx_mcast_drop_bytes, bytes);
    } else {
      DeviceStats.inc(s, ionic_lif_stats.tx_bcast_drop_packets);
      DeviceStats.inc(s, ionic_lif_stats.tx_bcast_drop_bytes, bytes);
    }
    DeviceStats.inc(s, why === 'desc' ? ionic_lif_stats.tx_desc_data_error : ionic_lif_stats.tx_queue_error);
    DeviceStats.inc(this.port, ionic_port_stats.frames_tx_bad);
    DeviceStats.inc(this.port, ionic_port_stats.frames_tx_all);
    this.changed();
  }

  count(field: Field, by = 1): void {
    DeviceStats.inc(this.lif, field, by);
    this.changed();
  }

  /** Something changed: make sure one write is scheduled. */
  changed(): void {
    this.#dirty = true;
    if (this.#timer || (!this.lifInfoPa && !this.portInfoPa)) return;
    this.#timer = guardedTimeout(this.log, 'ionic stats write', this.intervalMs, () => {
      this.#timer = null;
      this.flush();
    });
    this.#timer.unref?.();
  }

  /** Write both blocks now (also used at LIF_INIT/PORT_INIT and by tests). */
  flush(): void {
    // A flush writes everything, so a write still scheduled would only wake an
    // idle device for nothing (an idle device schedules nothing): disarm it.
    if (this.#timer) {
      clearTimeout(this.#timer);
      this.#timer = null;
    }
    const mem = this.memory();
    if (!mem || !this.#dirty) return;
    this.#dirty = false;
    if (this.lifInfoPa) {
      fill(this.#lifBlock, this.lif);
      mem.write(this.lifInfoPa + ionic_lif_info.STATS, this.#lifBlock);
    }
    if (this.portInfoPa) {
      fill(this.#portBlock, this.port);
      mem.write(this.portInfoPa + ionic_port_info.STATS, this.#portBlock);
    }
    this.writes++;
  }

  /** Mark for a write at the next flush even without new counts. */
  markDirty(): void {
    this.#dirty = true;
  }

  /** Stop writing into guest memory (LIF_RESET, PORT_RESET, RESET, disconnect). */
  stop(which: 'lif' | 'port' | 'both'): void {
    if (which !== 'port') this.lifInfoPa = 0;
    if (which !== 'lif') this.portInfoPa = 0;
    if (!this.lifInfoPa && !this.portInfoPa && this.#timer) {
      clearTimeout(this.#timer);
      this.#timer = null;
    }
  }

  /** RESET zeroes every counter; PORT_RESET only the port's. */
  clear(which: 'all' | 'port'): void {
    if (which === 'all') this.lif.fill(0);
    this.port.fill(0);
  }

  /** Whether a write is scheduled (for the idle test). */
  get scheduled(): boolean {
    return this.#timer !== null;
  }
}

/** One u64 counter of a stats block (the blocks are arrays of them). */
const COUNTER = le(0, 8);

function fill(block: Buffer, values: Float64Array): void {
  for (let i = 0; i < values.length; i++) setField(block, i * 8, COUNTER, values[i]!);
}
