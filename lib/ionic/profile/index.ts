// NIC profiles (see model.ts for what a profile is and how this folder is cut).

export {
  FRAME_OVERHEAD,
  formatLinkSpeed,
  IonicAsicType,
  IonicPhyType,
  IonicXcvrPid,
  LINK_SPEEDS_MBPS,
  maxFrameSize,
  parseLinkSpeed,
  ProfileError,
  ProfileLimits,
} from './model';
export type { IniKey, NicOffloads, NicProfile, ProfileErrorCode, Transceiver, TransceiverPhy } from './model';
export { nicProfileSchema, validateProfile } from './schema';
export { formatProfile, parseProfileIni, PROFILE_KEYS } from './ini';
export type { ProfileLayer, ProfileSetting, ProfileValue } from './ini';
export { builtinProfile, COMPAT_PROFILE, listProfiles } from './builtins';
export { isProfilePath, resolveProfile } from './resolve';
export type { ResolveOptions } from './resolve';
export { planVectors } from './plan';
export type { VectorPlan } from './plan';
