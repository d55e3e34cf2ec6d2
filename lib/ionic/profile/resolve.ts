// Resolving a --nic-profile list: built-in names and ini files layered in
// order over `compat`, later entries winning; every value is checked at the
// edge (here), so the device code can take a NicProfile as valid.

import * as fs from 'node:fs';
import * as path from 'node:path';
import { BUILTINS, COMPAT_PROFILE } from './builtins';
import { assemble, clip, flatten, parseProfileIni, PROFILE_KEYS } from './ini';
import { IniKey, NicProfile, ProfileError, ProfileLimits } from './model';
import { CROSS_RULES, CrossRule, profileShape, validateProfile } from './schema';

export interface ResolveOptions {
  /** Directory relative ini paths are read from (default: process.cwd()). */
  readonly baseDir?: string;
}

interface Origin {
  /** "./x.ini" or "built-in 'dsc-25'". */
  readonly source: string;
  readonly line?: number;
  /** Layer position, for "which key was set last". */
  readonly order: number;
}

/** True when a --nic-profile entry names a file rather than a built-in. */
export function isProfilePath(entry: string): boolean {
  return entry.includes('/') || entry.endsWith('.ini');
}

/**
 * Layers a comma-separated list of built-in names and ini paths, in order, over
 * `compat`; later entries win. The result is frozen and named after the list.
 */
export function resolveProfile(spec: string, opts: ResolveOptions = {}): NicProfile {
  const entries = spec.split(',').map((e) => e.trim());
  const builtinNames = [...BUILTINS.keys()].join(', ');
  if (entries.every((e) => e === '')) {
    throw new ProfileError(`empty NIC profile list (built-ins: ${builtinNames})`, 'EMPTY_SPEC');
  }
  if (entries.some((e) => e === '')) {
    throw new ProfileError(`NIC profile list '${spec}' has an empty entry`, 'EMPTY_SPEC');
  }

  const values = flatten(COMPAT_PROFILE);
  const origins = new Map<IniKey, Origin>();
  for (const k of PROFILE_KEYS) origins.set(k, { source: "built-in 'compat'", order: 0 });
  const nameParts = ['compat'];

  entries.forEach((entry, index) => {
    const order = index + 1;
    if (isProfilePath(entry)) {
      const layer = parseProfileIni(readProfileFile(entry, opts.baseDir), entry);
      for (const s of layer.settings) {
        values[s.key] = s.value;
        origins.set(s.key, { source: entry, line: s.line, order });
      }
    } else {
      const p = BUILTINS.get(entry);
      if (p === undefined) {
        throw new ProfileError(
          `unknown NIC profile '${clip(entry)}' (built-ins: ${builtinNames}; a file needs a '/' or '.ini')`,
          'UNKNOWN_PROFILE',
        );
      }
      const flat = flatten(p);
      for (const k of PROFILE_KEYS) {
        values[k] = flat[k];
        origins.set(k, { source: `built-in '${entry}'`, order });
      }
    }
    if (!(index === 0 && entry === 'compat')) nameParts.push(entry);
  });
  values.name = nameParts.join('+');

  const name = nameParts.join('+');
  const candidate = assemble(values);
  // Each value was checked on its own line; this catches only a bad name (a long list).
  const fields = profileShape.safeParse(candidate);
  if (!fields.success) return validateProfile(candidate, name);
  for (const rule of CROSS_RULES) {
    if (rule.broken(fields.data)) throw crossFieldError(rule, fields.data, origins);
  }
  return validateProfile(fields.data, name);
}

function crossFieldError(rule: CrossRule, p: NicProfile, origins: ReadonlyMap<IniKey, Origin>): ProfileError {
  const [a, b] = rule.keys;
  const oa = origins.get(a);
  const ob = origins.get(b);
  const aLater = oa !== undefined && (ob === undefined || laterThan(oa, ob));
  const blamed = aLater ? oa : ob;
  const [otherKey, other] = aLater ? [b, ob] : [a, oa];
  const where = blamed === undefined ? 'profile' : `profile ${describeOrigin(blamed)}`;
  const from = other === undefined ? '' : ` (${otherKey} from ${describeOrigin(other)})`;
  return new ProfileError(`${where}: ${rule.message(p)}${from}`, 'CROSS_FIELD');
}

function laterThan(x: Origin, y: Origin): boolean {
  return x.order !== y.order ? x.order > y.order : (x.line ?? 0) >= (y.line ?? 0);
}

function describeOrigin(o: Origin): string {
  return o.line === undefined ? o.source : `${o.source} line ${o.line}`;
}

function readProfileFile(entry: string, baseDir: string | undefined): string {
  const full = path.resolve(baseDir ?? process.cwd(), entry);
  let fd: number;
  try {
    fd = fs.openSync(full, 'r');
  } catch (e) {
    throw new ProfileError(`profile ${entry}: cannot read: ${errnoCode(e)}`, 'READ_FAILED');
  }
  try {
    // Read at most one byte past the limit, so an endless file (a FIFO, /dev/zero) cannot hold us.
    const buf = Buffer.alloc(ProfileLimits.FILE_MAX_BYTES + 1);
    let filled = 0;
    for (;;) {
      const n = fs.readSync(fd, buf, filled, buf.length - filled, null);
      if (n === 0) break;
      filled += n;
      if (filled > ProfileLimits.FILE_MAX_BYTES) {
        throw new ProfileError(`profile ${entry}: too large (over ${ProfileLimits.FILE_MAX_BYTES} bytes)`, 'TOO_LARGE');
      }
    }
    return buf.subarray(0, filled).toString('utf8');
  } catch (e) {
    if (e instanceof ProfileError) throw e;
    throw new ProfileError(`profile ${entry}: cannot read: ${errnoCode(e)}`, 'READ_FAILED');
  } finally {
    fs.closeSync(fd);
  }
}

function errnoCode(e: unknown): string {
  if (e instanceof Error) {
    const code = (e as NodeJS.ErrnoException).code;
    return typeof code === 'string' ? code : (e.message.split('\n')[0] ?? 'error');
  }
  return String(e);
}
