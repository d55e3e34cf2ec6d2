// npm run fuzz -- [--target NAME|all] [--seed N] [--seconds S] [--log-level L]
// Runs fuzz targets (./targets/) against real components in this process for a
// wall-clock budget each, prints progress about once a second and a summary
// with the longest event-loop turn seen, and exits 1 with the seed on a
// finding, so it can be replayed.

import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { conventions, intCoerce } from '../../lib/cli/options';
import { createLogger, LOG_LEVELS, LogLevel } from '../../lib/log';
import { LoopWatch } from '../../lib/ops/loop-watch';
import './targets/all';
import { FUZZ_TARGETS, FuzzFinding } from './targets';

async function main(): Promise<void> {
  const names = [...FUZZ_TARGETS.keys()];
  const argv = await conventions(
    yargs(hideBin(process.argv))
      .scriptName('npm run fuzz --')
      .usage(
        `$0 [options]\n\nFuzz the server's inputs with real components in this process. A finding exits 1 and prints the seed to replay it.\n\nTargets:\n${[...FUZZ_TARGETS.values()].map((t) => `  ${t.name.padEnd(8)} ${t.describe}`).join('\n')}`,
      )
      .option('target', {
        alias: 't',
        choices: [...names, 'all'],
        default: 'live',
        describe: 'which target (all: each for --seconds)',
      })
      .option('seed', {
        type: 'string',
        coerce: intCoerce('seed', 0, 0xffffffff),
        describe: 'PRNG seed (default: from the clock, printed)',
      })
      .option('turn-limit', {
        type: 'string',
        default: '50',
        coerce: intCoerce('turn-limit', 1, 60000, 'milliseconds'),
        describe: 'a loop turn longer than this is a finding',
      })
      .option('seconds', {
        type: 'string',
        default: '60',
        coerce: intCoerce('seconds', 1, 86400),
        describe: 'wall-clock budget per target',
      })
      .option('log-level', {
        choices: LOG_LEVELS,
        default: 'none' as LogLevel,
        describe: "the server's log level (to stderr)",
      })
      .example('$0 --seconds 600', 'ten minutes of the live path from a clock seed')
      .example('$0 --target all --seconds 600', 'ten minutes of each target')
      .example(
        '$0 --target live --seed 1234 --seconds 30 --log-level warn',
        "replay seed 1234 with the server's warnings shown",
      ),
    'fuzz',
  ).parseAsync();
  const chosen = argv.target === 'all' ? names : [argv.target];
  const seed = argv.seed ?? Date.now() & 0x7fffffff;
  const log = createLogger({ level: argv['log-level'] });
  for (const n of chosen) {
    const t = FUZZ_TARGETS.get(n)!;
    process.stdout.write(`fuzzing ${n} for ${argv.seconds} s, seed ${seed}\n`);
    const watch = new LoopWatch();
    const t0 = Date.now();
    try {
      const summary = await t.run({
        seed,
        ms: argv.seconds * 1000,
        log,
        progress: (line) => process.stdout.write(`  ${n}: ${line}; longest loop turn ${watch.maxMs.toFixed(1)} ms\n`),
        longestTurnMs: () => watch.maxMs,
        turnLimitMs: argv['turn-limit'],
      });
      process.stdout.write(
        `no findings in ${n}. seed ${seed}: ${summary}; ${((Date.now() - t0) / 1000).toFixed(1)} s; longest loop turn ${watch.maxMs.toFixed(1)} ms (p99 ${watch.p99Ms.toFixed(1)} ms)\n`,
      );
    } catch (e) {
      if (e instanceof FuzzFinding)
        process.stderr.write(`FINDING in ${n}: ${e.message}\nreplay: npm run fuzz -- --target ${n} --seed ${e.seed}\n`);
      throw e;
    } finally {
      watch.stop();
    }
  }
}

main().catch((e: unknown) => {
  if (!(e instanceof FuzzFinding)) process.stderr.write(`${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exit(1);
});
