// Replay: play the client side of a recorded session against a server and
// compare every reply with the recorded one.
//
// Each recorded client command is sent in order, with fresh descriptors
// standing in for the recorded ones (one fresh memfd per recorded memfd
// identity, so QEMU's repeated maps of its guest RAM still share one file; an
// eventfd per eventfd). When the recording has a reply, we wait for ours and
// compare: identical bytes, or a difference that a documented rule allows
// (REPLAY_RULES; docs/replay.md explains each). Anything else is a difference.

import * as fs from 'fs';
import { Command, commandName, HeaderFlag } from '../../protocol/constants';
import {
  Field,
  getField,
  setField,
  U64_UNSAFE,
  vfio_user_header,
  vfio_user_region_access,
} from '../../protocol/layouts';
import { PCI_NUM_BARS, PciHeader } from './pci-registers';
import { PciRegionIndex } from './device';
import { decodeMessage } from '../../protocol/parser';
import { checkVersionReply, parseCapabilities } from '../../protocol/version';
import * as native from '../native';
import type { CapturedFd, CapturedMessage } from './pcapng';
import { RawHeader, Transport, TransportHandler } from './transport';

interface ReplayOptions {
  /** Connection index in the capture (default 0). */
  readonly conn?: number;
  /**
   * Which recorded commands to replay: command names (VERSION, DMA_MAP, ...) and
   * the word `errors` (commands whose recorded reply is an error). Default: all.
   */
  readonly only?: readonly string[];
  /** How long to wait for each reply (ms). */
  readonly timeoutMs?: number;
}

/** One field of a message that differs: a header field, `payload` (first differing bytes), `fds`, `reply`, ... */
interface FieldDifference {
  readonly field: string;
  /** For `payload`: offset of the first differing byte in the payload (after the header). */
  readonly offset?: number;
  readonly expected: number | string | null;
  readonly actual: number | string | null;
}

export interface ReplayDifference {
  /** Frame of the message in the capture (Wireshark numbering); 0 when it is about the capture as a whole. */
  readonly frame: number;
  readonly conn: number;
  /** Index of that message among its connection's messages (from 0); null when it is about the capture as a whole. */
  readonly index: number | null;
  readonly command: string;
  /** One line for people. */
  readonly what: string;
  /** What differed, field by field, for programs (ernic-vfu --json). */
  readonly fields: readonly FieldDifference[];
}

export interface ReplayAllowance {
  readonly frame: number;
  readonly conn: number;
  readonly index: number | null;
  readonly command: string;
  readonly rule: string;
}

/** The command names a capture may carry (protocol/constants), in command-number order. */
function knownCommandNames(): string[] {
  const out: string[] = [];
  // commandName answers `CMDnn` for a number it does not know; commands are u16 but the known ones are few and low.
  for (let c = 1; c < 256; c++) if (commandName(c) !== `CMD${c}`) out.push(commandName(c));
  return out;
}

/**
 * Parses a comma-separated list of command names typed by a user (case does not
 * matter), plus the `extra` words given; throws a one-line message naming the
 * option, the unknown names and the known ones. A Set, not an array: yargs
 * would take an array for an option given twice.
 */
export function parseCommandNames(option: string, text: unknown, extra: readonly string[] = []): ReadonlySet<string> {
  if (Array.isArray(text)) throw new Error(`--${option} given more than once (it takes one value)`);
  const s = String(text);
  const known = knownCommandNames();
  const words = new Set(extra.map((w) => w.toUpperCase()));
  const names = s
    .split(',')
    .map((n) => n.trim().toUpperCase())
    .filter(Boolean);
  const list = `known: ${[...known, ...extra].join(', ')}`;
  if (names.length === 0) throw new Error(`--${option} ${s}: expected comma-separated command names; ${list}`);
  // CMDnn: how a capture names a command number protocol/constants does not know.
  const unknown = names.filter((n) => !known.includes(n) && !words.has(n) && !isNumberedCommand(n));
  if (unknown.length)
    throw new Error(`--${option} ${s}: unknown command${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')}; ${list}`);
  return new Set(names);
}

/** `CMDnn`: how a capture names a command number protocol/constants does not know (a u16). */
function isNumberedCommand(name: string): boolean {
  const m = /^CMD(\d{1,5})$/.exec(name);
  return m !== null && Number(m[1]) <= 0xffff;
}

