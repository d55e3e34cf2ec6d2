// Compare two recorded sessions message by message: the same client commands
// (bytes and fd kinds) and the same replies, where a reply may differ only as
// a replay rule allows (REPLAY_RULES). Used to hold a recording of our server
// against one of the reference implementation made with the same guest steps.

import { commandName } from '../../protocol/constants';
import type { CapturedMessage } from './pcapng';
import { describeFields, differingFields, REPLAY_RULES, ReplayAllowance, ReplayDifference } from './replay';

export interface CompareResult {
  readonly compared: number;
  readonly identical: number;
  readonly allowed: readonly ReplayAllowance[];
  readonly differences: readonly ReplayDifference[];
}

/**
 * Each direction is compared as its own sequence: how a client's pipelined
 * commands interleave with the replies in the file is timing, not behaviour.
 */
export function compareCaptures(
  reference: readonly CapturedMessage[],
  ours: readonly CapturedMessage[],
  conn = 0,
): CompareResult {
  const differences: ReplayDifference[] = [];
  const allowed: ReplayAllowance[] = [];
  let identical = 0;
  let compared = 0;
  // Reports point into OURS: the frame and the index among the connection's messages.
  const indexOf = new Map<CapturedMessage, number>();
  ours.filter((m) => m.comment.conn === conn).forEach((m, i) => indexOf.set(m, i));
  for (const dir of ['c2s', 's2c'] as const) {
    const a = reference.filter((m) => m.comment.conn === conn && m.comment.dir === dir);
    const b = ours.filter((m) => m.comment.conn === conn && m.comment.dir === dir);
    // The request each reference reply answers: the latest client command with its id before it.
    const reqFor = (reply: CapturedMessage): Buffer | undefined => {
      let best: Buffer | undefined;
      for (const m of reference) {
        if (m.frame >= reply.frame) break;
        if (
          m.comment.conn === conn &&
          m.comment.dir !== reply.comment.dir &&
          m.comment.type === 'command' &&
          m.comment.id === reply.comment.id
        )
          best = m.bytes;
      }
      return best;
    };
    const n = Math.min(a.length, b.length);
    for (let i = 0; i < n; i++) {
      const x = a[i]!;
      const y = b[i]!;
      compared++;
      const command = commandName(x.comment.cmd ?? 0);
      const where = { frame: y.frame, conn, index: indexOf.get(y) ?? null, command };
      if (x.comment.type !== y.comment.type || x.comment.cmd !== y.comment.cmd) {
        differences.push({
          ...where,
          what: `${dir} message ${i}: reference ${x.comment.name} ${x.comment.type}, ours ${y.comment.name} ${y.comment.type}`,
          fields: [
            {
              field: 'message',
              expected: `${x.comment.name} ${x.comment.type}`,
              actual: `${y.comment.name} ${y.comment.type}`,
            },
          ],
        });
        break;
      }
      const kinds = (m: CapturedMessage): string => m.comment.fds.map((f) => f.kind).join(',');
      if (kinds(x) !== kinds(y)) {
        differences.push({
          ...where,
          what: `fds: reference [${kinds(x)}], ours [${kinds(y)}]`,
          fields: [{ field: 'fds', expected: kinds(x), actual: kinds(y) }],
        });
      }
      if (x.bytes.equals(y.bytes)) {
        identical++;
        continue;
      }
      const req = x.comment.type === 'reply' ? reqFor(x) : undefined;
      const rule = req ? REPLAY_RULES.find((r) => r.allows(req, x.bytes, y.bytes)) : undefined;
      if (rule) allowed.push({ ...where, rule: rule.name });
      else {
        const fields = differingFields(x.bytes, y.bytes);
        differences.push({ ...where, what: `${dir} ${x.comment.type}: ${describeFields(fields)}`, fields });
      }
    }
    if (a.length !== b.length) {
      differences.push({
        frame: 0,
        conn,
        index: null,
        command: '-',
        what: `${dir}: reference has ${a.length} messages, ours ${b.length}`,
        fields: [{ field: `${dir} messages`, expected: a.length, actual: b.length }],
      });
    }
  }
  return { compared, identical, allowed, differences };
}
