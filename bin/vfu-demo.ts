#!/usr/bin/env node
// Serve the demo PCIe device (lib/examples/demo-device.ts) over vfio-user.
// A way to try the library with QEMU before the NIC exists, and the device of
// the library's VM test.

import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { createLogger, LOG_LEVELS, LogLevel } from '../lib/log';
import { VfioUserServer } from '../lib/vfio-user/server';
import { createDemoDevice } from '../lib/examples/demo-device';

async function main(): Promise<void> {
  const argv = await yargs(hideBin(process.argv))
    .scriptName('vfu-demo')
    .usage('$0 [options]\n\nServe a small demo PCIe device (1dd8:ee01: scratch registers, 8 MSI-X vectors,\nPCIe 4.0 x16) on a vfio-user socket, one QEMU at a time.')
    .option('socket', { alias: 's', type: 'string', default: '/tmp/vfu-demo.sock', describe: 'UNIX socket path QEMU connects to' })
    .option('mode', { type: 'string', describe: 'socket file mode, octal (e.g. 660)' })
    .option('group', { type: 'string', describe: 'group owning the socket file' })
    .option('log-level', { alias: 'L', choices: LOG_LEVELS as LogLevel[], default: (process.env.ERNIC_LOG_LEVEL as LogLevel | undefined) ?? 'info', describe: 'log verbosity (also ERNIC_LOG_LEVEL)' })
    .example('$0 --socket /tmp/demo.sock', 'serve the device')
    .epilog('QEMU: guest RAM must be shared (memory-backend-memfd,share=on), then\n  -device {"driver":"vfio-user-pci","socket":{"path":"/tmp/demo.sock","type":"unix"}}')
    .strict()
    .help()
    .parseAsync();

  if (argv.mode !== undefined && !/^[0-7]{3,4}$/.test(argv.mode)) {
    console.error(`vfu-demo: --mode ${argv.mode}: expected an octal mode such as 660`);
    process.exit(2);
  }
  const log = createLogger({ level: argv['log-level'] });
  const server = new VfioUserServer({
    socketPath: argv.socket, device: createDemoDevice(), log,
    ...(argv.mode !== undefined ? { mode: parseInt(argv.mode, 8) } : {}),
    ...(argv.group !== undefined ? { group: argv.group } : {}),
  });
  try {
    await server.listen();
  } catch (e) {
    console.error(`vfu-demo: cannot listen on ${argv.socket}: ${(e as Error).message}`);
    process.exit(2);
  }
  log.info(`vfu-demo: serving on ${argv.socket}`);
  const stop = (sig: string): void => {
    log.info(`vfu-demo: ${sig}, shutting down`);
    server.close();
    process.exit(0);
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

main().catch((e: unknown) => {
  console.error(`vfu-demo: ${(e as Error).message}`);
  process.exit(1);
});