export interface ReplayResult {
  readonly sent: number;
  readonly compared: number;
  readonly identical: number;
  readonly allowed: readonly ReplayAllowance[];
  readonly differences: readonly ReplayDifference[];
  readonly skipped: number;
}

/** A rule that excuses a difference between a recorded and a live reply. */
interface ReplayRule {
  readonly name: string;
  readonly description: string;
  /** Returns true when the two replies differ only in what this rule allows. */
  allows(request: Buffer, recorded: Buffer, live: Buffer): boolean;
}
/** Bit 0 of a BAR register: I/O space (PCI_BASE_ADDRESS_SPACE_IO). */
const BAR_IO_SPACE_BIT = 0x1;
const BAR_REGISTER = PciHeader.BASE_ADDRESS_0;

function cmdOf(b: Buffer): number {
  return getField(b, 0, vfio_user_header.command);
}

/** A field of the payload struct (after the header). */
function payloadField(b: Buffer, field: Field): number {
  return getField(b, vfio_user_header.SIZE, field);
}

/** The documented rules (docs/replay.md). Each is narrow: one command, named fields. */
export const REPLAY_RULES: readonly ReplayRule[] = [
  {
    name: 'version-capabilities',
    description:
      "VERSION reply: the capabilities JSON is the server's own (limits, migration, spacing). " +
      'Both must be valid replies to the same proposal: same major, minor not above the proposal, capabilities that parse.',
    allows(request, recorded, live) {
      if (cmdOf(request) !== Command.VERSION) return false;
      const req = decodeMessage(request);
      const a = decodeMessage(recorded);
      const b = decodeMessage(live);
      if (!req.ok || !a.ok || !b.ok) return false;
      if (
        req.value.body.kind !== 'version' ||
        a.value.body.kind !== 'versionReply' ||
        b.value.body.kind !== 'versionReply'
      )
        return false;
      const p = req.value.body;
      return (
        checkVersionReply(p.major, p.minor, a.value.body.major, a.value.body.minor) === null &&
        checkVersionReply(p.major, p.minor, b.value.body.major, b.value.body.minor) === null &&
        parseCapabilities(b.value.body.json).ok
      );
    },
  },
  {
    name: 'unimplemented-bar-registers',
    description:
      'Config-space REGION_READ reply: libvfio-user reads the I/O-space bit (0x1) in BAR registers of ' +
      'BARs that do not exist; the PCI spec (and we) read them as 0. Only bit 0 of such BAR dwords may differ.',
    allows(request, recorded, live) {
      const data = vfio_user_header.SIZE + vfio_user_region_access.SIZE;
      if (cmdOf(request) !== Command.REGION_READ || recorded.length !== live.length || recorded.length < data)
        return false;
      if (request.length < data || payloadField(request, vfio_user_region_access.region) !== PciRegionIndex.CONFIG)
        return false;
      const offset = payloadField(request, vfio_user_region_access.offset);
      if (offset === U64_UNSAFE) return false;
      const ranges: [number, number][] = [];
      for (let bar = 0; bar < PCI_NUM_BARS; bar++) {
        const at = data + BAR_REGISTER.offset + BAR_REGISTER.size * bar - offset;
        if (at < data || at + BAR_REGISTER.size > recorded.length) continue;
        const a = recorded.readUInt32LE(at);
        const b = live.readUInt32LE(at);
        if (a !== b && (a | b) !== BAR_IO_SPACE_BIT) return false;
        ranges.push([at, at + 1]);
      }
      return ranges.length > 0 && equalExcept(recorded, live, ranges);
    },
  },
];

function equalExcept(a: Buffer, b: Buffer, ranges: readonly [number, number][]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    if (a[i] === b[i]) continue;
    if (!ranges.some(([s, e]) => i >= s && i < e)) return false;
  }
  return true;
}

/** Creates fresh descriptors standing in for recorded ones; one per identity. */
class FdFactory {
  readonly #byKey = new Map<string, number>();

