import { expect } from 'chai';
import { envChoice, envNumber } from '../../bench/support/env';

describe('bench/support/env: benchmark knobs from the environment', () => {
  const NAME = 'ERNIC_SPEC_BENCH_KNOB';
  afterEach(() => {
    delete process.env[NAME];
  });

  it('gives the default when unset or empty, the value when in range', () => {
    expect(envNumber(NAME, 16, 1, 32)).to.equal(16);
    process.env[NAME] = ' ';
    expect(envNumber(NAME, 16, 1, 32)).to.equal(16);
    process.env[NAME] = '32';
    expect(envNumber(NAME, 16, 1, 32)).to.equal(32);
    process.env[NAME] = '0.5';
    expect(envNumber(NAME, 3, 0.1, 10, false)).to.equal(0.5);
  });

  it('refuses what is not a number, out of range or not an integer, naming the variable', () => {
    for (const bad of ['abc', 'NaN', 'Infinity', '0', '33', '1.5']) {
      process.env[NAME] = bad;
      expect(() => envNumber(NAME, 16, 1, 32), bad).to.throw(
        `${NAME}="${bad}": want an integer from 1 to 32 (default 16)`,
      );
    }
    process.env[NAME] = '-1';
    expect(() => envNumber(NAME, 3, 0.1, 10, false)).to.throw(`${NAME}="-1": want a number from 0.1 to 10 (default 3)`);
  });

  it('takes one of the choices, the first by default, and refuses others', () => {
    expect(envChoice(NAME, ['nap', 'sleep'])).to.equal('nap');
    process.env[NAME] = 'sleep';
    expect(envChoice(NAME, ['nap', 'sleep'])).to.equal('sleep');
    process.env[NAME] = 'Sleep';
    expect(() => envChoice(NAME, ['nap', 'sleep'])).to.throw(`${NAME}="Sleep": want one of nap, sleep (default nap)`);
  });
});
