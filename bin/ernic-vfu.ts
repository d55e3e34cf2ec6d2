#!/usr/bin/env node
// ernic-vfu: tools for vfio-user sessions. record (a recording proxy), replay
// (play a capture's client side against a server and compare the replies),
// compare (two captures), show (a readable listing). The capture format is
// fixtures/vfio-user/FORMAT.md; what may differ and the exit statuses are in
// docs/replay.md.

import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { conventions, intCoerce } from '../lib/cli/options';
import { createLogger } from '../lib/log';
import { formatCaptureLine } from '../lib/vfio-user/capture-text';
import { CapturedMessage, readCapture } from '../lib/vfio-user/pcapng';
import { Recorder } from '../lib/vfio-user/recorder';
import { compareCaptures } from '../lib/vfio-user/compare';
import { parseCommandNames, REPLAY_RULES, replay, ReplayAllowance, ReplayDifference } from '../lib/vfio-user/replay';
import { compareJson, replayJson, showJson } from '../lib/vfio-user/replay-report';
import { SpawnedServer } from '../lib/vfio-user/replay-spawn';

const NAME = 'ernic-vfu';
/** Exit statuses (also in --help and docs/replay.md). */
const SAME = 0;
const DIFFERENT = 1;
const CANNOT_RUN = 2;
/** How long a spawned server has to create its socket. */
const SPAWN_WAIT_MS = 10_000;
/** Connection indexes: the capture writer gives each connection a TCP port from 40000. */
const MAX_CONN = 0xffff;
/** Longest wait for one reply: an hour; a server slower than that is stuck. */
const MAX_TIMEOUT_MS = 3_600_000;

const EXIT_STATUS = [
  'Exit status:',
  '  0  no difference (each reply identical, or different only as a rule allows)',
  '  1  differences found (replay, compare)',
  '  2  bad usage, or could not run: unreadable capture, no such --conn in it,',
  '     cannot connect, the spawned server did not start',
  'On SIGINT or SIGTERM a spawned server is stopped first, then ernic-vfu ends',
  'by that signal.',
].join('\n');

/** Could not run: the message is printed and the status returned. */
class Failure extends Error {
  constructor(
    message: string,
    readonly status = CANNOT_RUN,
  ) {
    super(message);
  }
}

function load(file: string): CapturedMessage[] {
  try {
    return readCapture(file);
  } catch (e) {
    throw new Failure(`${file}: ${(e as Error).message}`);
  }
}

/** Refuses a connection the capture does not have: replaying or comparing nothing is no verdict. */
function checkConn(file: string, messages: readonly CapturedMessage[], conn: number): void {
  const have = [...new Set(messages.map((m) => m.comment.conn))].sort((a, b) => a - b);
  if (!have.includes(conn))
    throw new Failure(`${file}: no connection ${conn} (it has ${have.length ? have.join(', ') : 'no messages'})`);
}

/** Writes to stdout and resolves once written (or refused), so that exiting next loses nothing. */
function out(text: string): Promise<void> {
  return new Promise((resolve) => {
    process.stdout.write(text.endsWith('\n') ? text : `${text}\n`, () => resolve());
  });
}

// A reader that stops early (`| head`) is not our failure: the status stays the verdict's.
process.stdout.on('error', (e: NodeJS.ErrnoException) => {
  if (e.code === 'EPIPE') return;
  console.error(`${NAME}: stdout: ${e.message}`);
  process.exit(CANNOT_RUN);
});

