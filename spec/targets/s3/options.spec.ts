// `--backend s3[:...]`: defaults, every option, and a one-line error for
// each kind of mistake.

import { expect } from 'chai';
import { hostListenerRefusal, parseS3Backend, S3_DEFAULTS } from '../../../lib/targets/s3/options';

function err(text: string): string {
  const r = parseS3Backend(text);
  if (r.ok) throw new Error(`accepted ${text}`);
  return r.error;
}

describe('s3 options', () => {
  it('defaults: bucket ernic, 256M, 256 objects, 192.168.200.1:9000, maxpart 256M, no listener, RAM only', () => {
    for (const t of ['s3', 's3:']) {
      const r = parseS3Backend(t);
      expect(r.ok && r.value).to.deep.equal(S3_DEFAULTS);
    }
    expect(S3_DEFAULTS).to.deep.include({
      bucket: 'ernic',
      size: 268435456,
      objects: 256,
      ip: '192.168.200.1',
      port: 9000,
      maxpart: 268435456,
    });
  });

  it('every option', () => {
    const r = parseS3Backend(
      's3:bucket=my-data.set,size=1G,objects=65536,ip=10.0.0.9,port=8080,maxpart=64MiB,listen=127.0.0.1:0,dir=/var/tmp/s3',
    );
    expect(r.ok && r.value).to.deep.equal({
      bucket: 'my-data.set',
      size: 2 ** 30,
      objects: 65536,
      ip: '10.0.0.9',
      port: 8080,
      maxpart: 64 * 2 ** 20,
      listen: { host: '127.0.0.1', port: 0 },
      dir: '/var/tmp/s3',
    });
    const v6 = parseS3Backend('s3:listen=[::1]:9000');
    expect(v6.ok && v6.value.listen).to.deep.equal({ host: '::1', port: 9000 });
    const bare = parseS3Backend('s3:listen=9000');
    expect(bare.ok && bare.value.listen, 'a bare port binds loopback').to.deep.equal({ host: '127.0.0.1', port: 9000 });
    expect(hostListenerRefusal({ host: '127.0.0.1', port: 1 }, false)).to.equal(null);
    expect(hostListenerRefusal({ host: '::1', port: 1 }, false)).to.equal(null);
    expect(hostListenerRefusal({ host: '10.0.0.9', port: 1 }, true)).to.equal(null);
    expect(hostListenerRefusal({ host: '10.0.0.9', port: 1 }, false)).to.match(/listen=10\.0\.0\.9:1 is not loopback/);
    expect(hostListenerRefusal({ host: '::', port: 1 }, false)).to.match(/listen=\[::\]:1 is not loopback/);
    const none = parseS3Backend('s3:dir=,listen=');
    expect(none.ok && [none.value.dir, none.value.listen]).to.deep.equal([undefined, undefined]);
  });

  it('one line per mistake, naming the option', () => {
    const cases: [string, RegExp][] = [
      ['nvmeof', /is not s3\[:key=value/],
      ['s3:bogus=1', /unknown option 'bogus'/],
      ['s3:size', /'size' is not key=value/],
      ['s3:port=1,port=2', /'port' given twice/],
      ['s3:bucket=AB', /bad bucket 'AB'/],
      ['s3:bucket=a..b', /bad bucket/],
      ['s3:bucket=192.168.1.1', /not an IP address/],
      ['s3:size=lots', /bad size 'lots'/],
      ['s3:size=1T', /bad size '1T' \(at most/],
      ['s3:objects=0', /bad objects '0' \(at least 1\)/],
      ['s3:objects=65537', /at most 65536/],
      ['s3:ip=300.1.1.1', /bad ip/],
      ['s3:port=0', /bad port '0'/],
      ['s3:maxpart=6G', /bad maxpart/],
      ['s3:size=1M,maxpart=2M', /maxpart 2097152 is larger than size 1048576/],
      ['s3:listen=localhost', /bad listen 'localhost' \(PORT \(on 127\.0\.0\.1\) or HOST:PORT/],
      ['s3:listen=70000', /bad listen/],
      ['s3:listen=h:70000', /bad listen/],
    ];
    for (const [text, re] of cases) {
      const e = err(text);
      expect(e, text).to.match(re);
      expect(e, text).to.match(/^s3 backend: /);
      expect(e.includes('\n'), text).to.equal(false);
    }
  });
});
