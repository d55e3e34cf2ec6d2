// Operator input: backend strings, environment variables, address and GID
// text. Each bad input gives one line naming the problem.

import { expect } from 'chai';
import { gidFromText, gidToText, parseHost, parseHostPort, parseIPv6 } from '../../lib/mesh/address';
import { formatMeshBackend, parseMeshBackend, parseMeshEnv } from '../../lib/mesh/config';
import { meshOptionsFromCli } from '../../lib/mesh/index';

function errorOf(r: { ok: boolean; error?: string }): string {
  expect(r.ok).to.equal(false);
  return r.error!;
}

describe('mesh: configuration', () => {
  describe('--backend', () => {
    it('parses the three forms', () => {
      expect(parseMeshBackend('tcp:manager:listen:5000')).to.deep.equal({
        ok: true,
        value: { role: 'manager', listen: { port: 5000 } },
      });
      expect(parseMeshBackend('tcp:manager:10.0.0.1:5000')).to.deep.equal({
        ok: true,
        value: { role: 'manager', listen: { host: '10.0.0.1', port: 5000 } },
      });
      expect(parseMeshBackend('tcp:manager:[::1]:5000')).to.deep.equal({
        ok: true,
        value: { role: 'manager', listen: { host: '::1', port: 5000 } },
      });
      expect(parseMeshBackend('tcp:worker:10.0.0.1:5000')).to.deep.equal({
        ok: true,
        value: { role: 'worker', manager: { kind: 'ipv4', host: '10.0.0.1', port: 5000 } },
      });
      expect(parseMeshBackend('tcp:worker:[fe80::1%eth0]:7000')).to.deep.equal({
        ok: true,
        value: { role: 'worker', manager: { kind: 'ipv6', host: 'fe80::1%eth0', port: 7000 } },
      });
      expect(parseMeshBackend('tcp:worker:mgr.example.com:6320')).to.deep.equal({
        ok: true,
        value: { role: 'worker', manager: { kind: 'name', host: 'mgr.example.com', port: 6320 } },
      });
    });

    it('round-trips through formatMeshBackend', () => {
      for (const s of [
        'tcp:manager:listen:5000',
        'tcp:manager:10.0.0.1:1',
        'tcp:manager:[::1]:65535',
        'tcp:worker:[fe80::1%eth0]:7000',
        'tcp:worker:host-1:6320',
      ]) {
        const r = parseMeshBackend(s);
        if (!r.ok) throw new Error(r.error);
        expect(formatMeshBackend(r.value)).to.equal(s);
      }
    });

    it('refuses bad strings with one line naming the problem', () => {
      const cases: [string, RegExp][] = [
        ['tcp', /not a tcp backend/],
        ['loopback', /not a tcp backend/],
        ['tcp:boss:listen:1', /role must be manager or worker/],
        ['tcp:manager:listen:0', /bad port '0'/],
        ['tcp:manager:listen:65536', /bad port '65536'/],
        ['tcp:manager:listen:', /bad port ''/],
        ['tcp:manager:listen:+5', /bad port/],
        ['tcp:manager:listen:050', /bad port/],
        ['tcp:worker:fe80::1:5000', /IPv6 address goes in brackets/],
        ['tcp:worker:[fe80::1:5000', /missing '\]'/],
        ['tcp:worker:[fe80::1]5000', /expected ':PORT'/],
        ['tcp:worker:[10.0.0.1]:5000', /not an IPv6 address/],
        ['tcp:worker:[fe80::1%bad zone]:5000', /not an IPv6 address/],
        ['tcp:worker::5000', /missing host/],
        ['tcp:worker:10.0.0.256:5000', /not an IPv4 address or host name/],
        ['tcp:worker:1.2.3:5000', /not an IPv4 address or host name/],
        ['tcp:worker:-bad-:5000', /not an IPv4 address or host name/],
        ['tcp:worker:10.0.0.1', /bad port '10'|expected HOST:PORT|not an IPv4/],
        ['tcp:manager:somehost:5000', /IP address, not a name/],
      ];
      for (const [s, re] of cases) {
        const e = errorOf(parseMeshBackend(s));
        expect(e, s).to.match(re);
        expect(e, s).to.match(/^--backend /);
        expect(e.includes('\n'), s).to.equal(false);
      }
    });
  });

  describe('environment', () => {
    it('defaults', () => {
      expect(parseMeshEnv({})).to.deep.equal({
        ok: true,
        value: {
          sendTimeoutMs: 10000,
          guestGids: [],
          listenBacklog: 32,
          debugMesh: false,
          heartbeatMs: 5000,
          nodesPerAddress: 8,
        },
      });
    });

    it('reads every variable', () => {
      const r = parseMeshEnv({
        ERNIC_TCP_SEND_TIMEOUT_MS: '2500',
        ERNIC_TCP_GUEST_GIDS: ' fe80::1, 10.0.0.5 ,,fe80::1',
        ERNIC_TCP_SOCKBUF: '4194304',
        ERNIC_TCP_LISTEN_BACKLOG: '64',
        ERNIC_DEBUG_MESH: '1',
        ERNIC_TCP_HEARTBEAT_MS: '1000',
        ERNIC_TCP_NODES_PER_ADDRESS: '20',
        UNRELATED: 'x',
      });
      if (!r.ok) throw new Error(r.error);
      expect(r.value.sendTimeoutMs).to.equal(2500);
      expect(r.value.guestGids.map((g) => gidToText(g))).to.deep.equal(['fe80::1', '::ffff:10.0.0.5']);
      expect(r.value.sockbuf).to.equal(4194304);
      expect(r.value.listenBacklog).to.equal(64);
      expect(r.value.debugMesh).to.equal(true);
      expect(r.value.heartbeatMs).to.equal(1000);
      expect(r.value.nodesPerAddress).to.equal(20);
    });

    it('treats empty values as unset', () => {
      const r = parseMeshEnv({ ERNIC_TCP_SEND_TIMEOUT_MS: '', ERNIC_TCP_GUEST_GIDS: ' ' });
      expect(r.ok && r.value.sendTimeoutMs).to.equal(10000);
      expect(r.ok && r.value.guestGids.length).to.equal(0);
    });

    it('refuses bad values with one line naming the variable', () => {
      const cases: [Record<string, string>, RegExp][] = [
        [
          { ERNIC_TCP_SEND_TIMEOUT_MS: 'soon' },
          /^ERNIC_TCP_SEND_TIMEOUT_MS: must be a decimal integer .*\(got 'soon'\)$/,
        ],
        [{ ERNIC_TCP_SEND_TIMEOUT_MS: '99' }, /^ERNIC_TCP_SEND_TIMEOUT_MS: must be at least 100/],
        [{ ERNIC_TCP_SEND_TIMEOUT_MS: '-5' }, /^ERNIC_TCP_SEND_TIMEOUT_MS: must be a decimal integer/],
        [{ ERNIC_TCP_SEND_TIMEOUT_MS: '1.5' }, /^ERNIC_TCP_SEND_TIMEOUT_MS/],
        [
          { ERNIC_TCP_GUEST_GIDS: 'fe80::1,nonsense' },
          /^ERNIC_TCP_GUEST_GIDS: 'nonsense' is not an IPv6 or IPv4 address/,
        ],
        [{ ERNIC_TCP_GUEST_GIDS: 'fe80::1%eth0' }, /^ERNIC_TCP_GUEST_GIDS: /],
        [
          { ERNIC_TCP_GUEST_GIDS: Array.from({ length: 9 }, (_, i) => `10.0.0.${i + 1}`).join(',') },
          /9 GIDs, at most 8/,
        ],
        [{ ERNIC_TCP_SOCKBUF: '100' }, /^ERNIC_TCP_SOCKBUF: must be at least 4096/],
        [{ ERNIC_TCP_LISTEN_BACKLOG: '0' }, /^ERNIC_TCP_LISTEN_BACKLOG: must be at least 1/],
        [{ ERNIC_DEBUG_MESH: 'yes' }, /^ERNIC_DEBUG_MESH: must be 0 or 1/],
        [{ ERNIC_TCP_HEARTBEAT_MS: '10' }, /^ERNIC_TCP_HEARTBEAT_MS: must be at least 100/],
        [{ ERNIC_TCP_NODES_PER_ADDRESS: '0' }, /^ERNIC_TCP_NODES_PER_ADDRESS: must be at least 1/],
        [{ ERNIC_TCP_NODES_PER_ADDRESS: '65' }, /^ERNIC_TCP_NODES_PER_ADDRESS: must be at most 64/],
      ];
      for (const [env, re] of cases) expect(errorOf(parseMeshEnv(env)), JSON.stringify(env)).to.match(re);
    });

    it('meshOptionsFromCli combines both and reports the first problem', () => {
      const r = meshOptionsFromCli('tcp:worker:10.0.0.1:5000', {
        ERNIC_TCP_GUEST_GIDS: '10.0.0.2',
        ERNIC_TCP_SEND_TIMEOUT_MS: '4000',
      });
      if (!r.ok) throw new Error(r.error);
      expect(r.value.config.role).to.equal('worker');
      expect(r.value.sendTimeoutMs).to.equal(4000);
      expect(r.value.guestGids!.length).to.equal(1);
      expect(errorOf(meshOptionsFromCli('tcp:worker:x', {}))).to.match(/^--backend/);
      expect(errorOf(meshOptionsFromCli('tcp:worker:h:1', { ERNIC_TCP_LISTEN_BACKLOG: 'x' }))).to.match(
        /^ERNIC_TCP_LISTEN_BACKLOG/,
      );
    });
  });

  describe('addresses and GIDs', () => {
    it('parses IPv6 text like inet_pton', () => {
      const hex = (t: string): string | undefined => parseIPv6(t)?.toString('hex');
      expect(hex('::')).to.equal('0'.repeat(32));
      expect(hex('::1')).to.equal('0'.repeat(31) + '1');
      expect(hex('fe80::1')).to.equal('fe80' + '0'.repeat(27) + '1');
      expect(hex('1:2:3:4:5:6:7:8')).to.equal('00010002000300040005000600070008');
      expect(hex('::ffff:10.1.2.3')).to.equal('00000000000000000000ffff0a010203');
      expect(hex('64:ff9b::192.0.2.33')).to.equal('0064ff9b0000000000000000c0000221');
      for (const badText of [
        ':',
        ':::',
        '1::2::3',
        '1:2:3:4:5:6:7:8:9',
        '1:2:3:4:5:6:7',
        '12345::',
        'g::',
        '::1.2.3',
        '1.2.3.4::',
        '1::2:3:4:5:6:7:8',
      ]) {
        expect(parseIPv6(badText), badText).to.equal(undefined);
      }
    });

    it('classifies hosts', () => {
      expect(parseHost('10.0.0.1')?.kind).to.equal('ipv4');
      expect(parseHost('fe80::1%eth0')?.kind).to.equal('ipv6');
      expect(parseHost('fe80::1%')).to.equal(undefined);
      expect(parseHost('node-1.lab')?.kind).to.equal('name');
      expect(parseHost('a'.repeat(64))).to.equal(undefined);
      expect(parseHost('under_score')).to.equal(undefined);
      expect(typeof parseHostPort('[::1]:1')).to.equal('object');
    });

    it('GIDs: IPv4 becomes ::ffff:a.b.c.d; text form compresses the longest zero run', () => {
      expect(gidFromText('10.0.0.1')!.toString('hex')).to.equal('00000000000000000000ffff0a000001');
      expect(gidToText(gidFromText('10.0.0.1')!)).to.equal('::ffff:10.0.0.1');
      expect(gidToText(gidFromText('fe80::0:0:1')!)).to.equal('fe80::1');
      expect(gidToText(gidFromText('1:0:0:2:0:0:0:3')!)).to.equal('1:0:0:2::3');
      expect(gidToText(gidFromText('1:2:3:4:5:6:7:8')!)).to.equal('1:2:3:4:5:6:7:8');
      expect(gidFromText('fe80::1%eth0')).to.equal(undefined);
      expect(gidFromText('host')).to.equal(undefined);
    });
  });
});
