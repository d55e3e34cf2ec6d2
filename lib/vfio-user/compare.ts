// Compare two recorded sessions message by message: the same client commands
// (bytes and fd kinds) and the same replies, where a reply may differ only as
// a replay rule allows (REPLAY_RULES). Used to hold a recording of our server
// against one of the reference implementation made with the same guest steps.

import { commandName } from '../../protocol/constants';
import type { CapturedMessage } from './pcapng';
import { describeDifference, REPLAY_RULES, ReplayAllowance, ReplayDifference } from './replay';

interface CompareResult {
  readonly compared: number;
  readonly identical: number;
  readonly allowed: readonly ReplayAllowance[];
  readonly differences: readonly ReplayDifference[];
}

/**
 * Each direction is compared as its own sequence: how a client's pipelined
 * commands interleave with the replies in the file is timing, not behaviour.
 */
export function compareCaptures(reference: readonly CapturedMessage[], ours: readonly CapturedMessage[], conn = 0): CompareResult {
  const differences: ReplayDifference[] = [];
  const allowed: ReplayAllowance[] = [];
  let identical = 0;
  let compared = 0;
  for (const dir of ['c2s', 's2c'] as const) {
    const a = reference.filter((m) => m.comment.conn === conn && m.comment.dir === dir);
    const b = ours.filter((m) => m.comment.conn === conn && m.comment.dir === dir);
    // The request each reference reply answers: the latest client command with its id before it.
    const reqFor = (reply: CapturedMessage): Buffer | undefined => {
      let best: Buffer | undefined;
      for (const m of reference) {
        if (m.frame >= reply.frame) break;
        if (m.comment.conn === conn && m.comment.dir !== reply.comment.dir && m.comment.type === 'command' && m.comment.id === reply.comment.id) best = m.bytes;
      }
      return best;
    };
    const n = Math.min(a.length, b.length);
    for (let i = 0; i < n; i++) {
      const x = a[i]!;
      const y = b[i]!;
      compared++;
      const command = commandName(x.comment.cmd ?? 0);
      if (x.comment.type !== y.comment.type || x.comment.cmd !== y.comment.cmd) {
        differences.push({ frame: y.frame, command, what: `${dir} message ${i}: reference ${x.comment.name} ${x.comment.type}, ours ${y.comment.name} ${y.comment.type}` });
        break;
      }
      const kinds = (m: CapturedMessage): string => m.comment.fds.map((f) => f.kind).join(',');
      if (kinds(x) !== kinds(y)) differences.push({ frame: y.frame, command, what: `fds: reference [${kinds(x)}], ours [${kinds(y)}]` });
      if (x.bytes.equals(y.bytes)) { identical++; continue; }
      const req = x.comment.type === 'reply' ? reqFor(x) : undefined;
      const rule = req ? REPLAY_RULES.find((r) => r.allows(req, x.bytes, y.bytes)) : undefined;
      if (rule) allowed.push({ frame: y.frame, command, rule: rule.name });
      else differences.push({ frame: y.frame, command, what: `${dir} ${x.comment.type}: ${describeDifference(x.bytes, y.bytes)}` });
    }
    if (a.length !== b.length) differences.push({ frame: 0, command: '-', what: `${dir}: reference has ${a.length} messages, ours ${b.length}` });
  }
  return { compared, identical, allowed, differences };
}
