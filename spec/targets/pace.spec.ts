// The pacer shared by the targets (lib/targets/pace.ts): steps run a bounded
// time per turn and timers run between turns; jobs take turns; a step that
// throws fails its job only; the paced helpers give what their one-call
// counterparts give. And the NVMe-oF DSM range merge that keeps 256 ranges
// over one namespace a single fill.

import { expect } from 'chai';
import { createHash } from 'crypto';
import { concatPaced, digestPaced, fillPaced, Pacer, Serial } from '../../lib/targets/pace';
import { mergeRanges } from '../../lib/targets/nvmeof/io';

/** Spin for `ms` of wall time (a step that costs that much). */
function spin(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    /* busy */
  }
}

describe('targets: the pacer', () => {
  it('runs steps about its budget per turn; a timer due meanwhile runs between turns', async () => {
    const p = new Pacer(4);
    let steps = 0;
    let timerRanAfter = -1;
    await p.run(() => {
      // Armed by the first step, so on a slow machine it cannot fire before the job starts.
      if (steps === 0) {
        setTimeout(() => {
          timerRanAfter = steps;
        }, 1);
      }
      spin(1);
      return ++steps >= 40;
    });
    expect(steps).to.equal(40);
    expect(p.counts.turns).to.be.at.least(8); // 40 ms of steps, ~4 ms a turn
    expect(timerRanAfter, 'the timer ran before the job was done').to.be.within(1, 39);
    expect(p.counts.longestTurnMs).to.be.below(40);
  });

  it('jobs take turns in arrival order; a step that throws fails its own job only', async () => {
    const p = new Pacer(1000);
    const order: string[] = [];
    const mk = (name: string, n: number): (() => boolean) => {
      let i = 0;
      return () => {
        order.push(`${name}${i}`);
        return ++i >= n;
      };
    };
    const a = p.run(mk('a', 3));
    const b = p.run(() => {
      throw new Error('boom');
    });
    const c = p.run(mk('c', 2));
    await a;
    await c;
    const err = await b.then(
      () => null,
      (e: unknown) => e,
    );
    expect(String(err)).to.match(/boom/);
    expect(order).to.deep.equal(['a0', 'c0', 'a1', 'c1', 'a2']);
  });

  it('start(): a job of one step is done at once, without waiting for a turn', async () => {
    const p = new Pacer();
    let ran = false;
    const done = p.start(() => {
      ran = true;
      return true;
    });
    expect(ran).to.equal(true);
    await done;
    expect(p.counts.turns).to.equal(0);
  });

  it('the helpers give what one call gives: fill, concat, digests', async () => {
    const p = new Pacer(1);
    const big = Buffer.alloc(40 * 1024 * 1024, 7);
    await fillPaced(big, 0, 1000, big.length - 1000, p);
    expect([big[999], big[1000], big[big.length - 1001], big[big.length - 1000]]).to.deep.equal([7, 0, 0, 7]);
    const parts = Array.from({ length: 300 }, (_, i) => Buffer.alloc(i * 100 + 1, i & 0xff));
    expect((await concatPaced(parts, p)).equals(Buffer.concat(parts))).to.equal(true);
    const data = Buffer.alloc(3 * 1024 * 1024);
    for (let i = 0; i < data.length; i += 997) data[i] = i & 0xff;
    const md5 = createHash('md5');
    const sha = createHash('sha256');
    await digestPaced(data, [md5, sha], p);
    expect([md5.digest('hex'), sha.digest('hex')]).to.deep.equal([
      createHash('md5').update(data).digest('hex'),
      createHash('sha256').update(data).digest('hex'),
    ]);
    expect(p.counts.steps).to.be.greaterThan(10);
  });

  it('Serial runs jobs one after another, in order, a failure not stopping the next', async () => {
    const s = new Serial();
    const seen: number[] = [];
    const job =
      (n: number, fail = false) =>
      async (): Promise<number> => {
        seen.push(n);
        await new Promise((r) => setImmediate(r));
        seen.push(-n);
        if (fail) throw new Error(`job ${n}`);
        return n;
      };
    const r = await Promise.allSettled([s.run(job(1)), s.run(job(2, true)), s.run(job(3))]);
    expect(seen).to.deep.equal([1, -1, 2, -2, 3, -3]);
    expect(r.map((x) => x.status)).to.deep.equal(['fulfilled', 'rejected', 'fulfilled']);
  });
});

describe('nvmeof: Dataset Management ranges merged', () => {
  it('sorted, overlapping and adjacent ranges joined, gaps kept', () => {
    expect(
      mergeRanges([
        { slba: 10, nlb: 5 },
        { slba: 0, nlb: 4 },
        { slba: 4, nlb: 2 },
        { slba: 12, nlb: 10 },
        { slba: 30, nlb: 1 },
      ]),
    ).to.deep.equal([
      { slba: 0, nlb: 6 },
      { slba: 10, nlb: 12 },
      { slba: 30, nlb: 1 },
    ]);
    const whole = Array.from({ length: 256 }, () => ({ slba: 0, nlb: 131072 }));
    expect(mergeRanges(whole)).to.deep.equal([{ slba: 0, nlb: 131072 }]);
    expect(mergeRanges([])).to.deep.equal([]);
  });
});
