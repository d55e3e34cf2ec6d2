// CPU time a process has used (user + system), from /proc in clock ticks of
// 10 ms: what a benchmark reads before and after a timed loop to say where
// the time went. `mainThreadCpuMs` counts only the thread that runs the
// event loop (the rest: V8's GC and compiler workers, libuv's pool).

import * as fs from 'fs';

function statMs(file: string): number {
  const f = fs.readFileSync(file, 'utf8').split(') ')[1]!.split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / 100;
}

export function cpuMs(pid: number): number {
  return statMs(`/proc/${pid}/stat`);
}

export function mainThreadCpuMs(pid: number): number {
  return statMs(`/proc/${pid}/task/${pid}/stat`);
}
