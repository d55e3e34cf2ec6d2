// The shared command-line conventions (lib/cli/options.ts), as units; the
// tools' own specs run them through real processes.
import { expect } from 'chai';
import yargs from 'yargs';
import { conventions, parseIntOption, portCoerce, repeatedSingles } from '../../lib/cli/options';

describe('cli: shared option conventions', () => {
  it('repeatedSingles names a repeated single-value option by its long name, not its alias or camelCase copy', () => {
    const argv = {
      _: [],
      $0: 'x',
      socket: ['a', 'b'],
      s: ['a', 'b'],
      metricsPort: ['1', '2'],
      'metrics-port': ['1', '2'],
      inject: ['a', 'b'],
      mac: 'm',
    };
    expect(repeatedSingles(argv, new Set(['inject']))).to.deep.equal(['metrics-port', 'socket', 's']);
    expect(repeatedSingles({ _: [], $0: 'x', mac: 'm' }, new Set())).to.deep.equal([]);
  });

  it('parseIntOption takes decimal integers in range and names the text typed otherwise', () => {
    expect(parseIntOption('port', '8080', 0, 65535)).to.equal(8080);
    expect(parseIntOption('port', ' 0 ', 0, 65535)).to.equal(0);
    for (const bad of ['abc', '', '1.5', '0x10', '65536', '-1', '1e3', 'NaN']) {
      expect(() => parseIntOption('port', bad, 0, 65535, 'a TCP port'), bad).to.throw(
        `--port ${bad}: expected a TCP port from 0 to 65535`,
      );
    }
    expect(() => portCoerce('metrics-port')(['1', '2'])).to.throw('--metrics-port given more than once');
  });

  it('a parser with the conventions refuses a repeated single-value option and keeps array options', async () => {
    let failed = '';
    const y = yargs(['--name', 'a', '--name', 'b'])
      .option('name', { type: 'string' })
      .option('tag', { type: 'string', array: true });
    // By default conventions() exits the process on failure; take the message instead.
    await conventions(y, 'test', ['tag'], (m) => {
      failed = m;
    }).parseAsync();
    expect(failed).to.equal('--name given more than once (it takes one value)');
    failed = '';
    const ok = await conventions(
      yargs(['--tag', 'a', '--tag', 'b']).option('tag', { type: 'string', array: true }),
      'test',
      ['tag'],
      (m) => {
        failed = m;
      },
    ).parseAsync();
    expect(failed).to.equal('');
    expect(ok.tag).to.deep.equal(['a', 'b']);
  });
});
