// V8 settings for a process that answers MMIO (see docs/latency.md). A vCPU
// waits on every region read, so the server must not lose its compiled code
// while it waits for work:
//
// --no-memory-reducer-for-small-heaps: V8's memory reducer would otherwise
//   collect a small heap that grew while loading (ours) some 8 s after
//   start, with mark-compacts in "reduce memory" mode (3-5 ms each) that also
//   throw away the code the warm-up optimized; the next client's first few
//   thousand accesses then stall for JIT again (1-4 ms pauses, measured).
//   Only applies if set before the heap has grown: import this module first.
// --no-flush-bytecode: after a few full GCs in which a function did not run,
//   V8 drops its bytecode, and its optimized code with it; a guest that does
//   no MMIO for a while must not pay the warm-up again.
//
// Both are read by V8 when it collects, so setting them at run time works
// (unlike heap sizes, which are fixed when the isolate is made). Imported for
// its effect by bin/rocm-ernic.ts and bench/support/bench-server.ts, as their
// first import.

import * as v8 from 'v8';

const LATENCY_V8_FLAGS: readonly string[] = ['--no-memory-reducer-for-small-heaps', '--no-flush-bytecode'];

for (const flag of LATENCY_V8_FLAGS) v8.setFlagsFromString(flag);
