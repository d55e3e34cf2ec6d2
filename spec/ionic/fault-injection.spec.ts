import { expect } from 'chai';
import {
  FAULT_EVENTS,
  FaultInjector,
  INJECT_HELP,
  InjectSpecError,
  MAX_AT_ENTRIES,
  isFaultEvent,
} from '../../lib/ionic/fault-injection';
import type { FaultEvent } from '../../lib/ionic/fault-injection';

/** Feeds `count` occurrences of `event` and returns the (1-based) occurrences that failed. */
function failing(inj: FaultInjector, event: FaultEvent, count: number): number[] {
  const out: number[] = [];
  for (let n = 1; n <= count; n++) if (inj.fail(event)) out.push(n);
  return out;
}

function failingFor(specs: readonly string[], event: FaultEvent, count: number): number[] {
  return failing(FaultInjector.parse(specs), event, count);
}

/** 1..n */
function range(from: number, to: number): number[] {
  const out: number[] = [];
  for (let n = from; n <= to; n++) out.push(n);
  return out;
}

function parseError(specs: readonly string[]): InjectSpecError {
  try {
    FaultInjector.parse(specs);
  } catch (err) {
    expect(err).to.be.instanceOf(InjectSpecError);
    return err as InjectSpecError;
  }
  throw new Error(`parse(${JSON.stringify(specs)}) did not throw`);
}

function errorMessage(spec: string): string {
  return parseError([spec]).message;
}

const PATTERNS = '(patterns: every:N, run:N-M, run:N-, burst:K/M, at:N1/N2/...)';
const EVENTS = '(events: rx-lost, rx-nobuf, tx-drop, stats-vals-error)';

