// lib/log.ts: what the journal check and the two formats decide.
import { expect } from 'chai';
import { stderrIsJournal } from '../lib/log';

describe('log: journald detection', () => {
  const stat = () => ({ dev: 2049, ino: 77 });
  it('is the journal only when JOURNAL_STREAM names the very stream stderr is', () => {
    expect(stderrIsJournal({ JOURNAL_STREAM: '2049:77' }, stat)).to.equal(true);
    expect(stderrIsJournal({ JOURNAL_STREAM: '2049:78' }, stat)).to.equal(false); // inherited by a child whose stderr was redirected
    expect(stderrIsJournal({}, stat)).to.equal(false);
    expect(stderrIsJournal({ JOURNAL_STREAM: 'garbage' }, stat)).to.equal(false);
    expect(
      stderrIsJournal({ JOURNAL_STREAM: '2049:77' }, () => {
        throw new Error('EBADF');
      }),
    ).to.equal(false);
  });
});