  get(d: CapturedFd): number {
    const key = d.kind === 'memfd' ? `memfd:${d.name}:${d.size}` : d.kind === 'file' ? `file:${d.path}:${d.size}` : '';
    if (key) {
      const have = this.#byKey.get(key);
      if (have !== undefined) return have;
    }
    let fd: number;
    switch (d.kind) {
      case 'memfd':
      case 'file':
        // A sparse sealed memfd of the recorded size: costs nothing until touched.
        fd = native.memfdCreate(d.kind === 'memfd' ? (d.name ?? 'replay') : 'replay-file', d.size ?? 4096, true);
        break;
      case 'eventfd':
        fd = native.eventfd(0, true);
        break;
      case 'socket': {
        const [a, b] = native.socketPair();
        fs.closeSync(b);
        fd = a;
        break;
      }
      default:
        fd = fs.openSync('/dev/null', 'r');
    }
    if (key) this.#byKey.set(key, fd);
    else this.#others.push(fd);
    return fd;
  }

  readonly #others: number[] = [];

  closeAll(): void {
    for (const fd of [...this.#byKey.values(), ...this.#others]) {
      try {
        fs.closeSync(fd);
      } catch {
        /* already closed */
      }
    }
    this.#byKey.clear();
    this.#others.length = 0;
  }
}

/** Receives the live server's messages; hands each reply to whoever waits for its id. */
class ReplySink implements TransportHandler {
  readonly waiting = new Map<number, (reply: Buffer, fds: number) => void>();
  closedReason: string | null = null;
  onClosed: (() => void) | null = null;
  message(h: RawHeader, payload: Buffer, fds: number[]): void {
    for (const fd of fds) {
      try {
        fs.closeSync(fd);
      } catch {
        /* ignore */
      }
    }
    if ((h.flags & HeaderFlag.TYPE_MASK) !== HeaderFlag.TYPE_REPLY) return;
    const w = this.waiting.get(h.id);
    if (!w) return;
    this.waiting.delete(h.id);
    const full = Buffer.alloc(vfio_user_header.SIZE + payload.length);
    setField(full, 0, vfio_user_header.msg_id, h.id);
    setField(full, 0, vfio_user_header.command, h.command);
    setField(full, 0, vfio_user_header.msg_size, h.size);
    setField(full, 0, vfio_user_header.flags, h.flags);
    setField(full, 0, vfio_user_header.error, h.error);
    payload.copy(full, vfio_user_header.SIZE);
    w(full, fds.length);
  }
  badHeader(): void {
    /* the transport closes; closed() reports it */
  }
  closed(reason: string): void {
    this.closedReason = reason;
    this.onClosed?.();
  }
}

/** Replay `messages` (one capture) against the server listening on `socketPath`. */
export async function replay(
  messages: readonly CapturedMessage[],
  socketPath: string,
  opts: ReplayOptions = {},
): Promise<ReplayResult> {
  const conn = opts.conn ?? 0;
  const timeoutMs = opts.timeoutMs ?? 5000;
  const only = opts.only?.map((s) => s.toUpperCase());
  const mine = messages.filter((m) => m.comment.conn === conn && !m.comment.raw && !m.comment.incomplete);
  // The recorded reply to each client command: the first s2c reply with its id after it.
  const replyOf = new Map<CapturedMessage, CapturedMessage>();
  for (let i = 0; i < mine.length; i++) {
    const m = mine[i]!;
    if (m.comment.dir !== 'c2s' || m.comment.type !== 'command' || m.comment.flags & HeaderFlag.NO_REPLY) continue;
    const r = mine
      .slice(i + 1)
      .find(
        (x) =>
          x.comment.dir === 's2c' &&
          x.comment.type === 'reply' &&
          x.comment.id === m.comment.id &&
          x.comment.cmd === m.comment.cmd,
      );
    if (r) replyOf.set(m, r);
  }

  // Where each message sits among its connection's messages: with the frame, how a report points at it.
  const indexOf = new Map<CapturedMessage, number>();
  messages.filter((m) => m.comment.conn === conn).forEach((m, i) => indexOf.set(m, i));
  const at = (m: CapturedMessage): { frame: number; conn: number; index: number | null } => ({
    frame: m.frame,
    conn,
    index: indexOf.get(m) ?? null,
  });

  const fds = new FdFactory();
  const sink = new ReplySink();
  const transport = new Transport(native.connect(socketPath), sink, {
    maxMessageSize: 64 << 20,
    maxFdsPerMessage: 253,
  });
  transport.start();
  const differences: ReplayDifference[] = [];
  const allowed: ReplayAllowance[] = [];
  let sent = 0,
    compared = 0,
    identical = 0,
    skipped = 0;
  try {
    for (const m of mine) {
      if (m.comment.dir !== 'c2s' || m.comment.type !== 'command') continue;
      const name = m.comment.name;
      const rec = replyOf.get(m);
      const isError = rec ? (rec.comment.flags & HeaderFlag.ERROR) !== 0 : false;
      if (only && !only.includes(name) && !(isError && only.includes('ERRORS'))) {
        skipped++;
        continue;
      }
      const sendFds = m.comment.fds.map((d) => fds.get(d));
      const waiter = rec ? waitReply(sink, m.comment.id, timeoutMs) : null;
      transport.sendWithFds(m.bytes, sendFds);
      sent++;
      if (!waiter || !rec) continue;
      const got = await waiter;
      compared++;
      const command = commandName(m.comment.cmd ?? 0);
      if (got === null) {
        const closed = sink.closedReason;
        differences.push({
          ...at(m),
          command,
          what: closed ? `server closed the connection (${closed})` : `no reply within ${timeoutMs} ms`,
          fields: [{ field: 'reply', expected: 'reply', actual: closed ? 'connection closed' : 'timeout' }],
        });
        if (closed) break;
        continue;
      }
      if (got.fds !== rec.comment.fds.length) {
        differences.push({
          ...at(rec),
          command,
          what: `reply carries ${got.fds} fds, recorded ${rec.comment.fds.length}`,
          fields: [{ field: 'fds', expected: rec.comment.fds.length, actual: got.fds }],
        });
        continue;
      }
      if (got.reply.equals(rec.bytes)) {
        identical++;
        continue;
      }
      const rule = REPLAY_RULES.find((r) => r.allows(m.bytes, rec.bytes, got.reply));
      if (rule) allowed.push({ ...at(rec), command, rule: rule.name });
      else {
        const fields = differingFields(rec.bytes, got.reply);
        differences.push({ ...at(rec), command, what: describeFields(fields), fields });
      }
    }
  } finally {
    transport.close('replay finished');
    fds.closeAll();
  }
  return { sent, compared, identical, allowed, differences, skipped };
}

function waitReply(sink: ReplySink, id: number, timeoutMs: number): Promise<{ reply: Buffer; fds: number } | null> {
  return new Promise((resolve) => {
    const t = setTimeout(() => {
      sink.waiting.delete(id);
      resolve(null);
    }, timeoutMs);
    sink.onClosed = () => {
      clearTimeout(t);
      resolve(null);
    };
    sink.waiting.set(id, (reply, fds) => {
      clearTimeout(t);
      resolve({ reply, fds });
    });
  });
}

/** Bytes of a payload difference shown: enough to recognise a field, short enough for one line. */
const SHOWN_BYTES = 8;

/** How two messages differ: header fields first, then the first differing payload bytes, else the lengths. */
export function differingFields(recorded: Buffer, live: Buffer): FieldDifference[] {
  const out: FieldDifference[] = [];
  const fields: readonly [string, Field][] = [
    ['msg_size', vfio_user_header.msg_size],
    ['flags', vfio_user_header.flags],
    ['error', vfio_user_header.error],
  ];
  for (const [name, field] of fields) {
    const end = field.off + field.size;
    if (recorded.length >= end && live.length >= end && getField(recorded, 0, field) !== getField(live, 0, field)) {
      out.push({ field: name, expected: getField(recorded, 0, field), actual: getField(live, 0, field) });
    }
  }
  const n = Math.min(recorded.length, live.length);
  let first = -1;
  for (let i = vfio_user_header.SIZE; i < n; i++)
    if (recorded[i] !== live[i]) {
      first = i;
      break;
    }
  if (first >= 0) {
    const end = Math.min(n, first + SHOWN_BYTES);
    out.push({
      field: 'payload',
      offset: first - vfio_user_header.SIZE,
      expected: recorded.subarray(first, end).toString('hex'),
      actual: live.subarray(first, end).toString('hex'),
    });
  }
  if (out.length === 0) out.push({ field: 'length', expected: recorded.length, actual: live.length });
  return out;
}

/** The one-line text of `differingFields`. */
export function describeFields(fields: readonly FieldDifference[]): string {
  return fields
    .map((f) => {
      if (f.field === 'payload') return `payload byte ${f.offset}: recorded ${f.expected}, got ${f.actual}`;
      if (f.field === 'length') return `lengths ${f.expected} vs ${f.actual}`;
      return `${f.field} recorded ${f.expected}, got ${f.actual}`;
    })
    .join('; ');
}
