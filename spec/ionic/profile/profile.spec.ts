import { expect } from 'chai';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  COMPAT_PROFILE,
  IonicXcvrPid,
  LINK_SPEEDS_MBPS,
  NicProfile,
  PROFILE_KEYS,
  ProfileError,
  ProfileErrorCode,
  builtinProfile,
  formatLinkSpeed,
  formatProfile,
  isProfilePath,
  listProfiles,
  maxFrameSize,
  nicProfileSchema,
  parseLinkSpeed,
  parseProfileIni,
  planVectors,
  resolveProfile,
  validateProfile,
} from '../../../lib/ionic/profile';

// dist/spec/ionic/profile/profile.spec.js -> repo root
const ROOT = path.join(__dirname, '..', '..', '..', '..');
const PROFILES_DIR = path.join(ROOT, 'profiles');

let dir = '';

/** Writes `name` under the scratch dir and returns it as written on a command line ("./name"). */
function ini(name: string, text: string): string {
  fs.writeFileSync(path.join(dir, name), text);
  return `./${name}`;
}

function resolveIn(spec: string): NicProfile {
  return resolveProfile(spec, { baseDir: dir });
}

/** Runs `fn`, expects a ProfileError with `code`, and returns its message. */
function profileError(fn: () => unknown, code: ProfileErrorCode): string {
  try {
    fn();
  } catch (e) {
    expect(e).to.be.instanceOf(ProfileError);
    const err = e as ProfileError;
    expect(err.code, err.message).to.equal(code);
    expect(err.message).to.not.include('\n');
    return err.message;
  }
  expect.fail(`expected a ProfileError ${code}`);
}

/** The message for a one-key ini whose value is bad. */
function badValue(key: string, value: string): string {
  const file = ini('bad.ini', `# a comment\n[profile]\n\n${key} = ${value}\n`);
  return profileError(() => resolveIn(file), 'BAD_VALUE');
}

