// CPU time a process has used, for a benchmark to read before and after a
// timed loop and say where the time went. From /proc/PID/task/*/schedstat
// (nanoseconds on a CPU per thread; /proc/PID/stat's clock ticks of 10 ms
// are too coarse for a loop of a few hundred ms), falling back to the ticks
// where schedstat is missing. `mainThreadCpuMs` counts only the thread that
// runs the event loop (the rest: V8's GC and compiler workers, libuv's pool).
// A thread that ended between two reads takes its time with it.

import * as fs from 'fs';

function statMs(file: string): number {
  const f = fs.readFileSync(file, 'utf8').split(') ')[1]!.split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / 100;
}

function threadMs(pid: number, tid: string): number {
  try {
    return Number(fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]) / 1e6;
  } catch {
    return 0; // the thread ended
  }
}

export function cpuMs(pid: number): number {
  let tids: string[];
  try {
    tids = fs.readdirSync(`/proc/${pid}/task`);
    if (!fs.existsSync(`/proc/${pid}/task/${pid}/schedstat`)) return statMs(`/proc/${pid}/stat`);
  } catch {
    return statMs(`/proc/${pid}/stat`);
  }
  let ms = 0;
  for (const t of tids) ms += threadMs(pid, t);
  return ms;
}

export function mainThreadCpuMs(pid: number): number {
  const file = `/proc/${pid}/task/${pid}/schedstat`;
  return fs.existsSync(file) ? threadMs(pid, String(pid)) : statMs(`/proc/${pid}/task/${pid}/stat`);
}
