// Built-in profiles. Queue and vector counts are scaled to the emulator's
// limits (128 vectors), not read off a real card; the link, transceiver, ASIC
// and MTU follow the named card.

import { IonicAsicType, IonicXcvrPid, NicProfile } from './model';
import { validateProfile } from './schema';

const COMPAT: NicProfile = {
  name: 'compat',
  description: 'Default: 32 MSI-X vectors, 16 queue pairs, 32 RDMA EQs, 100 Gb/s copper QSFP28, MTU 9000',
  msixVectors: 32,
  ethQueues: 16,
  rdmaEqs: 32,
  linkSpeedMbps: 100000,
  transceiver: { phy: 'copper', pid: IonicXcvrPid.QSFP_100G_CR4, description: '100 Gb/s copper QSFP' },
  maxMtu: 9000,
  firmwareVersion: '1.0.0-ernic',
  statsIntervalMs: 1000,
  asicType: IonicAsicType.CAPRI,
  asicRev: 0,
  serialNumber: 'ERNIC-00000000',
  offloads: { txSg: true, txCsum: true, tso: true, rxCsum: true, rxHash: true, vlan: true },
};

const BUILTIN_LIST: readonly NicProfile[] = [
  COMPAT,
  {
    ...COMPAT,
    name: 'dsc-25',
    description: 'AMD Pensando DSC-25 (Capri ASIC), 2x25G SFP28: one 25 Gb/s port, copper DAC',
    msixVectors: 48,
    ethQueues: 16,
    rdmaEqs: 16,
    linkSpeedMbps: 25000,
    transceiver: {
      phy: 'copper',
      pid: IonicXcvrPid.SFP_25GBASE_CR_S,
      description: '25 Gb/s copper SFP28 DAC (25GBASE-CR-S)',
    },
    maxMtu: 9194,
    firmwareVersion: '1.0.0-ernic-dsc25',
    serialNumber: 'ERNIC-D25-0001',
  },
  {
    ...COMPAT,
    name: 'dsc-100',
    description: 'AMD Pensando DSC-100 (Capri ASIC), 2x100G QSFP28: one 100 Gb/s port, SR4 optics',
    msixVectors: 96,
    ethQueues: 32,
    rdmaEqs: 32,
    linkSpeedMbps: 100000,
    transceiver: { phy: 'fiber', pid: IonicXcvrPid.QSFP_100G_SR4, description: '100 Gb/s fiber QSFP28 (100GBASE-SR4)' },
    maxMtu: 9194,
    firmwareVersion: '1.0.0-ernic-dsc100',
    serialNumber: 'ERNIC-D100-0001',
  },
  {
    ...COMPAT,
    name: 'pollara-400',
    description: 'AMD Pensando Pollara 400 AI NIC, 1x400G, PCIe Gen5 x16, 3rd-gen P4 ASIC (reported as SALINA)',
    msixVectors: 128,
    ethQueues: 64,
    rdmaEqs: 32,
    linkSpeedMbps: 400000,
    transceiver: { phy: 'fiber', pid: IonicXcvrPid.QSFP_400G_DR4, description: '400 Gb/s fiber QSFP (400GBASE-DR4)' },
    maxMtu: 9194,
    firmwareVersion: '1.0.0-ernic-pollara400',
    asicType: IonicAsicType.SALINA,
    serialNumber: 'ERNIC-P400-0001',
  },
  {
    ...COMPAT,
    name: 'low-vectors',
    description: 'Test: compat with 8 MSI-X vectors, 2 queue pairs and 4 RDMA EQs (1 + 2 + 4 = 7 fit)',
    msixVectors: 8,
    ethQueues: 2,
    rdmaEqs: 4,
  },
];

export const BUILTINS: ReadonlyMap<string, NicProfile> = new Map(
  BUILTIN_LIST.map((p) => [p.name, validateProfile(p, `built-in '${p.name}'`)]),
);

/** The default profile. */
export const COMPAT_PROFILE: NicProfile = BUILTINS.get('compat') ?? validateProfile(COMPAT, "built-in 'compat'");

/** A built-in profile by name, or undefined. */
export function builtinProfile(name: string): NicProfile | undefined {
  return BUILTINS.get(name);
}

/** Built-in profiles, `compat` first. */
export function listProfiles(): { name: string; description: string }[] {
  return [...BUILTINS.values()].map((p) => ({ name: p.name, description: p.description }));
}
