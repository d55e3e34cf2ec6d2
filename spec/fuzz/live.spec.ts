// The live-path fuzzer, briefly (a few seconds per seed): what `npm run fuzz`
// runs for as long as one likes. Each run must end without a finding, and the
// mix must really reach every layer and make the server refuse things.

import { expect } from 'chai';
import { ACTIONS, runLiveFuzz } from './live-fuzzer';

describe('live-path fuzz (short; npm run fuzz for long runs)', function () {
  this.timeout(120_000);
  for (const seed of [1, 0x5eed]) {
    it(`seed ${seed}: 4 s of random messages, MMIO, doorbells, admin commands and WQEs; the server serves a fresh guest after`, async () => {
      const s = await runLiveFuzz({ seed, ms: 4000, actionsPerEpoch: 150 });
      for (const a of ACTIONS) expect(s.actions[a], `${a} actions`).to.be.greaterThan(0);
      expect(s.epochs).to.be.greaterThan(0);
    });
  }
});
