// The server side of the protocol benchmark, run as its own process so that it
// has its own event loop (as it has in production): our vfio-user server with
// a device whose BAR0 is 4 KiB of memory, started as bin/rocm-ernic.ts starts
// the real one (warm-up on its device before listening). Prints "ready" when
// listening.
import '../../lib/latency-flags';
import { VfioUserServer } from '../../lib/vfio-user/server';
import type { RegionHandler, VfioUserDevice } from '../../lib/vfio-user/device';

const bytes = Buffer.alloc(4096);
const bar0: RegionHandler = {
  size: bytes.length,
  readable: true,
  writable: true,
  // Byte loops: Buffer.copy makes a view object per call (Node 20), garbage a device need not make.
  read(offset, dst) {
    for (let i = 0; i < dst.length; i++) dst[i] = bytes[offset + i]!;
    return 0;
  },
  write(offset, src) {
    for (let i = 0; i < src.length; i++) bytes[offset + i] = src[i]!;
    return 0;
  },
};
const device: VfioUserDevice = {
  resetSupported: true,
  region: (i) => (i === 0 ? bar0 : undefined),
  irqCount: () => 0,
  attach() {},
  detach() {},
  reset() {},
};

async function main(): Promise<void> {
  const path = process.argv[2];
  if (!path) throw new Error('usage: bench-server SOCKET');
  const server = new VfioUserServer({
    socketPath: path,
    device,
    warmUp: { reads: [{ region: 0, offset: 0, count: 4 }], writes: [{ region: 0, offset: 64, count: 4 }] },
  });
  await server.listen();
  server.onDisconnect(() => {
    server.close();
    process.exit(0);
  });
  process.stdout.write('ready\n');
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
