// lib/ops without processes: the instance plan (roles, backends, names,
// MACs, GIDs, arguments, refusals), the manifest's schema, and the readers
// status uses (mesh node from a log, clients from /proc/net/unix text).

import { expect } from 'chai';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { connectedClients } from '../../lib/ops/instances';
import { Manifest, MANIFEST_FORMAT, readManifest, writeManifest } from '../../lib/ops/manifest';
import { isValidIfName } from '../../lib/ops/netdev';
import { deriveMac, HostPlanOptions, linkLocalGidText, planInstances } from '../../lib/ops/plan';

const base: HostPlanOptions = {
  count: 3,
  runDir: '/run/rocm-ernic',
  logDir: '/var/log/rocm-ernic',
  tcpPort: 6320,
  managerIp: '127.0.0.1',
  backend: 'loopback',
  tapPrefix: 'ernic-tap',
  bridge: 'ernicbr0',
  profile: 'compat',
  socketMode: '660',
  socketGroup: null,
  logLevel: 'warn',
  machineId: 'f00dfeed',
};

describe('ops: instance plan', function () {
  it('makes instance 0 the manager and the rest workers dialling it, each with its own socket, TAP, MAC and files', function () {
    const r = planInstances(base);
    if (!r.ok) throw new Error(r.error);
    expect(r.instances.map((i) => i.role)).to.deep.equal(['manager', 'worker', 'worker']);
    expect(r.instances.map((i) => i.backend)).to.deep.equal([
      'tcp:manager:listen:6320',
      'tcp:worker:127.0.0.1:6320',
      'tcp:worker:127.0.0.1:6320',
    ]);
    expect(r.instances.map((i) => i.socket)).to.deep.equal([
      '/run/rocm-ernic/0.sock',
      '/run/rocm-ernic/1.sock',
      '/run/rocm-ernic/2.sock',
    ]);
    expect(r.instances.map((i) => i.tap)).to.deep.equal(['ernic-tap0', 'ernic-tap1', 'ernic-tap2']);
    expect(r.instances[2]!.pidFile).to.equal('/run/rocm-ernic/2.pid');
    expect(r.instances[2]!.stats).to.equal('/run/rocm-ernic/2.stats');
    expect(r.instances[2]!.log).to.equal('/var/log/rocm-ernic/2.log');
    expect(new Set(r.instances.map((i) => i.mac)).size).to.equal(3);
    expect(r.instances[1]!.args).to.deep.equal([
      '--socket',
      '/run/rocm-ernic/1.sock',
      '--backend',
      'tcp:worker:127.0.0.1:6320',
      '--mac',
      r.instances[1]!.mac,
      '--nic-profile',
      'compat',
      '--log-level',
      'warn',
      '--tap',
      'ernic-tap1',
      '--socket-mode',
      '660',
    ]);
    expect(r.instances[1]!.env).to.deep.equal({ ERNIC_TCP_GUEST_GIDS: r.instances[1]!.gid });
    expect(r.instances[0]!.env).to.deep.equal({ ERNIC_TCP_GUEST_GIDS: r.instances[0]!.gid });
  });

  it("past the manager's per-address default, lets it take every worker of the host (they all register from one address)", function () {
    const r = planInstances({ ...base, count: 12 });
    if (!r.ok) throw new Error(r.error);
    expect(r.instances[0]!.env).to.deep.equal({
      ERNIC_TCP_GUEST_GIDS: r.instances[0]!.gid,
      ERNIC_TCP_NODES_PER_ADDRESS: '11',
    });
    expect(r.instances[5]!.env).to.deep.equal({ ERNIC_TCP_GUEST_GIDS: r.instances[5]!.gid });
  });

  it('derives locally administered unicast MACs from the machine id and the instance id', function () {
    const a = deriveMac('f00dfeed', 0);
    expect(a).to.match(/^02:[0-9a-f]{2}:[0-9a-f]{2}:[0-9a-f]{2}:00:00$/);
    expect(deriveMac('f00dfeed', 258).endsWith(':01:02')).to.equal(true);
    expect(deriveMac('f00dfeed', 1).slice(0, 11)).to.equal(a.slice(0, 11));
    expect(deriveMac('another-host', 0)).to.not.equal(a);
  });

  it('gives each instance the IPv6 link-local GID (modified EUI-64) a Linux guest has on that MAC', function () {
    expect(linkLocalGidText('02:65:72:00:00:0a')).to.equal('fe80::65:72ff:fe00:a');
    expect(linkLocalGidText('72:6f:63:6d:2d:6e')).to.equal('fe80::706f:63ff:fe6d:2d6e');
  });

  it('takes MACs and GIDs given per instance, adds --socket-group and --stats-file when asked', function () {
    const r = planInstances({
      ...base,
      count: 2,
      macs: new Map([[1, '02:AA:BB:CC:DD:01']]),
      gids: new Map([[0, '::ffff:10.0.0.1']]),
      socketGroup: 'kvm',
      statsFile: true,
    });
    if (!r.ok) throw new Error(r.error);
    expect(r.instances[1]!.mac).to.equal('02:aa:bb:cc:dd:01');
    expect(r.instances[0]!.gid).to.equal('::ffff:10.0.0.1');
    expect(r.instances[0]!.args).to.include.members([
      '--socket-group',
      'kvm',
      '--stats-file',
      '/run/rocm-ernic/0.stats',
    ]);
  });

  it('runs every instance on one backend, without the mesh, when there is no port', function () {
    const r = planInstances({ ...base, tcpPort: null, backend: 'loopback', tapPrefix: null, bridge: null });
    if (!r.ok) throw new Error(r.error);
    expect(r.instances.every((i) => i.role === 'single' && i.backend === 'loopback' && i.tap === null)).to.equal(true);
    expect(r.instances[0]!.args).to.not.include('--tap');
    expect(r.instances[0]!.env).to.deep.equal({});
  });

  it('refuses bad counts, ports, paths, modes, names and MACs with one line each', function () {
    const refusals: [Partial<HostPlanOptions>, RegExp][] = [
      [{ count: 0 }, /instance count 0/],
      [{ count: 65 }, /instance count 65/],
      [{ tcpPort: 70000 }, /--tcp-port 70000/],
      [{ runDir: 'run' }, /--run-dir run: must be an absolute path/],
      [{ socketMode: '0x1ff' }, /--socket-mode/],
      [{ tapPrefix: 'a-very-long-prefix' }, /not a valid interface name/],
      [{ bridge: 'bad/name' }, /--bridge bad\/name/],
      [{ tapPrefix: null }, /--bridge needs TAPs/],
      [{ macs: new Map([[0, '01:00:5e:00:00:01']]) }, /unicast/],
      [
        {
          macs: new Map([
            [0, '02:00:00:00:00:01'],
            [1, '02:00:00:00:00:01'],
          ]),
        },
        /given to two instances/,
      ],
    ];
    for (const [o, re] of refusals) {
      const r = planInstances({ ...base, ...o });
      expect(r.ok, JSON.stringify(o)).to.equal(false);
      if (!r.ok) {
        expect(r.error).to.match(re);
        expect(r.error).to.not.include('\n');
      }
    }
  });

  it('knows a Linux interface name when it sees one', function () {
    expect(isValidIfName('ernic-tap0')).to.equal(true);
    expect(isValidIfName('x'.repeat(15))).to.equal(true);
    for (const bad of ['', 'x'.repeat(16), 'a b', 'a/b', 'a:b', '.', '..'])
      expect(isValidIfName(bad), bad).to.equal(false);
  });
});

