// A guest model of ionic.ko: drives the emulated NIC the way the stock Linux
// driver does, through a real vfio-user socket and memfd guest RAM.
//
// Written from the driver's point of view (docs/driver-contract.md, part E):
// commands are built and completions parsed here with our own offsets
// (./regs.ts), never with lib/ionic's layouts or helpers, so a misreading of
// the contract in lib/ionic fails a test instead of being mirrored.
//
// How it works, as the driver does:
// - Device commands: data window, 64-byte command, done = 0, doorbell = 1,
//   then poll `done` by reading it (each read is a REGION_READ round trip).
// - BAR writes are posted (NO_REPLY), as QEMU sends memory-BAR writes; any
//   later read is ordered after them.
// - Interrupts: one eventfd per MSI-X vector, watched with native.watch. The
//   callback drains the eventfd and runs that vector's "NAPI": it walks the
//   CQs by color, completes descriptors, refills RX, and returns credits with
//   UNMASK | RESET_COALESCE. Waiting callers are woken after each pass.
// - Anything the device does that the driver would choke on (a bad color,
//   comp_index out of range or out of order, a length past the buffer) is
//   recorded in `violations`; tests assert it stays empty.
//
// Split by job: bytes.ts (our little-endian helpers, command and TX
// descriptor builders), types.ts (records), bus.ts (RAM, MMIO, doorbells,
// discovery), interrupts.ts (eventfds, interrupt registers, waitFor),
// commands.ts (device commands, admin and notify queues), probe.ts
// (ionic_probe, LIF commands), ionic-guest.ts (open, TX/RX, teardown).

export { command, putU64, txCmd, txDesc } from './bytes';
export { IonicGuest } from './ionic-guest';
export type { GuestOptions, RxFrame } from './types';
