// npm run fuzz -- [--seed N] [--seconds S] [--epoch-actions N] [--log-level L]
// Runs the live-path fuzzer (live-fuzzer.ts) against an in-process server
// for a wall-clock budget, prints progress once per epoch and a summary, and
// exits 1 with the seed and the last actions on a finding, so a failure can be
// replayed with the same seed.

import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { createLogger, LOG_LEVELS, LogLevel } from '../../lib/log';
import { FuzzFinding, LiveFuzzStats, runLiveFuzz } from './live-fuzzer';

function summary(s: LiveFuzzStats): string {
  const acts = Object.entries(s.actions).map(([k, n]) => `${k} ${n}`).join(', ');
  const total = Object.values(s.actions).reduce((a, b) => a + b, 0);
  return `seed ${s.seed}: ${s.epochs} epochs, ${total} actions (${acts}); guests closed by the server ${s.closedByServer}, models lost ${s.modelLost}; QPs revived ${s.revived}; ${(s.elapsedMs / 1000).toFixed(1)} s`;
}

async function main(): Promise<void> {
  const argv = await yargs(hideBin(process.argv))
    .scriptName('npm run fuzz --')
    .usage('$0 [options]\n\nFuzz the live path (vfio-user messages, BAR0, doorbells, Ethernet and RDMA admin commands, WQEs) of an in-process server. A finding exits 1 and prints the seed to replay it.')
    .option('seed', { type: 'number', describe: 'PRNG seed (default: from the clock, printed)' })
    .option('seconds', { type: 'number', default: 60, describe: 'wall-clock budget' })
    .option('epoch-actions', { type: 'number', default: 300, describe: 'actions per guest before a fresh guest boots' })
    .option('log-level', { choices: LOG_LEVELS, default: 'none' as LogLevel, describe: 'the server\'s log level (to stderr)' })
    .example('$0 --seconds 600', 'ten minutes from a clock seed')
    .example('$0 --seed 1234 --seconds 30 --log-level warn', 'replay seed 1234 with the server\'s warnings shown')
    .strict()
    .help()
    .parseAsync();
  const seed = argv.seed ?? (Date.now() & 0x7fffffff);
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) throw new Error(`--seed ${seed}: expected an integer from 0 to 4294967295`);
  if (!(argv.seconds > 0)) throw new Error(`--seconds ${argv.seconds}: expected a positive number`);
  const log = createLogger({ level: argv['log-level'] });
  process.stdout.write(`fuzzing the live path for ${argv.seconds} s, seed ${seed}\n`);
  let shown = 0;
  const stats = await runLiveFuzz({
    seed, ms: argv.seconds * 1000, actionsPerEpoch: argv['epoch-actions'], log,
    onEpoch: (s) => {
      // Progress about once a second.
      if (s.elapsedMs - shown < 1000) return;
      shown = s.elapsedMs;
      process.stdout.write(`  ${summary(s)}\n`);
    },
  });
  process.stdout.write(`no findings. ${summary(stats)}\n`);
}

main().catch((e: unknown) => {
  if (e instanceof FuzzFinding) process.stderr.write(`FINDING: ${e.message}\nreplay: npm run fuzz -- --seed ${e.seed}\n`);
  else process.stderr.write(`${e instanceof Error ? e.stack ?? e.message : String(e)}\n`);
  process.exit(1);
});
