// `--backend nvmeof[:...]`: defaults, every option accepted in its forms,
// and every bad value answered with one line naming the option.

import { expect } from 'chai';
import { NVMEOF_DEFAULTS, parseNvmeofBackend } from '../../../lib/targets/nvmeof';
import { parseByteCount } from '../../../lib/targets/backend-options';
import type { NvmeofOptions } from '../../../lib/targets/nvmeof';

function ok(text: string): NvmeofOptions {
  const r = parseNvmeofBackend(text);
  if (!r.ok) throw new Error(`unexpected error: ${r.error}`);
  return r.value;
}

function err(text: string): string {
  const r = parseNvmeofBackend(text);
  if (r.ok) throw new Error(`'${text}' unexpectedly parsed`);
  expect(r.error).to.not.include('\n');
  expect(r.error.startsWith('nvmeof backend: ')).to.equal(true);
  return r.error;
}

describe('nvmeof: backend options', () => {
  it('defaults: 64M of 512-byte blocks in RAM, nvmet-test at 192.168.200.1:4420, 8 queues, nsid 1', () => {
    expect(ok('nvmeof')).to.deep.equal(NVMEOF_DEFAULTS);
    expect(ok('nvmeof:')).to.deep.equal(NVMEOF_DEFAULTS);
    expect(NVMEOF_DEFAULTS).to.deep.equal({
      size: 64 * 2 ** 20,
      bs: 512,
      file: undefined,
      nqn: 'nvmet-test',
      ip: '192.168.200.1',
      port: 4420,
      queues: 8,
      nsid: 1,
      model: 'rocm-ernic NVMe-oF target',
      serial: 'ERNIC0000000000001',
    });
  });

  it('every option, as the anchor documents them', () => {
    const v = ok(
      'nvmeof:size=8G,bs=4096,file=/var/tmp/ernic-ns0.img,nqn=nqn.2024-01.io.example:ns0,ip=10.0.0.9,port=4421,queues=15,nsid=3,model=My Target,serial=SN-1',
    );
    expect(v).to.deep.equal({
      size: 8 * 2 ** 30,
      bs: 4096,
      file: '/var/tmp/ernic-ns0.img',
      nqn: 'nqn.2024-01.io.example:ns0',
      ip: '10.0.0.9',
      port: 4421,
      queues: 15,
      nsid: 3,
      model: 'My Target',
      serial: 'SN-1',
    });
  });

  it('sizes with K/M/G/T and KiB/MiB/GiB/TiB (binary), or plain bytes; an empty file= is RAM', () => {
    expect(ok('nvmeof:size=64MiB').size).to.equal(64 * 2 ** 20);
    expect(ok('nvmeof:size=512k').size).to.equal(512 * 1024);
    expect(ok('nvmeof:size=1048576').size).to.equal(1 << 20);
    expect(ok('nvmeof:size=1T,file=/x').size).to.equal(2 ** 40);
    expect(ok('nvmeof:size=2GiB,file=/x').size).to.equal(2 * 2 ** 30);
    expect(ok('nvmeof:file=').file).to.equal(undefined);
    for (const bs of [512, 1024, 2048, 4096]) expect(ok(`nvmeof:bs=${bs}`).bs).to.equal(bs);
  });

  it('sizes through the bytes package: any case, KB = KiB = K = 1024, nothing bytes alone would let through', () => {
    for (const [text, n] of [
      ['64M', 64 * 2 ** 20],
      ['64m', 64 * 2 ** 20],
      ['64MB', 64 * 2 ** 20],
      ['64mib', 64 * 2 ** 20],
      ['4G', 4 * 2 ** 30],
      ['4gb', 4 * 2 ** 30],
      ['1kb', 1024],
      [' 256M ', 256 * 2 ** 20],
      ['9007199254740991', 2 ** 53 - 1],
    ] as const) {
      expect(parseByteCount(text), text).to.equal(n);
    }
    // bytes.parse reads each of these as a number (64, 1, -1, 12, 2^53): our form check refuses them.
    for (const text of [
      '64 M',
      '1.5M',
      '-1M',
      '12xyz',
      '64b',
      '1ib',
      'M',
      '',
      '0',
      '9007199254740992',
      '99999999999999999T',
      'constructor',
    ]) {
      expect(parseByteCount(text), text).to.equal(undefined);
    }
    expect(err('nvmeof:size=1.5M')).to.match(
      /^nvmeof backend: bad size '1\.5M' \(a byte count: digits with K, M, G or T \(binary: 1K = 1024\), e\.g\. 64M or 4G\)$/,
    );
  });

  const bad: Array<[string, RegExp]> = [
    ['nvmeof:size=bogus', /^nvmeof backend: bad size 'bogus' \(/],
    ['nvmeof:size=12X', /bad size '12X'/],
    ['nvmeof:size=0', /bad size '0'/],
    ['nvmeof:size=1000', /size 1000 is not a whole number of 512-byte blocks/],
    ['nvmeof:size=6K,bs=4096', /size 6K is not a whole number of 4096-byte blocks/],
    ['nvmeof:size=8G', /too big for a RAM namespace .*give file=/],
    ['nvmeof:bs=1000', /bad bs '1000' \(one of 512, 1024, 2048, 4096\)/],
    ['nvmeof:bs=8192', /bad bs '8192'/],
    ['nvmeof:bs=4k', /bad bs '4k'/],
    ['nvmeof:queues=0', /bad queues '0' \(at least 1\)/],
    ['nvmeof:queues=16', /bad queues '16' \(at most 15\)/],
    ['nvmeof:queues=-1', /bad queues '-1'/],
    ['nvmeof:port=0', /bad port '0'/],
    ['nvmeof:port=65536', /bad port '65536'/],
    ['nvmeof:port=http', /bad port 'http'/],
    ['nvmeof:ip=192.168.200', /bad ip '192.168.200' \(an IPv4 address/],
    ['nvmeof:ip=::1', /bad ip '::1'/],
    ['nvmeof:ip=256.1.1.1', /bad ip/],
    ['nvmeof:nsid=0', /bad nsid '0'/],
    ['nvmeof:nsid=4294967295', /bad nsid '4294967295' \(at most 4294967294\)/],
    ['nvmeof:nqn=', /bad nqn ''/],
    [`nvmeof:nqn=${'n'.repeat(224)}`, /bad nqn/],
    ['nvmeof:nqn=has space', /bad nqn 'has space'/],
    ['nvmeof:nqn=nqn.2014-08.org.nvmexpress.discovery', /that is the discovery NQN/],
    [`nvmeof:model=${'m'.repeat(41)}`, /bad model .*at most 40 characters/],
    ['nvmeof:model=', /bad model '' \(empty\)/],
    ['nvmeof:model=caf\u00e9', /bad model .*printable ASCII only/],
    [`nvmeof:serial=${'s'.repeat(21)}`, /bad serial .*at most 20 characters/],
    ['nvmeof:colour=red', /unknown option 'colour' \(known: size, bs, file/],
    ['nvmeof:size=1M,size=2M', /option 'size' given twice/],
    ['nvmeof:size', /option 'size' is not key=value/],
    ['nvmeof:=3', /option '=3' is not key=value/],
    ['nvmeofx', /'nvmeofx' is not nvmeof\[:key=value,...\]/],
    ['s3:size=1M', /is not nvmeof/],
  ];
  for (const [text, re] of bad) {
    it(`refuses ${text.length > 40 ? text.slice(0, 40) + '...' : text}`, () => {
      expect(err(text)).to.match(re);
    });
  }
});
