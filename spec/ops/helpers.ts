// Shared by the ops specs: promtool (skipped with a message when absent) and
// reading samples out of a Prometheus exposition.

import { spawnSync } from 'child_process';
import { skipBecause } from '../support/skip';

/** Whether promtool runs here (Debian: apt-get install prometheus). */
function havePromtool(): boolean {
  return spawnSync('promtool', ['--version'], { stdio: 'ignore' }).status === 0;
}

/** Skip the running test with a line saying why, when promtool is absent. */
export function needPromtool(ctx: Mocha.Context): void {
  if (havePromtool()) return;
  skipBecause(ctx, 'promtool not found (apt-get install prometheus)');
}

/** `promtool check metrics` on `text`: its exit status and its findings. */
export function promtoolCheck(text: string): { status: number | null; output: string } {
  const r = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8', timeout: 30000 });
  return { status: r.status, output: `${r.stdout}${r.stderr}`.trim() };
}

/**
 * The value of the sample `name{labels}` (labels as written in the exposition,
 * sorted or not: every given pair must be present), or undefined.
 */
export function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = new Map<string, string>();
    for (const p of (m[3] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) have.set(p[1]!, p[2]!);
    if (Object.entries(labels).every(([k, v]) => have.get(k) === v)) return Number(m[4]);
  }
  return undefined;
}

/** Every sample line of a family (its name, then `{` or a space). */
export function samples(text: string, name: string): string[] {
  return text.split('\n').filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `));
}