describe('ionic/fault-injection', () => {
  describe('events', () => {
    it('FAULT_EVENTS lists the four events in order', () => {
      expect(FAULT_EVENTS).to.deep.equal(['rx-lost', 'rx-nobuf', 'tx-drop', 'stats-vals-error']);
    });

    it('isFaultEvent accepts exactly those names', () => {
      expect(FAULT_EVENTS.map(isFaultEvent)).to.deep.equal([true, true, true, true]);
      expect(['rx-lots', 'RX-LOST', '', 'rx-lost ', 'stats'].map(isFaultEvent)).to.deep.equal([
        false,
        false,
        false,
        false,
        false,
      ]);
    });
  });

  describe('every:N', () => {
    it('every:7 over 40 events fails 7, 14, 21, 28, 35', () => {
      expect(failingFor(['rx-lost=every:7'], 'rx-lost', 40)).to.deep.equal([7, 14, 21, 28, 35]);
    });

    it('every:1 fails every event', () => {
      expect(failingFor(['tx-drop=every:1'], 'tx-drop', 30)).to.deep.equal([
        1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30,
      ]);
    });

    it('every:3 over 31 events', () => {
      expect(failingFor(['rx-nobuf=every:3'], 'rx-nobuf', 31)).to.deep.equal([3, 6, 9, 12, 15, 18, 21, 24, 27, 30]);
    });

    it('every:2^53-1 is accepted and fails nothing in the first 30', () => {
      const inj = FaultInjector.parse(['rx-lost=every:9007199254740991']);
      expect(failing(inj, 'rx-lost', 30)).to.deep.equal([]);
      expect(inj.active).to.equal(true);
      expect(inj.stats()[0]).to.deep.equal({ event: 'rx-lost', seen: 30, failed: 0 });
    });

    it('leading zeros are still decimal: every:007', () => {
      expect(failingFor(['rx-lost=every:007'], 'rx-lost', 30)).to.deep.equal([7, 14, 21, 28]);
    });
  });

  describe('run:N-M and run:N-', () => {
    it('run:5-9 over 30 events fails 5..9', () => {
      expect(failingFor(['tx-drop=run:5-9'], 'tx-drop', 30)).to.deep.equal([5, 6, 7, 8, 9]);
    });

    it('run:1-3 fails the first three', () => {
      expect(failingFor(['tx-drop=run:1-3'], 'tx-drop', 30)).to.deep.equal([1, 2, 3]);
    });

    it('run:12-12 fails only event 12', () => {
      expect(failingFor(['rx-lost=run:12-12'], 'rx-lost', 30)).to.deep.equal([12]);
    });

    it('run:28- fails every event from 28 on', () => {
      expect(failingFor(['rx-lost=run:28-'], 'rx-lost', 35)).to.deep.equal([28, 29, 30, 31, 32, 33, 34, 35]);
    });

    it('run:1- fails everything', () => {
      expect(failingFor(['rx-nobuf=run:1-'], 'rx-nobuf', 32)).to.deep.equal(range(1, 32));
    });

    it('run past the events seen fails nothing', () => {
      expect(failingFor(['rx-lost=run:31-40'], 'rx-lost', 30)).to.deep.equal([]);
    });
  });

  describe('burst:K/M', () => {
    it('burst:2/5 over 30 events', () => {
      expect(failingFor(['rx-lost=burst:2/5'], 'rx-lost', 30)).to.deep.equal([
        1, 2, 6, 7, 11, 12, 16, 17, 21, 22, 26, 27,
      ]);
    });

    it('burst:1/10 over 35 events', () => {
      expect(failingFor(['rx-lost=burst:1/10'], 'rx-lost', 35)).to.deep.equal([1, 11, 21, 31]);
    });

    it('burst:3/7 over 32 events (last window partial)', () => {
      expect(failingFor(['tx-drop=burst:3/7'], 'tx-drop', 32)).to.deep.equal([
        1, 2, 3, 8, 9, 10, 15, 16, 17, 22, 23, 24, 29, 30, 31,
      ]);
    });

    it('burst:4/4 fails everything', () => {
      expect(failingFor(['tx-drop=burst:4/4'], 'tx-drop', 30)).to.deep.equal(range(1, 30));
    });

    it('burst:1/1 fails everything', () => {
      expect(failingFor(['tx-drop=burst:1/1'], 'tx-drop', 30)).to.deep.equal(range(1, 30));
    });
  });

  describe('at:N1/N2/...', () => {
    it('at:1/4/9/16/25/31 over 40 events', () => {
      expect(failingFor(['rx-nobuf=at:1/4/9/16/25/31'], 'rx-nobuf', 40)).to.deep.equal([1, 4, 9, 16, 25, 31]);
    });

    it('at:2 fails only event 2', () => {
      expect(failingFor(['stats-vals-error=at:2'], 'stats-vals-error', 30)).to.deep.equal([2]);
    });

    it('entries beyond the events seen do not fire early', () => {
      expect(failingFor(['rx-lost=at:29/30/31/100'], 'rx-lost', 30)).to.deep.equal([29, 30]);
    });

    it(`accepts ${MAX_AT_ENTRIES} entries: odd events 1..1999`, () => {
      const odd: number[] = [];
      for (let n = 1; n < 2000; n += 2) odd.push(n);
      expect(odd.length).to.equal(1000);
      const inj = FaultInjector.parse([`rx-lost=at:${odd.join('/')}`]);
      expect(failing(inj, 'rx-lost', 2010)).to.deep.equal(odd);
      expect(inj.stats()[0]).to.deep.equal({ event: 'rx-lost', seen: 2010, failed: 1000 });
    });
  });

  describe('several patterns for one event', () => {
    it('every:10 + run:4-6 given as two elements', () => {
      expect(failingFor(['rx-lost=every:10', 'rx-lost=run:4-6'], 'rx-lost', 32)).to.deep.equal([4, 5, 6, 10, 20, 30]);
    });

    it('every:5 + overlapping at:5/7/10/11 in one comma list (at cursor keeps step)', () => {
      const inj = FaultInjector.parse(['rx-lost=every:5,rx-lost=at:5/7/10/11']);
      expect(failing(inj, 'rx-lost', 32)).to.deep.equal([5, 7, 10, 11, 15, 20, 25, 30]);
      expect(inj.stats()[0]).to.deep.equal({ event: 'rx-lost', seen: 32, failed: 8 });
    });

    it('burst:2/10 + run:15-16', () => {
      expect(failingFor(['tx-drop=burst:2/10', 'tx-drop=run:15-16'], 'tx-drop', 30)).to.deep.equal([
        1, 2, 11, 12, 15, 16, 21, 22,
      ]);
    });

    it('a comma list equals the same specs given as repeated --inject', () => {
      const a = failingFor(['rx-lost=at:3/4,rx-lost=every:8'], 'rx-lost', 30);
      const b = failingFor(['rx-lost=at:3/4', 'rx-lost=every:8'], 'rx-lost', 30);
      expect(a).to.deep.equal([3, 4, 8, 16, 24]);
      expect(b).to.deep.equal([3, 4, 8, 16, 24]);
    });

    it('the same spec twice counts each failing event once', () => {
      const inj = FaultInjector.parse(['rx-lost=every:4', 'rx-lost=every:4']);
      expect(failing(inj, 'rx-lost', 30)).to.deep.equal([4, 8, 12, 16, 20, 24, 28]);
      expect(inj.stats()[0]).to.deep.equal({ event: 'rx-lost', seen: 30, failed: 7 });
    });
  });

  describe('counters are per event', () => {
    it('interleaved events each count from 1', () => {
      const inj = FaultInjector.parse(['rx-lost=every:2', 'tx-drop=at:1/3']);
      const fails: string[] = [];
      for (let n = 1; n <= 30; n++) {
        for (const event of ['rx-lost', 'tx-drop', 'rx-nobuf'] as const) {
          if (inj.fail(event)) fails.push(`${event}#${n}`);
        }
      }
      expect(fails).to.deep.equal([
        'tx-drop#1',
        'rx-lost#2',
        'tx-drop#3',
        'rx-lost#4',
        'rx-lost#6',
        'rx-lost#8',
        'rx-lost#10',
        'rx-lost#12',
        'rx-lost#14',
        'rx-lost#16',
        'rx-lost#18',
        'rx-lost#20',
        'rx-lost#22',
        'rx-lost#24',
        'rx-lost#26',
        'rx-lost#28',
        'rx-lost#30',
      ]);
    });

    it('many events of one kind do not shift another', () => {
      const inj = FaultInjector.parse(['rx-lost=run:3-4', 'tx-drop=run:3-4']);
      expect(failing(inj, 'tx-drop', 50)).to.deep.equal([3, 4]);
      expect(failing(inj, 'rx-nobuf', 40)).to.deep.equal([]);
      expect(failing(inj, 'rx-lost', 30)).to.deep.equal([3, 4]);
      expect(failing(inj, 'stats-vals-error', 30)).to.deep.equal([]);
    });
  });

  describe('determinism', () => {
    const SPECS = ['rx-lost=burst:2/6', 'tx-drop=every:3', 'rx-nobuf=at:2/9'];
    const CYCLE: readonly FaultEvent[] = ['rx-lost', 'tx-drop', 'rx-lost', 'rx-nobuf'];

    /** 10 cycles of CYCLE (40 calls); returns the 1-based call positions that failed. */
    function drive(inj: FaultInjector): number[] {
      const out: number[] = [];
      for (let i = 0; i < 40; i++) if (inj.fail(CYCLE[i % CYCLE.length])) out.push(i + 1);
      return out;
    }

    // rx-lost is call 4c+1 (occurrence 2c+1) and 4c+3 (2c+2): occurrences 1,2,7,8,13,14,19,20
    //   -> calls 1,3,13,15,25,27,37,39
    // tx-drop is call 4c+2 (occurrence c+1): occurrences 3,6,9 -> calls 10,22,34
    // rx-nobuf is call 4c+4 (occurrence c+1): occurrences 2,9 -> calls 8,36
    const EXPECTED = [1, 3, 8, 10, 13, 15, 22, 25, 27, 34, 36, 37, 39];

    it('two injectors from the same specs give identical sequences', () => {
      const a = FaultInjector.parse(SPECS);
      const b = FaultInjector.parse(SPECS);
      expect(drive(a)).to.deep.equal(EXPECTED);
      expect(drive(b)).to.deep.equal(EXPECTED);
      expect(a.stats()).to.deep.equal(b.stats());
    });

    it('interleaving two injectors call by call shares no state', () => {
      const a = FaultInjector.parse(SPECS);
      const b = FaultInjector.parse(SPECS);
      const ra: number[] = [];
      const rb: number[] = [];
      for (let i = 0; i < 40; i++) {
        const event = CYCLE[i % CYCLE.length];
        if (a.fail(event)) ra.push(i + 1);
        if (b.fail(event)) rb.push(i + 1);
      }
      expect(ra).to.deep.equal(EXPECTED);
      expect(rb).to.deep.equal(EXPECTED);
    });

    it('stats after the run', () => {
      const inj = FaultInjector.parse(SPECS);
      drive(inj);
      expect(inj.stats()).to.deep.equal([
        { event: 'rx-lost', seen: 20, failed: 8 },
        { event: 'rx-nobuf', seen: 10, failed: 2 },
        { event: 'tx-drop', seen: 10, failed: 3 },
        { event: 'stats-vals-error', seen: 0, failed: 0 },
      ]);
    });
  });

  describe('stats(), active, none()', () => {
    it('a fresh injector reports zeros for every event', () => {
      expect(FaultInjector.parse(['tx-drop=every:2']).stats()).to.deep.equal([
        { event: 'rx-lost', seen: 0, failed: 0 },
        { event: 'rx-nobuf', seen: 0, failed: 0 },
        { event: 'tx-drop', seen: 0, failed: 0 },
        { event: 'stats-vals-error', seen: 0, failed: 0 },
      ]);
    });

    it('stats() is a snapshot, not a live view', () => {
      const inj = FaultInjector.parse(['tx-drop=every:2']);
      failing(inj, 'tx-drop', 5);
      const before = inj.stats();
      failing(inj, 'tx-drop', 5);
      expect(before[2]).to.deep.equal({ event: 'tx-drop', seen: 5, failed: 2 });
      expect(inj.stats()[2]).to.deep.equal({ event: 'tx-drop', seen: 10, failed: 5 });
    });

    it('none() never fails but still counts', () => {
      const inj = FaultInjector.none();
      expect(inj.active).to.equal(false);
      expect(failing(inj, 'rx-lost', 31)).to.deep.equal([]);
      expect(failing(inj, 'stats-vals-error', 3)).to.deep.equal([]);
      expect(inj.stats()).to.deep.equal([
        { event: 'rx-lost', seen: 31, failed: 0 },
        { event: 'rx-nobuf', seen: 0, failed: 0 },
        { event: 'tx-drop', seen: 0, failed: 0 },
        { event: 'stats-vals-error', seen: 3, failed: 0 },
      ]);
      expect(inj.describe()).to.equal('none');
    });

    it('parse([]) is inactive; any spec makes it active', () => {
      expect(FaultInjector.parse([]).active).to.equal(false);
      expect(FaultInjector.parse([]).describe()).to.equal('none');
      expect(FaultInjector.parse(['stats-vals-error=at:1']).active).to.equal(true);
    });

    it('whitespace around comma-separated specs is ignored', () => {
      const inj = FaultInjector.parse([' rx-lost=every:3 , tx-drop=at:2 ']);
      expect(failing(inj, 'rx-lost', 30)).to.deep.equal([3, 6, 9, 12, 15, 18, 21, 24, 27, 30]);
      expect(failing(inj, 'tx-drop', 30)).to.deep.equal([2]);
    });
  });

  describe('describe()', () => {
    function d(...specs: string[]): string {
      return FaultInjector.parse(specs).describe();
    }

    it('the example from the docs', () => {
      expect(d('rx-lost=every:100', 'tx-drop=run:5-9')).to.equal('rx-lost every 100th; tx-drop events 5-9');
    });

    it('events are listed in FAULT_EVENTS order whatever the spec order', () => {
      expect(d('tx-drop=run:5-9,rx-lost=every:100')).to.equal('rx-lost every 100th; tx-drop events 5-9');
    });

    it('ordinals', () => {
      expect(
        ['1', '2', '3', '4', '11', '12', '13', '21', '22', '23', '101', '102', '112'].map((n) =>
          d(`rx-lost=every:${n}`),
        ),
      ).to.deep.equal([
        'rx-lost every event',
        'rx-lost every 2nd',
        'rx-lost every 3rd',
        'rx-lost every 4th',
        'rx-lost every 11th',
        'rx-lost every 12th',
        'rx-lost every 13th',
        'rx-lost every 21st',
        'rx-lost every 22nd',
        'rx-lost every 23rd',
        'rx-lost every 101st',
        'rx-lost every 102nd',
        'rx-lost every 112th',
      ]);
    });

    it('runs', () => {
      expect(d('tx-drop=run:7-')).to.equal('tx-drop events 7 onward');
      expect(d('tx-drop=run:4-4')).to.equal('tx-drop event 4');
    });

    it('bursts', () => {
      expect(d('rx-nobuf=burst:2/10')).to.equal('rx-nobuf first 2 of every 10');
    });

    it('at lists, long ones shortened', () => {
      expect(d('stats-vals-error=at:3')).to.equal('stats-vals-error event 3');
      expect(d('rx-lost=at:1/2/30')).to.equal('rx-lost events 1, 2, 30');
      expect(d('rx-lost=at:1/2/3/4/5/6/7/8')).to.equal('rx-lost events 1, 2, 3, 4, 5, 6, 7, 8');
      expect(d('rx-lost=at:1/2/3/4/5/6/7/8/9/10')).to.equal('rx-lost events 1, 2, 3, 4, 5, 6, 7, 8, ... (10 listed)');
    });

    it('several patterns for one event are joined with "or"', () => {
      expect(d('rx-nobuf=every:5,rx-nobuf=at:7/9', 'tx-drop=burst:1/3')).to.equal(
        'rx-nobuf every 5th or events 7, 9; tx-drop first 1 of every 3',
      );
    });

    it('all four events', () => {
      expect(d('stats-vals-error=every:2,tx-drop=every:3,rx-nobuf=every:4,rx-lost=every:5')).to.equal(
        'rx-lost every 5th; rx-nobuf every 4th; tx-drop every 3rd; stats-vals-error every 2nd',
      );
    });
  });

  describe('errors', () => {
    it('InjectSpecError carries the spec and the problem, message on one line', () => {
      const err = parseError(['rx-lost=every:0']);
      expect(err.name).to.equal('InjectSpecError');
      expect(err.spec).to.equal('rx-lost=every:0');
      expect(err.problem).to.equal('N must be at least 1');
      expect(err.message).to.equal("--inject 'rx-lost=every:0': N must be at least 1");
      expect(err).to.be.instanceOf(Error);
    });

    it('unknown event', () => {
      expect(errorMessage('rx-lots=every:3')).to.equal(`--inject 'rx-lots=every:3': unknown event 'rx-lots' ${EVENTS}`);
      expect(errorMessage('RX-LOST=every:3')).to.equal(`--inject 'RX-LOST=every:3': unknown event 'RX-LOST' ${EVENTS}`);
      expect(errorMessage('=every:3')).to.equal(`--inject '=every:3': unknown event '' ${EVENTS}`);
      expect(errorMessage('rx-lost =every:3')).to.equal(
        `--inject 'rx-lost =every:3': unknown event 'rx-lost ' ${EVENTS}`,
      );
    });

    it("missing '='", () => {
      expect(errorMessage('rx-lost')).to.equal("--inject 'rx-lost': expected EVENT=PATTERN");
      expect(errorMessage('every:3')).to.equal("--inject 'every:3': expected EVENT=PATTERN");
    });

    it('unknown pattern', () => {
      expect(errorMessage('rx-lost=sometimes:3')).to.equal(
        `--inject 'rx-lost=sometimes:3': unknown pattern 'sometimes:3' ${PATTERNS}`,
      );
      expect(errorMessage('rx-lost=')).to.equal(`--inject 'rx-lost=': unknown pattern '' ${PATTERNS}`);
      expect(errorMessage('rx-lost=EVERY:3')).to.equal(
        `--inject 'rx-lost=EVERY:3': unknown pattern 'EVERY:3' ${PATTERNS}`,
      );
      expect(errorMessage('rx-lost=3')).to.equal(`--inject 'rx-lost=3': unknown pattern '3' ${PATTERNS}`);
    });

    it('pattern without its arguments', () => {
      expect(errorMessage('rx-lost=every')).to.equal("--inject 'rx-lost=every': expected every:N");
      expect(errorMessage('rx-lost=run')).to.equal("--inject 'rx-lost=run': expected run:N-M or run:N-");
      expect(errorMessage('rx-lost=run:5')).to.equal("--inject 'rx-lost=run:5': expected run:N-M or run:N-");
      expect(errorMessage('rx-lost=burst:3')).to.equal("--inject 'rx-lost=burst:3': expected burst:K/M");
      expect(errorMessage('rx-lost=at')).to.equal("--inject 'rx-lost=at': expected at:N1/N2/...");
      expect(errorMessage('rx-lost=at:')).to.equal("--inject 'rx-lost=at:': expected at:N1/N2/...");
    });

    it('zero', () => {
      expect(errorMessage('rx-lost=every:0')).to.equal("--inject 'rx-lost=every:0': N must be at least 1");
      expect(errorMessage('rx-lost=run:0-5')).to.equal("--inject 'rx-lost=run:0-5': N must be at least 1");
      expect(errorMessage('rx-lost=run:0-')).to.equal("--inject 'rx-lost=run:0-': N must be at least 1");
      expect(errorMessage('rx-lost=burst:0/3')).to.equal("--inject 'rx-lost=burst:0/3': K must be at least 1");
      expect(errorMessage('rx-lost=burst:1/0')).to.equal("--inject 'rx-lost=burst:1/0': M must be at least 1");
      expect(errorMessage('rx-lost=at:0/4')).to.equal("--inject 'rx-lost=at:0/4': event number must be at least 1");
    });

    it('negative numbers', () => {
      expect(errorMessage('rx-lost=every:-1')).to.equal(
        "--inject 'rx-lost=every:-1': N must be a decimal integer, got '-1'",
      );
      expect(errorMessage('rx-lost=run:-5')).to.equal("--inject 'rx-lost=run:-5': N must be a decimal integer, got ''");
      expect(errorMessage('rx-lost=run:3--5')).to.equal(
        "--inject 'rx-lost=run:3--5': M must be a decimal integer, got '-5'",
      );
      expect(errorMessage('rx-lost=burst:2/-1')).to.equal(
        "--inject 'rx-lost=burst:2/-1': M must be a decimal integer, got '-1'",
      );
      expect(errorMessage('rx-lost=at:-2/3')).to.equal(
        "--inject 'rx-lost=at:-2/3': event number must be a decimal integer, got '-2'",
      );
    });

    it('non-integers and non-decimal forms', () => {
      const cases: Array<[string, string]> = [
        ['rx-lost=every:1.5', "N must be a decimal integer, got '1.5'"],
        ['rx-lost=every:+3', "N must be a decimal integer, got '+3'"],
        ['rx-lost=every:0x10', "N must be a decimal integer, got '0x10'"],
        ['rx-lost=every:1e3', "N must be a decimal integer, got '1e3'"],
        ['rx-lost=every:', "N must be a decimal integer, got ''"],
        ['rx-lost=every: 3', "N must be a decimal integer, got ' 3'"],
        ['rx-lost=every:Infinity', "N must be a decimal integer, got 'Infinity'"],
        ['rx-lost=every:3=4', "N must be a decimal integer, got '3=4'"],
        ['rx-lost=run:2-x', "M must be a decimal integer, got 'x'"],
        ['rx-lost=run:2.0-4', "N must be a decimal integer, got '2.0'"],
        ['rx-lost=burst:1/2/3', "M must be a decimal integer, got '2/3'"],
        ['rx-lost=burst:/3', "K must be a decimal integer, got ''"],
        ['rx-lost=at:1//2', "event number must be a decimal integer, got ''"],
        ['rx-lost=at:1/2/', "event number must be a decimal integer, got ''"],
        ['rx-lost=at:1.5', "event number must be a decimal integer, got '1.5'"],
      ];
      for (const [spec, problem] of cases) {
        expect(errorMessage(spec)).to.equal(`--inject '${spec}': ${problem}`);
      }
    });

    it('huge numbers', () => {
      const max = '9007199254740991';
      const cases: Array<[string, string]> = [
        ['rx-lost=every:9007199254740992', `N must be at most ${max}, got '9007199254740992'`],
        ['rx-lost=every:99999999999999999999999', `N must be at most ${max}, got '99999999999999999999999'`],
        ['rx-lost=run:1-9007199254740993', `M must be at most ${max}, got '9007199254740993'`],
        ['rx-lost=burst:1/18446744073709551616', `M must be at most ${max}, got '18446744073709551616'`],
        ['rx-lost=at:5/9007199254740992', `event number must be at most ${max}, got '9007199254740992'`],
      ];
      for (const [spec, problem] of cases) {
        expect(errorMessage(spec)).to.equal(`--inject '${spec}': ${problem}`);
      }
      // The largest allowed values parse.
      expect(FaultInjector.parse([`rx-lost=run:${max}-${max}`, `tx-drop=burst:${max}/${max}`]).active).to.equal(true);
    });

    it('run with M < N', () => {
      expect(errorMessage('rx-lost=run:9-5')).to.equal("--inject 'rx-lost=run:9-5': M must not be less than N");
      expect(errorMessage('rx-lost=run:2-1')).to.equal("--inject 'rx-lost=run:2-1': M must not be less than N");
    });

    it('burst with K > M', () => {
      expect(errorMessage('tx-drop=burst:5/3')).to.equal("--inject 'tx-drop=burst:5/3': K must not exceed M");
      expect(errorMessage('tx-drop=burst:2/1')).to.equal("--inject 'tx-drop=burst:2/1': K must not exceed M");
    });

    it('at not strictly increasing', () => {
      expect(errorMessage('rx-lost=at:3/2')).to.equal(
        "--inject 'rx-lost=at:3/2': event numbers must be strictly increasing (2 after 3)",
      );
      expect(errorMessage('rx-lost=at:1/5/5')).to.equal(
        "--inject 'rx-lost=at:1/5/5': event numbers must be strictly increasing (5 after 5)",
      );
      expect(errorMessage('rx-lost=at:1/10/20/15')).to.equal(
        "--inject 'rx-lost=at:1/10/20/15': event numbers must be strictly increasing (15 after 20)",
      );
    });

    it('too many at entries', () => {
      const list = range(1, 1001).join('/');
      const spec = `rx-lost=at:${list}`;
      expect(errorMessage(spec)).to.equal(`--inject '${spec}': at most 1000 event numbers, got 1001`);
    });

    it('empty spec', () => {
      expect(errorMessage('')).to.equal("--inject '': empty spec");
      expect(errorMessage('   ')).to.equal("--inject '   ': empty spec");
      expect(errorMessage('rx-lost=every:3,')).to.equal("--inject 'rx-lost=every:3,': empty spec");
      expect(errorMessage(',rx-lost=every:3')).to.equal("--inject ',rx-lost=every:3': empty spec");
      expect(errorMessage('rx-lost=every:3,,tx-drop=at:1')).to.equal(
        "--inject 'rx-lost=every:3,,tx-drop=at:1': empty spec",
      );
    });

    it('a bad piece of a comma list is named alone; a later bad element is still found', () => {
      expect(errorMessage('rx-lost=every:3,tx-drop=every:0')).to.equal(
        "--inject 'tx-drop=every:0': N must be at least 1",
      );
      const err = parseError(['rx-lost=every:3', 'rx-nobuf=at:2/1']);
      expect(err.message).to.equal("--inject 'rx-nobuf=at:2/1': event numbers must be strictly increasing (1 after 2)");
    });

    it('no error message spans more than one line', () => {
      const specs = ['', 'x', 'x=y', 'rx-lost=every:0', 'rx-lost=run:3-1', 'rx-lost=burst:4/2', 'rx-lost=at:2/2'];
      expect(specs.map((s) => errorMessage(s).includes('\n'))).to.deep.equal(specs.map(() => false));
    });
  });

  describe('INJECT_HELP', () => {
    it('is multi-line and names every event and pattern form', () => {
      const lines = INJECT_HELP.split('\n');
      expect(lines.length).to.equal(15);
      for (const needle of [
        'EVENT=PATTERN',
        'every:N',
        'run:N-M',
        'run:N-',
        'burst:K/M',
        'at:N1/N2/...',
        'at most 1000',
        'rx-lost',
        'rx-nobuf',
        'tx-drop',
        'stats-vals-error',
        '2^53-1',
        'commas',
      ]) {
        expect(INJECT_HELP.includes(needle), needle).to.equal(true);
      }
      expect(lines.filter((l) => l.length > 90)).to.deep.equal([]);
    });
  });
});
