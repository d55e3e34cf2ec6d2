// ernicctl's mesh key (lib/ops): `start` makes RUN_DIR/mesh.psk once (32
// random bytes, mode 0600) and reuses it, refuses one that others may read
// or that is no key, and every mesh instance it plans gets --mesh-psk; a
// manager address off loopback is listened on explicitly and needs the key.

import { expect } from 'chai';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ensureMeshKey } from '../../lib/ops/instances';
import { HostPlanOptions, managerBackend, meshKeyPath, planInstances } from '../../lib/ops/plan';
import { loadMeshCredentials } from '../../lib/mesh/tls';

const base: HostPlanOptions = {
  count: 3,
  runDir: '/run/rocm-ernic',
  logDir: '/var/log/rocm-ernic',
  tcpPort: 6320,
  managerIp: '127.0.0.1',
  backend: 'loopback',
  tapPrefix: null,
  bridge: null,
  profile: 'compat',
  socketMode: null,
  socketGroup: null,
  logLevel: 'warn',
  machineId: 'f00dfeed',
};

describe("ops: the host's mesh key", function () {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ernic-key-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('is made once: 32 random bytes, mode 0600, then reused as is; the server takes it', () => {
    const file = meshKeyPath(dir);
    expect(file).to.equal(path.join(dir, 'mesh.psk'));
    const first = ensureMeshKey(file);
    expect(first).to.deep.equal({ ok: true, value: { file, created: true } });
    const st = fs.statSync(file);
    expect(st.size).to.equal(32);
    expect(st.mode & 0o777).to.equal(0o600);
    const bytes = fs.readFileSync(file);
    expect(bytes.equals(Buffer.alloc(32))).to.equal(false);
    expect(ensureMeshKey(file)).to.deep.equal({ ok: true, value: { file, created: false } });
    expect(fs.readFileSync(file).equals(bytes)).to.equal(true);
    expect(fs.readdirSync(dir)).to.deep.equal(['mesh.psk']);
    const c = loadMeshCredentials({ psk: file }, {});
    expect(c.ok && c.value?.kind).to.equal('psk');
  });

  it('refuses a key others may read, a short one, and one that is not a file', () => {
    const file = meshKeyPath(dir);
    fs.writeFileSync(file, Buffer.alloc(32, 1), { mode: 0o644 });
    fs.chmodSync(file, 0o644);
    expect(ensureMeshKey(file)).to.deep.include({ ok: false });
    expect((ensureMeshKey(file) as { error: string }).error).to.match(
      /mesh\.psk: open to group or others \(mode 644\); chmod 600 it, or remove it for a new one$/,
    );
    fs.chmodSync(file, 0o600);
    fs.truncateSync(file, 8);
    expect((ensureMeshKey(file) as { error: string }).error).to.match(/mesh\.psk: 8 bytes, not a key/);
    fs.rmSync(file);
    fs.mkdirSync(file);
    expect((ensureMeshKey(file) as { error: string }).error).to.match(/mesh\.psk: not a regular file/);
    expect(fs.readdirSync(dir)).to.deep.equal(['mesh.psk']);
  });

  it('goes to every mesh instance as --mesh-psk, and to none without a mesh', () => {
    const r = planInstances({ ...base, meshPsk: '/run/rocm-ernic/mesh.psk' });
    if (!r.ok) throw new Error(r.error);
    for (const i of r.instances) {
      const at = i.args.indexOf('--mesh-psk');
      expect(at, `instance ${i.id}`).to.be.greaterThan(-1);
      expect(i.args[at + 1]).to.equal('/run/rocm-ernic/mesh.psk');
    }
    const single = planInstances({ ...base, tcpPort: null, meshPsk: '/run/rocm-ernic/mesh.psk' });
    if (!single.ok) throw new Error(single.error);
    expect(single.instances.every((i) => !i.args.includes('--mesh-psk'))).to.equal(true);
  });

  it('a manager address off loopback is listened on explicitly, and needs the key', () => {
    expect(managerBackend('127.0.0.1', 6320)).to.equal('tcp:manager:listen:6320');
    expect(managerBackend('10.0.0.5', 6320)).to.equal('tcp:manager:10.0.0.5:6320');
    expect(managerBackend('fd00::5', 6320)).to.equal('tcp:manager:[fd00::5]:6320');
    const r = planInstances({ ...base, managerIp: '10.0.0.5', meshPsk: '/run/rocm-ernic/mesh.psk' });
    if (!r.ok) throw new Error(r.error);
    expect(r.instances.map((i) => i.backend)).to.deep.equal([
      'tcp:manager:10.0.0.5:6320',
      'tcp:worker:10.0.0.5:6320',
      'tcp:worker:10.0.0.5:6320',
    ]);
    expect(planInstances({ ...base, managerIp: '10.0.0.5' })).to.deep.equal({
      ok: false,
      error: '--manager-ip 10.0.0.5: a mesh off loopback needs its key (--mesh-psk); ernicctl start passes one',
    });
  });
});
