// The server side of the protocol benchmark, run as its own process so that it
// has its own event loop (as it has in production): our vfio-user server with
// a device whose BAR0 is 4 KiB of memory. Prints "ready" when listening.
import { VfioUserServer } from '../../lib/vfio-user/server';
import type { RegionHandler, VfioUserDevice } from '../../lib/vfio-user/device';

const bytes = Buffer.alloc(4096);
const bar0: RegionHandler = {
  size: bytes.length, readable: true, writable: true,
  read(offset, dst) { bytes.copy(dst, 0, offset, offset + dst.length); return 0; },
  write(offset, src) { src.copy(bytes, offset); return 0; },
};
const device: VfioUserDevice = {
  resetSupported: true,
  region: (i) => (i === 0 ? bar0 : undefined),
  irqCount: () => 0,
  attach() {}, detach() {}, reset() {},
};

async function main(): Promise<void> {
  const path = process.argv[2];
  if (!path) throw new Error('usage: bench-server SOCKET');
  const server = new VfioUserServer({ socketPath: path, device });
  await server.listen();
  server.onDisconnect(() => { server.close(); process.exit(0); });
  process.stdout.write('ready\n');
}

main().catch((e: unknown) => { console.error(e); process.exit(1); });