async function cmdRecord(a: { listen: string; connect: string; out: string; once: boolean }): Promise<number> {
  const rec = new Recorder({
    listenPath: a.listen,
    connectPath: a.connect,
    outPath: a.out,
    once: a.once,
    log: createLogger({ level: 'info' }),
  });
  try {
    await rec.listen();
  } catch (e) {
    throw new Failure(`cannot listen on ${a.listen}: ${(e as Error).message}`);
  }
  console.error(
    `recording: clients connect to ${a.listen}, forwarded to ${a.connect}, capture in ${a.out}${a.once ? ' (one connection)' : ' (Ctrl-C to stop)'}`,
  );
  const stop = (): void => {
    rec.close();
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  await rec.finished();
  console.error(`recorded ${rec.messages} messages to ${a.out}`);
  return SAME;
}

interface ReplayArgs {
  capture: string;
  connect?: string;
  spawn?: string;
  only?: ReadonlySet<string>;
  conn: number;
  timeout: number;
  json: boolean;
}

async function cmdReplay(a: ReplayArgs): Promise<number> {
  const messages = load(a.capture);
  checkConn(a.capture, messages, a.conn);
  let socket = a.connect;
  let starting: Promise<SpawnedServer> | null = null;
  let tempDir: string | null = null;
  let cleaning: Promise<void> | null = null;
  // Once: after the replay, on a signal, on a failure, whichever comes first.
  const cleanup = (): Promise<void> =>
    (cleaning ??= (async () => {
      // A signal may come while the server is being started: wait for it, to stop it.
      const server = starting ? await starting.catch(() => null) : null;
      if (server && !(await server.stop()))
        console.error(
          `${NAME}: warning: processes of the spawned server (group ${server.pgid}) still run after SIGKILL`,
        );
      if (tempDir) await fs.promises.rm(tempDir, { recursive: true, force: true });
    })());
  // The server runs in its own process group, out of reach of the terminal's Ctrl-C: stop it ourselves, then end as signalled.
  const onSignal = (signal: NodeJS.Signals): void => {
    void cleanup().finally(() => {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      process.kill(process.pid, signal);
    });
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    if (a.spawn) {
      // The socket's appearing is how we learn the server is up: a file already there would say so too early.
      if (
        socket &&
        (await fs.promises.lstat(socket).then(
          () => true,
          () => false,
        ))
      ) {
        throw new Failure(
          `--connect ${socket} exists already; with --spawn it must be the new server's (remove it, or leave out --connect)`,
        );
      }
      if (!socket) {
        tempDir = await fs.promises.mkdtemp(path.join(os.tmpdir(), `${NAME}-`));
        socket = path.join(tempDir, 'replay.sock');
      }
      const cmd = a.spawn.includes('{socket}') ? a.spawn.replaceAll('{socket}', socket) : `${a.spawn} ${socket}`;
      // Cleaning up already (a signal came meanwhile): start nothing it would miss.
      if (cleaning) {
        if (tempDir) await fs.promises.rm(tempDir, { recursive: true, force: true });
        throw new Failure('interrupted before the server was started');
      }
      try {
        starting = SpawnedServer.start(cmd);
        await (await starting).waitForSocket(socket, SPAWN_WAIT_MS);
      } catch (e) {
        throw new Failure((e as Error).message);
      }
    }
    let r;
    try {
      r = await replay(messages, socket!, {
        conn: a.conn,
        timeoutMs: a.timeout,
        ...(a.only ? { only: [...a.only] } : {}),
      });
    } catch (e) {
      throw new Failure(`replay against ${socket}: ${(e as Error).message}`);
    }
    await cleanup();
    if (a.json) {
      await out(JSON.stringify(replayJson(a.capture, a.conn, r), null, 2));
    } else {
      await out(
        outcomeLines(r.differences, r.allowed) +
          `replayed ${r.sent} commands${r.skipped ? ` (${r.skipped} filtered out)` : ''}: ${r.compared} replies compared, ${r.identical} identical, ${r.allowed.length} allowed by rules, ${r.differences.length} different`,
      );
    }
    return r.differences.length ? DIFFERENT : SAME;
  } finally {
    await cleanup();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

function outcomeLines(differences: readonly ReplayDifference[], allowed: readonly ReplayAllowance[]): string {
  let s = '';
  for (const d of differences) s += `DIFF frame ${d.frame} ${d.command}: ${d.what}\n`;
  const byRule = new Map<string, number[]>();
  for (const x of allowed) byRule.set(x.rule, [...(byRule.get(x.rule) ?? []), x.frame]);
  for (const [rule, frames] of byRule)
    s += `allowed by rule ${rule}: ${frames.length} (frames ${frames.slice(0, 8).join(', ')}${frames.length > 8 ? ', ...' : ''})\n`;
  return s;
}

async function cmdCompare(a: { reference: string; ours: string; conn: number; json: boolean }): Promise<number> {
  const reference = load(a.reference);
  const ours = load(a.ours);
  checkConn(a.reference, reference, a.conn);
  checkConn(a.ours, ours, a.conn);
  const r = compareCaptures(reference, ours, a.conn);
  if (a.json) await out(JSON.stringify(compareJson(a.reference, a.ours, a.conn, r), null, 2));
  else
    await out(
      outcomeLines(r.differences, r.allowed) +
        `compared ${r.compared} messages: ${r.identical} identical, ${r.allowed.length} allowed by rules, ${r.differences.length} different`,
    );
  return r.differences.length ? DIFFERENT : SAME;
}

async function cmdShow(a: {
  capture: string;
  conn?: number;
  command?: ReadonlySet<string>;
  json: boolean;
}): Promise<number> {
  const messages = load(a.capture);
  if (a.conn !== undefined) checkConn(a.capture, messages, a.conn);
  const t0 = messages[0]?.timestampUs ?? 0;
  const names = a.command;
  const shown = messages.filter(
    (m) => (a.conn === undefined || m.comment.conn === a.conn) && (!names || names.has(m.comment.name)),
  );
  if (a.json) await out(JSON.stringify(showJson(a.capture, shown, t0), null, 2));
  else if (shown.length)
    await out(shown.map((m) => formatCaptureLine(m.frame, (m.timestampUs - t0) / 1e6, m.comment, m.bytes)).join('\n'));
  return SAME;
}

const connOption = (describe: string) =>
  ({ type: 'string', coerce: intCoerce('conn', 0, MAX_CONN, 'a connection index'), describe }) as const;
const jsonOption = (describe: string) => ({ type: 'boolean', default: false, describe }) as const;

async function main(): Promise<number> {
  const rules = REPLAY_RULES.map((r) => `  ${r.name}:\n    ${r.description}`).join('\n');
  let run: (() => Promise<number>) | null = null;
  await conventions(yargs(hideBin(process.argv)), NAME)
    .scriptName(NAME)
    .usage(
      '$0 <command>\n\nRecord, replay and read vfio-user sessions (captures: pcapng, fixtures/vfio-user/FORMAT.md).',
    )
    .command(
      'record',
      'proxy between a client and a server, recording every message',
      (y) =>
        y
          .option('listen', { type: 'string', demandOption: true, describe: 'socket the client (QEMU) connects to' })
          .option('connect', { type: 'string', demandOption: true, describe: 'socket of the real server' })
          .option('out', {
            type: 'string',
            demandOption: true,
            describe: 'capture file (.pcapng); a .txt listing is written beside it',
          })
          .option('once', { type: 'boolean', default: false, describe: 'stop when the first connection ends' })
          .epilog(
            [
              'Example (then point QEMU at /tmp/a.sock):',
              '  $0 record --listen /tmp/a.sock --connect /tmp/server.sock \\',
              '    --out boot.pcapng --once',
              '',
              'Exit status: 0 recorded, 2 bad usage or cannot listen.',
            ].join('\n'),
          ),
      (a) => {
        run = () => cmdRecord(a);
      },
    )
    .command(
      'replay <capture>',
      'play the client side of a capture against a server and compare replies',
      (y) =>
        y
          .positional('capture', { type: 'string', demandOption: true, describe: 'capture file (.pcapng)' })
          .option('connect', { type: 'string', describe: 'socket of a running server' })
          .option('spawn', {
            type: 'string',
            describe:
              'start this server first, in a process group of its own (ended with the replay); {socket} in it is replaced by a socket path (else appended)',
          })
          .option('only', {
            type: 'string',
            coerce: (t: unknown) => parseCommandNames('only', t, ['errors']),
            describe:
              'comma-separated commands to replay (VERSION,DMA_MAP,...), plus "errors" for commands whose recorded reply is an error',
          })
          .option('conn', { ...connOption('which connection of the capture'), default: '0', defaultDescription: '0' })
          .option('timeout', {
            type: 'string',
            default: '5000',
            defaultDescription: '5000',
            coerce: intCoerce('timeout', 1, MAX_TIMEOUT_MS, 'milliseconds'),
            describe: 'ms to wait for each reply',
          })
          .option('json', jsonOption('print one JSON document (verdict, counts, each difference) instead of text'))
          .check((a) => {
            if (a.connect === undefined && a.spawn === undefined)
              throw new Error('replay needs --connect SOCKET or --spawn COMMAND');
            if (a.spawn !== undefined && !a.spawn.trim()) throw new Error('--spawn: expected a command');
            return true;
          })
          .epilog(
            [
              'Examples:',
              "  Replay QEMU's boot against the example device:",
              '    $0 replay fixtures/vfio-user/qemu-boot-lvu-gpio.pcapng \\',
              '      --spawn "npm run -s example:idio16 -- --socket {socket}"',
              '  Replay a capture against the NIC, for CI:',
              '    $0 replay boot.pcapng --json \\',
              '      --spawn "npm run -s start -- --socket {socket}"',
              '',
              'A reply matches when its bytes are identical, or when a documented rule',
              'allows the difference (docs/replay.md):',
              rules,
              '',
              EXIT_STATUS,
            ].join('\n'),
          ),
      (a) => {
        run = () => cmdReplay(a as ReplayArgs);
      },
    )
    .command(
      'compare <reference> <ours>',
      'compare two captures of the same guest steps, message by message',
      (y) =>
        y
          .positional('reference', { type: 'string', demandOption: true, describe: 'capture of the reference server' })
          .positional('ours', { type: 'string', demandOption: true, describe: 'capture to hold against it' })
          .option('conn', { ...connOption('which connection of each capture'), default: '0', defaultDescription: '0' })
          .option('json', jsonOption('print one JSON document (verdict, counts, each difference) instead of text'))
          .epilog(EXIT_STATUS),
      (a) => {
        run = () => cmdCompare(a as { reference: string; ours: string; conn: number; json: boolean });
      },
    )
    .command(
      'show <capture>',
      'print one line per message with a short decode',
      (y) =>
        y
          .positional('capture', { type: 'string', demandOption: true, describe: 'capture file (.pcapng)' })
          .option('conn', connOption('only this connection'))
          .option('command', {
            type: 'string',
            coerce: (t: unknown) => parseCommandNames('command', t),
            describe: 'only these commands (comma-separated names: VERSION,DMA_MAP,...)',
          })
          .option('json', jsonOption('print one JSON document with the messages instead of text'))
          .epilog('Exit status: 0 listed, 2 bad usage or unreadable capture.'),
      (a) => {
        run = () => cmdShow(a as { capture: string; conn?: number; command?: ReadonlySet<string>; json: boolean });
      },
    )
    .demandCommand(1, 'name a command: record, replay, compare or show')
    .epilog(EXIT_STATUS)
    .parseAsync();
  // yargs only parses; the command runs here so that its status and its clean-up are ours.
  const r = run as (() => Promise<number>) | null;
  return r ? r() : CANNOT_RUN;
}

main().then(
  (status) => process.exit(status),
  (e: unknown) => {
    console.error(`${NAME}: ${e instanceof Error ? e.message : String(e)}`);
    process.exit(e instanceof Failure ? e.status : CANNOT_RUN);
  },
);
