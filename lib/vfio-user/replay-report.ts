// The JSON documents `ernic-vfu replay|compare|show --json` print, for CI: one
// document per run, the same facts as the human output with every value in a
// field of its own. docs/replay.md describes them.

import { errnoName, HeaderFlag } from '../../protocol/constants';
import { captureDecode } from './capture-text';
import type { CompareResult } from './compare';
import type { CapturedMessage } from './pcapng';
import type { ReplayAllowance, ReplayDifference, ReplayResult } from './replay';

type Verdict = 'same' | 'different';

function verdictOf(differences: readonly unknown[]): Verdict {
  return differences.length ? 'different' : 'same';
}

function differenceJson(d: ReplayDifference): object {
  return { conn: d.conn, index: d.index, frame: d.frame, command: d.command, what: d.what, fields: d.fields };
}

function allowanceJson(a: ReplayAllowance): object {
  return { conn: a.conn, index: a.index, frame: a.frame, command: a.command, rule: a.rule };
}

export function replayJson(capture: string, conn: number, r: ReplayResult): object {
  return {
    command: 'replay',
    capture,
    conn,
    verdict: verdictOf(r.differences),
    counts: {
      sent: r.sent,
      skipped: r.skipped,
      compared: r.compared,
      identical: r.identical,
      allowed: r.allowed.length,
      different: r.differences.length,
    },
    differences: r.differences.map(differenceJson),
    allowed: r.allowed.map(allowanceJson),
  };
}

export function compareJson(reference: string, ours: string, conn: number, r: CompareResult): object {
  return {
    command: 'compare',
    reference,
    ours,
    conn,
    verdict: verdictOf(r.differences),
    counts: {
      compared: r.compared,
      identical: r.identical,
      allowed: r.allowed.length,
      different: r.differences.length,
    },
    differences: r.differences.map(differenceJson),
    allowed: r.allowed.map(allowanceJson),
  };
}

/** One message as `show --json` gives it; `seconds` counts from the capture's first message. */
function messageJson(m: CapturedMessage, t0Us: number): object {
  const c = m.comment;
  return {
    frame: m.frame,
    seconds: (m.timestampUs - t0Us) / 1e6,
    dir: c.dir,
    conn: c.conn,
    id: c.id,
    cmd: c.cmd,
    name: c.name,
    type: c.type,
    size: c.size,
    length: m.bytes.length,
    flags: c.flags,
    noReply: (c.flags & HeaderFlag.NO_REPLY) !== 0,
    error: c.error,
    errorName: c.error ? errnoName(c.error) : null,
    fds: c.fds,
    raw: c.raw === true,
    incomplete: c.incomplete === true,
    decode: captureDecode(c, m.bytes),
  };
}

export function showJson(capture: string, messages: readonly CapturedMessage[], t0Us: number): object {
  return { command: 'show', capture, count: messages.length, messages: messages.map((m) => messageJson(m, t0Us)) };
}
