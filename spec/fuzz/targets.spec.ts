// Every fuzz target runs briefly from a fixed seed in the suite, so a target
// that no longer starts, or that finds something on its first seconds, fails
// the tests; `npm run fuzz -- --target NAME --seconds 600` is the long run.
import { expect } from 'chai';
import { nullLogger } from '../../lib/log';
import { LoopWatch } from '../../lib/ops/loop-watch';
import './targets/all';
import { FUZZ_TARGETS } from './targets';

describe('fuzz targets: a short run of each', function () {
  this.timeout(120_000);
  it('has the targets the runner offers', () => {
    expect([...FUZZ_TARGETS.keys()]).to.include.members(['live', 'mesh']);
  });
  for (const [name, target] of FUZZ_TARGETS) {
    if (name === 'live') continue; // spec/fuzz/live.spec.ts runs it with its own checks
    it(`${name}: 3 s from seed 42, no findings (a loop held over 1 s counts), and it reports what it did`, async () => {
      const watch = new LoopWatch();
      const lines: string[] = [];
      try {
        const summary = await target.run({
          seed: 42,
          ms: 3000,
          log: nullLogger,
          progress: (l) => lines.push(l),
          longestTurnMs: () => watch.maxMs,
          turnLimitMs: 1000,
        });
        expect(summary).to.match(/\d/); // counts of what it did
        console.log(`      ${name}: ${summary}; longest loop turn ${watch.maxMs.toFixed(1)} ms`);
      } finally {
        watch.stop();
      }
    });
  }
});