describe('ionic/profile', () => {
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ernic-profile-'));
  });
  after(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  describe('compat', () => {
    it('has the documented defaults', () => {
      expect(COMPAT_PROFILE).to.deep.equal({
        name: 'compat',
        description: COMPAT_PROFILE.description,
        msixVectors: 32,
        ethQueues: 16,
        rdmaEqs: 32,
        linkSpeedMbps: 100000,
        transceiver: { phy: 'copper', pid: IonicXcvrPid.QSFP_100G_CR4, description: '100 Gb/s copper QSFP' },
        maxMtu: 9000,
        firmwareVersion: '1.0.0-ernic',
        statsIntervalMs: 1000,
        asicType: 1,
        asicRev: 0,
        serialNumber: COMPAT_PROFILE.serialNumber,
        offloads: { txSg: true, txCsum: true, tso: true, rxCsum: true, rxHash: true, vlan: true },
      });
      expect(IonicXcvrPid.QSFP_100G_CR4).to.equal(1);
      expect(maxFrameSize(COMPAT_PROFILE)).to.equal(9018);
    });

    it('is what resolveProfile("compat") returns, frozen', () => {
      const p = resolveProfile('compat');
      expect(p).to.deep.equal(COMPAT_PROFILE);
      expect(Object.isFrozen(p)).to.equal(true);
      expect(Object.isFrozen(p.transceiver)).to.equal(true);
      expect(Object.isFrozen(p.offloads)).to.equal(true);
      expect(Object.isFrozen(COMPAT_PROFILE)).to.equal(true);
    });
  });

  describe('built-ins', () => {
    const names = listProfiles().map((p) => p.name);

    it('lists compat first, three real cards and low-vectors', () => {
      expect(names[0]).to.equal('compat');
      expect(names).to.include.members(['compat', 'dsc-25', 'dsc-100', 'pollara-400', 'low-vectors']);
      for (const { name, description } of listProfiles()) {
        expect(description, name).to.not.equal('');
        expect(builtinProfile(name)?.description).to.equal(description);
      }
      expect(listProfiles().find((p) => p.name === 'dsc-25')?.description).to.include('DSC-25');
      expect(listProfiles().find((p) => p.name === 'dsc-100')?.description).to.include('DSC-100');
      expect(listProfiles().find((p) => p.name === 'pollara-400')?.description).to.include('Pollara 400');
    });

    it('every built-in passes the schema and keeps RDMA usable on any guest with >= 4 CPUs', () => {
      for (const name of names) {
        const p = builtinProfile(name);
        expect(p, name).to.not.equal(undefined);
        if (p === undefined) continue;
        expect(nicProfileSchema.safeParse(p).success, name).to.equal(true);
        expect(validateProfile(p, name)).to.deep.equal(p);
        // The card profiles need no halving even with a CPU per queue. compat's
        // fixed numbers (1 + 16 + 32 > 32) rely on the driver halving its EQs.
        if (name !== 'compat') expect(1 + p.ethQueues + p.rdmaEqs, name).to.be.at.most(p.msixVectors);
        for (const cpus of [4, 8, 16, 64, 256])
          expect(planVectors(p, cpus).rdmaUsable, `${name} ${cpus}`).to.equal(true);
        expect(p.asicType, name).to.be.oneOf([1, 3, 4]);
      }
    });

    it('has the values the descriptions claim', () => {
      expect(builtinProfile('dsc-25')).to.include({ linkSpeedMbps: 25000, maxMtu: 9194, asicType: 1 });
      expect(builtinProfile('dsc-25')?.transceiver).to.include({ phy: 'copper', pid: IonicXcvrPid.SFP_25GBASE_CR_S });
      expect(builtinProfile('dsc-100')).to.include({ linkSpeedMbps: 100000, maxMtu: 9194, asicType: 1 });
      expect(builtinProfile('dsc-100')?.transceiver).to.include({ phy: 'fiber', pid: IonicXcvrPid.QSFP_100G_SR4 });
      expect(builtinProfile('pollara-400')).to.include({ linkSpeedMbps: 400000, msixVectors: 128, asicType: 4 });
      expect(builtinProfile('pollara-400')?.transceiver).to.include({ phy: 'fiber', pid: IonicXcvrPid.QSFP_400G_DR4 });
      expect(builtinProfile('low-vectors')).to.deep.equal({
        ...COMPAT_PROFILE,
        name: 'low-vectors',
        description: builtinProfile('low-vectors')?.description,
        msixVectors: 8,
        ethQueues: 2,
        rdmaEqs: 4,
      });
    });

    for (const name of ['compat', 'dsc-25', 'dsc-100', 'pollara-400', 'low-vectors']) {
      it(`profiles/${name}.ini is exactly formatProfile(${name}) and resolves to it`, () => {
        const p = builtinProfile(name);
        if (p === undefined) expect.fail(`no built-in ${name}`);
        const file = path.join(PROFILES_DIR, `${name}.ini`);
        expect(fs.readFileSync(file, 'utf8')).to.equal(formatProfile(p));
        const layer = parseProfileIni(fs.readFileSync(file, 'utf8'), file);
        expect(layer.settings.map((s) => s.key)).to.have.members([...PROFILE_KEYS]);
        expect(resolveProfile(file)).to.deep.equal({ ...p, name: `compat+${file}` });
      });
    }

    it('profiles/ holds no ini file without a built-in', () => {
      const files = fs
        .readdirSync(PROFILES_DIR)
        .filter((f) => f.endsWith('.ini'))
        .map((f) => f.slice(0, -4));
      expect(files).to.have.members(names);
    });
  });

  describe('formatProfile', () => {
    it('round-trips values that need quotes', () => {
      const odd: NicProfile = {
        ...COMPAT_PROFILE,
        description: '  padded # not a comment ; either  ',
        serialNumber: '',
        firmwareVersion: '"quoted"',
        linkSpeedMbps: 1000,
      };
      const file = ini('odd.ini', formatProfile(odd));
      expect(resolveIn(file)).to.deep.equal({ ...odd, name: `compat+${file}` });
      expect(formatProfile(odd)).to.include('link_speed = 1G\n');
    });

    it('writes one key = value line per key', () => {
      const keys = formatProfile(COMPAT_PROFILE)
        .split('\n')
        .filter((l) => / = /.test(l) && !l.startsWith('#'))
        .map((l) => l.split(' = ')[0]);
      expect(keys).to.deep.equal([...PROFILE_KEYS]);
    });
  });

  describe('layering', () => {
    it('later entries win and the name lists the layers', () => {
      const a = resolveProfile('dsc-25,dsc-100');
      expect(a).to.deep.equal({ ...builtinProfile('dsc-100'), name: 'compat+dsc-25+dsc-100' });
      const b = resolveProfile('dsc-100,dsc-25');
      expect(b).to.deep.equal({ ...builtinProfile('dsc-25'), name: 'compat+dsc-100+dsc-25' });
      expect(resolveProfile('dsc-25').name).to.equal('compat+dsc-25');
      expect(resolveProfile('compat,dsc-25').name).to.equal('compat+dsc-25');
      expect(resolveProfile(' dsc-25 , low-vectors ').name).to.equal('compat+dsc-25+low-vectors');
    });

    it('an ini changes only its keys; a later built-in replaces everything', () => {
      const x = ini('x.ini', 'msix_vectors = 64\nmax_mtu = 1500\n');
      const p = resolveIn(`dsc-25,${x}`);
      expect(p).to.deep.equal({
        ...builtinProfile('dsc-25'),
        name: 'compat+dsc-25+./x.ini',
        msixVectors: 64,
        maxMtu: 1500,
      });
      const q = resolveIn(`${x},dsc-25`);
      expect(q).to.deep.equal({ ...builtinProfile('dsc-25'), name: 'compat+./x.ini+dsc-25' });
    });

    it('two ini files: the second wins where both set a key', () => {
      const one = ini('one.ini', 'eth_queues = 4\nrdma_eqs = 8\n');
      const two = ini('two.ini', '[profile]\nrdma_eqs = 0\n');
      const p = resolveIn(`${one},${two}`);
      expect(p).to.include({ ethQueues: 4, rdmaEqs: 0, msixVectors: 32, name: 'compat+./one.ini+./two.ini' });
    });

    it('a partial ini sets only what it names', () => {
      const part = ini('part.ini', '; just two keys\n\nlink_speed = 25G\ntransceiver_pid = 3\n');
      expect(resolveIn(part)).to.deep.equal({
        ...COMPAT_PROFILE,
        name: 'compat+./part.ini',
        linkSpeedMbps: 25000,
        transceiver: { ...COMPAT_PROFILE.transceiver, pid: 3 },
      });
    });

    it('reads relative paths from baseDir and absolute paths as they are', () => {
      const rel = ini('rel.ini', 'asic_rev = 7\n');
      expect(resolveIn(rel).asicRev).to.equal(7);
      const abs = path.join(dir, 'rel.ini');
      expect(resolveProfile(abs).asicRev).to.equal(7);
      expect(resolveProfile(abs).name).to.equal(`compat+${abs}`);
    });

    it('tells paths from names by a slash or an .ini suffix', () => {
      expect(isProfilePath('dsc-25')).to.equal(false);
      expect(isProfilePath('x.ini')).to.equal(true);
      expect(isProfilePath('dir/x')).to.equal(true);
      const plain = ini('plain.ini', 'asic_rev = 9\n');
      expect(plain).to.equal('./plain.ini');
      expect(resolveIn('plain.ini').asicRev).to.equal(9);
    });
  });

  describe('ini syntax', () => {
    it('accepts comments, blank lines, CRLF, a BOM, [PROFILE], spacing and quotes', () => {
      const text =
        '\uFEFF# c1\r\n; c2\r\n\r\n  [ PROFILE ]  \r\n  eth_queues=8  \r\nserial_number = " SN 1 "\r\ntransceiver_phy = Fiber\r\n';
      const p = resolveIn(ini('syntax.ini', text));
      expect(p).to.include({ ethQueues: 8, serialNumber: ' SN 1 ' });
      expect(p.transceiver.phy).to.equal('fiber');
    });

    it('accepts a hex pid and an empty serial number', () => {
      const p = resolveIn(ini('hex.ini', 'transceiver_pid = 0x50\nserial_number =\n'));
      expect(p.transceiver.pid).to.equal(80);
      expect(p.serialNumber).to.equal('');
    });

    it('reports settings with their line numbers', () => {
      const layer = parseProfileIni('# x\n\nmsix_vectors = 16\nlink_speed = 10G\n', 'mem');
      expect(layer.settings).to.deep.equal([
        { key: 'msix_vectors', value: 16, raw: '16', line: 3 },
        { key: 'link_speed', value: 10000, raw: '10G', line: 4 },
      ]);
    });
  });

  describe('link_speed', () => {
    const forms: Array<[string, number]> = [
      ['1G', 1000],
      ['10G', 10000],
      ['25G', 25000],
      ['40G', 40000],
      ['50G', 50000],
      ['100G', 100000],
      ['200G', 200000],
      ['400G', 400000],
      ['100g', 100000],
      ['25 G', 25000],
      ['100000', 100000],
      ['1000', 1000],
    ];
    for (const [text, mbps] of forms) {
      it(`reads ${text} as ${mbps} Mbps`, () => {
        expect(resolveIn(ini('speed.ini', `link_speed = ${text}\n`)).linkSpeedMbps).to.equal(mbps);
      });
    }

    it('formats every allowed speed so it parses back', () => {
      for (const mbps of LINK_SPEEDS_MBPS) expect(parseLinkSpeed(formatLinkSpeed(mbps))).to.equal(mbps);
    });

    for (const bad of ['30G', '100', '2.5G', 'fast', '100 Gbps', '-100G', '']) {
      it(`refuses '${bad}'`, () => {
        expect(badValue('link_speed', bad)).to.match(
          /^profile \.\/bad\.ini line 4: link_speed = .*: must be one of 1G, 10G, 25G, 40G, 50G, 100G, 200G, 400G \(or the same in Mbps\)$/,
        );
      });
    }
  });

  describe('errors', () => {
    it('names file, line, key and range for an out-of-range value', () => {
      const file = ini('x.ini', '# header\n[profile]\neth_queues = 4\nmsix_vectors = 500\n');
      expect(profileError(() => resolveIn(file), 'BAD_VALUE')).to.equal(
        'profile ./x.ini line 4: msix_vectors = 500: must be between 2 and 128',
      );
    });

    const cases: Array<[string, string, RegExp]> = [
      ['msix_vectors', '1', /must be between 2 and 128$/],
      ['msix_vectors', '129', /must be between 2 and 128$/],
      ['msix_vectors', 'abc', /must be a whole number, between 2 and 128$/],
      ['msix_vectors', '-3', /must be a whole number/],
      ['msix_vectors', '3.5', /must be a whole number/],
      ['eth_queues', '0', /must be between 1 and 64$/],
      ['eth_queues', '65', /must be between 1 and 64$/],
      ['rdma_eqs', '2', /must be 0 \(no RDMA\) or between 4 and 64/],
      ['rdma_eqs', '3', /must be 0 \(no RDMA\) or between 4 and 64/],
      ['rdma_eqs', '65', /must be 0 \(no RDMA\) or between 4 and 64/],
      ['transceiver_phy', 'dac', /must be copper, fiber or none$/],
      ['transceiver_pid', '65536', /must be between 0 and 65535$/],
      ['transceiver', '', /must be 1 to 64 printable ASCII characters$/],
      ['max_mtu', '1499', /must be between 1500 and 9194$/],
      ['max_mtu', '9195', /must be between 1500 and 9194$/],
      ['firmware_version', 'x'.repeat(32), /must be 1 to 31 printable ASCII characters$/],
      ['firmware_version', '', /must be 1 to 31 printable ASCII characters$/],
      ['firmware_version', '1.0\u00e9', /must be 1 to 31 printable ASCII characters$/],
      ['stats_interval_ms', '99', /must be between 100 and 60000$/],
      ['stats_interval_ms', '60001', /must be between 100 and 60000$/],
      ['asic_type', '0', /must be 1 \(CAPRI\), 3 \(GIGLIO\) or 4 \(SALINA\)/],
      ['asic_type', '2', /must be 1 \(CAPRI\), 3 \(GIGLIO\) or 4 \(SALINA\)/],
      ['asic_type', '5', /must be 1 \(CAPRI\), 3 \(GIGLIO\) or 4 \(SALINA\)/],
      ['asic_rev', '256', /must be between 0 and 255$/],
      ['serial_number', 'S'.repeat(32), /must be at most 31 printable ASCII characters$/],
      ['description', '', /must be 1 to 200 printable ASCII characters$/],
      ['name', '', /must be 1 to 255 printable ASCII characters$/],
    ];
    for (const [key, value, problem] of cases) {
      it(`refuses ${key} = '${value.length > 12 ? value.slice(0, 12) + '...' : value}'`, () => {
        const msg = badValue(key, value);
        expect(msg.startsWith(`profile ./bad.ini line 4: ${key} = `), msg).to.equal(true);
        expect(msg).to.match(problem);
      });
    }

    it('accepts the edges of each range', () => {
      const edges =
        'msix_vectors = 128\neth_queues = 64\nrdma_eqs = 64\nmax_mtu = 9194\nstats_interval_ms = 60000\n' +
        'asic_type = 4\nasic_rev = 255\ntransceiver_pid = 65535\nfirmware_version = ' +
        'v'.repeat(31) +
        '\n';
      expect(resolveIn(ini('edges.ini', edges))).to.include({ msixVectors: 128, rdmaEqs: 64, asicRev: 255 });
      const low =
        'msix_vectors = 3\neth_queues = 1\nrdma_eqs = 4\nmax_mtu = 1500\nstats_interval_ms = 100\nasic_type = 3\n';
      expect(resolveIn(ini('low.ini', low))).to.include({ msixVectors: 3, rdmaEqs: 4, asicType: 3 });
    });

    it('unknown key, with a suggestion', () => {
      const file = ini('x.ini', '[profile]\nmsix = 8\n');
      const msg = profileError(() => resolveIn(file), 'UNKNOWN_KEY');
      expect(msg).to.match(/^profile \.\/x\.ini line 2: unknown key 'msix'/);
      expect(msg).to.include("did you mean 'msix_vectors'");
      expect(profileError(() => resolveIn(ini('y.ini', 'msixVectors = 8\n')), 'UNKNOWN_KEY')).to.include(
        "did you mean 'msix_vectors'",
      );
      expect(profileError(() => resolveIn(ini('z.ini', 'colour = blue\n')), 'UNKNOWN_KEY')).to.match(
        /^profile \.\/z\.ini line 1: unknown key 'colour' \(keys: name, description, msix_vectors/,
      );
    });

    it('sections other than [profile]', () => {
      const file = ini('x.ini', 'msix_vectors = 8\n[device]\n');
      expect(profileError(() => resolveIn(file), 'BAD_SECTION')).to.equal(
        'profile ./x.ini line 2: unknown section [device] (only [profile] is allowed)',
      );
      expect(profileError(() => resolveIn(ini('y.ini', '[profile]\n[profile]\n')), 'BAD_SECTION')).to.match(
        /^profile \.\/y\.ini line 2: second \[profile\]/,
      );
      expect(profileError(() => resolveIn(ini('z.ini', '[profile\n')), 'SYNTAX')).to.match(
        /^profile \.\/z\.ini line 1: malformed section header/,
      );
    });

    it('lines that are not key = value', () => {
      expect(profileError(() => resolveIn(ini('x.ini', '\nmsix_vectors 8\n')), 'SYNTAX')).to.equal(
        "profile ./x.ini line 2: expected 'key = value', got 'msix_vectors 8'",
      );
      expect(profileError(() => resolveIn(ini('y.ini', '= 8\n')), 'SYNTAX')).to.equal(
        "profile ./y.ini line 1: missing key before '='",
      );
    });

    it('duplicate keys in one file', () => {
      const file = ini('x.ini', 'msix_vectors = 8\neth_queues = 2\nmsix_vectors = 16\n');
      expect(profileError(() => resolveIn(file), 'DUPLICATE_KEY')).to.equal(
        "profile ./x.ini line 3: duplicate key 'msix_vectors' (first set on line 1)",
      );
    });

    it('unknown built-in name', () => {
      const msg = profileError(() => resolveProfile('dsc-99'), 'UNKNOWN_PROFILE');
      expect(msg).to.match(
        /^unknown NIC profile 'dsc-99' \(built-ins: compat, dsc-25, dsc-100, pollara-400, low-vectors/,
      );
      expect(profileError(() => resolveProfile('compat,nope'), 'UNKNOWN_PROFILE')).to.include("'nope'");
    });

    it('missing, unreadable and oversized files', () => {
      expect(profileError(() => resolveIn('./missing.ini'), 'READ_FAILED')).to.equal(
        'profile ./missing.ini: cannot read: ENOENT',
      );
      fs.mkdirSync(path.join(dir, 'adir.ini'), { recursive: true });
      expect(profileError(() => resolveIn('./adir.ini'), 'READ_FAILED')).to.equal(
        'profile ./adir.ini: cannot read: EISDIR',
      );
      const big = ini('big.ini', '#'.repeat(64 * 1024) + '\n');
      expect(profileError(() => resolveIn(big), 'TOO_LARGE')).to.match(/^profile \.\/big\.ini: too large/);
    });

    it('empty lists and empty entries', () => {
      expect(profileError(() => resolveProfile(''), 'EMPTY_SPEC')).to.match(/^empty NIC profile list/);
      expect(profileError(() => resolveProfile(' , '), 'EMPTY_SPEC')).to.match(/^empty NIC profile list/);
      expect(profileError(() => resolveProfile('compat,,dsc-25'), 'EMPTY_SPEC')).to.include('empty entry');
    });

    it('an error in the second file names the second file', () => {
      const good = ini('good.ini', 'msix_vectors = 8\n');
      const bad = ini('second.ini', '\n\nmax_mtu = 10000\n');
      expect(profileError(() => resolveIn(`${good},${bad}`), 'BAD_VALUE')).to.equal(
        'profile ./second.ini line 3: max_mtu = 10000: must be between 1500 and 9194',
      );
    });
  });

  describe('cross-field rules', () => {
    it('RDMA event queues need at least 3 vectors; 2 is fine without RDMA', () => {
      const two = ini('two.ini', '# tiny\nmsix_vectors = 2\n');
      expect(profileError(() => resolveIn(two), 'CROSS_FIELD')).to.equal(
        'profile ./two.ini line 2: rdma_eqs = 32 needs msix_vectors >= 3 (the driver never cuts RDMA event queues below 1), ' +
          "but msix_vectors = 2 (rdma_eqs from built-in 'compat')",
      );
      const noRdma = ini('nordma.ini', 'msix_vectors = 2\nrdma_eqs = 0\n');
      expect(resolveIn(noRdma)).to.include({ msixVectors: 2, rdmaEqs: 0 });
      expect(planVectors(resolveIn(noRdma), 8)).to.deep.equal({
        nxqs: 1,
        neqs: 0,
        nintrs: 2,
        probeFails: false,
        rdmaUsable: false,
      });
    });

    it('blames the key set last, across files', () => {
      const a = ini('a.ini', 'msix_vectors = 2\nrdma_eqs = 0\n');
      const b = ini('b.ini', '\nrdma_eqs = 4\n');
      expect(profileError(() => resolveIn(`${a},${b}`), 'CROSS_FIELD')).to.match(
        /^profile \.\/b\.ini line 2: rdma_eqs = 4 needs msix_vectors >= 3 .* \(msix_vectors from \.\/a\.ini line 1\)$/,
      );
    });

    it('transceiver_phy = none needs pid 0', () => {
      const none = ini('none.ini', 'transceiver_phy = none\n');
      expect(profileError(() => resolveIn(none), 'CROSS_FIELD')).to.equal(
        "profile ./none.ini line 1: transceiver_phy = none needs transceiver_pid = 0, but transceiver_pid = 1 (transceiver_pid from built-in 'compat')",
      );
      const ok = ini('none0.ini', 'transceiver_phy = none\ntransceiver_pid = 0\n');
      expect(resolveIn(ok).transceiver).to.include({ phy: 'none', pid: 0 });
    });

    it('the schema and validateProfile enforce them on whole objects too', () => {
      const bad = { ...COMPAT_PROFILE, msixVectors: 2 };
      expect(nicProfileSchema.safeParse(bad).success).to.equal(false);
      expect(profileError(() => validateProfile(bad, 'mine'), 'CROSS_FIELD')).to.match(
        /^profile mine: rdma_eqs = 32 needs msix_vectors >= 3/,
      );
      expect(profileError(() => validateProfile({ ...COMPAT_PROFILE, rdmaEqs: 2 }, 'mine'), 'BAD_VALUE')).to.match(
        /^profile mine: rdma_eqs: must be 0 \(no RDMA\) or between 4 and 64/,
      );
      expect(
        profileError(
          () => validateProfile({ ...COMPAT_PROFILE, transceiver: { ...COMPAT_PROFILE.transceiver, pid: -1 } }, 'mine'),
          'BAD_VALUE',
        ),
      ).to.match(/^profile mine: transceiver_pid: must be between 0 and 65535/);
      expect(() => validateProfile({ ...COMPAT_PROFILE, extra: 1 }, 'mine')).to.throw(ProfileError);
      expect(() => validateProfile({ ...COMPAT_PROFILE, msixVectors: '32' }, 'mine')).to.throw(ProfileError);
    });
  });

  describe('planVectors (ionic_lif_size)', () => {
    it('gives compat one queue pair and one EQ per CPU on a small guest', () => {
      expect(planVectors(COMPAT_PROFILE, 4)).to.deep.equal({
        nxqs: 4,
        neqs: 4,
        nintrs: 9,
        probeFails: false,
        rdmaUsable: true,
      });
    });

    it('halves EQs before queue pairs on a large guest', () => {
      // 1 + 16 + 32 = 49 > 32, then 1 + 16 + 16 = 33 > 32, then 1 + 16 + 8 = 25.
      expect(planVectors(COMPAT_PROFILE, 64)).to.deep.equal({
        nxqs: 16,
        neqs: 8,
        nintrs: 25,
        probeFails: false,
        rdmaUsable: true,
      });
    });

    it('fits low-vectors exactly and leaves RDMA unusable below 4 CPUs', () => {
      const p = builtinProfile('low-vectors');
      if (p === undefined) expect.fail('no low-vectors');
      expect(planVectors(p, 16)).to.deep.equal({ nxqs: 2, neqs: 4, nintrs: 7, probeFails: false, rdmaUsable: true });
      expect(planVectors(p, 2).rdmaUsable).to.equal(false);
    });

    it('shows why the cross-field rule exists: 2 vectors with RDMA EQs fail probe', () => {
      const unchecked: NicProfile = { ...COMPAT_PROFILE, msixVectors: 2 };
      expect(planVectors(unchecked, 8).probeFails).to.equal(true);
      expect(planVectors({ ...COMPAT_PROFILE, msixVectors: 3 }, 8)).to.include({
        nxqs: 1,
        neqs: 1,
        nintrs: 3,
        probeFails: false,
      });
    });
  });
});
