// NIC profiles (see model.ts for what a profile is and how this folder is cut).

export {
  formatLinkSpeed,
  IonicPhyType,
  IonicXcvrPid,
  LINK_SPEEDS_MBPS,
  maxFrameSize,
  parseLinkSpeed,
  ProfileError,
} from './model';
export type { NicOffloads, NicProfile, ProfileErrorCode } from './model';
export { nicProfileSchema, validateProfile } from './schema';
export { formatProfile, parseProfileIni, PROFILE_KEYS } from './ini';
export { builtinProfile, COMPAT_PROFILE, listProfiles } from './builtins';
export { isProfilePath, resolveProfile } from './resolve';
export type { ResolveOptions } from './resolve';
export { planVectors } from './plan';
