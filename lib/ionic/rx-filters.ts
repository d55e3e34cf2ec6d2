// A LIF's receive mode and filter table (RX_MODE_SET, RX_FILTER_ADD/DEL):
// which destination addresses the guest wants frames for. Filter ids are
// the device's; MAC filters are also kept in a set for the per-frame check.

import { RxFilterMatch, RxMode } from './constants';
import { AddrKind } from './frames';

interface RxFilter {
  readonly match: number;
  /** Hex of the address (MAC and MAC-VLAN filters). */
  readonly mac?: string;
  readonly vlan?: number;
}

export class RxFilters {
  /** RxMode bits from RX_MODE_SET. */
  mode = 0;
  readonly table = new Map<number, RxFilter>();
  #nextId = 1;
  readonly #macs = new Set<string>();

  clear(): void {
    this.table.clear();
    this.#macs.clear();
    this.mode = 0;
  }

  hasMac(mac: Buffer): boolean {
    const key = mac.toString('hex');
    for (const f of this.table.values()) if (f.match === RxFilterMatch.MAC && f.mac === key) return true;
    return false;
  }

  addMac(mac: Buffer): number {
    const id = this.#nextId++;
    const key = mac.toString('hex');
    this.table.set(id, { match: RxFilterMatch.MAC, mac: key });
    this.#macs.add(key);
    return id;
  }

  addOther(match: number, vlan?: number): number {
    const id = this.#nextId++;
    this.table.set(id, { match, ...(vlan !== undefined ? { vlan } : {}) });
    return id;
  }

  delete(id: number): boolean {
    const f = this.table.get(id);
    if (!f) return false;
    this.table.delete(id);
    if (f.mac && ![...this.table.values()].some((o) => o.mac === f.mac)) this.#macs.delete(f.mac);
    return true;
  }

  /** Does the mode and filter set accept a frame with this destination, for a LIF whose station address is `station`? */
  accepts(frame: Buffer, kind: AddrKind, station: Buffer): boolean {
    const mode = this.mode;
    if (mode & RxMode.PROMISC) return true;
    if (kind === AddrKind.BROADCAST) return (mode & RxMode.BROADCAST) !== 0;
    if (kind === AddrKind.MULTICAST)
      return (mode & RxMode.ALLMULTI) !== 0 || this.#macs.has(frame.toString('hex', 0, 6));
    if (!(mode & RxMode.UNICAST)) return false;
    // The station address, compared in place (most frames): no string per frame.
    return station.compare(frame, 0, 6) === 0 || this.#macs.has(frame.toString('hex', 0, 6));
  }
}
