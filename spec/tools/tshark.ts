// tshark with the vfio-user dissector (docs/wireshark/vfio-user.lua) loaded, for spec/tools/wireshark.spec.ts: a run,
// its stderr without the harmless warnings, the -T fields rows of a capture, and field values as numbers.

import { expect } from 'chai';
import { spawnSync } from 'child_process';
import * as path from 'path';

const ROOT = process.env.VFU_REPO_ROOT ?? path.join(__dirname, '..', '..', '..');
export const LUA = path.join(ROOT, 'docs', 'wireshark', 'vfio-user.lua');

export interface Run {
  stdout: string;
  stderr: string;
  status: number | null;
}

// An empty HOME, so that a copy of the dissector installed in the user's
// personal plugin folder (or personal preferences) cannot interfere.
let tsharkHome = '';

/** Runs tshark with this HOME from now on ('': the caller's own). */
export function useTsharkHome(dir: string): void {
  tsharkHome = dir;
}

export function tsharkEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, LC_ALL: 'C' };
  if (tsharkHome) {
    env.HOME = tsharkHome;
    env.XDG_CONFIG_HOME = path.join(tsharkHome, '.config');
    delete env.WIRESHARK_CONFIG_DIR;
  }
  return env;
}

export function tshark(args: string[]): Run {
  const r = spawnSync('tshark', ['-X', `lua_script:${LUA}`, ...args], {
    encoding: 'utf8',
    maxBuffer: 512 * 1024 * 1024,
    env: tsharkEnv(),
  });
  if (r.error) throw r.error;
  return { stdout: r.stdout, stderr: r.stderr, status: r.status };
}

/** stderr without tshark's harmless "running as root" warning. */
export function realStderr(r: Run): string {
  return r.stderr
    .split('\n')
    .filter((l) => l.trim() !== '' && !/^Running as user .* This could be dangerous\.$/.test(l.trim()))
    .join('\n');
}

export function expectClean(r: Run, what: string): void {
  expect(r.status, `${what}: tshark exit status; stderr: ${r.stderr}`).to.equal(0);
  const err = realStderr(r);
  expect(err, `${what}: stderr`).to.not.match(/Lua|error/i);
  expect(r.stdout, `${what}: stdout`).to.not.match(/Lua Error|Dissector problem|Malformed Packet|Dissector bug/);
}

/** Runs -T fields with the given fields; frame.comment, if wanted, must be last. */
export function fields(file: string, names: string[], extra: string[] = []): string[][] {
  const args = ['-r', file, ...extra, '-T', 'fields', '-E', 'separator=/t', '-E', 'occurrence=a', '-E', 'aggregator=,'];
  for (const n of names) args.push('-e', n);
  const r = tshark(args);
  expectClean(r, `fields ${path.basename(file)}`);
  const rows = r.stdout.split('\n').filter((l) => l !== '');
  return rows.map((l) => {
    const parts = l.split('\t');
    if (parts.length > names.length) {
      // the comment (last) may not contain tabs, but be safe
      return [...parts.slice(0, names.length - 1), parts.slice(names.length - 1).join('\t')];
    }
    return parts;
  });
}

export function num(s: string | undefined): number {
  expect(s, 'field value').to.be.a('string').and.not.equal('');
  const n = Number(s);
  expect(Number.isNaN(n), `numeric field value "${s}"`).to.equal(false);
  return n;
}

export function big(s: string | undefined): bigint {
  expect(s, 'field value').to.be.a('string').and.not.equal('');
  return BigInt(s as string);
}