describe('ops: instances.json', function () {
  let dir: string;
  beforeEach(function () {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ernic-manifest-'));
  });
  afterEach(function () {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const manifest = (): Manifest => ({
    format: MANIFEST_FORMAT,
    created: '2026-01-01T00:00:00.000Z',
    host: 'h',
    run_dir: dir,
    log_dir: dir,
    tcp_port: 6320,
    manager_ip: '127.0.0.1',
    bridge: { name: 'ernicbr0', created: true },
    socket_mode: '660',
    socket_group: null,
    instances: [
      {
        id: 0,
        role: 'manager',
        pid: 42,
        mac: '02:00:00:00:00:01',
        gid: 'fe80::ff:fe00:1',
        socket: `${dir}/0.sock`,
        tap: 'ernic-tap0',
        tap_created: true,
        backend: 'tcp:manager:listen:6320',
        profile: 'compat',
        pid_file: `${dir}/0.pid`,
        stats: `${dir}/0.stats`,
        log: `${dir}/0.log`,
        mesh_node: 0,
        started: '2026-01-01T00:00:00.000Z',
        vm: null,
      },
    ],
  });

  it('reads back what was written; no file is "none", not an error', function () {
    expect(readManifest(dir)).to.deep.equal({ ok: true, manifest: null });
    writeManifest(dir, manifest());
    expect(readManifest(dir)).to.deep.equal({ ok: true, manifest: manifest() });
    expect(fs.readdirSync(dir)).to.deep.equal(['instances.json']);
  });

  it('names the field of a manifest it cannot use, and says when it is not JSON', function () {
    const m = manifest() as unknown as { instances: { pid: unknown }[] };
    m.instances[0]!.pid = 'x';
    fs.writeFileSync(path.join(dir, 'instances.json'), JSON.stringify(m));
    const r = readManifest(dir);
    expect(r.ok).to.equal(false);
    if (!r.ok) expect(r.error).to.include('instances.0.pid');
    fs.writeFileSync(path.join(dir, 'instances.json'), '{"format"');
    const t = readManifest(dir);
    expect(t.ok).to.equal(false);
    if (!t.ok) expect(t.error).to.include('not JSON');
  });
});

describe('ops: what status reads', function () {
  it('counts the connected peers of a listening socket in /proc/net/unix', function () {
    const text = [
      'Num       RefCount Protocol Flags    Type St Inode Path',
      '0000000000000000: 00000002 00000000 00010000 0001 01 1001 /run/rocm-ernic/0.sock',
      '0000000000000000: 00000003 00000000 00000000 0001 03 1002 /run/rocm-ernic/0.sock',
      '0000000000000000: 00000003 00000000 00000000 0001 03 1003 /run/rocm-ernic/1.sock',
      '0000000000000000: 00000003 00000000 00000000 0001 03 1004',
    ].join('\n');
    expect(connectedClients('/run/rocm-ernic/0.sock', text)).to.equal(1);
    expect(connectedClients('/run/rocm-ernic/2.sock', text)).to.equal(0);
  });
});
