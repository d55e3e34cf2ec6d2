#!/usr/bin/env node
// Serve the demo PCIe device (lib/examples/demo-device.ts) over vfio-user.
// A way to try the library with QEMU before the NIC exists, and the device of
// the library's VM test.

import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { conventions } from '../lib/cli/options';
import { createLogger, LOG_LEVELS, LogLevel } from '../lib/log';
import { VfioUserServer } from '../lib/vfio-user/server';
import { createDemoDevice } from '../lib/examples/demo-device';

/** How long a stopping server may take to write its last lines before it exits anyway. */
const EXIT_GRACE_MS = 2000;

/** A socket file mode as typed: octal, three or four digits (660, 0660). */
function octalMode(text: unknown): number {
  if (Array.isArray(text)) throw new Error('--socket-mode given more than once (it takes one value)');
  const s = String(text);
  if (!/^[0-7]{3,4}$/.test(s)) throw new Error(`--socket-mode ${s}: expected an octal mode such as 660`);
  return parseInt(s, 8);
}

async function main(): Promise<void> {
  const argv = await conventions(yargs(hideBin(process.argv)), 'vfu-demo')
    .scriptName('vfu-demo')
    .usage(
      '$0 [options]\n\nServe a small demo PCIe device (1dd8:ee01: scratch registers, 8 MSI-X vectors,\nPCIe 4.0 x16) on a vfio-user socket, one QEMU at a time.',
    )
    .option('socket', {
      alias: 's',
      type: 'string',
      default: '/tmp/vfu-demo.sock',
      describe: 'UNIX socket path QEMU connects to',
    })
    // --mode and --group were this command's first names for these; kept so that scripts using them still work.
    .option('socket-mode', {
      alias: 'mode',
      type: 'string',
      coerce: octalMode,
      describe: 'socket file mode, octal (e.g. 660)',
    })
    .option('socket-group', {
      alias: 'group',
      type: 'string',
      describe: 'group owning the socket file (name or number)',
    })
    .option('log-level', {
      alias: 'L',
      choices: LOG_LEVELS as LogLevel[],
      default: (process.env.ERNIC_LOG_LEVEL as LogLevel | undefined) ?? 'info',
      describe: 'log verbosity (also ERNIC_LOG_LEVEL)',
    })
    .epilog(
      [
        'Example:',
        '  $0 --socket /tmp/demo.sock --socket-mode 660 --socket-group kvm',
        '',
        'QEMU: guest RAM must be shared (memory-backend-memfd,share=on), then',
        '  -device \\',
        '  \'{"driver":"vfio-user-pci","socket":{"path":"/tmp/demo.sock","type":"unix"}}\'',
        '',
        '--mode and --group are older names of --socket-mode and --socket-group.',
      ].join('\n'),
    )
    .parseAsync();

  const log = createLogger({ level: argv['log-level'] });
  const server = new VfioUserServer({
    socketPath: argv.socket,
    device: createDemoDevice(),
    log,
    ...(argv['socket-mode'] !== undefined ? { mode: argv['socket-mode'] } : {}),
    ...(argv['socket-group'] !== undefined ? { group: argv['socket-group'] } : {}),
  });
  // Signals are ours before the socket file appears: a SIGTERM right after it shows up
  // must still shut down cleanly (status 0, socket removed), not kill the process by default.
  let stopping = false;
  let listening = false;
  const stop = (sig: string): void => {
    if (stopping) return;
    stopping = true;
    log.info(`vfu-demo: ${sig}, shutting down`);
    if (listening) server.close();
    // The logger writes asynchronously: let the loop drain rather than exit at once, with a bound.
    process.exitCode = 0;
    setTimeout(() => process.exit(0), EXIT_GRACE_MS).unref();
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
  try {
    await server.listen();
  } catch (e) {
    console.error(`vfu-demo: cannot listen on ${argv.socket}: ${(e as Error).message}`);
    process.exit(2);
  }
  listening = true;
  if (stopping) {
    server.close(); // the signal came while listen() was under way
    return;
  }
  log.info(`vfu-demo: serving on ${argv.socket}`);
}

main().catch((e: unknown) => {
  console.error(`vfu-demo: ${(e as Error).message}`);
  process.exit(1);
});
